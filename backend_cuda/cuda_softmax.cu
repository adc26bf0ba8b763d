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

/* y (rows, cols) = softmax or log_softmax of x (rows, cols) along each row. */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    softmax_kernel(bool logsm, int64_t rows, int64_t cols, int lanes,
                   const typename T::storage *x, typename T::storage *y)
{
    typedef typename T::compute C;
    __shared__ C shared_c[BLOCK / WARP];
    __shared__ double shared_d[BLOCK / WARP];
    const row_lane rl = row_of(lanes);
    const bool live = rl.row < rows; /* a warp past the last row still joins the combines */
    const typename T::storage *xr = x + (live ? rl.row : 0) * cols;
    C mx = -INFINITY;
    for (int64_t j = rl.lane; live && j < cols; j += lanes)
        mx = max_nan(mx, T::load(xr[j]));
    mx = row_combine(mx, op_max(), lanes, shared_c);
    double sum = 0;
    for (int64_t j = rl.lane; live && j < cols; j += lanes)
        sum += (double)m_exp(T::load(xr[j]) - mx);
    sum = row_combine(sum, op_add(), lanes, shared_d);
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
        softmax_kernel<T><<<blocks, BLOCK, 0, em_cuda_stream()>>>(log, rows, cols, lanes,
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
        softmax_grad_kernel<T><<<blocks, BLOCK, 0, em_cuda_stream()>>>(
            log, rows, cols, lanes, (const S *)gy, (const S *)y, (S *)gx);
    });
}
