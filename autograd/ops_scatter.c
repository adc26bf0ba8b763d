/* Writing along a dim: scatter, scatter_value and scatter_add (PyTorch's out-of-place forms).
 * The result is a new tensor, self with src written (or added) at index; index_fill and
 * index_put (ops_index_put.c) are built on the same op. */
#include "autograd/autograd_internal.h"

typedef struct {
    int dim;
    bool add; /* scatter_add: src is added; else it replaces */
} scatter_params;

/* out (in place) gets src written or added at idx along dim; src (kernel view of idx's shape). */
static em_status scatter_into(const char *fn, bool add, em_tensor *out /* (*) */, int dim,
                              const em_tensor *idx /* i64 */, const em_arr *src)
{
    if (em_numel(idx) == 0)
        return EM_OK;
    const em_backend *be = em_tensor_backend(out, fn);
    if (!be)
        return em_error_status();
    int (*kernel)(const em_arr *, int, const em_arr *, const em_arr *) =
        add ? be->scatter_add : be->scatter;
    if (!em_kernel_present((const void *)kernel, fn, out))
        return em_error_status();
    em_arr o = em_tensor_arr(out), ai = em_tensor_arr(idx);
    return em_index_kernel_status(kernel(&o, dim, &ai, src), fn, out, idx, out->shape[dim]);
}

/* *out: a 0-d tensor of value on dev, seen by a kernel as idx's shape (stride 0 everywhere);
 * false when it could not be made. */
static bool value_arr(const char *fn, double value, em_dtype dt, em_device dev,
                      const em_tensor *idx, em_arr *out)
{
    em_shape scalar = {0}, s = em_shape_of(idx);
    em_tensor *v = em_raw_full(fn, &scalar, dt, dev, value);
    if (v)
        *out = em_tensor_arr_broadcast(v, &s);
    return v != NULL;
}

/* saved[0] = the index, i64 (src's shape). grad_self: g, with the written positions zeroed
 * unless added; grad_src: g gathered at the index (PyTorch's rules, duplicates included). */
static em_status scatter_backward(em_node *node, const em_tensor *g /* self's shape */,
                                  em_tensor **grad_in)
{
    const scatter_params *p = node->params;
    const em_tensor *idx = node->saved[0];
    if (node->inputs[0] && p->add && !(grad_in[0] = em_alias_of(g)))
        return em_error_status();
    if (node->inputs[0] && !p->add) {
        em_shape s = em_shape_of(g);
        em_tensor *gs = em_raw_full(node->op, &s, g->dtype, g->device, 0.0);
        em_arr zero;
        if (!gs || em_raw_copy_into(node->op, gs, g) != EM_OK ||
            !value_arr(node->op, 0.0, g->dtype, g->device, idx, &zero) ||
            scatter_into(node->op, false, gs, p->dim, idx, &zero) != EM_OK)
            return em_error_status();
        grad_in[0] = gs;
    }
    if (node->n_inputs > 1 && node->inputs[1] && !(grad_in[1] = em_gather(g, p->dim, idx)))
        return em_error_status();
    return EM_OK;
}

/* False with an error naming what is wrong unless index (and src, when given) fit self along
 * dim d as PyTorch's scatter asks: one ndim, i64 index on self's device, src of self's dtype,
 * index no larger than src anywhere nor than self outside d. */
static bool scatter_args_ok(const char *fn, const em_tensor *self, int dim, int d,
                            const em_tensor *index, const em_tensor *src)
{
    char bs[128], bi[128], bx[128];
    if (d < 0) {
        em_set_error(EM_ERR_ARG, "%s: dim %d out of range for %s", fn, dim,
                     em_shape_str(self, bs, sizeof bs));
        return false;
    }
    if (!em_check_index_dtype(fn, index))
        return false;
    if (index->device != self->device || (src && (src->device != self->device ||
                                                  src->dtype != self->dtype))) {
        em_set_error(EM_ERR_ARG, "%s: index and src must be on self's device and src of self's "
                     "dtype (%s)", fn, em_dtype_name(self->dtype));
        return false;
    }
    bool fits = index->ndim == self->ndim && (!src || src->ndim == self->ndim);
    for (int k = 0; fits && k < self->ndim; k++)
        fits = (k == d || index->shape[k] <= self->shape[k]) &&
               (!src || index->shape[k] <= src->shape[k]);
    if (!fits)
        em_set_error(EM_ERR_ARG, "%s: index %s must have self's ndim and be no larger than self "
                     "%s outside dim %d and no larger than src %s", fn,
                     em_shape_str(index, bi, sizeof bi), em_shape_str(self, bs, sizeof bs), dim,
                     src ? em_shape_str(src, bx, sizeof bx) : "(a value)");
    return fits;
}

/* src narrowed to index's shape (a differentiable view; src itself when they match). */
static em_tensor *narrow_to(const em_tensor *src, const em_tensor *index)
{
    em_tensor *v = (em_tensor *)src;
    for (int k = 0; v && k < src->ndim; k++)
        if (index->shape[k] != src->shape[k])
            v = em_narrow(v, k, 0, index->shape[k]);
    return v;
}

em_tensor *em_scatter_op(const char *fn, const char *op, const em_tensor *self, int dim,
                         const em_tensor *index, const em_tensor *src, double value, bool add)
{
    if (!em_present(self, fn, "self") || !em_present(index, fn, "index"))
        return NULL;
    int d = em_norm_dim(dim, self->ndim);
    if (!scatter_args_ok(fn, self, dim, d, index, src))
        return NULL;
    em_scope_begin();
    em_op_begin(op, self);
    em_shape s = em_shape_of(self);
    em_tensor *y = em_empty_on(s, self->dtype, self->device);
    em_tensor *inputs[2] = {(em_tensor *)self, src ? narrow_to(src, index) : NULL};
    em_arr from; /* src's elements, or value's */
    bool ready = y && em_raw_copy_into(fn, y, self) == EM_OK &&
                 (src ? inputs[1] != NULL
                      : value_arr(fn, value, self->dtype, self->device, index, &from));
    if (ready && src)
        from = em_tensor_arr(inputs[1]);
    if (!ready || scatter_into(fn, add, y, d, index, &from) != EM_OK)
        return em_scope_return(NULL);
    scatter_params params = {.dim = d, .add = add};
    em_node *node;
    if (!em_record(y, op, scatter_backward, inputs, src ? 2 : 1, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node)
        node->saved[0] = em_retain((em_tensor *)index);
    return em_scope_return(y);
}

/* em_scatter_op with src, which must be given; self and src meet in one dtype as a binary op's
 * operands do */
static em_tensor *scatter_src(const char *fn, const char *op, const em_tensor *self, int dim,
                              const em_tensor *index, const em_tensor *src, bool add)
{
    if (!em_present(self, fn, "self") || !em_present(src, fn, "src"))
        return NULL;
    em_scope_begin();
    const em_tensor *t[2] = {self, src};
    bool ok = em_unify_dtypes(fn, (const char *[]){"self", "src"}, t, 2);
    return em_scope_return(ok ? em_scatter_op(fn, op, t[0], dim, index, t[1], 0.0, add) : NULL);
}

em_tensor *em_scatter(const em_tensor *self /* (*) */, int dim,
                      const em_tensor *index /* i64, self's ndim */,
                      const em_tensor *src /* self's ndim, no smaller than index */)
{
    return scatter_src("em_scatter", "scatter", self, dim, index, src, false);
}

em_tensor *em_scatter_value(const em_tensor *self /* (*) */, int dim,
                            const em_tensor *index /* i64, self's ndim */, double value)
{
    return em_scatter_op("em_scatter_value", "scatter_value", self, dim, index, NULL, value,
                         false);
}

em_tensor *em_scatter_add(const em_tensor *self /* (*) */, int dim,
                          const em_tensor *index /* i64, self's ndim */,
                          const em_tensor *src /* self's ndim, no smaller than index */)
{
    return scatter_src("em_scatter_add", "scatter_add", self, dim, index, src, true);
}
