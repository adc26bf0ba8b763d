/* Shape arithmetic: element counts (checked against overflow and against what a device can
 * hold), contiguous strides, broadcasting and "[64,784]" text. */
#include <stdint.h>
#include <stdio.h>

#include "tensor/memory_internal.h"
#include "tensor/tensor_internal.h"

bool em_size_mul(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || (uint64_t)r > SIZE_MAX)
        return false;
    *out = r;
    return true;
}

/* The product of n sizes into *numel and of the nonzero ones (the outermost stride's reach) into
 * *extent; false when a size is negative or a product overflows. */
static bool products(const int64_t *sizes, int n, int64_t *numel, int64_t *extent)
{
    *numel = *extent = 1;
    for (int i = 0; i < n; i++)
        if (!em_size_mul(*numel, sizes[i], numel) ||
            !em_size_mul(*extent, sizes[i] ? sizes[i] : 1, extent))
            return false;
    return true;
}

int64_t em_shape_numel(const em_shape *s)
{
    int64_t n, extent;
    return products(s->d, s->ndim, &n, &extent) ? n : -1;
}

/* "[2,3,4]" of n sizes into buf; returns buf. */
static const char *sizes_fmt(const int64_t *sizes, int n, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld",
                                 (long long)sizes[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

bool em_shape_elements(const char *fn, const int64_t *sizes, int n, em_dtype dtype, int64_t *out)
{
    char buf[200];
    for (int i = 0; i < n; i++)
        if (sizes[i] < 0) {
            em_set_error(EM_ERR_ARG, "%s: negative dimension: %s", fn,
                         sizes_fmt(sizes, n, buf, sizeof buf));
            return false;
        }
    int64_t numel, extent, bytes;
    if (!products(sizes, n, &numel, &extent) ||
        !em_size_mul(numel, (int64_t)em_dtype_size(dtype), &bytes)) {
        em_set_error(EM_ERR_ARG, "%s: shape too large: %s", fn,
                     sizes_fmt(sizes, n, buf, sizeof buf));
        return false;
    }
    *out = numel;
    return true;
}

bool em_checked_elements(const char *fn, const int64_t *sizes, int n, em_dtype dtype,
                         em_device device, int64_t *out)
{
    int64_t numel;
    if (!em_shape_elements(fn, sizes, n, dtype, &numel))
        return false;
    const char *what = "";
    uint64_t bytes = (uint64_t)numel * em_dtype_size(dtype), most = em_memory_capacity(device, &what);
    if (bytes > most) {
        char buf[200];
        em_set_error(EM_ERR_MEMORY, "%s: shape %s of %s needs %llu bytes, more than %s holds "
                     "(%s: %llu bytes)", fn, sizes_fmt(sizes, n, buf, sizeof buf),
                     em_dtype_name(dtype), (unsigned long long)bytes, em_device_name(device),
                     what, (unsigned long long)most);
        return false;
    }
    *out = numel;
    return true;
}

void em_contiguous_strides(const em_shape *s, int64_t *strides)
{
    int64_t stride = 1;
    for (int i = s->ndim - 1; i >= 0; i--) {
        strides[i] = stride;
        stride *= s->d[i] > 1 ? s->d[i] : 1;
    }
}

bool em_broadcast_shapes(const em_shape *a, const em_shape *b, em_shape *out)
{
    em_shape r = {.ndim = a->ndim > b->ndim ? a->ndim : b->ndim};
    for (int i = 0; i < r.ndim; i++) {
        int ia = a->ndim - r.ndim + i, ib = b->ndim - r.ndim + i;
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        r.d[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

const char *em_shape_fmt(const em_shape *s, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    int ndim = s->ndim < 0 ? 0 : s->ndim > EM_MAX_DIMS ? EM_MAX_DIMS : s->ndim;
    return sizes_fmt(s->d, ndim, buf, n);
}
