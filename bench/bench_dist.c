/* `ember bench dist`, run under `mpirun -np N`: (1) allreduce time and bandwidth through ember
 * next to MPI's own blocking MPI_Allreduce in osu_allreduce's loop, at 1, 4 and 25 MB; (2) a
 * recipe's training samples/s as one process with N threads against N processes with one thread
 * each under DDP (the same global batch); (3) DDP's bucketing at two bucket caps: allreduces per
 * step and the share of the communication time that overlapped backward. Rounds alternate the
 * compared sides; medians are printed. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/recipes.h"
#include "cmd/args.h"
#include "bench/bench.h"

#define MAX_ROUNDS 9
#define N_SIZES 3
#define N_CAPS 2
#define WARMUP 3

static const double sizes_mb[N_SIZES] = {1, 4, 25};
static const size_t caps[N_CAPS] = {25u << 20, 1u << 19}; /* DDP's default and 0.5 MB */

static int rank, world;

static double median(double *v, int n)
{
    bench_sort_doubles(v, n);
    return v[n / 2];
}

/* The slowest rank's value: a collective step ends when its last rank does. */
static double slowest(double v)
{
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

/* Seconds per in-place MPI_Allreduce of n floats, osu_allreduce's loop. */
static double mpi_allreduce_s(float *buf, int n, int iters)
{
    for (int i = 0; i < WARMUP; i++)
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now_s();
    for (int i = 0; i < iters; i++)
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return slowest((bench_now_s() - t0) / iters);
}

/* Seconds per em_dist_allreduce of t, the same loop. */
static double ember_allreduce_s(em_tensor *t, int iters)
{
    for (int i = 0; i < WARMUP; i++)
        em_dist_allreduce(t, EM_DIST_SUM);
    em_dist_barrier();
    double t0 = bench_now_s();
    for (int i = 0; i < iters; i++)
        if (em_dist_allreduce(t, EM_DIST_SUM) != EM_OK)
            return -1;
    return slowest((bench_now_s() - t0) / iters);
}

static void bench_allreduce(int rounds, int iters)
{
    double mpi[N_SIZES][MAX_ROUNDS], ours[N_SIZES][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < N_SIZES; k++) {
            int n = (int)(sizes_mb[k] * (1 << 20) / sizeof(float));
            float *buf = calloc((size_t)n, sizeof *buf);
            em_tensor *t = em_zeros(EM_SHAPE(n), EM_F32);
            mpi[k][r] = mpi_allreduce_s(buf, n, iters);
            ours[k][r] = ember_allreduce_s(t, iters);
            em_release(t);
            free(buf);
        }
    if (rank != 0)
        return;
    printf("allreduce (f32 sum, in place, %d ranks, %d iterations, median of %d rounds)\n",
           world, iters, rounds);
    printf("%8s %12s %12s %14s %14s %8s\n", "size", "MPI ms", "ember ms", "MPI algbw GB/s",
           "ember GB/s", "ember/MPI");
    for (int k = 0; k < N_SIZES; k++) {
        double m = median(mpi[k], rounds), e = median(ours[k], rounds);
        double bytes = sizes_mb[k] * (1 << 20);
        printf("%6.0f MB %12.3f %12.3f %14.2f %14.2f %8.2f\n", sizes_mb[k], 1e3 * m, 1e3 * e,
               bytes / m / 1e9, bytes / e / 1e9, e / m);
    }
}

typedef struct {
    const recipe_spec *rc;
    int64_t batch; /* global */
    int steps;
    em_tensor *x, *y; /* (batch, sample) the global batch, the same every step */
} train_case;

/* One training step on rows [first, first + n) of the global batch. */
static em_status step(const train_case *c, em_module *m, em_optim *o, int64_t first, int64_t n)
{
    em_scope_begin();
    em_tensor *x = em_narrow(c->x, 0, first, n), *y = em_narrow(c->y, 0, first, n);
    em_tensor *loss = em_cross_entropy(em_forward(m, x), y, (em_cross_entropy_opts){0});
    em_status st = loss ? em_backward(loss) : em_error_status();
    if (st == EM_OK)
        st = em_optim_step(o);
    em_optim_zero_grad(o);
    em_scope_end();
    return st;
}

/* Samples/s of `steps` steps over the global batch: on rank 0 alone with `world` threads (the
 * others wait), or on every rank with one thread and DDP (cap > 0). stats: DDP's, per round. */
static double train_samples_per_s(const train_case *c, size_t cap, em_ddp_stats *stats)
{
    bool alone = cap == 0;
    omp_set_num_threads(alone ? world : 1);
    double elapsed = 0;
    em_status st = EM_OK;
    if (!alone || rank == 0) {
        em_manual_seed(1);
        em_module *m = c->rc->build(NULL);
        em_ddp *d = alone ? NULL : em_ddp_new(m, (em_ddp_opts){.bucket_bytes = cap});
        em_optim *o = em_sgd(m, (em_sgd_opts){.lr = 0.01, .momentum = 0.9});
        int64_t n = alone ? c->batch : c->batch / world, first = alone ? 0 : rank * n;
        st = (alone || d) && o ? EM_OK : em_error_status();
        for (int i = 0; st == EM_OK && i < WARMUP; i++)
            st = step(c, m, o, first, n);
        em_ddp_stats before = em_ddp_get_stats(d);
        double t0 = bench_now_s();
        for (int i = 0; st == EM_OK && i < c->steps; i++)
            st = step(c, m, o, first, n);
        elapsed = bench_now_s() - t0;
        if (stats) {
            em_ddp_stats after = em_ddp_get_stats(d);
            *stats = after;
            stats->syncs -= before.syncs;
            stats->allreduces -= before.allreduces;
            stats->comm_s -= before.comm_s;
            stats->overlapped_s -= before.overlapped_s;
            stats->wait_s -= before.wait_s;
        }
        em_ddp_free(d);
        em_optim_free(o);
        em_module_free(m);
    }
    if (st != EM_OK) {
        fprintf(stderr, "ember bench dist: rank %d: %s\n", rank, em_error());
        em_dist_fail(em_error());
        return -1;
    }
    em_dist_barrier();
    return (double)(c->batch * c->steps) / slowest(elapsed);
}

static void bench_training(train_case *c, int rounds)
{
    double one[MAX_ROUNDS], many[N_CAPS][MAX_ROUNDS];
    double per_step[N_CAPS][MAX_ROUNDS], comm[N_CAPS][MAX_ROUNDS], overlap[N_CAPS][MAX_ROUNDS];
    double wait[N_CAPS][MAX_ROUNDS];
    int buckets[N_CAPS] = {0};
    for (int r = 0; r < rounds; r++) {
        one[r] = train_samples_per_s(c, 0, NULL);
        for (int k = 0; k < N_CAPS; k++) {
            em_ddp_stats s;
            many[k][r] = train_samples_per_s(c, caps[k], &s);
            buckets[k] = s.n_buckets;
            per_step[k][r] = (double)s.allreduces / (double)s.syncs;
            comm[k][r] = 1e3 * s.comm_s / (double)s.syncs;
            overlap[k][r] = s.comm_s > 0 ? s.overlapped_s / s.comm_s : 0;
            wait[k][r] = 1e3 * s.wait_s / (double)s.syncs;
        }
    }
    if (rank != 0)
        return;
    double base = median(one, rounds);
    printf("\n%s training, global batch %lld, %d steps, median of %d rounds\n", c->rc->name,
           (long long)c->batch, c->steps, rounds);
    printf("  1 process x %d threads:              %8.0f samples/s\n", world, base);
    for (int k = 0; k < N_CAPS; k++) {
        double sps = median(many[k], rounds);
        printf("  %d processes x 1 thread, DDP %5.2f MB: %8.0f samples/s  (%.2fx)  buckets %d, "
               "allreduces/step %.1f, comm %.2f ms/step, overlapped with backward %.0f%%, "
               "wait after backward %.2f ms/step\n", world, (double)caps[k] / (1 << 20), sps,
               sps / base, buckets[k], median(per_step[k], rounds), median(comm[k], rounds),
               100 * median(overlap[k], rounds), median(wait[k], rounds));
    }
}

int bench_dist(int argc, char **argv)
{
    int rounds = 3, steps = 20, iters = 20;
    const char *recipe = "cnn";
    const cmd_opt opts[] = {
        {"rounds", CMD_OPT_INT, &rounds, "N", "rounds alternating the compared sides (default 3)",
         .range = CMD_RANGE(1, MAX_ROUNDS)},
        {"steps", CMD_OPT_INT, &steps, "N", "timed training steps per measurement (default 20)",
         .range = CMD_RANGE(1, 100000)},
        {"iters", CMD_OPT_INT, &iters, "N", "allreduces per timing (default 20)",
         .range = CMD_RANGE(1, 100000)},
        {"recipe", CMD_OPT_CHOICE, &recipe, .help = "the model trained", .choices =
         "mlp|cnn|deepmlp"},
        {0}};
    const cmd_spec spec = {
        .command = "ember bench dist", .opts = opts,
        .about = "Run under mpirun -np N: allreduce through ember next to MPI's own, and a "
                 "recipe's samples/s as 1 process x N threads against N processes x 1 thread "
                 "with DDP's bucketing figures."};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    int level = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    if (level != MPI_THREAD_MULTIPLE || em_dist_init((em_dist_opts){0}) != EM_OK) {
        fprintf(stderr, "ember bench dist: %s\n", level != MPI_THREAD_MULTIPLE
                ? "this MPI has no MPI_THREAD_MULTIPLE" : em_error());
        MPI_Finalize();
        return 1;
    }
    rank = em_dist_rank();
    world = em_dist_world_size();
    cpu_set_t cpus;
    if (rank == 0 && sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < world)
        fprintf(stderr, "ember bench dist: rank 0 may run on %d core(s) only, so its %d threads "
                "would share them: run mpirun with --bind-to none\n", CPU_COUNT(&cpus), world);
    int rc = 0;
    if (world < 2) {
        fprintf(stderr, "ember bench dist: run it under mpirun -np 2 (or more)\n");
        rc = 2;
    } else {
        bench_allreduce(rounds, iters);
        train_case c = {.rc = recipe_find(recipe), .steps = steps};
        c.batch = c.rc->batch;
        em_shape xs = {.ndim = c.rc->sample.ndim + 1, .d = {c.batch}};
        for (int i = 0; i < c.rc->sample.ndim; i++)
            xs.d[i + 1] = c.rc->sample.d[i];
        em_generator g = em_generator_new(3);
        c.x = em_rand(xs, EM_F32, &g);
        c.y = em_randint(EM_SHAPE(c.batch), EM_I64, 0, 10, &g);
        bench_training(&c, rounds);
        em_release(c.x);
        em_release(c.y);
    }
    em_dist_finalize();
    MPI_Finalize();
    return rc;
}
