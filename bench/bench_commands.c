/* The table of `ember bench` subcommands, in the order `ember bench --help` lists them. */
#include "bench/bench.h"

const bench_command bench_commands[] = {
    {"ops", bench_ops, "kernel throughput next to BLAS and memcpy references"},
    {"train", bench_train, "training samples/s of the recipes, ember vs PyTorch"},
    {"dist", bench_dist, "allreduce vs MPI, 1 x N threads vs N x 1 DDP (mpirun)"},
    {"serve", bench_serve, "the inference server under load: batching, cache, priorities"},
    {"infer", bench_infer, "inference latency of f32, int8, pruned vs PyTorch"},
    {"attention", bench_attention, "fused attention vs the composition: bytes, time"},
    {"sample", bench_sample, "gpt sampling speed with and without the key/value cache"},
};

const int bench_command_count = sizeof bench_commands / sizeof bench_commands[0];
