/* The program test_dist runs under `mpirun -np 2` (and alone, for the one-process reference):
 *   dist_worker collectives            every collective on every dtype, checked on each rank
 *   dist_worker nccl                   the collectives on CUDA tensors (a skip line without GPU)
 *   dist_worker train [options]        a few training steps of a small CNN on synthetic data,
 *                                      with DDP when started by mpirun; rank 0 writes the model
 * It prints "rank R: ..." lines that test_dist reads, and exits 1 on any failure. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

#define N_SAMPLES 256
#define SIDE 8
#define CLASSES 10
#define SEED 5 /* the sampler's */

typedef struct {
    int steps;
    int64_t batch;       /* per rank (the whole batch without mpirun) */
    int accum;           /* micro-batches per step (no_sync on all but the last) */
    bool amp, dropout;
    int syncbn;          /* BatchNorm2d made SyncBatchNorm: 1, momentum 0.1; 2, cumulative */
    double clip, lr, timeout;
    size_t bucket_bytes;
    const char *out, *save, *resume;
    int save_at;         /* write --save after this many steps */
    int fail_at, hang_at, stop_at, kill_at; /* rank 1 misbehaves at this step (from 1) */
    int inf_at;          /* rank 1's inputs are scaled by 1e30 at this step: f16 overflows */
    bool mismatch;       /* rank 1 builds a wider model */
} opts;

static int rank = 0, world = 1;
static bool distributed;

static int fail(const char *what)
{
    printf("rank %d: FAIL %s: %s\n", rank, what, em_error());
    fflush(stdout);
    if (distributed) {
        em_dist_fail(em_error());
        em_dist_finalize();
    }
    return 1;
}

static em_module *build_model(const opts *o)
{
    int64_t hidden = o->mismatch && rank == 1 ? 24 : 16;
    em_batch_norm_opts bn = {.momentum = o->syncbn == 2 ? EM_BN_CUMULATIVE_AVERAGE : 0};
    em_module *m = em_sequential(4, em_conv2d_layer(1, 4, 3, (em_conv2d_layer_opts){.padding = 1}),
                                 o->syncbn ? em_batch_norm2d_layer(4, bn) : em_relu_layer(),
                                 em_max_pool2d_layer(2, (em_pool2d_layer_opts){0}),
                                 em_flatten_layer());
    m = em_sequential_append(m, em_relu_layer());
    m = em_sequential_append(m, em_linear_layer(4 * (SIDE / 2) * (SIDE / 2), hidden, true));
    m = em_sequential_append(m, em_relu_layer());
    if (o->dropout)
        m = em_sequential_append(m, em_dropout_layer(0.25));
    return em_sequential_append(m, em_linear_layer(hidden, CLASSES, true));
}

/* Synthetic images and labels the model can learn (the label is the brightest row): a dataset
 * of N_SAMPLES (1, SIDE, SIDE) images. */
static em_dataset *make_data(void)
{
    em_generator g = em_generator_new(1234);
    em_tensor *x = em_randn(EM_SHAPE(N_SAMPLES, 1, SIDE, SIDE), EM_F32, &g);
    em_tensor *y = em_empty(EM_SHAPE(N_SAMPLES), EM_I64);
    const float *px = em_data_ptr(x);
    int64_t *py = em_data_ptr(y);
    for (int i = 0; i < N_SAMPLES; i++) {
        float best = -INFINITY;
        for (int r = 0; r < SIDE; r++) {
            float s = 0;
            for (int c = 0; c < SIDE; c++)
                s += px[(i * SIDE + r) * SIDE + c];
            if (s > best) {
                best = s;
                py[i] = r % CLASSES;
            }
        }
    }
    em_dataset *ds = em_tensor_dataset(x, y);
    em_release(x);
    em_release(y);
    return ds;
}

/* Rank 1 misbehaves at its step-th step as asked: a hang, a stop, a death, or an error (a batch
 * of the wrong shape); false with the error set for the last. */
static bool misbehave(const opts *o, int step, em_module *m)
{
    if (rank != 1)
        return true;
    if (step == o->hang_at)
        sleep(600);
    if (step == o->stop_at)
        raise(SIGSTOP);
    if (step == o->kill_at)
        raise(SIGKILL);
    if (step != o->fail_at)
        return true;
    em_scope_begin();
    bool ok = em_forward(m, em_zeros(EM_SHAPE(2, 3), EM_F32)) != NULL;
    em_scope_end();
    return ok;
}

/* Whether every rank holds the same bytes as rank 0 in every parameter and buffer. */
static bool ranks_identical(em_module *m)
{
    int n = em_module_state(m, NULL, 0);
    em_st_entry *e = calloc((size_t)n, sizeof *e);
    em_module_state(m, e, n);
    bool same = true;
    for (int i = 0; i < n; i++) {
        em_tensor *c = em_clone(e[i].tensor);
        em_dist_broadcast(c, 0);
        size_t bytes = (size_t)em_numel(c) * em_dtype_size(c->dtype);
        bool mine = !memcmp(em_data_ptr(c), em_data_ptr(e[i].tensor), bytes), all;
        em_dist_any(!mine, &all);
        same &= !all;
        em_release(c);
    }
    free(e);
    return same;
}

/* Everything a training run holds. */
typedef struct {
    em_dataset *data;
    em_module *model;
    em_ddp *ddp;
    em_optim *optim;
    em_sampler *sampler;
    em_loader *loader;
    em_trainer *trainer;
} run;

static void run_free(run *r)
{
    em_trainer_free(r->trainer);
    em_loader_free(r->loader);
    em_sampler_free(r->sampler);
    em_optim_free(r->optim);
    em_ddp_free(r->ddp);
    em_module_free(r->model);
    em_dataset_free(r->data);
}

/* The model (rank 0's weights on every rank), its shard of the shuffled data and a trainer with
 * DDP attached, as ember train --ddp sets them up; false with the error set. */
static bool start(const opts *o, run *r)
{
    r->data = make_data();
    em_manual_seed(7);
    r->model = build_model(o);
    if (o->syncbn && distributed)
        em_sync_batch_norm_convert(r->model);
    if (distributed && !(r->ddp = em_ddp_new(r->model, (em_ddp_opts){.bucket_bytes =
                                                                          o->bucket_bytes})))
        return false;
    em_manual_seed(100 + (uint64_t)rank); /* dropout masks differ per rank */
    r->optim = em_sgd(r->model, (em_sgd_opts){.lr = o->lr, .momentum = 0.9});
    r->sampler = em_distributed_sampler(em_random_sampler(N_SAMPLES, (em_random_sampler_opts){0}),
                                        (em_distributed_sampler_opts){0});
    r->loader = r->sampler ? em_loader_new(r->data, (em_loader_opts){
                                 .batch_size = o->batch / o->accum, .sampler = r->sampler,
                                 .seed = SEED, .drop_last = true}) : NULL;
    em_trainer_opts to = {.tech = {.amp = o->amp ? EM_F16 : EM_F32, .grad_accum = o->accum,
                                   .clip = o->clip},
                          .save_checkpoint = em_dist_checkpoint_save,
                          .load_checkpoint = em_dist_checkpoint_load};
    r->trainer = r->optim && r->loader ? em_trainer_new(r->model, r->optim, r->loader, to)
                                       : NULL;
    return r->trainer && (!r->ddp || em_ddp_attach(r->ddp, r->trainer) == EM_OK) &&
           (!o->resume || em_trainer_resume(r->trainer, o->resume) == EM_OK);
}

/* Optimizer updates (taken or skipped) until o->steps, counting those before a resume, through
 * the loader's batches. */
static bool train_steps(const opts *o, run *r)
{
    em_loader_pos at = em_loader_position(r->loader);
    int64_t before = (at.epoch * em_loader_num_batches(r->loader) + at.batch) / o->accum;
    for (;;) {
        em_trainer_stats s = em_trainer_get_stats(r->trainer);
        int64_t done = before + s.updates + s.skipped;
        if (o->save && done == o->save_at && s.steps % o->accum == 0 &&
            em_trainer_save(r->trainer, o->save) != EM_OK)
            return false;
        if (done >= o->steps)
            return true;
        if (s.steps % o->accum == 0 && !misbehave(o, (int)done + 1, r->model))
            return false;
        em_scope_begin();
        em_batch b;
        em_status st = em_loader_next(r->loader, &b);
        if (st == EM_OK && rank == 1 && done + 1 == o->inf_at)
            b.x = em_mul_scalar(b.x, 1e30);
        if (st == EM_OK)
            st = em_trainer_step(r->trainer, b.x, b.y, NULL);
        em_scope_end();
        if (st != EM_OK && st != EM_END)
            return false;
    }
}

static int train(const opts *o)
{
    run r = {0};
    if (!start(o, &r) || !train_steps(o, &r)) {
        int rc = fail("train");
        run_free(&r);
        return rc;
    }
    em_trainer_stats t = em_trainer_get_stats(r.trainer);
    em_ddp_stats s = em_ddp_get_stats(r.ddp);
    printf("rank %d: trained steps %lld skipped %lld scale %g buckets %d allreduces %lld syncs "
           "%lld comm_s %.6f overlapped_s %.6f\n", rank, (long long)(t.updates + t.skipped),
           (long long)t.skipped, t.scale, s.n_buckets, (long long)s.allreduces,
           (long long)s.syncs, s.comm_s, s.overlapped_s);
    if (distributed)
        printf("rank %d: ranks identical %s\n", rank, ranks_identical(r.model) ? "yes" : "no");
    int rc = 0;
    if (o->out && rank == 0 && em_module_save(r.model, o->out, NULL, 0) != EM_OK)
        rc = fail("save");
    run_free(&r);
    return rc;
}

static bool parse(int argc, char **argv, opts *o)
{
    *o = (opts){.steps = 5, .batch = 64, .accum = 1, .lr = 0.05, .timeout = 30};
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--batch")) o->batch = atoll(v);
        else if (!strcmp(a, "--accum")) o->accum = atoi(v);
        else if (!strcmp(a, "--amp")) o->amp = atoi(v);
        else if (!strcmp(a, "--syncbn")) o->syncbn = atoi(v);
        else if (!strcmp(a, "--dropout")) o->dropout = atoi(v);
        else if (!strcmp(a, "--clip")) o->clip = atof(v);
        else if (!strcmp(a, "--lr")) o->lr = atof(v);
        else if (!strcmp(a, "--timeout")) o->timeout = atof(v);
        else if (!strcmp(a, "--bucket-bytes")) o->bucket_bytes = (size_t)atoll(v);
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--save-at")) o->save_at = atoi(v);
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--fail-at")) o->fail_at = atoi(v);
        else if (!strcmp(a, "--hang-at")) o->hang_at = atoi(v);
        else if (!strcmp(a, "--stop-at")) o->stop_at = atoi(v);
        else if (!strcmp(a, "--kill-at")) o->kill_at = atoi(v);
        else if (!strcmp(a, "--inf-at")) o->inf_at = atoi(v);
        else if (!strcmp(a, "--mismatch")) o->mismatch = atoi(v);
        else {
            fprintf(stderr, "dist_worker: unknown option %s\n", a);
            return false;
        }
    }
    return true;
}

int collectives_check(int rank_, int world_);
int nccl_check(int rank_, int world_);

int main(int argc, char **argv)
{
    opts o;
    if (argc < 2 || !parse(argc, argv, &o))
        return 2;
    distributed = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    if (distributed && em_dist_init((em_dist_opts){.timeout_s = o.timeout}) != EM_OK) {
        printf("rank ?: FAIL em_dist_init: %s\n", em_error());
        return 1;
    }
    rank = em_dist_rank();
    world = em_dist_world_size();
    int rc;
    if (!strcmp(argv[1], "collectives"))
        rc = collectives_check(rank, world);
    else if (!strcmp(argv[1], "nccl"))
        rc = nccl_check(rank, world);
    else
        rc = train(&o);
    if (rc == 0 && distributed && em_dist_finalize() != EM_OK)
        return fail("finalize");
    if (rc == 0)
        printf("rank %d: done\n", rank);
    return rc;
}
