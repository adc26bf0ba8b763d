/* The `ember` command line: one entry point that dispatches to a subcommand, or through bench/'s
 * table to a benchmark. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli_internal.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"info", cli_cmd_info, "build options, devices and threads"},
    {"demo", cli_cmd_demo, "fit a small linear regression with autograd"},
    {"train", cli_cmd_train, "train a reference recipe (mlp, cnn, deepmlp, gpt)"},
    {"eval", cli_cmd_eval, "test accuracy (gpt: val loss) of a saved model"},
    {"summary", cli_cmd_summary, "a model's modules, output shapes and parameter counts"},
    {"lr-find", cli_cmd_lr_find, "the learning-rate range test: a suggested lr and its curve"},
    {"compare", cli_cmd_compare, "each training technique off and on, side by side"},
    {"profile", cli_cmd_profile, "where a training step's time goes: a table and a trace"},
    {"quantize", cli_cmd_quantize, "INT8 quantization of a saved model"},
    {"prune", cli_cmd_prune, "prune (and fine-tune, shrink) a saved model"},
    {"export", cli_cmd_export, "write a saved model as an ONNX file"},
    {"serve", cli_cmd_serve, "serve a saved model over HTTP/JSON (batching, cache)"},
    {"sample", cli_cmd_sample, "text from a trained gpt model"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f, bool bench_only)
{
    fprintf(f, "usage: ember %s [options]\n\ncommands:\n", bench_only ? "bench WHAT" : "COMMAND");
    for (int i = 0; i < N_COMMANDS && !bench_only; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].help);
    for (int i = 0; i < bench_command_count; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench %s", bench_commands[i].name);
        fprintf(f, "  %-14s %s\n", name, bench_commands[i].help);
    }
    fprintf(f, "\n'ember COMMAND --help' describes a command's options; 'ember --version' "
               "prints the version.\n");
}

static bool is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

/* `ember bench WHAT ...` (argv[0] "bench") */
static int run_bench(int argc, char **argv)
{
    if (argc < 2 || is_help(argv[1])) {
        usage(argc < 2 ? stderr : stdout, true);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < bench_command_count; i++)
        if (!strcmp(argv[1], bench_commands[i].name))
            return bench_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ember: unknown command 'bench %s'\n\n", argv[1]);
    usage(stderr, true);
    return 2;
}

int cli_main(int argc, char **argv)
{
    cli_wait_policy_init(argv);
    if (argc < 2 || is_help(argv[1])) {
        usage(argc < 2 ? stderr : stdout, false);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ember %s\n", EMBER_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "bench"))
        return run_bench(argc - 1, argv + 1);
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ember: unknown command '%s'\n\n", argv[1]);
    usage(stderr, false);
    return 2;
}
