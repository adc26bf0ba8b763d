/* em_cross_entropy against class probabilities (a floating target of the logits' shape): values
 * and gradients (to the logits and to the target) against PyTorch 2.15's
 * torch.nn.functional.cross_entropy, computed in f64 on the inputs below and printed to 10
 * digits; every reduction, class weights with label smoothing, (N, C, d1) and (C) inputs; the
 * errors. */
#include <criterion/criterion.h>
#include <math.h>

#include "helpers/reference.h"

TestSuite(nn_losses_prob_target, .init = em_scope_begin, .fini = em_scope_end);

/* scale sin(i a + b) for i = 0.., in f64: the inputs the PyTorch references were computed on */
static em_tensor *wave(em_shape s, double a, double b, double scale)
{
    return em_ref_wave(s, a, b, scale);
}

static void expect(const em_tensor *t, const double *want, int64_t n)
{
    cr_assert_not_null(t, "%s", em_error());
    cr_assert(em_ref_close(t, want, n, 1e-9));
}

/* logits (3, 4) and a target of probabilities: softmax of another wave */
static em_tensor *logits(void)
{
    return em_requires_grad_(wave(EM_SHAPE(3, 4), 0.9, 0.2, 2), true);
}

static em_tensor *probs(void)
{
    return em_requires_grad_(em_detach(em_softmax(wave(EM_SHAPE(3, 4), 0.5, 0.1, 3), 1)), true);
}

Test(nn_losses_prob_target, reductions_as_pytorch)
{
    em_tensor *x = logits(), *t = probs();
    em_cross_entropy_opts o = {.reduction = EM_REDUCTION_NONE};
    em_tensor *none = em_cross_entropy(x, t, o);
    expect(none, (double[]){1.6046637025, 2.2020126168, 2.3913316524}, 3);
    cr_assert(none->ndim == 1 && none->shape[0] == 3);
    expect(em_cross_entropy(x, t, (em_cross_entropy_opts){0}), (double[]){2.0660026572}, 1);
    expect(em_cross_entropy(x, t, (em_cross_entropy_opts){.reduction = EM_REDUCTION_SUM}),
           (double[]){6.1980079717}, 1);
}

Test(nn_losses_prob_target, weights_and_smoothing_with_both_gradients)
{
    em_tensor *x = logits(), *t = probs();
    double wv[4] = {0.5, 1.0, 2.0, 1.5};
    em_tensor *w = em_from_data(EM_SHAPE(4), EM_F64, wv);
    expect(em_cross_entropy(x, t, (em_cross_entropy_opts){.weight = w,
                                                           .reduction = EM_REDUCTION_NONE}),
           (double[]){2.4276381707, 1.6274698237, 3.5154095512}, 3);
    /* the mean divides by the 3 samples, not by their weights */
    em_tensor *loss = em_cross_entropy(x, t, (em_cross_entropy_opts){.weight = w,
                                                                      .label_smoothing = 0.1});
    expect(loss, (double[]){2.4984927267}, 1);
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    expect(x->grad, (double[]){0.0412920850, 0.1533559207, -0.0184123798, -0.1762356259,
                               -0.0733351225, -0.0653326442, -0.0191929109, 0.1578606776,
                               0.1417441035, 0.1321496230, -0.0761920064, -0.1977017202}, 12);
    expect(t->grad, (double[]){0.3486812640, 0.2818397105, 0.5419713409, 1.0095217935,
                               0.3052005052, 0.8432402304, 1.2440925172, 0.1713214246,
                               0.1257975436, 0.2495168444, 1.3141719923, 1.7487935009}, 12);
}

Test(nn_losses_prob_target, extra_dims_and_one_sample_as_pytorch)
{
    em_tensor *x = wave(EM_SHAPE(2, 3, 2), 0.7, 0.3, 2);
    em_tensor *t = em_abs(wave(EM_SHAPE(2, 3, 2), 0.4, 0.2, 0.5));
    em_cross_entropy_opts o = {.reduction = EM_REDUCTION_NONE};
    em_tensor *none = em_cross_entropy(x, t, o);
    expect(none, (double[]){1.4009611563, 2.0133775547, 1.3425563613, 0.8955682890}, 4);
    cr_assert(none->ndim == 2 && none->shape[0] == 2 && none->shape[1] == 2);
    double wv[3] = {1.0, 0.2, 3.0};
    em_tensor *w = em_from_data(EM_SHAPE(3), EM_F64, wv);
    expect(em_cross_entropy(x, t, (em_cross_entropy_opts){.weight = w, .label_smoothing = 0.3}),
           (double[]){2.4586870079}, 1);
    em_tensor *one = em_cross_entropy(wave(EM_SHAPE(4), 0.9, 0.2, 1),
                                      em_abs(wave(EM_SHAPE(4), 0.3, 0.3, 1)),
                                      (em_cross_entropy_opts){0});
    expect(one, (double[]){3.6614073167}, 1);
    cr_assert_eq(one->ndim, 0);
}

static void expect_error(const char *want)
{
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
}

#define BAD_TARGET "em_cross_entropy: a floating target holds class probabilities, in the " \
                   "logits' shape, dtype and device (class indices are i64): "

Test(nn_losses_prob_target, bad_targets_and_options_are_named)
{
    em_tensor *x = logits();
    em_cross_entropy_opts plain = {0};
    cr_assert_null(em_cross_entropy(x, em_zeros(EM_SHAPE(3, 5), EM_F64), plain));
    expect_error(BAD_TARGET "logits f64 [3,4] on cpu, target f64 [3,5] on cpu");
    cr_assert_null(em_cross_entropy(x, em_zeros(EM_SHAPE(3, 4), EM_F32), plain));
    expect_error(BAD_TARGET "logits f64 [3,4] on cpu, target f32 [3,4] on cpu");
    em_cross_entropy_opts o = {.has_ignore_index = true, .ignore_index = 2};
    cr_assert_null(em_cross_entropy(x, probs(), o));
    expect_error("em_cross_entropy: ignore_index (2) is not supported for a floating (class "
                 "probabilities) target");
    o.ignore_index = -100; /* ignores nothing: allowed, as PyTorch's */
    expect(em_cross_entropy(x, probs(), o), (double[]){2.0660026572}, 1);
    cr_assert_null(em_cross_entropy(x, probs(), (em_cross_entropy_opts){.label_smoothing = 1.5}));
    expect_error("em_cross_entropy: label_smoothing 1.5 is outside [0, 1]");
    em_tensor *w3 = em_ones(EM_SHAPE(3), EM_F64);
    cr_assert_null(em_cross_entropy(x, probs(), (em_cross_entropy_opts){.weight = w3}));
    expect_error("em_cross_entropy: weight must be floating point (C) on the input's device for "
                 "input [3,4], not f64 [3]");
}
