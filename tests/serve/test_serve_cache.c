/* The result cache: hits return the stored output, the LRU order decides evictions under the
 * entry and byte bounds, statistics count hits, misses and evictions, inputs differing in one
 * byte, in shape or in dtype are different keys, and a saved cache loads back in LRU order. A
 * signed cache refuses entries of other shapes, and an engine serves no planted entry of another
 * model, shape or dtype (counted as discarded), but the entries its own model saved. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "serve/cache.h"
#include "serve/engine.h"

static em_tensor *vec(float a, float b)
{
    float v[2] = {a, b};
    return em_from_data(EM_SHAPE(2), EM_F32, v);
}

static void expect_hit(em_cache *c, const em_tensor *x, float want0)
{
    em_tensor *y = em_cache_get(c, x);
    cr_assert_not_null(y, "expected a hit");
    cr_assert_float_eq(em_get(y, (int64_t[]){0}), want0, 0);
    em_release(y);
}

Test(serve_cache, lru_order_and_entry_bound)
{
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 2});
    em_tensor *a = vec(1, 2), *b = vec(3, 4), *d = vec(5, 6);
    em_tensor *ya = vec(10, 0), *yb = vec(30, 0), *yd = vec(50, 0);
    cr_assert_null(em_cache_get(c, a)); /* miss 1 */
    em_cache_put(c, a, ya);
    em_cache_put(c, b, yb);
    expect_hit(c, a, 10);               /* a becomes the most recent: b is now the oldest */
    em_cache_put(c, d, yd);             /* evicts b */
    cr_assert_null(em_cache_get(c, b)); /* miss 2 */
    expect_hit(c, a, 10);
    expect_hit(c, d, 50);
    em_cache_stats s = em_cache_get_stats(c);
    cr_assert_eq(s.entries, 2);
    cr_assert_eq(s.hits, 3);
    cr_assert_eq(s.misses, 2);
    cr_assert_eq(s.evictions, 1);
    cr_assert_eq(s.bytes, 2 * (8 + 8)); /* two f32 inputs and outputs of 2 values */
    em_release(a), em_release(b), em_release(d);
    em_release(ya), em_release(yb), em_release(yd);
    em_cache_free(c);
}

Test(serve_cache, byte_bound_evicts_oldest_and_skips_oversized)
{
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 100, .max_bytes = 40});
    em_tensor *x[3] = {vec(1, 0), vec(2, 0), vec(3, 0)}, *y = vec(7, 7);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(em_cache_put(c, x[i], y), EM_OK);
    em_cache_stats s = em_cache_get_stats(c); /* 16 bytes each: only two fit in 40 */
    cr_assert_eq(s.entries, 2);
    cr_assert_eq(s.bytes, 32);
    cr_assert_eq(s.evictions, 1);
    cr_assert_null(em_cache_get(c, x[0]));
    em_tensor *big = em_zeros(EM_SHAPE(100), EM_F32);
    cr_assert_eq(em_cache_put(c, big, y), EM_OK);
    cr_assert_eq(em_cache_get_stats(c).entries, 2, "an entry over max_bytes is not stored");
    cr_assert_null(em_cache_get(c, big));
    for (int i = 0; i < 3; i++)
        em_release(x[i]);
    em_release(y);
    em_release(big);
    em_cache_free(c);
}

Test(serve_cache, key_is_dtype_shape_and_bytes)
{
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 8});
    em_tensor *x = vec(1, 2), *y = vec(9, 9);
    em_cache_put(c, x, y);
    em_tensor *x2 = em_reshape(x, EM_SHAPE(1, 2)), *x64 = em_to_dtype(x, EM_F64);
    em_tensor *near = vec(1, 2.0000002f);
    cr_assert_null(em_cache_get(c, x2), "another shape is another key");
    cr_assert_null(em_cache_get(c, x64), "another dtype is another key");
    cr_assert_null(em_cache_get(c, near), "one differing byte is another key");
    em_release(x), em_release(y), em_release(x2), em_release(x64), em_release(near);
    em_cache_free(c);
}

Test(serve_cache, disabled_cache_always_misses)
{
    em_cache *c = em_cache_new((em_cache_opts){0});
    em_tensor *x = vec(1, 2);
    cr_assert_eq(em_cache_put(c, x, x), EM_OK);
    cr_assert_null(em_cache_get(c, x));
    cr_assert_eq(em_cache_get_stats(c).entries, 0);
    em_release(x);
    em_cache_free(c);
}

/* A FIFO in the cache file's place was opened to see whether the file exists, and the open
 * waited for a writer forever: now it is an error naming it, at once. A missing file is an
 * empty cache, as before. */
Test(serve_cache, a_fifo_for_the_cache_file_is_refused, .timeout = 20)
{
    char dir[] = "/tmp/ember_cache_XXXXXX", path[256], want[512];
    cr_assert_not_null(mkdtemp(dir));
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 3});
    cr_assert_eq(em_cache_load(c, dir), EM_OK, "%s", em_error());
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_eq(em_cache_load(c, dir), EM_ERR_IO);
    snprintf(want, sizeof want, "em_safetensors_load: cannot open '%s': it is a FIFO, not a "
             "regular file", path);
    cr_expect_str_eq(em_error(), want);
    cr_expect_eq(em_cache_get_stats(c).entries, 0);
    em_error_clear();
    em_cache_free(c);
    unlink(path);
    rmdir(dir);
}

Test(serve_cache, persists_to_a_directory_in_lru_order)
{
    char dir[] = "/tmp/ember_cache_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 3});
    em_tensor *x[3] = {vec(1, 0), vec(2, 0), vec(3, 0)};
    em_tensor *y[3] = {vec(10, 1), vec(20, 2), vec(30, 3)};
    for (int i = 0; i < 3; i++)
        em_cache_put(c, x[i], y[i]);
    expect_hit(c, x[0], 10); /* LRU order now: x1 (oldest), x2, x0 */
    cr_assert_eq(em_cache_save(c, dir), EM_OK, "%s", em_error());
    em_cache_free(c);

    em_cache *back = em_cache_new((em_cache_opts){.max_entries = 3});
    cr_assert_eq(em_cache_load(back, dir), EM_OK, "%s", em_error());
    cr_assert_eq(em_cache_get_stats(back).entries, 3);
    expect_hit(back, x[2], 30);
    em_tensor *x4 = vec(4, 0);
    em_cache_put(back, x4, y[0]); /* evicts the oldest, x1 */
    cr_assert_null(em_cache_get(back, x[1]));
    expect_hit(back, x[0], 10);
    em_cache_free(back);

    char path[256];
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    FILE *f = fopen(path, "r+b");
    fputs("garbage", f);
    fclose(f);
    em_cache *bad = em_cache_new((em_cache_opts){.max_entries = 3});
    cr_assert_eq(em_cache_load(bad, dir), EM_ERR_IO);
    cr_assert(strstr(em_error(), "cache.safetensors"), "%s", em_error());
    em_error_clear();
    em_cache_free(bad);
    unlink(path);
    rmdir(dir);
    for (int i = 0; i < 3; i++)
        em_release(x[i]), em_release(y[i]);
    em_release(x4);
}

Test(serve_cache, a_signed_cache_refuses_entries_of_other_shapes)
{
    em_cache_signature sig = {.model = 7, .in_shape = EM_SHAPE(2), .in_dtype = EM_F32,
                              .out_shape = EM_SHAPE(2), .out_dtype = EM_F32};
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 8, .signature = sig});
    em_tensor *x = vec(1, 2), *y3 = em_zeros(EM_SHAPE(3), EM_F32), *y64 = em_zeros(EM_SHAPE(2),
                                                                                   EM_F64);
    cr_assert_eq(em_cache_put(c, x, y3), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_cache_put: x f32 [2] or y f32 [3] is not of the shapes and "
                     "dtypes of the cache's model");
    em_error_clear();
    cr_assert_eq(em_cache_put(c, x, y64), EM_ERR_ARG);
    em_error_clear();
    cr_assert_eq(em_cache_put(c, x, x), EM_OK);
    cr_assert_eq(em_cache_get_stats(c).entries, 1);
    em_release(x), em_release(y3), em_release(y64);
    em_cache_free(c);
}

/* Writes dir/cache.safetensors holding one entry x -> y, saved for the model fingerprint model
 * (0: none). */
static void plant(const char *dir, uint64_t model, const em_tensor *x, const em_tensor *y)
{
    char path[256], hex[17];
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)model);
    em_st_entry list[2] = {{"00000000.input", (em_tensor *)x}, {"00000000.output", (em_tensor *)y}};
    em_st_meta meta[2] = {{"ember.cache", "1"}, {"ember.cache.model", hex}};
    cr_assert_eq(em_safetensors_save(path, list, 2, meta, model ? 2 : 1), EM_OK, "%s",
                 em_error());
}

/* An engine over m with a cache in dir: its answer for x ([2]) into got[2]; the entries it
 * discarded at start; whether the cache answered. */
static int64_t engine_answer(em_module *m, const char *dir, const em_tensor *x, float got[2],
                             bool *from_cache)
{
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){
                                                     .max_batch = 1, .cache = {.max_entries = 8},
                                                     .cache_dir = dir});
    cr_assert_not_null(e, "%s", em_error());
    int64_t discarded = em_engine_get_stats(e).cache.discarded;
    em_tensor *y = NULL;
    cr_assert_eq(em_engine_predict(e, x, EM_PRIORITY_NORMAL, 5000, &y), EM_OK, "%s", em_error());
    cr_assert(y->ndim == 1 && y->shape[0] == 2 && y->dtype == EM_F32);
    em_copy_to_host(y, EM_F32, got);
    *from_cache = em_engine_get_stats(e).cache_answered == 1;
    em_release(y);
    em_engine_free(e);
    return discarded;
}

Test(serve_cache, an_engine_serves_no_planted_entry_of_another_model_shape_or_dtype)
{
    char dir[] = "/tmp/ember_cache_plant_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    em_manual_seed(3);
    em_module *m = em_linear_layer(2, 2, true), *other = em_linear_layer(2, 2, true);
    em_module_eval(m);
    em_tensor *x = vec(1, 2), *x1 = em_reshape(x, EM_SHAPE(1, 2)), *want = em_forward(m, x1);
    float w[2], got[2];
    em_copy_to_host(want, EM_F32, w);
    em_tensor *y3 = em_full(EM_SHAPE(3), EM_F32, 42), *y64 = em_full(EM_SHAPE(2), EM_F64, 42);
    em_tensor *y_other = em_full(EM_SHAPE(2), EM_F32, 42);
    struct { uint64_t model; const em_tensor *y; const char *what; } planted[] = {
        {em_module_hash(m), y3, "an output of shape [3]"},
        {em_module_hash(m), y64, "an f64 output"},
        {em_module_hash(other), y_other, "another model's output"},
        {0, y_other, "an output saved without a model"},
    };
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        plant(dir, planted[i].model, x, planted[i].y);
        bool from_cache;
        cr_assert_eq(engine_answer(m, dir, x, got, &from_cache), 1, "%s", planted[i].what);
        cr_assert(!from_cache, "%s was served", planted[i].what);
        cr_assert(got[0] == w[0] && got[1] == w[1], "%s: %g %g", planted[i].what, got[0], got[1]);
    }
    /* the last engine saved its own result: the next one serves it */
    bool from_cache;
    cr_assert_eq(engine_answer(m, dir, x, got, &from_cache), 0);
    cr_assert(from_cache && got[0] == w[0] && got[1] == w[1]);
    /* and a planted entry of the right model and shapes is trusted */
    plant(dir, em_module_hash(m), x, y_other);
    cr_assert_eq(engine_answer(m, dir, x, got, &from_cache), 0);
    cr_assert(from_cache && got[0] == 42 && got[1] == 42);
    char path[256];
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    unlink(path);
    rmdir(dir);
    em_release(x), em_release(x1), em_release(want);
    em_release(y3), em_release(y64), em_release(y_other);
    em_module_free(m);
    em_module_free(other);
}

/* A file whose entries are not all whole loads nothing (the whole entries before the broken one
 * were taken and the rest dropped). */
Test(serve_cache, a_file_with_an_incomplete_entry_loads_nothing)
{
    char dir[] = "/tmp/ember_cache_part_XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    em_tensor *x = vec(1, 2), *y = vec(3, 4);
    em_st_entry list[3] = {{"00000000.input", x}, {"00000000.output", y},
                           {"00000001.input", x}};
    cr_assert_eq(em_safetensors_save(path, list, 3, NULL, 0), EM_OK, "%s", em_error());
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = 8});
    cr_assert_eq(em_cache_load(c, dir), EM_ERR_IO);
    cr_assert(strstr(em_error(), "entry 1 is incomplete"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_cache_get_stats(c).entries, 0);
    em_cache_free(c);
    unlink(path);
    rmdir(dir);
    em_release(x), em_release(y);
}

/* A cache file that cannot be read does not stop an engine: it starts with an empty cache and a
 * warning naming the file, serves, and its save at free replaces the file with a whole one. */
Test(serve_cache, an_engine_starts_over_a_corrupt_cache_file_and_replaces_it)
{
    char dir[] = "/tmp/ember_cache_bad_XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    FILE *f = fopen(path, "wb");
    fputs("\x40\0\0\0\0\0\0\0{\"00000000.input\":", f); /* a header cut short */
    fclose(f);
    em_manual_seed(3);
    em_module *m = em_linear_layer(2, 2, true);
    em_module_eval(m);
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){
                                                     .max_batch = 1, .cache = {.max_entries = 8},
                                                     .cache_dir = dir});
    cr_assert_not_null(e, "%s", em_error());
    cr_assert_not(em_has_error(), "%s", em_error());
    const char *w = em_engine_warning(e);
    cr_assert(w && strstr(w, "the response cache was not loaded and starts empty: "
                             "em_safetensors_load: '") && strstr(w, path), "%s", w ? w : "NULL");
    em_tensor *x = vec(1, 2), *y = NULL;
    cr_assert_eq(em_engine_predict(e, x, EM_PRIORITY_NORMAL, 5000, &y), EM_OK, "%s", em_error());
    em_release(y);
    em_engine_free(e);
    em_cache *back = em_cache_new((em_cache_opts){.max_entries = 8});
    cr_assert_eq(em_cache_load(back, dir), EM_OK, "%s", em_error());
    cr_assert_eq(em_cache_get_stats(back).entries, 1);
    em_cache_free(back);
    /* a readable file gives no warning */
    e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 1,
                                                       .cache = {.max_entries = 8},
                                                       .cache_dir = dir});
    cr_assert_not_null(e, "%s", em_error());
    cr_assert_null(em_engine_warning(e));
    em_engine_free(e);
    unlink(path);
    rmdir(dir);
    em_release(x);
    em_module_free(m);
}

/* 22,000 entries load in well under a second: each entry's two tensors are found by a hash
 * lookup (a server with this many took 5-30 s to start, looking each name up in turn). The
 * bound is loose: it fails only a quadratic cost. */
Test(serve_cache, many_entries_load_in_linear_time, .timeout = 120)
{
    enum { N = 22000 };
    char dir[] = "/tmp/ember_cache_many_XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    em_cache *c = em_cache_new((em_cache_opts){.max_entries = N});
    for (int i = 0; i < N; i++) {
        em_tensor *x = vec((float)i, 0), *y = vec(0, (float)i);
        cr_assert_eq(em_cache_put(c, x, y), EM_OK);
        em_release(x), em_release(y);
    }
    cr_assert_eq(em_cache_save(c, dir), EM_OK, "%s", em_error());
    em_cache_free(c);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    em_cache *back = em_cache_new((em_cache_opts){.max_entries = N});
    cr_assert_eq(em_cache_load(back, dir), EM_OK, "%s", em_error());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_assert_eq(em_cache_get_stats(back).entries, N);
    cr_assert_lt(s, 5.0, "%d entries took %.1f s to load", N, s);
    em_tensor *x = vec(12345, 0);
    expect_hit(back, x, 0);
    em_release(x);
    em_cache_free(back);
    snprintf(path, sizeof path, "%s/cache.safetensors", dir);
    unlink(path);
    rmdir(dir);
}
