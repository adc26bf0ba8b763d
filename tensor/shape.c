/* Shape arithmetic: element counts, contiguous strides, broadcasting and "[64,784]" text. */
#include <stdint.h>
#include <stdio.h>

#include "tensor/tensor_internal.h"

bool em_size_mul(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || (uint64_t)r > SIZE_MAX)
        return false;
    *out = r;
    return true;
}

int64_t em_shape_numel(const em_shape *s)
{
    int64_t n = 1, extent = 1; /* extent: the nonzero dims' product, the outermost stride's reach */
    for (int i = 0; i < s->ndim; i++)
        if (!em_size_mul(n, s->d[i], &n) ||
            !em_size_mul(extent, s->d[i] ? s->d[i] : 1, &extent))
            return -1;
    return n;
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
    size_t used = (size_t)snprintf(buf, n, "[");
    int ndim = s->ndim < 0 ? 0 : s->ndim > EM_MAX_DIMS ? EM_MAX_DIMS : s->ndim;
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ",%lld" : "%lld", (long long)s->d[i]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}
