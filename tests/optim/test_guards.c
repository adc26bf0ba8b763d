/* Stability guards: total grad norms of order 1, 2, 3, 0.5 and inf against hand-computed
 * values, clipping by norm and by value, the non-finite error, a planted NaN named by its
 * parameter, and the z-score detector flagging a planted spike and not a normal sequence. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ember.h"

/* a (2) with grad [3, -4]; b (2, 2) with grad [[1, 2], [-2, 0]]; c (3) without grad */
typedef struct {
    em_tensor *p[3];
} params3;

static params3 make_params(void)
{
    params3 r = {{em_zeros(EM_SHAPE(2), EM_F32), em_zeros(EM_SHAPE(2, 2), EM_F32),
                  em_zeros(EM_SHAPE(3), EM_F32)}};
    r.p[0]->grad = em_from_data(EM_SHAPE(2), EM_F32, (float[]){3, -4});
    r.p[1]->grad = em_from_data(EM_SHAPE(2, 2), EM_F32, (float[]){1, 2, -2, 0});
    return r;
}

static void free_params(params3 r)
{
    for (int i = 0; i < 3; i++)
        em_release(r.p[i]);
}

static void grads_of(params3 r, float *out) /* 6 values */
{
    em_copy_to_host(r.p[0]->grad, EM_F32, out);
    em_copy_to_host(r.p[1]->grad, EM_F32, out + 2);
}

Test(guards, grad_norms_by_hand)
{
    params3 r = make_params();
    cr_assert_float_eq(em_grad_norm(r.p, 3, 2.0), sqrt(34.0), 1e-12);
    cr_assert_float_eq(em_grad_norm(r.p, 3, 1.0), 12.0, 1e-12);
    cr_assert_float_eq(em_grad_norm(r.p, 3, INFINITY), 4.0, 1e-12);
    cr_assert_float_eq(em_grad_norm(r.p, 3, 3.0), cbrt(108.0), 1e-12);
    double half = sqrt(3.0) + 2.0 + 1.0 + 2.0 * sqrt(2.0);
    cr_assert_float_eq(em_grad_norm(r.p, 3, 0.5), half * half, 1e-11);
    cr_assert_eq(em_grad_norm(r.p, 0, 2.0), 0.0);
    /* a non-contiguous grad and an f64 one */
    em_tensor *t = em_zeros(EM_SHAPE(2, 2), EM_F32);
    em_tensor *base = em_from_data(EM_SHAPE(2, 2), EM_F32, (float[]){1, 2, -2, 0});
    t->grad = em_transpose(base, 0, 1);
    em_tensor *d = em_zeros(EM_SHAPE(1), EM_F64);
    d->grad = em_from_data(EM_SHAPE(1), EM_F64, (double[]){2});
    em_tensor *mixed[3] = {r.p[0], t, d};
    cr_assert_float_eq(em_grad_norm(mixed, 3, 2.0), sqrt(38.0), 1e-12);
    em_error_clear();
    cr_assert(isnan(em_grad_norm(r.p, 3, 0.0)));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    em_release(base);
    em_release(t);
    em_release(d);
    free_params(r);
}

Test(guards, large_grad_norm_matches_a_reference_loop)
{
    const int64_t n = 300001;
    em_tensor *p = em_zeros(EM_SHAPE(n), EM_F32);
    p->grad = em_empty(EM_SHAPE(n), EM_F32);
    float *g = em_data_ptr(p->grad);
    double s1 = 0, s2 = 0, s3 = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        g[i] = (float)sin((double)i * 0.37) * (float)(1 + i % 7);
        s1 += fabs((double)g[i]);
        s2 += (double)g[i] * g[i];
        s3 += pow(fabs((double)g[i]), 3.0);
        mx = fmax(mx, fabs((double)g[i]));
    }
    /* f32 blocks of 256 inside: f32 rounding of each block's sum */
    cr_assert_float_eq(em_grad_norm(&p, 1, 1.0), s1, 1e-6 * s1);
    cr_assert_float_eq(em_grad_norm(&p, 1, 2.0), sqrt(s2), 1e-6 * sqrt(s2));
    cr_assert_float_eq(em_grad_norm(&p, 1, 3.0), cbrt(s3), 1e-12 * cbrt(s3));
    cr_assert_eq(em_grad_norm(&p, 1, INFINITY), mx);
    g[123456] = NAN;
    cr_assert(isnan(em_grad_norm(&p, 1, INFINITY)));
    cr_assert(isnan(em_grad_norm(&p, 1, 2.0)));
    em_release(p);
}

Test(guards, clip_grad_norm_scales_only_above_max)
{
    params3 r = make_params();
    float before[6], after[6];
    grads_of(r, before);
    cr_assert_float_eq(em_clip_grad_norm(r.p, 3, 10.0, 2.0, true), sqrt(34.0), 1e-12);
    grads_of(r, after);
    cr_assert(!memcmp(before, after, sizeof before), "below max_norm nothing changes");

    double total = em_clip_grad_norm(r.p, 3, 1.0, 2.0, true);
    cr_assert_float_eq(total, sqrt(34.0), 1e-12);
    grads_of(r, after);
    double coef = 1.0 / (sqrt(34.0) + 1e-6);
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(after[i], before[i] * coef, 1e-6, "element %d", i);
    cr_assert_float_eq(em_grad_norm(r.p, 3, 2.0), 1.0, 1e-6);
    free_params(r);

    r = make_params();
    cr_assert_float_eq(em_clip_grad_norm(r.p, 3, 2.0, INFINITY, false), 4.0, 1e-12);
    grads_of(r, after);
    cr_assert_float_eq(after[1], -4.0 * 2.0 / (4.0 + 1e-6), 1e-6);
    cr_assert_float_eq(after[2], 1.0 * 2.0 / (4.0 + 1e-6), 1e-6);
    free_params(r);
}

Test(guards, clip_grad_norm_nonfinite)
{
    params3 r = make_params();
    ((float *)em_data_ptr(r.p[1]->grad))[1] = NAN;
    float before[6], after[6];
    grads_of(r, before);
    em_error_clear();
    cr_assert(isnan(em_clip_grad_norm(r.p, 3, 1.0, 2.0, true)));
    cr_assert_eq(em_error_status(), EM_ERR_NUMERIC);
    cr_assert(strstr(em_error(), "em_clip_grad_norm: the total norm of order 2 of the gradients "
                                 "is nan") != NULL, "%s", em_error());
    em_error_clear();
    grads_of(r, after);
    cr_assert(!memcmp(before, after, sizeof before), "the error leaves the grads alone");
    /* without the error: PyTorch's NaN coefficient reaches every grad */
    cr_assert(isnan(em_clip_grad_norm(r.p, 3, 1.0, 2.0, false)));
    cr_assert(!em_has_error());
    grads_of(r, after);
    for (int i = 0; i < 6; i++)
        cr_assert(isnan(after[i]));
    free_params(r);
}

Test(guards, clip_grad_value_and_module_forms)
{
    params3 r = make_params();
    cr_assert_eq(em_clip_grad_value(r.p, 3, 1.5), EM_OK);
    float g[6];
    grads_of(r, g);
    float want[6] = {1.5f, -1.5f, 1, 1.5f, -1.5f, 0};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(g[i], want[i], "element %d: %g", i, g[i]);
    cr_assert_eq(em_clip_grad_value(r.p, 3, -1), EM_ERR_ARG);
    em_error_clear();
    free_params(r);

    em_manual_seed(1);
    em_module *m = em_linear_layer(2, 2, true);
    em_optim *o = em_sgd(m, (em_sgd_opts){0});
    em_module_find(m, "weight")->grad = em_from_data(EM_SHAPE(2, 2), EM_F32,
                                                     (float[]){3, -4, 0, 0});
    em_module_find(m, "bias")->grad = em_from_data(EM_SHAPE(2), EM_F32, (float[]){12, 0});
    cr_assert_float_eq(em_clip_grad_norm_optim(o, 100, 2.0, true), 13.0, 1e-12);
    cr_assert_float_eq(em_clip_grad_norm_module(m, 6.5, 2.0, true), 13.0, 1e-12);
    cr_assert_float_eq(em_clip_grad_norm_module(m, 100, 2.0, true), 6.5, 1e-5);
    cr_assert_eq(em_clip_grad_value_module(m, 1.0), EM_OK);
    cr_assert_eq(em_grad_norm((em_tensor *[]){em_module_find(m, "bias")}, 1, INFINITY), 1.0);
    em_optim_free(o);
    em_module_free(m);
}

/* On the CPU the clipping that stays on the device is em_clip_grad_norm_optim: the same grads bit
 * for bit, and the norm (13, then 6.5 after halving) as a 0-d f64 tensor. */
Test(guards, device_clipping_on_the_cpu_is_the_host_clipping)
{
    em_manual_seed(1);
    em_module *m = em_linear_layer(2, 2, true);
    em_optim *o = em_sgd(m, (em_sgd_opts){0});
    em_tensor *w = em_module_find(m, "weight"), *b = em_module_find(m, "bias");
    float wg[4] = {3, -4, 0, 0}, bg[2] = {12, 0};
    w->grad = em_from_data(EM_SHAPE(2, 2), EM_F32, wg);
    b->grad = em_from_data(EM_SHAPE(2), EM_F32, bg);
    em_tensor *total = NULL;
    cr_assert_eq(em_clip_grad_norm_optim_device(o, 6.5, 2.0, &total), EM_OK, "%s", em_error());
    cr_assert(total && total->ndim == 0 && total->dtype == EM_F64 && total->device == EM_CPU);
    cr_assert_eq(em_item(total), 13.0);
    float got[6];
    memcpy(got, em_data_ptr(w->grad), sizeof wg);
    memcpy(got + 4, em_data_ptr(b->grad), sizeof bg);
    em_release(w->grad);
    em_release(b->grad);
    w->grad = em_from_data(EM_SHAPE(2, 2), EM_F32, wg);
    b->grad = em_from_data(EM_SHAPE(2), EM_F32, bg);
    cr_assert_eq(em_clip_grad_norm_optim(o, 6.5, 2.0, false), 13.0);
    cr_assert(!memcmp(got, em_data_ptr(w->grad), sizeof wg) &&
              !memcmp(got + 4, em_data_ptr(b->grad), sizeof bg), "the same bits as the host's");
    cr_assert_float_eq(got[4], 12 * 6.5 / (13 + 1e-6), 1e-6);
    em_release(total);
    cr_assert_eq(em_clip_grad_norm_optim_device(o, 100, 2.0, NULL), EM_OK);
    cr_assert_float_eq(em_grad_norm((em_tensor *[]){w, b}, 2, 2.0), 6.5, 1e-5);
    cr_assert_eq(em_clip_grad_norm_optim_device(o, -1, 2.0, NULL), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "em_clip_grad_norm_optim_device: max_norm must be >= 0"),
              "%s", em_error());
    em_error_clear();
    em_optim_free(o);
    em_module_free(m);
}

/* One forward/backward of a small MLP ("0.weight", "0.bias", "2.weight", "2.bias"). */
static em_tensor *mlp_backward(em_module *m)
{
    em_tensor *x = em_ones(EM_SHAPE(5, 3), EM_F32), *y = em_zeros(EM_SHAPE(5, 2), EM_F32);
    em_tensor *loss = em_mse_loss(em_forward(m, x), y, EM_REDUCTION_MEAN);
    cr_assert(loss && em_backward(loss) == EM_OK, "%s", em_error());
    return loss;
}

Test(guards, planted_nan_is_named_and_skipped)
{
    em_manual_seed(2);
    em_module *m = em_sequential(3, em_linear_layer(3, 4, true), em_relu_layer(),
                                 em_linear_layer(4, 2, true));
    em_guard *g = em_guard_new(m, (em_guard_opts){0});
    cr_assert_not_null(g, "%s", em_error());
    em_guard_report r = em_guard_get_report(g);
    cr_assert_eq(r.steps, 0);
    cr_assert_str_eq(r.last_reason, "");

    em_scope_begin();
    em_tensor *loss = mlp_backward(m);
    bool skip = true;
    cr_assert_eq(em_guard_check(g, loss, -1, &skip), EM_OK, "%s", em_error());
    cr_assert(!skip);
    em_param_ref ps[4];
    em_module_parameters(m, ps, 4);
    em_tensor *pt[4] = {ps[0].value, ps[1].value, ps[2].value, ps[3].value};
    r = em_guard_get_report(g);
    cr_assert_float_eq(r.last_grad_norm, em_grad_norm(pt, 4, 2.0), 1e-12);
    cr_assert_eq(r.skipped, 0);

    ((float *)em_data_ptr(em_module_find(m, "2.weight")->grad))[3] = NAN;
    cr_assert_eq(em_guard_check(g, loss, -1, &skip), EM_OK);
    cr_assert(skip);
    r = em_guard_get_report(g);
    cr_assert_eq(r.steps, 2);
    cr_assert_eq(r.skipped, 1);
    cr_assert_eq(r.nonfinite, 1);
    cr_assert_eq(r.last_flag_step, 2);
    cr_assert_str_eq(r.bad_param, "2.weight");
    cr_assert_str_eq(r.last_reason, "grad of '2.weight' is not finite");
    ((float *)em_data_ptr(em_module_find(m, "0.bias")->grad))[0] = INFINITY;
    cr_assert_eq(em_guard_check(g, loss, -1, &skip), EM_OK);
    cr_assert_str_eq(em_guard_get_report(g).bad_param, "0.bias"); /* the first in order */
    em_module_zero_grad(m);

    loss = mlp_backward(m);
    cr_assert_eq(em_guard_check(g, em_scalar(NAN, EM_F32), -1, &skip), EM_OK);
    cr_assert(skip);
    r = em_guard_get_report(g);
    cr_assert_str_eq(r.last_reason, "loss is nan");
    cr_assert_null(r.bad_param);
    cr_assert_eq(em_guard_check(g, em_scalar(-INFINITY, EM_F32), -1, &skip), EM_OK);
    cr_assert_str_eq(em_guard_get_report(g).last_reason, "loss is inf");
    cr_assert_eq(em_guard_check(g, loss, -1, &skip), EM_OK);
    cr_assert(!skip);
    r = em_guard_get_report(g);
    cr_assert_eq(r.steps, 6);
    cr_assert_eq(r.skipped, 4);
    cr_assert_eq(r.nonfinite, 4);
    cr_assert_eq(em_guard_check(g, em_ones(EM_SHAPE(2), EM_F32), -1, &skip), EM_ERR_ARG);
    em_error_clear();
    em_scope_end();
    em_guard_free(g);
    em_module_free(m);
}

/* A decreasing loss with wiggles, as training gives */
static double normal_loss(int t)
{
    return 2.0 * exp(-t / 100.0) + 0.05 * sin(t * 1.7) + 0.03 * sin(t * 0.31);
}

Test(guards, outlier_detector_flags_a_spike_not_a_normal_sequence)
{
    em_outlier *d = em_outlier_new((em_outlier_opts){.window = 50, .threshold = 6,
                                                     .warmup = 20});
    cr_assert_not_null(d);
    double worst = 0;
    for (int t = 0; t < 300; t++) {
        cr_assert(!em_outlier_check(d, normal_loss(t)), "step %d flagged, z = %g", t,
                  em_outlier_last_z(d));
        worst = fmax(worst, em_outlier_last_z(d));
    }
    cr_assert_lt(worst, 3.0);
    em_outlier_free(d);

    d = em_outlier_new((em_outlier_opts){.window = 50, .threshold = 6, .warmup = 20});
    int flagged = 0;
    for (int t = 0; t < 300; t++) {
        bool spike = t == 5 || t == 150;
        bool out = em_outlier_check(d, normal_loss(t) * (spike ? 3.0 : 1.0));
        if (t == 5)
            cr_assert(!out && em_outlier_last_z(d) == 0, "still warming up");
        if (t == 150)
            cr_assert(out && em_outlier_last_z(d) > 6, "z = %g", em_outlier_last_z(d));
        flagged += out;
    }
    cr_assert_eq(flagged, 1);
    cr_assert(em_outlier_check(d, NAN));
    cr_assert_null(em_outlier_new((em_outlier_opts){.window = 10, .warmup = 20}));
    em_error_clear();
    em_outlier_free(d);
}

Test(guards, guard_skips_a_loss_spike_or_only_flags_it)
{
    for (int flag_only = 0; flag_only < 2; flag_only++) {
        em_manual_seed(2);
        em_module *m = em_linear_layer(3, 2, true);
        em_guard *g = em_guard_new(m, (em_guard_opts){.loss_outliers = true,
                                                      .grad_norm_outliers = true,
                                                      .outlier = {.window = 30, .warmup = 10},
                                                      .flag_only = flag_only});
        cr_assert_not_null(g, "%s", em_error());
        em_module_find(m, "weight")->grad = em_ones(EM_SHAPE(2, 3), EM_F32); /* norm sqrt 6 */
        em_scope_begin();
        int skips = 0;
        for (int t = 0; t < 60; t++) {
            bool skip;
            double v = normal_loss(t) * (t == 40 ? 4.0 : 1.0);
            cr_assert_eq(em_guard_check(g, em_scalar(v, EM_F32), -1, &skip), EM_OK);
            skips += skip;
            if (t == 40) {
                em_guard_report r = em_guard_get_report(g);
                cr_assert_eq(r.outliers, 1);
                cr_assert(!strncmp(r.last_reason, "loss outlier: ", 14), "%s", r.last_reason);
                cr_assert_eq(skip, !flag_only);
            }
        }
        em_guard_report r = em_guard_get_report(g);
        cr_assert_eq(r.outliers, 1);
        cr_assert_eq(skips, flag_only ? 0 : 1);
        cr_assert_eq(r.skipped, skips);
        cr_assert_eq(r.last_grad_norm, sqrt(6.0));
        em_scope_end();
        em_guard_free(g);
        em_module_free(m);
    }
}
