/* Int8 linear and conv2d on CUDA (PyTorch's quantized semantics, the CPU's numbers). Dynamic:
 * the activations are quantized per tensor to 0..127 from their range on the device (no host
 * round trip). Static: with the calibrated scale and zero point, conv2d gathering quantized
 * patches (padding at the zero point) straight from x. Products accumulate in int32 with dp4a
 * (four int8 pairs an instruction); the epilogue dequantizes with the weight scales, adds the
 * bias and, for static layers, may clamp at 0 (a fused ReLU).
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
    pack_kernel<<<(unsigned)n, THREADS, 0, em_cuda_launch_stream()>>>(k, padded_k(k), w, sums,
                                                                     rows);
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

/* The fixed parameters of a static layer, with the inverse the quantizer multiplies by. */
__global__ void static_qparams_kernel(float scale, int32_t zero_point, qparams *out)
{
    out->scale = scale;
    out->inv = __fdiv_rn(1.0f, scale);
    out->zero_point = zero_point;
}

/* clamp(round(v * inv) + zero_point, 0, 127), NaN becoming 0: the CPU's quantize_one */
__device__ __forceinline__ int8_t quantize_u7(float v, float inv, float zp)
{
    const float q = fmaxf(rintf(__fmul_rn(v, inv)) + zp, 0.0f);
    return (int8_t)fminf(q, (float)U7_MAX);
}

/* q (m, kp) = x (m, k) quantized, zero past k */
__global__ void quantize_kernel(int64_t m, int64_t k, int64_t kp, const float *x,
                                const qparams *qp, int8_t *q)
{
    const float inv = qp->inv, zp = (float)qp->zero_point;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * kp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / kp, i = e % kp;
        q[e] = i < k ? quantize_u7(x[r * k + i], inv, zp) : 0;
    }
}

/* q (N * H_out * W_out, kp): row (img, oy, ox) holds the quantized patch (c, ky, kx) of
 * x (N, C_in, H, W); taps outside the image take the zero point, bytes past K are zero. */
__global__ void im2col_quantize_kernel(em_conv2d_shape s, int64_t kp, const float *x,
                                       const qparams *qp, int8_t *q)
{
    const float inv = qp->inv, zp = (float)qp->zero_point;
    const int64_t hw = s.h_out * s.w_out, kk = s.kh * s.kw, k = s.c_in * kk;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < s.n * hw * kp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / kp, i = e % kp;
        if (i >= k) {
            q[e] = 0;
            continue;
        }
        const int64_t img = r / hw, oy = r % hw / s.w_out, ox = r % s.w_out;
        const int64_t c = i / kk, ky = i % kk / s.kw, kx = i % s.kw;
        const int64_t iy = oy * s.stride[0] - s.pad[0] + ky * s.dilation[0];
        const int64_t ix = ox * s.stride[1] - s.pad[1] + kx * s.dilation[1];
        const bool in = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
        q[e] = in ? quantize_u7(x[((img * s.c_in + c) * s.h + iy) * s.w + ix], inv, zp)
                  : (int8_t)qp->zero_point;
    }
}

/* Where the epilogue writes and what it adds: y (m, n) row-major, or with hw > 0 the rows
 * (img, p) of a conv's patches written to y (N, n, hw); relu clamps at 0. */
struct qepilogue {
    const float *w_scale; /* (1) or (n) */
    int64_t n_scales;
    const float *bias;    /* (n) or NULL */
    bool relu;
    int64_t hw;
};

/* y = (q @ w^T - zero_point * rowsum(w)) * scale * w_scale + bias: a TILE x TILE block of
 * outputs per thread block (rows along grid x, which has room for any m; columns along grid
 * y), int32 words of four int8 staged in shared memory. */
__global__ void qgemm_kernel(int64_t m, int64_t n, int64_t kw, const int32_t *q,
                             const int32_t *w, const int32_t *sums, const qparams *qp,
                             qepilogue ep, float *y)
{
    __shared__ int32_t qs[TILE][TILE + 1], ws[TILE][TILE + 1];
    const int64_t row0 = (int64_t)blockIdx.x * TILE, col0 = (int64_t)blockIdx.y * TILE;
    const int64_t row = row0 + threadIdx.y, col = col0 + threadIdx.x;
    int32_t acc = 0;
    for (int64_t k0 = 0; k0 < kw; k0 += TILE) {
        const int64_t wr = col0 + threadIdx.y, kk = k0 + threadIdx.x;
        qs[threadIdx.y][threadIdx.x] = row < m && kk < kw ? q[row * kw + kk] : 0;
        ws[threadIdx.y][threadIdx.x] = wr < n && kk < kw ? w[wr * kw + kk] : 0;
        __syncthreads();
        for (int t = 0; t < TILE; t++)
            acc = __dp4a(qs[threadIdx.y][t], ws[threadIdx.x][t], acc);
        __syncthreads();
    }
    if (row >= m || col >= n)
        return;
    const float scale = __fmul_rn(qp->scale, ep.w_scale[ep.n_scales == 1 ? 0 : col]);
    float v = __fmul_rn((float)(acc - qp->zero_point * sums[col]), scale);
    v = ep.bias ? __fadd_rn(v, ep.bias[col]) : v;
    if (ep.relu && !(v > 0))
        v = 0;
    const int64_t at = ep.hw ? (row / ep.hw * n + col) * ep.hw + row % ep.hw : row * n + col;
    y[at] = v;
}

/* The scratch of one call: the activation parameters, then the quantized rows (m, kp). */
struct qscratch {
    char *block;
    size_t bytes;
    qparams *qp;
    int8_t *q;
};

static bool qscratch_new(qscratch *sc, int64_t m, int64_t kp)
{
    const size_t head = 256; /* the rows start at an aligned offset */
    sc->bytes = head + (size_t)(m * kp);
    sc->block = (char *)em_cuda_scratch(sc->bytes);
    sc->qp = (qparams *)sc->block;
    sc->q = (int8_t *)(sc->block + head);
    return sc->block != NULL;
}

/* The product of the quantized rows with the packed weights and its epilogue; frees sc. */
static int qgemm_launch(int64_t m, int64_t n, int64_t kp, qscratch *sc, const void *packed,
                        const qepilogue &ep, float *y)
{
    const int32_t *sums = (const int32_t *)packed; // (n)
    const int32_t *w = sums + n;                   // (n, kp / 4) words
    const dim3 grid((unsigned)((m + TILE - 1) / TILE), (unsigned)((n + TILE - 1) / TILE));
    int rc = em_cuda_launch_status(); /* the quantizing launches before */
    if (rc == EM_KERNEL_OK && grid.y > 65535)
        rc = EM_KERNEL_UNSUPPORTED; /* over a million output features */
    if (rc == EM_KERNEL_OK) {
        qgemm_kernel<<<grid, dim3(TILE, TILE), 0, em_cuda_launch_stream()>>>(
            m, n, kp / 4, (const int32_t *)sc->q, w, sums, sc->qp, ep, y);
        rc = em_cuda_launch_status();
    }
    em_cuda_scratch_free(sc->block, sc->bytes);
    return rc;
}

static bool static_params_ok(float x_scale, int32_t x_zero_point)
{
    return x_scale > 0 && x_zero_point >= 0 && x_zero_point <= U7_MAX;
}

/* y (m, n) of a linear layer: x's parameters from its range (dynamic) or the fixed ones given */
static int qlinear(int64_t m, int64_t n, int64_t k, const float *x, bool dynamic, float x_scale,
                   int32_t x_zero_point, const void *packed, const qepilogue &ep, float *y)
{
    if (m < 0 || n < 0 || k < 0 || (ep.n_scales != 1 && ep.n_scales != n))
        return EM_KERNEL_UNSUPPORTED;
    if (m == 0 || n == 0)
        return EM_KERNEL_OK;
    const int64_t kp = padded_k(k);
    qscratch sc;
    if (!qscratch_new(&sc, m, kp))
        return EM_KERNEL_FAILED;
    if (dynamic)
        qparams_kernel<<<1, THREADS, 0, em_cuda_launch_stream()>>>(m * k, x, sc.qp);
    else
        static_qparams_kernel<<<1, 1, 0, em_cuda_launch_stream()>>>(x_scale, x_zero_point, sc.qp);
    quantize_kernel<<<grid_for(m * kp, THREADS), THREADS, 0, em_cuda_launch_stream()>>>(m, k, kp, x,
                                                                               sc.qp, sc.q);
    return qgemm_launch(m, n, kp, &sc, packed, ep, y);
}

extern "C" int em_cuda_qlinear_dynamic(int64_t m, int64_t n, int64_t k, const float *x,
                                       const void *packed, const float *w_scale,
                                       int64_t n_scales, const float *bias, float *y)
{
    return qlinear(m, n, k, x, true, 0, 0, packed, qepilogue{w_scale, n_scales, bias, false, 0},
                   y);
}

extern "C" int em_cuda_qlinear_static(int64_t m, int64_t n, int64_t k, const float *x,
                                      float x_scale, int32_t x_zero_point, const void *packed,
                                      const float *w_scale, int64_t n_scales, const float *bias,
                                      bool relu, float *y)
{
    if (!static_params_ok(x_scale, x_zero_point))
        return EM_KERNEL_UNSUPPORTED;
    return qlinear(m, n, k, x, false, x_scale, x_zero_point, packed,
                   qepilogue{w_scale, n_scales, bias, relu, 0}, y);
}

extern "C" int em_cuda_qconv2d_static(const em_conv2d_shape *s, const float *x, float x_scale,
                                      int32_t x_zero_point, const void *packed,
                                      const float *w_scale, int64_t n_scales,
                                      const float *bias, bool relu, float *y)
{
    if (s->groups != 1 || s->n < 0 || s->c_in < 1 || s->c_out < 1 || s->kh < 1 || s->kw < 1 ||
        s->h_out < 0 || s->w_out < 0 || s->stride[0] < 1 || s->stride[1] < 1 ||
        s->dilation[0] < 1 || s->dilation[1] < 1 || (n_scales != 1 && n_scales != s->c_out) ||
        !static_params_ok(x_scale, x_zero_point))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t hw = s->h_out * s->w_out, rows = s->n * hw;
    const int64_t kp = padded_k(s->c_in * s->kh * s->kw);
    if (rows == 0)
        return EM_KERNEL_OK;
    qscratch sc;
    if (!qscratch_new(&sc, rows, kp))
        return EM_KERNEL_FAILED;
    static_qparams_kernel<<<1, 1, 0, em_cuda_launch_stream()>>>(x_scale, x_zero_point, sc.qp);
    im2col_quantize_kernel<<<grid_for(rows * kp, THREADS), THREADS, 0, em_cuda_launch_stream()>>>(
        *s, kp, x, sc.qp, sc.q);
    return qgemm_launch(rows, s->c_out, kp, &sc, packed,
                        qepilogue{w_scale, n_scales, bias, relu, hw}, y);
}
