/* The caching, accounting allocator behind every storage: the device backend's alloc/free
 * behind a per-device pool, counted in em_memory_get_stats(). Not installed. */
#ifndef EMBER_MEMORY_INTERNAL_H
#define EMBER_MEMORY_INTERNAL_H

#include "tensor/memory.h"

/* nbytes on device through its backend, counted; NULL when out of memory or the device has no
 * backend (no error is recorded: the caller names itself in one). */
void *em_memory_alloc(em_device device, size_t nbytes);
/* The same, recording why on failure: "fn: out of memory allocating N bytes on cpu" or
 * "fn: memory budget exceeded: ..." (EM_ERR_MEMORY). */
void *em_memory_alloc_for(const char *fn, em_device device, size_t nbytes);
/* The most bytes one tensor on device can take: its memory budget when one is set, else for the
 * CPU its physical memory, else SIZE_MAX (a GPU's allocator refuses what it lacks at once). *what
 * says which ("its memory budget", "its physical memory"), for messages. 0 for an invalid device. */
size_t em_memory_capacity(em_device device, const char **what);
/* Give back a block from em_memory_alloc, with the size it was asked for. */
void em_memory_free(em_device device, void *ptr, size_t nbytes);

/* A private pool: a captured graph's memory (tensor/device_graph_internal.h). While it is the
 * calling thread's pool (em_private_pool_use), that thread's allocations on its device are
 * served from its free blocks, else from the shared cache or the device, and such blocks stay
 * its own: freed from any thread they return to it, not to the shared cache. Eager steps run
 * with it grow it, so that the captured step finds every block it asks for there. While it
 * captures, a block from outside it freed by the thread is held until the pool is freed, and the
 * shared cache is not given back to the device to make room (a device free would wait for the
 * device, which a capture forbids). */
typedef struct em_private_pool em_private_pool;
typedef struct {
    int64_t blocks;                /* blocks it owns */
    size_t bytes;                  /* their sizes */
    int64_t capture_device_allocs; /* blocks it took from the device while capturing */
    int64_t held;                  /* blocks from outside held while capturing */
} em_private_pool_stats;

em_private_pool *em_private_pool_new(em_device device); /* NULL + error */
void em_private_pool_use(em_private_pool *p, bool capturing);
void em_private_pool_leave(em_private_pool *p); /* allocations go to the shared cache again */
em_private_pool_stats em_private_pool_get_stats(const em_private_pool *p);
/* Its free and held blocks join the shared cache; blocks still in use join it when freed. */
void em_private_pool_free(em_private_pool *p);

#endif
