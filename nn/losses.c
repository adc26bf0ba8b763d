/* Losses: cross entropy (log_softmax + nll, with ignore_index and label smoothing), nll, mean
 * squared and absolute error, and a numerically stable binary cross entropy on logits. */
#include <stdlib.h>

#include "nn/nn_internal.h"

/* per-sample losses (N) reduced as asked; count is the denominator of the mean */
static em_tensor *reduce(em_tensor *per_sample, em_reduction r, double count)
{
    switch (r) {
    case EM_REDUCTION_NONE: return per_sample;
    case EM_REDUCTION_SUM: return em_sum_all(per_sample);
    case EM_REDUCTION_MEAN: return em_mul_scalar(em_sum_all(per_sample), 1.0 / count);
    }
    em_set_error(EM_ERR_ARG, "em_loss: unknown reduction %d", (int)r);
    return NULL;
}

static bool check_reduction(em_reduction r, const char *fn)
{
    if (r == EM_REDUCTION_MEAN || r == EM_REDUCTION_SUM || r == EM_REDUCTION_NONE)
        return true;
    em_set_error(EM_ERR_ARG, "%s: unknown reduction %d", fn, (int)r);
    return false;
}

/* Checks log_probs (N, C) and target i64 (N); fills idx (N, 1) with the class of each kept
 * sample (0 for ignored ones) and keep (N, 1) with 1 or 0. Returns the kept count, -1 on error. */
static int64_t nll_targets(const em_tensor *lp, const em_tensor *target, em_cross_entropy_opts o,
                           const char *fn, em_tensor **idx, em_tensor **keep)
{
    char bl[64], bt[64];
    if (lp->ndim != 2 || !em_dtype_is_float(lp->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: input must be floating point (N, C), not %s %s", fn,
                     em_dtype_name(lp->dtype), em_shape_str(lp, bl, sizeof bl));
        return -1;
    }
    if (target->dtype != EM_I64 || target->ndim != 1 || target->shape[0] != lp->shape[0]) {
        em_set_error(EM_ERR_ARG, "%s: target must be i64 (N) of class indices for input %s, "
                     "not %s %s", fn, em_shape_str(lp, bl, sizeof bl),
                     em_dtype_name(target->dtype), em_shape_str(target, bt, sizeof bt));
        return -1;
    }
    if (!check_reduction(o.reduction, fn))
        return -1;
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1)) {
        em_set_error(EM_ERR_ARG, "%s: label_smoothing %g is outside [0, 1]", fn,
                     o.label_smoothing);
        return -1;
    }
    int64_t n = lp->shape[0], c = lp->shape[1], kept = 0;
    int64_t *cls = malloc((size_t)(n ? n : 1) * sizeof *cls);
    double *on = malloc((size_t)(n ? n : 1) * sizeof *on);
    if (!cls || !on || em_copy_to_host(target, EM_I64, cls) != EM_OK) {
        free(cls);
        free(on);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return -1;
    }
    for (int64_t i = 0; i < n && kept >= 0; i++) {
        bool ignored = o.has_ignore_index && cls[i] == o.ignore_index;
        if (!ignored && (cls[i] < 0 || cls[i] >= c)) {
            em_set_error(EM_ERR_ARG, "%s: target %lld at index %lld is out of range for %lld "
                         "classes", fn, (long long)cls[i], (long long)i, (long long)c);
            kept = -1;
            break;
        }
        on[i] = ignored ? 0.0 : 1.0;
        cls[i] = ignored ? 0 : cls[i];
        kept += !ignored;
    }
    if (kept >= 0) {
        *idx = em_from_data(EM_SHAPE(n, 1), EM_I64, cls);
        *keep = em_to_dtype(em_from_data(EM_SHAPE(n, 1), EM_F64, on), lp->dtype);
    }
    free(cls);
    free(on);
    return kept;
}

static em_tensor *nll(const em_tensor *lp, const em_tensor *target, em_cross_entropy_opts o,
                      const char *fn)
{
    em_tensor *idx = NULL, *keep = NULL; // (N, 1)
    int64_t kept = nll_targets(lp, target, o, fn, &idx, &keep);
    if (kept < 0)
        return NULL;
    int64_t n = lp->shape[0], c = lp->shape[1];
    int one = 1;
    em_tensor *picked = em_reshape(em_mul(em_gather(lp, 1, idx), keep), EM_SHAPE(n));
    em_tensor *loss = reduce(em_neg(picked), o.reduction, (double)kept);
    if (o.label_smoothing > 0) {
        em_tensor *all = em_reshape(em_mul(em_sum(lp, &one, 1, true), keep), EM_SHAPE(n));
        em_tensor *smooth = reduce(em_neg(all), o.reduction, (double)kept);
        loss = em_add(em_mul_scalar(loss, 1.0 - o.label_smoothing),
                      em_mul_scalar(smooth, o.label_smoothing / (double)c));
    }
    return loss;
}

em_tensor *em_nll_loss(const em_tensor *log_probs, const em_tensor *target,
                       em_cross_entropy_opts o)
{
    if (!log_probs || !target)
        return NULL;
    em_scope_begin();
    em_tensor *loss = em_keep(nll(log_probs, target, o, "em_nll_loss"));
    em_scope_end();
    return loss;
}

em_tensor *em_cross_entropy(const em_tensor *logits, const em_tensor *target,
                            em_cross_entropy_opts o)
{
    if (!logits || !target)
        return NULL;
    if (logits->ndim != 2) {
        char buf[64];
        em_set_error(EM_ERR_ARG, "em_cross_entropy: logits must be (N, C), not %s",
                     em_shape_str(logits, buf, sizeof buf));
        return NULL;
    }
    em_scope_begin();
    em_tensor *lp = em_log_softmax(logits, 1);
    em_tensor *loss = em_keep(lp ? nll(lp, target, o, "em_cross_entropy") : NULL);
    em_scope_end();
    return loss;
}

/* Checks input and target have one shape and a float dtype. */
static bool check_pair(const em_tensor *a, const em_tensor *b, em_reduction r, const char *fn)
{
    if (!check_reduction(r, fn))
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
    return em_keep(reduce(ew, r, (double)em_numel(input)));
}

em_tensor *em_mse_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    if (!input || !target || !check_pair(input, target, r, "em_mse_loss"))
        return NULL;
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(em_square(em_sub(input, target)), r, input);
    em_scope_end();
    return loss;
}

em_tensor *em_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    if (!input || !target || !check_pair(input, target, r, "em_l1_loss"))
        return NULL;
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(em_abs(em_sub(input, target)), r, input);
    em_scope_end();
    return loss;
}

/* softplus(x) - x y with softplus(x) = m + log1p(exp(x - 2m)), m = max(x, 0): x - 2m = -|x|
 * keeps exp from overflowing, and its gradient is exactly sigmoid(x) - y, also at x = 0 */
em_tensor *em_bce_with_logits(const em_tensor *logits, const em_tensor *target, em_reduction r)
{
    if (!logits || !target || !check_pair(logits, target, r, "em_bce_with_logits"))
        return NULL;
    em_scope_begin();
    em_tensor *m = em_relu(logits);
    em_tensor *softplus = em_add(m, em_log1p(em_exp(em_sub(logits, em_mul_scalar(m, 2.0)))));
    em_tensor *loss = reduce_elementwise(em_sub(softplus, em_mul(logits, target)), r, logits);
    em_scope_end();
    return loss;
}
