/* The inference engine: requests of one sample each queue at four priority levels; a pool of
 * workers takes the highest-priority requests first, up to a batch limit or until the oldest
 * has waited max_wait, runs them as one batch and completes each request's future. Adaptive
 * batching runs what is queued as soon as a worker is free, and moves the batch limit to hold
 * a target p95 latency; an LRU cache answers repeated inputs without running the model. Every
 * call is thread-safe. */
#ifndef EMBER_SERVE_ENGINE_H
#define EMBER_SERVE_ENGINE_H

#include "ember/nn/nn.h"
#include "ember/serve/cache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EM_PRIORITY_LOW = 0,
    EM_PRIORITY_NORMAL,
    EM_PRIORITY_HIGH,
    EM_PRIORITY_CRITICAL, /* never waits for a batch to fill */
    EM_PRIORITY_COUNT
} em_priority;

#define EM_ENGINE_MAX_BATCH 256

typedef struct {
    int workers;           /* 0: 1 */
    int reserved_workers;  /* of those, workers that take only high and critical requests;
                            * while one runs, the others pause between layers of their batch */
    int bulk_nice;         /* 0..19, with reserved workers: the others' threads (and their
                            * OpenMP threads) run at this nice value, so that the OS scheduler
                            * also favours urgent work inside a layer; 0: no change (Linux) */
    int max_batch;         /* 0: 32; 1 turns batching off; at most EM_ENGINE_MAX_BATCH */
    double max_wait_ms;    /* 0: 2 ms; how long the oldest request waits for a batch to fill */
    int64_t max_queue;     /* 0: 1024; a submit beyond this many queued requests is EM_ERR_BUSY */
    double target_p95_ms;  /* > 0: adaptive batching: a free worker runs what is queued at
                            * once (no max_wait), up to a batch limit that moves to hold this
                            * p95; 0: the batch limit stays at max_batch */
    int threads_per_worker; /* OpenMP threads each worker's forward uses; 0: OpenMP's default */
    em_cache_opts cache;   /* max_entries 0: no cache; its signature is the model's (one
                            * forward of a zero sample at start learns the output's shape) */
    const char *cache_dir; /* the cache is loaded from here at start (entries of another model
                            * or shape are discarded and counted; a file that cannot be read
                            * is left unloaded, em_engine_warning says why) and saved at free */
} em_engine_opts;

typedef struct {
    int64_t submitted, completed, failed, cancelled, rejected; /* requests */
    int64_t cache_answered;  /* completed from the cache at submit */
    double uptime_s;
    double throughput;       /* completed per second since the engine started */
    double p50_ms, p95_ms, p99_ms; /* submit-to-result latency of the last 4096 completed */
    double p99_ms_by_priority[EM_PRIORITY_COUNT]; /* the same, per priority */
    int64_t queue_depth, max_queue_depth;
    int batch_limit;         /* the adaptive batch limit now */
    int64_t batches;
    int64_t batch_hist[EM_ENGINE_MAX_BATCH + 1]; /* batch_hist[n]: batches of n requests */
    em_cache_stats cache;
} em_engine_stats;

typedef struct em_engine em_engine;
typedef struct em_future em_future;

/* An engine over model (borrowed: it must outlive the engine; put in eval mode; the workers
 * only read it) for samples of sample_shape (without the batch dim), f32. NULL with an error on
 * bad options. */
em_engine *em_engine_new(em_module *model, em_shape sample_shape, em_engine_opts o);
/* Stops taking requests, lets the workers finish every queued one (drain), saves the cache to
 * cache_dir, and frees the engine. Futures still held stay valid until freed. */
void em_engine_free(em_engine *e);
/* What the engine put up with at start, for its user to show, or NULL: "the response cache was
 * not loaded and starts empty: <why>" when cache_dir's file could not be read. */
const char *em_engine_warning(const em_engine *e);

/* Queues x (sample_shape, any float dtype; copied). NULL with an error: EM_ERR_ARG for a wrong
 * shape or dtype, EM_ERR_BUSY when max_queue requests wait already, EM_ERR_STATE after free
 * began. A cached input's future is complete at once. */
em_future *em_engine_submit(em_engine *e, const em_tensor *x, em_priority p);
/* Waits up to timeout_ms (< 0: forever) for the result. EM_OK with *y (the output row without
 * the batch dim, the caller's to release); EM_ERR_TIMEOUT when not done yet (the request goes
 * on: wait again or cancel); EM_ERR_CANCELLED; or the forward's error, whose message is also
 * set. */
em_status em_future_wait(em_future *f, double timeout_ms, em_tensor **y);
/* Cancels a request that has not started: true when it will not run. */
bool em_future_cancel(em_future *f);
/* Releases the caller's hold; a request still queued is cancelled. NULL is fine. */
void em_future_free(em_future *f);

/* submit + wait + free in one call. */
em_status em_engine_predict(em_engine *e, const em_tensor *x, em_priority p, double timeout_ms,
                            em_tensor **y);
em_engine_stats em_engine_get_stats(em_engine *e);
em_shape em_engine_sample_shape(const em_engine *e);
/* "low", "normal", "high", "critical"; and back (-1 when unknown) */
const char *em_priority_name(em_priority p);
int em_priority_parse(const char *name);

#ifdef __cplusplus
}
#endif

#endif
