/* Sticky thread-local errors (first message wins, clear resets) and scopes (temporaries
 * released at the end, em_keep moving a tensor outwards, constant memory in a loop). */
#include <criterion/criterion.h>
#include <pthread.h>

#include "tensor/tensor_internal.h"

static size_t live(void)
{
    return em_memory_get_stats(EM_CPU).live_bytes;
}

Test(errors, messages_name_function_and_shape)
{
    em_error_clear();
    cr_assert_null(em_from_data(EM_SHAPE(2), EM_F32, NULL));
    cr_assert_str_eq(em_error(), "em_from_data: NULL data");
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_assert_null(em_empty(EM_SHAPE(3, -1), EM_F32));
    cr_assert_str_eq(em_error(), "em_empty: negative dimension: [3,-1]");
    em_error_clear();
    cr_assert_null(em_full(EM_SHAPE(2), (em_dtype)42, 1.0));
    cr_assert_str_eq(em_error(), "em_full: dtype invalid");
    em_error_clear();
    cr_assert_null(em_zeros((em_shape){.ndim = 9}, EM_F32));
    cr_assert_str_eq(em_error(), "em_zeros: ndim out of range: 9 (at most 8)");
    em_error_clear();
    cr_assert_null(em_empty_on(EM_SHAPE(2), EM_F32, (em_device)5));
    cr_assert_str_eq(em_error(), "em_empty_on: device invalid");
    em_error_clear();
    cr_assert_null(em_empty(EM_SHAPE(INT64_MAX / 2, 4), EM_F32));
    cr_assert_str_eq(em_error(), "em_empty: shape too large: [4611686018427387903,4]");
    em_error_clear();
    cr_assert_null(em_arange(0, 1, 0, EM_F32));
    cr_assert_str_eq(em_error(), "em_arange: need finite start, end and a nonzero step: 0, 1, 0");
    em_error_clear();
}

/* A device failure carries what the device said of it, taken once (a backend that keeps nothing
 * gets the general message). */
static const char *said_once(void)
{
    static int calls;
    return calls++ == 0 ? "an illegal memory access was encountered (cudaErrorIllegalAddress)"
                        : NULL;
}

Test(errors, a_device_failure_says_what_the_device_said)
{
    em_tensor *t = em_zeros(EM_SHAPE(2), EM_F32);
    em_backend be = *t->storage->be;
    const em_backend *own = t->storage->be;
    be.take_failure = said_once;
    t->storage->be = &be;
    cr_assert_eq(em_kernel_status(EM_KERNEL_FAILED, "em_add", t), EM_ERR_MEMORY);
    cr_expect_str_eq(em_error(), "em_add: the cpu device failed: an illegal memory access was "
                                 "encountered (cudaErrorIllegalAddress)");
    em_error_clear();
    cr_assert_eq(em_kernel_status(EM_KERNEL_FAILED, "em_add", t), EM_ERR_MEMORY);
    cr_expect_str_eq(em_error(), "em_add: the cpu device failed (out of memory or launch)");
    em_error_clear();
    t->storage->be = own;
    em_release(t);
}

Test(errors, first_message_sticks_and_null_passes_through)
{
    em_error_clear();
    cr_assert(!em_has_error());
    cr_assert_str_eq(em_error(), "");
    cr_assert_eq(em_error_status(), EM_OK);
    em_tensor *bad = em_empty(EM_SHAPE(-2), EM_F32);
    cr_assert_null(bad);
    /* later failures, including ops handed the NULL, keep the first message */
    cr_assert_null(em_zeros_like(bad));
    cr_assert_null(em_full(EM_SHAPE(1), (em_dtype)77, 0));
    cr_assert_eq(em_fill_(bad, 1.0), EM_ERR_ARG);
    cr_assert_eq(em_set_error(EM_ERR_IO, "something else: %d", 3), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "em_empty: negative dimension: [-2]");
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    cr_assert(em_has_error());
    em_error_clear();
    cr_assert(!em_has_error());
    cr_assert_str_eq(em_error(), "");
    cr_assert_eq(em_set_error(EM_ERR_IO, "now this: %d", 3), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "now this: 3");
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    em_error_clear();
}

static void *other_thread(void *arg)
{
    (void)arg;
    bool clean = !em_has_error() && em_error()[0] == '\0';
    em_set_error(EM_ERR_STATE, "from the other thread");
    return (void *)(intptr_t)clean;
}

Test(errors, per_thread)
{
    em_error_clear();
    em_set_error(EM_ERR_ARG, "main thread");
    pthread_t th;
    void *clean;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, &clean);
    cr_assert(clean);
    cr_assert_str_eq(em_error(), "main thread");
    em_error_clear();
}

Test(scope, loop_runs_at_constant_memory)
{
    size_t base = live();
    for (int i = 0; i < 1000; i++) {
        em_scope_begin();
        em_tensor *a = em_ones(EM_SHAPE(16, 16), EM_F32);
        em_tensor *b = em_rand(EM_SHAPE(64), EM_F32, NULL);
        em_tensor *v = em_tensor_alias(a, 1, (int64_t[]){256}, (int64_t[]){1}, 0);
        em_tensor *c = em_tensor_cast_raw(v, EM_F64);
        cr_assert(a && b && v && c);
        cr_assert_eq(em_scope_depth(), 1);
        em_scope_end();
    }
    cr_assert_eq(live(), base);
    cr_assert_eq(em_scope_depth(), 0);
}

Test(scope, keep_survives_scope_end)
{
    size_t base = live();
    em_scope_begin();
    em_tensor *tmp = em_zeros(EM_SHAPE(10), EM_F32);
    em_tensor *kept = em_keep(em_full(EM_SHAPE(4), EM_F32, 2.5));
    cr_assert(tmp);
    em_scope_end();
    cr_assert_eq(live(), base + 16); /* tmp released, kept alive */
    cr_assert_eq(em_get(kept, (int64_t[]){3}), 2.5);
    cr_assert_eq(em_tensor_refcount(kept), 1); /* the caller owns it now */
    em_release(kept);
    cr_assert_eq(live(), base);
    cr_assert_null(em_keep(NULL));
}

Test(scope, keep_moves_to_the_parent)
{
    size_t base = live();
    em_scope_begin();
    em_scope_begin();
    cr_assert_eq(em_scope_depth(), 2);
    em_tensor *t = em_keep(em_ones(EM_SHAPE(8), EM_F64));
    em_zeros(EM_SHAPE(8), EM_F64);
    em_scope_end();
    cr_assert_eq(live(), base + 64); /* held by the outer scope now */
    cr_assert_eq(em_item(em_tensor_alias(t, 0, NULL, NULL, 7)), 1.0);
    em_scope_end();
    cr_assert_eq(live(), base);
    cr_assert_eq(em_scope_depth(), 0);
}

Test(scope, keep_of_an_outer_tensor_is_a_no_op)
{
    size_t base = live();
    em_tensor *outside = em_zeros(EM_SHAPE(2), EM_F32);
    em_scope_begin();
    cr_assert_eq(em_keep(outside), outside);
    em_scope_end();
    cr_assert_eq(em_tensor_refcount(outside), 1);
    em_release(outside);
    cr_assert_eq(live(), base);
}

Test(scope, releasing_own_temporary_inside_scope)
{
    size_t base = live();
    em_scope_begin();
    em_tensor *t = em_zeros(EM_SHAPE(32), EM_F32);
    em_release(t); /* freed now; the scope's entry is cleared */
    cr_assert_eq(live(), base);
    em_tensor *u = em_zeros(EM_SHAPE(32), EM_F32);
    em_tensor *extra = em_retain(u); /* a second holder outlives the scope */
    em_scope_end();
    cr_assert_eq(live(), base + 128);
    em_release(extra);
    cr_assert_eq(live(), base);
}

static struct em_node *release_order[2];
static int n_released;

static void record_release(struct em_node *node)
{
    release_order[n_released++] = node;
}

Test(scope, releases_newest_first)
{
    static int node_a, node_b;
    size_t base = live();
    em_tensor_node_release_hook = record_release;
    em_scope_begin();
    em_tensor *a = em_ones(EM_SHAPE(4), EM_F32);
    em_tensor *b = em_ones(EM_SHAPE(4), EM_F32);
    a->node = (struct em_node *)&node_a;
    b->node = (struct em_node *)&node_b;
    b->grad = em_retain(a); /* released with b, before the scope reaches a */
    em_scope_end();
    em_tensor_node_release_hook = NULL;
    cr_assert_eq(n_released, 2);
    cr_assert_eq(release_order[0], (struct em_node *)&node_b);
    cr_assert_eq(release_order[1], (struct em_node *)&node_a);
    cr_assert_eq(live(), base);
}

Test(scope, end_without_begin_is_an_error)
{
    em_error_clear();
    em_scope_end();
    cr_assert_eq(em_error_status(), EM_ERR_STATE);
    cr_assert_str_eq(em_error(), "em_scope_end: no scope is open");
    em_error_clear();
}

Test(errors, prefix_names_the_caller_of_a_pending_error)
{
    em_error_clear();
    cr_expect_eq(em_error_prefix("em_caller"), EM_OK, "nothing pending");
    cr_expect_str_eq(em_error(), "");
    em_set_error(EM_ERR_IO, "cannot write 'x'");
    cr_expect_eq(em_error_prefix("em_caller: trace file"), EM_ERR_IO);
    cr_expect_str_eq(em_error(), "em_caller: trace file: cannot write 'x'");
    em_error_clear();
}
