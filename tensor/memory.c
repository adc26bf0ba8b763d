/* Per-device accounting allocator: live and peak bytes, allocation counts; thread-safe. */
#include <pthread.h>

#include "backend/backend.h"
#include "tensor/memory_internal.h"

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static em_memory_stats stats[EM_NDEVICES];

static bool device_valid(em_device device)
{
    return (unsigned)device < EM_NDEVICES;
}

void *em_memory_alloc(em_device device, size_t nbytes)
{
    const em_backend *be = device_valid(device) ? em_backend_get(device) : NULL;
    if (!be || !be->alloc)
        return NULL;
    void *p = be->alloc(nbytes);
    if (!p)
        return NULL;
    pthread_mutex_lock(&stats_lock);
    em_memory_stats *s = &stats[device];
    s->live_bytes += nbytes;
    if (s->live_bytes > s->peak_bytes)
        s->peak_bytes = s->live_bytes;
    s->n_allocs++;
    s->live_storages++;
    pthread_mutex_unlock(&stats_lock);
    return p;
}

void em_memory_free(em_device device, void *ptr, size_t nbytes)
{
    if (!ptr)
        return;
    em_backend_get(device)->free(ptr);
    pthread_mutex_lock(&stats_lock);
    em_memory_stats *s = &stats[device];
    s->live_bytes -= nbytes;
    s->n_frees++;
    s->live_storages--;
    pthread_mutex_unlock(&stats_lock);
}

em_memory_stats em_memory_get_stats(em_device device)
{
    em_memory_stats out = {0};
    if (!device_valid(device))
        return out;
    pthread_mutex_lock(&stats_lock);
    out = stats[device];
    pthread_mutex_unlock(&stats_lock);
    return out;
}

void em_memory_reset_peak(em_device device)
{
    if (!device_valid(device))
        return;
    pthread_mutex_lock(&stats_lock);
    stats[device].peak_bytes = stats[device].live_bytes;
    pthread_mutex_unlock(&stats_lock);
}
