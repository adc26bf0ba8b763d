/* The Winograd F(4x4, 3x3) convolution against the naive f64 loops and the direct f32 kernel:
 * forward and both gradients on random shapes (sizes not multiples of the 4x4 tile, padding 0
 * to 2, batches below, at and above the 16 images a chunk holds), the same bits on one thread
 * and two and from the AVX2 and AVX-512 transforms, and which shapes cpu_conv.c hands it. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "backend_cpu/cpu_conv_direct_internal.h"
#include "backend_cpu/cpu_conv_winograd_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "helpers/conv_naive.h"

/* Winograd's f32 rounding error, max |error| / max |value| of a buffer. F(4,3)'s transforms
 * multiply by up to 8 (A) and 5 (B) and add up to 6 terms each way, so the error is ~100 times
 * f32's 6e-8: measured on these shapes at most 5.1e-6 (y), 5.3e-6 (gx), 3.7e-6 (gw, a sum over
 * every position of the batch) against the f64 loops. 2e-5 leaves a factor of 3.8; a wrong
 * transform entry or a dropped edge tile is off by 1e-2 or more. */
#define WG_TOL 2e-5

static uint64_t rng_state = 4242;

static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* v (n) random in [-1, 1); f (n) the same values in f32. */
static void random_pair(int64_t n, double **v, float **f)
{
    *v = malloc((size_t)n * sizeof(double));
    *f = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        (*v)[i] = rnd();
        (*f)[i] = (float)(*v)[i];
    }
}

/* max |got - want| / max |want|, want given in f64 (want64) or f32 (want32) */
static double rel_error(const float *got, const double *want64, const float *want32, int64_t n)
{
    double err = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        const double want = want64 ? want64[i] : want32[i];
        err = fmax(err, fabs(got[i] - want));
        scale = fmax(scale, fabs(want));
    }
    return err / scale;
}

/* rel_error of got (n) within WG_TOL, or a message naming the shape and the buffer */
static void check_close(const em_conv2d_shape *s, const char *what, const float *got,
                        const double *want64, const float *want32, int64_t n)
{
    const double e = rel_error(got, want64, want32, n);
    cr_assert(e <= WG_TOL, "n %ld c %ld->%ld %ldx%ld pad %ld,%ld: %s off by %.2g", (long)s->n,
              (long)s->c_in, (long)s->c_out, (long)s->h, (long)s->w, (long)s->pad[0],
              (long)s->pad[1], what, e);
}

/* The Winograd outputs of one shape: forward (with bias) and both gradients. */
typedef struct {
    float *y, *gx, *gw, *gb;
} wg_outputs;

static wg_outputs run_winograd(const em_conv2d_shape *s, const float *x, const float *w,
                               const float *b, const float *gy)
{
    wg_outputs o = {malloc((size_t)conv_y_count(s) * 4), malloc((size_t)conv_x_count(s) * 4),
                    malloc((size_t)conv_w_count(s) * 4), malloc((size_t)s->c_out * 4)};
    cr_assert_eq(em_cpu_conv_winograd_forward(s, EM_F32, x, w, b, o.y), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv_winograd_grad_input(s, EM_F32, gy, w, o.gx), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv_winograd_grad_weight(s, EM_F32, gy, x, o.gw, o.gb), EM_KERNEL_OK);
    return o;
}

static void free_outputs(wg_outputs o)
{
    free(o.y);
    free(o.gx);
    free(o.gw);
    free(o.gb);
}

/* Forward (with bias) and both gradients of s by Winograd against the f64 loops and, where
 * the direct kernels take s, against them; on an AVX-512 CPU both bodies of the transforms,
 * which must give the same bits (the same multiply-adds in the same order, 16 lanes either as
 * one register or as two). */
static void check_winograd(em_conv2d_shape s)
{
    if (!em_cpu_has_avx2())
        cr_skip_test("Winograd needs AVX2 and FMA");
    cr_assert(em_cpu_conv_winograd_can(&s, true));
    const int64_t nx = conv_x_count(&s), ny = conv_y_count(&s), nw = conv_w_count(&s);
    double *x, *w, *b, *gy;
    float *fx, *fw, *fb, *fgy;
    random_pair(nx, &x, &fx);
    random_pair(nw, &w, &fw);
    random_pair(s.c_out, &b, &fb);
    random_pair(ny, &gy, &fgy);
    double *y = malloc((size_t)ny * 8), *gx = malloc((size_t)nx * 8);
    double *gw = malloc((size_t)nw * 8), *gb = malloc((size_t)s.c_out * 8);
    conv_naive(&s, x, w, b, y, NULL, NULL, NULL, NULL);
    conv_naive(&s, x, w, NULL, NULL, gy, gx, gw, gb);
    em_cpu_set_avx512(false);
    const wg_outputs o = run_winograd(&s, fx, fw, fb, fgy);
    em_cpu_set_avx512(true);
    check_close(&s, "y", o.y, y, NULL, ny);
    check_close(&s, "gx", o.gx, gx, NULL, nx);
    check_close(&s, "gw", o.gw, gw, NULL, nw);
    check_close(&s, "gb", o.gb, gb, NULL, s.c_out);
    if (em_cpu_has_avx512()) {
        const wg_outputs o512 = run_winograd(&s, fx, fw, fb, fgy);
        cr_assert_arr_eq(o512.y, o.y, (size_t)ny * 4);
        cr_assert_arr_eq(o512.gx, o.gx, (size_t)nx * 4);
        cr_assert_arr_eq(o512.gw, o.gw, (size_t)nw * 4);
        cr_assert_arr_eq(o512.gb, o.gb, (size_t)s.c_out * 4);
        free_outputs(o512);
    }
    float *dy = malloc((size_t)ny * 4), *dgx = malloc((size_t)nx * 4);
    float *dgw = malloc((size_t)nw * 4), *dgb = malloc((size_t)s.c_out * 4);
    if (em_cpu_conv_direct_grad_input_fits(&s)) {
        cr_assert_eq(em_cpu_conv_direct_forward(&s, EM_F32, fx, fw, fb, dy), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_conv_direct_grad_input(&s, EM_F32, fgy, fw, dgx), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_conv_direct_grad_weight(&s, 4, EM_F32, fgy, fx, dgw, dgb), EM_KERNEL_OK);
        check_close(&s, "y against direct", o.y, NULL, dy, ny);
        check_close(&s, "gx against direct", o.gx, NULL, dgx, nx);
        check_close(&s, "gw against direct", o.gw, NULL, dgw, nw);
    }
    free_outputs(o);
    double *bufs[] = {x, w, b, gy, y, gx, gw, gb};
    float *fbufs[] = {fx, fw, fb, fgy, dy, dgx, dgw, dgb};
    for (int i = 0; i < 8; i++) {
        free(bufs[i]);
        free(fbufs[i]);
    }
}

Test(cpu_conv_winograd, cnn_layer_shape)
{
    check_winograd(conv_test_shape(20, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1));
}

Test(cpu_conv_winograd, edges_padding_and_partial_chunks)
{
    for (int i = 0; i < 12; i++) {
        const int64_t n = 1 + (int64_t)((rnd() + 1) * 10), c_in = 1 + (int64_t)((rnd() + 1) * 12);
        const int64_t c_out = 1 + (int64_t)((rnd() + 1) * 12);
        const int64_t h = 1 + (int64_t)((rnd() + 1) * 9), w = 1 + (int64_t)((rnd() + 1) * 9);
        const int64_t ph = i % 3, pw = (i / 3) % 3;
        if (h + 2 * ph < 3 || w + 2 * pw < 3)
            continue;
        check_winograd(conv_test_shape(n, c_in, h, w, c_out, 3, 3, 1, 1, ph, pw, 1, 1, 1));
    }
    check_winograd(conv_test_shape(33, 3, 9, 13, 5, 3, 3, 1, 1, 1, 2, 1, 1, 1));
    check_winograd(conv_test_shape(2, 4, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1));
    /* input channels a multiple of 16: grad_weight's transposed transforms (one group, three) */
    check_winograd(conv_test_shape(19, 16, 9, 7, 5, 3, 3, 1, 1, 1, 0, 1, 1, 1));
    check_winograd(conv_test_shape(3, 48, 6, 11, 3, 3, 3, 1, 1, 2, 1, 1, 1, 1));
}

/* Every output is computed in one fixed order, and grad_weight adds fixed blocks in order,
 * whatever the thread count. */
Test(cpu_conv_winograd, same_bits_on_one_thread_and_two)
{
    const em_conv2d_shape s = conv_test_shape(40, 16, 10, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    const int64_t nx = conv_x_count(&s), ny = conv_y_count(&s), nw = conv_w_count(&s);
    double *x, *w, *gy;
    float *fx, *fw, *fgy, *y[2], *gw[2];
    random_pair(nx, &x, &fx);
    random_pair(nw, &w, &fw);
    random_pair(ny, &gy, &fgy);
    const int threads = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        y[t] = malloc((size_t)ny * 4);
        gw[t] = malloc((size_t)nw * 4);
        omp_set_num_threads(t + 1);
        cr_assert_eq(em_cpu_conv_winograd_forward(&s, EM_F32, fx, fw, NULL, y[t]), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_conv_winograd_grad_weight(&s, EM_F32, fgy, fx, gw[t], NULL),
                     EM_KERNEL_OK);
    }
    omp_set_num_threads(threads);
    cr_assert_arr_eq(y[0], y[1], (size_t)ny * 4);
    cr_assert_arr_eq(gw[0], gw[1], (size_t)nw * 4);
    void *bufs[] = {x, w, gy, fx, fw, fgy, y[0], y[1], gw[0], gw[1]};
    for (int i = 0; i < 10; i++)
        free(bufs[i]);
}

Test(cpu_conv_winograd, which_shapes_it_takes)
{
    if (!em_cpu_has_avx2())
        cr_skip_test("Winograd needs AVX2 and FMA");
    const em_conv2d_shape cnn3 = conv_test_shape(64, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    const em_conv2d_shape cnn0 = conv_test_shape(64, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    cr_assert(em_cpu_conv_winograd_chosen(&cnn3, false));
    cr_assert(em_cpu_conv_winograd_chosen(&cnn3, true));
    cr_assert_not(em_cpu_conv_winograd_chosen(&cnn0, false));
    const em_conv2d_shape cnn3_b1 = conv_test_shape(1, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    cr_assert_not(em_cpu_conv_winograd_chosen(&cnn3_b1, false)); /* 15 of 16 lanes empty */
    const em_conv2d_shape no[] = {
        conv_test_shape(4, 16, 9, 9, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1),
        conv_test_shape(4, 16, 9, 9, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1),
        conv_test_shape(4, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2),
        conv_test_shape(4, 16, 9, 9, 16, 5, 5, 1, 1, 2, 2, 1, 1, 1),
        conv_test_shape(4, 16, 9, 9, 16, 3, 1, 1, 1, 1, 0, 1, 1, 1),
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        cr_assert_not(em_cpu_conv_winograd_can(&no[i], false), "shape %zu", i);
    const em_conv2d_shape wide = conv_test_shape(4, 16, 9, 9, 16, 3, 3, 1, 1, 3, 3, 1, 1, 1);
    cr_assert(em_cpu_conv_winograd_can(&wide, false));
    cr_assert_not(em_cpu_conv_winograd_can(&wide, true));
}
