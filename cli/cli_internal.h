/* The `ember` command's own pieces: one file per subcommand, dispatched by cli/commands.c (the
 * benchmarks come from bench/'s table). */
#ifndef EMBER_CLI_CLI_INTERNAL_H
#define EMBER_CLI_CLI_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* The `ember` command: argv[1] names the subcommand; the exit status (cli/commands.c). */
int cli_main(int argc, char **argv);

int cli_cmd_info(int argc, char **argv);     /* cli/info.c: build, devices, threads */
int cli_cmd_demo(int argc, char **argv);     /* cli/demo.c: a small regression with autograd */
int cli_cmd_train(int argc, char **argv);    /* cli/train_cmd.c: train a recipe */
int cli_cmd_eval(int argc, char **argv);     /* cli/train_cmd.c: evaluate a saved model */
int cli_cmd_summary(int argc, char **argv);  /* cli/summary_cmd.c: a model's module table */
int cli_cmd_lr_find(int argc, char **argv);  /* cli/lr_find_cmd.c: the lr range test */
int cli_cmd_compare(int argc, char **argv);  /* cli/compare_cmd.c: techniques side by side */
int cli_cmd_profile(int argc, char **argv);  /* cli/profile_cmd.c: where a step's time goes */
int cli_cmd_quantize(int argc, char **argv); /* cli/quantize_cmd.c: int8 quantization */
int cli_cmd_prune(int argc, char **argv);    /* cli/prune_cmd.c: prune, fine-tune, shrink */
int cli_cmd_export(int argc, char **argv);   /* cli/export_cmd.c: ONNX export */
int cli_cmd_serve(int argc, char **argv);    /* cli/serve_cmd.c: the HTTP inference server */
int cli_cmd_sample(int argc, char **argv);   /* cli/sample_cmd.c: text from a gpt model */

/* The command's OpenMP wait policy (cli/wait_policy.c): called first in main, it runs the
 * command again with ember's default GOMP_SPINCOUNT unless the environment sets a policy;
 * cli_wait_policy then says which is in effect. */
void cli_wait_policy_init(char **argv);
const char *cli_wait_policy(void);

/* "A:B", two micro-batch numbers counting from 1 with A <= B, into *first and *last (the
 * --profile-steps of ember train); false after printing what is wrong on stderr. */
bool cli_parse_step_range(const char *command, const char *option, const char *text,
                          int64_t *first, int64_t *last);

#endif
