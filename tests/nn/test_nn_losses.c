/* nn losses against values pinned from torch.nn.functional (f64): cross entropy with every
 * reduction, ignore_index and label smoothing, nll, mse, l1, bce with logits; gradients; errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "autograd/autograd_internal.h"
#include "helpers/gradcheck.h"
#include "nn/nn.h"

static const double logits_v[12] = {1, 2, 0.5, 0.1, -1, 2, 3, 0, 0, -0.5, 0.5, 1.5};
static const int64_t target_v[4] = {0, 2, 1, 2};

static em_tensor *logits(void)
{
    return em_from_data(EM_SHAPE(4, 3), EM_F64, logits_v);
}

static em_tensor *target(void)
{
    return em_from_data(EM_SHAPE(4), EM_I64, target_v);
}

static void expect(const em_tensor *t, int64_t n, const double *want, double tol)
{
    cr_assert_not_null(t, "%s", em_error());
    cr_assert_eq(em_numel(t), n);
    double got[n];
    cr_assert_eq(em_copy_to_host(t, EM_F64, got), EM_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol, "element %lld: %.10g, want %.10g", (long long)i,
                  got[i], want[i]);
}

static void setup(void)
{
    em_error_clear();
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
}

TestSuite(nn_losses, .init = setup, .fini = teardown);

Test(nn_losses, cross_entropy_reductions)
{
    em_tensor *x = logits(), *t = target();
    em_tensor *mean = em_cross_entropy(x, t, (em_cross_entropy_opts){0});
    expect(mean, 1, (double[]){1.2871705476}, 1e-9);
    cr_assert_eq(mean->ndim, 0);
    expect(em_cross_entropy(x, t, (em_cross_entropy_opts){.reduction = EM_REDUCTION_SUM}), 1,
           (double[]){5.1486821906}, 1e-9);
    em_cross_entropy_opts o = {.reduction = EM_REDUCTION_NONE};
    em_tensor *none = em_cross_entropy(x, t, o);
    expect(none, 4, (double[]){1.4643687841, 0.1817844856, 3.0949229564, 0.4076059644}, 1e-9);
    cr_assert_eq(none->ndim, 1);
}

Test(nn_losses, cross_entropy_gradient)
{
    em_tensor *x = logits(), *t = target();
    em_requires_grad_(x, true);
    em_tensor *loss = em_cross_entropy(x, t, (em_cross_entropy_opts){0});
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    expect(x->grad, 12,
           (double[]){-0.1921940256, 0.1571329298, 0.0350610958, 0.0311768687, 0.0103778781,
                      -0.0415547468, 0.2273607496, -0.2386803748, 0.0113196252, 0.0225076433,
                      0.0611821178, -0.0836897611}, 1e-9);
}

Test(nn_losses, cross_entropy_ignore_index_leaves_the_denominator)
{
    em_tensor *x = logits(), *t = target();
    em_cross_entropy_opts o = {.has_ignore_index = true, .ignore_index = 2};
    expect(em_cross_entropy(x, t, o), 1, (double[]){2.2796458703}, 1e-9);
    o.reduction = EM_REDUCTION_NONE;
    expect(em_cross_entropy(x, t, o), 4, (double[]){1.4643687841, 0, 3.0949229564, 0}, 1e-9);
    /* ignore_index -100 (PyTorch's default value) may lie outside the classes */
    em_tensor *t2 = em_from_data(EM_SHAPE(4), EM_I64, (int64_t[]){0, -100, 1, -100});
    o = (em_cross_entropy_opts){.has_ignore_index = true, .ignore_index = -100};
    expect(em_cross_entropy(x, t2, o), 1, (double[]){2.2796458703}, 1e-9);
    /* all ignored: the mean is 0 / 0 */
    em_tensor *t3 = em_full(EM_SHAPE(4), EM_I64, -100);
    cr_assert(isnan(em_item(em_cross_entropy(x, t3, o))));
}

Test(nn_losses, cross_entropy_label_smoothing)
{
    em_tensor *x = logits(), *t = target();
    expect(em_cross_entropy(x, t, (em_cross_entropy_opts){.label_smoothing = 0.1}), 1,
           (double[]){1.3238372143}, 1e-9);
    em_cross_entropy_opts o = {.label_smoothing = 0.2, .has_ignore_index = true,
                               .ignore_index = 2};
    expect(em_cross_entropy(x, t, o), 1, (double[]){2.1629792036}, 1e-9);
    o.reduction = EM_REDUCTION_SUM;
    expect(em_cross_entropy(x, t, o), 1, (double[]){4.3259584072}, 1e-9);
    o.reduction = EM_REDUCTION_NONE;
    expect(em_cross_entropy(x, t, o), 4, (double[]){1.4310354508, 0, 2.8949229564, 0}, 1e-9);
}

/* class weights (0.5, 2, 1.5): values from torch.nn.functional.cross_entropy(weight=w), f64 */
Test(nn_losses, cross_entropy_class_weight_matches_pytorch)
{
    em_tensor *x = logits(), *t = target();
    em_tensor *w = em_from_data(EM_SHAPE(3), EM_F64, (double[]){0.5, 2.0, 1.5});
    em_cross_entropy_opts o = {.weight = w};
    expect(em_cross_entropy(x, t, o), 1, (double[]){1.4192938145}, 1e-9);
    expect(em_nll_loss(em_log_softmax(x, 1), t, o), 1, (double[]){1.4192938145}, 1e-9);
    o.reduction = EM_REDUCTION_SUM;
    expect(em_cross_entropy(x, t, o), 1, (double[]){7.8061159799}, 1e-9);
    o.reduction = EM_REDUCTION_NONE;
    expect(em_cross_entropy(x, t, o), 4,
           (double[]){0.7321843921, 0.2726767284, 6.1898459128, 0.6114089467}, 1e-9);
    o = (em_cross_entropy_opts){.weight = w, .has_ignore_index = true, .ignore_index = 2};
    expect(em_cross_entropy(x, t, o), 1, (double[]){2.7688121220}, 1e-9);
    o.label_smoothing = 0.2;
    expect(em_cross_entropy(x, t, o), 1, (double[]){2.6280408166}, 1e-9);
    o = (em_cross_entropy_opts){.weight = w, .label_smoothing = 0.1,
                                .reduction = EM_REDUCTION_NONE};
    expect(em_cross_entropy(x, t, o), 4,
           (double[]){0.8125484574, 0.5013136536, 5.9335177157, 0.7046155139}, 1e-9);
    o.reduction = EM_REDUCTION_SUM;
    expect(em_cross_entropy(x, t, o), 1, (double[]){7.9519953407}, 1e-9);
    em_requires_grad_(x, true);
    em_tensor *loss = em_cross_entropy(x, t, (em_cross_entropy_opts){.weight = w,
                                                                      .label_smoothing = 0.1});
    expect(loss, 1, (double[]){1.4458173347}, 1e-9);
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    expect(x->grad, 12,
           (double[]){-0.0603247381, 0.0545412429, 0.0057834952, 0.0306029250, -0.0009256830,
                      -0.0296772420, 0.3166526904, -0.3234778603, 0.0068251700, 0.0212506697,
                      0.0538813149, -0.0751319847}, 1e-9);
}

Test(nn_losses, cross_entropy_class_weight_must_match_the_classes)
{
    em_tensor *w = em_ones(EM_SHAPE(4), EM_F64);
    cr_assert_null(em_cross_entropy(logits(), target(), (em_cross_entropy_opts){.weight = w}));
    cr_assert_str_eq(em_error(), "em_cross_entropy: weight must be floating point (C) on the "
                                 "input's device for input [4,3], not f64 [4]");
}

static em_tensor *smoothed_ce(em_tensor *const *inputs, void *ctx)
{
    em_cross_entropy_opts o = {.label_smoothing = 0.3, .has_ignore_index = true,
                               .ignore_index = 1};
    return em_cross_entropy(inputs[0], ctx, o);
}

static em_tensor *plain_ce(em_tensor *const *inputs, void *ctx)
{
    return em_cross_entropy(inputs[0], ctx, (em_cross_entropy_opts){0});
}

static em_tensor *bce(em_tensor *const *inputs, void *ctx)
{
    return em_bce_with_logits(inputs[0], ctx, EM_REDUCTION_MEAN);
}

Test(nn_losses, gradchecks)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(4, 3), -2, 2, 1), *t = target();
    cr_assert(em_test_gradcheck_default(smoothed_ce, t, &x, 1));
    cr_assert(em_test_gradcheck_default(plain_ce, t, &x, 1));
    em_tensor *z = em_gradcheck_leaf(EM_SHAPE(2, 3), -3, 3, 2);
    em_tensor *y = em_from_data(EM_SHAPE(2, 3), EM_F64, (double[]){1, 0, 0.3, 0.5, 1, 0});
    cr_assert(em_test_gradcheck_default(bce, y, &z, 1));
    em_release(x);
    em_release(z);
}

/* Bytes of t as f64 or f32 data, for bit-for-bit comparison. */
static void expect_same_bits(const em_tensor *a, const em_tensor *b, const char *what)
{
    cr_assert(a && b, "%s: %s", what, em_error());
    cr_assert_eq(em_numel(a), em_numel(b), "%s", what);
    size_t n = (size_t)em_numel(a) * em_dtype_size(a->dtype);
    cr_assert_eq(a->dtype, b->dtype, "%s", what);
    cr_assert(em_is_contiguous(a) && em_is_contiguous(b), "%s", what);
    cr_assert_eq(memcmp(em_data_ptr(a), em_data_ptr(b), n), 0, "%s: the bits differ", what);
}

/* em_cross_entropy_rows (the fused op em_cross_entropy runs on) against em_log_softmax and a
 * gather: the same loss and gradient bits, f32 and f64, a narrow and a wide row; and
 * em_cross_entropy over (N, C, d) input against em_nll_loss of em_log_softmax. */
Test(nn_losses, fused_cross_entropy_gives_the_composed_bits)
{
    const int64_t shapes[2][2] = {{64, 10}, {37, 1000}};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 2; s++) {
            em_dtype dt = d ? EM_F64 : EM_F32;
            int64_t n = shapes[s][0], c = shapes[s][1];
            em_manual_seed(7 + s);
            em_tensor *x = em_mul_scalar(em_randn(EM_SHAPE(n, c), dt, NULL), 4.0);
            em_tensor *t = em_randint(EM_SHAPE(n), EM_I64, 0, c, NULL);
            em_tensor *w = em_randn(EM_SHAPE(n), dt, NULL); /* a different gradient per row */
            em_tensor *xa = em_detach(x), *xb = em_detach(x);
            em_requires_grad_(xa, true);
            em_requires_grad_(xb, true);
            em_tensor *fused = em_cross_entropy_rows(xa, t);
            em_tensor *lp = em_log_softmax(xb, 1);
            em_tensor *composed = em_neg(em_reshape(
                em_gather(lp, 1, em_reshape(t, EM_SHAPE(n, 1))), EM_SHAPE(n)));
            expect_same_bits(fused, composed, "loss");
            cr_assert_eq(em_backward(em_sum_all(em_mul(fused, w))), EM_OK, "%s", em_error());
            cr_assert_eq(em_backward(em_sum_all(em_mul(composed, w))), EM_OK, "%s", em_error());
            expect_same_bits(xa->grad, xb->grad, "gradient");
        }
    em_manual_seed(3);
    em_tensor *x3 = em_randn(EM_SHAPE(4, 5, 6), EM_F32, NULL);
    em_tensor *t3 = em_randint(EM_SHAPE(4, 6), EM_I64, 0, 5, NULL);
    em_cross_entropy_opts none = {.reduction = EM_REDUCTION_NONE};
    expect_same_bits(em_contiguous(em_cross_entropy(x3, t3, none)),
                     em_contiguous(em_nll_loss(em_log_softmax(x3, 1), t3, none)), "(N, C, d)");
}

/* Under bf16 autocast the fused op widens bf16 logits as log_softmax does: an f32 loss, and the
 * composed ops' loss and bf16 gradient bits. */
Test(nn_losses, fused_cross_entropy_under_autocast_widens_its_logits)
{
    em_manual_seed(11);
    em_tensor *x = em_to_dtype(em_mul_scalar(em_randn(EM_SHAPE(64, 10), EM_F32, NULL), 4.0),
                               EM_BF16);
    em_tensor *t = em_randint(EM_SHAPE(64), EM_I64, 0, 10, NULL);
    em_tensor *xa = em_detach(x), *xb = em_detach(x);
    em_requires_grad_(xa, true);
    em_requires_grad_(xb, true);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *fused = em_cross_entropy_rows(xa, t);
    em_tensor *composed = em_neg(em_reshape(
        em_gather(em_log_softmax(xb, 1), 1, em_reshape(t, EM_SHAPE(64, 1))), EM_SHAPE(64)));
    em_autocast_end();
    cr_assert_eq(fused->dtype, EM_F32);
    cr_expect_str_eq(fused->node->op, "cross_entropy_rows", "the fused op ran");
    expect_same_bits(fused, composed, "loss");
    cr_assert_eq(em_backward(em_sum_all(fused)), EM_OK, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(composed)), EM_OK, "%s", em_error());
    cr_assert_eq(xa->grad->dtype, EM_BF16);
    expect_same_bits(xa->grad, xb->grad, "gradient");
}

Test(nn_losses, cross_entropy_rows_checks_its_arguments)
{
    em_tensor *x = logits();
    cr_assert_null(em_cross_entropy_rows(x, em_from_data(EM_SHAPE(4), EM_I64,
                                                          (int64_t[]){0, 3, 1, 1})));
    cr_assert(strstr(em_error(), "out of range"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_cross_entropy_rows(x, em_zeros(EM_SHAPE(3), EM_I64)));
    cr_assert(strstr(em_error(), "em_cross_entropy_rows: expected floating-point x (N, C) and "
                                 "i64 target (N)"), "%s", em_error());
    em_error_clear();
}

Test(nn_losses, nll_loss_on_log_probs)
{
    em_tensor *x = logits(), *t = target();
    expect(em_nll_loss(x, t, (em_cross_entropy_opts){0}), 1, (double[]){-1.125}, 1e-12);
    em_tensor *lp = em_log_softmax(x, 1);
    expect(em_nll_loss(lp, t, (em_cross_entropy_opts){0}), 1, (double[]){1.2871705476}, 1e-9);
}

Test(nn_losses, target_errors_name_the_problem)
{
    em_tensor *x = logits();
    em_tensor *bad = em_from_data(EM_SHAPE(4), EM_I64, (int64_t[]){0, 1, 3, 2});
    cr_assert_null(em_cross_entropy(x, bad, (em_cross_entropy_opts){0}));
    cr_assert(strstr(em_error(), "target 3 at index 2 is out of range for 3 classes"), "%s",
              em_error());
    em_error_clear();
    em_tensor *neg = em_from_data(EM_SHAPE(4), EM_I64, (int64_t[]){0, -1, 0, 0});
    cr_assert_null(em_cross_entropy(x, neg, (em_cross_entropy_opts){0}));
    cr_assert(strstr(em_error(), "target -1 at index 1"), "%s", em_error());
    em_error_clear();
    em_tensor *f = em_zeros(EM_SHAPE(4), EM_F32); /* neither indices nor probabilities */
    cr_assert_null(em_cross_entropy(x, f, (em_cross_entropy_opts){0}));
    cr_assert(strstr(em_error(), "(class indices are i64): logits f64 [4,3] on cpu, target f32 "
                                 "[4] on cpu"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_nll_loss(x, f, (em_cross_entropy_opts){0})); /* indices only */
    cr_assert(strstr(em_error(), "target must be i64 (N)"), "%s", em_error());
    em_error_clear();
    em_tensor *short_t = em_zeros(EM_SHAPE(3), EM_I64);
    cr_assert_null(em_nll_loss(x, short_t, (em_cross_entropy_opts){0}));
    cr_assert(strstr(em_error(), "em_nll_loss"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_cross_entropy(em_zeros(EM_SHAPE(4), EM_F32), target(),
                                    (em_cross_entropy_opts){0}));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_assert_null(em_cross_entropy(x, target(), (em_cross_entropy_opts){.reduction = 7}));
    cr_assert(strstr(em_error(), "unknown reduction 7"), "%s", em_error());
    em_error_clear();
    em_set_error(EM_ERR_ARG, "earlier");
    cr_assert_null(em_cross_entropy(NULL, target(), (em_cross_entropy_opts){0}));
    cr_assert_str_eq(em_error(), "earlier");
    em_error_clear();
}

Test(nn_losses, mse_and_l1)
{
    em_tensor *a = em_from_data(EM_SHAPE(2, 3), EM_F64, (double[]){0.5, -1, 2, 3, 0, -2});
    em_tensor *b = em_from_data(EM_SHAPE(2, 3), EM_F64, (double[]){1, 1, 1, 0, 0.5, -1});
    expect(em_mse_loss(a, b, EM_REDUCTION_MEAN), 1, (double[]){2.5833333333}, 1e-9);
    expect(em_mse_loss(a, b, EM_REDUCTION_SUM), 1, (double[]){15.5}, 1e-12);
    expect(em_l1_loss(a, b, EM_REDUCTION_MEAN), 1, (double[]){1.3333333333}, 1e-9);
    em_tensor *none = em_l1_loss(a, b, EM_REDUCTION_NONE);
    expect(none, 6, (double[]){0.5, 2, 1, 3, 0.5, 1}, 1e-12);
    cr_assert_eq(none->ndim, 2);
    cr_assert_null(em_mse_loss(a, em_zeros(EM_SHAPE(3, 2), EM_F64), EM_REDUCTION_MEAN));
    cr_assert(strstr(em_error(), "em_mse_loss"), "%s", em_error());
    em_error_clear();
}

Test(nn_losses, bce_with_logits_is_stable)
{
    em_tensor *z = em_from_data(EM_SHAPE(2, 3), EM_F64, (double[]){0, -3, 100, -100, 2, 0.5});
    em_tensor *y = em_from_data(EM_SHAPE(2, 3), EM_F64, (double[]){1, 0, 1, 0, 1, 0.3});
    em_requires_grad_(z, true);
    expect(em_bce_with_logits(z, y, EM_REDUCTION_NONE), 6,
           (double[]){0.6931471806, 0.0485873516, 0, 0, 0.126928011, 0.8240769842}, 1e-9);
    em_tensor *loss = em_bce_with_logits(z, y, EM_REDUCTION_MEAN);
    expect(loss, 1, (double[]){0.2821232546}, 1e-9);
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    /* (sigmoid(z) - y) / 6, also at z = 0 */
    expect(z->grad, 6,
           (double[]){-0.0833333333, 0.0079043122, 0, 0, -0.0198671537, 0.0537432219}, 1e-9);
    em_tensor *z32 = em_full(EM_SHAPE(2), EM_F32, -1000), *y32 = em_ones(EM_SHAPE(2), EM_F32);
    expect(em_bce_with_logits(z32, y32, EM_REDUCTION_SUM), 1, (double[]){2000}, 1e-3);
}
