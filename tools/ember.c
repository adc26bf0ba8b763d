/* The `ember` command line: one entry point that dispatches to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "tools/tools_internal.h"

typedef struct {
    const char *name;
    const char *sub; /* second word, or NULL */
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"info", NULL, em_cmd_info, "build options, devices and threads"},
    {"demo", NULL, em_cmd_demo, "fit a small linear regression with autograd"},
    {"train", NULL, em_cmd_train, "train a reference recipe (mlp, cnn, deepmlp) on Fashion-MNIST"},
    {"eval", NULL, em_cmd_eval, "test accuracy of a saved recipe model"},
    {"compare", NULL, em_cmd_compare, "each training technique off and on, side by side"},
    {"bench", "ops", em_bench_ops, "kernel throughput next to BLAS and memcpy references"},
    {"bench", "train", em_bench_train, "training samples/s of the recipes, ember vs PyTorch"},
    {"quantize", NULL, em_cmd_quantize, "dynamic INT8 quantization of a saved recipe model"},
    {"prune", NULL, em_cmd_prune, "prune (and fine-tune, shrink) a saved recipe model"},
    {"bench", "infer", em_bench_infer, "inference latency of f32, int8, pruned vs PyTorch"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: ember COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", commands[i].name, commands[i].sub ? " " : "",
                 commands[i].sub ? commands[i].sub : "");
        fprintf(f, "  %-14s %s\n", name, commands[i].help);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const command *c = &commands[i];
        if (strcmp(argv[1], c->name))
            continue;
        if (!c->sub)
            return c->run(argc - 1, argv + 1);
        if (argc >= 3 && !strcmp(argv[2], c->sub))
            return c->run(argc - 2, argv + 2);
    }
    fprintf(stderr, "ember: unknown command '%s%s%s'\n\n", argv[1], argc >= 3 ? " " : "",
            argc >= 3 ? argv[2] : "");
    usage(stderr);
    return 2;
}
