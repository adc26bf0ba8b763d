/* Views: reshape, permute, slicing, expand and friends share their input's storage; each backward
 * rule maps the gradient back to the input's geometry. Also contiguous and clone (copies). */
#include <string.h>

#include "autograd/autograd_internal.h"

/* An alias of t with the given geometry, recorded as op with rule bw and the op's parameter
 * struct (params_size bytes; NULL and 0 for none) when grad is needed. */
static em_tensor *view_of(const char *op, em_backward_fn bw, const em_tensor *t /* (*) */, int ndim,
                          const int64_t *shape, const int64_t *strides, int64_t offset,
                          const void *params, size_t params_size)
{
    em_tensor *in = (em_tensor *)t;
    em_op_begin(op, t);
    em_tensor *y = em_tensor_alias(t, ndim, shape, strides, offset);
    if (!y || !em_record(y, op, bw, &in, 1, params, params_size, NULL))
        return NULL;
    return y;
}

/* ---- reshape / view / flatten / squeeze / unsqueeze: grad reshaped back ---- */

static em_status reshape_backward(em_node *node, const em_tensor *g /* y's shape */,
                                  em_tensor **grad_in)
{
    grad_in[0] = em_reshape(g, em_shape_of(node->inputs[0]));
    return grad_in[0] ? EM_OK : em_error_status();
}

/* Resolve one -1 entry against numel; false when the shape cannot hold numel elements or its
 * sizes overflow (em_shape_numel, which also bounds the strides). */
static bool infer_shape(em_shape *s, int64_t numel)
{
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->d[d] == -1 && infer < 0)
            infer = d;
        else if (s->d[d] < 0 || !em_size_mul(known, s->d[d], &known))
            return false;
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return false;
        s->d[infer] = numel / known;
    }
    return em_shape_numel(s) == numel;
}

/* Strides that let shape s view t's elements in row-major order without a copy. */
static bool view_strides(const em_tensor *t /* (*) */, const em_shape *s, int64_t *out)
{
    if (t->ndim == 0 || em_numel(t) == 0) {
        em_contiguous_strides(s, out);
        return true;
    }
    int view_d = s->ndim - 1;
    int64_t base = t->strides[t->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tensor_numel *= t->shape[td];
        if (td == 0 || (t->shape[td - 1] != 1 && t->strides[td - 1] != tensor_numel * base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || s->d[view_d] == 1)) {
                out[view_d] = view_numel * base;
                view_numel *= s->d[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (td > 0) {
                base = t->strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static em_tensor *reshape_impl(const char *fn, const em_tensor *t /* (*) */, em_shape shape,
                               bool copy_ok)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    em_shape s = shape;
    if (s.ndim < 0 || s.ndim > EM_MAX_DIMS || !infer_shape(&s, em_numel(t))) {
        char bt[128], bs[128];
        em_set_error(EM_ERR_ARG, "%s: cannot reshape %s to %s", fn, em_shape_str(t, bt, sizeof bt),
                     em_shape_fmt(&shape, bs, sizeof bs));
        return NULL;
    }
    int64_t strides[EM_MAX_DIMS];
    if (view_strides(t, &s, strides)) {
        em_scope_begin();
        return em_scope_return(view_of("reshape", reshape_backward, t, s.ndim, s.d, strides,
                                       t->offset, NULL, 0));
    }
    if (!copy_ok) {
        char bt[128], bs[128];
        em_set_error(EM_ERR_ARG, "%s: %s cannot be viewed as %s without a copy (use em_reshape)",
                     fn, em_shape_str(t, bt, sizeof bt), em_shape_fmt(&s, bs, sizeof bs));
        return NULL;
    }
    em_scope_begin();
    return em_scope_return(reshape_impl(fn, em_contiguous(t), s, false));
}

em_tensor *em_reshape(const em_tensor *t /* (*) */, em_shape shape)
{
    return reshape_impl("em_reshape", t, shape, true);
}

em_tensor *em_view(const em_tensor *t /* (*) */, em_shape shape)
{
    return reshape_impl("em_view", t, shape, false);
}

em_tensor *em_flatten(const em_tensor *t /* (*) */, int start_dim, int end_dim)
{
    if (!em_present(t, "em_flatten", "t"))
        return NULL;
    int nd = t->ndim > 0 ? t->ndim : 1;
    int s0 = em_norm_dim(start_dim, nd), s1 = em_norm_dim(end_dim, nd);
    if (s0 < 0 || s1 < 0 || s0 > s1) {
        em_set_error(EM_ERR_ARG, "em_flatten: bad dims %d..%d for a %d-d tensor", start_dim,
                     end_dim, t->ndim);
        return NULL;
    }
    if (t->ndim == 0)
        return reshape_impl("em_flatten", t, EM_SHAPE(1), true);
    em_shape s = {.ndim = 0};
    for (int d = 0; d < t->ndim; d++) {
        if (d <= s0 || d > s1)
            s.d[s.ndim++] = t->shape[d];
        else
            s.d[s.ndim - 1] *= t->shape[d];
    }
    return reshape_impl("em_flatten", t, s, true);
}

em_tensor *em_squeeze(const em_tensor *t /* (*) */, int dim)
{
    if (!em_present(t, "em_squeeze", "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0) {
        em_set_error(EM_ERR_ARG, "em_squeeze: dim %d out of range for a %d-d tensor", dim,
                     t->ndim);
        return NULL;
    }
    em_shape s = em_shape_of(t);
    if (s.d[d] == 1) {
        memmove(&s.d[d], &s.d[d + 1], (size_t)(s.ndim - d - 1) * sizeof s.d[0]);
        s.ndim--;
    }
    return reshape_impl("em_squeeze", t, s, false);
}

em_tensor *em_unsqueeze(const em_tensor *t /* (*) */, int dim)
{
    if (!em_present(t, "em_unsqueeze", "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim + 1);
    if (d < 0 || t->ndim == EM_MAX_DIMS) {
        em_set_error(EM_ERR_ARG, "em_unsqueeze: dim %d out of range for a %d-d tensor", dim,
                     t->ndim);
        return NULL;
    }
    em_shape s = em_shape_of(t);
    memmove(&s.d[d + 1], &s.d[d], (size_t)(s.ndim - d) * sizeof s.d[0]);
    s.d[d] = 1;
    s.ndim++;
    return reshape_impl("em_unsqueeze", t, s, false);
}

/* ---- permute / transpose: grad permuted back ---- */

static em_tensor *permute_impl(const char *fn, const em_tensor *t /* (*) */, const int *dims);

typedef struct {
    int dims[EM_MAX_DIMS]; /* y's dim i is the input's dim dims[i], normalised */
} permute_params;

static em_status permute_backward(em_node *node, const em_tensor *g /* y's shape */,
                                  em_tensor **grad_in)
{
    const permute_params *p = node->params;
    int inv[EM_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++)
        inv[p->dims[i]] = i;
    grad_in[0] = permute_impl("em_permute", g, inv);
    return grad_in[0] ? EM_OK : em_error_status();
}

static em_tensor *permute_impl(const char *fn, const em_tensor *t /* (*) */, const int *dims)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    bool seen[EM_MAX_DIMS] = {false};
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    permute_params params = {{0}};
    for (int i = 0; i < t->ndim; i++) {
        int d = em_norm_dim(dims[i], t->ndim);
        if (d < 0 || seen[d]) {
            char b[128];
            em_set_error(EM_ERR_ARG, "%s: dims are not a permutation of the %d dims of %s", fn,
                         t->ndim, em_shape_str(t, b, sizeof b));
            return NULL;
        }
        seen[d] = true;
        params.dims[i] = d;
        shape[i] = t->shape[d];
        strides[i] = t->strides[d];
    }
    em_scope_begin();
    return em_scope_return(view_of("permute", permute_backward, t, t->ndim, shape, strides,
                                   t->offset, &params, sizeof params));
}

em_tensor *em_permute(const em_tensor *t /* (*) */, const int *dims)
{
    return permute_impl("em_permute", t, dims);
}

em_tensor *em_transpose(const em_tensor *t /* (*) */, int dim0, int dim1)
{
    if (!em_present(t, "em_transpose", "t"))
        return NULL;
    int d0 = em_norm_dim(dim0, t->ndim), d1 = em_norm_dim(dim1, t->ndim);
    if (d0 < 0 || d1 < 0) {
        em_set_error(EM_ERR_ARG, "em_transpose: dims %d, %d out of range for a %d-d tensor", dim0,
                     dim1, t->ndim);
        return NULL;
    }
    int dims[EM_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        dims[i] = i;
    dims[d0] = d1;
    dims[d1] = d0;
    return permute_impl("em_transpose", t, dims);
}

/* ---- narrow / slice / select: grad scattered into zeros ---- */

typedef struct {
    int dim;
    int64_t start, step; /* along dim */
    bool drop;           /* the dim was dropped (select) */
} slice_params;

static em_status slice_backward(em_node *node, const em_tensor *g /* y's shape */,
                                em_tensor **grad_in)
{
    const slice_params *p = node->params;
    const em_tensor *x = node->inputs[0];
    int dim = p->dim;
    em_shape s = em_shape_of(x);
    em_tensor *gx = em_raw_full("em_backward", &s, g->dtype, g->device, 0.0);
    if (!gx)
        return em_error_status();
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    em_contiguous_strides(&s, strides);
    int64_t offset = gx->offset + p->start * strides[dim];
    int nd = 0;
    for (int d = 0; d < s.ndim; d++) {
        if (d == dim && p->drop)
            continue;
        shape[nd] = d == dim ? g->shape[d] : s.d[d];
        strides[nd] = d == dim ? strides[d] * p->step : strides[d];
        nd++;
    }
    em_tensor *win = em_tensor_alias(gx, nd, shape, strides, offset);
    if (!win || em_raw_copy_into("em_backward", win, g) != EM_OK)
        return em_error_status();
    grad_in[0] = gx;
    return EM_OK;
}

static em_tensor *slice_impl(const em_tensor *t /* (*) */, int dim, int64_t start, int64_t len,
                             int64_t step, bool drop)
{
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d == dim && drop)
            continue;
        shape[nd] = d == dim ? len : t->shape[d];
        strides[nd] = d == dim ? t->strides[d] * step : t->strides[d];
        nd++;
    }
    slice_params params = {.dim = dim, .start = start, .step = step, .drop = drop};
    em_scope_begin();
    return em_scope_return(view_of(drop ? "select" : "slice", slice_backward, t, nd, shape,
                                   strides, t->offset + start * t->strides[dim], &params,
                                   sizeof params));
}

em_tensor *em_narrow(const em_tensor *t /* (*) */, int dim, int64_t start, int64_t length)
{
    if (!em_present(t, "em_narrow", "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || start < 0 || length < 0 || start + length > t->shape[d]) {
        char b[128];
        em_set_error(EM_ERR_ARG, "em_narrow: start %lld length %lld out of range for dim %d of %s",
                     (long long)start, (long long)length, dim, em_shape_str(t, b, sizeof b));
        return NULL;
    }
    return slice_impl(t, d, start, length, 1, false);
}

em_tensor *em_slice(const em_tensor *t /* (*) */, int dim, int64_t start, int64_t end,
                    int64_t step)
{
    if (!em_present(t, "em_slice", "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || step <= 0) {
        char b[128];
        em_set_error(EM_ERR_ARG, "em_slice: dim %d step %lld invalid for %s", dim,
                     (long long)step, em_shape_str(t, b, sizeof b));
        return NULL;
    }
    int64_t n = t->shape[d];
    start = start < 0 ? start + n : start;
    end = end < 0 ? end + n : end;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    return slice_impl(t, d, start, (end - start + step - 1) / step, step, false);
}

em_tensor *em_select(const em_tensor *t /* (*) */, int dim, int64_t index)
{
    if (!em_present(t, "em_select", "t"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    int64_t i = d >= 0 && index < 0 ? index + t->shape[d] : index;
    if (d < 0 || i < 0 || i >= t->shape[d]) {
        char b[128];
        em_set_error(EM_ERR_ARG, "em_select: index %lld out of range for dim %d of %s",
                     (long long)index, dim, em_shape_str(t, b, sizeof b));
        return NULL;
    }
    return slice_impl(t, d, i, 1, 1, true);
}

/* ---- expand: grad summed over the expanded dims ---- */

static em_status expand_backward(em_node *node, const em_tensor *g /* y's shape */,
                                 em_tensor **grad_in)
{
    em_shape s = em_shape_of(node->inputs[0]);
    grad_in[0] = em_grad_sum_to(g, &s);
    return grad_in[0] ? EM_OK : em_error_status();
}

em_tensor *em_expand(const em_tensor *t /* (*) */, em_shape shape)
{
    if (!em_present(t, "em_expand", "t"))
        return NULL;
    int lead = shape.ndim - t->ndim;
    int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
    bool ok = lead >= 0 && shape.ndim <= EM_MAX_DIMS;
    for (int d = 0; ok && d < shape.ndim; d++) {
        int64_t want = shape.d[d];
        if (d < lead) {
            ok = want >= 0;
            sh[d] = want;
            st[d] = 0;
            continue;
        }
        int64_t have = t->shape[d - lead];
        if (want == -1 || want == have) {
            sh[d] = have;
            st[d] = t->strides[d - lead];
        } else if (have == 1 && want >= 0) {
            sh[d] = want;
            st[d] = 0;
        } else {
            ok = false;
        }
    }
    if (!ok) {
        char bt[128], bs[128];
        em_set_error(EM_ERR_ARG, "em_expand: cannot expand %s to %s",
                     em_shape_str(t, bt, sizeof bt), em_shape_fmt(&shape, bs, sizeof bs));
        return NULL;
    }
    em_scope_begin();
    return em_scope_return(view_of("expand", expand_backward, t, shape.ndim, sh, st, t->offset,
                                   NULL, 0));
}

/* ---- contiguous / clone: the gradient passes through ---- */

static em_status identity_backward(em_node *node, const em_tensor *g /* x's shape */,
                                   em_tensor **grad_in)
{
    (void)node;
    grad_in[0] = em_alias_of(g);
    return grad_in[0] ? EM_OK : em_error_status();
}

static em_tensor *copy_impl(const char *fn, const char *op, const em_tensor *t /* (*) */,
                            bool always)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    em_scope_begin();
    em_op_begin(op, t);
    em_tensor *in = (em_tensor *)t, *y;
    if (!always && em_is_contiguous(t)) {
        y = em_alias_of(t);
    } else {
        y = em_empty_on(em_shape_of(t), t->dtype, t->device);
        if (y && em_raw_copy_into(fn, y, t) != EM_OK)
            y = NULL;
    }
    if (y && !em_record(y, op, identity_backward, &in, 1, NULL, 0, NULL))
        y = NULL;
    return em_scope_return(y);
}

em_tensor *em_contiguous(const em_tensor *t /* (*) */)
{
    return copy_impl("em_contiguous", "contiguous", t, false);
}

em_tensor *em_clone(const em_tensor *t /* (*) */)
{
    return copy_impl("em_clone", "clone", t, true);
}
