/* `ember bench ops`: throughput of ember's ops on the CPU next to a reference (BLAS called
 * directly, the GEMM alone, memcpy), one table per run. Each runs through the op a model calls
 * (its checks, its result from the caching allocator, the kernel); median of several timed
 * repetitions after a warm-up. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd/args.h"
#include "bench/bench.h"

#define MAX_REPS 15

/* What a timed body needs: the operation and its operands. */
typedef struct bench bench;
struct bench {
    bool (*run)(bench *b);     /* one timed repetition; false when the op failed */
    bool (*prepare)(bench *b); /* untimed, before each repetition; NULL: nothing to prepare */
    em_tensor *a, *b, *c;      /* the operands */
    em_tensor *out;            /* a result kept between prepare and run */
    em_tensor *seed;           /* the gradient a backward starts from (out's shape) */
    em_conv2d_opts conv;
    size_t bytes; /* memcpy */
};

/* Median seconds of `reps` runs after two warm-up runs; negative when the op failed. */
static double time_median(bench *b, int reps)
{
    double t[MAX_REPS];
    for (int i = 0; i < 2 + reps; i++) {
        if (b->prepare && !b->prepare(b))
            return -1;
        double t0 = bench_now_s();
        if (!b->run(b))
            return -1;
        if (i >= 2)
            t[i - 2] = bench_now_s() - t0;
    }
    bench_sort_doubles(t, reps);
    return t[reps / 2];
}

/* Whether y was made; releases it. */
static bool made(em_tensor *y)
{
    em_release(y);
    return y != NULL;
}

static bool run_matmul(bench *b)
{
    return made(em_matmul(b->a, b->b));
}

/* cblas_sgemm on a (m, k) and b (k, n) into c (m, n), every operand contiguous */
static bool run_cblas(bench *b)
{
    int m = (int)b->a->shape[0], k = (int)b->a->shape[1], n = (int)b->b->shape[1];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, em_data_ptr(b->a), k,
                em_data_ptr(b->b), n, 0.0f, em_data_ptr(b->c), n);
    return true;
}

static bool run_conv(bench *b)
{
    return made(em_conv2d(b->a, b->b, b->c, b->conv));
}

/* conv2d's input gradient is conv_transpose2d's forward: the same kernel. */
static bool run_conv_grad_input(bench *b)
{
    em_conv_transpose2d_opts o = {.padding = {b->conv.padding[0], b->conv.padding[1]}};
    return made(em_conv_transpose2d(b->a, b->b, NULL, o));
}

/* The forward whose backward run_conv_grad_weight times: weight b and bias c require grad,
 * input a does not, so the backward computes their gradients alone. */
static bool forward_for_grad_weight(bench *b)
{
    em_release(b->out);
    em_zero_grad(b->b);
    em_zero_grad(b->c);
    b->out = em_conv2d(b->a, b->b, b->c, b->conv);
    return b->out != NULL;
}

static bool run_conv_grad_weight(bench *b)
{
    return em_backward_grad(b->out, b->seed) == EM_OK;
}

static bool run_add(bench *b)
{
    return made(em_add(b->a, b->b));
}

static bool run_relu(bench *b)
{
    return made(em_relu(b->a));
}

/* memcpy of `bytes` from a to c, cut into one contiguous piece per OpenMP thread. */
static bool run_memcpy(bench *b)
{
    char *dst = em_data_ptr(b->c);
    const char *src = em_data_ptr(b->a);
    #pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t lo = b->bytes * t / nt, hi = b->bytes * (t + 1) / nt;
        memcpy(dst + lo, src + lo, hi - lo);
    }
    return true;
}

/* An f32 tensor of shape s holding values in [-1, 1); NULL with an error when out of memory. */
static em_tensor *filled(em_shape s)
{
    em_tensor *t = em_empty(s, EM_F32);
    float *p = t ? em_data_ptr(t) : NULL;
    for (int64_t i = 0, n = t ? em_numel(t) : 0; i < n; i++)
        p[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    return t;
}

/* One line of the table: ember's figure next to its reference's (negative: the op failed). */
typedef struct {
    char name[40];
    double got, ref;
    const char *unit, *ref_name;
} row;

static void set_row(row *r, const char *name, double got, double ref, const char *unit,
                    const char *ref_name)
{
    snprintf(r->name, sizeof r->name, "%s", name);
    r->got = got;
    r->ref = ref;
    r->unit = unit;
    r->ref_name = ref_name;
}

static void print_row(const row *r)
{
    if (r->got < 0 || r->ref < 0)
        printf("%-26s %9s %-7s  %-22s (op failed)\n", r->name, "-", r->unit, r->ref_name);
    else
        printf("%-26s %9.1f %-7s  %-22s %9.1f %-7s %5.0f%%\n", r->name, r->got, r->unit,
               r->ref_name, r->ref, r->unit, 100.0 * r->got / r->ref);
}

/* f32 square matmuls through em_matmul next to cblas_sgemm called directly with OpenBLAS's own
 * threads (timed after everything else: OpenBLAS's idle threads spin and slow OpenMP down;
 * ember itself runs OpenBLAS on one thread inside its OpenMP threads). */
static int bench_matmul(int nt, row *rows)
{
    static const int64_t sizes[3] = {256, 512, 1024};
    double ours[3], ref[3];
    int rc = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* let OpenMP's workers stop spinning first, or OpenBLAS's threads
                          * would share their cores */
            nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
            openblas_set_num_threads(nt);
        }
        for (int i = 0; i < 3; i++) {
            int64_t s = sizes[i];
            bench b = {.run = pass ? run_cblas : run_matmul, .a = filled(EM_SHAPE(s, s)),
                       .b = filled(EM_SHAPE(s, s)), .c = filled(EM_SHAPE(s, s))};
            double t = b.a && b.b && b.c ? time_median(&b, s < 1024 ? MAX_REPS : 7) : -1;
            (pass ? ref : ours)[i] = t;
            rc |= t < 0;
            em_release(b.a);
            em_release(b.b);
            em_release(b.c);
        }
    }
    openblas_set_num_threads(1);
    for (int i = 0; i < 3; i++) {
        char name[40];
        double flop = 2.0 * (double)(sizes[i] * sizes[i] * sizes[i]);
        snprintf(name, sizeof name, "matmul f32 %ld", (long)sizes[i]);
        set_row(&rows[i], name, ours[i] < 0 ? -1 : flop / ours[i] * 1e-9,
                ref[i] < 0 ? -1 : flop / ref[i] * 1e-9, "GFLOP/s", "cblas_sgemm direct");
    }
    return rc;
}

/* The CNN's second layer: batch 64, 32 -> 64 channels, 14x14, 3x3, padding 1; each of its
 * three products next to the same product as one GEMM over the whole batch (the weight against
 * the im2col columns, layouts aside). */
static int bench_conv(row *rows)
{
    enum { N = 64, C_IN = 32, HW = 14, C_OUT = 64, K = 3 };
    const int64_t kc = C_IN * K * K, cols = N * HW * HW;
    const double flop = 2.0 * (double)(C_OUT * kc * cols);
    em_tensor *x = filled(EM_SHAPE(N, C_IN, HW, HW)), *w = filled(EM_SHAPE(C_OUT, C_IN, K, K));
    em_tensor *bias = filled(EM_SHAPE(C_OUT)), *gy = filled(EM_SHAPE(N, C_OUT, HW, HW));
    em_tensor *w2 = filled(EM_SHAPE(C_OUT, kc)), *x2 = filled(EM_SHAPE(kc, cols));
    em_tensor *gy2 = filled(EM_SHAPE(C_OUT, cols));
    em_tensor *w2t = w2 ? em_transpose(w2, 0, 1) : NULL, *x2t = x2 ? em_transpose(x2, 0, 1) : NULL;
    int rc = 0;
    if (x && w && bias && gy && w2t && x2t && gy2) {
        static const char *names[3] = {"conv2d 64x32x14x14 fwd", "conv2d grad_input",
                                       "conv2d grad_weight"};
        em_conv2d_opts o = {.padding = {1, 1}};
        bench ops[3] = {{.run = run_conv, .a = x, .b = w, .c = bias, .conv = o},
                        {.run = run_conv_grad_input, .a = gy, .b = w, .conv = o},
                        {.run = run_conv_grad_weight, .prepare = forward_for_grad_weight, .a = x,
                         .b = w, .c = bias, .seed = gy, .conv = o}};
        bench gemms[3] = {{.run = run_matmul, .a = w2, .b = x2},
                          {.run = run_matmul, .a = w2t, .b = gy2},
                          {.run = run_matmul, .a = gy2, .b = x2t}};
        for (int i = 0; i < 3; i++) {
            if (i == 2) { /* the backward computes these two gradients */
                em_requires_grad_(w, true);
                em_requires_grad_(bias, true);
            }
            double t = time_median(&ops[i], MAX_REPS);
            double g = time_median(&gemms[i], MAX_REPS);
            rc |= t < 0 || g < 0;
            set_row(&rows[i], names[i], t < 0 ? -1 : flop / t * 1e-9,
                    g < 0 ? -1 : flop / g * 1e-9, "GFLOP/s", "its GEMM alone");
        }
        em_release(ops[2].out);
    } else {
        rc = 1;
    }
    em_tensor *all[] = {x, w, bias, gy, w2, x2, gy2, w2t, x2t};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_release(all[i]);
    return rc;
}

/* add and relu on 16M floats next to a threaded memcpy of the same bytes. */
static int bench_elementwise(row *rows)
{
    const int64_t n = 16 << 20;
    const double fbytes = (double)n * sizeof(float);
    em_tensor *a = filled(EM_SHAPE(n)), *c = filled(EM_SHAPE(n)), *o = filled(EM_SHAPE(n));
    int rc = 1;
    if (a && c && o) {
        bench copy = {.run = run_memcpy, .a = a, .c = o, .bytes = (size_t)fbytes};
        bench add = {.run = run_add, .a = a, .b = c}, relu = {.run = run_relu, .a = a};
        double copy_gbs = 2 * fbytes / time_median(&copy, 9) * 1e-9; /* read + write */
        double t_add = time_median(&add, 9);
        double t_relu = time_median(&relu, 9);
        set_row(&rows[0], "add f32 16M", t_add < 0 ? -1 : 3 * fbytes / t_add * 1e-9, copy_gbs,
                "GB/s", "memcpy, same bytes");
        set_row(&rows[1], "relu f32 16M", t_relu < 0 ? -1 : 2 * fbytes / t_relu * 1e-9,
                copy_gbs, "GB/s", "memcpy, same bytes");
        rc = t_add < 0 || t_relu < 0;
    }
    em_release(a);
    em_release(c);
    em_release(o);
    return rc;
}

int bench_ops(int argc, char **argv)
{
    const cmd_spec spec = {.command = "ember bench ops",
                              .about = "Matmul, conv2d and elementwise throughput next to "
                                       "cblas_sgemm and memcpy."};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    const int nt = omp_get_max_threads();
    printf("ember bench ops: cpu, %d OpenMP thread%s; OpenBLAS %s\n", nt, nt == 1 ? "" : "s",
           openblas_get_config());
    /* matmul rows 0-2, conv 3-5, elementwise 6-7; OpenBLAS's own threads run last */
    row rows[8];
    for (int i = 0; i < 8; i++)
        set_row(&rows[i], "", -1, -1, "", "");
    int rc = bench_conv(rows + 3);
    rc |= bench_elementwise(rows + 6);
    rc |= bench_matmul(nt, rows);
    printf("%-26s %17s  %-22s %17s %6s\n", "op", "ember", "reference", "", "ratio");
    for (int i = 0; i < 8; i++)
        print_row(&rows[i]);
    if (rc)
        fprintf(stderr, "ember bench ops: %s\n", em_error());
    return rc ? 1 : 0;
}
