/* The inference engine with a test model (y = 2x, logging each batch and optionally held at a
 * gate): batches fill up to max_batch or until max_wait, priorities order the queue, futures
 * time out and cancel, the queue bound rejects, the cache answers repeats without the model,
 * adaptive batching shrinks the batch limit over a slow model, free drains, many threads get
 * their own results, the statistics add up, and bulk work waits between layers while a reserved
 * worker runs. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "serve/engine.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opened = PTHREAD_COND_INITIALIZER;
static bool gate_closed;
static int entered;          /* forwards that reached the gate */
static float order[256];     /* first value of each row, in the order the model saw them */
static int n_order;
static int batch_sizes[256], n_batches;
static int sleep_us_per_row; /* a slow model for adaptive batching */
static int nice_seen[256];   /* the nice value of the thread that ran each row */

static em_tensor *doubler_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    pthread_mutex_lock(&lock);
    entered++;
    pthread_cond_broadcast(&opened);
    while (gate_closed)
        pthread_cond_wait(&opened, &lock);
    batch_sizes[n_batches++ % 256] = (int)x->shape[0];
    for (int64_t i = 0; i < x->shape[0]; i++) {
        nice_seen[n_order % 256] = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
        order[n_order++ % 256] = ((const float *)em_data_ptr(x))[i * x->shape[1]];
    }
    pthread_mutex_unlock(&lock);
    if (sleep_us_per_row)
        usleep((useconds_t)(sleep_us_per_row * x->shape[0]));
    return em_mul_scalar(x, 2.0);
}

static const em_module_type doubler_type = {.type_name = "Doubler",
                                            .forward = doubler_forward};

static em_module *doubler(void)
{
    em_module *m = em_module_alloc(sizeof *m, &doubler_type);
    gate_closed = false;
    entered = n_order = n_batches = sleep_us_per_row = 0;
    return m;
}

static void gate(bool closed)
{
    pthread_mutex_lock(&lock);
    gate_closed = closed;
    pthread_cond_broadcast(&opened);
    pthread_mutex_unlock(&lock);
}

static void wait_entered(int n)
{
    pthread_mutex_lock(&lock);
    while (entered < n)
        pthread_cond_wait(&opened, &lock);
    pthread_mutex_unlock(&lock);
}

static em_tensor *sample(float v)
{
    float x[2] = {v, -v};
    return em_from_data(EM_SHAPE(2), EM_F32, x);
}

static em_future *submit(em_engine *e, float v, em_priority p)
{
    em_tensor *x = sample(v);
    em_future *f = em_engine_submit(e, x, p);
    em_release(x);
    cr_assert_not_null(f, "%s", em_error());
    return f;
}

static void expect_result(em_future *f, float v)
{
    em_tensor *y = NULL;
    cr_assert_eq(em_future_wait(f, 5000, &y), EM_OK, "%s", em_error());
    cr_assert_eq(y->ndim, 1);
    cr_assert_eq(y->shape[0], 2);
    cr_assert_float_eq(em_get(y, (int64_t[]){0}), 2 * v, 0);
    cr_assert_float_eq(em_get(y, (int64_t[]){1}), -2 * v, 0);
    em_release(y);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

Test(serve_engine, a_full_batch_runs_as_one)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 8,
                                                                  .max_wait_ms = 2000});
    cr_assert_not_null(e, "%s", em_error());
    em_future *f[8];
    for (int i = 0; i < 8; i++)
        f[i] = submit(e, (float)i, EM_PRIORITY_NORMAL);
    for (int i = 0; i < 8; i++) {
        expect_result(f[i], (float)i);
        em_future_free(f[i]);
    }
    em_engine_stats s = em_engine_get_stats(e);
    cr_assert_eq(s.batches, 1, "8 requests within max_wait: one batch, not %lld", s.batches);
    cr_assert_eq(s.batch_hist[8], 1);
    cr_assert_eq(s.completed, 8);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, a_partial_batch_waits_max_wait)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 8,
                                                                  .max_wait_ms = 400});
    double t0 = now_s();
    em_future *f[3];
    for (int i = 0; i < 3; i++)
        f[i] = submit(e, (float)i, EM_PRIORITY_NORMAL);
    for (int i = 0; i < 3; i++)
        expect_result(f[i], (float)i);
    double waited = now_s() - t0;
    cr_assert(waited >= 0.399, "the batch left after %.3f s, before max_wait", waited);
    em_engine_stats s = em_engine_get_stats(e);
    cr_assert_eq(s.batch_hist[3], 1);
    cr_assert_eq(s.batches, 1);
    for (int i = 0; i < 3; i++)
        em_future_free(f[i]);
    /* critical requests never wait for company (the bound leaves room for a busy machine) */
    t0 = now_s();
    em_future *c = submit(e, 9, EM_PRIORITY_CRITICAL);
    expect_result(c, 9);
    cr_assert(now_s() - t0 < 0.2, "a critical request waited %.3f s", now_s() - t0);
    em_future_free(c);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, priorities_order_the_queue)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 1});
    gate(true);
    em_future *blocker = submit(e, 100, EM_PRIORITY_LOW);
    wait_entered(1); /* the worker holds the blocker at the gate; the rest queue */
    float v[6] = {1, 2, 3, 4, 5, 6};
    em_priority p[6] = {EM_PRIORITY_LOW, EM_PRIORITY_NORMAL, EM_PRIORITY_CRITICAL,
                        EM_PRIORITY_HIGH, EM_PRIORITY_LOW, EM_PRIORITY_CRITICAL};
    em_future *f[6];
    for (int i = 0; i < 6; i++)
        f[i] = submit(e, v[i], p[i]);
    cr_assert_eq(em_engine_get_stats(e).queue_depth, 6);
    gate(false);
    for (int i = 0; i < 6; i++) {
        expect_result(f[i], v[i]);
        em_future_free(f[i]);
    }
    expect_result(blocker, 100);
    em_future_free(blocker);
    float want[7] = {100, 3, 6, 4, 2, 1, 5}; /* critical, high, normal, low; FIFO within one */
    cr_assert_eq(n_order, 7);
    for (int i = 0; i < 7; i++)
        cr_assert_eq(order[i], want[i], "position %d ran %g, want %g", i, order[i], want[i]);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, a_bulk_batch_waits_between_layers_while_a_reserved_worker_runs)
{
    /* two doublers in sequence, 100 ms per row each: a low request A (1) starts on the bulk
     * worker, a critical B (100) starts 50 ms later on the reserved worker. A's second layer
     * would start at 100 ms, before B's at 150 ms; it waits until B is done instead. The bulk
     * worker runs at nice +7 over the process's own. */
    em_module *m = em_sequential(2, doubler(), doubler());
    sleep_us_per_row = 100000;
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.workers = 2,
                                                                  .reserved_workers = 1,
                                                                  .max_batch = 1,
                                                                  .bulk_nice = 7});
    cr_assert_not_null(e, "%s", em_error());
    int base = getpriority(PRIO_PROCESS, 0), bulk = base + 7 < 19 ? base + 7 : 19;
    em_future *a = submit(e, 1, EM_PRIORITY_LOW);
    wait_entered(1);
    usleep(50000);
    em_future *b = submit(e, 100, EM_PRIORITY_CRITICAL);
    expect_result(b, 200); /* y = 4x */
    expect_result(a, 2);
    float want[4] = {1, 100, 200, 2}; /* the first value each layer saw, in order */
    int want_nice[4] = {bulk, base, base, bulk};
    cr_assert_eq(n_order, 4);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(order[i], want[i], "layer entry %d saw %g, want %g", i, order[i], want[i]);
        cr_assert_eq(nice_seen[i], want_nice[i], "layer entry %d ran at nice %d, want %d", i,
                     nice_seen[i], want_nice[i]);
    }
    em_future_free(a);
    em_future_free(b);
    em_engine_free(e);
    em_module_free(m);
}

static bool entered_within(int n, double seconds)
{
    for (double t0 = now_s(); now_s() - t0 < seconds; usleep(1000)) {
        pthread_mutex_lock(&lock);
        bool reached = entered >= n;
        pthread_mutex_unlock(&lock);
        if (reached)
            return true;
    }
    return false;
}

Test(serve_engine, a_free_reserved_worker_takes_the_urgent_requests_alone)
{
    /* a low request A waits 50 ms for company on the bulk worker; a critical C arriving then
     * runs at once on the reserved worker, in a batch of its own, never in A's (20 times: the
     * two workers race for C when the bulk worker may take it) */
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.workers = 2,
                                                                  .reserved_workers = 1,
                                                                  .max_batch = 8,
                                                                  .max_wait_ms = 50});
    for (int i = 0; i < 20; i++) {
        em_future *a = submit(e, (float)i, EM_PRIORITY_LOW);
        em_future *c = submit(e, 100 + (float)i, EM_PRIORITY_CRITICAL);
        expect_result(c, 100 + (float)i);
        expect_result(a, (float)i);
        em_future_free(a);
        em_future_free(c);
    }
    cr_assert_eq(n_batches, 40, "A and C shared a batch: %d batches for 40 requests",
                 n_batches);
    /* with the reserved worker busy (held at the gate), the bulk worker takes the next one */
    gate(true);
    em_future *c1 = submit(e, 3, EM_PRIORITY_CRITICAL);
    cr_assert(entered_within(3, 5), "the reserved worker took C1");
    em_future *c2 = submit(e, 4, EM_PRIORITY_CRITICAL);
    cr_assert(entered_within(4, 5), "the bulk worker helps while every reserved one is busy");
    gate(false);
    expect_result(c1, 3);
    expect_result(c2, 4);
    em_future_free(c1);
    em_future_free(c2);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, futures_time_out_and_cancel)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 1});
    gate(true);
    em_future *running = submit(e, 1, EM_PRIORITY_NORMAL);
    wait_entered(1);
    em_future *queued = submit(e, 2, EM_PRIORITY_NORMAL);
    em_tensor *y = NULL;
    double t0 = now_s();
    cr_assert_eq(em_future_wait(running, 30, &y), EM_ERR_TIMEOUT);
    cr_assert(now_s() - t0 >= 0.029 && now_s() - t0 < 2.0, "waited %.3f s", now_s() - t0);
    cr_assert_null(y);
    cr_assert(strstr(em_error(), "no result within 30 ms"), "%s", em_error());
    em_error_clear();
    cr_assert(!em_future_cancel(running), "a running request cannot be cancelled");
    cr_assert(em_future_cancel(queued));
    cr_assert(!em_future_cancel(queued), "cancelling twice does nothing");
    cr_assert_eq(em_future_wait(queued, 10, &y), EM_ERR_CANCELLED);
    em_error_clear();
    em_future *dropped = submit(e, 3, EM_PRIORITY_NORMAL); /* freed while queued: cancelled */
    em_future_free(dropped);
    gate(false);
    expect_result(running, 1);
    em_engine_stats s = em_engine_get_stats(e);
    cr_assert_eq(s.cancelled, 2);
    cr_assert_eq(n_order, 1, "cancelled requests never reach the model");
    em_future_free(running);
    em_future_free(queued);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, a_full_queue_rejects_and_bad_input_is_an_error)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 1,
                                                                  .max_queue = 2});
    gate(true);
    em_future *running = submit(e, 1, EM_PRIORITY_NORMAL);
    wait_entered(1);
    em_future *a = submit(e, 2, EM_PRIORITY_LOW), *b = submit(e, 3, EM_PRIORITY_LOW);
    em_tensor *x = sample(4);
    cr_assert_null(em_engine_submit(e, x, EM_PRIORITY_CRITICAL));
    cr_assert_eq(em_error_status(), EM_ERR_BUSY);
    cr_assert(strstr(em_error(), "queue is full (2 requests)"), "%s", em_error());
    em_error_clear();
    em_tensor *wrong = em_zeros(EM_SHAPE(3), EM_F32);
    cr_assert_null(em_engine_submit(e, wrong, EM_PRIORITY_NORMAL));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "expected one float sample of shape [2], got f32 [3]"), "%s",
              em_error());
    em_error_clear();
    cr_assert_eq(em_engine_get_stats(e).rejected, 1);
    cr_assert_eq(em_engine_get_stats(e).max_queue_depth, 2);
    gate(false);
    expect_result(a, 2);
    expect_result(b, 3);
    em_future_free(running), em_future_free(a), em_future_free(b);
    em_release(x), em_release(wrong);
    em_engine_free(e);
    cr_assert_null(em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.workers = 2,
                                                                  .reserved_workers = 1,
                                                                  .bulk_nice = 20}));
    cr_assert(strstr(em_error(), "bulk_nice 20"), "%s", em_error());
    em_error_clear();
    em_module_free(m);
    cr_assert_null(em_engine_new(NULL, EM_SHAPE(2), (em_engine_opts){0}));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
}

Test(serve_engine, the_cache_answers_repeats_without_the_model)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){
                                                     .max_batch = 4, .max_wait_ms = 1,
                                                     .cache = {.max_entries = 16}});
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 4; i++) {
            em_tensor *x = sample((float)i), *y = NULL;
            cr_assert_eq(em_engine_predict(e, x, EM_PRIORITY_NORMAL, 5000, &y), EM_OK, "%s",
                         em_error());
            cr_assert_float_eq(em_get(y, (int64_t[]){0}), 2.0f * (float)i, 0);
            em_release(x);
            em_release(y);
        }
    em_engine_stats s = em_engine_get_stats(e);
    cr_assert_eq(n_order, 1 + 4, "only the first round (after the sample that learns the "
                 "output's shape) reached the model");
    cr_assert_eq(s.cache_answered, 8);
    cr_assert_eq(s.cache.hits, 8);
    cr_assert_eq(s.cache.misses, 4);
    cr_assert_eq(s.completed, 12);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, adaptive_batching_shrinks_the_limit_over_a_slow_model)
{
    em_module *m = doubler();
    sleep_us_per_row = 500; /* a batch of 64 takes 32 ms; the target is 5 ms */
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){
                                                     .max_batch = 64, .max_wait_ms = 1,
                                                     .target_p95_ms = 5, .max_queue = 4096});
    em_future *f[512];
    for (int i = 0; i < 512; i++)
        f[i] = submit(e, (float)i, EM_PRIORITY_NORMAL);
    for (int i = 0; i < 512; i++) {
        expect_result(f[i], (float)i);
        em_future_free(f[i]);
    }
    em_engine_stats s = em_engine_get_stats(e);
    cr_assert_lt(s.batch_limit, 64, "the limit stayed at %d", s.batch_limit);
    cr_assert_gt(s.batches, 8, "smaller batches: %lld", s.batches);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, adaptive_batching_runs_a_lone_request_at_once_and_batches_the_queue)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){
                                                     .max_batch = 8, .max_wait_ms = 2000,
                                                     .target_p95_ms = 1000});
    double t0 = now_s();
    em_future *lone = submit(e, 1, EM_PRIORITY_NORMAL);
    expect_result(lone, 1);
    em_future_free(lone);
    cr_assert_lt(now_s() - t0, 0.5, "a lone request waited %.3f s with the worker free",
                 now_s() - t0);
    gate(true); /* the worker busy with one request while five more queue */
    em_future *f[6];
    f[0] = submit(e, 10, EM_PRIORITY_NORMAL);
    wait_entered(2);
    for (int i = 1; i < 6; i++)
        f[i] = submit(e, (float)(10 + i), EM_PRIORITY_NORMAL);
    gate(false);
    for (int i = 0; i < 6; i++) {
        expect_result(f[i], (float)(10 + i));
        em_future_free(f[i]);
    }
    cr_assert_eq(n_batches, 3, "batches of 1, 1 and the 5 that queued: %d", n_batches);
    cr_assert_eq(batch_sizes[2], 5);
    em_engine_free(e);
    em_module_free(m);
}

typedef struct {
    em_engine *e;
    int id;
    int wrong;
} client;

static void *client_main(void *p)
{
    client *c = p;
    for (int i = 0; i < 50; i++) {
        float v = (float)(c->id * 1000 + i);
        em_tensor *x = sample(v), *y = NULL;
        if (em_engine_predict(c->e, x, (em_priority)(i % EM_PRIORITY_COUNT), 10000, &y) != EM_OK ||
            em_get(y, (int64_t[]){0}) != 2 * v)
            c->wrong++;
        em_release(x);
        em_release(y);
    }
    return NULL;
}

Test(serve_engine, many_threads_get_their_own_results_and_stats_add_up)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){
                                                     .workers = 2, .reserved_workers = 1,
                                                     .max_batch = 16, .max_wait_ms = 1});
    pthread_t t[8];
    client c[8];
    for (int i = 0; i < 8; i++) {
        c[i] = (client){e, i + 1, 0};
        pthread_create(&t[i], NULL, client_main, &c[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(c[i].wrong, 0, "client %d got %d wrong results", i, c[i].wrong);
    }
    em_engine_stats s = em_engine_get_stats(e);
    cr_assert_eq(s.completed, 400);
    cr_assert_eq(s.submitted, 400);
    int64_t in_batches = 0, batches = 0;
    for (int n = 1; n <= EM_ENGINE_MAX_BATCH; n++) {
        in_batches += n * s.batch_hist[n];
        batches += s.batch_hist[n];
    }
    cr_assert_eq(in_batches, 400);
    cr_assert_eq(batches, s.batches);
    cr_assert(s.p50_ms > 0 && s.p50_ms <= s.p95_ms && s.p95_ms <= s.p99_ms, "%g %g %g",
              s.p50_ms, s.p95_ms, s.p99_ms);
    cr_assert(s.throughput > 0 && s.uptime_s > 0);
    cr_assert_eq(s.queue_depth, 0);
    for (int p = 0; p < EM_PRIORITY_COUNT; p++)
        cr_assert_gt(s.p99_ms_by_priority[p], 0);
    em_engine_free(e);
    em_module_free(m);
}

Test(serve_engine, free_drains_queued_requests)
{
    em_module *m = doubler();
    em_engine *e = em_engine_new(m, EM_SHAPE(2), (em_engine_opts){.max_batch = 2});
    gate(true);
    em_future *f[6];
    for (int i = 0; i < 6; i++)
        f[i] = submit(e, (float)i, EM_PRIORITY_NORMAL);
    wait_entered(1);
    gate(false);
    em_engine_free(e); /* returns once every queued request has run */
    for (int i = 0; i < 6; i++) {
        expect_result(f[i], (float)i);
        em_future_free(f[i]);
    }
    cr_assert_eq(n_order, 6);
    em_module_free(m);
}
