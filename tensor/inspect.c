/* Inspection: sizes, contiguity, element reads, copies to host memory and a hash of the values. */
#include <math.h>
#include <stdlib.h>

#include "tensor/core_internal.h"
#include "tensor/memory_internal.h"

int64_t em_numel(const em_tensor *t)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "em_numel: NULL tensor");
        return 0;
    }
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int64_t em_size(const em_tensor *t, int dim)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "em_size: NULL tensor");
        return -1;
    }
    int d = dim < 0 ? dim + t->ndim : dim;
    if (d < 0 || d >= t->ndim) {
        char buf[160];
        em_set_error(EM_ERR_ARG, "em_size: dim %d out of range for %s", dim,
                     em_shape_str(t, buf, sizeof buf));
        return -1;
    }
    return t->shape[d];
}

em_shape em_shape_of(const em_tensor *t)
{
    em_shape s = {.ndim = 0};
    if (!t) {
        em_set_error(EM_ERR_ARG, "em_shape_of: NULL tensor");
        return s;
    }
    s.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++)
        s.d[i] = t->shape[i];
    return s;
}

bool em_is_contiguous(const em_tensor *t)
{
    if (!t)
        return false;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0)
            return true;
        if (t->shape[i] != 1 && t->strides[i] != expect)
            return false;
        expect *= t->shape[i];
    }
    return true;
}

bool em_same_shape(const em_tensor *a, const em_tensor *b)
{
    if (!a || !b || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

void *em_data_ptr(const em_tensor *t)
{
    return t ? (char *)t->storage->data + t->offset * (int64_t)em_dtype_size(t->dtype) : NULL;
}

const char *em_shape_str(const em_tensor *t, char *buf, size_t n)
{
    if (!t) {
        if (buf && n)
            snprintf(buf, n, "NULL");
        return buf;
    }
    em_shape s = em_shape_of(t);
    return em_shape_fmt(&s, buf, n);
}

/* The elements of src (a view of t's memory) in row-major order, as dtype, into host dst. */
static em_status arr_to_host(const char *fn, const em_tensor *t, const em_arr *src,
                             em_dtype dtype, void *dst)
{
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be)
        return em_error_status();
    em_arr host = {.data = dst, .dtype = dtype, .ndim = src->ndim};
    int64_t numel = 1;
    for (int i = src->ndim - 1; i >= 0; i--) {
        host.shape[i] = src->shape[i];
        host.strides[i] = numel;
        numel *= src->shape[i];
    }
    if (t->device == EM_CPU)
        return em_kernel_status(be->copy(&host, src), fn, t);
    /* another device: convert into a contiguous device buffer, then bring it over */
    size_t nbytes = (size_t)numel * em_dtype_size(dtype);
    em_arr staged = host;
    staged.data = em_memory_alloc(t->device, nbytes);
    if (!staged.data)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory allocating %zu bytes on %s", fn,
                            nbytes, em_device_name(t->device));
    int rc = be->copy(&staged, src);
    if (rc == EM_KERNEL_OK)
        rc = be->copy_to_host(dst, staged.data, nbytes);
    em_memory_free(t->device, staged.data, nbytes);
    return em_kernel_status(rc, fn, t);
}

int em_copy_to_host(const em_tensor *t, em_dtype dtype, void *dst)
{
    static const char fn[] = "em_copy_to_host";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
    if (!dst)
        return em_set_error(EM_ERR_ARG, "%s: NULL destination", fn);
    if (!em_dtype_valid(dtype))
        return em_set_error(EM_ERR_ARG, "%s: dtype invalid", fn);
    em_arr src = em_tensor_arr(t);
    return arr_to_host(fn, t, &src, dtype, dst);
}

em_status em_copy_element(const char *fn, const em_tensor *t, const int64_t *index, em_dtype dtype,
                          void *dst)
{
    int64_t pos = t->offset;
    for (int i = 0; i < t->ndim; i++)
        pos += index[i] * t->strides[i];
    em_arr src = {
        .data = (char *)t->storage->data + pos * (int64_t)em_dtype_size(t->dtype),
        .dtype = t->dtype,
        .ndim = 0,
    };
    return arr_to_host(fn, t, &src, dtype, dst);
}

double em_get(const em_tensor *t, const int64_t *index)
{
    static const char fn[] = "em_get";
    if (!t) {
        em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
        return NAN;
    }
    if (!index && t->ndim > 0) {
        em_set_error(EM_ERR_ARG, "%s: NULL index", fn);
        return NAN;
    }
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i]) {
            char buf[160];
            em_set_error(EM_ERR_ARG, "%s: index %lld out of range for dim %d of %s", fn,
                         (long long)index[i], i, em_shape_str(t, buf, sizeof buf));
            return NAN;
        }
    }
    double v;
    return em_copy_element(fn, t, index, EM_F64, &v) == EM_OK ? v : NAN;
}

double em_item(const em_tensor *t)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "em_item: NULL tensor");
        return NAN;
    }
    if (em_numel(t) != 1) {
        char buf[160];
        em_set_error(EM_ERR_ARG, "em_item: need exactly one element: %s",
                     em_shape_str(t, buf, sizeof buf));
        return NAN;
    }
    int64_t zeros[EM_MAX_DIMS] = {0};
    double v;
    return em_copy_element("em_item", t, zeros, EM_F64, &v) == EM_OK ? v : NAN;
}

uint64_t em_fnv1a(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ULL;
    return h;
}

uint64_t em_tensor_hash(const em_tensor *t)
{
    uint64_t h = EM_FNV1A_START;
    int64_t head[1 + EM_MAX_DIMS] = {t->dtype};
    for (int i = 0; i < t->ndim; i++)
        head[1 + i] = t->shape[i];
    h = em_fnv1a(h, head, sizeof(int64_t) * (size_t)(1 + t->ndim));
    size_t n = (size_t)em_numel(t) * em_dtype_size(t->dtype);
    if (!em_is_contiguous(t) || t->device != EM_CPU) {
        uint8_t *copy = malloc(n ? n : 1);
        if (copy && em_copy_to_host(t, t->dtype, copy) == EM_OK)
            h = em_fnv1a(h, copy, n);
        free(copy);
        return h;
    }
    return em_fnv1a(h, em_data_ptr(t), n);
}
