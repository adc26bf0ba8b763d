/* Storage: refcounted bytes on one device, allocated and freed through the caching allocator. */
#include <stdlib.h>

#include "tensor/core_internal.h"
#include "tensor/memory_internal.h"

em_storage *em_storage_new(const char *fn, em_device device, size_t nbytes)
{
    const em_backend *be = em_backend_get(device);
    if (!be) {
        em_set_error(EM_ERR_UNSUPPORTED, "%s: %s backend not available", fn,
                     em_device_name(device));
        return NULL;
    }
    em_storage *s = malloc(sizeof *s);
    if (!s) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory allocating %zu bytes on %s", fn, nbytes,
                     em_device_name(device));
        return NULL;
    }
    void *data = em_memory_alloc_for(fn, device, nbytes); /* records why it failed */
    if (!data) {
        free(s);
        return NULL;
    }
    *s = (em_storage){.data = data, .nbytes = nbytes, .device = device, .be = be,
                      .refcount = 1};
    em_storage_touch(s);
    return s;
}

void em_storage_touch(em_storage *s)
{
    static uint64_t versions;
    s->version = __atomic_add_fetch(&versions, 1, __ATOMIC_RELAXED);
}

void em_storage_retain(em_storage *s)
{
    __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
}

void em_storage_release(em_storage *s)
{
    if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    em_memory_free(s->device, s->data, s->nbytes);
    free(s);
}
