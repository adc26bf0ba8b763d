/* Memory accounting: every tensor byte goes through a per-device caching allocator that counts
 * live, reserved and peak bytes, reuses freed blocks and can hold a device to a budget. */
#ifndef EMBER_MEMORY_H
#define EMBER_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "ember/backend/dtype.h"
#include "ember/tensor/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A request is served from a block of its size class: multiples of 512 bytes up to 1 MiB, then
 * eight classes per power of two (at most 12.5% over). A freed block waits in the cache of its
 * class for the next request of that class; the cache is on by default and can be turned off
 * (em_memory_set_caching, or EMBER_MEMORY_CACHE=0 in the environment before the first
 * allocation, which suits sanitizer runs). */
typedef struct {
    size_t live_bytes;     /* bytes held by live storages, as asked for ("allocated") */
    size_t peak_bytes;     /* the most live_bytes has been since start or the last reset */
    uint64_t n_allocs;     /* allocations served since start (from the cache or the device) */
    uint64_t allocated_bytes; /* the bytes of all those allocations, summed */
    uint64_t n_frees;
    uint64_t live_storages; /* storages alive now */
    size_t reserved_bytes; /* bytes held from the device: blocks in use (whole size classes)
                            * plus the cache */
    size_t peak_reserved_bytes;
    size_t cached_bytes;   /* the part of reserved_bytes waiting in the cache */
    uint64_t cache_hits;   /* allocations served from the cache */
    uint64_t cache_misses; /* allocations that went to the device */
    size_t budget_bytes;   /* the budget on reserved bytes, 0 when none */
} em_memory_stats;

em_memory_stats em_memory_get_stats(em_device device);
void em_memory_reset_peak(em_device device); /* peak := live, peak reserved := reserved */
/* The most live bytes since the last call (or since start), then a new window from the live bytes
 * now: one training step's peak, with peak_bytes left alone. */
size_t em_memory_take_window_peak(em_device device);

/* Gives every cached block back to the device: reserved_bytes drops to the blocks in use. */
void em_memory_empty_cache(em_device device);
/* Turns the cache on or off (off empties it); returns the previous setting. */
bool em_memory_set_caching(em_device device, bool on);

/* Holds reserved_bytes to at most bytes (0: no budget), as a GPU's memory would: a request
 * that does not fit even after emptying the cache fails with EM_ERR_MEMORY and
 * "em_empty: memory budget exceeded: <needed> of <budget> bytes on cpu ...". */
em_status em_memory_set_budget(em_device device, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
