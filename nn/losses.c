/* Losses: cross entropy (log_softmax + nll, with ignore_index, label smoothing and class
 * weights) over (N, C) or (N, C, d1, ...) as PyTorch, nll, mean squared and absolute error, and a
 * numerically stable binary cross entropy on logits. */
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

/* What nll needs of the targets, read once on the host. */
typedef struct {
    em_tensor *idx;    // (N, 1) i64: each sample's class, 0 for ignored ones
    em_tensor *keep;   // (N, 1): 1 for kept samples, 0 for ignored ones
    em_tensor *weight; // (N, 1): the class weight of each kept sample, 0 for ignored ones
    double total;      // the sum of weight: the denominator of the mean (PyTorch's)
} nll_targets;

/* Class weights (C) on the host as f64, all 1 without o.weight; false with an error. */
static bool class_weights(const em_tensor *lp, em_cross_entropy_opts o, const char *fn,
                          double *w)
{
    int64_t c = lp->shape[1];
    if (!o.weight) {
        for (int64_t k = 0; k < c; k++)
            w[k] = 1;
        return true;
    }
    char bl[64], bw[64];
    if (o.weight->ndim != 1 || o.weight->shape[0] != c || !em_dtype_is_float(o.weight->dtype)
        || o.weight->device != lp->device) {
        em_set_error(EM_ERR_ARG, "%s: weight must be floating point (C) on the input's device "
                     "for input %s, not %s %s", fn, em_shape_str(lp, bl, sizeof bl),
                     em_dtype_name(o.weight->dtype), em_shape_str(o.weight, bw, sizeof bw));
        return false;
    }
    return em_copy_to_host(o.weight, EM_F64, w) == EM_OK;
}

/* Checks log_probs (N, C), target i64 (N) and the options, and fills t; false on error. */
static bool check_targets(const em_tensor *lp, const em_tensor *target, em_cross_entropy_opts o,
                          const char *fn, nll_targets *t)
{
    char bl[64], bt[64];
    if (lp->ndim != 2 || !em_dtype_is_float(lp->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: input must be floating point (N, C), not %s %s", fn,
                     em_dtype_name(lp->dtype), em_shape_str(lp, bl, sizeof bl));
        return false;
    }
    if (target->dtype != EM_I64 || target->ndim != 1 || target->shape[0] != lp->shape[0]) {
        em_set_error(EM_ERR_ARG, "%s: target must be i64 (N) of class indices for input %s, "
                     "not %s %s", fn, em_shape_str(lp, bl, sizeof bl),
                     em_dtype_name(target->dtype), em_shape_str(target, bt, sizeof bt));
        return false;
    }
    if (!check_reduction(o.reduction, fn))
        return false;
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1)) {
        em_set_error(EM_ERR_ARG, "%s: label_smoothing %g is outside [0, 1]", fn,
                     o.label_smoothing);
        return false;
    }
    int64_t n = lp->shape[0], c = lp->shape[1];
    size_t rows = (size_t)(n ? n : 1);
    int64_t *cls = malloc(rows * sizeof *cls);
    double *on = malloc(rows * sizeof *on), *sw = malloc(rows * sizeof *sw);
    double *w = malloc((size_t)(c ? c : 1) * sizeof *w);
    bool ok = cls && on && sw && w;
    if (!ok)
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    ok = ok && em_copy_to_host(target, EM_I64, cls) == EM_OK && class_weights(lp, o, fn, w);
    t->total = 0;
    for (int64_t i = 0; i < n && ok; i++) {
        bool ignored = o.has_ignore_index && cls[i] == o.ignore_index;
        if (!ignored && (cls[i] < 0 || cls[i] >= c)) {
            em_set_error(EM_ERR_ARG, "%s: target %lld at index %lld is out of range for %lld "
                         "classes", fn, (long long)cls[i], (long long)i, (long long)c);
            ok = false;
            break;
        }
        on[i] = ignored ? 0.0 : 1.0;
        cls[i] = ignored ? 0 : cls[i];
        sw[i] = ignored ? 0.0 : w[cls[i]];
        t->total += sw[i];
    }
    if (ok) {
        t->idx = em_from_data(EM_SHAPE(n, 1), EM_I64, cls);
        t->keep = em_to_dtype(em_from_data(EM_SHAPE(n, 1), EM_F64, on), lp->dtype);
        t->weight = em_to_dtype(em_from_data(EM_SHAPE(n, 1), EM_F64, sw), lp->dtype);
        ok = t->idx && t->keep && t->weight;
    }
    free(cls);
    free(on);
    free(sw);
    free(w);
    return ok;
}

/* PyTorch's nll with class weights: -w[y] lp[y] per sample, the mean divided by the sum of the
 * kept samples' weights; label smoothing adds -sum_c w[c] lp[c] / C per kept sample. */
static em_tensor *nll(const em_tensor *lp, const em_tensor *target, em_cross_entropy_opts o,
                      const char *fn)
{
    nll_targets t;
    if (!check_targets(lp, target, o, fn, &t))
        return NULL;
    int64_t n = lp->shape[0], c = lp->shape[1];
    int one = 1;
    em_tensor *picked = em_reshape(em_mul(em_gather(lp, 1, t.idx), t.weight), EM_SHAPE(n));
    em_tensor *loss = reduce(em_neg(picked), o.reduction, t.total);
    if (o.label_smoothing > 0) {
        const em_tensor *wlp = o.weight ? em_mul(lp, em_to_dtype(o.weight, lp->dtype)) : lp;
        em_tensor *all = em_reshape(em_mul(em_sum(wlp, &one, 1, true), t.keep), EM_SHAPE(n));
        em_tensor *smooth = reduce(em_neg(all), o.reduction, t.total);
        loss = em_add(em_mul_scalar(loss, 1.0 - o.label_smoothing),
                      em_mul_scalar(smooth, o.label_smoothing / (double)c));
    }
    return loss;
}

/* Input (N, C, d1, ...) and target (N, d1, ...) as the rows (M, C) and (M) the loss works on
 * (classes last); (N, C) and (N) as they are; (C) with a 0-d target as one row. *none_shape gets
 * the shape of the unreduced loss: target's. False with an error naming fn on a shape mismatch. */
static bool class_rows(const em_tensor *in, const em_tensor *target, const char *fn,
                       em_tensor **rows, em_tensor **target_rows, em_shape *none_shape)
{
    bool ok = in->ndim >= 1 && target->ndim == (in->ndim == 1 ? 0 : in->ndim - 1);
    for (int d = 0; ok && d < target->ndim; d++)
        ok = target->shape[d] == in->shape[d == 0 ? 0 : d + 1];
    if (!ok) {
        char bi[128], bt[128];
        em_set_error(EM_ERR_ARG, "%s: target must be (N, d1, ...) for input (N, C, d1, ...) or "
                     "() for input (C): input %s, target %s", fn, em_shape_str(in, bi, sizeof bi),
                     em_shape_str(target, bt, sizeof bt));
        return false;
    }
    *none_shape = em_shape_of(target);
    int64_t c = in->shape[in->ndim == 1 ? 0 : 1];
    int64_t m = em_shape_numel(none_shape);
    if (in->ndim == 2) {
        *rows = (em_tensor *)in;
    } else if (in->ndim == 1) {
        *rows = em_reshape(in, EM_SHAPE(1, c));
    } else {
        int perm[EM_MAX_DIMS] = {0};
        for (int d = 1; d < in->ndim; d++)
            perm[d] = d + 1 < in->ndim ? d + 1 : 1;
        *rows = em_reshape(em_permute(in, perm), EM_SHAPE(m, c));
    }
    *target_rows = em_reshape(target, EM_SHAPE(m));
    return *rows && *target_rows;
}

/* The loss of rows of log-probabilities (log_softmax first when from_logits), in input's layout. */
static em_tensor *class_loss(const em_tensor *input, const em_tensor *target,
                             em_cross_entropy_opts o, bool from_logits, const char *fn)
{
    em_tensor *rows, *target_rows; // (M, C), (M)
    em_shape none_shape;
    if (!class_rows(input, target, fn, &rows, &target_rows, &none_shape))
        return NULL;
    em_tensor *lp = from_logits ? em_log_softmax(rows, 1) : rows;
    em_tensor *loss = lp ? nll(lp, target_rows, o, fn) : NULL;
    return loss && o.reduction == EM_REDUCTION_NONE ? em_reshape(loss, none_shape) : loss;
}

em_tensor *em_nll_loss(const em_tensor *log_probs, const em_tensor *target,
                       em_cross_entropy_opts o)
{
    if (!em_present(log_probs, "em_nll_loss", "log_probs")
        || !em_present(target, "em_nll_loss", "target"))
        return NULL;
    em_scope_begin();
    em_tensor *loss = em_keep(class_loss(log_probs, target, o, false, "em_nll_loss"));
    em_scope_end();
    return loss;
}

em_tensor *em_cross_entropy(const em_tensor *logits, const em_tensor *target,
                            em_cross_entropy_opts o)
{
    if (!em_present(logits, "em_cross_entropy", "logits")
        || !em_present(target, "em_cross_entropy", "target"))
        return NULL;
    em_scope_begin();
    em_tensor *loss = em_keep(class_loss(logits, target, o, true, "em_cross_entropy"));
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
    const char *fn = "em_mse_loss";
    if (!em_present(input, fn, "input") || !em_present(target, fn, "target")
        || !check_pair(input, target, r, fn))
        return NULL;
    em_scope_begin();
    em_tensor *loss = reduce_elementwise(em_square(em_sub(input, target)), r, input);
    em_scope_end();
    return loss;
}

em_tensor *em_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    const char *fn = "em_l1_loss";
    if (!em_present(input, fn, "input") || !em_present(target, fn, "target")
        || !check_pair(input, target, r, fn))
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
    const char *fn = "em_bce_with_logits";
    if (!em_present(logits, fn, "logits") || !em_present(target, fn, "target")
        || !check_pair(logits, target, r, fn))
        return NULL;
    em_scope_begin();
    em_tensor *m = em_relu(logits);
    em_tensor *softplus = em_add(m, em_log1p(em_exp(em_sub(logits, em_mul_scalar(m, 2.0)))));
    em_tensor *loss = reduce_elementwise(em_sub(softplus, em_mul(logits, target)), r, logits);
    em_scope_end();
    return loss;
}
