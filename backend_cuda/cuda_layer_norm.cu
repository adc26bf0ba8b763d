/* CUDA layer norm over the last dim of contiguous (rows, cols) data, f32 and f64, as
 * backend_cpu/cpu_layer_norm_impl_internal.h computes it: a row's mean and biased variance summed
 * in double, y = (x - mean) * rstd * w + b. One launch forward (a warp per row), three backward:
 * gx (a warp per row), then the weight and bias gradients as column sums over fixed chunks of
 * rows and the chunks added in order, so every run gives the same bits. */
#include "backend_cuda/cuda_real.cuh"

namespace {

const int WARP = 32;
const int ROWS_PER_BLOCK = 8;   /* warps of a row kernel's block, one row each */
const int COLS_PER_BLOCK = 32;  /* columns of a parameter-gradient block, one per thread in x */
const int64_t CHUNK_ROWS = 256; /* rows one parameter-gradient block sums, at least */

/* v summed over the warp by a butterfly: every lane gets the same bits. */
__device__ __forceinline__ double warp_sum(double v)
{
    for (int m = WARP / 2; m > 0; m /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

template <typename T>
__global__ void forward_kernel(int64_t rows, int64_t cols, const T *x, const T *w, const T *b,
                               double eps, T *y, double *stats)
{
    const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (r >= rows) /* a whole warp leaves together */
        return;
    const T *xr = x + r * cols; // (cols)
    T *yr = y + r * cols;       // (cols)
    double s = 0;
    for (int64_t j = lane; j < cols; j += WARP)
        s += (double)xr[j];
    const double mean = warp_sum(s) / (double)cols;
    double ss = 0;
    for (int64_t j = lane; j < cols; j += WARP) {
        const double d = (double)xr[j] - mean;
        ss += d * d;
    }
    const double rstd = 1.0 / sqrt(warp_sum(ss) / (double)cols + eps);
    const T m = (T)mean, rs = (T)rstd;
    for (int64_t j = lane; j < cols; j += WARP) {
        T v = (xr[j] - m) * rs;
        if (w)
            v *= w[j];
        if (b)
            v += b[j];
        yr[j] = v;
    }
    if (lane == 0) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
    }
}

/* gx of a row: rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gy * w. */
template <typename T>
__global__ void grad_input_kernel(int64_t rows, int64_t cols, const T *x, const T *w,
                                  const double *stats, const T *gy, T *gx)
{
    const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (r >= rows)
        return;
    const T *xr = x + r * cols, *gr = gy + r * cols; // (cols) each
    T *out = gx + r * cols;                           // (cols)
    const T m = (T)stats[2 * r], rs = (T)stats[2 * r + 1];
    double sg = 0, sgh = 0;
    for (int64_t j = lane; j < cols; j += WARP) {
        const T g = w ? gr[j] * w[j] : gr[j];
        sg += (double)g;
        sgh += (double)(g * ((xr[j] - m) * rs));
    }
    const T mg = (T)(warp_sum(sg) / (double)cols), mgh = (T)(warp_sum(sgh) / (double)cols);
    for (int64_t j = lane; j < cols; j += WARP) {
        const T g = w ? gr[j] * w[j] : gr[j];
        out[j] = rs * (g - mg - ((xr[j] - m) * rs) * mgh);
    }
}

/* The sums of gy * xhat and gy over chunk blockIdx.y's chunk_rows rows, for the block's columns:
 * part_w[chunk][col], part_b[chunk][col]. Threads (x, y) take column x and every
 * ROWS_PER_BLOCK-th row from y; the y partials are added in order. */
template <typename T>
__global__ void param_partials_kernel(int64_t rows, int64_t cols, int64_t chunk_rows,
                                      const T *x, const double *stats, const T *gy,
                                      double *part_w, double *part_b)
{
    __shared__ double sw[ROWS_PER_BLOCK][COLS_PER_BLOCK], sb[ROWS_PER_BLOCK][COLS_PER_BLOCK];
    const int64_t col = (int64_t)blockIdx.x * COLS_PER_BLOCK + threadIdx.x;
    const int64_t r0 = (int64_t)blockIdx.y * chunk_rows;
    const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    double aw = 0, ab = 0;
    for (int64_t r = r0 + threadIdx.y; col < cols && r < r1; r += ROWS_PER_BLOCK) {
        const T m = (T)stats[2 * r], rs = (T)stats[2 * r + 1];
        const T g = gy[r * cols + col];
        aw += (double)(g * ((x[r * cols + col] - m) * rs));
        ab += (double)g;
    }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y != 0 || col >= cols)
        return;
    for (int k = 1; k < ROWS_PER_BLOCK; k++) {
        aw += sw[k][threadIdx.x];
        ab += sb[k][threadIdx.x];
    }
    part_w[blockIdx.y * cols + col] = aw;
    part_b[blockIdx.y * cols + col] = ab;
}

/* gw, gb (cols) = the chunks' partials added in chunk order; either may be NULL */
template <typename T>
__global__ void param_total_kernel(int64_t cols, int64_t chunks, const double *part_w,
                                   const double *part_b, T *gw, T *gb)
{
    for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < cols;
         col += (int64_t)gridDim.x * blockDim.x) {
        double aw = 0, ab = 0;
        for (int64_t k = 0; k < chunks; k++) {
            aw += part_w[k * cols + col];
            ab += part_b[k * cols + col];
        }
        if (gw)
            gw[col] = (T)aw;
        if (gb)
            gb[col] = (T)ab;
    }
}

unsigned row_blocks(int64_t rows)
{
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

template <typename T>
int param_grads(int64_t rows, int64_t cols, const T *x, const double *stats, const T *gy, T *gw,
                T *gb)
{
    const int64_t max_chunks = 65535; /* grid.y */
    const int64_t least = (rows + max_chunks - 1) / max_chunks;
    const int64_t chunk_rows = least > CHUNK_ROWS ? least : CHUNK_ROWS;
    const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    const int64_t col_blocks = (cols + COLS_PER_BLOCK - 1) / COLS_PER_BLOCK;
    const size_t bytes = (size_t)(2 * chunks * cols) * sizeof(double);
    double *part = (double *)em_cuda_scratch(bytes);
    if (!part)
        return EM_KERNEL_FAILED;
    param_partials_kernel<T><<<dim3((unsigned)col_blocks, (unsigned)chunks),
                               dim3(COLS_PER_BLOCK, ROWS_PER_BLOCK), 0,
                               em_cuda_launch_stream()>>>(rows, cols, chunk_rows, x, stats, gy,
                                                          part, part + chunks * cols);
    param_total_kernel<T><<<grid_for(cols, 256), 256, 0, em_cuda_launch_stream()>>>(
        cols, chunks, part, part + chunks * cols, gw, gb);
    int rc = em_cuda_launch_status();
    em_cuda_scratch_free(part, bytes);
    return rc;
}

template <typename T>
int backward(int64_t rows, int64_t cols, const T *x, const T *w, const double *stats,
             const T *gy, T *gx, T *gw, T *gb)
{
    grad_input_kernel<T><<<row_blocks(rows), ROWS_PER_BLOCK * WARP, 0, em_cuda_launch_stream()>>>(
        rows, cols, x, w, stats, gy, gx);
    int rc = em_cuda_launch_status();
    if (rc != EM_KERNEL_OK || (!gw && !gb))
        return rc;
    return param_grads(rows, cols, x, stats, gy, gw, gb);
}

} // namespace

extern "C" int em_cuda_layer_norm(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                                  const void *w, const void *b, double eps, void *y,
                                  double *stats)
{
    if (rows < 0 || cols <= 0 || (dt != EM_F32 && dt != EM_F64))
        return EM_KERNEL_UNSUPPORTED;
    if (rows == 0)
        return EM_KERNEL_OK;
    if (dt == EM_F32)
        forward_kernel<float><<<row_blocks(rows), ROWS_PER_BLOCK * WARP, 0,
                                em_cuda_launch_stream()>>>(
            rows, cols, (const float *)x, (const float *)w, (const float *)b, eps, (float *)y,
            stats);
    else
        forward_kernel<double><<<row_blocks(rows), ROWS_PER_BLOCK * WARP, 0,
                                 em_cuda_launch_stream()>>>(
            rows, cols, (const double *)x, (const double *)w, (const double *)b, eps,
            (double *)y, stats);
    return em_cuda_launch_status();
}

extern "C" int em_cuda_layer_norm_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                                       const void *w, const double *stats, const void *gy,
                                       void *gx, void *gw, void *gb)
{
    if (rows < 0 || cols <= 0 || (dt != EM_F32 && dt != EM_F64))
        return EM_KERNEL_UNSUPPORTED;
    if (rows == 0) { /* the sums over no rows */
        size_t bytes = (size_t)cols * (dt == EM_F32 ? sizeof(float) : sizeof(double));
        int rc = gw ? em_cuda_status(cudaMemsetAsync(gw, 0, bytes, em_cuda_launch_stream()))
                    : EM_KERNEL_OK;
        if (rc == EM_KERNEL_OK && gb)
            rc = em_cuda_status(cudaMemsetAsync(gb, 0, bytes, em_cuda_launch_stream()));
        return rc;
    }
    if (dt == EM_F32)
        return backward<float>(rows, cols, (const float *)x, (const float *)w, stats,
                               (const float *)gy, (float *)gx, (float *)gw, (float *)gb);
    return backward<double>(rows, cols, (const double *)x, (const double *)w, stats,
                            (const double *)gy, (double *)gx, (double *)gw, (double *)gb);
}
