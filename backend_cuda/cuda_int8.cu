/* Dynamic int8 linear on CUDA (PyTorch's quantize_dynamic semantics, the CPU's numbers): the
 * activations are quantized per tensor to 0..127 from their range on the device (no host round
 * trip), products accumulate in int32 with dp4a (four int8 pairs an instruction), and the
 * epilogue dequantizes with the weight scales and adds the bias.
 * Packed weights: (n) int32 row sums, then (n, kp) int8 rows zero-padded to kp = k rounded up
 * to 4 bytes. */
#include <math.h>

#include "backend_cuda/cuda_real.cuh"

#define U7_MAX 127
#define THREADS 256
#define TILE 16

static int64_t padded_k(int64_t k)
{
    return (k + 3) / 4 * 4;
}

extern "C" int64_t em_cuda_int8_packed_size(int64_t n, int64_t k)
{
    return n * (int64_t)sizeof(int32_t) + n * padded_k(k);
}

/* one block a row: the padded copy and the row sum (integer: any order gives the same sum) */
__global__ void pack_kernel(int64_t k, int64_t kp, const int8_t *w, int32_t *sums,
                            int8_t *rows)
{
    __shared__ int32_t part[THREADS];
    const int64_t j = blockIdx.x;
    int32_t s = 0;
    for (int64_t i = threadIdx.x; i < kp; i += THREADS) {
        const int8_t v = i < k ? w[j * k + i] : 0;
        rows[j * kp + i] = v;
        s += v;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        sums[j] = part[0];
}

extern "C" int em_cuda_int8_pack(int64_t n, int64_t k, const int8_t *w, void *packed)
{
    if (n < 0 || k < 0)
        return EM_KERNEL_UNSUPPORTED;
    if (n == 0)
        return EM_KERNEL_OK;
    int32_t *sums = (int32_t *)packed;         // (n)
    int8_t *rows = (int8_t *)(sums + n);       // (n, kp)
    pack_kernel<<<(unsigned)n, THREADS, 0, em_cuda_stream()>>>(k, padded_k(k), w, sums, rows);
    return em_cuda_launch_status();
}

/* What one call computes on the device before the product: the activation scale and zero
 * point, from the range of x (one block, a fixed tree). */
struct qparams {
    float scale, inv;
    int32_t zero_point;
};

__global__ void qparams_kernel(int64_t n, const float *x, qparams *out)
{
    __shared__ float lo[THREADS], hi[THREADS];
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += THREADS) {
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
    }
    lo[threadIdx.x] = mn;
    hi[threadIdx.x] = mx;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) {
            lo[threadIdx.x] = fminf(lo[threadIdx.x], lo[threadIdx.x + half]);
            hi[threadIdx.x] = fmaxf(hi[threadIdx.x], hi[threadIdx.x + half]);
        }
        __syncthreads();
    }
    if (threadIdx.x != 0)
        return;
    const bool any = n > 0;
    /* the CPU's em_cpu_qparams_u7: the range widened to hold 0, s = range / 127 */
    const float l = any && lo[0] < 0 ? lo[0] : 0, h = any && hi[0] > 0 ? hi[0] : 0;
    float s = __fdiv_rn(h - l, (float)U7_MAX);
    if (!(s > 0) || !isfinite(s) || !isfinite(__frcp_rn(s)))
        s = 1.0f;
    const float z = rintf(__fdiv_rn(-l, s));
    out->scale = s;
    out->inv = __fdiv_rn(1.0f, s);
    out->zero_point = (int32_t)(z < 0 ? 0 : z > U7_MAX ? U7_MAX : z);
}

/* q (m, kp) = clamp(round(x * inv) + zero_point, 0, 127), zero past k */
__global__ void quantize_kernel(int64_t m, int64_t k, int64_t kp, const float *x,
                                const qparams *qp, int8_t *q)
{
    const float inv = qp->inv, zp = (float)qp->zero_point;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * kp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / kp, i = e % kp;
        float v = 0;
        if (i < k) {
            v = fmaxf(rintf(__fmul_rn(x[r * k + i], inv)) + zp, 0.0f); /* NaN becomes 0 */
            v = fminf(v, (float)U7_MAX);
        }
        q[e] = (int8_t)v;
    }
}

/* y (m, n) = (q @ w^T - zero_point * rowsum(w)) * scale * w_scale + bias: a TILE x TILE block of
 * outputs per thread block, int32 words of four int8 staged in shared memory. */
__global__ void qgemm_kernel(int64_t m, int64_t n, int64_t kw, const int32_t *q,
                             const int32_t *w, const int32_t *sums, const qparams *qp,
                             const float *w_scale, int64_t n_scales, const float *bias, float *y)
{
    __shared__ int32_t qs[TILE][TILE + 1], ws[TILE][TILE + 1];
    const int64_t row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    int32_t acc = 0;
    for (int64_t k0 = 0; k0 < kw; k0 += TILE) {
        const int64_t qr = blockIdx.y * TILE + threadIdx.y, wr = blockIdx.x * TILE + threadIdx.y;
        const int64_t kk = k0 + threadIdx.x;
        qs[threadIdx.y][threadIdx.x] = qr < m && kk < kw ? q[qr * kw + kk] : 0;
        ws[threadIdx.y][threadIdx.x] = wr < n && kk < kw ? w[wr * kw + kk] : 0;
        __syncthreads();
        for (int t = 0; t < TILE; t++)
            acc = __dp4a(qs[threadIdx.y][t], ws[threadIdx.x][t], acc);
        __syncthreads();
    }
    if (row >= m || col >= n)
        return;
    const float scale = __fmul_rn(qp->scale, w_scale[n_scales == 1 ? 0 : col]);
    const float v = __fmul_rn((float)(acc - qp->zero_point * sums[col]), scale);
    y[row * n + col] = bias ? __fadd_rn(v, bias[col]) : v;
}

extern "C" int em_cuda_qlinear_dynamic(int64_t m, int64_t n, int64_t k, const float *x,
                                       const void *packed, const float *w_scale,
                                       int64_t n_scales, const float *bias, float *y)
{
    if (m < 0 || n < 0 || k < 0 || (n_scales != 1 && n_scales != n))
        return EM_KERNEL_UNSUPPORTED;
    if (m == 0 || n == 0)
        return EM_KERNEL_OK;
    const int64_t kp = padded_k(k);
    const size_t head = 256; /* the parameters, then the rows at an aligned offset */
    const size_t bytes = head + (size_t)(m * kp);
    char *scratch = (char *)em_cuda_scratch(bytes);
    if (!scratch)
        return EM_KERNEL_FAILED;
    qparams *qp = (qparams *)scratch;
    int8_t *q = (int8_t *)(scratch + head); // (m, kp)
    const int32_t *sums = (const int32_t *)packed;     // (n)
    const int32_t *w = sums + n;                       // (n, kp / 4) words
    qparams_kernel<<<1, THREADS, 0, em_cuda_stream()>>>(m * k, x, qp);
    quantize_kernel<<<grid_for(m * kp, THREADS), THREADS, 0, em_cuda_stream()>>>(m, k, kp, x, qp,
                                                                               q);
    const dim3 grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE));
    qgemm_kernel<<<grid, dim3(TILE, TILE), 0, em_cuda_stream()>>>(
        m, n, kp / 4, (const int32_t *)q, w, sums, qp, w_scale, n_scales, bias, y);
    const int rc = em_cuda_launch_status();
    em_cuda_scratch_free(scratch, bytes);
    return rc;
}
