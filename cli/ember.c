/* The `ember` command line: one entry point that dispatches to a subcommand. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_internal.h"

typedef struct {
    const char *name;
    const char *sub; /* second word, or NULL */
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"info", NULL, cli_cmd_info, "build options, devices and threads"},
    {"demo", NULL, cli_cmd_demo, "fit a small linear regression with autograd"},
    {"train", NULL, cli_cmd_train, "train a reference recipe (mlp, cnn, deepmlp) on Fashion-MNIST"},
    {"eval", NULL, cli_cmd_eval, "test accuracy of a saved recipe model"},
    {"summary", NULL, cli_cmd_summary, "a recipe's modules, output shapes and parameter counts"},
    {"compare", NULL, cli_cmd_compare, "each training technique off and on, side by side"},
    {"profile", NULL, cli_cmd_profile, "where a training step's time goes: a table and a trace"},
    {"bench", "ops", bench_ops, "kernel throughput next to BLAS and memcpy references"},
    {"bench", "train", bench_train, "training samples/s of the recipes, ember vs PyTorch"},
    {"bench", "dist", bench_dist, "allreduce vs MPI, 1 x N threads vs N x 1 DDP (mpirun)"},
    {"quantize", NULL, cli_cmd_quantize, "dynamic INT8 quantization of a saved recipe model"},
    {"prune", NULL, cli_cmd_prune, "prune (and fine-tune, shrink) a saved recipe model"},
    {"export", NULL, cli_cmd_export, "write a saved recipe model as an ONNX file"},
    {"serve", NULL, cli_cmd_serve, "serve a saved recipe model over HTTP/JSON (batching, cache)"},
    {"bench", "serve", bench_serve, "the inference server under load: batching, cache, priorities"},
    {"bench", "infer", bench_infer, "inference latency of f32, int8, pruned vs PyTorch"},
    {"bench", "attention", bench_attention, "fused attention vs the composition: bytes, time"},
    {"sample", NULL, cli_cmd_sample, "text from a trained gpt model"},
    {"bench", "sample", bench_sample, "gpt sampling speed with and without the KV cache"},
};

static void usage(FILE *f, const char *group)
{
    fprintf(f, "usage: ember %s [options]\n\ncommands:\n", group ? "bench WHAT" : "COMMAND");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const command *c = &commands[i];
        if (group && strcmp(c->name, group))
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", c->name, c->sub ? " " : "", c->sub ? c->sub : "");
        fprintf(f, "  %-14s %s\n", name, c->help);
    }
    fprintf(f, "\n'ember COMMAND --help' describes a command's options; 'ember --version' "
               "prints the version.\n");
}

static bool is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

int main(int argc, char **argv)
{
    cli_wait_policy_init(argv);
    if (argc < 2 || is_help(argv[1])) {
        usage(argc < 2 ? stderr : stdout, NULL);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ember %s\n", EMBER_VERSION);
        return 0;
    }
    bool group = false;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const command *c = &commands[i];
        if (strcmp(argv[1], c->name))
            continue;
        if (!c->sub)
            return c->run(argc - 1, argv + 1);
        group = true;
        if (argc >= 3 && !strcmp(argv[2], c->sub))
            return c->run(argc - 2, argv + 2);
    }
    if (group && (argc < 3 || is_help(argv[2]))) {
        usage(argc < 3 ? stderr : stdout, argv[1]);
        return argc < 3 ? 2 : 0;
    }
    fprintf(stderr, "ember: unknown command '%s%s%s'\n\n", argv[1], group ? " " : "",
            group ? argv[2] : "");
    usage(stderr, group ? argv[1] : NULL);
    return 2;
}
