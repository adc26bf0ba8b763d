/* The result cache: a chained hash table of entries threaded on a doubly linked LRU list (most
 * recent at the head), all under one mutex. Entries hold host copies of the input and output, so
 * no tensor is shared between threads. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve/cache.h"
#include "io/safetensors.h"

#define DEFAULT_MAX_BYTES (64LL << 20)
#define CACHE_FILE "cache.safetensors"
#define MODEL_META "ember.cache.model" /* the signature's model fingerprint, 16 hex digits */

typedef struct entry {
    uint64_t hash;
    em_shape in_shape, out_shape;
    em_dtype in_dtype, out_dtype;
    void *in, *out;             /* row-major bytes */
    size_t in_bytes, out_bytes;
    struct entry *next_in_bucket;
    struct entry *newer, *older; /* the LRU list */
} entry;

struct em_cache {
    pthread_mutex_t lock;
    em_cache_opts o;
    entry **buckets; /* (n_buckets), a power of two */
    size_t n_buckets;
    entry *newest, *oldest;
    em_cache_stats stats;
};

em_cache *em_cache_new(em_cache_opts o)
{
    em_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->o = o;
        if (c->o.max_bytes <= 0)
            c->o.max_bytes = DEFAULT_MAX_BYTES;
        c->n_buckets = 64;
        while ((int64_t)c->n_buckets < o.max_entries)
            c->n_buckets *= 2;
        c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    }
    if (!c || !c->buckets) {
        free(c);
        em_set_error(EM_ERR_MEMORY, "em_cache_new: out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void entry_free(entry *e)
{
    free(e->in);
    free(e->out);
    free(e);
}

static void list_remove(em_cache *c, entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
}

/* Takes e off the LRU list and out of its bucket (lock held). */
static void unlink_entry(em_cache *c, entry *e)
{
    entry **p = &c->buckets[e->hash & (c->n_buckets - 1)];
    while (*p != e)
        p = &(*p)->next_in_bucket;
    *p = e->next_in_bucket;
    list_remove(c, e);
    c->stats.entries--;
    c->stats.bytes -= (int64_t)(e->in_bytes + e->out_bytes);
}

static void push_newest(em_cache *c, entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

void em_cache_free(em_cache *c)
{
    if (!c)
        return;
    for (entry *e = c->newest, *next; e; e = next) {
        next = e->older;
        entry_free(e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

/* Host bytes of t (row-major, its own dtype) into a new buffer; NULL when out of memory. */
static void *host_bytes(const em_tensor *t, size_t *n)
{
    *n = (size_t)em_numel(t) * em_dtype_size(t->dtype);
    void *p = malloc(*n ? *n : 1);
    if (p && em_copy_to_host(t, t->dtype, p) != EM_OK) {
        free(p);
        return NULL;
    }
    return p;
}

static bool same_key(const entry *e, uint64_t h, const em_tensor *x, const void *bytes, size_t n)
{
    if (e->hash != h || e->in_dtype != x->dtype || e->in_shape.ndim != x->ndim || e->in_bytes != n)
        return false;
    for (int i = 0; i < x->ndim; i++)
        if (e->in_shape.d[i] != x->shape[i])
            return false;
    return memcmp(e->in, bytes, n) == 0;
}

static entry *find(em_cache *c, uint64_t h, const em_tensor *x, const void *bytes, size_t n)
{
    for (entry *e = c->buckets[h & (c->n_buckets - 1)]; e; e = e->next_in_bucket)
        if (same_key(e, h, x, bytes, n))
            return e;
    return NULL;
}

em_tensor *em_cache_get(em_cache *c, const em_tensor *x)
{
    if (!c || !x)
        return NULL;
    size_t n;
    void *bytes = c->o.max_entries > 0 ? host_bytes(x, &n) : NULL;
    uint64_t h = bytes ? em_tensor_hash(x) : 0;
    em_tensor *y = NULL;
    pthread_mutex_lock(&c->lock);
    entry *e = bytes ? find(c, h, x, bytes, n) : NULL;
    if (e) {
        list_remove(c, e); /* back at the head, as the most recent */
        push_newest(c, e);
        c->stats.hits++;
        y = em_from_data(e->out_shape, e->out_dtype, e->out);
    } else {
        c->stats.misses++;
    }
    pthread_mutex_unlock(&c->lock);
    free(bytes);
    return y;
}

static bool shape_is(const em_tensor *t, em_shape s, em_dtype dtype)
{
    if (t->dtype != dtype || t->ndim != s.ndim)
        return false;
    for (int i = 0; i < s.ndim; i++)
        if (t->shape[i] != s.d[i])
            return false;
    return true;
}

/* Whether x and y may be an entry of c: always when c is not signed. */
static bool fits(const em_cache *c, const em_tensor *x, const em_tensor *y)
{
    const em_cache_signature *s = &c->o.signature;
    return !s->model || (shape_is(x, s->in_shape, s->in_dtype) &&
                         shape_is(y, s->out_shape, s->out_dtype));
}

em_status em_cache_put(em_cache *c, const em_tensor *x, const em_tensor *y)
{
    if (!c || !x || !y)
        return em_set_error(EM_ERR_ARG, "em_cache_put: cache, x and y must be given");
    if (c->o.max_entries <= 0)
        return EM_OK;
    if (!fits(c, x, y)) {
        char sx[64], sy[64];
        return em_set_error(EM_ERR_ARG, "em_cache_put: x %s %s or y %s %s is not of the shapes "
                            "and dtypes of the cache's model", em_dtype_name(x->dtype),
                            em_shape_str(x, sx, sizeof sx), em_dtype_name(y->dtype),
                            em_shape_str(y, sy, sizeof sy));
    }
    entry *e = calloc(1, sizeof *e);
    if (e) {
        e->in = host_bytes(x, &e->in_bytes);
        e->out = e->in ? host_bytes(y, &e->out_bytes) : NULL;
    }
    if (!e || !e->out) {
        if (e)
            entry_free(e);
        return em_has_error() ? em_error_status()
                              : em_set_error(EM_ERR_MEMORY, "em_cache_put: out of memory");
    }
    if ((int64_t)(e->in_bytes + e->out_bytes) > c->o.max_bytes) {
        entry_free(e);
        return EM_OK;
    }
    e->hash = em_tensor_hash(x);
    e->in_shape = em_shape_of(x);
    e->out_shape = em_shape_of(y);
    e->in_dtype = x->dtype;
    e->out_dtype = y->dtype;
    pthread_mutex_lock(&c->lock);
    entry *old = find(c, e->hash, x, e->in, e->in_bytes);
    if (old) { /* the newer result replaces the old one */
        unlink_entry(c, old);
        entry_free(old);
    }
    while (c->oldest && (c->stats.entries + 1 > c->o.max_entries ||
                         c->stats.bytes + (int64_t)(e->in_bytes + e->out_bytes) >
                             c->o.max_bytes)) {
        entry *victim = c->oldest;
        unlink_entry(c, victim);
        entry_free(victim);
        c->stats.evictions++;
    }
    size_t b = e->hash & (c->n_buckets - 1);
    e->next_in_bucket = c->buckets[b];
    c->buckets[b] = e;
    push_newest(c, e);
    c->stats.entries++;
    c->stats.bytes += (int64_t)(e->in_bytes + e->out_bytes);
    pthread_mutex_unlock(&c->lock);
    return EM_OK;
}

em_cache_stats em_cache_get_stats(em_cache *c)
{
    em_cache_stats s = {0};
    if (!c)
        return s;
    pthread_mutex_lock(&c->lock);
    s = c->stats;
    pthread_mutex_unlock(&c->lock);
    return s;
}

/* The signature's model fingerprint as a file stores it. */
static void model_hex(const em_cache *c, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)c->o.signature.model);
}

static void cache_path(char *out, size_t n, const char *dir)
{
    snprintf(out, n, "%s/%s", dir, CACHE_FILE);
}

em_status em_cache_save(em_cache *c, const char *dir)
{
    if (!c || !dir)
        return em_set_error(EM_ERR_ARG, "em_cache_save: cache and dir must be given");
    pthread_mutex_lock(&c->lock);
    int n = (int)c->stats.entries;
    em_st_entry *list = calloc((size_t)(2 * n + 1), sizeof *list);
    char (*names)[24] = calloc((size_t)(2 * n + 1), sizeof *names);
    em_status st = list && names ? EM_OK
                                 : em_set_error(EM_ERR_MEMORY, "em_cache_save: out of memory");
    int i = 0;
    for (entry *e = c->oldest; e && st == EM_OK; e = e->newer, i++) {
        snprintf(names[2 * i], sizeof names[0], "%08d.input", i);
        snprintf(names[2 * i + 1], sizeof names[0], "%08d.output", i);
        list[2 * i] = (em_st_entry){names[2 * i], em_from_data(e->in_shape, e->in_dtype, e->in)};
        list[2 * i + 1] = (em_st_entry){names[2 * i + 1],
                                        em_from_data(e->out_shape, e->out_dtype, e->out)};
        if (!list[2 * i].tensor || !list[2 * i + 1].tensor)
            st = em_error_status();
    }
    pthread_mutex_unlock(&c->lock);
    char path[4096];
    cache_path(path, sizeof path, dir);
    char model[17];
    model_hex(c, model);
    em_st_meta meta[2] = {{"ember.cache", "1"}, {MODEL_META, model}};
    if (st == EM_OK)
        st = em_safetensors_save(path, list, 2 * n, meta, c->o.signature.model ? 2 : 1);
    for (int k = 0; list && k < 2 * i; k++)
        em_release(list[k].tensor);
    free(list);
    free(names);
    return st;
}

/* Whether file st was saved by a cache of c's model (any file, when c is not signed). */
static bool saved_for(const em_cache *c, const em_safetensors *st)
{
    if (!c->o.signature.model)
        return true;
    const char *model = em_safetensors_meta(st, MODEL_META);
    char want[17];
    model_hex(c, want);
    return model && !strcmp(model, want);
}

em_status em_cache_load(em_cache *c, const char *dir)
{
    if (!c || !dir)
        return em_set_error(EM_ERR_ARG, "em_cache_load: cache and dir must be given");
    char path[4096], name[24];
    cache_path(path, sizeof path, dir);
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return EM_OK;
    em_safetensors *st = NULL;
    em_status s = em_safetensors_load(path, &st);
    int n = s == EM_OK ? (st->n_tensors + 1) / 2 : 0; /* an odd one out is half an entry */
    em_tensor **pairs = s == EM_OK ? calloc(2 * (size_t)n + 1, sizeof *pairs) : NULL;
    if (s == EM_OK && !pairs)
        s = em_set_error(EM_ERR_MEMORY, "em_cache_load: out of memory");
    /* every entry found whole before any is taken: a corrupt file loads nothing */
    for (int i = 0; s == EM_OK && i < n; i++) {
        snprintf(name, sizeof name, "%08d.input", i);
        pairs[2 * i] = em_safetensors_get(st, name);
        snprintf(name, sizeof name, "%08d.output", i);
        pairs[2 * i + 1] = em_safetensors_get(st, name);
        if (!pairs[2 * i] || !pairs[2 * i + 1])
            s = em_set_error(EM_ERR_IO, "em_cache_load: %s: entry %d is incomplete", path, i);
    }
    int64_t discarded = 0;
    bool same_model = s == EM_OK && saved_for(c, st);
    for (int i = 0; s == EM_OK && i < n; i++) {
        if (!same_model || !fits(c, pairs[2 * i], pairs[2 * i + 1]))
            discarded++;
        else
            s = em_cache_put(c, pairs[2 * i], pairs[2 * i + 1]);
    }
    free(pairs);
    em_safetensors_free(st);
    pthread_mutex_lock(&c->lock);
    c->stats.discarded += discarded;
    pthread_mutex_unlock(&c->lock);
    return s;
}
