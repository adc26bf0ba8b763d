/* The class losses: cross entropy (log_softmax + nll, with ignore_index, label smoothing and
 * class weights) over (N, C) or (N, C, d1, ...) as PyTorch, and nll; the reductions every loss
 * shares. */
#include <stdlib.h>

#include "nn/nn_internal.h"

em_tensor *em_loss_reduce(em_tensor *per_sample, em_reduction r, const em_tensor *total,
                          double count)
{
    switch (r) {
    case EM_REDUCTION_NONE: return per_sample;
    case EM_REDUCTION_SUM: return em_sum_all(per_sample);
    case EM_REDUCTION_MEAN:
        return total ? em_div(em_sum_all(per_sample), total)
                     : em_mul_scalar(em_sum_all(per_sample), 1.0 / count);
    case EM_REDUCTION_BATCHMEAN: break;
    }
    em_set_error(EM_ERR_ARG, "em_loss: unknown reduction %d", (int)r);
    return NULL;
}

bool em_loss_reduction_ok(em_reduction r, const char *fn)
{
    if (r == EM_REDUCTION_MEAN || r == EM_REDUCTION_SUM || r == EM_REDUCTION_NONE)
        return true;
    if (r == EM_REDUCTION_BATCHMEAN)
        em_set_error(EM_ERR_ARG, "%s: reduction batchmean is em_kl_div's only", fn);
    else
        em_set_error(EM_ERR_ARG, "%s: unknown reduction %d", fn, (int)r);
    return false;
}

/* What nll needs of the targets, computed on their device (nothing is read back to the host). */
typedef struct {
    em_tensor *idx;    // (N, 1) i64: each sample's class, 0 for ignored ones
    em_tensor *weight; // (N, 1) or NULL (all 1): the class weight of each kept sample, 0 for
                       // ignored ones
    em_tensor *keep;   // (N, 1) or NULL (all kept): 1 for kept samples, 0 for ignored ones
    em_tensor *total;  // 0-d or NULL (N): the sum of weight, the mean's denominator (PyTorch's)
} nll_targets;

bool em_cross_entropy_opts_ok(const em_tensor *in, int64_t c, em_cross_entropy_opts o,
                              const char *fn)
{
    char bl[64], bw[64];
    if (!em_loss_reduction_ok(o.reduction, fn))
        return false;
    if (o.weight && !(o.weight->ndim == 1 && o.weight->shape[0] == c &&
                      em_dtype_is_float(o.weight->dtype) && o.weight->device == in->device)) {
        em_set_error(EM_ERR_ARG, "%s: weight must be floating point (C) on the input's device "
                     "for input %s, not %s %s", fn, em_shape_str(in, bl, sizeof bl),
                     em_dtype_name(o.weight->dtype), em_shape_str(o.weight, bw, sizeof bw));
        return false;
    }
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1)) {
        em_set_error(EM_ERR_ARG, "%s: label_smoothing %g is outside [0, 1]", fn,
                     o.label_smoothing);
        return false;
    }
    return true;
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
    if (target->dtype != EM_I64 || target->ndim != 1 || target->shape[0] != lp->shape[0] ||
        target->device != lp->device) {
        em_set_error(EM_ERR_ARG, "%s: target must be i64 (N) of class indices on the input's "
                     "device for input %s, not %s %s on %s", fn, em_shape_str(lp, bl, sizeof bl),
                     em_dtype_name(target->dtype), em_shape_str(target, bt, sizeof bt),
                     em_device_name(target->device));
        return false;
    }
    if (!em_cross_entropy_opts_ok(lp, lp->shape[1], o, fn))
        return false;
    int64_t n = lp->shape[0];
    em_tensor *column = em_reshape(target, EM_SHAPE(n, 1));
    *t = (nll_targets){.idx = column};
    if (o.has_ignore_index) {
        em_tensor *ignore = em_to_device(em_scalar((double)o.ignore_index, EM_I64), lp->device);
        em_tensor *kept = em_ne(column, ignore);
        t->idx = em_where(kept, column, em_zeros_like(ignore));
        t->keep = em_to_dtype(kept, lp->dtype);
    }
    if (o.weight) {
        em_tensor *w = em_index_select(em_to_dtype(o.weight, lp->dtype), 0,
                                       em_reshape(t->idx, EM_SHAPE(n)));
        t->weight = em_reshape(w, EM_SHAPE(n, 1));
        if (t->keep)
            t->weight = em_mul(t->weight, t->keep);
    } else {
        t->weight = t->keep;
    }
    if (t->weight)
        t->total = em_sum_all(t->weight);
    return t->idx && (!o.has_ignore_index || t->keep) && (!o.weight || t->weight) &&
           (!t->weight || t->total);
}

/* On the error path of an out-of-range target: the CPU names it (read back only here). */
static void name_bad_target(const em_tensor *lp, const em_tensor *target, const char *fn,
                            em_cross_entropy_opts o)
{
    int64_t n = em_numel(target), c = lp->shape[1];
    int64_t *cls = malloc((size_t)(n > 0 ? n : 1) * sizeof *cls);
    bool read = cls && em_copy_to_host(target, EM_I64, cls) == EM_OK;
    for (int64_t i = 0; read && i < n; i++) {
        bool ignored = o.has_ignore_index && cls[i] == o.ignore_index;
        if (!ignored && (cls[i] < 0 || cls[i] >= c)) {
            em_error_clear(); /* in place of the gather's message about the same index */
            em_set_error(EM_ERR_ARG, "%s: target %lld at index %lld is out of range for %lld "
                         "classes", fn, (long long)cls[i], (long long)i, (long long)c);
            break;
        }
    }
    free(cls);
}

/* PyTorch's nll with class weights: -w[y] lp[y] per sample, the mean divided by the sum of the
 * kept samples' weights; label smoothing adds -sum_c w[c] lp[c] / C per kept sample. The gather
 * validates the targets on their device. */
static em_tensor *nll(const em_tensor *lp, const em_tensor *target, em_cross_entropy_opts o,
                      const char *fn)
{
    nll_targets t;
    if (!check_targets(lp, target, o, fn, &t))
        return NULL;
    int64_t n = lp->shape[0], c = lp->shape[1];
    int one = 1;
    em_tensor *gathered = em_gather(lp, 1, t.idx);
    if (!gathered) {
        name_bad_target(lp, target, fn, o);
        return NULL;
    }
    em_tensor *picked = em_reshape(t.weight ? em_mul(gathered, t.weight) : gathered, EM_SHAPE(n));
    em_tensor *loss = em_loss_reduce(em_neg(picked), o.reduction, t.total, (double)n);
    if (o.label_smoothing > 0) {
        const em_tensor *wlp = o.weight ? em_mul(lp, em_to_dtype(o.weight, lp->dtype)) : lp;
        em_tensor *all = em_sum(wlp, &one, 1, true);
        if (t.keep)
            all = em_mul(all, t.keep);
        em_tensor *smooth = em_loss_reduce(em_neg(em_reshape(all, EM_SHAPE(n))), o.reduction,
                                           t.total, (double)n);
        loss = em_add(em_mul_scalar(loss, 1.0 - o.label_smoothing),
                      em_mul_scalar(smooth, o.label_smoothing / (double)c));
    }
    return loss;
}

/* Cross-entropy from logits without class weights, smoothing or an ignored index: one op per row
 * (em_cross_entropy_rows, the same values as log_softmax and nll), reduced as nll reduces. */
static em_tensor *plain_cross_entropy(const em_tensor *rows /* (M, C) */,
                                      const em_tensor *target /* (M) */,
                                      em_cross_entropy_opts o, const char *fn)
{
    nll_targets t;
    if (!check_targets(rows, target, o, fn, &t))
        return NULL;
    em_tensor *per_row = em_cross_entropy_rows(rows, target);
    if (!per_row) {
        name_bad_target(rows, target, fn, o);
        return NULL;
    }
    return em_loss_reduce(per_row, o.reduction, NULL, (double)rows->shape[0]);
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
    bool plain = from_logits && !o.weight && o.label_smoothing == 0 && !o.has_ignore_index;
    em_tensor *lp = from_logits && !plain ? em_log_softmax(rows, 1) : rows;
    em_tensor *loss = plain ? plain_cross_entropy(rows, target_rows, o, fn)
                      : lp ? nll(lp, target_rows, o, fn) : NULL;
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
    return em_nn_scope_return(em_dtype_is_float(target->dtype)
                                  ? em_cross_entropy_probs(logits, target, o)
                                  : class_loss(logits, target, o, true, "em_cross_entropy"));
}
