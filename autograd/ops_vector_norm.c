/* PyTorch's linalg.vector_norm over a list of dims: the forward composed of abs, sum, amax/amin
 * and powers (each with a CUDA kernel), recorded as one node whose backward is PyTorch's, which
 * gives 0 where the norm is 0 (the composition's own rule would give NaN there). */
#include <math.h>

#include "autograd/autograd_internal.h"

typedef struct {
    double ord;
    unsigned mask; /* the reduced dims: bit d = dim d */
} norm_params;

/* (sum |x|^ord)^(1 / ord), max |x| (ord inf), min |x| (-inf), the count of non-zeros (0), over
 * the dims in mask, keeping them. Grad mode off. */
static em_tensor *norm_keepdim(const em_tensor *x /* (*) */, double ord, const int *dims, int n)
{
    em_tensor *a = em_abs(x);
    if (ord == INFINITY)
        return em_amax(a, dims, n, true);
    if (ord == -INFINITY)
        return em_amin(a, dims, n, true);
    if (ord == 0)
        return em_sum(em_to_dtype(em_sign(a), x->dtype), dims, n, true);
    if (ord == 1)
        return em_sum(a, dims, n, true);
    if (ord == 2)
        return em_sqrt(em_sum(em_square(x), dims, n, true));
    return em_pow_scalar(em_sum(em_pow_scalar(a, ord), dims, n, true), 1.0 / ord);
}

/* saved: x, a detached alias of the keepdim norm y; PyTorch's linalg_vector_norm_backward */
static em_status norm_backward(em_node *node, const em_tensor *g /* y's shape */,
                               em_tensor **grad_in)
{
    const norm_params *p = node->params;
    const em_tensor *x = node->saved[0], *y = node->saved[1];
    em_shape sx = em_shape_of(x), sk = em_keep_shape(&sx, p->mask);
    em_tensor *gk = em_reshape(g, sk);
    em_tensor *zero = em_raw_full(node->op, &(em_shape){.ndim = 0}, x->dtype, x->device, 0);
    em_tensor *y_zero = em_eq(y, zero), *sign = em_sign(x), *gx;
    const double ord = p->ord;
    if (ord == 0) {
        gx = em_raw_full(node->op, &sx, x->dtype, x->device, 0);
    } else if (ord == 1) {
        gx = em_mul(sign, gk);
    } else if (isinf(ord)) { /* the elements at the extreme share g evenly */
        int dims[EM_MAX_DIMS], n = 0;
        for (int d = 0; d < sx.ndim; d++)
            if (p->mask & (1u << d))
                dims[n++] = d;
        em_tensor *hit = em_to_dtype(em_eq(em_abs(x), y), x->dtype);
        gx = em_mul(em_mul(sign, hit), em_div(gk, em_sum(hit, dims, n, true)));
    } else if (ord == 2) {
        gx = em_mul(x, em_where(y_zero, zero, em_div(gk, y)));
    } else if (ord < 1) { /* sign(x) |x|^(ord-1) (0 at x = 0) g y^(1-ord) */
        em_tensor *scaled = em_where(em_eq(x, zero), zero,
                                     em_mul(sign, em_pow_scalar(em_abs(x), ord - 1)));
        gx = em_mul(scaled, em_mul(gk, em_pow_scalar(y, 1 - ord)));
    } else { /* sign(x) |x|^(ord-1) g / y^(ord-1), 0 where y = 0 */
        em_tensor *scale = em_where(y_zero, zero, em_div(gk, em_pow_scalar(y, ord - 1)));
        gx = em_mul(em_mul(sign, em_pow_scalar(em_abs(x), ord - 1)), scale);
    }
    grad_in[0] = gx;
    return gx ? EM_OK : em_error_status();
}

em_tensor *em_vector_norm(const em_tensor *t, double ord, const int *dims, int n_dims,
                          bool keepdim)
{
    const char *fn = "em_vector_norm";
    norm_params p = {.ord = ord};
    if (!em_present(t, fn, "t") || !em_dims_mask(fn, t, dims, n_dims, &p.mask))
        return NULL;
    if (!em_dtype_is_float(t->dtype) || !(ord >= 0 || ord == -INFINITY)) {
        em_set_error(EM_ERR_ARG, "%s: t must be floating point and ord >= 0, inf or -inf, not "
                     "%s and ord %g", fn, em_dtype_name(t->dtype), ord);
        return NULL;
    }
    if (em_autocast_needed(EM_AUTOCAST_F32, &t, 1)) { /* norms run in f32 under autocast */
        em_scope_begin();
        const em_tensor *c = t;
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, &c, 1);
        return em_scope_return(ok ? em_vector_norm(c, ord, dims, n_dims, keepdim) : NULL);
    }
    em_scope_begin();
    em_op_begin("vector_norm", t);
    bool grad = em_set_grad_enabled(false);
    em_tensor *yk = norm_keepdim(t, ord, dims, n_dims);
    em_set_grad_enabled(grad);
    em_tensor *y = yk && !keepdim ? em_drop_dims(yk, p.mask) : yk;
    em_tensor *in = (em_tensor *)t;
    em_node *node;
    if (!y || !em_record(y, "vector_norm", norm_backward, &in, 1, &p, sizeof p, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain(in);
        node->saved[1] = em_retain(em_alias_of(yk));
        if (!node->saved[1])
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}
