/* Reductions over a list of dims (keepdim or not): sum, mean, amax/amin (ties share the gradient
 * evenly), var with a correction, and the non-differentiable argmax/argmin. */
#include "autograd/autograd_internal.h"

/* The dims as a bit mask (bit d = dim d); n 0 means every dim. */
static bool dims_mask(const char *fn, const em_tensor *t /* (*) */, const int *dims, int n,
                      unsigned *mask)
{
    *mask = n == 0 ? (1u << t->ndim) - 1 : 0;
    for (int i = 0; i < n; i++) {
        int d = em_norm_dim(dims[i], t->ndim);
        if (d < 0 || (*mask & (1u << d))) {
            char b[128];
            em_set_error(EM_ERR_ARG, "%s: dim %d out of range or repeated for %s", fn, dims[i],
                         em_shape_str(t, b, sizeof b));
            return false;
        }
        *mask |= 1u << d;
    }
    return true;
}

static em_shape keep_shape(const em_shape *s, unsigned mask)
{
    em_shape k = *s;
    for (int d = 0; d < k.ndim; d++)
        if (mask & (1u << d))
            k.d[d] = 1;
    return k;
}

/* The keepdim result yk without its reduced dims (it is contiguous). */
static em_tensor *drop_dims(const em_tensor *yk /* (*), 1 on the dims in mask */, unsigned mask)
{
    em_shape s = {.ndim = 0};
    for (int d = 0; d < yk->ndim; d++)
        if (!(mask & (1u << d)))
            s.d[s.ndim++] = yk->shape[d];
    int64_t strides[EM_MAX_DIMS];
    em_contiguous_strides(&s, strides);
    return em_tensor_alias(yk, s.ndim, s.d, strides, yk->offset);
}

typedef struct {
    em_reduce_op op;
    unsigned mask;  /* the reduced dims: bit d = dim d */
    int correction; /* var only */
} reduce_params;

/* saved: x, a detached alias of the keepdim output */
static em_status reduce_backward(em_node *node, const em_tensor *g /* y's shape */,
                                 em_tensor **grad_in)
{
    const reduce_params *p = node->params;
    const em_tensor *x = node->inputs[0];
    unsigned mask = p->mask;
    em_reduce_op op = p->op;
    em_shape sx = em_shape_of(x), sk = keep_shape(&sx, mask);
    int64_t count = 1;
    for (int d = 0; d < sx.ndim; d++)
        if (mask & (1u << d))
            count *= sx.d[d];
    em_tensor *gk = em_reshape(g, sk), *gx = NULL;
    int dims[EM_MAX_DIMS], n = 0;
    for (int d = 0; d < sx.ndim; d++)
        if (mask & (1u << d))
            dims[n++] = d;
    switch (op) {
    case EM_REDUCE_SUM:
        gx = em_expand(gk, sx);
        break;
    case EM_REDUCE_MEAN:
        gx = em_expand(em_mul_scalar(gk, 1.0 / (double)count), sx);
        break;
    case EM_REDUCE_VAR: { /* 2 (x - mean) / (N - correction) */
        em_tensor *mean = em_raw_reduce(node->op, EM_REDUCE_MEAN, (em_reduce_params){0}, x, mask);
        double scale = 2.0 / (double)(count - p->correction);
        gx = em_mul(em_mul_scalar(em_sub(x, mean), scale), gk);
        break;
    }
    default: { /* amax/amin: the elements equal to the extreme share g evenly */
        em_tensor *hit = em_to_dtype(em_eq(x, node->saved[1]), x->dtype);
        gx = em_mul(hit, em_div(gk, em_sum(hit, dims, n, true)));
        break;
    }
    }
    grad_in[0] = gx;
    return gx ? EM_OK : em_error_status();
}

static em_tensor *reduce(const char *fn, const char *op_name, em_reduce_op op,
                         const em_tensor *t /* (*) */, const int *dims, int n_dims, bool keepdim,
                         int correction)
{
    unsigned mask;
    if (!em_present(t, fn, "t") || !dims_mask(fn, t, dims, n_dims, &mask))
        return NULL;
    bool f32_policy = op == EM_REDUCE_SUM || op == EM_REDUCE_MEAN || op == EM_REDUCE_VAR;
    if (f32_policy && em_autocast_needed(EM_AUTOCAST_F32, &t, 1)) { /* sums run in f32 */
        em_scope_begin();
        const em_tensor *c = t;
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, &c, 1);
        return em_scope_return(ok ? reduce(fn, op_name, op, c, dims, n_dims, keepdim, correction)
                                  : NULL);
    }
    em_scope_begin();
    em_op_begin(op_name, t);
    em_tensor *in = (em_tensor *)t;
    em_tensor *yk = em_raw_reduce(fn, op, (em_reduce_params){.correction = correction}, t, mask);
    em_tensor *y = yk && !keepdim ? drop_dims(yk, mask) : yk;
    reduce_params params = {.op = op, .mask = mask, .correction = correction};
    em_node *node;
    if (!y || !em_record(y, op_name, reduce_backward, &in, 1, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node) {
        if (op == EM_REDUCE_MAX || op == EM_REDUCE_MIN) {
            node->saved[1] = em_retain(em_alias_of(yk));
            if (!node->saved[1])
                return em_scope_return(NULL);
        }
    }
    return em_scope_return(y);
}

/* ---- t (*) -> y without the reduced dims, or with them as 1 when keepdim ---- */

em_tensor *em_sum(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_sum", "sum", EM_REDUCE_SUM, t, dims, n_dims, keepdim, 0);
}

em_tensor *em_mean(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_mean", "mean", EM_REDUCE_MEAN, t, dims, n_dims, keepdim, 0);
}

em_tensor *em_amax(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_amax", "amax", EM_REDUCE_MAX, t, dims, n_dims, keepdim, 0);
}

em_tensor *em_amin(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_amin", "amin", EM_REDUCE_MIN, t, dims, n_dims, keepdim, 0);
}

em_tensor *em_var(const em_tensor *t, const int *dims, int n_dims, int correction, bool keepdim)
{
    return reduce("em_var", "var", EM_REDUCE_VAR, t, dims, n_dims, keepdim, correction);
}

em_tensor *em_sum_all(const em_tensor *t)
{
    return reduce("em_sum_all", "sum", EM_REDUCE_SUM, t, NULL, 0, false, 0);
}

em_tensor *em_mean_all(const em_tensor *t)
{
    return reduce("em_mean_all", "mean", EM_REDUCE_MEAN, t, NULL, 0, false, 0);
}

static em_tensor *arg_reduce(const char *fn, em_reduce_op op, const em_tensor *t /* (*) */, int dim,
                             bool keepdim)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || t->shape[d] == 0) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: dim %d out of range or empty for %s", fn, dim,
                     em_shape_str(t, b, sizeof b));
        return NULL;
    }
    em_scope_begin();
    em_tensor *yk = em_raw_reduce(fn, op, (em_reduce_params){0}, t, 1u << d);
    return em_scope_return(yk && !keepdim ? drop_dims(yk, 1u << d) : yk);
}

em_tensor *em_argmax(const em_tensor *t, int dim, bool keepdim)
{
    return arg_reduce("em_argmax", EM_REDUCE_ARGMAX, t, dim, keepdim);
}

em_tensor *em_argmin(const em_tensor *t, int dim, bool keepdim)
{
    return arg_reduce("em_argmin", EM_REDUCE_ARGMIN, t, dim, keepdim);
}
