/* What `ember sample` and `ember bench sample` share: a sampling run's options, and the gpt model
 * and the prompt's token ids it starts from. */
#ifndef EMBER_CMD_SAMPLE_H
#define EMBER_CMD_SAMPLE_H

#include "cmd/args.h"
#include "ember.h"

typedef struct {
    const char *load, *prompt;
    int64_t tokens, top_k;
    double temperature;
    uint64_t seed;
    int threads;
} cmd_sample_args;

/* The options that set a cmd_sample_args, as entries of a cmd_opt table. */
#define CMD_SAMPLE_OPTS(a)                                                                   \
    {"load", CMD_OPT_STRING, &(a).load, "FILE", .help = "a gpt model (ember train gpt --save)",  \
     .required = true},                                                                      \
    {"prompt", CMD_OPT_STRING, &(a).prompt, "TEXT",                                          \
     .help = "the text to continue (default: a newline)"},                                   \
    {"tokens", CMD_OPT_INT64, &(a).tokens, "N", "characters to generate (default 256)",      \
     .range = CMD_RANGE(1, 1e6)},                                                            \
    {"temperature", CMD_OPT_REAL, &(a).temperature, "T", "divides the logits (default 0.8)", \
     .range = CMD_ABOVE(0)},                                                                 \
    {"top-k", CMD_OPT_INT64, &(a).top_k, "K", "sample among the K likeliest (default 0: all)", \
     .range = CMD_AT_LEAST(0)},                                                              \
    {"seed", CMD_OPT_UINT64, &(a).seed, "S", .help = "random seed (default 0)"},             \
    {"threads", CMD_OPT_INT, &(a).threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)}

/* The gpt model a->load holds with its vocabulary, and the prompt's ids (*n of them, malloc'd);
 * false after printing why on stderr. */
bool cmd_sample_prepare(const char *command, const cmd_sample_args *a, em_module **model,
                        em_char_vocab *vocab, int64_t **ids, int64_t *n);
/* em_gpt_generate's options for a (seed, temperature, top-k) with or without the cache. */
em_generate_opts cmd_sample_generate_opts(const cmd_sample_args *a, bool no_cache);

#endif
