/* The engine: one mutex guards the four priority queues (intrusive FIFO lists of futures) and
 * the statistics; workers sleep on a condition variable, collect a batch, run the model without
 * the lock, and complete each future (which has its own mutex and condition variable). Bulk
 * workers yield the cores to reserved ones through a forward hook run between layers. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "serve/engine.h"

#define LATENCY_WINDOW 4096
#define ADAPT_EVERY 64 /* completed requests between two adjustments of the batch limit */

typedef enum { F_QUEUED, F_RUNNING, F_DONE, F_FAILED, F_CANCELLED } future_state;

struct em_future {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int holders;              /* the caller and, while queued or running, the engine */
    future_state state;
    em_priority priority;
    double submitted_s;
    float *x;                 /* (sample numel) the input, until the batch is assembled */
    em_tensor *y;             /* the result, handed to the caller */
    em_status error;
    char message[256];
    struct em_future *prev, *next; /* in its priority queue */
    struct em_engine *engine;
};

typedef struct {
    em_future *head, *tail;
    int64_t n;
} queue;

typedef struct {
    double ms[LATENCY_WINDOW];
    int64_t n; /* total recorded; the window holds the last min(n, LATENCY_WINDOW) */
} latency_ring;

struct em_engine {
    em_module *model;
    em_shape sample;          /* without the batch dim */
    int64_t sample_numel;
    em_engine_opts o;
    em_cache *cache;
    pthread_mutex_t lock;
    pthread_cond_t work;      /* a request arrived or the engine is stopping */
    atomic_int urgent_running; /* batches reserved workers run now (changed under lock) */
    pthread_cond_t urgent_done; /* urgent_running fell to 0 */
    queue queues[EM_PRIORITY_COUNT];
    bool stopping;
    int n_workers;
    pthread_t *threads;
    double started_s;
    int batch_limit;
    em_engine_stats stats;    /* counters; the latency fields are computed on demand */
    latency_ring all, by_priority[EM_PRIORITY_COUNT];
    double adapt_window[ADAPT_EVERY];
    int adapt_n;
    char *warning; /* what the engine put up with at start, or NULL (em_engine_warning) */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *const priority_names[EM_PRIORITY_COUNT] = {"low", "normal", "high",
                                                              "critical"};

const char *em_priority_name(em_priority p)
{
    return p >= 0 && p < EM_PRIORITY_COUNT ? priority_names[p] : "unknown";
}

int em_priority_parse(const char *name)
{
    for (int p = 0; name && p < EM_PRIORITY_COUNT; p++)
        if (!strcmp(name, priority_names[p]))
            return p;
    return -1;
}

/* ---- futures ---- */

static void future_release(em_future *f)
{
    pthread_mutex_lock(&f->lock);
    bool last = --f->holders == 0;
    pthread_mutex_unlock(&f->lock);
    if (!last)
        return;
    em_release(f->y);
    free(f->x);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->done);
    free(f);
}

/* Moves f to a final state with its result or error (y owned by f from here). */
static void future_finish(em_future *f, future_state state, em_tensor *y, em_status err,
                          const char *message)
{
    pthread_mutex_lock(&f->lock);
    f->state = state;
    f->y = y;
    f->error = err;
    if (message)
        snprintf(f->message, sizeof f->message, "%s", message);
    pthread_cond_broadcast(&f->done);
    pthread_mutex_unlock(&f->lock);
}

em_status em_future_wait(em_future *f, double timeout_ms, em_tensor **y)
{
    if (!f || !y)
        return em_set_error(EM_ERR_ARG, "em_future_wait: future and y must be given");
    *y = NULL;
    double deadline = now_s() + timeout_ms / 1e3;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double real_deadline = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + timeout_ms / 1e3;
    until.tv_sec = (time_t)real_deadline;
    until.tv_nsec = (long)((real_deadline - (double)until.tv_sec) * 1e9);
    pthread_mutex_lock(&f->lock);
    while (f->state == F_QUEUED || f->state == F_RUNNING) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&f->done, &f->lock);
        } else if (now_s() >= deadline ||
                   pthread_cond_timedwait(&f->done, &f->lock, &until) != 0) {
            if (f->state == F_QUEUED || f->state == F_RUNNING)
                break;
        }
    }
    future_state s = f->state;
    em_status st = EM_OK;
    if (s == F_DONE) {
        *y = em_retain(f->y);
    } else if (s == F_CANCELLED) {
        st = em_set_error(EM_ERR_CANCELLED, "em_future_wait: the request was cancelled");
    } else if (s == F_FAILED) {
        st = em_set_error(f->error, "%s", f->message);
    } else {
        st = em_set_error(EM_ERR_TIMEOUT, "em_future_wait: no result within %g ms", timeout_ms);
    }
    pthread_mutex_unlock(&f->lock);
    return st;
}

/* ---- queues (engine lock held) ---- */

static void queue_push(queue *q, em_future *f)
{
    f->prev = q->tail;
    f->next = NULL;
    if (q->tail)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
    q->n++;
}

static void queue_remove(queue *q, em_future *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        q->head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        q->tail = f->prev;
    f->prev = f->next = NULL;
    q->n--;
}

static int64_t queued(const em_engine *e)
{
    int64_t n = 0;
    for (int p = 0; p < EM_PRIORITY_COUNT; p++)
        n += e->queues[p].n;
    return n;
}

bool em_future_cancel(em_future *f)
{
    if (!f)
        return false;
    pthread_mutex_lock(&f->lock); /* a finished future no longer touches its engine */
    bool queued_now = f->state == F_QUEUED;
    pthread_mutex_unlock(&f->lock);
    if (!queued_now)
        return false;
    em_engine *e = f->engine;
    pthread_mutex_lock(&e->lock);
    pthread_mutex_lock(&f->lock);
    bool cancel = f->state == F_QUEUED;
    if (cancel) {
        queue_remove(&e->queues[f->priority], f);
        f->state = F_CANCELLED;
        f->holders--; /* the engine's hold; the caller still has one */
        e->stats.cancelled++;
        pthread_cond_broadcast(&f->done);
    }
    pthread_mutex_unlock(&f->lock);
    pthread_mutex_unlock(&e->lock);
    return cancel;
}

void em_future_free(em_future *f)
{
    if (!f)
        return;
    em_future_cancel(f);
    future_release(f);
}

/* ---- statistics (engine lock held) ---- */

static void record_latency(latency_ring *r, double ms)
{
    r->ms[r->n % LATENCY_WINDOW] = ms;
    r->n++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of v (n, sorted in place), nearest rank; 0 when empty. */
static double quantile(double *v, int64_t n, double q)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int64_t k = (int64_t)ceil(q * (double)n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static double ring_quantile(const latency_ring *r, double q, double *scratch)
{
    int64_t n = r->n < LATENCY_WINDOW ? r->n : LATENCY_WINDOW;
    memcpy(scratch, r->ms, sizeof *scratch * (size_t)n);
    return quantile(scratch, n, q);
}

/* Adaptive batching: every ADAPT_EVERY completions, shrink the limit by a quarter when their
 * p95 is over the target, grow it by a quarter (at least 1) when under 70% of it. */
static void adapt(em_engine *e, double ms)
{
    if (e->o.target_p95_ms <= 0)
        return;
    e->adapt_window[e->adapt_n++] = ms;
    if (e->adapt_n < ADAPT_EVERY)
        return;
    double p95 = quantile(e->adapt_window, ADAPT_EVERY, 0.95);
    e->adapt_n = 0;
    int limit = e->batch_limit;
    if (p95 > e->o.target_p95_ms)
        limit = limit * 3 / 4;
    else if (p95 < 0.7 * e->o.target_p95_ms)
        limit += limit / 4 > 1 ? limit / 4 : 1;
    e->batch_limit = limit < 1 ? 1 : limit > e->o.max_batch ? e->o.max_batch : limit;
}

static void record_done(em_engine *e, const em_future *f, bool ok)
{
    double ms = (now_s() - f->submitted_s) * 1e3;
    if (!ok) {
        e->stats.failed++;
        return;
    }
    e->stats.completed++;
    record_latency(&e->all, ms);
    record_latency(&e->by_priority[f->priority], ms);
    adapt(e, ms);
}

em_engine_stats em_engine_get_stats(em_engine *e)
{
    em_engine_stats s = {0};
    if (!e)
        return s;
    double *scratch = malloc(sizeof *scratch * LATENCY_WINDOW);
    pthread_mutex_lock(&e->lock);
    s = e->stats;
    s.uptime_s = now_s() - e->started_s;
    s.throughput = s.uptime_s > 0 ? (double)s.completed / s.uptime_s : 0;
    s.queue_depth = queued(e);
    s.batch_limit = e->batch_limit;
    if (scratch) {
        s.p50_ms = ring_quantile(&e->all, 0.50, scratch);
        s.p95_ms = ring_quantile(&e->all, 0.95, scratch);
        s.p99_ms = ring_quantile(&e->all, 0.99, scratch);
        for (int p = 0; p < EM_PRIORITY_COUNT; p++)
            s.p99_ms_by_priority[p] = ring_quantile(&e->by_priority[p], 0.99, scratch);
    }
    pthread_mutex_unlock(&e->lock);
    free(scratch);
    s.cache = em_cache_get_stats(e->cache);
    return s;
}

/* ---- workers ---- */

/* The priorities a worker takes now (lock held): reserved workers only high and critical; the
 * others low and normal while a reserved worker is free to take the rest, else every level. */
typedef struct {
    int lowest, highest;
} priority_range;

static priority_range takes(const em_engine *e, bool reserved)
{
    if (reserved)
        return (priority_range){EM_PRIORITY_HIGH, EM_PRIORITY_CRITICAL};
    bool reserved_free = e->urgent_running < e->o.reserved_workers;
    return (priority_range){EM_PRIORITY_LOW, reserved_free ? EM_PRIORITY_NORMAL
                                                           : EM_PRIORITY_CRITICAL};
}

static int64_t eligible(const em_engine *e, priority_range r)
{
    int64_t n = 0;
    for (int p = r.lowest; p <= r.highest; p++)
        n += e->queues[p].n;
    return n;
}

/* When the oldest eligible request stops waiting for company: its submit + max_wait, or now
 * when a critical request waits. Adaptive batching never waits: a free worker runs what is
 * queued at once, and batches form from the requests that arrive while the workers are busy,
 * so that a lightly loaded server answers as fast as one without batching. */
static double batch_deadline(const em_engine *e, priority_range r)
{
    if (e->o.target_p95_ms > 0 ||
        (r.highest == EM_PRIORITY_CRITICAL && e->queues[EM_PRIORITY_CRITICAL].n))
        return 0;
    double oldest = INFINITY;
    for (int p = r.lowest; p <= r.highest; p++)
        if (e->queues[p].head && e->queues[p].head->submitted_s < oldest)
            oldest = e->queues[p].head->submitted_s;
    return oldest + e->o.max_wait_ms / 1e3;
}

static void wait_until(em_engine *e, double deadline_s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    double real = (double)t.tv_sec + (double)t.tv_nsec * 1e-9 + (deadline_s - now_s());
    t.tv_sec = (time_t)real;
    t.tv_nsec = (long)((real - (double)t.tv_sec) * 1e9);
    pthread_cond_timedwait(&e->work, &e->lock, &t);
}

/* Takes up to limit requests, highest priority first, and marks them running (lock held). */
static int take_batch(em_engine *e, priority_range r, em_future **batch, int limit)
{
    int n = 0;
    for (int p = r.highest; p >= r.lowest && n < limit; p--)
        while (e->queues[p].head && n < limit) {
            em_future *f = e->queues[p].head;
            queue_remove(&e->queues[p], f);
            pthread_mutex_lock(&f->lock);
            f->state = F_RUNNING;
            pthread_mutex_unlock(&f->lock);
            batch[n++] = f;
        }
    return n;
}

/* Runs the model on the batch's inputs and completes every future. */
static void run_batch(em_engine *e, em_future **batch, int n)
{
    em_shape bs = {.ndim = e->sample.ndim + 1, .d = {n}};
    for (int i = 0; i < e->sample.ndim; i++)
        bs.d[i + 1] = e->sample.d[i];
    em_error_clear();
    em_scope_begin();
    em_tensor *x = em_empty(bs, EM_F32), *y = NULL;
    if (x) {
        for (int i = 0; i < n; i++)
            memcpy((float *)em_data_ptr(x) + (int64_t)i * e->sample_numel, batch[i]->x,
                   sizeof(float) * (size_t)e->sample_numel);
        y = em_forward(e->model, x);
    }
    y = y ? em_contiguous(y) : NULL;
    int64_t row = y && y->ndim >= 1 && y->shape[0] == n ? em_numel(y) / n : -1;
    if (y && row < 0)
        em_set_error(EM_ERR_STATE, "em_engine: the model's output %d rows for a batch of %d",
                     y->ndim ? (int)y->shape[0] : 0, n);
    for (int i = 0; i < n; i++) {
        em_tensor *yi = NULL;
        if (row >= 0) {
            em_shape rs = em_shape_of(y);
            rs.ndim--;
            memmove(rs.d, rs.d + 1, sizeof rs.d[0] * (size_t)rs.ndim);
            yi = em_keep(em_from_data(rs, y->dtype, (char *)em_data_ptr(y) +
                                                        (size_t)(i * row) *
                                                            em_dtype_size(y->dtype)));
            if (yi && e->cache) {
                em_tensor *xi = em_from_data(e->sample, EM_F32, batch[i]->x);
                em_cache_put(e->cache, xi, yi);
                em_release(xi);
            }
        }
        pthread_mutex_lock(&e->lock); /* counted before the caller can see the result */
        record_done(e, batch[i], yi != NULL);
        pthread_mutex_unlock(&e->lock);
        if (yi)
            future_finish(batch[i], F_DONE, yi, EM_OK, NULL);
        else
            future_finish(batch[i], F_FAILED, NULL, em_has_error() ? em_error_status()
                                                                   : EM_ERR_MEMORY,
                          em_has_error() ? em_error() : "em_engine: out of memory");
    }
    em_scope_end();
    em_error_clear();
}

/* The forward hook of the workers that are not reserved: between two layers of a bulk batch,
 * waits while a reserved worker runs an urgent one, so that it has the cores to itself. */
static void yield_to_urgent(em_module *m, const em_tensor *out, void *ctx)
{
    (void)m;
    (void)out;
    em_engine *e = ctx;
    if (!atomic_load_explicit(&e->urgent_running, memory_order_relaxed))
        return;
    pthread_mutex_lock(&e->lock);
    while (e->urgent_running > 0)
        pthread_cond_wait(&e->urgent_done, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

typedef struct {
    em_engine *e;
    int index;
} worker_arg;

static void *worker_main(void *p)
{
    worker_arg *a = p;
    em_engine *e = a->e;
    bool reserved = a->index < e->o.reserved_workers;
    free(a);
    if (e->o.reserved_workers > 0 && !reserved) {
        em_set_forward_hook(yield_to_urgent, e, NULL);
        /* before this thread's first parallel region: its OpenMP threads inherit the value;
         * raising one's own nice cannot fail, and the worker runs either way */
        if (e->o.bulk_nice > 0)
            (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), e->o.bulk_nice);
    }
    if (e->o.threads_per_worker > 0)
        omp_set_num_threads(e->o.threads_per_worker);
    em_set_grad_enabled(false);
    em_future *batch[EM_ENGINE_MAX_BATCH];
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->stopping && eligible(e, takes(e, reserved)) == 0)
            pthread_cond_wait(&e->work, &e->lock);
        if (eligible(e, takes(e, reserved)) == 0)
            break; /* stopping, and nothing left to drain that is this worker's */
        while (!e->stopping && eligible(e, takes(e, reserved)) < e->batch_limit &&
               now_s() < batch_deadline(e, takes(e, reserved)) &&
               eligible(e, takes(e, reserved)) > 0)
            wait_until(e, batch_deadline(e, takes(e, reserved)));
        int n = take_batch(e, takes(e, reserved), batch, e->batch_limit);
        if (n == 0)
            continue;
        e->stats.batches++;
        e->stats.batch_hist[n]++;
        if (reserved && ++e->urgent_running == e->o.reserved_workers &&
            eligible(e, takes(e, true)) > 0)
            pthread_cond_broadcast(&e->work); /* every reserved one is busy: others may help */
        pthread_mutex_unlock(&e->lock);
        run_batch(e, batch, n);
        for (int i = 0; i < n; i++)
            future_release(batch[i]);
        pthread_mutex_lock(&e->lock);
        if (reserved && --e->urgent_running == 0)
            pthread_cond_broadcast(&e->urgent_done);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* ---- the engine ---- */

/* What the cache's entries must be (serve/cache.h): results of this model, learnt from one
 * forward of a zero sample. */
static em_status cache_signature(const em_engine *e, em_cache_signature *s)
{
    em_shape bs = {.ndim = e->sample.ndim + 1, .d = {1}};
    memcpy(bs.d + 1, e->sample.d, sizeof bs.d[0] * (size_t)e->sample.ndim);
    bool grad = em_set_grad_enabled(false);
    em_scope_begin();
    em_tensor *y = em_forward(e->model, em_zeros(bs, EM_F32));
    em_status st = y ? EM_OK : em_error_status();
    if (y && (y->ndim < 1 || y->shape[0] != 1))
        st = em_set_error(EM_ERR_STATE, "em_engine_new: the model's output has %d rows for one "
                          "sample", y->ndim ? (int)y->shape[0] : 0);
    if (st == EM_OK) {
        *s = (em_cache_signature){.model = em_module_hash(e->model), .in_shape = e->sample,
                                  .in_dtype = EM_F32, .out_shape = {.ndim = y->ndim - 1},
                                  .out_dtype = y->dtype};
        memcpy(s->out_shape.d, y->shape + 1, sizeof s->out_shape.d[0] * (size_t)(y->ndim - 1));
    }
    em_scope_end();
    em_set_grad_enabled(grad);
    return st;
}

/* The cache from cache_dir. A file that cannot be read (corrupt, truncated, not a regular file)
 * is put up with: the cache starts empty, the warning says why, and em_engine_free's save
 * replaces the file. False only for a failure of the engine's own (out of memory). */
static bool load_cache(em_engine *e)
{
    em_status st = em_cache_load(e->cache, e->o.cache_dir);
    if (st == EM_OK)
        return true;
    if (st != EM_ERR_IO && st != EM_ERR_UNSUPPORTED)
        return false;
    const char *why = em_error();
    size_t n = strlen(why) + 96;
    if (!(e->warning = malloc(n)))
        return false;
    snprintf(e->warning, n, "the response cache was not loaded and starts empty: %s", why);
    em_error_clear();
    return true;
}

const char *em_engine_warning(const em_engine *e)
{
    return e ? e->warning : NULL;
}

em_engine *em_engine_new(em_module *model, em_shape sample, em_engine_opts o)
{
    const char *fn = "em_engine_new";
    o.workers = o.workers ? o.workers : 1;
    o.max_batch = o.max_batch ? o.max_batch : 32;
    o.max_wait_ms = o.max_wait_ms > 0 ? o.max_wait_ms : 2.0;
    o.max_queue = o.max_queue ? o.max_queue : 1024;
    if (!model || sample.ndim < 0 || sample.ndim >= EM_MAX_DIMS || o.workers < 1 ||
        o.workers > 64 || o.reserved_workers < 0 || o.reserved_workers >= o.workers ||
        o.max_batch < 1 || o.max_batch > EM_ENGINE_MAX_BATCH || o.max_queue < 1 ||
        o.target_p95_ms < 0 || o.threads_per_worker < 0 || o.bulk_nice < 0 ||
        o.bulk_nice > 19) {
        em_set_error(EM_ERR_ARG, "%s: need a model and 1 <= workers <= 64, 0 <= reserved < "
                     "workers, 1 <= max_batch <= %d, max_queue >= 1, 0 <= bulk_nice <= 19: "
                     "workers %d, reserved %d, max_batch %d, max_queue %lld, bulk_nice %d", fn,
                     EM_ENGINE_MAX_BATCH, o.workers, o.reserved_workers, o.max_batch,
                     (long long)o.max_queue, o.bulk_nice);
        return NULL;
    }
    em_engine *e = calloc(1, sizeof *e);
    if (!e) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    e->model = model;
    e->sample = sample;
    e->sample_numel = 1;
    for (int i = 0; i < sample.ndim; i++)
        e->sample_numel *= sample.d[i];
    e->o = o;
    e->batch_limit = o.max_batch;
    e->started_s = now_s();
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->urgent_done, NULL);
    em_module_eval(model);
    if (o.cache.max_entries > 0 && cache_signature(e, &o.cache.signature) != EM_OK) {
        free(e);
        return NULL;
    }
    if (o.cache.max_entries > 0) {
        e->cache = em_cache_new(o.cache);
        if (!e->cache || (o.cache_dir && !load_cache(e))) {
            em_cache_free(e->cache);
            free(e->warning);
            free(e);
            return NULL;
        }
    }
    e->threads = calloc((size_t)o.workers, sizeof *e->threads);
    for (int w = 0; e->threads && w < o.workers; w++) {
        worker_arg *a = malloc(sizeof *a);
        if (a)
            *a = (worker_arg){e, w};
        if (!a || pthread_create(&e->threads[w], NULL, worker_main, a) != 0) {
            free(a);
            em_set_error(EM_ERR_MEMORY, "%s: cannot start worker %d", fn, w);
            break;
        }
        e->n_workers++;
    }
    if (e->n_workers < o.workers) {
        if (!e->threads)
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        e->o.cache_dir = NULL;
        em_engine_free(e);
        return NULL;
    }
    return e;
}

void em_engine_free(em_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->lock);
    for (int w = 0; w < e->n_workers; w++)
        pthread_join(e->threads[w], NULL);
    if (e->cache && e->o.cache_dir)
        em_cache_save(e->cache, e->o.cache_dir);
    em_cache_free(e->cache);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->urgent_done);
    free(e->threads);
    free(e->warning);
    free(e);
}

em_future *em_engine_submit(em_engine *e, const em_tensor *x, em_priority p)
{
    const char *fn = "em_engine_submit";
    if (!e || !x)
        return NULL;
    char sx[64];
    bool shape_ok = x->ndim == e->sample.ndim && em_dtype_is_float(x->dtype);
    for (int i = 0; shape_ok && i < x->ndim; i++)
        shape_ok = x->shape[i] == e->sample.d[i];
    if (!shape_ok || p < 0 || p >= EM_PRIORITY_COUNT) {
        em_tensor *want = em_empty(e->sample, EM_F32);
        char sw[64];
        em_set_error(EM_ERR_ARG, "%s: expected one float sample of shape %s, got %s %s "
                     "(priority %d)", fn, want ? em_shape_str(want, sw, sizeof sw) : "?",
                     em_dtype_name(x->dtype), em_shape_str(x, sx, sizeof sx), (int)p);
        em_release(want);
        return NULL;
    }
    em_future *f = calloc(1, sizeof *f);
    float *xv = malloc(sizeof *xv * (size_t)(e->sample_numel ? e->sample_numel : 1));
    if (!f || !xv || em_copy_to_host(x, EM_F32, xv) != EM_OK) {
        free(f);
        free(xv);
        if (!em_has_error())
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->done, NULL);
    f->engine = e;
    f->priority = p;
    f->submitted_s = now_s();
    f->x = xv;
    f->holders = 1;
    /* the cache holds f32 inputs: look up the copy, whatever x's float dtype */
    em_tensor *xf = e->cache ? em_from_data(e->sample, EM_F32, xv) : NULL;
    em_tensor *hit = xf ? em_cache_get(e->cache, xf) : NULL;
    em_release(xf);
    pthread_mutex_lock(&e->lock);
    em_status st = EM_OK;
    if (e->stopping)
        st = em_set_error(EM_ERR_STATE, "%s: the engine is shutting down", fn);
    else if (!hit && queued(e) >= e->o.max_queue) {
        e->stats.rejected++;
        st = em_set_error(EM_ERR_BUSY, "%s: the queue is full (%lld requests)", fn,
                          (long long)e->o.max_queue);
    }
    if (st == EM_OK) {
        e->stats.submitted++;
        if (hit) {
            f->state = F_DONE;
            f->y = hit;
            e->stats.cache_answered++;
            record_done(e, f, true);
        } else {
            f->holders++;
            queue_push(&e->queues[p], f);
            int64_t depth = queued(e);
            if (depth > e->stats.max_queue_depth)
                e->stats.max_queue_depth = depth;
            pthread_cond_broadcast(&e->work);
        }
    }
    pthread_mutex_unlock(&e->lock);
    if (st != EM_OK) {
        em_release(hit);
        future_release(f);
        return NULL;
    }
    return f;
}

em_status em_engine_predict(em_engine *e, const em_tensor *x, em_priority p, double timeout_ms,
                            em_tensor **y)
{
    em_future *f = em_engine_submit(e, x, p);
    if (!f)
        return em_error_status() != EM_OK ? em_error_status() : EM_ERR_ARG;
    em_status st = em_future_wait(f, timeout_ms, y);
    em_future_free(f);
    return st;
}

em_shape em_engine_sample_shape(const em_engine *e)
{
    return e->sample;
}
