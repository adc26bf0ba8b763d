/* Data-parallel training across processes: a process group over MPI (CPU tensors) and NCCL
 * (CUDA tensors), DistributedDataParallel with bucketed gradient allreduce that overlaps
 * backward, SyncBatchNorm, a distributed sampler and checkpoints of a distributed run.
 * Launch with `mpirun -np N program`; a program started without mpirun is a world of one. */
#ifndef EMBER_DIST_H
#define EMBER_DIST_H

#include "ember/train/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the process group (one per process, over MPI_COMM_WORLD) ----
 * Every collective runs on one communication thread, in the order the calls were made, so every
 * rank must make the same collective calls in the same order (as with MPI). A collective that
 * has not completed within the timeout fails with EM_ERR_TIMEOUT, naming the ranks that did not
 * reach it ("rank 1 did not answer (dead, stopped or stuck)", "rank 1 has not reached it (busy
 * outside collectives after collective #4)"); a rank
 * that calls em_dist_fail makes every collective of the others fail with EM_ERR_PEER naming it
 * and its message. After either, the group is broken: a collective still completes if every
 * rank did its part (within a quarter second), any other fails with the same message, and the
 * process should end with em_dist_finalize. */
typedef struct {
    double timeout_s; /* how long a collective may take; 0: 300 */
} em_dist_opts;

/* EM_ERR_STATE when called twice in a process. A program that initialized MPI itself (with
 * MPI_THREAD_MULTIPLE) keeps it: ember uses MPI_COMM_WORLD and leaves MPI_Finalize to it. */
em_status em_dist_init(em_dist_opts o);
/* Ends the group (MPI_Finalize). After a failure it first waits, at most a few seconds, for the
 * other live ranks to reach their own finalize, so each can report its error before mpirun
 * tears the job down. A process cannot initialize again afterwards. */
em_status em_dist_finalize(void);
bool em_dist_initialized(void);
int em_dist_rank(void);       /* 0 without a group */
int em_dist_world_size(void); /* 1 without a group */
/* Tells every other rank that this one failed with msg (e.g. em_error()); their collectives
 * then fail with "rank R failed: msg". Breaks the group. Does nothing without a group. */
void em_dist_fail(const char *msg);

typedef enum { EM_DIST_SUM = 0, EM_DIST_AVG, EM_DIST_MAX, EM_DIST_MIN } em_dist_op;

/* Collectives on tensors of f32, f64, f16, bf16, i32, i64, i8 or u8, in place, on the CPU (MPI)
 * or CUDA (NCCL, bootstrapped over MPI); any layout. Every rank passes the same shape and dtype.
 * f16 and bf16 are added in f32 and rounded once per addition; AVG divides the sum by the world
 * size (floating point only). */
em_status em_dist_allreduce(em_tensor *t, em_dist_op op);
em_status em_dist_broadcast(em_tensor *t, int root);
em_status em_dist_barrier(void);
/* out (world, *t's shape) gets every rank's t, rank r at out[r]; same dtype and device. */
em_status em_dist_allgather(const em_tensor *t, em_tensor *out);

/* *any = whether flag is true on any rank (a decision every rank must take alike: skip this
 * step). Without a group, *any = flag. */
em_status em_dist_any(bool flag, bool *any);

/* A new tensor: the sum of x over all ranks, differentiable (its backward sums the gradient
 * over ranks: each rank's loss depends on every rank's x). A copy of x when there is no group. */
em_tensor *em_dist_sum_over_ranks(const em_tensor *x);

/* ---- DistributedDataParallel ----
 * em_ddp_new broadcasts rank 0's parameters and buffers to every rank (after checking that
 * every rank has the same names, shapes and dtypes: a difference fails on every rank, naming
 * the first differing parameter and the ranks) and registers gradient-ready hooks: the
 * parameters are split, in reverse order (the order backward produces their gradients), into
 * buckets of at most bucket_bytes (a larger parameter gets a bucket of its own), and each bucket
 * is averaged across ranks with one allreduce as soon as backward has produced all of its
 * gradients, while backward goes on. When the outermost backward returns, every bucket has been
 * reduced and each parameter's grad holds the average over ranks (a parameter no gradient
 * reached gets the average with zeros in its place); em_backward returns the reduction's error
 * if one failed (a peer that failed, a timeout). Buckets are launched in their order on every
 * rank. When backward or the reduction fails on a rank, that rank calls em_dist_fail. */
typedef struct em_ddp em_ddp;

typedef struct {
    size_t bucket_bytes; /* 0: 25 MB (PyTorch's bucket_cap_mb) */
} em_ddp_opts;

/* m must outlive the returned object; its parameters must stay in place (no optimizer that
 * replaces them). Runs collectives: call it on every rank. */
em_ddp *em_ddp_new(em_module *m, em_ddp_opts o);
void em_ddp_free(em_ddp *d); /* removes the hooks; NULL is fine */
/* false: backward passes only accumulate locally (gradient accumulation's micro-batches);
 * true (the default): the next backward averages the accumulated gradients. */
void em_ddp_set_sync(em_ddp *d, bool sync);
/* Averages the gradients now if backward passes ran without sync since they were last averaged
 * (an update after a partial accumulation, at an epoch's end); else does nothing. Collective
 * when it communicates: every rank calls it at the same point. */
em_status em_ddp_sync_grads(em_ddp *d);
/* Makes t train data-parallel with d: sync only on the micro-batch an update follows, gradients
 * averaged before an update that follows unsynchronised ones, and every skip decision (the
 * scaler's inf/NaN, the guard) agreed across ranks. Checkpoints are t's options
 * (em_dist_checkpoint_save and _load). d must outlive t. */
em_status em_ddp_attach(em_ddp *d, em_trainer *t);
typedef struct {
    int n_buckets;
    int64_t syncs;            /* synchronised backward passes */
    int64_t allreduces;       /* bucket allreduce calls, all passes */
    double comm_s;            /* seconds allreduces were running, all passes */
    double overlapped_s;      /* of which backward was still running */
    double wait_s;            /* seconds backward's end waited for the last buckets */
} em_ddp_stats;
em_ddp_stats em_ddp_get_stats(const em_ddp *d);

/* ---- SyncBatchNorm ----
 * Batch normalisation whose batch statistics (mean, then variance) are reduced over all ranks in
 * training mode, so N ranks of batch b normalise as one process of batch N*b; eval mode and a
 * run without a group behave as BatchNorm. Same parameters and buffers as BatchNorm. */
em_module *em_sync_batch_norm_layer(int64_t features, em_batch_norm_opts o);
/* Turns every BatchNorm1d/2d in m's tree into a SyncBatchNorm in place (names, parameters and
 * buffers stay); returns how many, or -1 with an error. Call before em_ddp_new. */
int em_sync_batch_norm_convert(em_module *m);

/* ---- the distributed sampler ----
 * Shards another sampler's epoch (em_random_sampler for a shuffled one: the same (seed, epoch)
 * permutation on every rank): its indices, padded by repeating their start (or cut, with
 * drop_last) to a multiple of the world size, are dealt out round-robin: rank r takes positions
 * r, r + N, r + 2N, ... (PyTorch's DistributedSampler). So batch k of the N ranks' batch-b
 * loaders together holds exactly batch k of one process's batch-N*b loader over inner. */
typedef struct {
    int rank, world;  /* both 0: this process's rank and the group's size */
    bool drop_last;
} em_distributed_sampler_opts;
/* Takes inner (freed with the result, or at once on failure); NULL inner passes through. */
em_sampler *em_distributed_sampler(em_sampler *inner, em_distributed_sampler_opts o);

/* ---- checkpoints of a distributed run ----
 * Rank 0 writes the model, optimizer, scheduler and scaler (identical on every rank) with every
 * rank's generator and loader position gathered into the file's metadata (dist.world_size,
 * dist.rank.<r>.rng_seed, _rng_offset, _loader_epoch, _loader_batch, _loader_batches); every rank
 * returns rank 0's status. Loading reads the file on every rank and restores that rank's own
 * generator and position: bit for bit on the world size that wrote it. On another world size
 * (after a rank died, on more or fewer machines) the run continues at the same point of the
 * epoch, the loader's batch scaled by the ratio of batches per epoch and rounded down (at most
 * one batch of samples is seen twice), each rank with its own generator where the saved run had
 * that rank, else with its own seed at rank 0's offset; with the same global batch (N ranks x b
 * as M x N b / M) it ends where the saved world would have, to float rounding. A file without
 * _loader_batches (ember before it) resumes on its own world size only. Collective: call on
 * every rank (a process without a group is a world of one). The signatures are
 * em_trainer_opts' save_checkpoint and load_checkpoint. */
em_status em_dist_checkpoint_save(const char *path, const em_train_state *s,
                                  const em_st_meta *meta, int n_meta);
em_status em_dist_checkpoint_load(const char *path, em_train_state *s);

#ifdef __cplusplus
}
#endif

#endif
