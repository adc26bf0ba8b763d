/* A thread-safe LRU cache of inference results keyed by a hash of the input's dtype, shape and
 * bytes (the bytes themselves are compared on a hit), bounded by entries and by bytes, with
 * hit/miss/eviction counts and optional persistence to a directory. A signed cache holds the
 * results of one model only: inputs and outputs of its shapes and dtypes, saved with its
 * fingerprint, and loads nothing else. */
#ifndef EMBER_SERVE_CACHE_H
#define EMBER_SERVE_CACHE_H

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What every entry of a signed cache is: a result of the model with this fingerprint
 * (em_module_hash), an input of in_shape and in_dtype, an output of out_shape and out_dtype. */
typedef struct {
    uint64_t model; /* 0: the cache is not signed; entries of any model and shape */
    em_shape in_shape, out_shape;
    em_dtype in_dtype, out_dtype;
} em_cache_signature;

typedef struct {
    int64_t max_entries; /* 0: no cache (every lookup misses) */
    int64_t max_bytes;   /* input plus output bytes held; 0: 64 MiB */
    em_cache_signature signature;
} em_cache_opts;

typedef struct {
    int64_t entries, bytes;
    int64_t hits, misses, evictions;
    int64_t discarded; /* entries of loaded files that did not match the signature */
} em_cache_stats;

typedef struct em_cache em_cache;

em_cache *em_cache_new(em_cache_opts o); /* NULL with an error when out of memory */
void em_cache_free(em_cache *c);         /* NULL is fine */
/* A new tensor equal to the output stored for x (counted a hit, made most recent), or NULL on
 * a miss (counted; no error is set). */
em_tensor *em_cache_get(em_cache *c, const em_tensor *x);
/* Stores y for x (copies of both), evicting least recent entries to stay within the bounds;
 * an entry larger than max_bytes is not stored. EM_ERR_ARG when x or y does not match the
 * signature. */
em_status em_cache_put(em_cache *c, const em_tensor *x, const em_tensor *y);
em_cache_stats em_cache_get_stats(em_cache *c);

/* Persistence: the entries, least recent first, in <dir>/cache.safetensors (written atomically;
 * dir must exist), with the signature's model fingerprint. Loading adds a file's entries as the
 * most recent ones, within the bounds; a missing file loads nothing, a corrupt one loads nothing
 * and is an EM_ERR_IO naming it. A signed cache discards (and counts) the entries of a file saved
 * for another model, and entries of other shapes or dtypes. */
em_status em_cache_save(em_cache *c, const char *dir);
em_status em_cache_load(em_cache *c, const char *dir);

#ifdef __cplusplus
}
#endif

#endif
