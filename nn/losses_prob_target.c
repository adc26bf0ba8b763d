/* Cross entropy against class probabilities, PyTorch 2.x's form for a floating target of the
 * logits' shape: -sum_c w[c] t[c] log_softmax(x)[c] per sample, label smoothing mixing t with
 * the uniform distribution, the mean dividing by the number of samples (not by the weights).
 * Composed of log_softmax, mul, add and sum, so logits and target both get gradients. */
#include "nn/nn_internal.h"

static bool check_probs(const em_tensor *logits, const em_tensor *target, em_cross_entropy_opts o,
                        const char *fn)
{
    char bl[128], bt[128];
    if (logits->ndim < 1 || !em_same_shape(logits, target) || target->dtype != logits->dtype ||
        target->device != logits->device || !em_dtype_is_float(logits->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: a floating target holds class probabilities, in the "
                     "logits' shape, dtype and device (class indices are i64): logits %s %s on "
                     "%s, target %s %s on %s", fn, em_dtype_name(logits->dtype),
                     em_shape_str(logits, bl, sizeof bl), em_device_name(logits->device),
                     em_dtype_name(target->dtype),
                     em_shape_str(target, bt, sizeof bt), em_device_name(target->device));
        return false;
    }
    if (o.has_ignore_index && o.ignore_index >= 0) { /* a negative one ignores nothing */
        em_set_error(EM_ERR_ARG, "%s: ignore_index (%lld) is not supported for a floating "
                     "(class probabilities) target", fn, (long long)o.ignore_index);
        return false;
    }
    return em_cross_entropy_opts_ok(logits, logits->shape[logits->ndim == 1 ? 0 : 1], o, fn);
}

em_tensor *em_cross_entropy_probs(const em_tensor *logits /* (N, C, d1, ...) or (C) */,
                                  const em_tensor *target /* logits' shape */,
                                  em_cross_entropy_opts o)
{
    const char *fn = "em_cross_entropy";
    if (!check_probs(logits, target, o, fn))
        return NULL;
    int cdim = logits->ndim == 1 ? 0 : 1;
    int64_t c = logits->shape[cdim];
    const em_tensor *t = target;
    if (o.label_smoothing > 0)
        t = em_add_scalar(em_mul_scalar(target, 1.0 - o.label_smoothing),
                          o.label_smoothing / (double)c);
    em_tensor *terms = em_mul(em_log_softmax(logits, cdim), t); /* logits' shape */
    if (o.weight) {
        em_shape ws = {.ndim = logits->ndim}; /* (1, C, 1, ...) */
        for (int d = 0; d < ws.ndim; d++)
            ws.d[d] = d == cdim ? c : 1;
        terms = em_mul(terms, em_reshape(em_to_dtype(o.weight, logits->dtype), ws));
    }
    em_tensor *per_sample = em_neg(em_sum(terms, &cdim, 1, false)); /* (N, d1, ...) or () */
    double samples = c > 0 ? (double)(em_numel(logits) / c) : 0;
    return em_loss_reduce(per_sample, o.reduction, NULL, samples);
}
