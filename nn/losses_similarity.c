/* The losses and measures between pairs of vectors: cosine similarity, pairwise distance, the
 * cosine embedding loss and the margin ranking loss, composed as PyTorch 2.x composes them, of
 * ops with CPU and CUDA kernels. */
#include <math.h>

#include "nn/nn_internal.h"

/* The broadcast shape of a and b into *s; false with an error naming fn when they do not. */
static bool broadcast_pair(const em_tensor *a, const em_tensor *b, const char *fn, em_shape *s)
{
    s->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < s->ndim; i++) {
        int ia = a->ndim - 1 - i, ib = b->ndim - 1 - i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char ba[128], bb[128];
            em_set_error(EM_ERR_ARG, "%s: shapes do not broadcast: %s and %s", fn,
                         em_shape_str(a, ba, sizeof ba), em_shape_str(b, bb, sizeof bb));
            return false;
        }
        s->d[s->ndim - 1 - i] = da == 1 ? db : da;
    }
    return true;
}

/* x / max(|x|_2, eps) along dim, keepdim: the clamp changes the value, not the gradient (PyTorch
 * 2.x clamps the norm in place under no_grad) */
static em_tensor *unit(const em_tensor *x, int dim, double eps)
{
    em_tensor *n = em_vector_norm(x, 2, &dim, 1, true);
    em_tensor *clamped = em_detach(em_sub(em_clamp(n, eps, INFINITY), n));
    return em_div(x, em_add(n, clamped));
}

em_tensor *em_cosine_similarity(const em_tensor *x1, const em_tensor *x2, int dim, double eps)
{
    const char *fn = "em_cosine_similarity";
    if (!em_present(x1, fn, "x1") || !em_present(x2, fn, "x2"))
        return NULL;
    em_shape s;
    if (!broadcast_pair(x1, x2, fn, &s))
        return NULL;
    if (dim < -s.ndim || dim >= s.ndim || !(eps >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: dim %d out of range for %d dims, or eps %g negative", fn,
                     dim, s.ndim, eps);
        return NULL;
    }
    em_scope_begin();
    em_tensor *a = em_expand(x1, s), *b = em_expand(x2, s);
    double e = eps == 0 ? 1e-8 : eps;
    return em_nn_scope_return(em_sum(em_mul(unit(a, dim, e), unit(b, dim, e)), &dim, 1, false));
}

em_tensor *em_pairwise_distance(const em_tensor *x1, const em_tensor *x2, double p, double eps,
                                bool keepdim)
{
    const char *fn = "em_pairwise_distance";
    if (!em_present(x1, fn, "x1") || !em_present(x2, fn, "x2"))
        return NULL;
    em_scope_begin();
    int last = -1;
    em_tensor *d = em_vector_norm(em_add_scalar(em_sub(x1, x2), eps), p, &last, 1, keepdim);
    return em_nn_scope_return(d);
}

/* x1, x2 (N, D) or (D) of one shape; target (N) or () of 1 / -1 in their float dtype */
static bool check_embedding_args(const em_tensor *x1, const em_tensor *x2, const em_tensor *y,
                                 em_reduction r, const char *fn)
{
    if (!em_loss_reduction_ok(r, fn))
        return false;
    bool ok = em_same_shape(x1, x2) && (x1->ndim == 1 || x1->ndim == 2) &&
              em_dtype_is_float(x1->dtype) && x2->dtype == x1->dtype && y->dtype == x1->dtype &&
              y->ndim == x1->ndim - 1 && (y->ndim == 0 || y->shape[0] == x1->shape[0]);
    if (!ok) {
        char b1[128], b2[128], by[128];
        em_set_error(EM_ERR_ARG, "%s: x1, x2 must be (N, D) or (D) of one shape and float dtype "
                     "and target (N) or () of theirs: %s %s, %s %s, target %s %s", fn,
                     em_dtype_name(x1->dtype), em_shape_str(x1, b1, sizeof b1),
                     em_dtype_name(x2->dtype), em_shape_str(x2, b2, sizeof b2),
                     em_dtype_name(y->dtype), em_shape_str(y, by, sizeof by));
    }
    return ok;
}

/* PyTorch's: cos = x1 . x2 / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12)); 1 - cos where target is 1,
 * max(cos - margin, 0) where it is -1, 0 elsewhere */
em_tensor *em_cosine_embedding_loss(const em_tensor *x1, const em_tensor *x2,
                                    const em_tensor *target, double margin, em_reduction r)
{
    const char *fn = "em_cosine_embedding_loss";
    if (!em_present(x1, fn, "x1") || !em_present(x2, fn, "x2") ||
        !em_present(target, fn, "target") || !check_embedding_args(x1, x2, target, r, fn))
        return NULL;
    em_scope_begin();
    int d = x1->ndim - 1;
    em_tensor *dot = em_sum(em_mul(x1, x2), &d, 1, false);
    em_tensor *sq1 = em_add_scalar(em_sum(em_square(x1), &d, 1, false), 1e-12);
    em_tensor *sq2 = em_add_scalar(em_sum(em_square(x2), &d, 1, false), 1e-12);
    em_tensor *cos = em_div(dot, em_sqrt(em_mul(sq1, sq2)));
    em_tensor *zero = em_to_device(em_scalar(0, x1->dtype), x1->device);
    em_tensor *one = em_to_device(em_scalar(1, x1->dtype), x1->device);
    em_tensor *pos = em_where(em_eq(target, one), em_add_scalar(em_neg(cos), 1.0), zero);
    em_tensor *neg = em_where(em_eq(target, em_neg(one)),
                              em_clamp(em_add_scalar(cos, -margin), 0, INFINITY), zero);
    em_tensor *per = em_add(pos, neg);
    return em_nn_scope_return(em_loss_reduce(per, r, NULL, (double)(d ? x1->shape[0] : 1)));
}

/* PyTorch's: max(-target (x1 - x2) + margin, 0), clamp's gradient at 0 included */
em_tensor *em_margin_ranking_loss(const em_tensor *x1, const em_tensor *x2,
                                  const em_tensor *target, double margin, em_reduction r)
{
    const char *fn = "em_margin_ranking_loss";
    if (!em_present(x1, fn, "x1") || !em_present(x2, fn, "x2") ||
        !em_present(target, fn, "target") || !em_loss_reduction_ok(r, fn))
        return NULL;
    if (!em_same_shape(x1, x2) || !em_same_shape(x1, target)) {
        char b1[128], b2[128], by[128];
        em_set_error(EM_ERR_ARG, "%s: x1 %s, x2 %s and target %s must have one shape", fn,
                     em_shape_str(x1, b1, sizeof b1), em_shape_str(x2, b2, sizeof b2),
                     em_shape_str(target, by, sizeof by));
        return NULL;
    }
    em_scope_begin();
    em_tensor *z = em_add_scalar(em_neg(em_mul(target, em_sub(x1, x2))), margin);
    em_tensor *per = em_clamp(z, 0, INFINITY);
    return em_nn_scope_return(em_loss_reduce(per, r, NULL, (double)em_numel(x1)));
}
