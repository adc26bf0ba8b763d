/* The `ember` CLI's subcommands, one file each; tools/ember.c dispatches to them. */
#ifndef EMBER_TOOLS_INTERNAL_H
#define EMBER_TOOLS_INTERNAL_H

#include "recipes/recipes.h"

int em_cmd_info(int argc, char **argv);  /* tools/info.c: build, devices, threads */
int em_cmd_demo(int argc, char **argv);  /* tools/demo.c: fit a small regression with autograd */
int em_bench_ops(int argc, char **argv); /* tools/bench_ops.c: kernel figures vs references */
int em_bench_train(int argc, char **argv); /* tools/bench_train.c: ember vs PyTorch training */
int em_cmd_train(int argc, char **argv); /* tools/train_cmd.c: train a recipe */
int em_cmd_eval(int argc, char **argv);
int em_cmd_compare(int argc, char **argv); /* tools/compare_cmd.c: techniques side by side */  /* tools/train_cmd.c: evaluate a saved recipe model */
int em_cmd_quantize(int argc, char **argv); /* tools/quantize_cmd.c: int8 dynamic quantization */
int em_cmd_prune(int argc, char **argv);    /* tools/prune_cmd.c: prune, fine-tune, shrink */
int em_bench_infer(int argc, char **argv);  /* tools/bench_infer.c: inference latency vs PyTorch */

/* Inference latency of em_forward(model, x) in eval mode without grad: warmup untimed calls,
 * then iters timed ones (tools/bench_infer.c). All zero when a forward fails. */
typedef struct {
    double mean_us, p50_us, p95_us, p99_us;
    double samples_per_s; /* batch / mean */
} em_latency;
em_latency em_measure_latency(em_module *model, const em_tensor *x, int warmup, int iters);
/* The first n test samples of a recipe's dataset (x only), or NULL with an error. */
em_tensor *em_test_batch(const em_recipe *rc, const char *data_dir, int64_t n);

#endif
