/* Static (calibrated) int8 kernels: Linear quantizes its input with fixed parameters, Conv2d
 * quantizes its input once, gathers the u8 patches (im2col, padding at the zero point) and runs
 * one int8 product over every image, with the dequantizing epilogue and an optional fused ReLU. */
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"

#define KGROUP 4

static int64_t round_up(int64_t v, int64_t to)
{
    return (v + to - 1) / to * to;
}

int em_cpu_qlinear_static(int64_t m, int64_t n, int64_t k, const float *x, float x_scale,
                          int32_t x_zero_point, const void *packed, const float *w_scale,
                          int64_t n_scales, const float *bias, bool relu, float *y)
{
    if (m < 0 || n < 0 || k < 0 || !(x_scale > 0) || x_zero_point < 0 ||
        x_zero_point > EM_CPU_U7_MAX)
        return EM_KERNEL_UNSUPPORTED;
    int64_t lda = round_up(k > 0 ? k : 1, KGROUP);
    uint8_t *q = em_cpu_scratch((size_t)(m * lda > 0 ? m * lda : 1)); // (m, lda)
    if (!q)
        return EM_KERNEL_FAILED;
    em_cpu_quantize_rows_u7(m, k, x, x_scale, x_zero_point, q, lda);
    int rc = em_cpu_int8_gemm_dequant(m, n, k, q, lda, packed, x_scale, x_zero_point, w_scale,
                                      n_scales, bias, relu, y, n);
    em_cpu_scratch_free(q);
    return rc;
}

/* a (N * H_out * W_out, lda): row (img, oy, ox) holds the patch c, ky, kx of xq; taps outside
 * the image take zp; pad bytes K..lda-1 are zero. */
static void im2col_u8(const em_conv2d_shape *s, const uint8_t *xq, uint8_t zp, uint8_t *a,
                      int64_t lda)
{
    int64_t hw = s->h_out * s->w_out, kk = s->kh * s->kw;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < s->n * hw; r++) {
        int64_t img = r / hw, oy = r % hw / s->w_out, ox = r % s->w_out;
        uint8_t *row = a + r * lda;
        for (int64_t c = 0; c < s->c_in; c++) {
            const uint8_t *plane = xq + (img * s->c_in + c) * s->h * s->w;
            for (int64_t ky = 0; ky < s->kh; ky++) {
                int64_t iy = oy * s->stride[0] - s->pad[0] + ky * s->dilation[0];
                for (int64_t kx = 0; kx < s->kw; kx++) {
                    int64_t ix = ox * s->stride[1] - s->pad[1] + kx * s->dilation[1];
                    bool in = iy >= 0 && iy < s->h && ix >= 0 && ix < s->w;
                    row[c * kk + ky * s->kw + kx] = in ? plane[iy * s->w + ix] : zp;
                }
            }
        }
        memset(row + s->c_in * kk, 0, (size_t)(lda - s->c_in * kk));
    }
}

int em_cpu_qconv2d_static(const em_conv2d_shape *s, const float *x, float x_scale,
                          int32_t x_zero_point, const void *packed, const float *w_scale,
                          int64_t n_scales, const float *bias, bool relu, float *y)
{
    if (s->groups != 1 || !(x_scale > 0) || x_zero_point < 0 || x_zero_point > EM_CPU_U7_MAX)
        return EM_KERNEL_UNSUPPORTED;
    int64_t hw = s->h_out * s->w_out, rows = s->n * hw, k = s->c_in * s->kh * s->kw;
    int64_t lda = round_up(k > 0 ? k : 1, KGROUP), nx = s->n * s->c_in * s->h * s->w;
    uint8_t *xq = em_cpu_scratch((size_t)(nx > 0 ? nx : 1));           // (N, C_in, H, W)
    uint8_t *a = em_cpu_scratch((size_t)(rows * lda > 0 ? rows * lda : 1)); // (rows, lda)
    float *yt = em_cpu_scratch(sizeof *yt * (size_t)(rows * s->c_out > 0 ? rows * s->c_out : 1));
    int rc = xq && a && yt ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    if (rc == EM_KERNEL_OK) {
        em_cpu_quantize_rows_u7(1, nx, x, x_scale, x_zero_point, xq, nx);
        im2col_u8(s, xq, (uint8_t)x_zero_point, a, lda);
        rc = em_cpu_int8_gemm_dequant(rows, s->c_out, k, a, lda, packed, x_scale, x_zero_point,
                                      w_scale, n_scales, bias, relu, yt, s->c_out);
    }
    if (rc == EM_KERNEL_OK) { /* yt (N, HW, C_out) -> y (N, C_out, HW) */
        #pragma omp parallel for schedule(static)
        for (int64_t img = 0; img < s->n; img++)
            for (int64_t p = 0; p < hw; p++)
                for (int64_t co = 0; co < s->c_out; co++)
                    y[(img * s->c_out + co) * hw + p] = yt[(img * hw + p) * s->c_out + co];
    }
    em_cpu_scratch_free(xq);
    em_cpu_scratch_free(a);
    em_cpu_scratch_free(yt);
    return rc;
}
