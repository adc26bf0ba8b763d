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

#endif
