/* In-place writes outside autograd (initialisation, optimizer updates) and copies between
 * devices. */
#include "tensor/core_internal.h"

/* A contiguous copy of t on device (t itself, retained, when it is already contiguous there). */
static em_tensor *contiguous_on(const char *fn, const em_tensor *t, em_device device)
{
    if (t->device == device)
        return em_tensor_contiguous_raw(t);
    em_tensor *src = em_tensor_contiguous_raw(t);
    if (!src)
        return NULL;
    em_shape s = em_shape_of(t);
    em_tensor *out = em_tensor_new(fn, &s, t->dtype, device);
    if (out) {
        size_t nbytes = (size_t)em_numel(t) * em_dtype_size(t->dtype);
        /* one side is the CPU: the other device's backend moves the bytes */
        int rc = t->device == EM_CPU
                     ? out->storage->be->copy_from_host(out->storage->data, em_data_ptr(src),
                                                        nbytes)
                     : t->storage->be->copy_to_host(out->storage->data, em_data_ptr(src),
                                                    nbytes);
        if (em_kernel_status(rc, fn, t) != EM_OK) {
            em_release(out);
            out = NULL;
        }
    }
    em_release(src);
    return out;
}

em_tensor *em_to_device(const em_tensor *t, em_device device)
{
    static const char fn[] = "em_to_device";
    if (!t) {
        em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
        return NULL;
    }
    if ((unsigned)device >= EM_NDEVICES) {
        em_set_error(EM_ERR_ARG, "%s: device invalid", fn);
        return NULL;
    }
    if (!em_backend_get(device)) {
        em_set_error(EM_ERR_UNSUPPORTED, "%s: %s backend not available", fn,
                     em_device_name(device));
        return NULL;
    }
    if (t->device == device) /* always a new tensor, even on the same device */
        return em_tensor_cast_raw(t, t->dtype);
    return contiguous_on(fn, t, device);
}

/* Whether t is a leaf that owns its whole storage (a parameter, a buffer), so that it can take
 * new storage in place; else an error naming fn. */
static bool owns_storage(const char *fn, const em_tensor *t)
{
    if (!t->node && t->offset == 0 && em_is_contiguous(t) &&
        em_numel(t) * (int64_t)em_dtype_size(t->dtype) == (int64_t)t->storage->nbytes)
        return true;
    char b[64];
    em_set_error(EM_ERR_ARG, "%s: only a leaf that owns its whole storage changes in place (a "
                 "parameter or buffer), not %s", fn, em_shape_str(t, b, sizeof b));
    return false;
}

/* t (a leaf owning its storage, else an error naming fn) takes the storage of convert(t, to):
 * its values on another device or in another dtype; its grad is converted so too. The old
 * storage dies with the conversion's tensor. */
static em_status replace_storage(const char *fn, em_tensor *t,
                                 em_tensor *(*convert)(const em_tensor *t, int to), int to)
{
    if (!owns_storage(fn, t))
        return EM_ERR_ARG;
    em_tensor *moved = convert(t, to);
    if (!moved)
        return em_error_status();
    em_tensor *grad = t->grad ? convert(t->grad, to) : NULL;
    if (t->grad && !grad) {
        em_release(moved);
        return em_error_status();
    }
    em_storage *old = t->storage;
    t->storage = moved->storage;
    t->device = moved->device;
    t->dtype = moved->dtype;
    moved->storage = old;
    moved->device = old->device;
    em_release(moved);
    if (grad)
        em_scope_forget(grad); /* owned by t, not by a scope */
    em_release(t->grad);
    t->grad = grad;
    return EM_OK;
}

static em_tensor *on_device(const em_tensor *t, int device)
{
    return em_to_device(t, (em_device)device);
}

static em_tensor *in_dtype(const em_tensor *t, int dtype)
{
    return em_tensor_cast_raw(t, (em_dtype)dtype);
}

em_status em_to_device_(em_tensor *t, em_device device)
{
    static const char fn[] = "em_to_device_";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
    return t->device == device ? EM_OK : replace_storage(fn, t, on_device, device);
}

em_status em_to_dtype_(em_tensor *t, em_dtype dtype)
{
    static const char fn[] = "em_to_dtype_";
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
    if ((unsigned)dtype >= EM_NDTYPES)
        return em_set_error(EM_ERR_ARG, "%s: dtype invalid", fn);
    if (t->requires_grad && !em_dtype_is_float(dtype))
        return em_set_error(EM_ERR_ARG, "%s: a tensor that requires grad stays floating, not %s",
                            fn, em_dtype_name(dtype));
    return t->dtype == dtype ? EM_OK : replace_storage(fn, t, in_dtype, dtype);
}

em_status em_copy_(em_tensor *dst, const em_tensor *src)
{
    static const char fn[] = "em_copy_";
    if (!dst || !src)
        return em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
    em_shape ds = em_shape_of(dst), ss = em_shape_of(src), bs;
    bool ok = em_broadcast_shapes(&ss, &ds, &bs) && bs.ndim == ds.ndim;
    for (int i = 0; ok && i < ds.ndim; i++)
        ok = bs.d[i] == ds.d[i];
    if (!ok) {
        char a[160], b[160];
        return em_set_error(EM_ERR_ARG, "%s: source %s does not broadcast to destination %s", fn,
                            em_shape_fmt(&ss, a, sizeof a), em_shape_fmt(&ds, b, sizeof b));
    }
    const em_backend *be = em_tensor_backend(dst, fn);
    if (!be)
        return em_error_status();
    /* a source on another device, or sharing dst's storage, is first copied out of the way */
    bool staged = src->device != dst->device || src->storage == dst->storage;
    em_tensor *tmp = !staged ? NULL
                     : src->device != dst->device ? contiguous_on(fn, src, dst->device)
                                                  : em_tensor_cast_raw(src, src->dtype);
    if (staged && !tmp)
        return em_error_status();
    em_arr out = em_tensor_arr(dst), in = em_tensor_arr_broadcast(tmp ? tmp : src, &ds);
    em_status st = em_kernel_status(be->copy(&out, &in), fn, dst);
    em_storage_touch(dst->storage);
    em_release(tmp);
    return st;
}

static em_status fill(const char *fn, em_tensor *t, double value)
{
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be)
        return em_error_status();
    em_arr a = em_tensor_arr(t);
    em_storage_touch(t->storage);
    return em_kernel_status(be->fill(&a, value), fn, t);
}

em_status em_fill_(em_tensor *t, double value)
{
    return fill("em_fill_", t, value);
}

em_status em_zero_(em_tensor *t)
{
    return fill("em_zero_", t, 0.0);
}
