/* What bench/bench_train.c measures and bench/bench_train_output.c prints, charts and writes as
 * JSON: the medians of `ember bench train`'s rounds. */
#ifndef EMBER_BENCH_BENCH_TRAIN_H
#define EMBER_BENCH_BENCH_TRAIN_H

#include "cmd/report.h"
#include "bench/bench.h"

#define BENCH_MAX_CASES 4
#define BENCH_GPT_CASES 3

/* One Fashion-MNIST case's medians over the rounds; 0 for what did not run. */
typedef struct {
    const char *name;    /* "mlp_b64" */
    double goal;         /* the ratio to PyTorch we aim for in f32; 0 under autocast */
    double step, torch;  /* samples/s of the timed steps, ember's and PyTorch's */
    double flops;        /* per sample of a training step (em_matmul_train_flops) */
    double bound_gflops; /* the step's products alone, each the faster way (bench_gemm_bound) */
    double openblas_gflops; /* the same products through OpenBLAS's threads alone */
    double train;        /* samples/s of ember train's loop, median iteration */
    double team;         /* the threads ember's timed steps forked, on average (the governor's) */
} bench_case_result;

/* One gpt case's medians over the rounds (tokens/s); 0 for what did not run. */
typedef struct {
    const char *name; /* "gpt_b8_t256": batch 8 of 256-character windows */
    double goal, tokens, torch;
    double team; /* as bench_case_result's */
} bench_gpt_result;

/* The run's setting, said once above the tables and in the JSON. */
typedef struct {
    const char *device, *about, *amp;
    const char *torch; /* bench_torch_about() of the PyTorch that ran beside; NULL when none did */
    int threads, rounds, train_workers;
    bool cuda_graph;   /* ember replayed CUDA graphs, PyTorch ran torch.compile(reduce-overhead) */
} bench_run_info;

/* The two tables on stdout: samples/s next to PyTorch; FLOPs, bound and ember train's rate. */
void bench_train_print(const bench_run_info *info, const bench_case_result *c, int n);
/* A row of the first table, also gpt's tokens/s: "-" for a PyTorch rate t or a goal of 0;
 * team: the threads ember's steps forked, on average. */
void bench_train_row(const char *name, double e, double t, double goal, double team);
/* Bars of ember beside PyTorch (0 where it did not run) onto r. */
void bench_train_chart(cmd_report *r, const char *title, const char *unit, const char **names,
                          int n, const double *ember, const double *torch);
/* Everything the tables show as one JSON object into path (written atomically), the n_gpt gpt
 * cases each under its name. */
em_status bench_train_json(const char *path, const bench_run_info *info,
                              const bench_case_result *c, int n, const bench_gpt_result *gpt,
                              int n_gpt);

#endif
