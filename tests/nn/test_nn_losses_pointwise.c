/* The pointwise losses of nn/losses_pointwise.c beyond mse, l1 and plain bce with logits (those
 * are in test_nn_losses.c): smooth L1, Huber, KL divergence both ways, binary cross entropy on
 * probabilities and with weights on logits. Expected values: numpy (f64) on PyTorch 2.x's
 * formulas, as each test's comment gives them. */
#include <criterion/criterion.h>
#include <math.h>

#include "helpers/reference.h"
#include "nn/nn.h"

TestSuite(nn_losses_pointwise, .init = em_scope_begin, .fini = em_scope_end);

static em_tensor *f64(em_shape s, const double *v)
{
    return em_from_data(s, EM_F64, v);
}

/* d = |x - y|: where(d < beta, 0.5 d^2 / beta, d - 0.5 beta); where(d < delta, 0.5 d^2,
 * delta (d - 0.5 delta)) */
Test(nn_losses_pointwise, smooth_l1_and_huber)
{
    em_tensor *x = f64(EM_SHAPE(2, 3), (double[]){0.2, -1.5, 3.0, 0.9, 0.1, -0.4});
    em_tensor *y = f64(EM_SHAPE(2, 3), (double[]){0.5, 0.5, 0.0, 1.0, -2.0, -0.4});
    cr_expect(em_ref_close(em_smooth_l1_loss(x, y, EM_REDUCTION_NONE, 1.0),
                           (double[]){0.045, 1.5, 2.5, 0.005, 1.6, 0}, 6, 1e-12));
    cr_expect(em_ref_close(em_smooth_l1_loss(x, y, EM_REDUCTION_MEAN, 0.5), (double[]){1.075}, 1,
                           1e-12));
    /* beta 0 is the L1 loss: mean |x - y| = 7.5 / 6 */
    cr_expect(em_ref_close(em_smooth_l1_loss(x, y, EM_REDUCTION_MEAN, 0), (double[]){1.25},
                           1, 1e-12));
    cr_expect(em_ref_close(em_huber_loss(x, y, EM_REDUCTION_NONE, 2.0),
                           (double[]){0.045, 2, 4, 0.005, 2.2, 0}, 6, 1e-12));
    cr_expect(em_ref_close(em_huber_loss(x, y, EM_REDUCTION_SUM, 2.0), (double[]){8.25}, 1,
                           1e-12));
    cr_assert_null(em_smooth_l1_loss(x, y, EM_REDUCTION_MEAN, -1));
    cr_expect_str_eq(em_error(), "em_smooth_l1_loss: beta must be finite and >= 0, not -1");
    em_error_clear();
    cr_assert_null(em_huber_loss(x, y, EM_REDUCTION_MEAN, 0));
    cr_expect_str_eq(em_error(), "em_huber_loss: delta must be finite and > 0, not 0");
    em_error_clear();
}

/* where(t == 0, 0, t log t) - t input, batchmean = sum / 2; log targets: exp(t) (t - input) */
Test(nn_losses_pointwise, kl_div_both_ways)
{
    double p[] = {0.2, 0.3, 0.5, 0.6, 0.3, 0.1}, lt[] = {0.1, 0.4, 0.5, 0.5, 0.25, 0.25};
    em_tensor *input = em_requires_grad_(em_log(f64(EM_SHAPE(2, 3), p)), true);
    em_tensor *t = em_requires_grad_(f64(EM_SHAPE(2, 3), (double[]){0, 0.4, 0.6, 0.5, 0.5, 0}),
                                     true);
    cr_expect(em_ref_close(em_kl_div(input, t, EM_REDUCTION_NONE, false),
                           (double[]){0, 0.115072829, 0.1093929341, -0.0911607784, 0.2554128119,
                                      0}, 6, 1e-9));
    em_tensor *batchmean = em_kl_div(input, t, EM_REDUCTION_BATCHMEAN, false);
    cr_expect(em_ref_close(batchmean, (double[]){0.1943588983}, 1, 1e-9));
    cr_expect(em_ref_close(em_kl_div(input, t, EM_REDUCTION_MEAN, false),
                           (double[]){0.06478629942}, 1, 1e-10));
    cr_expect(em_ref_close(em_kl_div(input, em_log(f64(EM_SHAPE(2, 3), lt)), EM_REDUCTION_SUM,
                                     true), (double[]){0.1380896263}, 1, 1e-9));
    /* a zero target: no NaN reaches either gradient (input's is -t / 2, t's is log t + 1 - input
     * with t log t's gradient taken as 0 at 0, so -input there: ember's choice, nn.h says so;
     * PyTorch 2.15 gives NaN there, from xlogy's t / t, and log t + 1 - input elsewhere) */
    cr_assert_eq(em_backward(batchmean), EM_OK, "%s", em_error());
    double gi[6], gt[6];
    em_copy_to_host(input->grad, EM_F64, gi);
    em_copy_to_host(t->grad, EM_F64, gt);
    cr_expect(gi[0] == 0 && gi[1] == -0.2 && gt[0] == -log(0.2) / 2, "%g %g %g", gi[0], gi[1],
              gt[0]);
    cr_expect(fabs(gt[1] - (log(0.4) + 1 - log(0.3)) / 2) < 1e-12);
    cr_assert_null(em_mse_loss(input, t, EM_REDUCTION_BATCHMEAN));
    cr_expect_str_eq(em_error(), "em_mse_loss: reduction batchmean is em_kl_div's only");
    em_error_clear();
}

/* -(t max(log x, -100) + (1 - t) max(log(1 - x), -100)); gradient (x - t) / max(x (1 - x),
 * eps): finite at 0 and 1. eps is the float 1e-12 in f64 too: PyTorch 2.15's gradient,
 * F.binary_cross_entropy(x, t, reduction='none').sum().backward() on these f64 tensors, is
 * 1000000003995.8029 at x = 1 (1 / 9.999999960041972e-13), not 1e12 */
Test(nn_losses_pointwise, binary_cross_entropy_on_probabilities)
{
    em_tensor *x = em_requires_grad_(f64(EM_SHAPE(4), (double[]){0, 0.25, 0.9, 1}), true);
    em_tensor *t = f64(EM_SHAPE(4), (double[]){0, 1, 0.3, 0});
    em_tensor *loss = em_binary_cross_entropy(x, t, (em_bce_opts){.reduction = EM_REDUCTION_NONE});
    cr_expect(em_ref_close(loss, (double[]){0, 1.386294361, 1.64341772, 100}, 4, 1e-8));
    cr_assert_eq(em_backward(em_sum_all(loss)), EM_OK, "%s", em_error());
    cr_expect(em_ref_close(x->grad, (double[]){0, -4, 6.666666666666669, 1000000003995.8029}, 4,
                           1e-8));
    /* the same eps in f32: PyTorch's f32 gradient at x = 1 is 999999995904 */
    em_tensor *x32 = em_requires_grad_(em_to_dtype(em_detach(x), EM_F32), true);
    cr_assert_eq(em_backward(em_sum_all(em_binary_cross_entropy(
                     x32, em_to_dtype(t, EM_F32), (em_bce_opts){.reduction = EM_REDUCTION_NONE}))),
                 EM_OK, "%s", em_error());
    cr_expect(em_ref_close(x32->grad, (double[]){0, -4, 6.666665077209473, 999999995904.0}, 4, 0));
    /* probabilities of exactly 0 and 1 are no anomaly: no op along the way makes an inf */
    bool was = em_set_anomaly_mode(true);
    cr_expect_not_null(em_binary_cross_entropy(x, t, (em_bce_opts){0}), "%s", em_error());
    em_set_anomaly_mode(was);
    em_tensor *w = f64(EM_SHAPE(4), (double[]){1, 2, 0, 1});
    cr_expect(em_ref_close(em_binary_cross_entropy(x, t, (em_bce_opts){.weight = w}),
                           (double[]){(2 * 1.386294361 + 100) / 4}, 1, 1e-8));
    cr_assert_null(em_binary_cross_entropy(x, t, (em_bce_opts){.pos_weight = w}));
    cr_expect_str_eq(em_error(), "em_binary_cross_entropy: pos_weight is for "
                                 "em_binary_cross_entropy_with_logits");
    em_error_clear();
}

/* (1 - y) z - (1 + (pw - 1) y) log_sigmoid(z), times w; mean over 6; gradient
 * ((1 - y) - (1 + (pw - 1) y) sigmoid(-z)) w / 6 */
Test(nn_losses_pointwise, bce_with_logits_pos_weight_and_weight)
{
    em_tensor *z = em_requires_grad_(f64(EM_SHAPE(2, 3), (double[]){0, -3, 2, 1, -0.5, 4}), true);
    em_tensor *y = f64(EM_SHAPE(2, 3), (double[]){1, 0, 1, 0, 1, 0.5});
    em_bce_opts o = {.pos_weight = f64(EM_SHAPE(3), (double[]){2, 0.5, 3}),
                     .weight = f64(EM_SHAPE(2, 1), (double[]){1, 0.5}),
                     .reduction = EM_REDUCTION_NONE};
    cr_expect(em_ref_close(em_binary_cross_entropy_with_logits(z, y, o),
                           (double[]){1.386294361, 0.04858735157, 0.3807840331, 0.6566308438,
                                      0.243519246, 1.018149928}, 6, 1e-9));
    o.reduction = EM_REDUCTION_MEAN;
    em_tensor *loss = em_binary_cross_entropy_with_logits(z, y, o);
    cr_expect(em_ref_close(loss, (double[]){0.6223276273}, 1, 1e-9));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_expect(em_ref_close(z->grad, (double[]){-0.1666666667, 0.007904312196, -0.05960146101,
                                               0.06092154822, -0.02593580547, 0.03866896501},
                           6, 1e-9));
}
