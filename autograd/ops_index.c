/* Joining and indexing: cat, stack, split, index_select, gather, embedding and one_hot. Gradients
 * of the selecting ops are scattered back with the backend's index_add / scatter_add. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

/* ---- cat / stack / split ---- */

/* False when a tensor is NULL: the pending error stays, or one naming it is recorded. */
static bool all_present(const char *fn, em_tensor *const *ts /* n tensors */, int n)
{
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            if (!em_has_error())
                em_set_error(EM_ERR_ARG, "%s: tensor %d is NULL", fn, i);
            return false;
        }
    }
    return true;
}

typedef struct {
    int dim;
    int64_t sizes[]; /* each input's size along dim */
} cat_params;

static em_status cat_backward(em_node *node, const em_tensor *g /* y's shape */,
                              em_tensor **grad_in)
{
    const cat_params *p = node->params;
    int64_t at = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        if (node->inputs[i] && !(grad_in[i] = em_narrow(g, p->dim, at, p->sizes[i])))
            return em_error_status();
        at += p->sizes[i];
    }
    return EM_OK;
}

/* Whether ts (n, none NULL) are on one device and of one shape outside dim d (d < 0: of one
 * shape); else false with an error naming fn and the first that is not. */
static bool joinable(const char *fn, const em_tensor *const *ts, int n, int d)
{
    const em_tensor *t0 = ts[0];
    for (int i = 1; i < n; i++) {
        const em_tensor *t = ts[i];
        if (t->device != t0->device) {
            em_set_error(EM_ERR_ARG, "%s: tensor %d is on %s, tensor 0 on %s", fn, i,
                         em_device_name(t->device), em_device_name(t0->device));
            return false;
        }
        bool same = t->ndim == t0->ndim;
        for (int k = 0; same && k < t->ndim; k++)
            same = k == d || t->shape[k] == t0->shape[k];
        if (!same) {
            char b0[128], bi[128];
            em_shape_str(t0, b0, sizeof b0);
            em_shape_str(t, bi, sizeof bi);
            if (d >= 0)
                em_set_error(EM_ERR_ARG, "%s: tensor %d %s does not match tensor 0 %s outside "
                             "dim %d", fn, i, bi, b0, d);
            else
                em_set_error(EM_ERR_ARG, "%s: tensor %d is %s, tensor 0 is %s", fn, i, bi, b0);
            return false;
        }
    }
    return true;
}

/* ts joined along dim, their dtypes met first (em_unify_dtypes); errors name fn. */
static em_tensor *cat(const char *fn, em_tensor *const *ts /* n tensors, equal outside dim */,
                      int n, int dim)
{
    if (!ts || n < 1) {
        em_set_error(EM_ERR_ARG, "%s: needs at least one tensor", fn);
        return NULL;
    }
    if (!all_present(fn, ts, n))
        return NULL;
    int d = em_norm_dim(dim, ts[0]->ndim);
    if (d < 0) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: dim %d out of range for %s", fn, dim,
                     em_shape_str(ts[0], b, sizeof b));
        return NULL;
    }
    if (!joinable(fn, (const em_tensor *const *)ts, n, d))
        return NULL;
    size_t params_size = sizeof(cat_params) + (size_t)n * sizeof(int64_t);
    cat_params *params = malloc(params_size);
    const em_tensor **in = malloc((size_t)n * sizeof *in);
    if (!params || !in) {
        free(params);
        free(in);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    em_scope_begin();
    memcpy(in, ts, (size_t)n * sizeof *in);
    bool ok = em_unify_dtypes(fn, NULL, in, n);
    em_shape s = em_shape_of(in[0]);
    bool overflow = false;
    for (int i = 1; i < n; i++)
        overflow = overflow || __builtin_add_overflow(s.d[d], in[i]->shape[d], &s.d[d]);
    if (ok && overflow) {
        em_set_error(EM_ERR_ARG, "%s: the %d tensors' sizes along dim %d add up beyond int64", fn,
                     n, dim);
        ok = false;
    }
    int64_t numel;
    ok = ok && em_checked_elements(fn, s.d, s.ndim, in[0]->dtype, in[0]->device, &numel);
    if (ok)
        em_op_begin("cat", in[0]);
    em_tensor *y = ok ? em_empty_on(s, in[0]->dtype, in[0]->device) : NULL;
    params->dim = d;
    int64_t strides[EM_MAX_DIMS], at = 0;
    em_contiguous_strides(&s, strides);
    ok = y != NULL;
    for (int i = 0; i < n && ok; i++) {
        params->sizes[i] = in[i]->shape[d];
        em_tensor *win = em_tensor_alias(y, in[i]->ndim, in[i]->shape, strides,
                                         y->offset + at * strides[d]);
        ok = win && em_raw_copy_into(fn, win, in[i]) == EM_OK;
        at += params->sizes[i];
    }
    ok = ok && em_record(y, "cat", cat_backward, (em_tensor *const *)in, n, params, params_size,
                         NULL);
    free(params);
    free(in);
    return em_scope_return(ok ? y : NULL);
}

em_tensor *em_cat(em_tensor *const *ts /* n tensors, equal outside dim */, int n, int dim)
{
    return cat("em_cat", ts, n, dim);
}

em_tensor *em_stack(em_tensor *const *ts /* n tensors of one shape */, int n, int dim)
{
    const char *fn = "em_stack";
    if (!ts || n < 1) {
        em_set_error(EM_ERR_ARG, "%s: needs at least one tensor", fn);
        return NULL;
    }
    if (!all_present(fn, ts, n) || !joinable(fn, (const em_tensor *const *)ts, n, -1))
        return NULL;
    if (em_norm_dim(dim, ts[0]->ndim + 1) < 0) {
        em_set_error(EM_ERR_ARG, "%s: dim %d out of range for %d-d tensors", fn, dim,
                     ts[0]->ndim);
        return NULL;
    }
    const em_tensor **u = malloc((size_t)n * sizeof *u);
    if (!u) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    em_scope_begin();
    memcpy(u, ts, (size_t)n * sizeof *u);
    bool ok = em_unify_dtypes(fn, NULL, u, n); /* named by the shapes given */
    for (int i = 0; i < n && ok; i++)
        ok = (u[i] = em_unsqueeze(u[i], dim)) != NULL;
    em_tensor *y = ok ? cat(fn, (em_tensor *const *)u, n, dim) : NULL;
    free(u);
    return em_scope_return(y);
}

int em_split(const em_tensor *t /* (*) */, int64_t split_size, int dim,
             em_tensor **out /* max_out pieces */, int max_out)
{
    if (!em_present(t, "em_split", "t"))
        return -1;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || split_size <= 0 || max_out < 0 || (max_out > 0 && !out)) {
        char b[128];
        em_set_error(EM_ERR_ARG, "em_split: split_size %lld along dim %d invalid for %s",
                     (long long)split_size, dim, em_shape_str(t, b, sizeof b));
        return -1;
    }
    int64_t size = t->shape[d];
    int count = size == 0 ? 1 : (int)((size + split_size - 1) / split_size);
    for (int i = 0; i < count && i < max_out; i++) {
        int64_t start = (int64_t)i * split_size;
        int64_t len = size - start < split_size ? size - start : split_size;
        out[i] = em_narrow(t, d, start, len);
        if (!out[i]) {
            for (int k = 0; k < i; k++) {
                em_release(out[k]);
                out[k] = NULL;
            }
            return -1;
        }
    }
    return count;
}

/* ---- index_select / embedding ---- */

bool em_check_index_dtype(const char *fn, const em_tensor *idx /* (*) */)
{
    if (idx->dtype == EM_I64)
        return true;
    em_set_error(EM_ERR_ARG, "%s: index must be i64, not %s", fn, em_dtype_name(idx->dtype));
    return false;
}

em_status em_index_kernel_status(int rc, const char *fn, const em_tensor *x /* (*) */,
                                 const em_tensor *idx /* i64 (*) */, int64_t bound)
{
    if (rc != EM_KERNEL_BAD_INDEX)
        return em_kernel_status(rc, fn, x);
    int64_t n = em_numel(idx);
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    bool read = v && em_copy_to_host(idx, EM_I64, v) == EM_OK;
    for (int64_t i = 0; read && i < n; i++)
        if (v[i] < 0 || v[i] >= bound) {
            em_set_error(EM_ERR_ARG, "%s: index %lld out of range [0, %lld)", fn,
                         (long long)v[i], (long long)bound);
            free(v);
            return EM_ERR_ARG;
        }
    free(v);
    return em_kernel_status(rc, fn, x);
}

/* index_select and gather: the dim they index along */
typedef struct {
    int dim;
    int64_t frozen; /* index_select: the position along dim that gets no gradient (an
                       embedding's padding row), or -1 */
} index_params;

/* Zeroes position at along dim of t; a kernel's return code. */
static int zero_along(const em_backend *be, em_tensor *t /* (*) */, int dim, int64_t at)
{
    em_tensor *line = em_narrow(t, dim, at, 1);
    if (!line)
        return EM_KERNEL_FAILED;
    em_arr a = em_tensor_arr(line);
    return be->fill(&a, 0.0);
}

/* saved[0] = the index, i64 (n) */
static em_status index_select_backward(em_node *node, const em_tensor *g /* y's shape */,
                                       em_tensor **grad_in)
{
    const em_tensor *x = node->inputs[0], *idx = node->saved[0];
    const index_params *p = node->params;
    int d = p->dim;
    em_shape s = em_shape_of(x);
    const em_backend *be = em_tensor_backend(x, "em_index_select");
    if (!be || !em_kernel_present((const void *)be->index_add, "em_index_select", x))
        return em_error_status();
    em_tensor *gx = em_raw_full("em_index_select", &s, g->dtype, g->device, 0.0);
    if (!gx)
        return em_error_status();
    em_arr o = em_tensor_arr(gx), src = em_tensor_arr(g), ai = em_tensor_arr(idx);
    int rc = be->index_add(&o, d, &ai, &src);
    if (rc == EM_KERNEL_OK && p->frozen >= 0)
        rc = zero_along(be, gx, d, p->frozen);
    if (em_kernel_status(rc, "em_index_select", x) != EM_OK)
        return em_error_status();
    grad_in[0] = gx;
    return EM_OK;
}

/* frozen: the position along dim whose gradient stays 0, or -1 */
static em_tensor *index_select_impl(const char *fn, const em_tensor *t /* (*) */, int dim,
                                    const em_tensor *index /* i64 (n) */, int64_t frozen)
{
    if (!em_present(t, fn, "t") || !em_present(index, fn, "index"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    if (d < 0 || index->ndim > 1 || index->device != t->device) {
        char bt[128], bi[128];
        em_set_error(EM_ERR_ARG, "%s: dim %d, index %s (1-D, on t's device) invalid for %s", fn,
                     dim, em_shape_str(index, bi, sizeof bi), em_shape_str(t, bt, sizeof bt));
        return NULL;
    }
    if (!em_check_index_dtype(fn, index))
        return NULL;
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be || !em_kernel_present((const void *)be->index_select, fn, t))
        return NULL;
    em_scope_begin();
    em_op_begin("index_select", t);
    const em_tensor *ic = index->ndim == 1 ? index : em_reshape(index, EM_SHAPE(em_numel(index)));
    em_shape s = em_shape_of(t);
    s.d[d] = em_numel(index);
    em_tensor *y = ic ? em_empty_on(s, t->dtype, t->device) : NULL;
    if (!y)
        return em_scope_return(NULL);
    em_arr o = em_tensor_arr(y), in = em_tensor_arr(t), ai = em_tensor_arr(ic);
    if (em_index_kernel_status(be->index_select(&o, &in, d, &ai), fn, t, ic, t->shape[d])
        != EM_OK)
        return em_scope_return(NULL);
    em_tensor *x = (em_tensor *)t;
    index_params params = {.dim = d, .frozen = frozen};
    em_node *node;
    if (!em_record(y, "index_select", index_select_backward, &x, 1, &params, sizeof params,
                   &node))
        return em_scope_return(NULL);
    if (node)
        node->saved[0] = em_retain((em_tensor *)ic);
    return em_scope_return(y);
}

em_tensor *em_index_select(const em_tensor *t /* (*) */, int dim,
                           const em_tensor *index /* i64 (n) */)
{
    return index_select_impl("em_index_select", t, dim, index, -1);
}

/* The rows of weight at index; padding_idx: the row that gets no gradient (negative counts from
 * the end), or none when !padded. */
static em_tensor *embedding_impl(const char *fn, const em_tensor *weight /* (num, dim) */,
                                 const em_tensor *index /* i64 (*) */, bool padded,
                                 int64_t padding_idx)
{
    if (!em_present(weight, fn, "weight") || !em_present(index, fn, "index"))
        return NULL;
    char bw[128], bi[128];
    if (weight->ndim != 2 || index->ndim >= EM_MAX_DIMS) {
        em_set_error(EM_ERR_ARG, "%s: expected weight (num, dim) and index (*): %s, %s", fn,
                     em_shape_str(weight, bw, sizeof bw), em_shape_str(index, bi, sizeof bi));
        return NULL;
    }
    const int64_t num = weight->shape[0];
    if (padded && (padding_idx < -num || padding_idx >= num)) {
        em_set_error(EM_ERR_ARG, "%s: padding_idx %lld is outside [-%lld, %lld) for weight %s",
                     fn, (long long)padding_idx, (long long)num, (long long)num,
                     em_shape_str(weight, bw, sizeof bw));
        return NULL;
    }
    int64_t frozen = !padded ? -1 : padding_idx < 0 ? padding_idx + num : padding_idx;
    em_scope_begin();
    em_shape s = em_shape_of(index);
    s.d[s.ndim++] = weight->shape[1];
    em_tensor *flat = em_reshape(index, EM_SHAPE(em_numel(index)));
    em_tensor *rows = flat ? index_select_impl(fn, weight, 0, flat, frozen) : NULL;
    return em_scope_return(rows ? em_reshape(rows, s) : NULL);
}

em_tensor *em_embedding(const em_tensor *weight /* (num, dim) */,
                        const em_tensor *index /* i64 (*) */)
{
    return embedding_impl("em_embedding", weight, index, false, 0);
}

em_tensor *em_embedding_padded(const em_tensor *weight /* (num, dim) */,
                               const em_tensor *index /* i64 (*) */, int64_t padding_idx)
{
    return embedding_impl("em_embedding_padded", weight, index, true, padding_idx);
}

/* ---- gather ---- */

/* saved[0] = the index, i64, y's shape */
static em_status gather_backward(em_node *node, const em_tensor *g /* y's shape */,
                                 em_tensor **grad_in)
{
    int d = ((const index_params *)node->params)->dim;
    const em_tensor *x = node->inputs[0], *idx = node->saved[0];
    em_shape s = em_shape_of(x);
    const em_backend *be = em_tensor_backend(x, "em_gather");
    if (!be || !em_kernel_present((const void *)be->scatter_add, "em_gather", x))
        return em_error_status();
    em_tensor *gx = em_raw_full("em_gather", &s, g->dtype, g->device, 0.0);
    if (!gx)
        return em_error_status();
    em_arr o = em_tensor_arr(gx), ai = em_tensor_arr(idx), src = em_tensor_arr(g);
    if (em_kernel_status(be->scatter_add(&o, d, &ai, &src), "em_gather", x) != EM_OK)
        return em_error_status();
    grad_in[0] = gx;
    return EM_OK;
}

em_tensor *em_gather(const em_tensor *t /* (*) */, int dim,
                     const em_tensor *index /* i64, t's ndim, fits t outside dim */)
{
    const char *fn = "em_gather";
    if (!em_present(t, fn, "t") || !em_present(index, fn, "index"))
        return NULL;
    int d = em_norm_dim(dim, t->ndim);
    bool ok = d >= 0 && index->ndim == t->ndim && index->device == t->device;
    for (int k = 0; ok && k < t->ndim; k++)
        ok = k == d || index->shape[k] <= t->shape[k];
    if (!ok) {
        char bt[128], bi[128];
        em_set_error(EM_ERR_ARG, "%s: index %s does not fit %s along dim %d", fn,
                     em_shape_str(index, bi, sizeof bi), em_shape_str(t, bt, sizeof bt), dim);
        return NULL;
    }
    if (!em_check_index_dtype(fn, index))
        return NULL;
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be || !em_kernel_present((const void *)be->gather, fn, t))
        return NULL;
    em_scope_begin();
    em_op_begin("gather", t);
    em_tensor *y = em_empty_on(em_shape_of(index), t->dtype, t->device);
    if (!y)
        return em_scope_return(NULL);
    em_arr o = em_tensor_arr(y), in = em_tensor_arr(t), ai = em_tensor_arr(index);
    if (em_index_kernel_status(be->gather(&o, &in, d, &ai), fn, t, index, t->shape[d]) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *x = (em_tensor *)t;
    index_params params = {.dim = d, .frozen = -1};
    em_node *node;
    if (!em_record(y, "gather", gather_backward, &x, 1, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node)
        node->saved[0] = em_retain((em_tensor *)index);
    return em_scope_return(y);
}

/* ---- one_hot: (*) -> (*, num_classes), i64 ---- */

em_tensor *em_one_hot(const em_tensor *index /* i64 (*) */, int64_t num_classes)
{
    const char *fn = "em_one_hot";
    if (!em_present(index, fn, "index"))
        return NULL;
    if (num_classes <= 0 || index->ndim >= EM_MAX_DIMS) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: %lld classes for index %s", fn, (long long)num_classes,
                     em_shape_str(index, b, sizeof b));
        return NULL;
    }
    em_shape ys = em_shape_of(index); /* (*, num_classes) */
    ys.d[ys.ndim++] = num_classes;
    int64_t numel;
    if (!em_check_index_dtype(fn, index) ||
        !em_checked_elements(fn, ys.d, ys.ndim, EM_I64, index->device, &numel))
        return NULL;
    em_scope_begin();
    em_tensor *classes = em_arange(0, (double)num_classes, 1, EM_I64);
    if (classes && index->device != EM_CPU)
        classes = em_to_device(classes, index->device);
    /* selecting the classes by the index validates it on its device */
    em_tensor *flat = em_reshape(index, EM_SHAPE(em_numel(index)));
    em_tensor *valid = classes && flat ? index_select_impl(fn, classes, 0, flat, -1) : NULL;
    em_tensor *hit = valid ? em_eq(em_unsqueeze(index, -1), classes) : NULL;
    return em_scope_return(em_to_dtype(hit, EM_I64));
}
