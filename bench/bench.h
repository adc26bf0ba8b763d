/* The benchmark programs (`ember bench WHAT`): the table of them the `ember` command dispatches
 * to, and what they share with each other and with the commands that measure (quantize, prune,
 * sample): latency, a test batch, timing, sorting and running PyTorch or onnxruntime beside. */
#ifndef EMBER_BENCH_BENCH_H
#define EMBER_BENCH_BENCH_H

#include <stdbool.h>

#include "ember.h"

/* One benchmark: `ember bench NAME ARGS...` runs run(argc, argv) with argv[0] "NAME". */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* the exit status */
    const char *help;                  /* one line for `ember bench --help` */
} bench_command;
extern const bench_command bench_commands[]; /* bench/bench_commands.c */
extern const int bench_command_count;

int bench_ops(int argc, char **argv);       /* bench/bench_ops.c: ops vs references */
int bench_train(int argc, char **argv);     /* bench/bench_train.c: training vs PyTorch */
int bench_dist(int argc, char **argv);      /* bench/bench_dist.c: allreduce, DDP scaling */
int bench_serve(int argc, char **argv);     /* bench/bench_serve.c: the server under load */
int bench_infer(int argc, char **argv);     /* bench/bench_infer.c: inference vs PyTorch */
int bench_attention(int argc, char **argv); /* bench/bench_attention.c: fused vs composed */
int bench_sample(int argc, char **argv);    /* bench/bench_sample.c: with and without cache */

/* Inference latency of em_forward(model, x) in eval mode without grad: warmup untimed calls,
 * then iters timed ones (bench/bench_infer.c). All zero when a forward fails. */
typedef struct {
    double mean_us, p50_us, p95_us, p99_us;
    double samples_per_s; /* batch / mean */
} bench_latency;
bench_latency bench_measure_latency(em_module *model, const em_tensor *x, int warmup, int iters);
/* The first n samples of ds (x only), or NULL with an error. */
em_tensor *bench_test_batch(const em_dataset *ds, int64_t n);

/* GFLOP/s of the matrix products of a training step of n layers at batch alone, on `threads`
 * threads (bench/gemm_bound.c): per layer over the whole batch (rows = batch x positions), the
 * forward (rows, k) x (k, out), the weight gradient (out, rows) x (rows, k) and, where computed,
 * the input gradient (rows, out) x (out, k), in the layouts ember's layers pass them; each
 * product's median of reps runs; the step's FLOPs over the sum. `openblas`: every product
 * through OpenBLAS's own threads; `best`: each the faster of that and em_matmul (ember's CPU
 * gemm). -1 when out of memory. */
typedef struct {
    double openblas, best;
} bench_gemm_bound;
bench_gemm_bound bench_gemm_bound_gflops(const em_matmul_layer *l, int n, int64_t batch,
                                         int threads, int reps);

/* The rate of ember's 1024 x 1024 x 1024 products on the calling thread's OpenMP team, f32 and
 * int8 (dynamic quantized, as `ember quantize` makes), in GFLOP/s and GOP/s (2 per multiply-add):
 * the ceiling of a batch's products (bench/product_rate.c). -1 where one failed. */
typedef struct {
    double f32_gflops, int8_gops;
} bench_product_rate;
bench_product_rate bench_measure_product_rate(void);

/* bench/bench_common.c: */
double bench_now_s(void); /* monotonic seconds */
void bench_sort_doubles(double *v, int n);
/* Runs $EMBER_PYTHON (else /usr/bin/python3) bench/<script> <args> and hands each line of its
 * output to on_line; false (after printing why) when torch is absent or the script failed. */
typedef void (*bench_line_fn)(void *ctx, const char *line);
bool bench_run_torch_script(const char *script, const char *args, bench_line_fn on_line,
                            void *ctx);
/* The same for bench/<script> under $EMBER_ORT_PYTHON, else the test venv's python, which
 * must import onnxruntime. */
bool bench_run_ort_script(const char *script, const char *args, bench_line_fn on_line,
                          void *ctx);
/* "torch 2.x | BLAS mkl | oneDNN v3.x | CPU capability AVX2": the PyTorch the benchmarks run
 * against (asked once per process); "" when it cannot be run. */
const char *bench_torch_about(void);

#endif
