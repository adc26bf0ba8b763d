/* The CPU convolution and pooling kernels against naive loops: conv2d forward and both gradients
 * (stride, padding, dilation, groups, 1x1, batches above and below the thread count), gradients
 * also against central differences in f64; max/avg pooling with padding, ties and both
 * count_include_pad settings. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_conv_direct_internal.h"
#include "backend_cpu/cpu_conv_winograd_internal.h"
#include "backend_cpu/cpu_dnnl_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "helpers/conv_naive.h"

static uint64_t rng_state = 777;

static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double *random_f64(int64_t n)
{
    double *b = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        b[i] = rnd();
    return b;
}

static float *to_f32(const double *v, int64_t n)
{
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)v[i];
    return f;
}

/* ---- convolution ---- */

static void assert_close(const char *what, const double *want, const void *got, bool f32,
                         int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++) {
        double g = f32 ? ((const float *)got)[i] : ((const double *)got)[i];
        cr_assert(fabs(g - want[i]) <= tol * (1 + fabs(want[i])), "%s[%ld]: got %.9g want %.9g",
                  what, (long)i, g, want[i]);
    }
}

/* Forward, grad_input and grad_weight (+ bias) of s in f32 and f64 against the naive loops. */
static void check_conv(em_conv2d_shape s)
{
    double *x = random_f64(conv_x_count(&s)), *w = random_f64(conv_w_count(&s));
    double *b = random_f64(s.c_out);
    double *gy = random_f64(conv_y_count(&s));
    double *y = malloc((size_t)conv_y_count(&s) * sizeof(double));
    double *gx = malloc((size_t)conv_x_count(&s) * 8);
    double *gw = malloc((size_t)conv_w_count(&s) * 8), *gb = malloc((size_t)s.c_out * 8);
    conv_naive(&s, x, w, b, y, NULL, NULL, NULL, NULL);
    conv_naive(&s, x, w, NULL, NULL, gy, gx, gw, gb);
    for (int f32 = 0; f32 < 2; f32++) {
        em_dtype dt = f32 ? EM_F32 : EM_F64;
        size_t es = f32 ? 4 : 8;
        void *kx = f32 ? (void *)to_f32(x, conv_x_count(&s)) : x;
        void *kw = f32 ? (void *)to_f32(w, conv_w_count(&s)) : w;
        void *kb = f32 ? (void *)to_f32(b, s.c_out) : b;
        void *kgy = f32 ? (void *)to_f32(gy, conv_y_count(&s)) : gy;
        void *ky = malloc((size_t)conv_y_count(&s) * es);
        void *kgx = malloc((size_t)conv_x_count(&s) * es);
        void *kgw = malloc((size_t)conv_w_count(&s) * es), *kgb = malloc((size_t)s.c_out * es);
        memset(kgx, 0xff, (size_t)conv_x_count(&s) * es); /* NaN: the kernels must overwrite */
        memset(kgw, 0xff, (size_t)conv_w_count(&s) * es);
        double tol = f32 ? 1e-4 : 1e-12;
        cr_assert_eq(em_cpu_conv2d(&s, dt, kx, kw, kb, ky), EM_KERNEL_OK);
        assert_close("y", y, ky, f32, conv_y_count(&s), tol);
        cr_assert_eq(em_cpu_conv2d_grad_input(&s, dt, kgy, kw, kgx), EM_KERNEL_OK);
        assert_close("gx", gx, kgx, f32, conv_x_count(&s), tol);
        cr_assert_eq(em_cpu_conv2d_grad_weight(&s, dt, kgy, kx, kgw, kgb), EM_KERNEL_OK);
        assert_close("gw", gw, kgw, f32, conv_w_count(&s), tol);
        assert_close("gb", gb, kgb, f32, s.c_out, tol);
        if (f32) {
            free(kx);
            free(kw);
            free(kb);
            free(kgy);
        }
        free(ky);
        free(kgx);
        free(kgw);
        free(kgb);
    }
    free(x);
    free(w);
    free(b);
    free(gy);
    free(y);
    free(gx);
    free(gw);
    free(gb);
}

Test(cpu_conv, stride2_padding)
{
    check_conv(conv_test_shape(3, 4, 9, 11, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1));
}

Test(cpu_conv, dilation2_groups2)
{
    check_conv(conv_test_shape(3, 4, 10, 9, 6, 3, 2, 1, 1, 2, 1, 2, 2, 2));
}

Test(cpu_conv, mixed_stride_padding_rectangular_kernel)
{
    check_conv(conv_test_shape(2, 3, 8, 7, 5, 2, 3, 2, 1, 0, 1, 1, 2, 1));
    check_conv(conv_test_shape(1, 2, 5, 5, 3, 5, 5, 3, 3, 2, 2, 1, 1, 1)); /* one image */
}

Test(cpu_conv, pointwise_1x1)
{
    check_conv(conv_test_shape(5, 4, 6, 7, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2));
    check_conv(conv_test_shape(5, 4, 6, 7, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1)); /* strided 1x1 */
}

Test(cpu_conv, batch_larger_than_gradient_blocks)
{
    check_conv(conv_test_shape(21, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1));
}

Test(cpu_conv, cnn_second_layer_shape)
{
    check_conv(conv_test_shape(4, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1));
}

/* Stride 1 with 8+ input channels per group runs on the padded grid. */
Test(cpu_conv, padded_grid_dilation_groups_no_padding)
{
    check_conv(conv_test_shape(3, 16, 7, 9, 6, 3, 2, 1, 1, 2, 1, 2, 3, 2));
    check_conv(conv_test_shape(2, 8, 6, 7, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1));
    check_conv(conv_test_shape(1, 8, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1)); /* one image */
}

/* Stride-1 f32 layers on AVX2+FMA run the direct kernels; on other CPUs the same checks cover
 * the GEMM path. */
static bool direct_cpu(void)
{
    return em_cpu_has_avx2();
}

/* check_conv on one thread and on two, after asserting which kernels s runs on. */
static void check_direct(em_conv2d_shape s, bool grad_input_direct)
{
    cr_assert_eq(em_cpu_conv_direct_fits(&s), direct_cpu());
    cr_assert_eq(em_cpu_conv_direct_grad_input_fits(&s), direct_cpu() && grad_input_direct);
    const int threads = omp_get_max_threads();
    for (int t = 1; t <= 2; t++) {
        omp_set_num_threads(t);
        check_conv(s);
    }
    omp_set_num_threads(threads);
}

Test(cpu_conv, direct_cnn_layer_shapes)
{
    check_direct(conv_test_shape(3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(3, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
}

/* One image: forward split by rows, grad_weight by channel tiles across threads. */
Test(cpu_conv, direct_batch_one)
{
    check_direct(conv_test_shape(1, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(1, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
}

/* Output rows of 8, 9, 13, 15, 16, 19 and 28 columns (whole, masked and single 8-lane tails);
 * 1 to 13 output channels (every tile height); tap counts that leave 1 or 2 taps over; a 3x1
 * kernel; dilation; no padding (grad_input padded by K-1) and padding K-1 (by 0). */
Test(cpu_conv, direct_odd_sizes)
{
    check_direct(conv_test_shape(2, 3, 11, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(3, 2, 9, 21, 7, 3, 3, 1, 1, 0, 0, 1, 1, 1), true);
    check_direct(conv_test_shape(2, 5, 12, 17, 13, 2, 3, 1, 1, 1, 1, 2, 2, 1), true);
    check_direct(conv_test_shape(2, 4, 10, 16, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(2, 4, 10, 16, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(2, 4, 10, 16, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(3, 3, 9, 10, 4, 3, 1, 1, 1, 1, 0, 1, 1, 1), true);
    check_direct(conv_test_shape(2, 2, 7, 10, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), true);
    check_direct(conv_test_shape(5, 2, 7, 26, 6, 3, 3, 1, 1, 2, 2, 1, 1, 1), true);
}

/* Padding beyond (K-1)*dilation: the forward pass and grad_weight run direct, grad_input on
 * the GEMM path. */
Test(cpu_conv, direct_forward_with_wide_padding)
{
    check_direct(conv_test_shape(2, 3, 8, 10, 6, 3, 3, 1, 1, 3, 3, 1, 1, 1), false);
}

/* The direct forward pass (and grad_input, the same pass over gy) in 16-lane AVX-512 tiles
 * gives the bits of the 8-lane AVX2 ones: each output sums its taps in the same order. Rows of
 * 28 (a tile of 16 and a tail of 12), 13, 21, 26 and 17 columns. */
Test(cpu_conv, direct_same_bits_on_avx2_and_avx512)
{
    if (!direct_cpu() || !em_cpu_has_avx512())
        cr_skip_test("needs AVX-512 to compare with AVX2");
    const em_conv2d_shape shapes[5] = {
        conv_test_shape(3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1),
        conv_test_shape(2, 3, 11, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1),
        conv_test_shape(3, 2, 9, 21, 7, 3, 3, 1, 1, 0, 0, 1, 1, 1),
        conv_test_shape(5, 2, 7, 26, 6, 3, 3, 1, 1, 2, 2, 1, 1, 1),
        conv_test_shape(2, 5, 12, 17, 13, 2, 3, 1, 1, 1, 1, 2, 2, 1)};
    for (int k = 0; k < 5; k++) {
        const em_conv2d_shape *s = &shapes[k];
        const int64_t nx = conv_x_count(s), ny = conv_y_count(s), nw = conv_w_count(s);
        double *x = random_f64(nx), *w = random_f64(nw), *b = random_f64(s->c_out);
        double *gy = random_f64(ny);
        float *fx = to_f32(x, nx), *fw = to_f32(w, nw), *fb = to_f32(b, s->c_out);
        float *fgy = to_f32(gy, ny), *y[2], *gx[2];
        for (int wide = 0; wide < 2; wide++) {
            em_cpu_set_avx512(wide);
            y[wide] = malloc((size_t)ny * sizeof(float));
            gx[wide] = malloc((size_t)nx * sizeof(float));
            cr_assert_eq(em_cpu_conv_direct_forward(s, EM_F32, fx, fw, fb, y[wide]),
                         EM_KERNEL_OK);
            cr_assert_eq(em_cpu_conv_direct_grad_input(s, EM_F32, fgy, fw, gx[wide]),
                         EM_KERNEL_OK);
        }
        em_cpu_set_avx512(true);
        cr_assert_arr_eq(y[1], y[0], (size_t)ny * sizeof(float), "shape %d: y", k);
        cr_assert_arr_eq(gx[1], gx[0], (size_t)nx * sizeof(float), "shape %d: gx", k);
        void *bufs[] = {x, w, b, gy, fx, fw, fb, fgy, y[0], y[1], gx[0], gx[1]};
        for (int i = 0; i < 12; i++)
            free(bufs[i]);
    }
}

/* Shapes the direct kernels leave to the GEMM path. */
Test(cpu_conv, direct_declines_strides_groups_1x1_narrow_rows)
{
    em_conv2d_shape no[4] = {conv_test_shape(2, 4, 16, 16, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1),
                             conv_test_shape(2, 4, 16, 16, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2),
                             conv_test_shape(2, 4, 16, 16, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1),
                             conv_test_shape(2, 4, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1)};
    for (int i = 0; i < 4; i++)
        cr_assert_not(em_cpu_conv_direct_fits(&no[i]), "shape %d", i);
}

/* The same bits on one thread and on two for grad_weight (and its bias) of s in f32. */
static void check_grad_weight_bits(em_conv2d_shape s)
{
    double *x = random_f64(conv_x_count(&s)), *gy = random_f64(conv_y_count(&s));
    float *fx = to_f32(x, conv_x_count(&s)), *fgy = to_f32(gy, conv_y_count(&s));
    float *gw[2], *gb[2];
    const int threads = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        gw[t] = malloc((size_t)conv_w_count(&s) * sizeof(float));
        gb[t] = malloc((size_t)s.c_out * sizeof(float));
        omp_set_num_threads(t ? 2 : 1);
        cr_assert_eq(em_cpu_conv2d_grad_weight(&s, EM_F32, fgy, fx, gw[t], gb[t]), EM_KERNEL_OK);
    }
    omp_set_num_threads(threads);
    cr_assert_eq(memcmp(gw[0], gw[1], (size_t)conv_w_count(&s) * sizeof(float)), 0);
    cr_assert_eq(memcmp(gb[0], gb[1], (size_t)s.c_out * sizeof(float)), 0);
    for (int t = 0; t < 2; t++) {
        free(gw[t]);
        free(gb[t]);
    }
    free(x);
    free(gy);
    free(fx);
    free(fgy);
}

/* The CNN's layers at its batch of 64, and one image (split by channel tiles on two threads). */
Test(cpu_conv, direct_grad_weight_same_bits_on_any_thread_count)
{
    check_grad_weight_bits(conv_test_shape(64, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1));
    check_grad_weight_bits(conv_test_shape(64, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1));
    check_grad_weight_bits(conv_test_shape(1, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1));
}

/* grad_weight sums the batch in fixed blocks: the same bits on one thread and on two (direct
 * kernels for 9x9 rows, the GEMM path for 6x6). */
Test(cpu_conv, grad_weight_same_bits_on_any_thread_count)
{
    check_grad_weight_bits(conv_test_shape(37, 16, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1));
    check_grad_weight_bits(conv_test_shape(37, 16, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1));
}

/* The partial sums of the gradient blocks are added in block order, element by element, in f32:
 * with terms that cancel (1e8, 1, -1e8, ...) any other order gives other bits. Runs past a
 * task's 1024 elements and a tail, into a separate output and in place over the first block. */
Test(cpu_conv, block_sums_add_in_block_order)
{
    const int64_t blocks = 5, n = 2 * 1024 + 37;
    float *part = malloc((size_t)(blocks * n) * sizeof(float)), *out = malloc(n * sizeof(float));
    const float terms[5] = {1e8f, 1.0f, -1e8f, 0.25f, 3.0f};
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t i = 0; i < n; i++)
            part[b * n + i] = terms[(b + i) % 5] * (float)(1 + i % 7);
    em_cpu_sum_blocks_f32(part, blocks, n, out);
    for (int64_t i = 0; i < n; i++) {
        float want = part[i];
        for (int64_t b = 1; b < blocks; b++)
            want += part[b * n + i];
        cr_assert(memcmp(&out[i], &want, sizeof want) == 0, "element %lld: %.9g, want %.9g",
                  (long long)i, out[i], want);
    }
    em_cpu_sum_blocks_f32(part, blocks, n, part);
    cr_assert(memcmp(part, out, (size_t)n * sizeof(float)) == 0, "in place differs");
    free(part);
    free(out);
}

/* d(sum(y * r))/dx, /dw, /db by central differences in f64, against the gradient kernels. */
Test(cpu_conv, gradients_match_finite_differences)
{
    em_conv2d_shape s = conv_test_shape(2, 4, 5, 6, 4, 3, 2, 2, 1, 1, 1, 2, 1, 2);
    double *x = random_f64(conv_x_count(&s)), *w = random_f64(conv_w_count(&s));
    double *b = random_f64(s.c_out);
    double *r = random_f64(conv_y_count(&s)), *y = malloc((size_t)conv_y_count(&s) * 8);
    double *gx = malloc((size_t)conv_x_count(&s) * 8), *gw = malloc((size_t)conv_w_count(&s) * 8);
    double *gb = malloc((size_t)s.c_out * 8);
    cr_assert_eq(em_cpu_conv2d_grad_input(&s, EM_F64, r, w, gx), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv2d_grad_weight(&s, EM_F64, r, x, gw, gb), EM_KERNEL_OK);
    double *params[3] = {x, w, b}, *grads[3] = {gx, gw, gb};
    int64_t counts[3] = {conv_x_count(&s), conv_w_count(&s), s.c_out};
    const double eps = 1e-6;
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < counts[t]; i++) {
            double keep = params[t][i], loss[2];
            for (int side = 0; side < 2; side++) {
                params[t][i] = keep + (side ? -eps : eps);
                cr_assert_eq(em_cpu_conv2d(&s, EM_F64, x, w, b, y), EM_KERNEL_OK);
                loss[side] = 0;
                for (int64_t k = 0; k < conv_y_count(&s); k++)
                    loss[side] += y[k] * r[k];
            }
            params[t][i] = keep;
            double fd = (loss[0] - loss[1]) / (2 * eps);
            cr_assert(fabs(fd - grads[t][i]) < 1e-6, "param %d[%ld]: fd %.9g kernel %.9g", t,
                      (long)i, fd, grads[t][i]);
        }
    free(x);
    free(w);
    free(b);
    free(r);
    free(y);
    free(gx);
    free(gw);
    free(gb);
}

Test(cpu_conv, half_types_through_f32)
{
    enum { NX = 100, NW = 36, NY = 100 }; /* x (2, 2, 5, 5), w (2, 2, 3, 3), y (2, 2, 5, 5) */
    em_conv2d_shape s = conv_test_shape(2, 2, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    cr_assert_eq(conv_x_count(&s), NX);
    cr_assert_eq(conv_w_count(&s), NW);
    cr_assert_eq(conv_y_count(&s), NY);
    double *x = random_f64(NX), *w = random_f64(NW), y[NY];
    uint16_t hx[NX], hw[NW], hy[NY];
    for (int i = 0; i < NX; i++) {
        hx[i] = em_f32_to_bf16((float)x[i]);
        x[i] = em_bf16_to_f32(hx[i]);
    }
    for (int i = 0; i < NW; i++) {
        hw[i] = em_f32_to_bf16((float)w[i]);
        w[i] = em_bf16_to_f32(hw[i]);
    }
    conv_naive(&s, x, w, NULL, y, NULL, NULL, NULL, NULL);
    cr_assert_eq(em_cpu_conv2d(&s, EM_BF16, hx, hw, NULL, hy), EM_KERNEL_OK);
    for (int i = 0; i < NY; i++)
        cr_assert(fabs(em_bf16_to_f32(hy[i]) - y[i]) <= 1e-2 * (1 + fabs(y[i])));
    free(x);
    free(w);
}

/* n values of v rounded to dt (f16 or bf16), and back to f32. */
static uint16_t *to_half(em_dtype dt, const double *v, int64_t n)
{
    uint16_t *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint16_t));
    for (int64_t i = 0; i < n; i++)
        h[i] = dt == EM_F16 ? em_f32_to_f16((float)v[i]) : em_f32_to_bf16((float)v[i]);
    return h;
}

static float *widened(em_dtype dt, const uint16_t *h, int64_t n)
{
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        f[i] = dt == EM_F16 ? em_f16_to_f32(h[i]) : em_bf16_to_f32(h[i]);
    return f;
}

/* got (n) of dt == f32 (n) rounded to dt, bit for bit. */
static void expect_rounded(const char *what, em_dtype dt, const uint16_t *got, const float *f32,
                           int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const uint16_t want = dt == EM_F16 ? em_f32_to_f16(f32[i]) : em_f32_to_bf16(f32[i]);
        cr_assert_eq(got[i], want, "%s %s[%ld]: 0x%04x, want 0x%04x (%.9g rounded)",
                     em_dtype_name(dt), what, (long)i, got[i], want, f32[i]);
    }
}

/* A half convolution whose f32 path is the direct or the Winograd one runs those kernels on its
 * images as they are: forward, grad_input and grad_weight (+ bias) give, bit for bit, the f32
 * path's results on the widened operands rounded to dt. */
static void check_half_in_place(em_conv2d_shape s, em_dtype dt)
{
    const int64_t nx = conv_x_count(&s), nw = conv_w_count(&s), ny = conv_y_count(&s);
    double *x = random_f64(nx), *w = random_f64(nw), *b = random_f64(s.c_out);
    double *gy = random_f64(ny);
    uint16_t *hx = to_half(dt, x, nx), *hw = to_half(dt, w, nw), *hb = to_half(dt, b, s.c_out);
    uint16_t *hgy = to_half(dt, gy, ny);
    float *fx = widened(dt, hx, nx), *fw = widened(dt, hw, nw), *fb = widened(dt, hb, s.c_out);
    float *fgy = widened(dt, hgy, ny);
    float *y = malloc((size_t)ny * sizeof(float)), *gx = malloc((size_t)nx * sizeof(float));
    float *gw = malloc((size_t)nw * sizeof(float)), *gb = malloc((size_t)s.c_out * sizeof(float));
    uint16_t *hy = malloc((size_t)ny * 2), *hgx = malloc((size_t)nx * 2);
    uint16_t *hgw = malloc((size_t)nw * 2), *hgb = malloc((size_t)s.c_out * 2);
    cr_assert_eq(em_cpu_conv2d(&s, EM_F32, fx, fw, fb, y), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv2d_grad_input(&s, EM_F32, fgy, fw, gx), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv2d_grad_weight(&s, EM_F32, fgy, fx, gw, gb), EM_KERNEL_OK);
    const int threads = omp_get_max_threads();
    for (int t = 1; t <= 2; t++) { /* by image or chunk, split by rows where the batch is smaller */
        omp_set_num_threads(t);
        cr_assert_eq(em_cpu_conv2d(&s, dt, hx, hw, hb, hy), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_conv2d_grad_input(&s, dt, hgy, hw, hgx), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_conv2d_grad_weight(&s, dt, hgy, hx, hgw, hgb), EM_KERNEL_OK);
        expect_rounded("y", dt, hy, y, ny);
        expect_rounded("gx", dt, hgx, gx, nx);
        expect_rounded("gw", dt, hgw, gw, nw);
        expect_rounded("gb", dt, hgb, gb, s.c_out);
    }
    omp_set_num_threads(threads);
    void *bufs[] = {x, w, b, gy, hx, hw, hb, hgy, fx, fw, fb, fgy, y, gx, gw, gb, hy, hgx, hgw,
                    hgb};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
}

/* The CNN's first layer (one input channel: below oneDNN's 16, so ember's kernels run it in
 * bf16 too), an image per thread and one image split by rows, a 2x3 kernel with dilation. */
Test(cpu_conv, half_direct_same_bits_as_widened_f32)
{
    if (!direct_cpu())
        cr_skip_test("the direct kernels need AVX2+FMA");
    const em_conv2d_shape shapes[] = {conv_test_shape(3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1),
                                      conv_test_shape(1, 3, 11, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1),
                                      conv_test_shape(2, 5, 12, 17, 13, 2, 3, 1, 1, 1, 1, 2, 2, 1)};
    const em_dtype dts[] = {EM_F16, EM_BF16};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        cr_assert(em_cpu_conv_direct_grad_input_fits(&shapes[k]), "shape %zu", k);
        for (int d = 0; d < 2; d++)
            check_half_in_place(shapes[k], dts[d]);
    }
}

/* Winograd layers (32 channels and more, 16 images and more): a full chunk of 16 images and a
 * part one, tiles past the edge, padding 1 and 0; f16, and bf16 where oneDNN does not take it
 * (test_cpu_conv_pool_avx2 holds the CPU to AVX2). */
Test(cpu_conv, half_winograd_same_bits_as_widened_f32)
{
    const em_conv2d_shape shapes[] = {conv_test_shape(17, 32, 9, 10, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1),
                                      conv_test_shape(16, 33, 7, 6, 32, 3, 3, 1, 1, 0, 0, 1, 1, 1)};
    const em_dtype dts[] = {EM_F16, EM_BF16};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        if (!em_cpu_conv_winograd_chosen(&shapes[k], false))
            cr_skip_test("the Winograd kernels need AVX2+FMA");
        cr_assert(em_cpu_conv_winograd_chosen(&shapes[k], true), "shape %zu", k);
        for (int d = 0; d < 2; d++)
            if (dts[d] == EM_F16 || !em_cpu_dnnl_takes(dts[d]))
                check_half_in_place(shapes[k], dts[d]);
    }
}

Test(cpu_conv, rejects_bad_groups_and_dtypes)
{
    em_conv2d_shape s = conv_test_shape(1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2);
    float buf[256] = {0};
    cr_assert_eq(em_cpu_conv2d(&s, EM_F32, buf, buf, NULL, buf), EM_KERNEL_UNSUPPORTED);
    s = conv_test_shape(1, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    cr_assert_eq(em_cpu_conv2d(&s, EM_I32, buf, buf, NULL, buf), EM_KERNEL_UNSUPPORTED);
}

/* ---- pooling ---- */

static em_pool2d_shape pool_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t h_out,
                                  int64_t w_out, int64_t k, int64_t stride, int64_t pad,
                                  bool include_pad)
{
    return (em_pool2d_shape){.n = n, .c = c, .h = h, .w = w, .h_out = h_out, .w_out = w_out,
                             .kernel = {k, k}, .stride = {stride, stride}, .pad = {pad, pad},
                             .dilation = {1, 1}, .count_include_pad = include_pad};
}

/* The index in its plane of output o's window tap (o over the N*C planes' outputs). */
static int64_t tap_input(const em_pool2d_shape *s, int64_t o, int64_t tap)
{
    const int64_t oh = o % (s->h_out * s->w_out) / s->w_out, ow = o % s->w_out;
    return (oh * s->stride[0] - s->pad[0] + tap / s->kernel[1]) * s->w +
           ow * s->stride[1] - s->pad[1] + tap % s->kernel[1];
}

/* Naive max pooling over every window position, padding as -inf, first maximum kept, am its tap
 * in the window; then the gradient of sum(y * gy). */
static void max_pool_naive(const em_pool2d_shape *s, const double *x, double *y, em_pool_tap *am,
                           const double *gy, double *gx)
{
    memset(gx, 0, (size_t)(s->n * s->c * s->h * s->w) * sizeof(double));
    for (int64_t p = 0; p < s->n * s->c; p++)
        for (int64_t oh = 0; oh < s->h_out; oh++)
            for (int64_t ow = 0; ow < s->w_out; ow++) {
                double best = -INFINITY;
                int64_t arg = -1, tap = -1;
                for (int64_t i = 0; i < s->kernel[0]; i++)
                    for (int64_t j = 0; j < s->kernel[1]; j++) {
                        int64_t ih = oh * s->stride[0] - s->pad[0] + i;
                        int64_t iw = ow * s->stride[1] - s->pad[1] + j;
                        bool inside = ih >= 0 && ih < s->h && iw >= 0 && iw < s->w;
                        double v = inside ? x[p * s->h * s->w + ih * s->w + iw] : -INFINITY;
                        if (inside && (arg < 0 || v > best)) {
                            best = v;
                            arg = ih * s->w + iw;
                            tap = i * s->kernel[1] + j;
                        }
                    }
                int64_t o = (p * s->h_out + oh) * s->w_out + ow;
                y[o] = best;
                am[o] = (em_pool_tap)tap;
                gx[p * s->h * s->w + arg] += gy[o];
            }
}

static void avg_pool_naive(const em_pool2d_shape *s, const double *x, double *y,
                           const double *gy, double *gx)
{
    memset(gx, 0, (size_t)(s->n * s->c * s->h * s->w) * sizeof(double));
    for (int64_t p = 0; p < s->n * s->c; p++)
        for (int64_t oh = 0; oh < s->h_out; oh++)
            for (int64_t ow = 0; ow < s->w_out; ow++) {
                double sum = 0;
                int64_t inside = 0, padded = 0;
                for (int64_t i = 0; i < s->kernel[0]; i++)
                    for (int64_t j = 0; j < s->kernel[1]; j++) {
                        int64_t ih = oh * s->stride[0] - s->pad[0] + i;
                        int64_t iw = ow * s->stride[1] - s->pad[1] + j;
                        if (ih < s->h + s->pad[0] && iw < s->w + s->pad[1])
                            padded++;
                        if (ih >= 0 && ih < s->h && iw >= 0 && iw < s->w) {
                            inside++;
                            sum += x[p * s->h * s->w + ih * s->w + iw];
                        }
                    }
                int64_t count = s->count_include_pad ? padded : inside;
                int64_t o = (p * s->h_out + oh) * s->w_out + ow;
                y[o] = sum / (double)count;
                for (int64_t i = 0; i < s->kernel[0]; i++)
                    for (int64_t j = 0; j < s->kernel[1]; j++) {
                        int64_t ih = oh * s->stride[0] - s->pad[0] + i;
                        int64_t iw = ow * s->stride[1] - s->pad[1] + j;
                        if (ih >= 0 && ih < s->h && iw >= 0 && iw < s->w)
                            gx[p * s->h * s->w + ih * s->w + iw] += gy[o] / (double)count;
                    }
            }
}

/* Inputs from {-3, -2, -1}: ties everywhere, and a padded -inf must never beat them. */
static double *tied_negative(int64_t n)
{
    double *v = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = -1.0 - floor((rnd() + 1) * 1.5);
    return v;
}

/* Max pooling with s.relu of x (one of -1, 0, 1 each, so there are ties, zero and negative
 * maxima) against the plain kernel's own results: y = relu(max), argmax kept only where the
 * maximum is positive (-1 elsewhere); and the gradient through those argmax: gy where they point,
 * 0 everywhere else. */
static void check_relu_pool(em_pool2d_shape s, em_dtype dt)
{
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.h_out * s.w_out;
    const int64_t hw = s.h * s.w, hwo = s.h_out * s.w_out;
    const size_t es = dt == EM_F32 ? 4 : 8;
    double *x = tied_negative(nx), *gy = random_f64(ny);
    for (int64_t i = 0; i < nx; i++)
        x[i] += 2;
    void *kx = dt == EM_F32 ? (void *)to_f32(x, nx) : x;
    void *kgy = dt == EM_F32 ? (void *)to_f32(gy, ny) : gy;
    void *y0 = malloc((size_t)ny * es), *y1 = malloc((size_t)ny * es);
    void *gx = malloc((size_t)nx * es);
    em_pool_tap *am0 = malloc((size_t)ny * sizeof *am0), *am1 = malloc((size_t)ny * sizeof *am1);
    s.relu = false;
    cr_assert_eq(em_cpu_max_pool2d(&s, dt, kx, y0, am0), EM_KERNEL_OK);
    s.relu = true;
    cr_assert_eq(em_cpu_max_pool2d(&s, dt, kx, y1, am1), EM_KERNEL_OK);
    int64_t kept = 0;
    for (int64_t i = 0; i < ny; i++) {
        const double v0 = dt == EM_F32 ? ((float *)y0)[i] : ((double *)y0)[i];
        const double v1 = dt == EM_F32 ? ((float *)y1)[i] : ((double *)y1)[i];
        cr_assert_eq(v1, v0 < 0 ? 0 : v0, "relu y[%ld]: %g from %g", (long)i, v1, v0);
        cr_assert_eq(am1[i], v0 > 0 ? am0[i] : -1, "relu argmax[%ld]: %d, max %g at tap %d",
                     (long)i, am1[i], v0, am0[i]);
        kept += am1[i] >= 0;
    }
    cr_assert(kept > 0 && kept < ny, "%ld of %ld maxima positive: no mix to test", (long)kept,
              (long)ny);
    memset(gx, 0xff, (size_t)nx * es);
    cr_assert_eq(em_cpu_max_pool2d_grad(&s, dt, kgy, am1, gx), EM_KERNEL_OK);
    double *want = calloc((size_t)nx, sizeof(double));
    for (int64_t o = 0; o < ny; o++)
        if (am1[o] >= 0)
            want[o / hwo * hw + tap_input(&s, o, am1[o])] +=
                dt == EM_F32 ? (double)((float *)kgy)[o] : gy[o];
    /* overlapping windows add in the kernel's precision */
    assert_close("relu max gx", want, gx, dt == EM_F32, nx, dt == EM_F32 ? 1e-6 : 1e-14);
    if (dt == EM_F32) {
        free(kx);
        free(kgy);
    }
    void *bufs[] = {x, gy, y0, y1, gx, am0, am1, want};
    for (int i = 0; i < 8; i++)
        free(bufs[i]);
}

static void check_pool(em_pool2d_shape s)
{
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.h_out * s.w_out;
    double *x = tied_negative(nx), *gy = random_f64(ny);
    double *y = malloc((size_t)ny * 8), *gx = malloc((size_t)nx * 8);
    em_pool_tap *am = malloc((size_t)ny * sizeof *am), *kam = malloc((size_t)ny * sizeof *kam);
    for (int f32 = 0; f32 < 2; f32++) {
        em_dtype dt = f32 ? EM_F32 : EM_F64;
        size_t es = f32 ? 4 : 8;
        void *kx = f32 ? (void *)to_f32(x, nx) : x, *kgy = f32 ? (void *)to_f32(gy, ny) : gy;
        void *ky = malloc((size_t)ny * es), *kgx = malloc((size_t)nx * es);
        double tol = f32 ? 1e-6 : 1e-14;

        max_pool_naive(&s, x, y, am, gy, gx);
        cr_assert_eq(em_cpu_max_pool2d(&s, dt, kx, ky, kam), EM_KERNEL_OK);
        assert_close("max y", y, ky, f32, ny, 0);
        for (int64_t i = 0; i < ny; i++)
            cr_assert_eq(kam[i], am[i], "argmax[%ld]: tap %d, first max at tap %d", (long)i,
                         kam[i], am[i]);
        memset(kgx, 0xff, (size_t)nx * es);
        cr_assert_eq(em_cpu_max_pool2d_grad(&s, dt, kgy, kam, kgx), EM_KERNEL_OK);
        assert_close("max gx", gx, kgx, f32, nx, tol);
        check_relu_pool(s, dt);

        for (int inc = 0; inc < 2; inc++) {
            s.count_include_pad = inc;
            avg_pool_naive(&s, x, y, gy, gx);
            cr_assert_eq(em_cpu_avg_pool2d(&s, dt, kx, ky), EM_KERNEL_OK);
            assert_close("avg y", y, ky, f32, ny, tol);
            memset(kgx, 0xff, (size_t)nx * es);
            cr_assert_eq(em_cpu_avg_pool2d_grad(&s, dt, kgy, kgx), EM_KERNEL_OK);
            assert_close("avg gx", gx, kgx, f32, nx, tol);
        }
        if (f32) {
            free(kx);
            free(kgy);
        }
        free(ky);
        free(kgx);
    }
    free(x);
    free(gy);
    free(y);
    free(gx);
    free(am);
    free(kam);
}

Test(cpu_pool, plain_2x2)
{
    check_pool(pool_shape(2, 3, 8, 6, 4, 3, 2, 2, 0, false));
}

Test(cpu_pool, padded_overlapping_windows)
{
    check_pool(pool_shape(2, 2, 7, 9, 4, 5, 3, 2, 1, false));
}

Test(cpu_pool, ceil_mode_last_window_clipped)
{
    /* H = 6, k = 3, s = 2, no padding: a third window starting at 4 covers 2 rows only */
    check_pool(pool_shape(1, 2, 6, 6, 3, 3, 3, 2, 0, true));
    check_pool(pool_shape(1, 2, 6, 6, 3, 3, 3, 2, 1, true));
}

Test(cpu_pool, many_planes_threaded)
{
    check_pool(pool_shape(16, 32, 14, 14, 7, 7, 2, 2, 0, false));
}

/* The 2x2 stride-2 kernels at every row width up to past two AVX-512 vectors, even and odd input
 * widths and heights (an odd last row or column is in no window: its gradient is 0), on each
 * SIMD path this CPU has (masked row tails in AVX-512, the overlapping last block in SSE, the
 * dense gradient in both). */
Test(cpu_pool, two_by_two_rows_of_every_width_on_each_path)
{
    for (int wide = 0; wide < (em_cpu_has_avx512() ? 2 : 1); wide++) {
        em_cpu_set_avx512(wide);
        for (int64_t w_out = 1; w_out <= 35; w_out++)
            check_pool(pool_shape(2, 2, 6 + w_out % 2, 2 * w_out + w_out / 3 % 2, 3, w_out, 2, 2,
                                  0, false));
    }
    em_cpu_set_avx512(true);
}

Test(cpu_pool, max_pool_values_by_hand)
{
    /* one 3x3 plane, 2x2 windows, stride 1: ties resolve to the first in row-major order */
    float x[9] = {1, 5, 5, 2, 5, 0, 9, 9, 3}, y[4];
    em_pool_tap am[4];
    em_pool2d_shape s = pool_shape(1, 1, 3, 3, 2, 2, 2, 1, 0, false);
    cr_assert_eq(em_cpu_max_pool2d(&s, EM_F32, x, y, am), EM_KERNEL_OK);
    float want[4] = {5, 5, 9, 9};
    em_pool_tap want_am[4] = {1, 0, 2, 2}; /* taps: (0,1) of each top window, (1,0) below */
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(y[i], want[i]);
        cr_assert_eq(am[i], want_am[i]);
    }
    float gy[4] = {1, 2, 3, 4}, gx[9];
    cr_assert_eq(em_cpu_max_pool2d_grad(&s, EM_F32, gy, am, gx), EM_KERNEL_OK);
    float want_gx[9] = {0, 3, 0, 0, 0, 0, 3, 4, 0};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(gx[i], want_gx[i]);
}

Test(cpu_pool, nan_propagates_first_nan_kept)
{
    /* windows inside the plane (fast path) and padded windows (general path) agree */
    float x[16] = {1, NAN, 3, 4, NAN, 2, 0, 9, 5, 5, 5, 5, 5, 5, 5, 5}, y[9];
    em_pool_tap am[9];
    em_pool2d_shape s = pool_shape(1, 1, 4, 4, 2, 2, 2, 2, 0, false);
    cr_assert_eq(em_cpu_max_pool2d(&s, EM_F32, x, y, am), EM_KERNEL_OK);
    cr_assert(isnan(y[0]));
    cr_assert_eq(am[0], 1); /* the NaN at (0, 1) */
    cr_assert_eq(y[1], 9.0f);
    cr_assert_eq(am[1], 3); /* (1, 3) */
    cr_assert_eq(am[2], 0); /* (2, 0), the first of four 5s */
    s = pool_shape(1, 1, 4, 4, 3, 3, 2, 2, 1, false);
    cr_assert_eq(em_cpu_max_pool2d(&s, EM_F32, x, y, am), EM_KERNEL_OK);
    cr_assert_eq(y[0], 1.0f);
    cr_assert(isnan(y[1]));
    cr_assert_eq(am[1], 2); /* (0, 1) in the window at (-1, 1) */
    cr_assert(isnan(y[3]));
    cr_assert_eq(am[3], 1); /* (1, 0) in the window at (1, -1) */
}

Test(cpu_pool, half_types_through_f32)
{
    uint16_t x[16], y[4];
    for (int i = 0; i < 16; i++)
        x[i] = em_f32_to_f16((float)i);
    em_pool2d_shape s = pool_shape(1, 1, 4, 4, 2, 2, 2, 2, 0, false);
    cr_assert_eq(em_cpu_avg_pool2d(&s, EM_F16, x, y), EM_KERNEL_OK);
    float want[4] = {2.5f, 4.5f, 10.5f, 12.5f};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(em_f16_to_f32(y[i]), want[i]);
    cr_assert_eq(em_cpu_avg_pool2d(&s, EM_I64, x, y), EM_KERNEL_UNSUPPORTED);
}

Test(cpu_pool, window_2x2_stride_2_lane_path_odd_sizes)
{
    /* widths whose outputs fill SIMD blocks of 4 exactly, with a tail, or not at all; odd H and
     * W drop their last row and column like PyTorch's floor mode */
    check_pool(pool_shape(2, 3, 9, 8, 4, 4, 2, 2, 0, false));
    check_pool(pool_shape(1, 2, 6, 11, 3, 5, 2, 2, 0, false));
    check_pool(pool_shape(3, 1, 4, 19, 2, 9, 2, 2, 0, false));
}

Test(cpu_pool, window_2x2_stride_2_nan_and_ties_in_every_lane)
{
    /* one 2x10 plane, five windows: NaN in the last tap, NaN first, all tied, a later NaN after
     * an earlier one, and a plain maximum in the third tap */
    float x[20] = {1, 2, 0, 0, 7, 7, 0, 0, 3, 1,
                   4, NAN, NAN, 9, 7, 7, NAN, NAN, 9, 2};
    x[6] = NAN;
    float y[5];
    em_pool_tap am[5];
    em_pool2d_shape s = pool_shape(1, 1, 2, 10, 1, 5, 2, 2, 0, false);
    cr_assert_eq(em_cpu_max_pool2d(&s, EM_F32, x, y, am), EM_KERNEL_OK);
    em_pool_tap want_am[5] = {3, 2, 0, 0, 2}; /* plane indices 11, 12, 4, 6, 18 */
    for (int i = 0; i < 5; i++)
        cr_assert_eq(am[i], want_am[i], "window %d: tap %d, want %d", i, am[i], want_am[i]);
    cr_assert(isnan(y[0]) && isnan(y[1]) && isnan(y[3]));
    cr_assert_eq(y[2], 7.0f);
    cr_assert_eq(y[4], 9.0f);
}

/* One case of bf16_2x2_matches_f32_bit_for_bit. */
static void check_bf16_2x2(int64_t w_out, int relu)
{
    em_pool2d_shape s = pool_shape(2, 2, 6 + w_out % 2, 2 * w_out + w_out / 3 % 2, 3,
                                   w_out, 2, 2, 0, false);
    s.relu = relu;
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.h_out * s.w_out;
    uint16_t *xh = malloc(2 * (size_t)nx), *yh = malloc(2 * (size_t)ny);
    uint16_t *gyh = malloc(2 * (size_t)ny), *gxh = malloc(2 * (size_t)nx);
    float *xf = malloc(4 * (size_t)nx), *yf = malloc(4 * (size_t)ny);
    float *gyf = malloc(4 * (size_t)ny), *gxf = malloc(4 * (size_t)nx);
    em_pool_tap *amf = malloc(sizeof *amf * (size_t)ny), *amh = malloc(sizeof *amh *
                                                                       (size_t)ny);
    for (int64_t i = 0; i < nx; i++) { /* ties, zeros, negatives and a NaN now and then */
        xh[i] = em_f32_to_bf16(i % 37 == 5 ? NAN : (float)floor(rnd() * 3) * 0.5f);
        xf[i] = em_bf16_to_f32(xh[i]);
    }
    for (int64_t i = 0; i < ny; i++) {
        gyh[i] = em_f32_to_bf16((float)rnd());
        gyf[i] = em_bf16_to_f32(gyh[i]);
    }
    cr_assert_eq(em_cpu_max_pool2d(&s, EM_F32, xf, yf, amf), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_max_pool2d(&s, EM_BF16, xh, yh, amh), EM_KERNEL_OK);
    for (int64_t i = 0; i < ny; i++) {
        cr_assert_eq(yh[i], em_f32_to_bf16(yf[i]), "w_out %ld relu %d y[%ld]",
                     (long)w_out, relu, (long)i);
        cr_assert_eq(amh[i], amf[i], "w_out %ld relu %d tap[%ld]", (long)w_out, relu,
                     (long)i);
    }
    memset(gxh, 0xff, 2 * (size_t)nx);
    cr_assert_eq(em_cpu_max_pool2d_grad(&s, EM_F32, gyf, amf, gxf), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_max_pool2d_grad(&s, EM_BF16, gyh, amh, gxh), EM_KERNEL_OK);
    for (int64_t i = 0; i < nx; i++)
        cr_assert_eq(gxh[i], em_f32_to_bf16(gxf[i]), "w_out %ld relu %d gx[%ld]",
                     (long)w_out, relu, (long)i);
    void *bufs[] = {xh, yh, gyh, gxh, xf, yf, gyf, gxf, amf, amh};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
}

/* bf16 2x2 stride-2 pooling (in AVX-512 lanes where the CPU has them, and in SSE lanes) gives
 * the f32 kernel's results on the same values bit for bit: maxima with ties and NaN, taps, relu,
 * and the gradient, at every row width up to past two vectors, odd heights and widths too. */
Test(cpu_pool, bf16_2x2_matches_f32_bit_for_bit)
{
    for (int wide = 0; wide < (em_cpu_has_avx512() ? 2 : 1); wide++) {
        em_cpu_set_avx512(wide);
        for (int64_t w_out = 1; w_out <= 35; w_out++)
            for (int relu = 0; relu < 2; relu++)
                check_bf16_2x2(w_out, relu);
    }
    em_cpu_set_avx512(true);
}
