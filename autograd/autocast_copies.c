/* Autocast's kept copies of parameters: an optimizer registers its parameters; the first region
 * that casts one to a low dtype keeps the copy; each update then writes the copy in the same
 * pass as the f32 parameter, so the next regions take it without a cast; an update that finds
 * its copy untaken since the last one frees it (autocast has ended for it). A copy is taken only
 * while it holds the parameter's bytes as they are (its storage and version), so a parameter
 * written any other way (em_copy_, a load) is cast again. */
#include <pthread.h>
#include <stdlib.h>

#include "autograd/autocast_copies_internal.h"
#include "autograd/autograd_internal.h"

#define BUCKETS 256

typedef struct entry {
    const em_tensor *param;  /* not retained: its optimizers hold it while registered */
    int registrations;
    em_tensor *copy;         /* the kept copy, or NULL */
    const em_storage *storage; /* the parameter's storage and its version that copy holds */
    uint64_t version;
    bool taken;              /* a region took the copy since the last update */
    struct entry *next;
} entry;

static struct {
    pthread_mutex_t lock;
    entry *bucket[BUCKETS];
    em_autocast_copy_stats stats;
} copies = {.lock = PTHREAD_MUTEX_INITIALIZER};

static entry **slot_of(const em_tensor *param)
{
    uintptr_t h = (uintptr_t)param;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    entry **at = &copies.bucket[(h >> 40) % BUCKETS];
    while (*at && (*at)->param != param)
        at = &(*at)->next;
    return at;
}

/* Under the lock: e's copy released. */
static void drop_copy(entry *e)
{
    if (!e->copy)
        return;
    copies.stats.copies--;
    copies.stats.bytes -= (size_t)em_numel(e->copy) * em_dtype_size(e->copy->dtype);
    em_release(e->copy);
    e->copy = NULL;
}

em_status em_autocast_copy_register(const em_tensor *param)
{
    pthread_mutex_lock(&copies.lock);
    entry **at = slot_of(param);
    if (!*at && (*at = calloc(1, sizeof **at)))
        (*at)->param = param;
    if (*at)
        (*at)->registrations++;
    bool ok = *at != NULL;
    pthread_mutex_unlock(&copies.lock);
    return ok ? EM_OK : em_set_error(EM_ERR_MEMORY, "em_optim_add_group: out of memory");
}

void em_autocast_copy_drop(const em_tensor *param)
{
    pthread_mutex_lock(&copies.lock);
    entry **at = slot_of(param), *e = *at;
    if (e && --e->registrations == 0) {
        drop_copy(e);
        *at = e->next;
        free(e);
    }
    pthread_mutex_unlock(&copies.lock);
}

static bool current(const entry *e, em_dtype dtype)
{
    const em_tensor *p = e->param;
    return e->copy && e->copy->dtype == dtype && e->storage == p->storage &&
           e->version == p->storage->version;
}

const em_tensor *em_autocast_weight(const em_tensor *t, em_dtype dtype)
{
    if (!t || t->dtype == dtype)
        return t;
    if (t->dtype != EM_F32 || t->node || !em_is_contiguous(t))
        return em_as_dtype_raw(t, dtype);
    pthread_mutex_lock(&copies.lock);
    entry *e = *slot_of(t);
    const em_tensor *out = NULL;
    if (!e) {
        pthread_mutex_unlock(&copies.lock);
        return em_as_dtype_raw(t, dtype);
    }
    if (!current(e, dtype)) {
        drop_copy(e);
        em_tensor *c = em_tensor_cast_raw(t, dtype);
        if (c && em_scope_depth() > 0)
            em_retain(c); /* the scope releases its reference; this one stays here */
        if (c) {
            e->copy = c;
            e->storage = t->storage;
            e->version = t->storage->version;
            copies.stats.copies++;
            copies.stats.bytes += (size_t)em_numel(c) * em_dtype_size(dtype);
        }
    }
    if (e->copy) {
        e->taken = true;
        out = e->copy;
    }
    pthread_mutex_unlock(&copies.lock);
    return out;
}

em_tensor *em_autocast_copy_to_write(const em_tensor *param)
{
    pthread_mutex_lock(&copies.lock);
    entry *e = *slot_of(param);
    em_tensor *out = NULL;
    if (e && e->copy && !e->taken)
        drop_copy(e);
    if (e && e->copy) {
        e->taken = false;
        out = e->copy;
    }
    pthread_mutex_unlock(&copies.lock);
    return out;
}

void em_autocast_copy_written(const em_tensor *param)
{
    pthread_mutex_lock(&copies.lock);
    entry *e = *slot_of(param);
    if (e && e->copy) {
        em_storage_touch(e->copy->storage);
        e->version = param->storage->version;
    }
    pthread_mutex_unlock(&copies.lock);
}

em_autocast_copy_stats em_autocast_copy_get_stats(void)
{
    pthread_mutex_lock(&copies.lock);
    em_autocast_copy_stats s = copies.stats;
    pthread_mutex_unlock(&copies.lock);
    return s;
}
