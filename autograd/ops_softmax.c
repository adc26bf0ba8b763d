/* softmax and log_softmax along any dim: the backend works on contiguous rows of the last dim,
 * so another dim is moved last (and back) around the kernel. */
#include "autograd/autograd_internal.h"

/* An alias of t with dim d moved last (back = false) or the last dim moved to d (back = true). */
static em_tensor *move_dim(const em_tensor *t /* (*) */, int d, bool back)
{
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int n = t->ndim;
    for (int i = 0; i < n; i++) {
        int src = i < d ? i : back ? (i == d ? n - 1 : i - 1) : (i == n - 1 ? d : i + 1);
        shape[i] = t->shape[src];
        strides[i] = t->strides[src];
    }
    return em_tensor_alias(t, n, shape, strides, t->offset);
}

/* t in the row layout the kernels want: dim d last, contiguous. */
static const em_tensor *rows_layout(const em_tensor *t /* (*) */, int d)
{
    const em_tensor *m = d == t->ndim - 1 || t->ndim == 0 ? t : move_dim(t, d, false);
    if (!m)
        return NULL;
    return em_is_contiguous(m) ? m : em_tensor_contiguous_raw(m);
}

typedef struct {
    int dim;  /* the softmax dim, normalised */
    bool log; /* log_softmax */
} softmax_params;

/* saved: y in the row layout */
static em_status softmax_backward(em_node *node, const em_tensor *g /* x's shape */,
                                  em_tensor **grad_in)
{
    const softmax_params *p = node->params;
    const em_tensor *y = node->saved[0];
    int d = p->dim;
    const em_backend *be = em_tensor_backend(y, node->op);
    if (!be || !em_kernel_present((const void *)be->softmax_grad, node->op, y))
        return em_error_status();
    const em_tensor *gc = rows_layout(g, d);
    em_tensor *gx = em_empty_on(em_shape_of(y), y->dtype, y->device);
    if (!gc || !gx)
        return em_error_status();
    int64_t cols = y->ndim ? y->shape[y->ndim - 1] : 1, rows = cols ? em_numel(y) / cols : 0;
    int rc = be->softmax_grad(y->dtype, p->log, rows, cols, em_data_ptr(gc),
                              em_data_ptr(y), em_data_ptr(gx));
    if (em_kernel_status(rc, node->op, y) != EM_OK)
        return em_error_status();
    grad_in[0] = d == g->ndim - 1 || g->ndim == 0 ? gx : move_dim(gx, d, true);
    return grad_in[0] ? EM_OK : em_error_status();
}

static em_tensor *softmax(const char *fn, const char *op, bool log, const em_tensor *t /* (*) */,
                          int dim)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    if (em_autocast_needed(EM_AUTOCAST_F32, &t, 1)) { /* runs in f32 under autocast */
        em_scope_begin();
        const em_tensor *c = t;
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, &c, 1);
        return em_scope_return(ok ? softmax(fn, op, log, c, dim) : NULL);
    }
    int d = em_norm_dim(dim, t->ndim > 0 ? t->ndim : 1);
    if (d < 0) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: dim %d out of range for %s", fn, dim,
                     em_shape_str(t, b, sizeof b));
        return NULL;
    }
    if (!em_dtype_is_float(t->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: needs a floating-point tensor, not %s", fn,
                     em_dtype_name(t->dtype));
        return NULL;
    }
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be || !em_kernel_present((const void *)be->softmax, fn, t))
        return NULL;
    em_scope_begin();
    em_op_begin(op, t);
    bool last = t->ndim == 0 || d == t->ndim - 1;
    const em_tensor *xc = rows_layout(t, d);
    em_tensor *yr = xc ? em_empty_on(em_shape_of(xc), t->dtype, t->device) : NULL;
    if (!yr)
        return em_scope_return(NULL);
    int64_t cols = t->ndim ? t->shape[d] : 1, rows = cols ? em_numel(t) / cols : 0;
    if (em_kernel_status(be->softmax(t->dtype, log, rows, cols, em_data_ptr(xc),
                                     em_data_ptr(yr)), fn, t) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *y = yr;
    if (!last) {
        em_tensor *back = move_dim(yr, d, true);
        y = back ? em_empty_on(em_shape_of(t), t->dtype, t->device) : NULL;
        if (!y || em_raw_copy_into(fn, y, back) != EM_OK)
            return em_scope_return(NULL);
    }
    em_tensor *in = (em_tensor *)t;
    softmax_params params = {.dim = d, .log = log};
    em_node *node;
    if (!em_record(y, op, softmax_backward, &in, 1, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain(last ? em_alias_of(yr) : yr);
        if (!node->saved[0])
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

em_tensor *em_softmax(const em_tensor *t /* (*) */, int dim)
{
    return softmax("em_softmax", "softmax", false, t, dim);
}

em_tensor *em_log_softmax(const em_tensor *t /* (*) */, int dim)
{
    return softmax("em_log_softmax", "log_softmax", true, t, dim);
}
