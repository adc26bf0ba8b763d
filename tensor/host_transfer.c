/* Host memory and copies for feeding a device without waiting: page-locked host buffers, copies
 * from them that run beside the device's kernels, and marks of how far the device has got. On a
 * device without asynchronous copies (the CPU) each call falls back to its plain form. */
#include <stdlib.h>

#include "tensor/core_internal.h"

void *em_host_alloc(em_device device, size_t nbytes)
{
    const em_backend *be = em_backend_get(device);
    return be && be->host_alloc ? be->host_alloc(nbytes) : malloc(nbytes ? nbytes : 1);
}

void em_host_free(em_device device, void *ptr)
{
    const em_backend *be = em_backend_get(device);
    if (be && be->host_alloc)
        be->host_free(ptr);
    else
        free(ptr);
}

em_status em_copy_from_host_async(em_tensor *t, const void *host, size_t nbytes, void *after,
                                  void **done)
{
    static const char fn[] = "em_copy_from_host_async";
    *done = NULL;
    const em_backend *be = t->storage->be;
    if (!em_is_contiguous(t) || nbytes > (size_t)em_numel(t) * em_dtype_size(t->dtype))
        return em_set_error(EM_ERR_ARG, "%s: %zu bytes into a non-contiguous or smaller tensor",
                            fn, nbytes);
    int rc = be->copy_from_host_async
                 ? be->copy_from_host_async(em_data_ptr(t), host, nbytes, after, done)
                 : be->copy_from_host(em_data_ptr(t), host, nbytes);
    return em_kernel_status(rc, fn, t);
}

em_status em_device_mark(em_device device, void **ev)
{
    *ev = NULL;
    const em_backend *be = em_backend_get(device);
    if (!be || !be->mark)
        return EM_OK;
    return em_kernel_status(be->mark(ev), "em_device_mark", NULL);
}

em_status em_event_wait(em_device device, void *ev)
{
    const em_backend *be = em_backend_get(device);
    if (!ev || !be || !be->event_wait)
        return EM_OK;
    return em_kernel_status(be->event_wait(ev), "em_event_wait", NULL);
}

void em_event_free(em_device device, void *ev)
{
    const em_backend *be = em_backend_get(device);
    if (ev && be && be->event_free)
        be->event_free(ev);
}

void *em_copy_to_host_new(const em_tensor *t, em_dtype dtype)
{
    if (!em_present(t, "em_copy_to_host_new", "t"))
        return NULL;
    size_t es = em_dtype_size(dtype);
    if (es == 0) {
        em_set_error(EM_ERR_ARG, "em_copy_to_host_new: dtype %d is not one of ember's", (int)dtype);
        return NULL;
    }
    int64_t n = em_numel(t);
    void *v = malloc(es * (size_t)(n > 0 ? n : 1));
    if (!v) {
        em_set_error(EM_ERR_MEMORY, "em_copy_to_host_new: out of memory for %lld elements",
                     (long long)n);
        return NULL;
    }
    if (em_copy_to_host(t, dtype, v) != EM_OK) {
        free(v);
        return NULL;
    }
    return v;
}
