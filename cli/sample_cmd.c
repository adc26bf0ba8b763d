/* `ember sample gpt`: text from a trained gpt model, and `ember bench sample`'s arguments (its
 * measuring is bench/bench_sample.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "recipes/recipes.h"
#include "cmd/args.h"
#include "cli/cli_internal.h"

typedef struct {
    const char *load, *prompt;
    int64_t tokens, top_k;
    double temperature;
    uint64_t seed;
    int threads;
} sample_args;

/* The model and the prompt's ids (*n of them, malloc'd); false after printing why. */
static bool prepare(const char *command, const sample_args *a, em_module **model,
                    em_char_vocab *vocab, int64_t **ids, int64_t *n)
{
    if (a->threads)
        omp_set_num_threads(a->threads);
    size_t len = strlen(a->prompt);
    uint8_t *bytes = malloc(len > 0 ? len : 1);
    *ids = malloc((len > 0 ? len : 1) * sizeof **ids);
    em_status st = bytes && *ids ? recipe_gpt_load(a->load, model, vocab)
                                 : em_set_error(EM_ERR_MEMORY, "out of memory");
    if (st == EM_OK && len == 0)
        st = em_set_error(EM_ERR_ARG, "the prompt is empty");
    if (st == EM_OK && em_char_vocab_encode(vocab, a->prompt, len, bytes) != EM_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", em_error());
        em_error_clear();
        st = em_set_error(EM_ERR_ARG, "--prompt: %s of %s", why, a->load);
    }
    for (size_t i = 0; st == EM_OK && i < len; i++)
        (*ids)[i] = bytes[i];
    free(bytes);
    *n = (int64_t)len;
    if (st != EM_OK) {
        fprintf(stderr, "%s: %s\n", command, em_error());
        em_module_free(*model);
        free(*ids);
        return false;
    }
    return true;
}

static em_generate_opts generate_opts(const sample_args *a, bool no_cache)
{
    return (em_generate_opts){.sample = {.temperature = a->temperature, .top_k = a->top_k},
                              .seed = a->seed, .no_cache = no_cache};
}

#define SAMPLE_OPTS(a)                                                                         \
    {"load", CMD_OPT_STRING, &(a).load, "FILE", .help = "a model saved by ember train gpt --save", \
     .required = true},                                                                        \
    {"prompt", CMD_OPT_STRING, &(a).prompt, "TEXT",                                              \
     .help = "the text to continue (default: a newline)"},                                     \
    {"tokens", CMD_OPT_INT64, &(a).tokens, "N", "characters to generate (default 256)",         \
     .range = CMD_RANGE(1, 1e6)},                                                               \
    {"temperature", CMD_OPT_REAL, &(a).temperature, "T", "divides the logits (default 0.8)",     \
     .range = CMD_ABOVE(0)},                                                                    \
    {"top-k", CMD_OPT_INT64, &(a).top_k, "K", "sample among the K likeliest (default 0: all)", \
     .range = CMD_AT_LEAST(0)},                                                                 \
    {"seed", CMD_OPT_UINT64, &(a).seed, "S", .help = "random seed (default 0)"},               \
    {"threads", CMD_OPT_INT, &(a).threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)}

int cli_cmd_sample(int argc, char **argv)
{
    sample_args a = {.prompt = "\n", .tokens = 256, .temperature = 0.8};
    const char *recipe = NULL;
    bool no_cache = false;
    const cmd_opt opts[] = {
        SAMPLE_OPTS(a),
        {"no-cache", CMD_OPT_FLAG, &no_cache, NULL,
         .help = "recompute the whole context every step"},
        {0}};
    const cmd_spec spec = {
        .command = "ember sample", .operands = "gpt", .n_operands = 1, .operand = &recipe,
        .about = "Continues the prompt with text sampled from a trained gpt model: the text goes "
                 "to stdout,\ntokens/s to stderr. The same seed gives the same text.",
        .opts = opts};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (strcmp(recipe, "gpt")) {
        fprintf(stderr, "ember sample: only the gpt recipe samples text, not '%s'\n", recipe);
        return 2;
    }
    em_module *model = NULL;
    em_char_vocab vocab;
    int64_t *ids = NULL, n = 0, *out = malloc((size_t)a.tokens * sizeof *out);
    char *text = malloc((size_t)a.tokens + 1);
    if (!out || !text || !prepare(spec.command, &a, &model, &vocab, &ids, &n)) {
        free(out);
        free(text);
        return 1;
    }
    double t0 = bench_now_s();
    em_status st = em_gpt_generate(model, ids, n, a.tokens, generate_opts(&a, no_cache), out);
    double secs = bench_now_s() - t0;
    if (st == EM_OK)
        st = em_char_vocab_decode(&vocab, out, (size_t)a.tokens, text);
    if (st == EM_OK) {
        text[a.tokens] = '\0';
        printf("%s%s\n", a.prompt, text);
        fprintf(stderr, "ember sample: %lld characters in %.2f s, %.0f characters/s (%s)\n",
                (long long)a.tokens, secs, (double)a.tokens / secs,
                no_cache ? "no cache" : "key/value cache");
    } else {
        fprintf(stderr, "ember sample: %s\n", em_error());
    }
    em_module_free(model);
    free(ids);
    free(out);
    free(text);
    return st == EM_OK ? 0 : 1;
}

int bench_sample(int argc, char **argv)
{
    sample_args a = {.prompt = "\n", .tokens = 256, .temperature = 0.8};
    int rounds = 3;
    bool no_torch = false;
    const char *json = NULL;
    const cmd_opt opts[] = {
        SAMPLE_OPTS(a),
        {"rounds", CMD_OPT_INT, &rounds, "N", "timed rounds of each (default 3)",
         .range = CMD_RANGE(1, BENCH_SAMPLE_MAX_ROUNDS)},
        {"no-torch", CMD_OPT_FLAG, &no_torch, NULL, .help = "ember's figures only"},
        {"json", CMD_OPT_STRING, &json, "FILE", .help = "also write the figures as JSON"},
        {0}};
    const cmd_spec spec = {
        .command = "ember bench sample",
        .about = "Characters/s of ember sample gpt with the key/value cache and without it "
                 "(every step\nrunning the whole context), beside PyTorch generating from the "
                 "same model file with its\nown cache (bench/gpt_torch.py sample; $EMBER_PYTHON "
                 "runs it); rounds alternate, medians.",
        .opts = opts};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    em_module *model = NULL;
    em_char_vocab vocab;
    int64_t *ids = NULL, n = 0;
    if (json && em_atomic_check(json) != EM_OK) {
        fprintf(stderr, "%s: --json: %s\n", spec.command, em_error());
        return 1;
    }
    if (!prepare(spec.command, &a, &model, &vocab, &ids, &n))
        return 1;
    bench_sample_setup setup = {
        .model = model, .load = a.load, .prompt = a.prompt, .json = json, .ids = ids,
        .n_ids = n, .tokens = a.tokens, .opts = generate_opts(&a, false),
        .threads = omp_get_max_threads(), .rounds = rounds, .torch = !no_torch};
    em_status st = bench_sample_run(&setup);
    if (st != EM_OK)
        fprintf(stderr, "%s: %s\n", spec.command, em_error());
    em_module_free(model);
    free(ids);
    return st == EM_OK ? 0 : 1;
}
