/* index_fill and index_put: writing at positions named by index tensors that, as PyTorch's, may
 * count from the end (-1 is the last). The indices are checked and made non-negative on the
 * host, then the write is a scatter (ops_scatter.c), which gives the gradients. */
#include <stdio.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"

/* idx's entries (i64, row-major) on the host, each in [-size, size) made non-negative; NULL
 * with "fn: index 5 is out of bounds for dim 1 of size 4" (or out of memory). Caller frees. */
static int64_t *host_indices(const char *fn, const em_tensor *idx, int dim, int64_t size)
{
    int64_t n = em_numel(idx);
    int64_t *v = em_copy_to_host_new(idx, EM_I64);
    if (!v) {
        em_error_prefix(fn);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < -size || v[i] >= size) {
            em_set_error(EM_ERR_ARG, "%s: index %lld is out of bounds for dim %d of size %lld",
                         fn, (long long)v[i], dim, (long long)size);
            free(v);
            return NULL;
        }
        v[i] += v[i] < 0 ? size : 0;
    }
    return v;
}

/* n host indices as an i64 tensor of shape s on dev; frees v. */
static em_tensor *upload(int64_t *v, em_shape s, em_device dev)
{
    em_tensor *t = em_from_data(s, EM_I64, v);
    free(v);
    return t && dev != EM_CPU ? em_to_device(t, dev) : t;
}

em_tensor *em_index_fill(const em_tensor *self /* (*) */, int dim,
                         const em_tensor *index /* i64 (n) or () */, double value)
{
    const char *fn = "em_index_fill";
    if (!em_present(self, fn, "self") || !em_present(index, fn, "index"))
        return NULL;
    int d = em_norm_dim(dim, self->ndim);
    char bs[128], bi[128];
    if (d < 0 || index->ndim > 1 || index->device != self->device) {
        em_set_error(EM_ERR_ARG, "%s: dim %d, index %s (a vector or scalar on self's device) "
                     "invalid for self %s", fn, dim, em_shape_str(index, bi, sizeof bi),
                     em_shape_str(self, bs, sizeof bs));
        return NULL;
    }
    if (!em_check_index_dtype(fn, index))
        return NULL;
    em_scope_begin();
    int64_t n = em_numel(index), *v = host_indices(fn, index, d, self->shape[d]);
    em_shape line = {.ndim = self->ndim}, s = em_shape_of(self); /* index along dim d */
    for (int k = 0; k < self->ndim; k++)
        line.d[k] = k == d ? n : 1;
    s.d[d] = n;
    em_tensor *at = v ? em_expand(upload(v, line, self->device), s) : NULL;
    return em_scope_return(at ? em_scatter_op(fn, "index_fill", self, d, at, NULL, value, false)
                              : NULL);
}

/* The n index tensors broadcast together into *b; false with an error naming their shapes. */
static bool broadcast_indices(const char *fn, em_tensor *const *indices, int n, em_shape *b)
{
    *b = (em_shape){0};
    for (int i = 0; i < n; i++) {
        em_shape s = em_shape_of(indices[i]);
        if (!em_broadcast_shapes(b, &s, b)) {
            char b0[128], bi[128];
            em_set_error(EM_ERR_ARG, "%s: indices could not be broadcast together: %s and %s",
                         fn, em_shape_str(indices[0], b0, sizeof b0),
                         em_shape_str(indices[i], bi, sizeof bi));
            return false;
        }
    }
    return true;
}

/* False with an error unless indices are 1..self->ndim i64 tensors on self's device and values
 * is on it too. */
static bool index_put_args_ok(const char *fn, const em_tensor *self, em_tensor *const *indices,
                              int n, const em_tensor *values)
{
    if (!indices || n < 1 || n > self->ndim) {
        em_set_error(EM_ERR_ARG, "%s: %d index tensors for a %d-d self (1 to %d)", fn,
                     indices ? n : 0, self->ndim, self->ndim);
        return false;
    }
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "indices[%d]", i);
        if (!em_present(indices[i], fn, name) || !em_check_index_dtype(fn, indices[i]))
            return false;
        if (indices[i]->device != self->device) {
            em_set_error(EM_ERR_ARG, "%s: indices[%d] is not on self's device", fn, i);
            return false;
        }
    }
    if (values->device != self->device) {
        em_set_error(EM_ERR_ARG, "%s: values (on %s) must be on self's device (%s)", fn,
                     em_device_name(values->device), em_device_name(self->device));
        return false;
    }
    return true;
}

/* The row-major position over self's first n dims of every broadcast index (b), as i64 (numel
 * of b) on self's device; NULL with an error naming an index out of bounds. */
static em_tensor *flat_positions(const char *fn, const em_tensor *self, em_tensor *const *indices,
                                 int n, const em_shape *b)
{
    int64_t count = 1;
    for (int k = 0; k < b->ndim; k++)
        count *= b->d[k];
    int64_t *flat = calloc((size_t)(count > 0 ? count : 1), sizeof *flat);
    if (!flat) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    for (int d = 0; d < n; d++) {
        em_tensor *e = em_expand(indices[d], *b);
        int64_t *v = e ? host_indices(fn, e, d, self->shape[d]) : NULL;
        if (!v) {
            free(flat);
            return NULL;
        }
        for (int64_t i = 0; i < count; i++)
            flat[i] = flat[i] * self->shape[d] + v[i];
        free(v);
    }
    return upload(flat, EM_SHAPE(count), self->device);
}

em_tensor *em_index_put(const em_tensor *self /* (*) */, em_tensor *const *indices, int n,
                        const em_tensor *values /* broadcasts to the indexed shape */,
                        bool accumulate)
{
    const char *fn = "em_index_put";
    if (!em_present(self, fn, "self") || !em_present(values, fn, "values") ||
        !index_put_args_ok(fn, self, indices, n, values))
        return NULL;
    if (values->dtype != self->dtype) { /* they meet as a binary op's operands do */
        em_scope_begin();
        const em_tensor *t[2] = {self, values};
        bool ok = em_unify_dtypes(fn, (const char *[]){"self", "values"}, t, 2);
        return em_scope_return(ok ? em_index_put(t[0], indices, n, t[1], accumulate) : NULL);
    }
    em_shape b;
    if (!broadcast_indices(fn, indices, n, &b))
        return NULL;
    em_shape indexed = b; /* (b, self's dims from n on) */
    bool fits = b.ndim + self->ndim - n <= EM_MAX_DIMS;
    int64_t rows = 1, row = 1, count = 1;
    for (int k = 0; k < b.ndim; k++)
        count *= b.d[k];
    for (int k = 0; fits && k < self->ndim; k++) {
        if (k < n) {
            rows *= self->shape[k];
        } else {
            row *= self->shape[k];
            indexed.d[indexed.ndim++] = self->shape[k];
        }
    }
    em_shape vs = em_shape_of(values), put;
    fits = fits && em_broadcast_shapes(&vs, &indexed, &put) && put.ndim == indexed.ndim;
    for (int k = 0; fits && k < indexed.ndim; k++)
        fits = put.d[k] == indexed.d[k];
    if (!fits) {
        char bv[128], bx[128];
        em_set_error(EM_ERR_ARG, "%s: values %s cannot be broadcast to the indexed shape %s", fn,
                     em_shape_str(values, bv, sizeof bv), em_shape_fmt(&indexed, bx, sizeof bx));
        return NULL;
    }
    em_scope_begin();
    em_tensor *at = flat_positions(fn, self, indices, n, &b);
    em_tensor *self2 = em_reshape(self, EM_SHAPE(rows, row));
    em_tensor *v = em_expand(values, indexed);
    em_tensor *src = v ? em_reshape(v, EM_SHAPE(count, row)) : NULL;
    em_tensor *at2 = at ? em_expand(em_reshape(at, EM_SHAPE(count, 1)), EM_SHAPE(count, row))
                        : NULL;
    em_tensor *y = at2 && self2 && src ? em_scatter_op(fn, "index_put", self2, 0, at2, src, 0,
                                                       accumulate)
                                       : NULL;
    return em_scope_return(y ? em_reshape(y, em_shape_of(self)) : NULL);
}
