/* The ops users reach for first: masked_fill, tril/triu, conv1d, cross entropy over (N, C, d1,
 * ...), topk, multinomial and sampling from logits. Values are PyTorch 1.13's (computed with
 * torch.nn.functional / torch on the inputs below, in f64, and printed to 10 digits); gradients
 * are checked by finite differences in f64. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers/gradcheck.h"
#include "helpers/reference.h"

TestSuite(ops_user, .init = em_scope_begin, .fini = em_scope_end);

/* sin(i a + b) for i = 0.., in f64: the inputs the PyTorch references were computed on */
static em_tensor *wave(em_shape s, double a, double b)
{
    return em_ref_wave(s, a, b, 1);
}

static void expect_values(const em_tensor *t, const double *want, int64_t n, double tol)
{
    cr_assert(em_ref_close(t, want, n, tol), "%s", em_error());
}

/* ---- masked_fill ---- */

static em_tensor *apply_masked_fill(em_tensor *const *x, void *ctx)
{
    return em_masked_fill(x[0], ctx, -7.5);
}

Test(ops_user, masked_fill_values_and_gradient)
{
    em_tensor *t = wave(EM_SHAPE(2, 3), 1, 0);
    bool m[3] = {true, false, true};
    em_tensor *mask = em_from_data(EM_SHAPE(3), EM_BOOL, m); /* broadcast over rows */
    double want[6] = {-7.5, sin(1), -7.5, -7.5, sin(4), -7.5};
    expect_values(em_masked_fill(t, mask, -7.5), want, 6, 0);
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3), -1, 1, 3);
    cr_assert(em_test_gradcheck_default(apply_masked_fill, mask, &x, 1));

    em_tensor *big = em_from_data(EM_SHAPE(2, 2, 3), EM_BOOL, (bool[12]){false});
    cr_assert_null(em_masked_fill(t, big, 0));
    cr_assert_str_eq(em_error(), "em_masked_fill: mask must be bool on t's device and broadcast "
                                 "to t's shape: t [2,3], mask bool [2,2,3]");
    em_error_clear();
    cr_assert_null(em_masked_fill(t, t, 0));
    cr_assert_not_null(strstr(em_error(), "mask must be bool"), "%s", em_error());
    em_error_clear();
}

/* ---- tril / triu ---- */

typedef struct {
    int64_t diagonal;
    bool lower;
} triangle_case;

static em_tensor *apply_triangle(em_tensor *const *x, void *ctx)
{
    const triangle_case *c = ctx;
    return c->lower ? em_tril(x[0], c->diagonal) : em_triu(x[0], c->diagonal);
}

Test(ops_user, tril_triu_as_pytorch)
{
    em_tensor *t = wave(EM_SHAPE(2, 3, 4), 0.7, 0.3);
    static const double tril_m1[24] = {
        0, 0, 0, 0, 0.0415806624, 0, 0, 0, -0.3738766648, 0.3115413635, 0, 0,
        0, 0, 0, 0, -0.8754521747, 0, 0, 0, 0.9867719643, 0.6502878402, 0, 0};
    static const double triu_1[24] = {
        0, 0.8414709848, 0.9916648105, 0.6754631806, 0, 0, -0.9775301177, -0.8834546557,
        0, 0, 0, 0.9893582466, 0, 0.0247754255, -0.6250706489, -0.9809362301,
        0, 0, 0.3274744391, 0.8591618149, 0, 0, 0, -0.6381066823};
    static const double tril_0[24] = {
        0.2955202067, 0, 0, 0, 0.0415806624, -0.6118578909, 0, 0,
        -0.3738766648, 0.3115413635, 0.8504366206, 0, 0.6629692301, 0, 0, 0,
        -0.8754521747, -0.3582292822, 0, 0, 0.9867719643, 0.6502878402, 0.0079631838, 0};
    expect_values(em_tril(t, -1), tril_m1, 24, 1e-10);
    expect_values(em_triu(t, 1), triu_1, 24, 1e-10);
    expect_values(em_tril(t, 0), tril_0, 24, 1e-10);
    const triangle_case cases[] = {{0, true}, {1, false}, {-2, false}};
    for (size_t k = 0; k < 3; k++) {
        em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3, 4), -1, 1, 5 + k);
        cr_expect(em_test_gradcheck_default(apply_triangle, (void *)&cases[k], &x, 1), "case %zu", k);
    }
    cr_assert_null(em_tril(wave(EM_SHAPE(4), 1, 0), 0));
    cr_assert_str_eq(em_error(), "em_tril: needs a tensor of at least 2 dims, not [4]");
    em_error_clear();
}

/* ---- conv1d ---- */

static em_conv1d_opts conv1d_opts = {.stride = 2, .padding = 1, .dilation = 2, .groups = 2};

static em_tensor *apply_conv1d(em_tensor *const *x, void *ctx)
{
    const em_conv1d_opts *o = ctx;
    return em_conv1d(x[0], x[1], x[2], *o);
}

Test(ops_user, conv1d_as_pytorch)
{
    /* F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2) */
    em_tensor *x = wave(EM_SHAPE(2, 4, 9), 0.7, 0.3), *w = wave(EM_SHAPE(6, 2, 3), 1.3, 0.1),
              *b = wave(EM_SHAPE(6), 0.9, 0.5);
    static const double want[48] = {
        1.0960838935, -0.4225439055, -0.6879169843, 0.749406892, 1.651588759, 1.6586560443,
        0.6778698444, 0.1655198447, 0.2009304802, 1.7203209159, 1.8798565309, 0.3872445352,
        -0.7916709674, -0.6081232787, 0.3932243753, 0.7169873099, -0.3693369262, -1.8847103302,
        -1.876378555, -0.3575108512, -0.1771819377, -0.5242548451, -1.5247034102, -1.6845640533,
        1.0641920685, -0.4896622959, -0.6372945522, 0.7871878439, 1.6711704136, 1.628353147,
        0.6290869304, 0.1741939571, 0.234935378, 1.7841692951, 1.8239698935, 0.350399614,
        -0.8059161301, -0.5697084854, 0.4349312698, 0.7025912769, -0.4060537827, -1.9421001431,
        -1.8135203188, -0.3230928725, -0.1668989219, -0.5688626214, -1.5596272195,
        -1.6664539473};
    em_tensor *y = em_conv1d(x, w, b, conv1d_opts);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 6 && y->shape[2] == 4);
    expect_values(y, want, 48, 1e-9);

    em_tensor *leaves[3] = {em_gradcheck_leaf(EM_SHAPE(2, 4, 9), -1, 1, 1),
                            em_gradcheck_leaf(EM_SHAPE(6, 2, 3), -1, 1, 2),
                            em_gradcheck_leaf(EM_SHAPE(6), -1, 1, 3)};
    cr_assert(em_test_gradcheck_default(apply_conv1d, &conv1d_opts, leaves, 3));
    cr_assert_null(em_conv1d(wave(EM_SHAPE(2, 4), 1, 0), w, b, conv1d_opts));
    cr_assert_not_null(strstr(em_error(), "expected x (N, C_in, L)"), "%s", em_error());
    em_error_clear();
}

/* ---- cross entropy over (N, C, d1, d2) ---- */

static em_tensor *ce_target(void)
{
    int64_t t[8] = {0, 2, 1, 1, 2, 0, -100, 1}; /* (2, 2, 2); -100 is ignored */
    return em_from_data(EM_SHAPE(2, 2, 2), EM_I64, t);
}

static em_tensor *apply_ce(em_tensor *const *x, void *ctx)
{
    em_cross_entropy_opts o = {.has_ignore_index = true, .ignore_index = -100,
                               .label_smoothing = 0.1};
    return em_cross_entropy(x[0], ctx, o);
}

Test(ops_user, cross_entropy_over_extra_dims_as_pytorch)
{
    em_tensor *logits = em_requires_grad_(wave(EM_SHAPE(2, 3, 2, 2), 0.9, 0.2), true);
    em_tensor *target = ce_target();
    em_cross_entropy_opts o = {.has_ignore_index = true, .ignore_index = -100};
    static const double none[8] = {1.2408217729, 0.7600349733, 2.0815161505, 0.8985547921,
                                   1.8170337449, 1.7331222165, 0.0, 2.6618945873};
    o.reduction = EM_REDUCTION_NONE;
    em_tensor *l = em_cross_entropy(logits, target, o);
    expect_values(l, none, 8, 1e-9);
    cr_assert(l->ndim == 3 && l->shape[0] == 2 && l->shape[1] == 2 && l->shape[2] == 2);
    o.reduction = EM_REDUCTION_MEAN;
    expect_values(em_cross_entropy(logits, target, o), (double[]){1.5989968911}, 1, 1e-9);
    o.reduction = EM_REDUCTION_SUM;
    expect_values(em_cross_entropy(logits, target, o), (double[]){11.1929782375}, 1, 1e-9);

    o = (em_cross_entropy_opts){.has_ignore_index = true, .ignore_index = -100,
                                .label_smoothing = 0.1};
    em_tensor *smooth = em_cross_entropy(logits, target, o);
    expect_values(smooth, (double[]){1.5697453913}, 1, 1e-9);
    cr_assert_eq(em_backward(smooth), EM_OK, "%s", em_error());
    static const double grad[24] = {
        -0.0920266894, 0.0613167442, 0.0784086224, 0.0548240375, 0.0136040035, 0.0052094361,
        -0.1155131987, -0.075167953, 0.0784226859, -0.0665261803, 0.0371045763, 0.0203439155,
        0.0108753157, -0.1080859401, 0.0, 0.0623042634, 0.0992427213, 0.0528268609, 0.0,
        -0.1233596442, -0.110118037, 0.0552590792, 0.0, 0.0610553808};
    expect_values(logits->grad, grad, 24, 1e-9);

    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3, 2, 2), -2, 2, 9);
    cr_assert(em_test_gradcheck_default(apply_ce, target, &x, 1));

    /* unbatched: (C) logits with a 0-d target */
    int64_t three = 3;
    em_tensor *t0 = em_from_data(EM_SCALAR_SHAPE, EM_I64, &three);
    expect_values(em_cross_entropy(wave(EM_SHAPE(5), 0.4, 0.1), t0, (em_cross_entropy_opts){0}),
                  (double[]){1.3613361519}, 1, 1e-9);

    cr_assert_null(em_cross_entropy(logits, em_zeros(EM_SHAPE(2, 2, 3), EM_I64),
                                    (em_cross_entropy_opts){0}));
    cr_assert_str_eq(em_error(), "em_cross_entropy: target must be (N, d1, ...) for input (N, C, "
                                 "d1, ...) or () for input (C): input [2,3,2,2], target [2,2,3]");
    em_error_clear();
}

/* ---- topk ---- */

static em_tensor *apply_topk(em_tensor *const *x, void *ctx)
{
    (void)ctx;
    em_tensor *v = NULL;
    return em_topk(x[0], 2, 1, true, &v, NULL) == EM_OK ? v : NULL;
}

Test(ops_user, topk_as_pytorch)
{
    em_tensor *t = wave(EM_SHAPE(3, 5), 1.7, 0.2), *v, *i;
    cr_assert_eq(em_topk(t, 2, 1, true, &v, &i), EM_OK, "%s", em_error());
    expect_values(v, (double[]){0.9463000877, 0.6569865987, 0.9436956694, 0.6629692301,
                                0.9839066946, 0.0504226878}, 6, 1e-10);
    expect_values(i, (double[]){1, 4, 3, 0, 2, 1}, 6, 0);
    cr_assert_eq(i->dtype, EM_I64);
    cr_assert_eq(em_topk(t, 2, 0, false, &v, &i), EM_OK);
    expect_values(v, (double[]){-0.996900066, -0.8278264691, -0.4496474645, -0.8322674422,
                                -0.905578362, 0.1986693308, 0.0504226878, -0.4425204433,
                                -0.3039646088, 0.2064674819}, 10, 1e-10);
    expect_values(i, (double[]){2, 1, 1, 0, 2, 0, 2, 0, 2, 1}, 10, 0);
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3, 5), -1, 1, 4);
    cr_assert(em_test_gradcheck_default(apply_topk, NULL, &x, 1));
    /* NaN ranks largest, ties go to the lower index */
    em_tensor *n = em_from_data(EM_SHAPE(4), EM_F64, (double[]){1, NAN, 1, 0});
    cr_assert_eq(em_topk(n, 3, 0, true, &v, &i), EM_OK);
    expect_values(i, (double[]){1, 0, 2}, 3, 0);
    cr_assert_eq(em_topk(t, 6, 1, true, &v, &i), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_topk: k 6 along dim 1 does not fit f64 [3,5]");
    em_error_clear();
}

/* ---- sampling ---- */

Test(ops_user, multinomial_draws_by_weight)
{
    em_tensor *p = em_from_data(EM_SHAPE(2, 4), EM_F32, (float[]){1, 0, 3, 4, 0, 0, 5, 0});
    em_generator g1 = em_generator_new(3), g2 = em_generator_new(3);
    em_tensor *a = em_multinomial(p, 4000, true, &g1), *b = em_multinomial(p, 4000, true, &g2);
    cr_assert_not_null(a, "%s", em_error());
    cr_assert(a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 4000 && a->dtype == EM_I64);
    cr_assert_arr_eq(em_data_ptr(a), em_data_ptr(b), 8 * 4000, "one seed, one draw");
    const int64_t *d = em_data_ptr(a);
    int count[4] = {0};
    for (int s = 0; s < 4000; s++) {
        count[d[s]]++;
        cr_assert_eq(d[4000 + s], 2, "row 1 has one possible class");
    }
    cr_assert_eq(count[1], 0);
    cr_assert(abs(count[0] - 500) < 90 && abs(count[2] - 1500) < 120 && abs(count[3] - 2000) < 120,
              "%d %d %d", count[0], count[2], count[3]);

    em_tensor *w = em_from_data(EM_SHAPE(4), EM_F64, (double[]){1, 0, 3, 4});
    em_tensor *all = em_multinomial(w, 3, false, NULL);
    const int64_t *v = em_data_ptr(all);
    cr_assert(v[0] != v[1] && v[0] != v[2] && v[1] != v[2] && v[0] != 1 && v[1] != 1 && v[2] != 1);
    cr_assert_null(em_multinomial(w, 4, false, NULL));
    cr_assert_str_eq(em_error(), "em_multinomial: row 0 has 3 classes of positive probability for"
                                 " 4 samples without replacement");
    em_error_clear();
    em_tensor *neg = em_from_data(EM_SHAPE(2), EM_F64, (double[]){1, -0.5});
    cr_assert_null(em_multinomial(neg, 1, true, NULL));
    cr_assert_not_null(strstr(em_error(), "probability -0.5 at row 0, class 1"), "%s",
                       em_error());
    em_error_clear();
}

Test(ops_user, sample_logits_top_k_and_temperature)
{
    em_tensor *logits = em_from_data(EM_SHAPE(2, 5), EM_F32,
                                     (float[]){0.1f, 2.0f, -1.0f, 1.5f, 0.0f,
                                               3.0f, 0.0f, 0.0f, 0.0f, 2.5f});
    em_tensor *greedy = em_sample_logits(logits, (em_sample_opts){.top_k = 1}, NULL);
    expect_values(greedy, (double[]){1, 0}, 2, 0);
    cr_assert_eq(greedy->ndim, 1);

    /* top 2 of row 0: classes 1 and 3 with odds e^(2.0/0.5) : e^(1.5/0.5) = e : 1 */
    em_generator g = em_generator_new(8);
    int count[5] = {0};
    for (int s = 0; s < 3000; s++) {
        em_scope_begin();
        em_tensor *tok = em_sample_logits(logits, (em_sample_opts){.top_k = 2,
                                                                   .temperature = 0.5}, &g);
        count[((const int64_t *)em_data_ptr(tok))[0]]++;
        em_scope_end();
    }
    cr_assert(count[0] == 0 && count[2] == 0 && count[4] == 0);
    double want1 = 3000 * exp(1) / (1 + exp(1));
    cr_assert(fabs(count[1] - want1) < 100, "class 1 drawn %d times, want ~%.0f", count[1],
              want1);
    cr_assert_null(em_sample_logits(logits, (em_sample_opts){.top_k = 6}, NULL));
    cr_assert_not_null(strstr(em_error(), "top_k in [0, V]"), "%s", em_error());
    em_error_clear();
}
