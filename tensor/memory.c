/* Per-device caching allocator: freed blocks wait in size-class bins for reuse; live, reserved
 * and peak bytes, cache hits and misses, and a budget on reserved bytes; thread-safe. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_internal.h"
#include "tensor/memory_internal.h"

#define SMALL_STEP 512
#define SMALL_MAX ((size_t)1 << 20)
#define N_SMALL (int)(SMALL_MAX / SMALL_STEP) /* classes 512, 1024, ..., 1 MiB */
#define LARGE_DIVS 8                          /* classes per power of two above 1 MiB */
#define MAX_SHIFT 61                          /* the largest class is 2^62 bytes */
#define N_CLASSES (N_SMALL + (MAX_SHIFT - 20 + 1) * LARGE_DIVS)

/* A block waiting in a bin; the nodes are host memory, so the blocks may be any device's. */
typedef struct cached_block {
    void *ptr;
    struct cached_block *next;
} cached_block;

typedef struct {
    pthread_mutex_t lock;
    em_memory_stats stats;
    cached_block *bins[N_CLASSES];
    cached_block *spare; /* nodes to reuse */
    size_t window_peak;  /* the most live bytes since the last em_memory_take_window_peak */
    bool configured;     /* caching set from the environment or by a call */
    bool no_cache;
} pool;

static pool pools[EM_NDEVICES] = {[0 ... EM_NDEVICES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};

static bool device_valid(em_device device)
{
    return (unsigned)device < EM_NDEVICES;
}

/* The class of an nbytes request and its block size; -1 when no class is that large. */
static int size_class(size_t nbytes, size_t *block)
{
    if (nbytes <= SMALL_MAX) {
        size_t i = nbytes ? (nbytes - 1) / SMALL_STEP : 0;
        *block = (i + 1) * SMALL_STEP;
        return (int)i;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(nbytes - 1)); /* 2^k < nbytes <= 2^(k+1) */
    if (k > MAX_SHIFT)
        return -1;
    size_t base = (size_t)1 << k, step = base / LARGE_DIVS;
    size_t j = (nbytes - base + step - 1) / step; /* 1 .. LARGE_DIVS */
    *block = base + j * step;
    return N_SMALL + (k - 20) * LARGE_DIVS + (int)(j - 1);
}

static void configure(pool *p)
{
    if (p->configured)
        return;
    const char *env = getenv("EMBER_MEMORY_CACHE");
    p->no_cache = env && !strcmp(env, "0");
    p->configured = true;
}

/* Empties p's bins (lock held); the caller gives the returned blocks back without the lock. */
static cached_block *take_cache(pool *p)
{
    cached_block *all = NULL;
    if (!p->stats.cached_bytes)
        return NULL;
    for (int c = 0; c < N_CLASSES; c++) {
        while (p->bins[c]) {
            cached_block *b = p->bins[c];
            p->bins[c] = b->next;
            b->next = all;
            all = b;
        }
    }
    p->stats.reserved_bytes -= p->stats.cached_bytes;
    p->stats.cached_bytes = 0;
    return all;
}

static void give_back(const em_backend *be, cached_block *list)
{
    while (list) {
        cached_block *next = list->next;
        be->free(list->ptr);
        free(list);
        list = next;
    }
}

/* Counts a served request (lock held). */
static void count_live(pool *p, size_t nbytes)
{
    em_memory_stats *s = &p->stats;
    s->live_bytes += nbytes;
    if (s->live_bytes > s->peak_bytes)
        s->peak_bytes = s->live_bytes;
    if (s->live_bytes > p->window_peak)
        p->window_peak = s->live_bytes;
    s->allocated_bytes += nbytes;
    s->n_allocs++;
    s->live_storages++;
}

/* A block of size from the device, within the budget; fn (or NULL) names the caller in errors. */
static void *device_alloc(const char *fn, em_device device, const em_backend *be, size_t size,
                          size_t nbytes)
{
    pool *p = &pools[device];
    p->stats.cache_misses++;
    size_t budget = p->stats.budget_bytes;
    cached_block *flushed = NULL;
    if (budget && p->stats.reserved_bytes + size > budget)
        flushed = take_cache(p);
    size_t reserved = p->stats.reserved_bytes;
    if (budget && reserved + size > budget) {
        pthread_mutex_unlock(&p->lock);
        give_back(be, flushed);
        if (fn)
            em_set_error(EM_ERR_MEMORY, "%s: memory budget exceeded: %zu of %zu bytes on %s "
                         "(%zu asked, %zu reserved)", fn, reserved + size, budget,
                         em_device_name(device), nbytes, reserved);
        return NULL;
    }
    p->stats.reserved_bytes += size; /* held for this request while the device allocates */
    pthread_mutex_unlock(&p->lock);
    give_back(be, flushed);
    void *ptr = be->alloc(size);
    if (!ptr) { /* the device is full: give the cache back and try once more */
        pthread_mutex_lock(&p->lock);
        flushed = take_cache(p);
        pthread_mutex_unlock(&p->lock);
        if (flushed) {
            give_back(be, flushed);
            ptr = be->alloc(size);
        }
    }
    pthread_mutex_lock(&p->lock);
    if (ptr) {
        count_live(p, nbytes);
        if (p->stats.reserved_bytes > p->stats.peak_reserved_bytes)
            p->stats.peak_reserved_bytes = p->stats.reserved_bytes;
    } else {
        p->stats.reserved_bytes -= size;
    }
    pthread_mutex_unlock(&p->lock);
    if (!ptr && fn)
        em_set_error(EM_ERR_MEMORY, "%s: out of memory allocating %zu bytes on %s", fn, nbytes,
                     em_device_name(device));
    return ptr;
}

static void *pool_alloc(const char *fn, em_device device, size_t nbytes)
{
    const em_backend *be = device_valid(device) ? em_backend_get(device) : NULL;
    if (!be || !be->alloc) {
        if (fn)
            em_set_error(EM_ERR_UNSUPPORTED, "%s: %s backend not available", fn,
                         device_valid(device) ? em_device_name(device) : "(invalid)");
        return NULL;
    }
    size_t size;
    int c = size_class(nbytes, &size);
    if (c < 0) {
        if (fn)
            em_set_error(EM_ERR_MEMORY, "%s: out of memory allocating %zu bytes on %s", fn,
                         nbytes, em_device_name(device));
        return NULL;
    }
    pool *p = &pools[device];
    pthread_mutex_lock(&p->lock);
    configure(p);
    cached_block *b = p->bins[c];
    if (!b)
        return device_alloc(fn, device, be, size, nbytes); /* unlocks */
    void *ptr = b->ptr; /* read under the lock: the node goes back to the spares */
    p->bins[c] = b->next;
    b->next = p->spare;
    p->spare = b;
    p->stats.cached_bytes -= size;
    p->stats.cache_hits++;
    count_live(p, nbytes);
    pthread_mutex_unlock(&p->lock);
    return ptr;
}

void *em_memory_alloc(em_device device, size_t nbytes)
{
    return pool_alloc(NULL, device, nbytes);
}

void *em_memory_alloc_for(const char *fn, em_device device, size_t nbytes)
{
    return pool_alloc(fn, device, nbytes);
}

void em_memory_free(em_device device, void *ptr, size_t nbytes)
{
    if (!ptr)
        return;
    size_t size;
    int c = size_class(nbytes, &size);
    pool *p = &pools[device];
    pthread_mutex_lock(&p->lock);
    em_memory_stats *s = &p->stats;
    s->live_bytes -= nbytes;
    s->n_frees++;
    s->live_storages--;
    cached_block *b = NULL;
    if (!p->no_cache) {
        b = p->spare;
        if (b)
            p->spare = b->next;
        else
            b = malloc(sizeof *b);
    }
    if (b) {
        b->ptr = ptr;
        b->next = p->bins[c];
        p->bins[c] = b;
        s->cached_bytes += size;
    } else {
        s->reserved_bytes -= size;
    }
    pthread_mutex_unlock(&p->lock);
    if (!b)
        em_backend_get(device)->free(ptr);
}

/* Kernels' scratch memory comes through this allocator from before main on, so it is counted. */
__attribute__((constructor)) static void install_workspace_allocator(void)
{
    static const em_workspace_allocator allocator = {.alloc = em_memory_alloc,
                                                     .free = em_memory_free};
    em_workspace_set_allocator(&allocator);
}

em_memory_stats em_memory_get_stats(em_device device)
{
    em_memory_stats out = {0};
    if (!device_valid(device))
        return out;
    pthread_mutex_lock(&pools[device].lock);
    out = pools[device].stats;
    pthread_mutex_unlock(&pools[device].lock);
    return out;
}

void em_memory_reset_peak(em_device device)
{
    if (!device_valid(device))
        return;
    pthread_mutex_lock(&pools[device].lock);
    em_memory_stats *s = &pools[device].stats;
    s->peak_bytes = s->live_bytes;
    s->peak_reserved_bytes = s->reserved_bytes;
    pthread_mutex_unlock(&pools[device].lock);
}

size_t em_memory_take_window_peak(em_device device)
{
    if (!device_valid(device))
        return 0;
    pool *p = &pools[device];
    pthread_mutex_lock(&p->lock);
    size_t peak = p->window_peak > p->stats.live_bytes ? p->window_peak : p->stats.live_bytes;
    p->window_peak = p->stats.live_bytes;
    pthread_mutex_unlock(&p->lock);
    return peak;
}

void em_memory_empty_cache(em_device device)
{
    const em_backend *be = device_valid(device) ? em_backend_get(device) : NULL;
    if (!be)
        return;
    pthread_mutex_lock(&pools[device].lock);
    cached_block *list = take_cache(&pools[device]);
    pthread_mutex_unlock(&pools[device].lock);
    give_back(be, list);
}

bool em_memory_set_caching(em_device device, bool on)
{
    if (!device_valid(device))
        return false;
    pool *p = &pools[device];
    pthread_mutex_lock(&p->lock);
    configure(p);
    bool was_on = !p->no_cache;
    p->no_cache = !on;
    pthread_mutex_unlock(&p->lock);
    if (!on)
        em_memory_empty_cache(device);
    return was_on;
}

em_status em_memory_set_budget(em_device device, size_t bytes)
{
    if (!device_valid(device))
        return em_set_error(EM_ERR_ARG, "em_memory_set_budget: device invalid");
    pthread_mutex_lock(&pools[device].lock);
    pools[device].stats.budget_bytes = bytes;
    bool over = bytes && pools[device].stats.reserved_bytes > bytes;
    pthread_mutex_unlock(&pools[device].lock);
    if (over)
        em_memory_empty_cache(device);
    return EM_OK;
}

static size_t physical_bytes; /* the CPU's physical memory, 0 where the system does not say */
static pthread_once_t physical_once = PTHREAD_ONCE_INIT;

static void read_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages <= SIZE_MAX / (uint64_t)page)
        physical_bytes = (size_t)pages * (size_t)page;
}

size_t em_memory_capacity(em_device device, const char **what)
{
    if (!device_valid(device))
        return 0;
    pthread_mutex_lock(&pools[device].lock);
    size_t budget = pools[device].stats.budget_bytes;
    pthread_mutex_unlock(&pools[device].lock);
    if (budget) {
        *what = "its memory budget";
        return budget;
    }
    pthread_once(&physical_once, read_physical_memory);
    if (device == EM_CPU && physical_bytes) {
        *what = "its physical memory";
        return physical_bytes;
    }
    *what = "the largest size";
    return SIZE_MAX;
}
