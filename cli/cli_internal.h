/* The `ember` CLI's subcommands, one file each; cli/ember.c dispatches to them. */
#ifndef EMBER_CLI_CLI_INTERNAL_H
#define EMBER_CLI_CLI_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "recipes/recipes.h"
#include "cmd/args.h"

int cli_cmd_info(int argc, char **argv);     /* cli/info.c: build, devices, threads */
int cli_cmd_demo(int argc, char **argv);     /* cli/demo.c: a small regression with autograd */
int cli_cmd_train(int argc, char **argv);    /* cli/train_cmd.c: train a recipe */
int cli_cmd_eval(int argc, char **argv);     /* cli/train_cmd.c: evaluate a saved model */
int cli_cmd_summary(int argc, char **argv);  /* cli/summary_cmd.c: a recipe's module table */
int cli_cmd_compare(int argc, char **argv);  /* cli/compare_cmd.c: techniques side by side */
int cli_cmd_profile(int argc, char **argv);  /* cli/profile_cmd.c: where a step's time goes */
int cli_cmd_quantize(int argc, char **argv); /* cli/quantize_cmd.c: int8 dynamic quantization */
int cli_cmd_prune(int argc, char **argv);    /* cli/prune_cmd.c: prune, fine-tune, shrink */
int cli_cmd_export(int argc, char **argv);   /* cli/export_cmd.c: ONNX export */
int cli_cmd_serve(int argc, char **argv);    /* cli/serve_cmd.c: the HTTP inference server */
int bench_serve(int argc, char **argv);  /* bench/bench_serve.c: the server under load */
/* A recipe's sample shape without the batch dim: (784) or (1, 28, 28) (cli/serve_cmd.c). */
em_shape recipe_sample_shape(const recipe_spec *rc);
int bench_ops(int argc, char **argv);    /* bench/bench_ops.c: kernels vs references */
int bench_train(int argc, char **argv);  /* bench/bench_train.c: training vs PyTorch */
int bench_infer(int argc, char **argv);  /* bench/bench_infer.c: inference latency vs PyTorch */
int bench_attention(int argc, char **argv); /* bench/bench_attention.c: fused vs composed */
int cli_cmd_sample(int argc, char **argv);   /* cli/sample_cmd.c: text from a gpt model */
int bench_sample(int argc, char **argv); /* cli/sample_cmd.c: with and without the cache */
int bench_dist(int argc, char **argv);   /* bench/bench_dist.c: allreduce, DDP scaling */

/* The command's OpenMP wait policy (cli/wait_policy.c): called first in main, it runs the
 * command again with ember's default GOMP_SPINCOUNT unless the environment sets a policy;
 * cli_wait_policy then says which is in effect. */
void cli_wait_policy_init(char **argv);
const char *cli_wait_policy(void);

/* "A:B", two micro-batch numbers counting from 1 with A <= B, into *first and *last (the
 * --profile-steps of ember train); false after printing what is wrong on stderr. */
bool cli_parse_step_range(const char *command, const char *option, const char *text,
                         int64_t *first, int64_t *last);

/* cmd/recipe_choice.c: */
void cmd_list_recipes(FILE *f);       /* the recipes, for a command's --help */
void cmd_list_built_recipes(FILE *f); /* those with a model builder (all but gpt) */
/* Parses the arguments of a command about one recipe (*name, once parsed) and finds it:
 * CMD_ARGS_RUN with *rc set (NULL when the spec's optional operand was left out), or the
 * command's exit status after printing --help, what was wrong with an argument or that the
 * recipe is unknown (or, built_only, has no model builder: gpt brings its own training loop). */
int cmd_parse_recipe_command(const cmd_spec *spec, int argc, char **argv, const char **name,
                            bool built_only, const recipe_spec **rc);
/* The recipe (with a model builder) whose model a model file or checkpoint holds, by its
 * "recipe" metadata; NULL after printing why on stderr. */
const recipe_spec *cmd_recipe_of_model_file(const char *command, const char *path);
/* A training command's --device ("cpu" or "cuda") and --tf32 (cli/train_cmd.c): 0 with the
 * device in *out (TF32 switched on when asked), or the command's exit status (2) after printing
 * "COMMAND: --device cuda: ..." when the device is not available. */
int cmd_device(const char *command, const char *name, bool tf32, em_device *out);

/* Inference latency of em_forward(model, x) in eval mode without grad: warmup untimed calls,
 * then iters timed ones (bench/bench_infer.c). All zero when a forward fails. */
typedef struct {
    double mean_us, p50_us, p95_us, p99_us;
    double samples_per_s; /* batch / mean */
} bench_latency;
bench_latency bench_measure_latency(em_module *model, const em_tensor *x, int warmup, int iters);
/* The first n test samples of a recipe's dataset (x only), or NULL with an error. */
em_tensor *bench_test_batch(const recipe_spec *rc, const char *data_dir, int64_t n);

/* GFLOP/s of the matrix products of a training step of n layers at batch alone, on `threads`
 * threads (bench/gemm_bound.c): per layer over the whole batch (rows = batch x positions), the
 * forward (rows, k) x (k, out), the weight gradient (out, rows) x (rows, k) and, where computed,
 * the input gradient (rows, out) x (out, k), in the layouts ember's layers pass them; each
 * product's median of reps runs; the step's FLOPs over the sum. `openblas`: every product
 * through OpenBLAS's own threads; `best`: each the faster of that and ember's CPU gemm. -1 when
 * out of memory. */
typedef struct {
    double openblas, best;
} bench_gemm_bound;
bench_gemm_bound bench_gemm_bound_gflops(const em_matmul_layer *l, int n, int64_t batch, int threads,
                                   int reps);

/* bench/bench_common.c: what the benchmarks share */
double bench_now_s(void); /* monotonic seconds */
void bench_sort_doubles(double *v, int n);
/* Runs $EMBER_PYTHON (else /usr/bin/python3) bench/<script> <args> and hands each line of its output to on_line;
 * false (after printing why) when torch is absent or the script failed. */
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

/* bench/bench_sample.c: `ember bench sample`'s rounds, alternating ember's generation with and
 * without the key/value cache and PyTorch's (bench/gpt_torch.py sample, from the same file
 * unless torch is false); prints the characters/s and writes them to json unless it is NULL. */
#define BENCH_SAMPLE_MAX_ROUNDS 9
typedef struct {
    em_module *model;       /* a gpt, loaded from load */
    const char *load, *prompt, *json;
    const int64_t *ids;     /* (n_ids) the prompt's tokens */
    int64_t n_ids, tokens;  /* tokens: characters to generate */
    em_generate_opts opts;  /* sampling and seed; no_cache is set per run */
    int threads, rounds;
    bool torch;             /* run PyTorch beside */
} bench_sample_setup;
em_status bench_sample_run(const bench_sample_setup *s);

#endif
