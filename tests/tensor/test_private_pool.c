/* Private pools (a captured graph's memory), on the CPU's allocator, which they serve as they do
 * a GPU's: a pool's blocks come back to it and nowhere else, a capture takes no block from the
 * device when eager steps grew the pool, a block from outside freed while capturing waits for the
 * pool to be freed, and freeing the pool hands its blocks, and later its blocks in use, to the
 * shared cache. */
#include <criterion/criterion.h>

#include "ember.h"
#include "tensor/memory_internal.h"

static em_memory_stats stats(void)
{
    return em_memory_get_stats(EM_CPU);
}

/* The allocations of one "step": sizes of four classes, freed in another order. */
static void step(void **out /* (4) */)
{
    static const size_t sizes[4] = {3000, 700, 100000, 3000};
    for (int i = 0; i < 4; i++)
        out[i] = em_memory_alloc(EM_CPU, sizes[i]);
    for (int i = 0; i < 4; i++)
        cr_assert(out[i]);
    em_memory_free(EM_CPU, out[2], sizes[2]);
    em_memory_free(EM_CPU, out[0], sizes[0]);
    em_memory_free(EM_CPU, out[3], sizes[3]);
    em_memory_free(EM_CPU, out[1], sizes[1]);
}

Test(private_pool, blocks_return_to_their_pool_and_a_capture_takes_none_from_the_device)
{
    em_memory_set_caching(EM_CPU, true);
    em_memory_empty_cache(EM_CPU);
    em_private_pool *pool = em_private_pool_new(EM_CPU);
    cr_assert(pool);
    void *first[4], *second[4], *captured[4];
    em_private_pool_use(pool, false);
    step(first);
    em_private_pool_stats s = em_private_pool_get_stats(pool);
    cr_assert_eq(s.blocks, 4, "the step's four blocks joined the pool: %lld", (long long)s.blocks);
    cr_assert_eq(s.bytes, 3072 + 1024 + 100352 + 3072);
    step(second);
    cr_assert_eq(em_private_pool_get_stats(pool).blocks, 4, "the second step reused them");
    em_private_pool_leave(pool);
    /* outside the pool a request of those classes does not get one of its blocks */
    em_memory_stats before = stats();
    void *outside = em_memory_alloc(EM_CPU, 3000);
    cr_assert(outside != first[0] && outside != first[3]);
    cr_assert_eq(stats().cache_misses, before.cache_misses + 1, "the pool's blocks are not cached");
    em_memory_free(EM_CPU, outside, 3000); /* to the shared cache */

    em_private_pool_use(pool, true);
    step(captured);
    s = em_private_pool_get_stats(pool);
    cr_assert_eq(s.capture_device_allocs, 0);
    cr_assert_eq(s.blocks, 4);
    for (int i = 0; i < 4; i++) {
        bool known = false;
        for (int k = 0; k < 4; k++)
            known |= captured[i] == first[k];
        cr_assert(known, "block %d of the capture came from the pool", i);
    }
    /* more than the pool holds while capturing: the shared cache's block, then the device's */
    void *a = em_memory_alloc(EM_CPU, 3000), *b = em_memory_alloc(EM_CPU, 3000);
    void *cached = em_memory_alloc(EM_CPU, 2900), *fresh = em_memory_alloc(EM_CPU, 40000);
    cr_assert(a != outside && b != outside, "the pool's own blocks first");
    cr_assert_eq(cached, outside, "the shared cache's block joins the pool");
    s = em_private_pool_get_stats(pool);
    cr_assert_eq(s.blocks, 6);
    cr_assert_eq(s.capture_device_allocs, 1);
    em_memory_free(EM_CPU, a, 3000);
    em_memory_free(EM_CPU, b, 3000);
    em_memory_free(EM_CPU, cached, 2900);
    em_memory_free(EM_CPU, fresh, 40000);
    em_private_pool_leave(pool);
    em_private_pool_free(pool);
    em_memory_stats after = stats();
    cr_assert_eq(after.cached_bytes, before.cached_bytes + 3 * 3072 + 1024 + 100352 + 40448,
                 "every pool block joined the shared cache: %zu", after.cached_bytes);
}

Test(private_pool, a_block_freed_while_capturing_waits_for_the_pool)
{
    em_memory_set_caching(EM_CPU, true);
    em_memory_empty_cache(EM_CPU);
    void *earlier = em_memory_alloc(EM_CPU, 5000);
    em_private_pool *pool = em_private_pool_new(EM_CPU);
    em_private_pool_use(pool, true);
    em_memory_free(EM_CPU, earlier, 5000); /* a captured kernel may read it */
    cr_assert_eq(em_private_pool_get_stats(pool).held, 1);
    em_private_pool_leave(pool);
    void *other = em_memory_alloc(EM_CPU, 5000);
    cr_assert(other != earlier, "a held block is not handed out");
    em_memory_free(EM_CPU, other, 5000);
    em_private_pool_free(pool);
    void *a = em_memory_alloc(EM_CPU, 5000), *b = em_memory_alloc(EM_CPU, 5000);
    cr_assert(a == earlier || b == earlier, "after the pool, the held block is cached");
    em_memory_free(EM_CPU, a, 5000);
    em_memory_free(EM_CPU, b, 5000);
}

Test(private_pool, a_block_in_use_when_the_pool_goes_joins_the_shared_cache_later)
{
    em_memory_set_caching(EM_CPU, true);
    em_memory_empty_cache(EM_CPU);
    em_private_pool *pool = em_private_pool_new(EM_CPU);
    em_private_pool_use(pool, false);
    em_tensor *kept = em_empty(EM_SHAPE(300), EM_F32); /* 1200 bytes: a pool block */
    em_private_pool_leave(pool);
    em_private_pool_free(pool);
    em_memory_stats before = stats();
    void *kept_data = em_data_ptr(kept);
    em_release(kept);
    cr_assert_eq(stats().cached_bytes, before.cached_bytes + 1536);
    void *again = em_memory_alloc(EM_CPU, 1200);
    cr_assert_eq(again, kept_data);
    em_memory_free(EM_CPU, again, 1200);
}
