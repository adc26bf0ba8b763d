/* The caching allocator: reuse within a size class, empty_cache, caching off, a budget that fails
 * an allocation with a clear message and no leak, thread safety, and the batch-size finder. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>

#include "ember.h"

static em_memory_stats stats(void)
{
    return em_memory_get_stats(EM_CPU);
}

Test(memory_pool, freed_block_is_reused_within_its_class)
{
    em_memory_set_caching(EM_CPU, true);
    em_tensor *a = em_empty(EM_SHAPE(250), EM_F32); /* 1000 bytes: the 1024-byte class */
    em_memory_stats s0 = stats();
    em_release(a);
    em_memory_stats s1 = stats();
    cr_assert_eq(s1.live_bytes, s0.live_bytes - 1000);
    cr_assert_eq(s1.reserved_bytes, s0.reserved_bytes); /* the block stays, cached */
    cr_assert_eq(s1.cached_bytes, s0.cached_bytes + 1024);
    em_tensor *b = em_empty(EM_SHAPE(900), EM_U8); /* 900 bytes: the same class */
    em_memory_stats s2 = stats();
    cr_assert_eq(s2.cache_hits, s1.cache_hits + 1);
    cr_assert_eq(s2.cache_misses, s1.cache_misses);
    cr_assert_eq(s2.live_bytes, s1.live_bytes + 900);
    cr_assert_eq(s2.reserved_bytes, s1.reserved_bytes);
    cr_assert_eq(s2.cached_bytes, s1.cached_bytes - 1024);
    em_tensor *c = em_empty(EM_SHAPE(2000), EM_U8); /* another class: from the device */
    em_memory_stats s3 = stats();
    cr_assert_eq(s3.cache_misses, s2.cache_misses + 1);
    cr_assert_eq(s3.reserved_bytes, s2.reserved_bytes + 2048);
    cr_assert_geq(s3.peak_reserved_bytes, s3.reserved_bytes);
    em_release(b);
    em_release(c);
}

Test(memory_pool, large_requests_round_to_an_eighth_of_their_power_of_two)
{
    em_memory_empty_cache(EM_CPU);
    size_t r0 = stats().reserved_bytes;
    em_tensor *t = em_empty(EM_SHAPE((1 << 20) + 1), EM_U8);
    cr_assert_eq(stats().reserved_bytes, r0 + (1 << 20) + (1 << 17));
    em_release(t);
    em_tensor *u = em_empty(EM_SHAPE((1 << 20) + (1 << 17)), EM_U8); /* same class: reused */
    cr_assert_eq(stats().reserved_bytes, r0 + (1 << 20) + (1 << 17));
    em_release(u);
}

Test(memory_pool, empty_cache_drops_reserved_to_live)
{
    em_tensor *keep = em_empty(EM_SHAPE(128), EM_F32); /* 512 bytes: a whole class */
    for (int i = 1; i <= 20; i++)
        em_release(em_empty(EM_SHAPE(i * 256), EM_F32)); /* 1 KiB .. 20 KiB, all cached */
    em_memory_stats s = stats();
    cr_assert_gt(s.reserved_bytes, s.live_bytes);
    cr_assert_eq(s.reserved_bytes - s.cached_bytes, s.live_bytes);
    em_memory_empty_cache(EM_CPU);
    s = stats();
    cr_assert_eq(s.cached_bytes, 0);
    cr_assert_eq(s.reserved_bytes, s.live_bytes);
    em_release(keep);
}

Test(memory_pool, caching_off_returns_blocks_at_once)
{
    cr_assert(em_memory_set_caching(EM_CPU, false)); /* on by default */
    em_release(em_empty(EM_SHAPE(4096), EM_F32));
    em_memory_stats s = stats();
    cr_assert_eq(s.cached_bytes, 0);
    cr_assert_eq(s.reserved_bytes, s.live_bytes);
    uint64_t hits = s.cache_hits;
    em_release(em_empty(EM_SHAPE(4096), EM_F32));
    cr_assert_eq(stats().cache_hits, hits);
    cr_assert(!em_memory_set_caching(EM_CPU, true));
}

Test(memory_pool, budget_failure_names_the_sizes_and_leaks_nothing)
{
    em_memory_empty_cache(EM_CPU);
    em_memory_stats s0 = stats();
    size_t budget = s0.reserved_bytes + 8192;
    cr_assert_eq(em_memory_set_budget(EM_CPU, budget), EM_OK);
    cr_assert_eq(stats().budget_bytes, budget);
    em_tensor *a = em_empty(EM_SHAPE(1024), EM_F32); /* 4096 bytes: fits */
    cr_assert_not_null(a, "%s", em_error());
    em_error_clear();
    em_tensor *b = em_empty(EM_SHAPE(2048), EM_F32); /* 8192 more: does not */
    cr_assert_null(b);
    cr_assert_eq(em_error_status(), EM_ERR_MEMORY);
    char want[256];
    snprintf(want, sizeof want, "em_empty: memory budget exceeded: %zu of %zu bytes on cpu "
             "(8192 asked, %zu reserved)", s0.reserved_bytes + 4096 + 8192, budget,
             s0.reserved_bytes + 4096);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
    /* inside an op and a scope: NULL and the op's name, never a crash, nothing left behind */
    em_scope_begin();
    em_tensor *p = em_ones(EM_SHAPE(32, 1), EM_F32), *q = em_ones(EM_SHAPE(1, 32), EM_F32);
    cr_assert(p && q, "%s", em_error());
    cr_assert_null(em_matmul(p, q)); /* the (32, 32) output: 4 KiB, beside what is held */
    snprintf(want, sizeof want, ": memory budget exceeded: %zu of %zu bytes on cpu",
             s0.reserved_bytes + 4096 + 1024 + 4096, budget);
    cr_assert(strstr(em_error(), want) != NULL, "%s", em_error());
    em_error_clear();
    /* an output larger than the whole budget is refused before the allocator is asked */
    p = em_ones(EM_SHAPE(64, 1), EM_F32), q = em_ones(EM_SHAPE(1, 64), EM_F32);
    uint64_t allocs = stats().n_allocs;
    cr_assert_null(em_matmul(p, q)); /* the (64, 64) output: 16 KiB */
    snprintf(want, sizeof want, ": shape [64,64] of f32 needs 16384 bytes, more than cpu holds "
             "(its memory budget: %zu bytes)", budget);
    cr_assert(strstr(em_error(), want) != NULL, "%s", em_error());
    cr_assert_eq(stats().n_allocs, allocs);
    em_scope_end();
    em_error_clear();
    em_release(a);
    em_memory_stats s1 = stats();
    cr_assert_eq(s1.live_bytes, s0.live_bytes);
    cr_assert_eq(s1.live_storages, s0.live_storages);
    /* the cache makes room: freed blocks go back to the device when a new class needs it */
    em_tensor *c = em_empty(EM_SHAPE(2000), EM_F32);
    cr_assert_not_null(c, "%s", em_error());
    cr_assert_leq(stats().reserved_bytes, budget);
    em_release(c);
    cr_assert_eq(em_memory_set_budget(EM_CPU, 0), EM_OK);
    cr_assert_not_null(b = em_empty(EM_SHAPE(1 << 16), EM_F32));
    em_release(b);
}

static void *alloc_worker(void *arg)
{
    int seed = *(int *)arg;
    for (int i = 0; i < 2000; i++) {
        em_tensor *t = em_empty(EM_SHAPE(1 + (i * 37 + seed * 101) % 3000), EM_F32);
        em_tensor *u = em_empty(EM_SHAPE(1 + (i * 53 + seed) % 500), EM_U8);
        if (!t || !u)
            return (void *)1;
        /* a block handed to two tensors at once would show another thread's values */
        float *tv = em_data_ptr(t);
        int64_t n = em_numel(t);
        for (int64_t k = 0; k < n; k++)
            tv[k] = (float)seed;
        for (int64_t k = 0; k < n; k++)
            if (tv[k] != (float)seed)
                return (void *)1;
        em_release(t);
        em_release(u);
    }
    return NULL;
}

Test(memory_pool, threads_allocate_concurrently)
{
    em_memory_stats s0 = stats();
    pthread_t th[4];
    int seeds[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, alloc_worker, &seeds[i]);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        cr_assert_null(rc);
    }
    em_memory_stats s1 = stats();
    cr_assert_eq(s1.live_bytes, s0.live_bytes);
    cr_assert_eq(s1.live_storages, s0.live_storages);
    cr_assert_eq(s1.n_allocs - s0.n_allocs, 16000);
    cr_assert_eq(s1.cache_hits + s1.cache_misses - s0.cache_hits - s0.cache_misses, 16000);
    cr_assert_eq(s1.reserved_bytes - s1.cached_bytes, s1.live_bytes);
    cr_assert_gt(s1.cache_hits - s0.cache_hits, 15000);
}

/* A synthetic training step: batch * 1 KiB of activations, then batch * 1 KiB of gradients;
 * samples/s peaks at batch 48. */
static em_status fake_step(void *ctx, int64_t batch, double *samples_per_s)
{
    int *calls = ctx;
    (*calls)++;
    em_tensor *act = em_empty(EM_SHAPE(batch * 256), EM_F32);
    em_tensor *grad = act ? em_empty(EM_SHAPE(batch * 256), EM_F32) : NULL;
    em_release(act);
    em_release(grad);
    if (!grad)
        return em_error_status();
    *samples_per_s = (double)batch / (1.0 + (double)(batch * batch) / (48.0 * 48.0));
    return EM_OK;
}

Test(memory_pool, batch_finder_largest_fit_and_fastest)
{
    em_memory_empty_cache(EM_CPU);
    size_t base = stats().reserved_bytes;
    int calls = 0;
    em_batch_search r;
    cr_assert_eq(em_find_batch_size(fake_step, &calls, EM_CPU, 1, 1000, base + 100 * 2048, &r),
                 EM_OK, "%s", em_error());
    cr_assert_eq(r.largest, 100);
    cr_assert_eq(r.n_tries, calls);
    /* tried: 1, 2, 4, ..., 64, 128 (fails), then 96, 112, 104, 100, 102, 101 */
    cr_assert_eq(calls, 14);
    cr_assert_eq(r.fastest, 64); /* of the batches tried, 64 is nearest the peak at 48 */
    cr_assert_float_eq(r.fastest_samples_per_s, 64.0 / (1.0 + 64.0 * 64.0 / 2304.0), 1e-12);
    cr_assert(!em_has_error());
    em_memory_stats s = stats();
    cr_assert_eq(s.budget_bytes, 0); /* restored */
    cr_assert_eq(s.reserved_bytes, base);

    /* the whole range fits: hi itself is tried */
    calls = 0;
    cr_assert_eq(em_find_batch_size(fake_step, &calls, EM_CPU, 3, 40, 0, &r), EM_OK);
    cr_assert_eq(r.largest, 40);
    cr_assert_eq(calls, 5); /* 3, 6, 12, 24, 40 */

    /* nothing fits */
    cr_assert_eq(em_find_batch_size(fake_step, &calls, EM_CPU, 8, 16, base + 4096, &r),
                 EM_ERR_MEMORY);
    cr_assert(strstr(em_error(), "even batch 8 does not fit") != NULL, "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_find_batch_size(fake_step, &calls, EM_CPU, 0, 16, 0, &r), EM_ERR_ARG);
    em_error_clear();
}
