/* `ember bench ops`: CPU kernel throughput next to its reference (BLAS called directly, the GEMM
 * alone, memcpy), one table per run. Median of several timed repetitions after a warm-up. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend_internal.h"
#include "cmd/args.h"
#include "bench/bench.h"

#define MAX_REPS 15

/* What a timed body needs: the operation and its buffers. */
typedef struct bench bench;
struct bench {
    int (*run)(const bench *b);
    const em_backend *be;
    int64_t m, n, k;             /* gemm */
    const em_conv2d_shape *conv; /* conv2d */
    float *x, *w, *y, *gy, *gx, *gw, *gb;
    em_arr out, in_a, in_b;      /* elementwise */
    size_t bytes;                /* memcpy */
};

/* Median seconds of `reps` runs after two warm-up runs; negative when the kernel failed. */
static double time_median(const bench *b, int reps)
{
    double t[MAX_REPS];
    for (int i = 0; i < 2; i++)
        if (b->run(b) != EM_KERNEL_OK)
            return -1;
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_s();
        b->run(b);
        t[i] = bench_now_s() - t0;
    }
    bench_sort_doubles(t, reps);
    return t[reps / 2];
}

static int run_gemm(const bench *b)
{
    return b->be->gemm(EM_F32, false, false, b->m, b->n, b->k, 1.0, b->x, b->k, 0, b->w, b->n, 0,
                       0.0, b->y, b->n, 0, 1);
}

static int run_cblas(const bench *b)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b->m, (int)b->n, (int)b->k, 1.0f,
                b->x, (int)b->k, b->w, (int)b->n, 0.0f, b->y, (int)b->n);
    return EM_KERNEL_OK;
}

static int run_conv(const bench *b)
{
    return b->be->conv2d(b->conv, EM_F32, b->x, b->w, b->gb, b->y);
}

static int run_conv_gx(const bench *b)
{
    return b->be->conv2d_grad_input(b->conv, EM_F32, b->gy, b->w, b->gx);
}

static int run_conv_gw(const bench *b)
{
    return b->be->conv2d_grad_weight(b->conv, EM_F32, b->gy, b->x, b->gw, b->gb);
}

/* The three convolution products as single GEMMs over the whole batch (layouts aside). */
static int run_conv_gemm_fwd(const bench *b)
{
    const em_conv2d_shape *s = b->conv;
    int64_t kc = s->c_in * s->kh * s->kw, cols = s->n * s->h_out * s->w_out;
    return b->be->gemm(EM_F32, false, false, s->c_out, cols, kc, 1.0, b->w, kc, 0, b->x, cols, 0,
                       0.0, b->y, cols, 0, 1);
}

static int run_conv_gemm_gx(const bench *b)
{
    const em_conv2d_shape *s = b->conv;
    int64_t kc = s->c_in * s->kh * s->kw, cols = s->n * s->h_out * s->w_out;
    return b->be->gemm(EM_F32, true, false, kc, cols, s->c_out, 1.0, b->w, kc, 0, b->gy, cols, 0,
                       0.0, b->x, cols, 0, 1);
}

static int run_conv_gemm_gw(const bench *b)
{
    const em_conv2d_shape *s = b->conv;
    int64_t kc = s->c_in * s->kh * s->kw, cols = s->n * s->h_out * s->w_out;
    return b->be->gemm(EM_F32, false, true, s->c_out, kc, cols, 1.0, b->gy, cols, 0, b->x, cols,
                       0, 0.0, b->gw, kc, 0, 1);
}

static int run_add(const bench *b)
{
    return b->be->binary(EM_BINARY_ADD, &b->out, &b->in_a, &b->in_b);
}

static int run_relu(const bench *b)
{
    return b->be->unary(EM_UNARY_RELU, &(em_unary_params){0}, &b->out, &b->in_a);
}

/* memcpy of `bytes`, cut into one contiguous piece per OpenMP thread. */
static int run_memcpy(const bench *b)
{
    #pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t lo = b->bytes * t / nt, hi = b->bytes * (t + 1) / nt;
        memcpy((char *)b->out.data + lo, (const char *)b->in_a.data + lo, hi - lo);
    }
    return EM_KERNEL_OK;
}

static float *filled(int64_t n)
{
    float *p = malloc((size_t)n * sizeof(float));
    if (p)
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    return p;
}

static em_arr flat_arr(float *data, int64_t n)
{
    return (em_arr){.data = data, .dtype = EM_F32, .ndim = 1, .shape = {n}, .strides = {1}};
}

/* One line of the table: ember's figure next to its reference's (negative: the kernel failed). */
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
        printf("%-26s %9s %-7s  %-22s (kernel failed)\n", r->name, "-", r->unit, r->ref_name);
    else
        printf("%-26s %9.1f %-7s  %-22s %9.1f %-7s %5.0f%%\n", r->name, r->got, r->unit,
               r->ref_name, r->ref, r->unit, 100.0 * r->got / r->ref);
}

/* f32 square matmuls through the backend next to cblas_sgemm called directly with OpenBLAS's
 * own threads (timed after everything else: OpenBLAS's idle threads spin and slow OpenMP down;
 * ember itself runs OpenBLAS on one thread inside its OpenMP threads). */
static int bench_matmul(const em_backend *be, int nt, row *rows)
{
    static const int64_t sizes[3] = {256, 512, 1024};
    double ours[3], ref[3];
    bench b = {.be = be};
    b.x = filled(1024 * 1024);
    b.w = filled(1024 * 1024);
    b.y = filled(1024 * 1024);
    if (!b.x || !b.w || !b.y)
        return 1;
    for (int i = 0; i < 3; i++) {
        b.m = b.n = b.k = sizes[i];
        b.run = run_gemm;
        ours[i] = time_median(&b, sizes[i] < 1024 ? MAX_REPS : 7);
    }
    /* let OpenMP's workers stop spinning first, or OpenBLAS's threads would share their cores */
    nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
    openblas_set_num_threads(nt);
    for (int i = 0; i < 3; i++) {
        b.m = b.n = b.k = sizes[i];
        b.run = run_cblas;
        ref[i] = time_median(&b, sizes[i] < 1024 ? MAX_REPS : 7);
    }
    openblas_set_num_threads(1);
    for (int i = 0; i < 3; i++) {
        char name[40];
        double flop = 2.0 * (double)(sizes[i] * sizes[i] * sizes[i]);
        snprintf(name, sizeof name, "matmul f32 %ld", (long)sizes[i]);
        set_row(&rows[i], name, ours[i] < 0 ? -1 : flop / ours[i] * 1e-9, flop / ref[i] * 1e-9,
                "GFLOP/s", "cblas_sgemm direct");
    }
    free(b.x);
    free(b.w);
    free(b.y);
    return ours[0] < 0;
}

/* The CNN's second layer: batch 64, 32 -> 64 channels, 14x14, 3x3, padding 1. */
static int bench_conv(const em_backend *be, row *rows)
{
    static const em_conv2d_shape s = {.n = 64, .c_in = 32, .h = 14, .w = 14, .c_out = 64,
                                      .kh = 3, .kw = 3, .h_out = 14, .w_out = 14,
                                      .stride = {1, 1}, .pad = {1, 1}, .dilation = {1, 1},
                                      .groups = 1};
    const int64_t kc = s.c_in * s.kh * s.kw, cols = s.n * s.h_out * s.w_out;
    const double flop = 2.0 * (double)(s.c_out * kc * cols);
    bench b = {.be = be, .conv = &s};
    /* sized for the whole-batch GEMM references, which read (kc, cols) in place of x */
    b.x = filled(kc * cols);
    b.w = filled(s.c_out * kc);
    b.y = filled(s.c_out * cols);
    b.gy = filled(s.c_out * cols);
    b.gx = filled(kc * cols);
    b.gw = filled(s.c_out * kc);
    b.gb = filled(s.c_out);
    int rc = 0;
    if (b.x && b.w && b.y && b.gy && b.gx && b.gw && b.gb) {
        static const char *names[3] = {"conv2d 64x32x14x14 fwd", "conv2d grad_input",
                                       "conv2d grad_weight"};
        int (*kern[3])(const bench *) = {run_conv, run_conv_gx, run_conv_gw};
        int (*gemm[3])(const bench *) = {run_conv_gemm_fwd, run_conv_gemm_gx, run_conv_gemm_gw};
        for (int i = 0; i < 3; i++) {
            b.run = kern[i];
            double t = time_median(&b, MAX_REPS);
            b.run = gemm[i];
            double g = time_median(&b, MAX_REPS);
            rc |= t < 0;
            set_row(&rows[i], names[i], t < 0 ? -1 : flop / t * 1e-9,
                    g < 0 ? -1 : flop / g * 1e-9, "GFLOP/s", "its GEMM alone");
        }
    } else {
        rc = 1;
    }
    free(b.x);
    free(b.w);
    free(b.y);
    free(b.gy);
    free(b.gx);
    free(b.gw);
    free(b.gb);
    return rc;
}

/* add and relu on 16M floats next to a threaded memcpy of the same bytes. */
static int bench_elementwise(const em_backend *be, row *rows)
{
    const int64_t n = 16 << 20;
    const double fbytes = (double)n * sizeof(float);
    bench b = {.be = be};
    float *a = filled(n), *c = filled(n), *o = filled(n);
    int rc = 1;
    if (a && c && o) {
        b.in_a = flat_arr(a, n);
        b.in_b = flat_arr(c, n);
        b.out = flat_arr(o, n);
        b.bytes = (size_t)fbytes;
        b.run = run_memcpy;
        double copy_gbs = 2 * fbytes / time_median(&b, 9) * 1e-9; /* read + write */
        b.run = run_add;
        double t_add = time_median(&b, 9);
        b.run = run_relu;
        double t_relu = time_median(&b, 9);
        set_row(&rows[0], "add f32 16M", t_add < 0 ? -1 : 3 * fbytes / t_add * 1e-9, copy_gbs,
                "GB/s", "memcpy, same bytes");
        set_row(&rows[1], "relu f32 16M", t_relu < 0 ? -1 : 2 * fbytes / t_relu * 1e-9,
                copy_gbs, "GB/s", "memcpy, same bytes");
        rc = t_add < 0 || t_relu < 0;
    }
    free(a);
    free(c);
    free(o);
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
    const em_backend *be = em_backend_get(EM_CPU);
    const int nt = omp_get_max_threads();
    printf("ember bench ops: cpu, %d OpenMP thread%s; OpenBLAS %s\n", nt, nt == 1 ? "" : "s",
           openblas_get_config());
    /* matmul rows 0-2, conv 3-5, elementwise 6-7; OpenBLAS's own threads run last */
    row rows[8];
    for (int i = 0; i < 8; i++)
        set_row(&rows[i], "", -1, -1, "", "");
    int rc = bench_conv(be, rows + 3);
    rc |= bench_elementwise(be, rows + 6);
    rc |= bench_matmul(be, nt, rows);
    printf("%-26s %17s  %-22s %17s %6s\n", "kernel", "ember", "reference", "", "ratio");
    for (int i = 0; i < 8; i++)
        print_row(&rows[i]);
    return rc ? 1 : 0;
}
