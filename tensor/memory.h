/* Memory accounting: every tensor byte goes through a per-device allocator that counts
 * live and peak bytes. */
#ifndef EMBER_MEMORY_H
#define EMBER_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "backend/dtype.h"

typedef struct {
    size_t live_bytes;     /* bytes held by live storages */
    size_t peak_bytes;     /* the most live_bytes has been since start or the last reset */
    uint64_t n_allocs;     /* allocations served since start */
    uint64_t n_frees;
    uint64_t live_storages; /* storages alive now */
} em_memory_stats;

em_memory_stats em_memory_get_stats(em_device device);
void em_memory_reset_peak(em_device device); /* peak := live */

#endif
