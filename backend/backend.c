/* The registry of backends and the workspace calls. Each backend this build holds has a discovery
 * function (listed in backend_list.c, which CMake writes from the build's options) that registers
 * its table when its device is usable; this file names no concrete backend. */
#include <pthread.h>

#include "backend/backend_internal.h"

/* backend_list.c: the discovery functions of this build's backends, NULL-terminated */
extern void (*const em_backend_discoverers[])(void);

static const em_backend *registry[EM_NDEVICES];
static pthread_once_t discovery_once = PTHREAD_ONCE_INIT;

static void discover_all(void)
{
    for (int i = 0; em_backend_discoverers[i]; i++)
        em_backend_discoverers[i]();
}

void em_backend_register(const em_backend *be)
{
    if (be && (unsigned)be->device < EM_NDEVICES)
        registry[be->device] = be;
}

const em_backend *em_backend_get(em_device dev)
{
    pthread_once(&discovery_once, discover_all);
    return (unsigned)dev < EM_NDEVICES ? registry[dev] : NULL;
}

static em_workspace_allocator workspace_allocator;

void em_workspace_set_allocator(const em_workspace_allocator *a)
{
    __atomic_store(&workspace_allocator.alloc, &a->alloc, __ATOMIC_RELEASE);
    __atomic_store(&workspace_allocator.free, &a->free, __ATOMIC_RELEASE);
}

void *em_workspace_alloc(const em_backend *be, size_t nbytes)
{
    void *(*alloc)(em_device, size_t);
    __atomic_load(&workspace_allocator.alloc, &alloc, __ATOMIC_ACQUIRE);
    return alloc ? alloc(be->device, nbytes) : be->alloc(nbytes);
}

void em_workspace_free(const em_backend *be, void *ptr, size_t nbytes)
{
    if (!ptr)
        return;
    void (*release)(em_device, void *, size_t);
    __atomic_load(&workspace_allocator.free, &release, __ATOMIC_ACQUIRE);
    if (release)
        release(be->device, ptr, nbytes);
    else
        be->free(ptr);
}
