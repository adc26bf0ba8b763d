/* CUDA softmax and log_softmax over the last dim of contiguous (rows, cols) data, and their
 * gradients, as backend_cpu/cpu_softmax_impl_internal.h computes them: the row's max subtracted,
 * exponentials summed in double, f16/bf16 computed in f32. A warp serves a short row, a block a
 * long one; lanes combine in fixed trees, so every run gives the same bits. */
#include "backend_cuda/cuda_math_internal.cuh"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

const int WARP = 32;
const int64_t WARP_ROW_MAX = 1024; /* rows up to this long get a warp each, longer a block */

/* The row maximum with NaN winning (the CPU's rule). */
template <class C> __device__ __forceinline__ C max_nan(C a, C b)
{
    return b > a || b != b ? b : a;
}

struct op_max {
    template <class V> __device__ V operator()(V a, V b) const { return max_nan(a, b); }
};
struct op_add {
    template <class V> __device__ V operator()(V a, V b) const { return a + b; }
};

/* v combined over the lanes serving one row (a warp, or the whole block when lanes is BLOCK):
 * a butterfly within the warp (partners add the same two values: every lane gets the same bits),
 * then the warps' results in warp order. Every thread of the block must call it. */
template <class V, class Op> __device__ V row_combine(V v, Op op, int lanes, V *shared)
{
    for (int m = WARP / 2; m > 0; m /= 2)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
    if (lanes == WARP)
        return v;
    const int warp = threadIdx.x / WARP;
    if (threadIdx.x % WARP == 0)
        shared[warp] = v;
    __syncthreads();
    V r = shared[0];
    for (int w = 1; w < BLOCK / WARP; w++)
        r = op(r, shared[w]);
    __syncthreads(); /* shared is reused by the next combine */
    return r;
}

/* The row this thread serves and its lane: a warp per row (lanes = WARP) or a block per row. */
struct row_lane {
    int64_t row;
    int lane;
};

__device__ __forceinline__ row_lane row_of(int lanes)
{
    row_lane r;
    if (lanes == WARP) {
        r.row = (int64_t)blockIdx.x * (BLOCK / WARP) + threadIdx.x / WARP;
        r.lane = threadIdx.x % WARP;
    } else {
        r.row = blockIdx.x;
        r.lane = threadIdx.x;
    }
    return r;
}

/* A row's max (*mx) and its sum of exp(x - max) in double (*sum), on every lane serving it; a
 * lane past the last row (live false) still joins the combines. */
template <class T>
__device__ __forceinline__ void row_max_sum(const typename T::storage *xr, int64_t cols,
                                            row_lane rl, int lanes, bool live,
                                            typename T::compute *mx, double *sum)
{
    typedef typename T::compute C;
    __shared__ C shared_c[BLOCK / WARP];
    __shared__ double shared_d[BLOCK / WARP];
    C m = -INFINITY;
    for (int64_t j = rl.lane; live && j < cols; j += lanes)
        m = max_nan(m, T::load(xr[j]));
    m = row_combine(m, op_max(), lanes, shared_c);
    double s = 0;
    for (int64_t j = rl.lane; live && j < cols; j += lanes)
        s += (double)m_exp(T::load(xr[j]) - m);
    *sum = row_combine(s, op_add(), lanes, shared_d);
    *mx = m;
}

/* y (rows, cols) = softmax or log_softmax of x (rows, cols) along each row. */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    softmax_kernel(bool logsm, int64_t rows, int64_t cols, int lanes,
                   const typename T::storage *x, typename T::storage *y)
{
    typedef typename T::compute C;
    const row_lane rl = row_of(lanes);
    const bool live = rl.row < rows;
    const typename T::storage *xr = x + (live ? rl.row : 0) * cols;
    C mx;
    double sum;
    row_max_sum<T>(xr, cols, rl, lanes, live, &mx, &sum);
    if (!live)
        return;
    typename T::storage *yr = y + rl.row * cols;
    if (logsm) {
        const C lse = m_log((C)sum);
        for (int64_t j = rl.lane; j < cols; j += lanes)
            yr[j] = T::store((T::load(xr[j]) - mx) - lse);
    } else {
        const C inv = (C)(1.0 / sum);
        for (int64_t j = rl.lane; j < cols; j += lanes)
            yr[j] = T::store(m_exp(T::load(xr[j]) - mx) * inv);
    }
}

/* gx (rows, cols) from gy and y (rows, cols): softmax: y * (gy - sum(gy * y)); log_softmax:
 * gy - exp(y) * sum(gy). */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    softmax_grad_kernel(bool logsm, int64_t rows, int64_t cols, int lanes,
                        const typename T::storage *gy, const typename T::storage *y,
                        typename T::storage *gx)
{
    typedef typename T::compute C;
    __shared__ double shared_d[BLOCK / WARP];
    const row_lane rl = row_of(lanes);
    const bool live = rl.row < rows;
    const int64_t base = (live ? rl.row : 0) * cols;
    double acc = 0;
    for (int64_t j = rl.lane; live && j < cols; j += lanes)
        acc += logsm ? (double)T::load(gy[base + j])
                     : (double)(T::load(gy[base + j]) * T::load(y[base + j]));
    acc = row_combine(acc, op_add(), lanes, shared_d);
    if (!live)
        return;
    const C sum = (C)acc;
    for (int64_t j = rl.lane; j < cols; j += lanes) {
        const C g = T::load(gy[base + j]), v = T::load(y[base + j]);
        gx[base + j] = T::store(logsm ? g - m_exp(v) * sum : v * (g - sum));
    }
}

/* loss (rows) = -log_softmax(x)[r][target[r]] as softmax_kernel computes it, stats (rows, 2) the
 * row's max and log-sum; a target outside [0, cols) raises the index flag (its loss NaN). */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    xent_kernel(int64_t rows, int64_t cols, int lanes, const typename T::storage *x,
                const int64_t *target, typename T::storage *loss, double *stats, int *flag)
{
    typedef typename T::compute C;
    const row_lane rl = row_of(lanes);
    const bool live = rl.row < rows;
    const typename T::storage *xr = x + (live ? rl.row : 0) * cols;
    C mx;
    double sum;
    row_max_sum<T>(xr, cols, rl, lanes, live, &mx, &sum);
    if (!live || rl.lane != 0)
        return;
    const C lse = m_log((C)sum);
    const int64_t t = target[rl.row];
    stats[2 * rl.row] = (double)mx;
    stats[2 * rl.row + 1] = (double)lse;
    if (t < 0 || t >= cols) {
        atomicCAS(flag, 0, EM_CUDA_CROSS_ENTROPY);
        loss[rl.row] = T::store((C)NAN);
        return;
    }
    loss[rl.row] = T::store(-((T::load(xr[t]) - mx) - lse));
}

/* gx (rows, cols): the gradient of xent_kernel's losses given g (rows), as the CPU computes it:
 * (j == target ? s : 0) - exp(log_softmax) * s with s = -g[r]. One thread per element. */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    xent_grad_kernel(int64_t rows, int64_t cols, const typename T::storage *x,
                     const int64_t *target, const double *stats, const typename T::storage *g,
                     typename T::storage *gx)
{
    typedef typename T::compute C;
    const int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const int64_t r = i / cols, j = i % cols;
        const C s = -T::load(g[r]);
        const C lp = (T::load(x[i]) - (C)stats[2 * r]) - (C)stats[2 * r + 1];
        gx[i] = T::store((j == target[r] ? s : (C)0) - m_exp(lp) * s);
    }
}

/* launch(tag, lanes, blocks) for rows of cols elements of float dtype dt: a warp per row up to
 * WARP_ROW_MAX elements, else a block; nothing to launch for an empty matrix. */
template <class F> int run_rows(em_dtype dt, int64_t rows, int64_t cols, F launch)
{
    if (rows < 0 || cols < 0 || (rows + BLOCK / WARP - 1) / (BLOCK / WARP) >= (1u << 31))
        return EM_KERNEL_UNSUPPORTED;
    const int lanes = cols <= WARP_ROW_MAX ? WARP : BLOCK;
    const int64_t per_block = lanes == WARP ? BLOCK / WARP : 1;
    const unsigned blocks = (unsigned)((rows + per_block - 1) / per_block);
    return dispatch_float(dt, [&](auto tag) {
        if (rows == 0 || cols == 0)
            return (int)EM_KERNEL_OK;
        launch(tag, lanes, blocks);
        return em_cuda_launch_status();
    });
}

} // namespace

/* y (rows, cols) = softmax or log_softmax of x (rows, cols), f32, f64, f16 or bf16 */
extern "C" int em_cuda_softmax(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *x,
                               void *y)
{
    return run_rows(dt, rows, cols, [&](auto tag, int lanes, unsigned blocks) {
        typedef decltype(tag) T;
        typedef typename T::storage S;
        softmax_kernel<T><<<blocks, BLOCK, 0, em_cuda_launch_stream()>>>(log, rows, cols, lanes,
                                                                  (const S *)x, (S *)y);
    });
}

/* gx (rows, cols) from gy and y (rows, cols), the softmax's output */
extern "C" int em_cuda_softmax_grad(em_dtype dt, bool log, int64_t rows, int64_t cols,
                                    const void *gy, const void *y, void *gx)
{
    return run_rows(dt, rows, cols, [&](auto tag, int lanes, unsigned blocks) {
        typedef decltype(tag) T;
        typedef typename T::storage S;
        softmax_grad_kernel<T><<<blocks, BLOCK, 0, em_cuda_launch_stream()>>>(
            log, rows, cols, lanes, (const S *)gy, (const S *)y, (S *)gx);
    });
}

/* loss (rows) and stats (rows, 2) of f32 or f64 logits x (rows, cols) against target (rows) */
extern "C" int em_cuda_cross_entropy(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                                     const int64_t *target, void *loss, double *stats)
{
    int *flag = em_cuda_index_flag();
    if (dt != EM_F32 && dt != EM_F64)
        return EM_KERNEL_UNSUPPORTED;
    if (!flag)
        return EM_KERNEL_FAILED;
    return run_rows(dt, rows, cols, [&](auto tag, int lanes, unsigned blocks) {
        typedef decltype(tag) T;
        typedef typename T::storage S;
        xent_kernel<T><<<blocks, BLOCK, 0, em_cuda_launch_stream()>>>(
            rows, cols, lanes, (const S *)x, target, (S *)loss, stats, flag);
    });
}

/* gx (rows, cols) from em_cuda_cross_entropy's stats and the losses' gradient g (rows) */
extern "C" int em_cuda_cross_entropy_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                                          const int64_t *target, const double *stats,
                                          const void *g, void *gx)
{
    if (dt != EM_F32 && dt != EM_F64)
        return EM_KERNEL_UNSUPPORTED;
    return run_rows(dt, rows, cols, [&](auto tag, int, unsigned) {
        typedef decltype(tag) T;
        typedef typename T::storage S;
        xent_grad_kernel<T><<<grid_for(rows * cols, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
            rows, cols, (const S *)x, target, stats, (const S *)g, (S *)gx);
    });
}
