/* Reductions over a list of dims (keepdim or not): sum, mean, prod, amax/amin (ties share the
 * gradient evenly), var and std with a correction, logsumexp, and the non-differentiable
 * argmax/argmin. */
#include <math.h>

#include "autograd/autograd_internal.h"

typedef struct {
    em_reduce_op op;
    unsigned mask;  /* the reduced dims: bit d = dim d */
    int correction; /* var only */
    bool root;      /* var: its square root, the standard deviation */
} reduce_params;

/* PyTorch's prod rule: y / x where the reduced set holds no zero; where it holds one, the
 * product of the others at the zero and 0 elsewhere; where it holds more, 0. gk (x's shape with
 * 1 on the reduced dims). */
static em_tensor *prod_backward(const char *fn, const em_tensor *x, const em_tensor *gk,
                                unsigned mask, const int *dims, int n)
{
    em_shape s0 = {.ndim = 0};
    em_tensor *zero = em_raw_full(fn, &s0, x->dtype, x->device, 0);
    em_tensor *one = em_raw_full(fn, &s0, x->dtype, x->device, 1);
    em_tensor *is_zero = em_eq(x, zero);
    em_tensor *zeros = em_sum(em_to_dtype(is_zero, x->dtype), dims, n, true);
    em_tensor *nonzero = em_where(is_zero, one, x);
    em_tensor *others = em_raw_reduce(fn, EM_REDUCE_PROD, (em_reduce_params){0}, nonzero, mask);
    em_tensor *one_zero = em_where(em_eq(zeros, one), em_where(is_zero, others, zero), zero);
    em_tensor *d = em_where(em_eq(zeros, zero), em_div(others, nonzero), one_zero);
    return em_mul(d, gk);
}

/* saved: x, a detached alias of the keepdim output */
static em_status reduce_backward(em_node *node, const em_tensor *g /* y's shape */,
                                 em_tensor **grad_in)
{
    const reduce_params *p = node->params;
    const em_tensor *x = node->inputs[0];
    unsigned mask = p->mask;
    em_reduce_op op = p->op;
    em_shape sx = em_shape_of(x), sk = em_keep_shape(&sx, mask);
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
    case EM_REDUCE_PROD:
        gx = prod_backward(node->op, x, gk, mask, dims, n);
        break;
    case EM_REDUCE_VAR: { /* 2 (x - mean) / (N - correction); std: times 1 / (2 std), 0 at 0 */
        if (p->root) {
            const em_tensor *y = node->saved[1];
            em_tensor *zero = em_raw_full(node->op, &(em_shape){.ndim = 0}, y->dtype, y->device,
                                          0);
            gk = em_where(em_eq(y, zero), zero, em_div(gk, em_mul_scalar(y, 2.0)));
        }
        em_tensor *mean = em_raw_reduce(node->op, EM_REDUCE_MEAN, (em_reduce_params){0}, x, mask);
        double scale = 2.0 / (double)(count - p->correction);
        gx = em_mul(em_mul_scalar(em_sub(x, mean), scale), gk);
        break;
    }
    case EM_REDUCE_MAX:
    case EM_REDUCE_MIN: { /* the elements equal to the extreme share g evenly */
        em_tensor *hit = em_to_dtype(em_eq(x, node->saved[1]), x->dtype);
        gx = em_mul(hit, em_div(gk, em_sum(hit, dims, n, true)));
        break;
    }
    case EM_REDUCE_ARGMAX:
    case EM_REDUCE_ARGMIN: /* positions: em_argmax and em_argmin record no node */
        return em_set_error(EM_ERR_STATE, "em_backward: %s has no gradient", node->op);
    }
    grad_in[0] = gx;
    return gx ? EM_OK : em_error_status();
}

static em_tensor *reduce(const char *fn, const char *op_name, reduce_params p,
                         const em_tensor *t /* (*) */, const int *dims, int n_dims, bool keepdim)
{
    if (!em_present(t, fn, "t") || !em_dims_mask(fn, t, dims, n_dims, &p.mask))
        return NULL;
    for (int d = 0; d < t->ndim && (p.op == EM_REDUCE_MAX || p.op == EM_REDUCE_MIN); d++)
        if ((p.mask & (1u << d)) && t->shape[d] == 0) { /* PyTorch's rule: no max of nothing */
            char b[128];
            em_set_error(EM_ERR_ARG, "%s: dim %d of %s is empty: it has no %s", fn, d,
                         em_shape_str(t, b, sizeof b), p.op == EM_REDUCE_MAX ? "max" : "min");
            return NULL;
        }
    bool f32_policy = p.op != EM_REDUCE_MAX && p.op != EM_REDUCE_MIN;
    if (f32_policy && em_autocast_needed(EM_AUTOCAST_F32, &t, 1)) { /* sums run in f32 */
        em_scope_begin();
        const em_tensor *c = t;
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, &c, 1);
        return em_scope_return(ok ? reduce(fn, op_name, p, c, dims, n_dims, keepdim) : NULL);
    }
    em_scope_begin();
    em_op_begin(op_name, t);
    em_tensor *in = (em_tensor *)t;
    em_tensor *yk = em_raw_reduce(fn, p.op, (em_reduce_params){.correction = p.correction}, t,
                                  p.mask);
    if (yk && p.root)
        yk = em_raw_unary(fn, EM_UNARY_SQRT, (em_unary_params){0}, yk);
    em_tensor *y = yk && !keepdim ? em_drop_dims(yk, p.mask) : yk;
    em_node *node;
    if (!y || !em_record(y, op_name, reduce_backward, &in, 1, &p, sizeof p, &node))
        return em_scope_return(NULL);
    if (node && (p.op == EM_REDUCE_MAX || p.op == EM_REDUCE_MIN || p.root)) {
        node->saved[1] = em_retain(em_alias_of(yk));
        if (!node->saved[1])
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

/* A reduction of kind op (correction: var's). */
static reduce_params kind(em_reduce_op op)
{
    return (reduce_params){.op = op};
}

/* ---- t (*) -> y without the reduced dims, or with them as 1 when keepdim ---- */

em_tensor *em_sum(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_sum", "sum", kind(EM_REDUCE_SUM), t, dims, n_dims, keepdim);
}

em_tensor *em_mean(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_mean", "mean", kind(EM_REDUCE_MEAN), t, dims, n_dims, keepdim);
}

em_tensor *em_prod(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_prod", "prod", kind(EM_REDUCE_PROD), t, dims, n_dims, keepdim);
}

em_tensor *em_amax(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_amax", "amax", kind(EM_REDUCE_MAX), t, dims, n_dims, keepdim);
}

em_tensor *em_amin(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    return reduce("em_amin", "amin", kind(EM_REDUCE_MIN), t, dims, n_dims, keepdim);
}

em_tensor *em_var(const em_tensor *t, const int *dims, int n_dims, int correction, bool keepdim)
{
    return reduce("em_var", "var", (reduce_params){.op = EM_REDUCE_VAR, .correction = correction},
                  t, dims, n_dims, keepdim);
}

em_tensor *em_std(const em_tensor *t, const int *dims, int n_dims, int correction, bool keepdim)
{
    return reduce("em_std", "std",
                  (reduce_params){.op = EM_REDUCE_VAR, .correction = correction, .root = true}, t,
                  dims, n_dims, keepdim);
}

em_tensor *em_sum_all(const em_tensor *t)
{
    return reduce("em_sum_all", "sum", kind(EM_REDUCE_SUM), t, NULL, 0, false);
}

em_tensor *em_mean_all(const em_tensor *t)
{
    return reduce("em_mean_all", "mean", kind(EM_REDUCE_MEAN), t, NULL, 0, false);
}

/* log(sum(exp(x - m))) + m with m the max over dims (outside the graph: its gradient terms
 * cancel), 0 where it is infinite (a set of -inf gives -inf, not NaN); over an empty set,
 * which has no max, log(0) = -inf as in PyTorch */
em_tensor *em_logsumexp(const em_tensor *t, const int *dims, int n_dims, bool keepdim)
{
    const char *fn = "em_logsumexp";
    unsigned mask;
    if (!em_present(t, fn, "t") || !em_dims_mask(fn, t, dims, n_dims, &mask))
        return NULL;
    if (!em_dtype_is_float(t->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: t must be floating point, not %s", fn,
                     em_dtype_name(t->dtype));
        return NULL;
    }
    em_scope_begin();
    bool empty_set = false;
    for (int d = 0; d < t->ndim; d++)
        empty_set |= (mask & (1u << d)) && t->shape[d] == 0;
    if (empty_set)
        return em_scope_return(em_log(em_sum(em_exp(t), dims, n_dims, keepdim)));
    em_shape s0 = {.ndim = 0};
    em_tensor *zero = em_raw_full(fn, &s0, t->dtype, t->device, 0);
    em_tensor *inf = em_raw_full(fn, &s0, t->dtype, t->device, INFINITY);
    em_tensor *m = em_amax(em_detach(t), dims, n_dims, true);
    m = em_where(em_eq(em_abs(m), inf), zero, m);
    em_tensor *sum = em_sum(em_exp(em_sub(t, m)), dims, n_dims, keepdim);
    em_tensor *m_out = keepdim || !m ? m : em_drop_dims(m, mask);
    return em_scope_return(em_add(em_log(sum), m_out));
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
    return em_scope_return(yk && !keepdim ? em_drop_dims(yk, 1u << d) : yk);
}

em_tensor *em_argmax(const em_tensor *t, int dim, bool keepdim)
{
    return arg_reduce("em_argmax", EM_REDUCE_ARGMAX, t, dim, keepdim);
}

em_tensor *em_argmin(const em_tensor *t, int dim, bool keepdim)
{
    return arg_reduce("em_argmin", EM_REDUCE_ARGMIN, t, dim, keepdim);
}
