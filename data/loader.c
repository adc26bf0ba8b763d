/* The DataLoader: worker threads assemble batches into a bounded ring of slots (condition
 * variables, no polling); the caller takes them in batch order and collates them, so the batches
 * are the same for any number of workers. A batch's rows come from the sampler's indices for the
 * epoch, a pure function of (sampler, seed, epoch). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/data.h"
#include "data/data_internal.h"
#include "autograd/autograd.h"
#include "data/loader_feed_internal.h"
#include "observe/profiler_internal.h"

typedef enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY } slot_state;

typedef struct {
    slot_state state;
    int64_t batch, rows;
    int64_t *indices; /* (batch_size): the dataset index of each row */
    void *x;          /* (batch_size, x_numel) of the dataset's x_dtype */
    void *y;          /* (batch_size, y_numel) of y_dtype */
    em_status status; /* of the fill */
    char msg[512];    /* the worker's error message when status is not EM_OK */
} slot;

typedef struct {
    em_loader *dl;
    char *scratch; /* (2, max_numel) of x_dtype: ping-pong buffers for the transform chain */
} worker;

struct em_loader {
    const em_dataset *ds;
    em_loader_opts o;
    em_transform *tfs;  /* (o.n_transforms) */
    em_shape x_shape;   /* one sample after the transforms */
    int64_t x_numel, y_numel, max_numel;
    size_t x_size, y_size; /* bytes per element */
    int64_t slot_x_bytes, slot_y_bytes, scratch_bytes; /* checked once (loader_sizes) */
    const em_sampler *sampler; /* o.sampler, or own_sampler */
    em_sampler *own_sampler;   /* sequential or random, when the options name no sampler */
    int64_t n, n_batches;      /* samples per epoch (the sampler's length) and batches */

    /* epoch state; written by the calling thread under mu */
    int64_t epoch;
    bool started;      /* the epoch's indices are set and workers may claim batches */
    int64_t *indices;  /* (n): the dataset index of each of the epoch's samples */
    int64_t next_claim, next_consume;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* a batch can be claimed, or stop */
    pthread_cond_t ready_cv; /* a slot became ready, or in_flight dropped */
    bool stop;
    int in_flight;
    int window; /* slots: num_workers * prefetch_factor, 1 without workers */
    slot *slots;
    pthread_t *threads;
    worker *workers; /* (max(num_workers, 1)); workers[0] also serves the inline path */
    int n_threads;
    bool fed;      /* batches go to o.device through the feed (pin_memory on a device) */
    em_feed feed;
};

/* Load sample idx into row x (x_numel) and y through the transform chain. */
static em_status load_sample(em_loader *dl, worker *w, int64_t idx, void *x, void *y)
{
    int nt = dl->o.n_transforms;
    char *cur = x, *second = NULL; /* without transforms there is no scratch */
    if (nt) {
        cur = w->scratch;
        second = w->scratch + (size_t)dl->max_numel * dl->x_size;
    }
    em_status st = dl->ds->vt->get(dl->ds, idx, dl->epoch, cur, y);
    em_shape shape = dl->ds->x_shape;
    for (int k = 0; st == EM_OK && k < nt; k++) {
        char *dst = k == nt - 1 ? x : cur == w->scratch ? second : w->scratch;
        em_transform_call call = {.seed = dl->o.seed, .epoch = dl->epoch, .index = idx,
                                  .stage = k, .dtype = dl->ds->x_dtype};
        st = em_transform_apply(&dl->tfs[k], &call, shape, cur, dst);
        em_transform_out_shape(&dl->tfs[k], shape, &shape);
        cur = dst;
    }
    return st;
}

/* Assemble batch b of the current epoch into s; samples the dataset skips are left out. */
static em_status fill_batch(em_loader *dl, worker *w, int64_t b, slot *s)
{
    int64_t bs = dl->o.batch_size, first = b * bs;
    int64_t n = dl->n - first < bs ? dl->n - first : bs;
    s->rows = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t idx = dl->indices[first + k], r = s->rows;
        char *x = (char *)s->x + (size_t)(r * dl->x_numel) * dl->x_size;
        char *y = (char *)s->y + (size_t)(r * dl->y_numel) * dl->y_size;
        em_status st = load_sample(dl, w, idx, x, y);
        if (st == EM_SKIP)
            continue;
        if (st != EM_OK) {
            if (!em_has_error())
                em_set_error(st, "em_loader_next: the dataset failed on sample %lld",
                             (long long)idx);
            return st;
        }
        s->indices[s->rows++] = idx;
    }
    return EM_OK;
}

static bool claimable(const em_loader *dl)
{
    return dl->started && dl->next_claim < dl->n_batches &&
           dl->next_claim < dl->next_consume + dl->window &&
           dl->slots[dl->next_claim % dl->window].state == SLOT_EMPTY; /* not held by the feed */
}

/* Fills batch b into s; a "load batch" region of the loader phase while the profiler runs. */
static em_status fill_batch_profiled(em_loader *dl, worker *w, int64_t b, slot *s)
{
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_REGION, "load batch", NULL, false,
                                                    EM_PHASE_LOADER, NULL, 0);
    em_status st = fill_batch(dl, w, b, s);
    if (profiled)
        em_prof_end();
    return st;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    em_loader *dl = w->dl;
    char name[32];
    snprintf(name, sizeof name, "loader worker %d", (int)(w - dl->workers));
    em_prof_name_thread(name);
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        while (!dl->stop && !claimable(dl))
            pthread_cond_wait(&dl->work_cv, &dl->mu);
        if (dl->stop)
            break;
        int64_t b = dl->next_claim++;
        slot *s = &dl->slots[b % dl->window];
        s->state = SLOT_FILLING;
        s->batch = b;
        dl->in_flight++;
        pthread_mutex_unlock(&dl->mu);

        em_error_clear();
        s->status = fill_batch_profiled(dl, w, b, s);
        if (s->status != EM_OK)
            snprintf(s->msg, sizeof s->msg, "%s", em_error());
        em_error_clear();

        pthread_mutex_lock(&dl->mu);
        s->state = SLOT_READY;
        dl->in_flight--;
        pthread_cond_broadcast(&dl->ready_cv);
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

static void join_workers(em_loader *dl)
{
    pthread_mutex_lock(&dl->mu);
    dl->stop = true;
    pthread_cond_broadcast(&dl->work_cv);
    pthread_mutex_unlock(&dl->mu);
    for (int k = 0; k < dl->n_threads; k++)
        pthread_join(dl->threads[k], NULL);
    dl->n_threads = 0;
    dl->stop = false;
}

static em_status spawn_workers(em_loader *dl)
{
    for (int k = dl->n_threads; k < dl->o.num_workers; k++) {
        int rc = pthread_create(&dl->threads[k], NULL, worker_main, &dl->workers[k]);
        if (rc != 0) {
            join_workers(dl);
            return em_set_error(EM_ERR_MEMORY, "em_loader_next: cannot start worker thread: %s",
                                strerror(rc));
        }
        dl->n_threads = k + 1;
    }
    return EM_OK;
}

/* Wait (with mu held) until no worker is filling, then forget every prefetched batch. */
static void quiesce(em_loader *dl)
{
    dl->started = false;
    while (dl->in_flight > 0)
        pthread_cond_wait(&dl->ready_cv, &dl->mu);
    for (int k = 0; k < dl->window; k++)
        dl->slots[k].state = SLOT_EMPTY;
    dl->next_claim = dl->next_consume;
}

/* The epoch's indices from the sampler, checked against the dataset's length. */
static em_status epoch_indices(em_loader *dl)
{
    em_status st = dl->sampler->vt->indices(dl->sampler, dl->o.seed, dl->epoch, dl->indices);
    if (st != EM_OK)
        return st;
    int64_t len = dl->ds->vt->len(dl->ds);
    for (int64_t i = 0; i < dl->n; i++)
        if (dl->indices[i] < 0 || dl->indices[i] >= len)
            return em_set_error(EM_ERR_ARG, "em_loader_next: the sampler gave index %lld (entry "
                                "%lld of epoch %lld) for a dataset of %lld samples",
                                (long long)dl->indices[i], (long long)i, (long long)dl->epoch,
                                (long long)len);
    return EM_OK;
}

static em_status start_epoch(em_loader *dl)
{
    em_status st = epoch_indices(dl);
    if (st != EM_OK)
        return st;
    pthread_mutex_lock(&dl->mu);
    dl->started = true;
    dl->next_claim = dl->next_consume;
    pthread_cond_broadcast(&dl->work_cv);
    pthread_mutex_unlock(&dl->mu);
    return spawn_workers(dl);
}

/* Wait for batch b's slot to be ready; EM_ERR_TIMEOUT past the loader's timeout. */
static em_status wait_ready(em_loader *dl, int64_t b, slot *s)
{
    struct timespec deadline;
    if (dl->o.timeout_ms > 0) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += dl->o.timeout_ms / 1000;
        deadline.tv_nsec += (long)(dl->o.timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&dl->mu);
    while (!(s->state == SLOT_READY && s->batch == b)) {
        if (dl->o.timeout_ms <= 0) {
            pthread_cond_wait(&dl->ready_cv, &dl->mu);
        } else if (pthread_cond_timedwait(&dl->ready_cv, &dl->mu, &deadline) == ETIMEDOUT &&
                   !(s->state == SLOT_READY && s->batch == b)) {
            pthread_mutex_unlock(&dl->mu);
            return em_set_error(EM_ERR_TIMEOUT, "em_loader_next: batch %lld of epoch %lld not "
                                "ready after %d ms", (long long)b, (long long)dl->epoch,
                                dl->o.timeout_ms);
        }
    }
    pthread_mutex_unlock(&dl->mu);
    return EM_OK;
}

/* (rows, shape...) */
static em_shape batch_shape(int64_t rows, const em_shape *sample)
{
    em_shape s = {.ndim = sample->ndim + 1, .d = {rows}};
    memcpy(s.d + 1, sample->d, (size_t)sample->ndim * sizeof(int64_t));
    return s;
}

em_status em_collate_default(const em_collate_input *in, em_batch *out)
{
    if (!in || !out)
        return em_set_error(EM_ERR_ARG, "em_collate_default: NULL input or batch");
    em_tensor *x = em_from_data(batch_shape(in->rows, &in->x_shape), in->x_dtype, in->x);
    em_tensor *y = x ? em_from_data(batch_shape(in->rows, &in->y_shape), in->y_dtype, in->y)
                     : NULL;
    if (!y) {
        em_release(x);
        if (!em_has_error())
            em_set_error(EM_ERR_MEMORY, "em_collate_default: cannot make the batch tensors");
        return em_error_status();
    }
    out->x = x;
    out->y = y;
    return EM_OK;
}

/* The batch's tensors (in the caller's thread and scope) from slot s, through the collate. */
static em_status make_batch(em_loader *dl, const slot *s, em_batch *batch)
{
    em_collate_input in = {
        .rows = s->rows, .x = s->x, .x_shape = dl->x_shape, .x_dtype = dl->ds->x_dtype,
        .y = s->y, .y_shape = dl->ds->y_shape, .y_dtype = dl->ds->y_dtype,
        .indices = s->indices, .epoch = dl->epoch,
        .batch = s->batch,
    };
    em_status st = dl->o.collate ? dl->o.collate(dl->o.collate_ctx, &in, batch)
                                 : em_collate_default(&in, batch);
    if (st == EM_OK && (!batch->x || !batch->y))
        st = em_set_error(EM_ERR_ARG, "em_loader_next: the collate function returned EM_OK "
                          "without both batch tensors");
    if (st != EM_OK) {
        if (!em_has_error())
            em_set_error(st, "em_loader_next: the collate function failed on batch %lld",
                         (long long)s->batch);
        em_release(batch->x);
        em_release(batch->y);
        *batch = (em_batch){0};
        return st;
    }
    batch->epoch = dl->epoch;
    batch->index = s->batch;
    return EM_OK;
}

/* The host slot the feed's last copies read is free again once they are done. */
static void release_fed_slot(em_loader *dl)
{
    int k = dl->fed ? em_feed_release(&dl->feed) : -1;
    if (k < 0)
        return;
    pthread_mutex_lock(&dl->mu);
    dl->slots[k].state = SLOT_EMPTY;
    pthread_cond_signal(&dl->work_cv); /* one slot, one batch to claim */
    pthread_mutex_unlock(&dl->mu);
}

/* Batch s on the loader's device: through the feed, or collated on the host and copied. */
static em_status device_batch(em_loader *dl, slot *s, em_batch *batch)
{
    if (dl->fed && !dl->o.collate) {
        em_feed_rows rows = {.x = s->x, .y = s->y, .rows = s->rows,
                             .batch_size = dl->o.batch_size, .x_shape = dl->x_shape,
                             .y_shape = dl->ds->y_shape, .x_dtype = dl->ds->x_dtype,
                             .y_dtype = dl->ds->y_dtype};
        em_status st = em_feed_batch(&dl->feed, &rows, (int)(s - dl->slots), batch);
        batch->epoch = dl->epoch;
        batch->index = s->batch;
        return st;
    }
    em_status st = make_batch(dl, s, batch);
    if (st != EM_OK)
        return st;
    em_tensor *x = em_to_device(batch->x, dl->o.device), *y = em_to_device(batch->y, dl->o.device);
    em_release(batch->x);
    em_release(batch->y);
    batch->x = x;
    batch->y = y;
    return x && y ? EM_OK : em_error_status();
}

/* Without workers, a collate, or a device: batch b filled straight into the batch tensors
 * (no slot, no copy), cut to the rows the dataset gave. */
static bool fills_directly(const em_loader *dl)
{
    return dl->o.num_workers == 0 && !dl->o.collate && !dl->fed && dl->o.device == EM_CPU;
}

static em_status fill_direct(em_loader *dl, int64_t b, slot *s, em_batch *batch)
{
    int64_t first = b * dl->o.batch_size;
    int64_t n = dl->n - first < dl->o.batch_size ? dl->n - first : dl->o.batch_size;
    em_tensor *x = em_empty(batch_shape(n, &dl->x_shape), dl->ds->x_dtype); // (n, sample..)
    em_tensor *y = em_empty(batch_shape(n, &dl->ds->y_shape), dl->ds->y_dtype); // (n, target..)
    if (!x || !y) {
        em_release(x);
        em_release(y);
        return em_error_status();
    }
    slot direct = *s;
    direct.x = em_data_ptr(x);
    direct.y = em_data_ptr(y);
    em_status st = fill_batch_profiled(dl, &dl->workers[0], b, &direct);
    s->rows = direct.rows;
    if (st == EM_OK && s->rows && s->rows < n) {
        em_tensor *xs = em_narrow(x, 0, 0, s->rows), *ys = em_narrow(y, 0, 0, s->rows);
        em_release(x);
        em_release(y);
        x = xs;
        y = ys;
        st = x && y ? EM_OK : em_error_status();
    }
    if (st != EM_OK || !s->rows) {
        em_release(x);
        em_release(y);
        return st;
    }
    *batch = (em_batch){.x = x, .y = y, .epoch = dl->epoch, .index = b};
    return EM_OK;
}

/* The next batch of the epoch; *rows is 0 when the dataset skipped all its samples (then batch
 * is left empty). */
static em_status next_batch(em_loader *dl, em_batch *batch, int64_t *rows)
{
    *batch = (em_batch){0};
    *rows = 0;
    release_fed_slot(dl);
    if (!dl->started) {
        em_status st = start_epoch(dl);
        if (st != EM_OK)
            return st;
    }
    if (dl->next_consume >= dl->n_batches) {
        pthread_mutex_lock(&dl->mu);
        quiesce(dl);
        dl->epoch++;
        dl->next_consume = dl->next_claim = 0;
        pthread_mutex_unlock(&dl->mu);
        if (!dl->o.persistent_workers)
            join_workers(dl);
        return EM_END;
    }
    int64_t b = dl->next_consume;
    slot *s = &dl->slots[b % dl->window];
    em_status st;
    bool direct = fills_directly(dl);
    if (dl->o.num_workers == 0) {
        s->batch = b;
        st = direct ? fill_direct(dl, b, s, batch)
                    : fill_batch_profiled(dl, &dl->workers[0], b, s);
    } else {
        st = wait_ready(dl, b, s);
        if (st != EM_OK)
            return st;
        st = s->status;
        if (st != EM_OK)
            em_set_error(st, "%s", s->msg);
    }
    *rows = s->rows;
    bool held = false;
    if (st == EM_OK && s->rows && (dl->o.device != EM_CPU || dl->fed)) {
        st = device_batch(dl, s, batch);
        held = dl->fed && dl->feed.held_slot >= 0; /* freed by the next call */
    } else if (st == EM_OK && s->rows && !direct) {
        st = make_batch(dl, s, batch);
    }
    pthread_mutex_lock(&dl->mu);
    if (!held)
        s->state = SLOT_EMPTY;
    dl->next_consume++;
    pthread_cond_signal(&dl->work_cv); /* at most one more batch to claim: wake one worker */
    pthread_mutex_unlock(&dl->mu);
    return st;
}

em_status em_loader_next(em_loader *dl, em_batch *batch)
{
    if (!dl || !batch)
        return em_set_error(EM_ERR_ARG, "em_loader_next: NULL loader or batch");
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_REGION, "loader.next", NULL, false,
                                                    EM_PHASE_LOADER, NULL, 0);
    em_status st;
    int64_t rows;
    do /* a batch whose every sample was skipped is passed over */
        st = next_batch(dl, batch, &rows);
    while (st == EM_OK && rows == 0);
    if (profiled)
        em_prof_end();
    return st;
}

int64_t em_loader_num_batches(const em_loader *dl)
{
    return dl ? dl->n_batches : 0;
}

const em_transform *em_loader_transforms(const em_loader *dl, int *n)
{
    *n = dl ? dl->o.n_transforms : 0;
    return dl ? dl->tfs : NULL;
}

em_loader_pos em_loader_position(const em_loader *dl)
{
    return dl ? (em_loader_pos){dl->epoch, dl->next_consume} : (em_loader_pos){0, 0};
}

em_status em_loader_set_position(em_loader *dl, em_loader_pos pos)
{
    if (!dl)
        return em_set_error(EM_ERR_ARG, "em_loader_set_position: loader is NULL");
    if (pos.epoch < 0 || pos.batch < 0 || pos.batch > dl->n_batches)
        return em_set_error(EM_ERR_ARG, "em_loader_set_position: epoch %lld, batch %lld: batch "
                            "must be in [0, %lld]", (long long)pos.epoch, (long long)pos.batch,
                            (long long)dl->n_batches);
    release_fed_slot(dl);
    pthread_mutex_lock(&dl->mu);
    quiesce(dl);
    dl->epoch = pos.epoch;
    dl->next_consume = dl->next_claim = pos.batch;
    pthread_mutex_unlock(&dl->mu);
    return EM_OK;
}

void em_loader_free(em_loader *dl)
{
    if (!dl)
        return;
    join_workers(dl);
    if (dl->fed)
        em_feed_free(&dl->feed);
    em_device host = dl->fed ? dl->o.device : EM_CPU; /* whose page-locked memory the slots use */
    for (int k = 0; dl->slots && k < dl->window; k++) {
        em_host_free(host, dl->slots[k].x);
        em_host_free(host, dl->slots[k].y);
        free(dl->slots[k].indices);
    }
    int nw = dl->o.num_workers > 0 ? dl->o.num_workers : 1;
    for (int k = 0; dl->workers && k < nw; k++)
        free(dl->workers[k].scratch);
    pthread_mutex_destroy(&dl->mu);
    pthread_cond_destroy(&dl->work_cv);
    pthread_cond_destroy(&dl->ready_cv);
    free(dl->slots);
    free(dl->workers);
    free(dl->threads);
    free(dl->indices);
    em_sampler_free(dl->own_sampler);
    free(dl->tfs);
    free(dl);
}

/* The sample shape after the transforms, and the largest sample along the way. */
static em_status chain_shapes(em_loader *dl)
{
    em_shape s = dl->ds->x_shape;
    char b[128];
    if ((dl->max_numel = em_shape_numel(&s)) < 0)
        return em_set_error(EM_ERR_ARG, "em_loader_new: the dataset's sample shape %s overflows "
                            "a size", em_shape_fmt(&s, b, sizeof b));
    for (int k = 0; k < dl->o.n_transforms; k++) {
        if (dl->tfs[k].kind != EM_TRANSFORM_CUSTOM && dl->ds->x_dtype != EM_F32)
            return em_set_error(EM_ERR_ARG, "em_loader_new: transform %d needs f32 samples; the "
                                "dataset's are %s", k, em_dtype_name(dl->ds->x_dtype));
        em_status st = em_transform_out_shape(&dl->tfs[k], s, &s);
        if (st != EM_OK)
            return st;
        if (em_shape_numel(&s) < 0)
            return em_set_error(EM_ERR_ARG, "em_loader_new: transform %d gives sample shape %s, "
                                "which overflows a size", k, em_shape_fmt(&s, b, sizeof b));
        if (em_shape_numel(&s) > dl->max_numel)
            dl->max_numel = em_shape_numel(&s);
    }
    dl->x_shape = s;
    dl->x_numel = em_shape_numel(&s);
    return EM_OK;
}

/* The byte counts of a slot's x and y and of a worker's scratch; every row offset into them is
 * smaller, so the loader's other size arithmetic cannot overflow. */
static em_status loader_sizes(em_loader *dl)
{
    int64_t bs = dl->o.batch_size, x_row, y_row, window, index_bytes;
    if (dl->y_numel < 0 || !em_size_mul(dl->x_numel, (int64_t)dl->x_size, &x_row)
        || !em_size_mul(dl->y_numel, (int64_t)dl->y_size, &y_row)
        || !em_size_mul(bs, x_row, &dl->slot_x_bytes) || !em_size_mul(bs, y_row, &dl->slot_y_bytes)
        || !em_size_mul(2 * dl->max_numel, (int64_t)dl->x_size, &dl->scratch_bytes)
        || !em_size_mul(dl->o.num_workers, dl->o.prefetch_factor, &window)
        || !em_size_mul(bs, (int64_t)sizeof(int64_t), &index_bytes)
        || window > INT32_MAX || dl->n > INT64_MAX / 8)
        return em_set_error(EM_ERR_ARG, "em_loader_new: batch_size %lld of %lld + %lld elements "
                            "(num_workers %d, prefetch_factor %d, %lld samples) overflows a size",
                            (long long)bs, (long long)dl->x_numel, (long long)dl->y_numel,
                            dl->o.num_workers, dl->o.prefetch_factor, (long long)dl->n);
    dl->window = window ? (int)window : 1;
    return EM_OK;
}

static bool alloc_buffers(em_loader *dl)
{
    int nw = dl->o.num_workers > 0 ? dl->o.num_workers : 1;
    dl->slots = calloc((size_t)dl->window, sizeof *dl->slots);
    dl->workers = calloc((size_t)nw, sizeof *dl->workers);
    dl->threads = calloc((size_t)nw, sizeof *dl->threads);
    if (!dl->slots || !dl->workers || !dl->threads)
        return false;
    em_device host = dl->fed ? dl->o.device : EM_CPU; /* page-locked for the feed */
    for (int k = 0; k < dl->window; k++) {
        dl->slots[k].x = em_host_alloc(host, (size_t)dl->slot_x_bytes + 1);
        dl->slots[k].y = em_host_alloc(host, (size_t)dl->slot_y_bytes + 1);
        dl->slots[k].indices = malloc((size_t)dl->o.batch_size * sizeof(int64_t));
        if (!dl->slots[k].x || !dl->slots[k].y || !dl->slots[k].indices)
            return false;
    }
    for (int k = 0; k < nw; k++) {
        dl->workers[k].dl = dl;
        if (dl->o.n_transforms &&
            !(dl->workers[k].scratch = malloc((size_t)dl->scratch_bytes)))
            return false;
    }
    return (dl->indices = malloc((size_t)dl->n * sizeof *dl->indices + 1)) != NULL;
}

em_loader *em_loader_new(const em_dataset *ds, em_loader_opts opts)
{
    if (!ds) {
        em_set_error(EM_ERR_ARG, "em_loader_new: dataset is NULL");
        return NULL;
    }
    if (opts.batch_size < 0 || opts.num_workers < 0 || opts.prefetch_factor < 0 ||
        opts.timeout_ms < 0 || opts.n_transforms < 0 || (opts.n_transforms && !opts.transforms)) {
        em_set_error(EM_ERR_ARG, "em_loader_new: negative option or missing transforms "
                     "(batch_size %lld, num_workers %d, prefetch_factor %d, timeout_ms %d, "
                     "n_transforms %d)", (long long)opts.batch_size, opts.num_workers,
                     opts.prefetch_factor, opts.timeout_ms, opts.n_transforms);
        return NULL;
    }
    if (ds->y_dtype != EM_I64 && ds->y_dtype != EM_F32) {
        em_set_error(EM_ERR_ARG, "em_loader_new: dataset targets are %s; i64 or f32 expected",
                     em_dtype_name(ds->y_dtype));
        return NULL;
    }
    if (!em_dtype_valid(ds->x_dtype)) {
        em_set_error(EM_ERR_ARG, "em_loader_new: dataset features have invalid dtype %d",
                     (int)ds->x_dtype);
        return NULL;
    }
    if (opts.sampler && opts.shuffle) {
        em_set_error(EM_ERR_ARG, "em_loader_new: a sampler and shuffle exclude each other (use "
                     "em_random_sampler for a shuffled order)");
        return NULL;
    }
    if (!em_device_available(opts.device)) {
        em_set_error(EM_ERR_UNSUPPORTED, "em_loader_new: device %s is not available",
                     em_device_name(opts.device));
        return NULL;
    }
    em_loader *dl = calloc(1, sizeof *dl);
    if (!dl) {
        em_set_error(EM_ERR_MEMORY, "em_loader_new: out of memory");
        return NULL;
    }
    dl->ds = ds;
    dl->o = opts;
    dl->fed = opts.pin_memory; /* on the CPU too: plain memory, copies that complete at once */
    em_feed_init(&dl->feed, opts.device);
    dl->o.batch_size = opts.batch_size ? opts.batch_size : 1;
    dl->o.prefetch_factor = opts.prefetch_factor ? opts.prefetch_factor : 2;
    dl->o.transforms = NULL;
    dl->y_numel = em_shape_numel(&ds->y_shape);
    dl->x_size = em_dtype_size(ds->x_dtype);
    dl->y_size = em_dtype_size(ds->y_dtype);
    dl->sampler = opts.sampler;
    if (!dl->sampler) {
        int64_t len = ds->vt->len(ds);
        dl->sampler = dl->own_sampler = opts.shuffle
                                            ? em_random_sampler(len, (em_random_sampler_opts){0})
                                            : em_sequential_sampler(len);
        if (!dl->own_sampler) {
            free(dl);
            return NULL;
        }
    }
    dl->n = dl->sampler->vt->len(dl->sampler);
    dl->n_batches = dl->n / dl->o.batch_size + (!opts.drop_last && dl->n % dl->o.batch_size);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&dl->mu, NULL);
    pthread_cond_init(&dl->work_cv, NULL);
    pthread_cond_init(&dl->ready_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (opts.n_transforms) {
        dl->tfs = malloc((size_t)opts.n_transforms * sizeof *dl->tfs);
        if (dl->tfs)
            memcpy(dl->tfs, opts.transforms, (size_t)opts.n_transforms * sizeof *dl->tfs);
    }
    em_status st = (opts.n_transforms && !dl->tfs) ? EM_ERR_MEMORY : chain_shapes(dl);
    if (st == EM_OK)
        st = loader_sizes(dl);
    if (st == EM_OK && !alloc_buffers(dl))
        st = EM_ERR_MEMORY;
    if (st != EM_OK) {
        if (st == EM_ERR_MEMORY)
            em_set_error(EM_ERR_MEMORY, "em_loader_new: out of memory for %d slots of %lld "
                         "samples", dl->window, (long long)dl->o.batch_size);
        em_loader_free(dl);
        return NULL;
    }
    return dl;
}
