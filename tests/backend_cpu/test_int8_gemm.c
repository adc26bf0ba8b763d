/* The int8 GEMM (every path this machine has: portable, AVX2, AVX-512 VNNI, oneDNN's matmul)
 * against an int32 reference loop on random and ragged sizes, the fused dynamic-quantized linear
 * against a reference from the same formulas, and the static conv against an integer
 * convolution. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* xorshift for test data */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static const char *path_names[EM_CPU_INT8_PATHS] = {"portable", "avx2", "vnni", "onednn"};

static void *packed_weights(int64_t n, int64_t k, const int8_t *w)
{
    void *p = malloc((size_t)em_cpu_int8_packed_size(n, k));
    cr_assert_not_null(p);
    cr_assert_eq(em_cpu_int8_pack(n, k, w, p), EM_KERNEL_OK);
    return p;
}

/* c = a @ w^T on both paths, checked exactly against the int32 loop; a has row stride lda. */
static void check_gemm(int64_t m, int64_t n, int64_t k, int64_t lda, bool extremes)
{
    uint8_t *a = malloc((size_t)(m * lda + 1));
    int8_t *w = malloc((size_t)(n * k + 1));
    int32_t *want = malloc(sizeof(int32_t) * (size_t)(m * n + 1));
    int32_t *got = malloc(sizeof(int32_t) * (size_t)(m * n + 1));
    for (int64_t i = 0; i < m * lda; i++)
        a[i] = extremes ? 127 : (uint8_t)(next_u32() % 128);
    for (int64_t i = 0; i < n * k; i++)
        w[i] = extremes ? (int8_t)(i % 2 ? -128 : 127) : (int8_t)(next_u32() % 256 - 128);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t s = 0;
            for (int64_t q = 0; q < k; q++)
                s += (int32_t)a[i * lda + q] * w[j * k + q];
            want[i * n + j] = s;
        }
    void *p = packed_weights(n, k, w);
    for (em_cpu_int8_path path = 0; path < EM_CPU_INT8_PATHS; path++) {
        if (!em_cpu_int8_path_supported(path))
            continue;
        for (int64_t i = 0; i < m * n; i++)
            got[i] = -1;
        cr_assert_eq(em_cpu_int8_gemm_path(path, m, n, k, a, lda, p, got, n), EM_KERNEL_OK);
        for (int64_t i = 0; i < m * n; i++)
            cr_assert_eq(got[i], want[i], "%s m %lld n %lld k %lld: c[%lld] = %d, want %d",
                         path_names[path], (long long)m, (long long)n, (long long)k,
                         (long long)i, got[i], want[i]);
    }
    free(p);
    free(a);
    free(w);
    free(want);
    free(got);
}

Test(int8_gemm, ragged_sizes)
{
    static const int64_t sizes[][3] = {
        {1, 1, 1}, {1, 8, 4}, {1, 17, 3}, {3, 5, 7},   {4, 16, 32}, {5, 9, 33},
        {7, 31, 13}, {2, 24, 1}, {9, 40, 65}, {13, 3, 100}, {64, 50, 79}, {1, 512, 784},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        check_gemm(sizes[i][0], sizes[i][1], sizes[i][2], sizes[i][2], false);
}

Test(int8_gemm, random_sizes_and_row_strides)
{
    for (int t = 0; t < 25; t++) {
        int64_t m = 1 + next_u32() % 11, n = 1 + next_u32() % 37, k = 1 + next_u32() % 70;
        check_gemm(m, n, k, k + next_u32() % 5, false);
    }
}

Test(int8_gemm, extreme_values_do_not_saturate)
{
    /* 127 x -128 and 127 x 127 pairs: the largest pair sums the AVX2 path sees */
    check_gemm(5, 19, 37, 37, true);
    check_gemm(2, 8, 1024, 1024, true);
}

Test(int8_gemm, threaded_product_matches)
{
    check_gemm(64, 130, 257, 257, false); /* large enough for the OpenMP split */
}

Test(int8_gemm, packed_row_sums)
{
    int8_t w[2 * 3] = {1, -2, 3, -128, 127, 5};
    int32_t *p = packed_weights(2, 3, w);
    cr_assert_eq(p[0], 2);
    cr_assert_eq(p[1], 4);
    for (int j = 2; j < 8; j++)
        cr_assert_eq(p[j], 0);
    free(p);
}

Test(int8_gemm, qparams_hand_computed)
{
    float s;
    int32_t z;
    em_cpu_qparams_u7(-1.0f, 2.81f, &s, &z);
    cr_assert_float_eq(s, 3.81f / 127, 1e-9);
    cr_assert_eq(z, 33); /* round(1 / 0.03) */
    em_cpu_qparams_u7(0.5f, 2.54f, &s, &z); /* widened to [0, 2.54] */
    cr_assert_float_eq(s, 0.02f, 1e-9);
    cr_assert_eq(z, 0);
    em_cpu_qparams_u7(-1.27f, -0.5f, &s, &z); /* widened to [-1.27, 0] */
    cr_assert_eq(z, 127);
    em_cpu_qparams_u7(0, 0, &s, &z);
    cr_assert_float_eq(s, 1.0f, 0);
    cr_assert_eq(z, 0);
}

Test(int8_gemm, quantize_u7_rounds_half_even_and_clamps)
{
    float x[11] = {-1.0f, 2.81f, 0.0f, 0.015f, 0.045f, 0.03f, -0.03f, 1.0f, NAN, 0.5f, -0.5f};
    uint8_t q[11];
    float s;
    int32_t z;
    cr_assert_eq(em_cpu_quantize_u7(11, x, q, &s, &z), EM_KERNEL_OK);
    cr_assert_eq(z, 33);
    for (int i = 0; i < 11; i++) {
        float r = nearbyintf(x[i] * (1.0f / s)) + 33;
        uint8_t want = isnan(x[i]) ? 0 : (uint8_t)fminf(fmaxf(r, 0), 127);
        cr_assert_eq(q[i], want, "x %g: %d want %d", x[i], q[i], want);
    }
    cr_assert_eq(q[0], 0);
    cr_assert_eq(q[1], 127);
    cr_assert_eq(q[2], 33);
}

/* The fused linear on every path equals dequantize(gemm) + bias computed here, at 6 rows and at
 * 40 (oneDNN's path takes products of 16 rows or more). */
static void check_qlinear(int64_t m)
{
    const int64_t n = 21, k = 45;
    float x[40 * 45], bias[21], ws[21], got[40 * 21];
    int8_t w[21 * 45];
    for (int64_t i = 0; i < m * k; i++)
        x[i] = (float)((int)(next_u32() % 2001) - 700) / 500.0f;
    for (int64_t i = 0; i < n * k; i++)
        w[i] = (int8_t)((int)(next_u32() % 255) - 127);
    for (int64_t j = 0; j < n; j++) {
        bias[j] = (float)j * 0.25f - 2;
        ws[j] = 0.001f * (float)(j + 1);
    }
    uint8_t q[40 * 45];
    float sx;
    int32_t zp;
    em_cpu_quantize_u7(m * k, x, q, &sx, &zp);
    void *p = packed_weights(n, k, w);
    for (em_cpu_int8_path path = 0; path < EM_CPU_INT8_PATHS; path++) {
        if (!em_cpu_int8_path_supported(path))
            continue;
        for (int per_channel = 0; per_channel < 2; per_channel++) {
            cr_assert_eq(em_cpu_qlinear_dynamic_path(path, m, n, k, x, p, ws,
                                                     per_channel ? n : 1, bias, got),
                         EM_KERNEL_OK);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    int64_t s = 0;
                    for (int64_t t = 0; t < k; t++)
                        s += ((int64_t)q[i * k + t] - zp) * w[j * k + t];
                    double want = (double)s * sx * ws[per_channel ? j : 0] + bias[j];
                    cr_assert(fabs(got[i * n + j] - want) <= 1e-5 * (1 + fabs(want)),
                              "%s y[%lld][%lld] = %g, want %g", path_names[path],
                              (long long)i, (long long)j, got[i * n + j], want);
                }
        }
    }
    free(p);
}

Test(int8_gemm, qlinear_dynamic_paths_agree_with_reference)
{
    check_qlinear(6);
    check_qlinear(40);
}

/* The static conv on every path equals an integer convolution: with x_scale 1, integer inputs in
 * range and integer biases, quantization and the epilogue are exact, so each output is the
 * exact sum; padding contributes zero (the zero point's value). */
static void check_qconv(em_conv2d_shape s, int32_t zp, bool relu)
{
    int64_t nx = s.n * s.c_in * s.h * s.w, nw = s.c_out * s.c_in * s.kh * s.kw;
    int64_t hw = s.h_out * s.w_out, ny = s.n * s.c_out * hw;
    float *x = malloc(sizeof(float) * (size_t)nx), *want = malloc(sizeof(float) * (size_t)ny);
    float *got = malloc(sizeof(float) * (size_t)ny), *bias = malloc(sizeof(float) * s.c_out);
    int8_t *w = malloc((size_t)nw);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)((int)(next_u32() % 128) - zp);
    for (int64_t i = 0; i < nw; i++)
        w[i] = (int8_t)(next_u32() % 256 - 128);
    for (int64_t co = 0; co < s.c_out; co++)
        bias[co] = (float)((int)(next_u32() % 2001) - 1000);
    for (int64_t img = 0; img < s.n; img++)
        for (int64_t co = 0; co < s.c_out; co++)
            for (int64_t p = 0; p < hw; p++) {
                int64_t oy = p / s.w_out, ox = p % s.w_out, sum = (int64_t)bias[co];
                for (int64_t ci = 0; ci < s.c_in; ci++)
                    for (int64_t ky = 0; ky < s.kh; ky++)
                        for (int64_t kx = 0; kx < s.kw; kx++) {
                            int64_t iy = oy * s.stride[0] - s.pad[0] + ky * s.dilation[0];
                            int64_t ix = ox * s.stride[1] - s.pad[1] + kx * s.dilation[1];
                            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
                                continue;
                            sum += (int64_t)x[((img * s.c_in + ci) * s.h + iy) * s.w + ix] *
                                   w[((co * s.c_in + ci) * s.kh + ky) * s.kw + kx];
                        }
                want[(img * s.c_out + co) * hw + p] = relu && sum < 0 ? 0.0f : (float)sum;
            }
    void *packed = packed_weights(s.c_out, s.c_in * s.kh * s.kw, w);
    float one = 1.0f;
    for (em_cpu_int8_path path = 0; path < EM_CPU_INT8_PATHS; path++) {
        if (!em_cpu_int8_path_supported(path))
            continue;
        for (int64_t i = 0; i < ny; i++)
            got[i] = NAN;
        cr_assert_eq(em_cpu_qconv2d_static_path(path, &s, x, 1.0f, zp, packed, &one, 1, bias,
                                                relu, got),
                     EM_KERNEL_OK);
        for (int64_t i = 0; i < ny; i++)
            cr_assert_eq(got[i], want[i], "%s c_out %lld w_out %lld: y[%lld] = %g, want %g",
                         path_names[path], (long long)s.c_out, (long long)s.w_out,
                         (long long)i, got[i], want[i]);
    }
    free(packed);
    free(x);
    free(want);
    free(got);
    free(bias);
    free(w);
}

/* y's size from the input, kernel and options */
static em_conv2d_shape conv_shape(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                                  int64_t kh, int64_t kw, int64_t stride, int64_t pad,
                                  int64_t dilation)
{
    em_conv2d_shape s = {.n = n, .c_in = c_in, .h = h, .w = w, .c_out = c_out, .kh = kh,
                         .kw = kw, .stride = {stride, stride}, .pad = {pad, pad},
                         .dilation = {dilation, dilation}, .groups = 1};
    s.h_out = (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1;
    s.w_out = (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1;
    return s;
}

Test(int8_gemm, static_conv_paths_equal_the_integer_convolution)
{
    check_qconv(conv_shape(3, 1, 28, 28, 32, 3, 3, 1, 1, 1), 40, true);   /* the CNN's first */
    check_qconv(conv_shape(2, 32, 14, 14, 64, 3, 3, 1, 1, 1), 0, true);  /* and second */
    check_qconv(conv_shape(2, 3, 9, 9, 8, 3, 3, 2, 1, 1), 127, false);   /* stride 2 */
    check_qconv(conv_shape(1, 5, 11, 35, 20, 3, 2, 1, 2, 2), 17, false); /* dilated, wide */
    check_qconv(conv_shape(2, 2, 6, 5, 11, 1, 1, 1, 0, 1), 64, true);   /* pointwise */
    check_qconv(conv_shape(1, 3, 7, 7, 3, 5, 5, 3, 2, 1), 90, false);   /* few outputs */
}
