/* The `ember` CLI's subcommands, one file each; tools/ember.c dispatches to them. */
#ifndef EMBER_TOOLS_INTERNAL_H
#define EMBER_TOOLS_INTERNAL_H

int em_cmd_info(int argc, char **argv);  /* tools/info.c: build, devices, threads */
int em_cmd_demo(int argc, char **argv);  /* tools/demo.c: fit a small regression with autograd */
int em_bench_ops(int argc, char **argv); /* tools/bench_ops.c: kernel figures vs references */
int em_bench_train(int argc, char **argv); /* tools/bench_train.c: ember vs PyTorch training */
int em_cmd_train(int argc, char **argv); /* tools/train_cmd.c: train a recipe */
int em_cmd_eval(int argc, char **argv);  /* tools/train_cmd.c: evaluate a saved recipe model */

#endif
