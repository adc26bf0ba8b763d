/* The pointwise losses: mean squared and absolute error, smooth L1 and Huber, KL divergence, and
 * binary cross entropy on probabilities and on logits (with weights), each composed of ops with
 * CPU and CUDA kernels and reduced as PyTorch reduces it. */
#include <math.h>

#include "nn/nn_internal.h"

/* v as a 0-d tensor of t's dtype on t's device */
static em_tensor *scalar_like(const em_tensor *t, double v)
{
    return em_to_device(em_scalar(v, t->dtype), t->device);
}

/* Checks input and target are given, of one shape and a float dtype, and r. */
static bool check_pair(const em_tensor *a, const em_tensor *b, em_reduction r, const char *fn)
{
    if (!em_present(a, fn, "input") || !em_present(b, fn, "target") ||
        !em_loss_reduction_ok(r, fn))
        return false;
    if (em_same_shape(a, b) && em_dtype_is_float(a->dtype) && em_dtype_is_float(b->dtype))
        return true;
    char ba[64], bb[64];
    em_set_error(EM_ERR_ARG, "%s: input %s %s and target %s %s must be floating point of one "
                 "shape", fn, em_dtype_name(a->dtype), em_shape_str(a, ba, sizeof ba),
                 em_dtype_name(b->dtype), em_shape_str(b, bb, sizeof bb));
    return false;
}

/* elementwise loss ew, reduced: none keeps the input's shape, mean divides by numel */
static em_tensor *reduce_elementwise(em_tensor *ew, em_reduction r, const em_tensor *input)
{
    return em_keep(em_loss_reduce(ew, r, NULL, (double)em_numel(input)));
}

em_tensor *em_mse_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    const char *fn = "em_mse_loss";
    if (!check_pair(input, target, r, fn))
        return NULL;
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(em_square(em_sub(input, target)), r, input);
    em_scope_end();
    return loss;
}

em_tensor *em_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    const char *fn = "em_l1_loss";
    if (!check_pair(input, target, r, fn))
        return NULL;
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(em_abs(em_sub(input, target)), r, input);
    em_scope_end();
    return loss;
}

/* PyTorch's: (1 - t) x - w log_sigmoid(x), w = 1 + (pos_weight - 1) t; log_sigmoid keeps exp
 * from overflowing, and the gradient is 1 - t - w sigmoid(-x), exact also at x = 0 */
static em_tensor *bce_logits(const char *fn, const em_tensor *logits, const em_tensor *target,
                             em_bce_opts o)
{
    if (!check_pair(logits, target, o.reduction, fn))
        return NULL;
    em_scope_begin();
    em_tensor *log_sig = em_logsigmoid(logits);
    if (o.pos_weight)
        log_sig = em_mul(log_sig, em_add_scalar(em_mul(em_add_scalar(o.pos_weight, -1.0), target),
                                                1.0));
    em_tensor *loss = em_sub(em_mul(em_add_scalar(em_neg(target), 1.0), logits), log_sig);
    if (o.weight)
        loss = em_mul(loss, o.weight);
    loss = reduce_elementwise(loss, o.reduction, logits);
    em_scope_end();
    return loss;
}

em_tensor *em_bce_with_logits(const em_tensor *logits, const em_tensor *target, em_reduction r)
{
    return bce_logits("em_bce_with_logits", logits, target, (em_bce_opts){.reduction = r});
}

em_tensor *em_binary_cross_entropy_with_logits(const em_tensor *logits, const em_tensor *target,
                                               em_bce_opts o)
{
    return bce_logits("em_binary_cross_entropy_with_logits", logits, target, o);
}

em_tensor *em_binary_cross_entropy(const em_tensor *input, const em_tensor *target, em_bce_opts o)
{
    const char *fn = "em_binary_cross_entropy";
    if (!check_pair(input, target, o.reduction, fn))
        return NULL;
    if (o.pos_weight) {
        em_set_error(EM_ERR_ARG, "%s: pos_weight is for em_binary_cross_entropy_with_logits", fn);
        return NULL;
    }
    em_scope_begin();
    em_tensor *loss = em_binary_cross_entropy_elementwise(input, target);
    if (o.weight)
        loss = em_mul(loss, o.weight);
    loss = reduce_elementwise(loss, o.reduction, input);
    em_scope_end();
    return loss;
}

/* d = |input - target| as PyTorch's smooth L1 (quad_scale 0.5 / beta, linear offset 0.5 beta) and
 * Huber (0.5, 0.5 delta, scaled by delta) share it: d < k ? a d^2 : b (d - 0.5 k) */
static em_tensor *piecewise_quadratic(const em_tensor *input, const em_tensor *target, double k,
                                      double a, double b)
{
    em_tensor *d = em_abs(em_sub(input, target));
    em_tensor *quad = em_mul_scalar(em_square(d), a);
    em_tensor *lin = em_mul_scalar(em_add_scalar(d, -0.5 * k), b);
    return em_where(em_lt(d, scalar_like(d, k)), quad, lin);
}

em_tensor *em_smooth_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                             double beta)
{
    const char *fn = "em_smooth_l1_loss";
    if (!check_pair(input, target, r, fn))
        return NULL;
    if (!(beta >= 0) || isinf(beta)) {
        em_set_error(EM_ERR_ARG, "%s: beta must be finite and >= 0, not %g", fn, beta);
        return NULL;
    }
    if (beta == 0)
        return em_l1_loss(input, target, r);
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(piecewise_quadratic(input, target, beta, 0.5 / beta, 1),
                                         r, input);
    em_scope_end();
    return loss;
}

em_tensor *em_huber_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                         double delta)
{
    const char *fn = "em_huber_loss";
    if (!check_pair(input, target, r, fn))
        return NULL;
    if (!(delta > 0) || isinf(delta)) {
        em_set_error(EM_ERR_ARG, "%s: delta must be finite and > 0, not %g", fn, delta);
        return NULL;
    }
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(piecewise_quadratic(input, target, delta, 0.5, delta), r,
                                         input);
    em_scope_end();
    return loss;
}

/* PyTorch's: xlogy(t, t) - t input (t log t read as 0 at t = 0, through log of 1 there so no NaN
 * reaches the gradient), or exp(t) (t - input) for log targets */
em_tensor *em_kl_div(const em_tensor *input, const em_tensor *target, em_reduction r,
                     bool log_target)
{
    const char *fn = "em_kl_div";
    em_reduction checked = r == EM_REDUCTION_BATCHMEAN ? EM_REDUCTION_SUM : r;
    if (!check_pair(input, target, checked, fn))
        return NULL;
    em_scope_begin();
    em_tensor *loss;
    if (log_target) {
        loss = em_mul(em_exp(target), em_sub(target, input));
    } else {
        em_tensor *safe = em_where(em_eq(target, scalar_like(target, 0)),
                                   scalar_like(target, 1), target);
        loss = em_sub(em_mul(target, em_log(safe)), em_mul(target, input));
    }
    if (r == EM_REDUCTION_BATCHMEAN)
        loss = em_mul_scalar(em_sum_all(loss), 1.0 / (double)(input->ndim ? input->shape[0] : 1));
    loss = r == EM_REDUCTION_BATCHMEAN ? em_keep(loss) : reduce_elementwise(loss, r, input);
    em_scope_end();
    return loss;
}
