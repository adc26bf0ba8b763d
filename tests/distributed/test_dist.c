/* Data-parallel training: the distributed sampler here, then dist_worker under
 * `mpirun -np 2 --oversubscribe`: the collectives; 2 ranks x batch 32 against 1 process x batch
 * 64 for 5 SGD-momentum steps (f32, autocast f16 with the grad scaler, no_sync accumulation,
 * clipping, SyncBatchNorm); checkpoint and resume; and ranks that fail, hang, stop or die. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"

/* root may run mpirun; shared memory without cross-process single copies (which containers'
 * seccomp profiles often forbid); under the sanitizers, Open MPI's plugins stay loaded so that
 * what its libraries keep until exit is named and suppressed (tests/distributed/lsan_mpi.supp) */
#define MPI_ENV                                                                              \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "            \
    "OMPI_MCA_btl_vader_single_copy_mechanism=none "                                          \
    "OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS=fast_unwind_on_malloc=0 "     \
    "LSAN_OPTIONS=print_suppressions=0:suppressions=" EMBER_SOURCE_DIR                        \
    "/tests/distributed/lsan_mpi.supp "
#define MPI_EXPORTS "-x OMP_NUM_THREADS -x OMPI_MCA_mca_base_component_disable_dlclose " \
                    "-x ASAN_OPTIONS -x LSAN_OPTIONS"
#define OUT_MAX 65536

static char out[OUT_MAX];
static char dir[64];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs a shell command, its stdout and stderr into out; returns its exit status. */
static int run(const char *cmd, double *seconds)
{
    double t0 = now_s();
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    size_t n = fread(out, 1, OUT_MAX - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    if (seconds)
        *seconds = now_s() - t0;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* program with args, on np ranks; returns the exit status of mpirun. */
static int mpirun_program(int np, const char *program, const char *args, double *seconds)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MPI_ENV "%s -np %d --oversubscribe " MPI_EXPORTS " %s %s 2>&1",
             EMBER_MPIEXEC, np, program, args);
    return run(cmd, seconds);
}

static int mpirun2_program(const char *program, const char *args, double *seconds)
{
    return mpirun_program(2, program, args, seconds);
}

static int mpirun2(const char *args, double *seconds)
{
    return mpirun2_program(EMBER_DIST_WORKER, args, seconds);
}

/* dist_worker with args as one process (the reference); returns its exit status. */
static int alone(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s 2>&1", EMBER_DIST_WORKER, args);
    return run(cmd, NULL);
}

/* The ember program with args as one process; returns its exit status. */
static int run_cli(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MPI_ENV "%s %s 2>&1", EMBER_CLI, args);
    return run(cmd, NULL);
}

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/ember_test_dist_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* The largest difference between same-named tensors of two model files, and whether any
 * tensor differs from the initial model's in the first file at all (training happened). */
static double max_diff(const char *a_path, const char *b_path)
{
    em_safetensors *a = NULL, *b = NULL;
    cr_assert_eq(em_safetensors_load(a_path, &a), EM_OK, "%s", em_error());
    cr_assert_eq(em_safetensors_load(b_path, &b), EM_OK, "%s", em_error());
    cr_assert_eq(a->n_tensors, b->n_tensors);
    double worst = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        em_tensor *ta = a->tensors[i], *tb = em_safetensors_get(b, a->names[i]);
        cr_assert_not_null(tb, "%s missing", a->names[i]);
        int64_t n = em_numel(ta);
        double *va = malloc((size_t)n * sizeof *va), *vb = malloc((size_t)n * sizeof *vb);
        em_copy_to_host(ta, EM_F64, va);
        em_copy_to_host(tb, EM_F64, vb);
        for (int64_t k = 0; k < n; k++)
            worst = fmax(worst, fabs(va[k] - vb[k]));
        free(va);
        free(vb);
    }
    em_safetensors_free(a);
    em_safetensors_free(b);
    return worst;
}

static void expect_line(const char *line)
{
    cr_expect_not_null(strstr(out, line), "missing \"%s\" in:\n%s", line, out);
}

/* ---- the distributed sampler ---- */

/* Loaders of each of 4 ranks with batch 5 against one loader with batch 20 over the same
 * shuffled sampler: batch k of the ranks together is batch k of the one process. */
Test(dist_sampler, rank_batches_make_the_one_process_batches)
{
    enum { N = 103, WORLD = 4, B = 5 };
    em_scope_begin();
    em_tensor *x = em_reshape(em_arange(0, N, 1, EM_F32), EM_SHAPE(N, 1));
    em_tensor *y = em_zeros(EM_SHAPE(N), EM_I64);
    em_dataset *ds = em_tensor_dataset(x, y);
    em_scope_end();
    em_sampler *one = em_random_sampler(N, (em_random_sampler_opts){0}), *ranks[WORLD];
    em_loader *whole = em_loader_new(ds, (em_loader_opts){.batch_size = WORLD * B,
                                                          .sampler = one, .seed = 9});
    em_loader *part[WORLD];
    for (int r = 0; r < WORLD; r++) {
        ranks[r] = em_distributed_sampler(em_random_sampler(N, (em_random_sampler_opts){0}),
                                          (em_distributed_sampler_opts){.rank = r, .world = WORLD});
        cr_assert_eq(em_sampler_len(ranks[r]), 26); /* 103 padded to 104, dealt out */
        part[r] = em_loader_new(ds, (em_loader_opts){.batch_size = B, .sampler = ranks[r],
                                                     .seed = 9});
        cr_assert_not_null(part[r], "%s", em_error());
    }
    for (int epoch = 0; epoch < 2; epoch++)
        for (int k = 0; k < 5; k++) { /* every full one-process batch */
            em_batch wb, rb;
            cr_assert_eq(em_loader_next(whole, &wb), EM_OK, "%s", em_error());
            int seen[N] = {0};
            for (int r = 0; r < WORLD; r++) {
                cr_assert_eq(em_loader_next(part[r], &rb), EM_OK, "%s", em_error());
                for (int64_t i = 0; i < B; i++)
                    seen[(int)em_get(rb.x, (int64_t[]){i, 0})]++;
                em_release(rb.x);
                em_release(rb.y);
            }
            for (int64_t i = 0; i < WORLD * B; i++)
                cr_expect_eq(seen[(int)em_get(wb.x, (int64_t[]){i, 0})], 1, "epoch %d batch %d",
                             epoch, k);
            em_release(wb.x);
            em_release(wb.y);
            /* the ranks' last batch (6 of 26) and the one process's (3 of 103) are skipped */
            if (k == 4) {
                for (int r = 0; r < WORLD; r++) {
                    while (em_loader_next(part[r], &rb) == EM_OK) {
                        em_release(rb.x);
                        em_release(rb.y);
                    }
                }
                while (em_loader_next(whole, &wb) == EM_OK) {
                    em_release(wb.x);
                    em_release(wb.y);
                }
            }
        }
    for (int r = 0; r < WORLD; r++) {
        em_loader_free(part[r]);
        em_sampler_free(ranks[r]);
    }
    em_loader_free(whole);
    em_sampler_free(one);
    em_dataset_free(ds);
}

/* The padding repeats the epoch's start; drop_last cuts the tail; bad ranks are refused. */
Test(dist_sampler, padding_drop_last_and_bad_arguments)
{
    int64_t idx[3];
    em_sampler *s = em_distributed_sampler(em_sequential_sampler(10),
                                           (em_distributed_sampler_opts){.rank = 3, .world = 4});
    cr_assert_eq(em_sampler_len(s), 3);
    cr_assert_eq(em_sampler_indices(s, 0, 0, idx), EM_OK);
    cr_expect_eq(idx[0], 3);
    cr_expect_eq(idx[1], 7);
    cr_expect_eq(idx[2], 1); /* position 11 wraps to 1 */
    em_sampler_free(s);
    s = em_distributed_sampler(em_sequential_sampler(10), (em_distributed_sampler_opts){
                                   .rank = 3, .world = 4, .drop_last = true});
    cr_assert_eq(em_sampler_len(s), 2);
    em_sampler_free(s);
    cr_expect_null(em_distributed_sampler(em_sequential_sampler(10),
                                          (em_distributed_sampler_opts){.rank = 4, .world = 4}));
    cr_expect_not_null(strstr(em_error(), "rank (4) < world (4)"), "%s", em_error());
    em_error_clear();
}

Test(dist, no_group_is_a_clear_error)
{
    cr_expect_eq(em_dist_rank(), 0);
    cr_expect_eq(em_dist_world_size(), 1);
    em_tensor *t = em_zeros(EM_SHAPE(3), EM_F32);
    cr_expect_eq(em_dist_allreduce(t, EM_DIST_SUM), EM_ERR_STATE);
    cr_expect_not_null(strstr(em_error(), "em_dist_init first"), "%s", em_error());
    em_error_clear();
    em_module *m = em_linear_layer(2, 2, true);
    cr_expect_null(em_ddp_new(m, (em_ddp_opts){0}));
    em_error_clear();
    em_module_free(m);
    em_release(t);
}

/* ---- under mpirun ---- */

Test(dist, collectives, .timeout = 120)
{
    double s;
    cr_expect_eq(mpirun2("collectives", &s), 0, "%s", out);
    expect_line("rank 0: collectives ok");
    expect_line("rank 1: collectives ok");
}

/* mpirun -np n dist_worker nccl; skips the test without a GPU. */
static int mpirun_nccl(int n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MPI_ENV "%s -np %d --oversubscribe " MPI_EXPORTS " %s nccl 2>&1",
             EMBER_MPIEXEC, n, EMBER_DIST_WORKER);
    int rc = run(cmd, NULL);
    if (strstr(out, "CUDA test skipped"))
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    return rc;
}

/* World size 1 on one GPU: NCCL's collectives against the values worked out by hand. */
Test(dist, nccl_one_rank, .timeout = 120)
{
    cr_expect_eq(mpirun_nccl(1), 0, "%s", out);
    expect_line("rank 0: nccl ok on 1 ranks");
}

/* Two processes on one GPU: NCCL refuses a GPU shared by two ranks of a communicator; whichever
 * it does, the ranks finish in bounded time, and a refusal is reported as NCCL's error. */
Test(dist, nccl_two_ranks_on_one_gpu, .timeout = 120)
{
    int rc = mpirun_nccl(2);
    if (rc == 0)
        expect_line("rank 1: nccl ok on 2 ranks");
    else
        expect_line("NCCL");
    cr_log_info("2 ranks on one GPU: %s", out);
}

/* 2 ranks x batch 32 (small buckets: several allreduces per step) against 1 process x batch 64,
 * same data order; extra are the options both runs share. Returns the largest difference. */
static double equivalence(const char *extra, int64_t *allreduces_per_step)
{
    char ref[128], dist[128], args[512];
    snprintf(ref, sizeof ref, "%s/ref.safetensors", dir);
    snprintf(dist, sizeof dist, "%s/dist.safetensors", dir);
    snprintf(args, sizeof args, "train --batch 64 --steps 5 %s --out %s", extra, ref);
    cr_assert_eq(alone(args), 0, "%s", out);
    snprintf(args, sizeof args, "train --batch 32 --steps 5 --bucket-bytes 2048 %s --out %s",
             extra, dist);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    expect_line("rank 0: ranks identical yes");
    expect_line("rank 1: ranks identical yes");
    long long buckets = 0, allreduces = 0, syncs = 0;
    const char *line = strstr(out, "rank 0: trained");
    cr_assert_not_null(line, "%s", out);
    cr_assert_eq(sscanf(strstr(line, "buckets"), "buckets %lld allreduces %lld syncs %lld",
                        &buckets, &allreduces, &syncs), 3);
    cr_expect_eq(syncs, 5);
    *allreduces_per_step = allreduces / syncs;
    return max_diff(ref, dist);
}

/* The residual is not zero: the one process sums 64 per-sample gradient terms in one GEMM and
 * one mean, the ranks sum 32 each and average the two, so float rounding differs. */
Test(dist, equivalence_f32, .timeout = 300, .init = make_dir, .fini = remove_dir)
{
    int64_t per_step;
    double d = equivalence("", &per_step);
    cr_expect_leq(d, 1e-5, "largest parameter difference %g", d);
    cr_expect_geq(per_step, 3, "a 2 KB bucket cap must split the model into several buckets");
    expect_line("rank 0: trained steps 5 skipped 0");
}

/* Under f16 autocast each rank's weight and bias gradients are rounded to f16 after summing its
 * 32 rows, the one process's after summing 64 (as PyTorch's autocast does): the residual is up
 * to about one f16 ulp (2^-11 relative) of a gradient per step, times the learning rate and
 * momentum's gain. At the f32 tests' lr 0.05 it measured 1.1e-5 (the last bias); at lr 0.02,
 * 3.3e-6. Both runs skip the same steps (found-inf agreed across ranks). */
Test(dist, equivalence_autocast_scaler, .timeout = 300, .init = make_dir, .fini = remove_dir)
{
    int64_t per_step;
    double d = equivalence("--amp 1 --lr 0.02", &per_step);
    cr_expect_leq(d, 1e-5, "largest parameter difference %g", d);
}

/* Found-inf agreed: rank 1's inputs overflow f16 at step 3 while rank 0's do not; every rank
 * skips that step and halves its scale (2^16 to 2^15), and the ranks stay identical. */
Test(dist, found_inf_on_one_rank_skips_the_step_everywhere, .timeout = 120)
{
    cr_assert_eq(mpirun2("train --batch 32 --steps 5 --amp 1 --lr 0.02 --inf-at 3", NULL), 0,
                 "%s", out);
    expect_line("rank 0: trained steps 5 skipped 1 scale 32768 ");
    expect_line("rank 1: trained steps 5 skipped 1 scale 32768 ");
    expect_line("rank 0: ranks identical yes");
    expect_line("rank 1: ranks identical yes");
}

Test(dist, equivalence_no_sync_accumulation, .timeout = 300, .init = make_dir,
     .fini = remove_dir)
{
    char ref[128], dist[128], args[512];
    snprintf(ref, sizeof ref, "%s/ref.safetensors", dir);
    snprintf(dist, sizeof dist, "%s/dist.safetensors", dir);
    snprintf(args, sizeof args, "train --batch 64 --steps 5 --out %s", ref);
    cr_assert_eq(alone(args), 0, "%s", out);
    snprintf(args, sizeof args, "train --batch 32 --accum 2 --steps 5 --out %s", dist);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    /* 10 backward passes per rank, 5 of them synchronised, one 25 MB bucket each */
    expect_line("rank 0: trained steps 5 skipped 0 scale 1 buckets 1 allreduces 5 syncs 5");
    double d = max_diff(ref, dist);
    cr_expect_leq(d, 1e-5, "largest parameter difference %g", d);
}

/* Clipping sees the averaged gradients: the global norm, the same on every rank. */
Test(dist, equivalence_clipping, .timeout = 300, .init = make_dir, .fini = remove_dir)
{
    int64_t per_step;
    double d = equivalence("--clip 0.05", &per_step);
    cr_expect_leq(d, 1e-5, "largest parameter difference %g", d);
}

/* SyncBatchNorm on 2 x 32 normalises like BatchNorm on 64: parameters and running statistics. */
Test(dist, equivalence_sync_batch_norm, .timeout = 300, .init = make_dir, .fini = remove_dir)
{
    int64_t per_step;
    double d = equivalence("--syncbn 1", &per_step);
    cr_expect_leq(d, 1e-5, "largest parameter or buffer difference %g", d);
}

/* The same with the cumulative average (momentum=None) of every step's statistics. */
Test(dist, equivalence_sync_batch_norm_cumulative_average, .timeout = 300, .init = make_dir,
     .fini = remove_dir)
{
    int64_t per_step;
    double d = equivalence("--syncbn 2", &per_step);
    cr_expect_leq(d, 1e-5, "largest parameter or buffer difference %g", d);
}

/* 6 steps straight, against 3 steps, a checkpoint, and a new run resumed from it for 3 more:
 * bit for bit, with dropout drawing from each rank's own generator. */
Test(dist, checkpoint_resume_is_bit_exact, .timeout = 300, .init = make_dir, .fini = remove_dir)
{
    char straight[128], resumed[128], ckpt[128], args[512];
    snprintf(straight, sizeof straight, "%s/straight.safetensors", dir);
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
    snprintf(args, sizeof args, "train --batch 32 --steps 6 --dropout 1 --out %s", straight);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    snprintf(args, sizeof args, "train --batch 32 --steps 3 --dropout 1 --save %s --save-at 3",
             ckpt);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    snprintf(args, sizeof args, "train --batch 32 --steps 6 --dropout 1 --resume %s --out %s",
             ckpt, resumed);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    cr_expect_eq(max_diff(straight, resumed), 0.0);

    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load(ckpt, &f), EM_OK, "%s", em_error());
    cr_expect_str_eq(em_safetensors_meta(f, "dist.world_size"), "2");
    cr_expect_str_eq(em_safetensors_meta(f, "dist.rank.0.rng_seed"), "100");
    cr_expect_str_eq(em_safetensors_meta(f, "dist.rank.1.rng_seed"), "101");
    cr_expect_str_eq(em_safetensors_meta(f, "dist.rank.1.loader_batch"), "3");
    cr_expect_str_eq(em_safetensors_meta(f, "dist.rank.1.loader_batches"), "4");
    em_safetensors_free(f);
}

/* A checkpoint of 2 ranks x batch 32 resumes on 1 process x batch 64 and on 4 ranks x batch 16
 * at the same point of the epoch: each ends where 6 steps on 2 ranks end (to float rounding, as
 * equivalence_f32); on 3 ranks x batch 32 (another global batch) it continues too. */
Test(dist, resume_on_another_world_size_continues, .timeout = 300, .init = make_dir,
     .fini = remove_dir)
{
    char straight[128], ckpt[128], resumed[128], args[512];
    snprintf(straight, sizeof straight, "%s/straight.safetensors", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
    snprintf(args, sizeof args, "train --batch 32 --steps 6 --out %s", straight);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    snprintf(args, sizeof args, "train --batch 32 --steps 3 --save %s --save-at 3", ckpt);
    cr_assert_eq(mpirun2(args, NULL), 0, "%s", out);
    snprintf(resumed, sizeof resumed, "%s/one.safetensors", dir);
    snprintf(args, sizeof args, "train --batch 64 --steps 6 --resume %s --out %s", ckpt, resumed);
    cr_assert_eq(alone(args), 0, "%s", out);
    expect_line("rank 0: trained steps 3 skipped 0");
    double d = max_diff(straight, resumed);
    cr_expect_leq(d, 1e-5, "1 process: largest parameter difference %g", d);
    snprintf(resumed, sizeof resumed, "%s/four.safetensors", dir);
    snprintf(args, sizeof args, "train --batch 16 --steps 6 --resume %s --out %s", ckpt, resumed);
    cr_assert_eq(mpirun_program(4, EMBER_DIST_WORKER, args, NULL), 0, "%s", out);
    expect_line("rank 3: trained steps 3 skipped 0");
    d = max_diff(straight, resumed);
    cr_expect_leq(d, 1e-5, "4 ranks: largest parameter difference %g", d);
    snprintf(args, sizeof args, "train --batch 32 --steps 6 --resume %s", ckpt);
    cr_assert_eq(mpirun_program(3, EMBER_DIST_WORKER, args, NULL), 0, "%s", out);
    expect_line("rank 2: trained steps");
}

Test(dist, different_models_fail_at_start, .timeout = 120)
{
    cr_expect_neq(mpirun2("train --batch 32 --mismatch 1", NULL), 0);
    const char *why = "the ranks' models differ: rank 0 has 'parameter 5.weight f32 [16,64]', "
                      "rank 1 has 'parameter 5.weight f32 [24,64]'";
    char line[512];
    for (int r = 0; r < 2; r++) {
        snprintf(line, sizeof line, "rank %d: FAIL train: em_ddp_new: %s", r, why);
        expect_line(line);
    }
}

/* The command line: 2 ranks train the MLP recipe on Fashion-MNIST for 8 steps of 2 x 32, write
 * a checkpoint, and a second run resumes it for 8 more. */
Test(dist, ember_train_ddp, .timeout = 300, .init = make_dir, .fini = remove_dir)
{
    char args[512];
    snprintf(args, sizeof args, "train mlp --ddp --batch 32 --max-steps 8 --no-val --workers 0 "
             "--threads 1 --save %s/run.ckpt", dir);
    cr_assert_eq(mpirun2_program(EMBER_CLI, args, NULL), 0, "%s", out);
    expect_line("\"batch\":32,");
    expect_line("\"steps\":8,\"updates\":8,\"skipped_steps\":0,\"world_size\":2,");
    snprintf(args, sizeof args, "train mlp --ddp --batch 32 --max-steps 8 --no-val --workers 0 "
             "--threads 1 --resume %s/run.ckpt", dir);
    cr_assert_eq(mpirun2_program(EMBER_CLI, args, NULL), 0, "%s", out);
    expect_line("\"world_size\":2,");
}

/* dist_worker train with args on 2 ranks, where rank 1 misbehaves: the job must fail within
 * 30 s (the timeouts are 2 s) and its output hold both lines (the second may be NULL). */
static void misbehaving_rank(const char *args, const char *line, const char *line2)
{
    double s;
    cr_expect_neq(mpirun2(args, &s), 0, "%s", out);
    expect_line(line);
    if (line2)
        expect_line(line2);
    cr_expect_lt(s, 30, "took %.1f s", s);
}

/* A rank whose step fails tells the others, which stop at their next collective naming it. */
Test(dist, failing_rank_stops_the_others, .timeout = 120)
{
    misbehaving_rank("train --batch 32 --steps 5 --fail-at 3", "rank 1: FAIL train: em_conv2d",
                     "rank 0: FAIL train: em_ddp (bucket allreduce): rank 1 failed: em_conv2d");
}

/* A rank that hangs outside collectives: the others time out and name it. */
Test(dist, hanging_rank_is_named_after_the_timeout, .timeout = 120)
{
    misbehaving_rank("train --batch 32 --steps 5 --hang-at 3 --timeout 2",
                     "did not complete within 2 s: rank 1 has not reached it (busy outside "
                     "collectives", NULL);
}

/* A stopped rank answers nothing: named as dead or stopped. */
Test(dist, stopped_rank_is_named_after_the_timeout, .timeout = 120)
{
    misbehaving_rank("train --batch 32 --steps 5 --stop-at 3 --timeout 2",
                     "rank 1 did not answer (dead, stopped or stuck)", NULL);
}

/* A rank that dies: mpirun ends the job at once and names it. */
Test(dist, killed_rank_ends_the_job, .timeout = 120)
{
    misbehaving_rank("train --batch 32 --steps 5 --kill-at 3", "process rank 1", "signal 9");
}

/* Reads the integer in file path into *v; false while the file is not there (or empty). */
static bool read_int_file(const char *path, long long *v)
{
    FILE *f = fopen(path, "r");
    bool ok = f && fscanf(f, "%lld", v) == 1;
    if (f)
        fclose(f);
    return ok;
}

static bool exists(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f)
        fclose(f);
    return f != NULL;
}

/* Starts `ember train mlp --ddp` on 2 ranks in the background, checkpointing every 5 steps into
 * dir/run.ckpt; each rank writes its pid to dir/pid.<rank> (a shell that then becomes ember),
 * mpirun's output goes to dir/out and its exit status to dir/rc. */
static void start_ddp_training(void)
{
    char cmd[2048], script[128];
    snprintf(script, sizeof script, "%s/rank_pid.sh", dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fprintf(f, "echo $$ > %s/pid.$OMPI_COMM_WORLD_RANK\nexec \"$@\"\n", dir);
    fclose(f);
    snprintf(cmd, sizeof cmd, "(" MPI_ENV "%s -np 2 --oversubscribe " MPI_EXPORTS " sh %s %s "
             "train mlp --ddp --batch 32 --epochs 1 --no-val --workers 0 --threads 1 --save "
             "%s/run.ckpt --save-every 5 > %s/out 2>&1; echo $? > %s/rc) &",
             EMBER_MPIEXEC, script, EMBER_CLI, dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
}

/* The checkpoint's step count, after checking it loads whole. */
static long long checkpoint_step(const char *path)
{
    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK, "%s", em_error());
    cr_expect_str_eq(em_safetensors_meta(f, "dist.world_size"), "2");
    uint64_t step = 0;
    cr_assert(em_safetensors_meta_u64(f, "ember.step", &step));
    em_safetensors_free(f);
    return (long long)step;
}

/* A rank killed (SIGKILL) in the middle of `ember train --ddp`, the writer of checkpoints or the
 * other: the job ends within seconds naming the rank and the signal (no rank waits on in a
 * collective), the last checkpoint loads whole, and --resume continues from it on 2 ranks, on
 * 3 and on one process. */
Test(dist, a_killed_rank_ends_training_and_its_checkpoint_resumes_on_any_rank_count,
     .timeout = 600, .init = make_dir, .fini = remove_dir)
{
    char path[256], line[128], args[512];
    long long step = 0;
    for (int victim = 1; victim >= 0; victim--) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -f %s/run.ckpt %s/pid.* %s/rc", dir, dir, dir);
        cr_assert_eq(system(cmd), 0);
        start_ddp_training();
        long long pid = 0, rc = 0;
        snprintf(path, sizeof path, "%s/run.ckpt", dir);
        double t0 = now_s();
        while (!exists(path) && now_s() - t0 < 120)
            usleep(20000);
        cr_assert(exists(path), "no checkpoint within 120 s");
        usleep(victim ? 300000 : 900000); /* into a later step, or a later save */
        snprintf(path, sizeof path, "%s/pid.%d", dir, victim);
        cr_assert(read_int_file(path, &pid), "no pid of rank %d", victim);
        cr_assert_eq(kill((pid_t)pid, SIGKILL), 0);
        double killed = now_s();
        snprintf(path, sizeof path, "%s/rc", dir);
        while (!read_int_file(path, &rc) && now_s() - killed < 60)
            usleep(20000);
        double took = now_s() - killed;
        snprintf(path, sizeof path, "%s/out", dir);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(out, 1, OUT_MAX - 1, f) : 0;
        out[n] = 0;
        if (f)
            fclose(f);
        cr_assert_lt(took, 10, "the job took %.1f s to end after rank %d was killed:\n%s", took,
                     victim, out);
        cr_expect_neq(rc, 0);
        snprintf(line, sizeof line, "process rank %d", victim);
        expect_line(line);
        expect_line("signal 9");
        snprintf(path, sizeof path, "%s/run.ckpt", dir);
        step = checkpoint_step(path);
        cr_assert_gt(step, 0);
        cr_log_info("rank %d killed: the job ended %.2f s later; checkpoint at step %lld", victim,
                    took, step);
    }
    int counts[3] = {2, 3, 1};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "train mlp --ddp --batch 32 --epochs 1 --no-val --workers 0 "
                 "--threads 1 --resume %s --max-steps %lld", path, step + 6);
        if (counts[i] > 1)
            cr_assert_eq(mpirun_program(counts[i], EMBER_CLI, args, NULL), 0, "%s", out);
        else
            cr_assert_eq(run_cli(args), 0, "%s", out);
        snprintf(line, sizeof line, "\"steps\":%lld,", step + 6);
        expect_line(line);
        snprintf(line, sizeof line, "\"world_size\":%d,", counts[i]);
        expect_line(line);
        cr_log_info("resumed on %d: %s", counts[i], strstr(out, "{\"recipe\""));
    }
}
