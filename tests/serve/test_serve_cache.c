/* The result cache: hits return the stored output, the LRU order decides evictions under the
 * entry and byte bounds, statistics count hits, misses and evictions, inputs differing in one
 * byte, in shape or in dtype are different keys, and a saved cache loads back in LRU order. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"
#include "serve/cache.h"

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
    em_cache_stats s = em_cache_stats_get(c);
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
    em_cache_stats s = em_cache_stats_get(c); /* 16 bytes each: only two fit in 40 */
    cr_assert_eq(s.entries, 2);
    cr_assert_eq(s.bytes, 32);
    cr_assert_eq(s.evictions, 1);
    cr_assert_null(em_cache_get(c, x[0]));
    em_tensor *big = em_zeros(EM_SHAPE(100), EM_F32);
    cr_assert_eq(em_cache_put(c, big, y), EM_OK);
    cr_assert_eq(em_cache_stats_get(c).entries, 2, "an entry over max_bytes is not stored");
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
    cr_assert_eq(em_cache_stats_get(c).entries, 0);
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
    cr_expect_eq(em_cache_stats_get(c).entries, 0);
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
    cr_assert_eq(em_cache_stats_get(back).entries, 3);
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
