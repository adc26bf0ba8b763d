/* Per-device caching allocator: freed blocks wait in size-class bins for reuse; live, reserved
 * and peak bytes, cache hits and misses, and a budget on reserved bytes; thread-safe. Private
 * pools (a captured graph's memory) keep their blocks apart from the shared bins. */
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

/* A block a private pool owns, in the device's sorted list of them; pool NULL once the pool
 * was freed with the block in use (it joins the shared bins when freed). */
typedef struct {
    void *ptr;
    em_private_pool *pool;
} owned_block;

typedef struct {
    pthread_mutex_t lock;
    em_memory_stats stats;
    cached_block *bins[N_CLASSES];
    cached_block *spare; /* nodes to reuse */
    size_t window_peak;  /* the most live bytes since the last em_memory_take_window_peak */
    bool configured;     /* caching set from the environment or by a call */
    bool no_cache;
    owned_block *owned;  /* (n_owned) by address: the private pools' blocks */
    int64_t n_owned, cap_owned;
} pool;

struct em_private_pool {
    em_device device;
    cached_block *bins[N_CLASSES]; /* its free blocks */
    cached_block *held[N_CLASSES]; /* blocks from outside freed while it captured: a captured
                                      graph may read them, so they wait until it is freed */
    bool capturing;
    em_private_pool_stats stats;
};

/* The private pool the calling thread allocates from on each device, or NULL. */
static _Thread_local em_private_pool *current[EM_NDEVICES];

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

/* The block size of class c (size_class's inverse). */
static size_t class_size(int c)
{
    if (c < N_SMALL)
        return (size_t)(c + 1) * SMALL_STEP;
    int k = 20 + (c - N_SMALL) / LARGE_DIVS, j = (c - N_SMALL) % LARGE_DIVS + 1;
    size_t base = (size_t)1 << k;
    return base + (size_t)j * (base / LARGE_DIVS);
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

/* A block of size from the device, within the budget (lock held; returns with it released); fn
 * (or NULL) names the caller in errors. While a graph is captured the cache is not given back
 * to the device to make room: a device free would wait for it. */
static void *device_alloc(const char *fn, em_device device, const em_backend *be, size_t size,
                          size_t nbytes)
{
    pool *p = &pools[device];
    p->stats.cache_misses++;
    size_t budget = p->stats.budget_bytes;
    cached_block *flushed = NULL;
    bool capturing = current[device] && current[device]->capturing;
    if (budget && p->stats.reserved_bytes + size > budget && !capturing)
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
    if (!ptr && !capturing) { /* the device is full: give the cache back and try once more */
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

/* The index of ptr in the device's owned list, or where it would go (*found false). */
static int64_t owned_find(const pool *p, const void *ptr, bool *found)
{
    int64_t lo = 0, hi = p->n_owned;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)p->owned[mid].ptr < (uintptr_t)ptr)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < p->n_owned && p->owned[lo].ptr == ptr;
    return lo;
}

/* ptr joins priv's blocks (lock held); false when out of host memory. */
static bool owned_add(pool *p, void *ptr, em_private_pool *priv)
{
    if (p->n_owned == p->cap_owned) {
        int64_t cap = p->cap_owned ? 2 * p->cap_owned : 256;
        owned_block *o = realloc(p->owned, (size_t)cap * sizeof *o);
        if (!o)
            return false;
        p->owned = o;
        p->cap_owned = cap;
    }
    bool found;
    int64_t at = owned_find(p, ptr, &found);
    memmove(p->owned + at + 1, p->owned + at, (size_t)(p->n_owned - at) * sizeof *p->owned);
    p->owned[at] = (owned_block){ptr, priv};
    p->n_owned++;
    return true;
}

static void owned_remove(pool *p, int64_t at)
{
    memmove(p->owned + at, p->owned + at + 1, (size_t)(p->n_owned - at - 1) * sizeof *p->owned);
    p->n_owned--;
}

/* A node for a cached block (lock held): a spare one, else a new one; NULL when out of memory. */
static cached_block *node_new(pool *p)
{
    cached_block *b = p->spare;
    if (b)
        p->spare = b->next;
    else
        b = malloc(sizeof *b);
    return b;
}

/* The block at the head of *bin, out of the list for the caller (lock held): its node goes back
 * to the spares; a cache hit of nbytes. */
static void *take_cached(pool *p, cached_block **bin, size_t nbytes)
{
    cached_block *b = *bin;
    void *ptr = b->ptr;
    *bin = b->next;
    b->next = p->spare;
    p->spare = b;
    p->stats.cache_hits++;
    count_live(p, nbytes);
    return ptr;
}

/* A request of class c served by priv (the device's lock held; returns with it released): its
 * own free block, else a block of the shared cache or the device that joins it. */
static void *private_alloc(const char *fn, em_private_pool *priv, const em_backend *be, int c,
                           size_t size, size_t nbytes)
{
    pool *p = &pools[priv->device];
    if (priv->bins[c]) {
        void *ptr = take_cached(p, &priv->bins[c], nbytes);
        pthread_mutex_unlock(&p->lock);
        return ptr;
    }
    void *ptr = NULL;
    if (p->bins[c]) { /* from the shared cache */
        ptr = take_cached(p, &p->bins[c], nbytes);
        p->stats.cached_bytes -= size;
    } else {
        priv->stats.capture_device_allocs += priv->capturing;
        ptr = device_alloc(fn, priv->device, be, size, nbytes); /* unlocks */
        pthread_mutex_lock(&p->lock);
    }
    if (ptr && !owned_add(p, ptr, priv)) { /* an unowned block: give it back */
        pthread_mutex_unlock(&p->lock);
        em_memory_free(priv->device, ptr, nbytes);
        if (fn)
            em_set_error(EM_ERR_MEMORY, "%s: out of host memory for the pool's list", fn);
        return NULL;
    }
    if (ptr) {
        priv->stats.blocks++;
        priv->stats.bytes += size;
    }
    pthread_mutex_unlock(&p->lock);
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
    if (current[device])
        return private_alloc(fn, current[device], be, c, size, nbytes); /* unlocks */
    if (!p->bins[c])
        return device_alloc(fn, device, be, size, nbytes); /* unlocks */
    void *ptr = take_cached(p, &p->bins[c], nbytes); /* read under the lock */
    p->stats.cached_bytes -= size;
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

/* A freed block a private pool takes (lock held, the free counted): one of its own back into
 * its bins, or one from outside freed while the calling thread captures (a captured graph may
 * still read it). False when the shared cache takes it: also a block of a freed pool. */
static bool private_free(pool *p, em_device device, void *ptr, int c)
{
    em_private_pool *mine = current[device];
    bool found = false;
    int64_t at = p->n_owned ? owned_find(p, ptr, &found) : 0;
    em_private_pool *owner = found ? p->owned[at].pool : NULL;
    if (found && !owner) {
        owned_remove(p, at);
        return false;
    }
    if (!owner && !(mine && mine->capturing))
        return false;
    cached_block *b = node_new(p);
    if (!b) /* out of host memory: the block leaks rather than being reused too early */
        return true;
    b->ptr = ptr;
    if (owner) {
        b->next = owner->bins[c];
        owner->bins[c] = b;
    } else {
        b->next = mine->held[c];
        mine->held[c] = b;
        mine->stats.held++;
    }
    return true;
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
    if (private_free(p, device, ptr, c)) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    cached_block *b = NULL;
    if (!p->no_cache)
        b = node_new(p);
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

/* ---- private pools ---- */

em_private_pool *em_private_pool_new(em_device device)
{
    if (!device_valid(device)) {
        em_set_error(EM_ERR_ARG, "em_private_pool_new: device invalid");
        return NULL;
    }
    em_private_pool *priv = calloc(1, sizeof *priv);
    if (!priv) {
        em_set_error(EM_ERR_MEMORY, "em_private_pool_new: out of memory");
        return NULL;
    }
    priv->device = device;
    return priv;
}

void em_private_pool_use(em_private_pool *priv, bool capturing)
{
    pthread_mutex_lock(&pools[priv->device].lock);
    priv->capturing = capturing;
    pthread_mutex_unlock(&pools[priv->device].lock);
    current[priv->device] = priv;
}

void em_private_pool_leave(em_private_pool *priv)
{
    pthread_mutex_lock(&pools[priv->device].lock);
    priv->capturing = false;
    pthread_mutex_unlock(&pools[priv->device].lock);
    if (current[priv->device] == priv)
        current[priv->device] = NULL;
}

em_private_pool_stats em_private_pool_get_stats(const em_private_pool *priv)
{
    pthread_mutex_lock(&pools[priv->device].lock);
    em_private_pool_stats st = priv->stats;
    pthread_mutex_unlock(&pools[priv->device].lock);
    return st;
}

/* The blocks of list (class c) into the shared bins (lock held), or onto *to_device when the
 * cache is off. */
static void share_blocks(pool *p, cached_block *list, int c, cached_block **to_device)
{
    size_t size = class_size(c);
    while (list) {
        cached_block *b = list;
        list = b->next;
        bool found;
        int64_t at = owned_find(p, b->ptr, &found);
        if (found)
            owned_remove(p, at);
        if (p->no_cache) {
            b->next = *to_device;
            *to_device = b;
            p->stats.reserved_bytes -= size;
        } else {
            b->next = p->bins[c];
            p->bins[c] = b;
            p->stats.cached_bytes += size;
        }
    }
}

void em_private_pool_free(em_private_pool *priv)
{
    if (!priv)
        return;
    em_private_pool_leave(priv);
    pool *p = &pools[priv->device];
    cached_block *to_device = NULL;
    pthread_mutex_lock(&p->lock);
    for (int c = 0; c < N_CLASSES; c++) {
        share_blocks(p, priv->bins[c], c, &to_device);
        share_blocks(p, priv->held[c], c, &to_device);
    }
    for (int64_t i = 0; i < p->n_owned; i++) /* in use: they join the shared cache when freed */
        if (p->owned[i].pool == priv)
            p->owned[i].pool = NULL;
    pthread_mutex_unlock(&p->lock);
    give_back(em_backend_get(priv->device), to_device);
    free(priv);
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
