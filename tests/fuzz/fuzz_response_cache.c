/* libFuzzer target: the response cache's file (what --cache-dir holds) on arbitrary bytes, loaded
 * into a cache signed for a model of 4 f32 inputs and 3 f32 outputs, as the engine does, and
 * into an unsigned one. A load must give EM_OK or an error with a message; the signed cache
 * must answer every input of the file with nothing or an output of the signature's shape and
 * dtype; what it saves must load back to the same entries. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ember.h"
#include "serve/cache.h"

#define MODEL 0x0123456789abcdefULL /* the fingerprint the seeds were saved with */

static char dir[64], saved_dir[64];

static void make_dirs(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/ember_fuzz_cache_XXXXXX");
    snprintf(saved_dir, sizeof saved_dir, "/dev/shm/ember_fuzz_cache_XXXXXX");
    if (!mkdtemp(dir) || !mkdtemp(saved_dir))
        abort(); /* a broken harness, not a finding */
}

static void plant(const uint8_t *data, size_t size)
{
    char path[96];
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
}

/* Loads the planted file into a new cache of signature sig (model 0: unsigned); NULL when the
 * load failed (with a message). */
static em_cache *load(em_cache_signature sig)
{
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 64, .max_bytes = 1 << 20,
                                               .signature = sig});
    assert(c);
    em_status st = em_cache_load(c, dir);
    if (st != EM_OK) {
        assert(em_error()[0]);
        em_error_clear();
        em_cache_free(c);
        return NULL;
    }
    return c;
}

/* Looks up every input of the planted file in c: a hit is of sig's output shape and dtype. */
static void look_up_inputs(em_cache *c, const em_cache_signature *sig)
{
    char path[96], name[24];
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    em_safetensors *st = NULL;
    if (em_safetensors_load(path, &st) != EM_OK) {
        em_error_clear();
        return;
    }
    for (int i = 0; i < st->n_tensors && i < 64; i++) {
        snprintf(name, sizeof name, "%08d.input", i);
        em_tensor *x = em_safetensors_get(st, name);
        em_tensor *y = x ? em_cache_get(c, x) : NULL;
        if (y && sig->model) {
            assert(y->dtype == sig->out_dtype && y->ndim == sig->out_shape.ndim);
            for (int d = 0; d < y->ndim; d++)
                assert(y->shape[d] == sig->out_shape.d[d]);
        }
        em_release(y);
    }
    em_safetensors_free(st);
}

/* Saves c and loads the file back into a cache of the same signature: the same entries. */
static void round_trip(em_cache *c, em_cache_signature sig)
{
    em_cache_stats before = em_cache_get_stats(c);
    assert(em_cache_save(c, saved_dir) == EM_OK);
    em_cache *back = em_cache_new((em_cache_opts){.max_entries = 64, .max_bytes = 1 << 20,
                                                  .signature = sig});
    assert(back && em_cache_load(back, saved_dir) == EM_OK);
    em_cache_stats after = em_cache_get_stats(back);
    assert(after.entries == before.entries && after.bytes == before.bytes &&
           after.discarded == 0);
    em_cache_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0])
        make_dirs();
    plant(data, size);
    em_cache_signature sigs[2] = {{.model = MODEL, .in_shape = EM_SHAPE(4), .in_dtype = EM_F32,
                                   .out_shape = EM_SHAPE(3), .out_dtype = EM_F32},
                                  {0}};
    for (int i = 0; i < 2; i++) {
        em_scope_begin();
        em_cache *c = load(sigs[i]);
        if (c) {
            look_up_inputs(c, &sigs[i]);
            round_trip(c, sigs[i]);
            em_cache_free(c);
        }
        em_scope_end();
    }
    return 0;
}
