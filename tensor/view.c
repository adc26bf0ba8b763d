/* Views for the layers above: aliases over shared storage, contiguous and converted copies,
 * the kernel's em_arr of a tensor, backend lookup and kernel status. */
#include "tensor/core_internal.h"

em_tensor *em_tensor_alias(const em_tensor *t, int ndim, const int64_t *shape,
                           const int64_t *strides, int64_t offset)
{
    static const char fn[] = "em_tensor_alias";
    if (!t) {
        em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
        return NULL;
    }
    em_shape s = {.ndim = ndim};
    if (ndim >= 0 && ndim <= EM_MAX_DIMS)
        for (int i = 0; i < ndim; i++)
            s.d[i] = shape[i];
    if (!em_tensor_check_shape(fn, &s, t->dtype))
        return NULL;
    /* every element of the view must lie inside the storage */
    int64_t lo = offset, hi = offset;
    if (em_shape_numel(&s) > 0) {
        for (int i = 0; i < ndim; i++) {
            int64_t reach = (shape[i] - 1) * strides[i];
            if (reach < 0)
                lo += reach;
            else
                hi += reach;
        }
        int64_t capacity = (int64_t)(t->storage->nbytes / em_dtype_size(t->dtype));
        if (lo < 0 || hi >= capacity) {
            char buf[160];
            em_set_error(EM_ERR_ARG, "%s: view %s at offset %lld exceeds storage of %lld elements",
                         fn, em_shape_fmt(&s, buf, sizeof buf), (long long)offset,
                         (long long)capacity);
            return NULL;
        }
    }
    return em_tensor_wrap(fn, t->storage, t->dtype, ndim, shape, strides, offset);
}

/* A new contiguous tensor of t's shape and device in dtype, holding t's values. */
static em_tensor *copy_as(const char *fn, const em_tensor *t, em_dtype dtype)
{
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be)
        return NULL;
    em_shape s = em_shape_of(t);
    em_tensor *out = em_tensor_new(fn, &s, dtype, t->device);
    if (!out)
        return NULL;
    em_arr dst = em_tensor_arr(out), src = em_tensor_arr(t);
    if (em_kernel_status(be->copy(&dst, &src), fn, t) != EM_OK) {
        em_release(out);
        return NULL;
    }
    return out;
}

/* When t is contiguous the extra reference is the caller's own, never a scope's (it makes no
 * tensor), so "take it, use it, release it" is right inside and outside scopes. */
em_tensor *em_tensor_contiguous_raw(const em_tensor *t)
{
    if (t && em_is_contiguous(t))
        return em_retain((em_tensor *)t);
    return copy_as("em_tensor_contiguous_raw", t, t ? t->dtype : EM_F32);
}

em_tensor *em_tensor_cast_raw(const em_tensor *t, em_dtype dtype)
{
    if (!em_dtype_valid(dtype)) {
        em_set_error(EM_ERR_ARG, "em_tensor_cast_raw: dtype invalid");
        return NULL;
    }
    return copy_as("em_tensor_cast_raw", t, dtype);
}

em_arr em_tensor_arr(const em_tensor *t)
{
    em_arr a = {
        .data = (char *)t->storage->data + t->offset * (int64_t)em_dtype_size(t->dtype),
        .dtype = t->dtype,
        .ndim = t->ndim,
    };
    for (int i = 0; i < t->ndim; i++) {
        a.shape[i] = t->shape[i];
        a.strides[i] = t->strides[i];
    }
    return a;
}

em_arr em_tensor_arr_broadcast(const em_tensor *t, const em_shape *shape)
{
    em_arr a = em_tensor_arr(t);
    a.ndim = shape->ndim;
    for (int i = 0; i < shape->ndim; i++) {
        int j = t->ndim - shape->ndim + i;
        bool expanded = j < 0 || (t->shape[j] == 1 && shape->d[i] != 1);
        a.shape[i] = shape->d[i];
        a.strides[i] = expanded ? 0 : t->strides[j];
    }
    return a;
}

const em_backend *em_tensor_backend(const em_tensor *t, const char *fn)
{
    if (!t) {
        em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
        return NULL;
    }
    return t->storage->be; /* a storage exists only on a device whose backend is present */
}

em_status em_kernel_status(int rc, const char *fn, const em_tensor *t)
{
    const char *dt = t ? em_dtype_name(t->dtype) : "this dtype";
    const char *dev = t ? em_device_name(t->device) : "this device";
    switch (rc) {
    case EM_KERNEL_OK:
        return EM_OK;
    case EM_KERNEL_UNSUPPORTED:
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported for %s on %s", fn, dt, dev);
    case EM_KERNEL_BAD_INDEX: {
        const em_backend *be = t ? t->storage->be : NULL;
        if (be && be->bad_index_kernel) /* raised by an earlier call, found when waiting */
            return em_set_error(EM_ERR_ARG, "%s: an earlier %s on %s met an index out of range "
                                "for its dimension", fn, be->bad_index_kernel(), dev);
        return em_set_error(EM_ERR_ARG, "%s: an index is out of range for its dimension", fn);
    }
    default: {
        const em_backend *be = t ? t->storage->be : NULL;
        const char *said = be && be->take_failure ? be->take_failure() : NULL;
        if (said)
            return em_set_error(EM_ERR_MEMORY, "%s: the %s device failed: %s", fn, dev, said);
        return em_set_error(EM_ERR_MEMORY, "%s: the %s device failed (out of memory or launch)",
                            fn, dev);
    }
    }
}
