/* Running sums and products along a dim (cumsum, cumprod) on the backend's cumulative kernel,
 * with PyTorch's gradients: cumsum's is the reverse running sum of g; cumprod's is exact with
 * zeros in the input (no division by one). */
#include "autograd/autograd_internal.h"

/* The running sum or product of x along dim (from the end when reverse), outside the graph. */
static em_tensor *raw_cumulative(const char *fn, bool prod, bool reverse, int dim,
                                 const em_tensor *x /* (*) */)
{
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be || !em_kernel_present((const void *)be->cumulative, fn, x))
        return NULL;
    em_tensor *y = em_empty_on(em_shape_of(x), x->dtype, x->device);
    if (!y)
        return NULL;
    em_arr o = em_tensor_arr(y), i = em_tensor_arr(x);
    if (em_kernel_status(be->cumulative(prod, reverse, dim, &o, &i), fn, x) != EM_OK) {
        em_release(y);
        return NULL;
    }
    return y;
}

typedef struct {
    bool prod;
    int dim;
} cumulative_params;

/* cumprod: (sum_{k >= i} g_k y_k) / x_i before the line's first zero; at the first zero z,
 * sum_{k >= z} g_k c_k with c the running product of x with x_z as 1; after it, 0. */
static em_tensor *cumprod_backward(const char *fn, int dim, const em_tensor *x,
                                   const em_tensor *y, const em_tensor *g /* x's shape */)
{
    em_shape s0 = {.ndim = 0};
    em_tensor *zero = em_raw_full(fn, &s0, x->dtype, x->device, 0);
    em_tensor *one = em_raw_full(fn, &s0, x->dtype, x->device, 1);
    em_tensor *is_zero = em_eq(x, zero);
    em_tensor *zeros_so_far = raw_cumulative(fn, false, false, dim, em_to_dtype(is_zero, x->dtype));
    if (!zeros_so_far)
        return NULL;
    em_tensor *before = em_eq(zeros_so_far, zero);
    em_tensor *first = em_where(is_zero, em_eq(zeros_so_far, one), is_zero);
    em_tensor *gy = em_mul(g, y), *x1 = em_where(first, one, x);
    em_tensor *plain = gy ? raw_cumulative(fn, false, true, dim, gy) : NULL;
    em_tensor *c = x1 ? raw_cumulative(fn, true, false, dim, x1) : NULL;
    em_tensor *gc = c ? em_mul(g, c) : NULL;
    em_tensor *at_zero = gc ? raw_cumulative(fn, false, true, dim, gc) : NULL;
    if (!plain || !at_zero)
        return NULL;
    return em_where(before, em_div(plain, x), em_where(first, at_zero, zero));
}

/* saved: x and a detached alias of y (cumprod) */
static em_status cumulative_backward(em_node *node, const em_tensor *g /* x's shape */,
                                     em_tensor **grad_in)
{
    const cumulative_params *p = node->params;
    grad_in[0] = p->prod ? cumprod_backward(node->op, p->dim, node->saved[0], node->saved[1], g)
                         : raw_cumulative(node->op, false, true, p->dim, g);
    return grad_in[0] ? EM_OK : em_error_status();
}

static em_tensor *cumulative(const char *fn, const char *op_name, bool prod,
                             const em_tensor *t /* (*) */, int dim)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || !em_dtype_is_float(t->dtype)) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: t must be floating point with dim %d, not %s %s", fn, dim,
                     em_dtype_name(t->dtype), em_shape_str(t, b, sizeof b));
        return NULL;
    }
    if (em_autocast_needed(EM_AUTOCAST_F32, &t, 1)) { /* f32 under autocast, as PyTorch's */
        em_scope_begin();
        const em_tensor *c = t;
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, &c, 1);
        return em_scope_return(ok ? cumulative(fn, op_name, prod, c, dim) : NULL);
    }
    em_scope_begin();
    em_op_begin(op_name, t);
    em_tensor *in = (em_tensor *)t;
    em_tensor *y = raw_cumulative(fn, prod, false, d, t);
    cumulative_params params = {.prod = prod, .dim = d};
    em_node *node;
    if (!y || !em_record(y, op_name, cumulative_backward, &in, 1, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node && prod) {
        node->saved[0] = em_retain(in);
        node->saved[1] = em_retain(em_alias_of(y));
        if (!node->saved[1])
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

em_tensor *em_cumsum(const em_tensor *t, int dim)
{
    return cumulative("em_cumsum", "cumsum", false, t, dim);
}

em_tensor *em_cumprod(const em_tensor *t, int dim)
{
    return cumulative("em_cumprod", "cumprod", true, t, dim);
}
