/* `ember bench sample`: characters/s of em_gpt_generate with the key/value cache and without it,
 * in rounds alternating with PyTorch generating from the same model file (bench/gpt_torch.py
 * sample: its own cache, the same restarts), then the table and the JSON. */
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cmd/sample.h"

#define MAX_ROUNDS 9

/* The rounds' setting: the model, the prompt, what to generate and how often. */
typedef struct {
    em_module *model;       /* a gpt, loaded from load */
    const char *load, *prompt, *json;
    const int64_t *ids;     /* (n_ids) the prompt's tokens */
    int64_t n_ids, tokens;  /* tokens: characters to generate */
    em_generate_opts opts;  /* sampling and seed; no_cache is set per run */
    int threads, rounds;
    bool torch;             /* run PyTorch beside */
} sample_setup;

enum { CACHE, NO_CACHE, N_WAYS };
static const char *const way_names[N_WAYS] = {"cache", "no_cache"};
static const char *const way_rows[N_WAYS] = {"key/value cache", "whole context each step"};

/* What the rounds measure: characters/s per way and round, ember's and PyTorch's. */
typedef struct {
    double ember[N_WAYS][MAX_ROUNDS], torch[N_WAYS][MAX_ROUNDS];
    bool torch_ran;  /* every PyTorch round ran */
    int64_t agree;   /* the leading characters ember's cached and uncached runs share */
} sample_rounds;

/* A `cache chars_per_s X` or `no_cache chars_per_s X` line of gpt_torch.py into ctx (N_WAYS) */
static void torch_line(void *ctx, const char *line)
{
    double *per_way = ctx, x;
    for (int w = 0; w < N_WAYS; w++) {
        char fmt[40];
        snprintf(fmt, sizeof fmt, "%s chars_per_s %%lf", way_names[w]);
        if (sscanf(line, fmt, &x) == 1)
            per_way[w] = x;
    }
}

/* s in single quotes for the shell, into out (n bytes) */
static void shell_quote(const char *s, char *out, size_t n)
{
    size_t k = 0;
    out[k++] = '\'';
    for (; *s && k + 6 < n; s++)
        if (*s == '\'')
            k += (size_t)snprintf(out + k, n - k, "'\\''");
        else
            out[k++] = *s;
    out[k++] = '\'';
    out[k] = '\0';
}

static double median(double *v, int n)
{
    bench_sort_doubles(v, n);
    return v[n / 2];
}

/* The rounds: ember with the cache, ember without, PyTorch both ways; ember's tokens into out
 * (two arrays of s->tokens). */
static em_status run_rounds(const sample_setup *s, int64_t *out[N_WAYS],
                            sample_rounds *m)
{
    char load[1100], prompt[2100], args[4000];
    shell_quote(s->load, load, sizeof load);
    shell_quote(s->prompt, prompt, sizeof prompt);
    snprintf(args, sizeof args, "sample --load %s --prompt %s --tokens %lld --temperature %.17g "
             "--top-k %lld --seed %llu --threads %d", load, prompt, (long long)s->tokens,
             s->opts.sample.temperature, (long long)s->opts.sample.top_k,
             (unsigned long long)s->opts.seed, s->threads);
    m->torch_ran = s->torch;
    for (int r = 0; r < s->rounds; r++) {
        for (int w = 0; w < N_WAYS; w++) {
            em_generate_opts o = s->opts;
            o.no_cache = w == NO_CACHE;
            double t0 = bench_now_s();
            if (em_gpt_generate(s->model, s->ids, s->n_ids, s->tokens, o, out[w]) != EM_OK)
                return em_error_status();
            m->ember[w][r] = (double)s->tokens / (bench_now_s() - t0);
        }
        double per_way[N_WAYS] = {0};
        m->torch_ran = m->torch_ran && bench_run_torch_script("gpt_torch.py", args, torch_line,
                                                           per_way);
        for (int w = 0; w < N_WAYS; w++)
            m->torch[w][r] = per_way[w];
    }
    m->agree = 0;
    while (m->agree < s->tokens && out[CACHE][m->agree] == out[NO_CACHE][m->agree])
        m->agree++;
    return EM_OK;
}

/* The medians of the rounds into ember[] and torch[] (0 where PyTorch did not run). */
static void medians(const sample_setup *s, sample_rounds *m, double ember[N_WAYS],
                    double torch[N_WAYS])
{
    for (int w = 0; w < N_WAYS; w++) {
        ember[w] = median(m->ember[w], s->rounds);
        torch[w] = m->torch_ran ? median(m->torch[w], s->rounds) : 0;
    }
}

static void print_table(const sample_setup *s, const sample_rounds *m,
                        const double ember[N_WAYS], const double torch[N_WAYS])
{
    em_gpt_settings c = {0};
    em_gpt_settings_of(s->model, &c);
    printf("ember bench sample: %lld characters after a %lld-character prompt, block %lld, "
           "%d threads, median of %d rounds alternating ember and PyTorch\n",
           (long long)s->tokens, (long long)s->n_ids, (long long)c.block_size, s->threads,
           s->rounds);
    if (!s->torch)
        printf("no PyTorch beside (--no-torch)\n");
    if (!m->torch_ran) {
        printf("%-24s %14s\n", "", "ember chars/s");
        for (int w = 0; w < N_WAYS; w++)
            printf("%-24s %14.0f\n", way_rows[w], ember[w]);
        printf("%-24s %13.1fx\n", "cache speedup", ember[CACHE] / ember[NO_CACHE]);
    } else {
        printf("beside %s\n", bench_torch_about());
        printf("%-24s %14s %14s %12s\n", "", "ember chars/s", "torch chars/s", "ember/torch");
        for (int w = 0; w < N_WAYS; w++)
            printf("%-24s %14.0f %14.0f %11.2fx\n", way_rows[w], ember[w], torch[w],
                   ember[w] / torch[w]);
        printf("%-24s %13.1fx %13.1fx\n", "cache speedup", ember[CACHE] / ember[NO_CACHE],
               torch[CACHE] / torch[NO_CACHE]);
    }
    printf("the first %lld characters agree (the cache restarts once the context outgrows the "
           "block)\n", (long long)m->agree);
}

/* v rounded to decimals places under key, or null where it was not measured (0) */
static void set_figure(json_t *obj, const char *key, double v, int decimals)
{
    if (v > 0)
        em_json_set_real(obj, key, v, decimals);
    else
        json_object_set_new(obj, key, json_null());
}

/* {"threads","rounds","tokens","prompt_chars","torch","cache":{"chars_per_s",
 * "torch_chars_per_s","ratio"},"no_cache":{...}} with null where PyTorch did not run */
static em_status write_json(const sample_setup *s, const double ember[N_WAYS],
                            const double torch[N_WAYS])
{
    json_t *j = json_pack("{s:i, s:i, s:I, s:I}", "threads", s->threads, "rounds", s->rounds,
                          "tokens", (json_int_t)s->tokens, "prompt_chars", (json_int_t)s->n_ids);
    if (!j)
        return em_set_error(EM_ERR_MEMORY, "ember bench sample: --json: out of memory");
    json_object_set_new(j, "torch", torch[CACHE] > 0 ? json_string(bench_torch_about())
                                                     : json_null());
    for (int w = 0; w < N_WAYS; w++) {
        json_t *o = json_object();
        set_figure(o, "chars_per_s", ember[w], 1);
        set_figure(o, "torch_chars_per_s", torch[w], 1);
        set_figure(o, "ratio", torch[w] > 0 ? ember[w] / torch[w] : 0, 2);
        json_object_set_new(j, way_names[w], o);
    }
    em_status st = em_json_save(s->json, j);
    json_decref(j);
    return st;
}

/* Runs the rounds, prints the table and writes the JSON (when asked). */
static em_status run(const sample_setup *s)
{
    int64_t *out[N_WAYS] = {malloc((size_t)s->tokens * sizeof(int64_t)),
                            malloc((size_t)s->tokens * sizeof(int64_t))};
    sample_rounds m = {0};
    em_status st = out[CACHE] && out[NO_CACHE]
                       ? run_rounds(s, out, &m)
                       : em_set_error(EM_ERR_MEMORY, "ember bench sample: out of memory");
    free(out[CACHE]);
    free(out[NO_CACHE]);
    if (st != EM_OK)
        return st;
    double ember[N_WAYS], torch[N_WAYS];
    medians(s, &m, ember, torch);
    print_table(s, &m, ember, torch);
    return s->json ? write_json(s, ember, torch) : EM_OK;
}

int bench_sample(int argc, char **argv)
{
    cmd_sample_args a = {.prompt = "\n", .tokens = 256, .temperature = 0.8};
    int rounds = 3;
    bool no_torch = false;
    const char *json = NULL;
    const cmd_opt opts[] = {
        CMD_SAMPLE_OPTS(a),
        {"rounds", CMD_OPT_INT, &rounds, "N", "timed rounds of each (default 3)",
         .range = CMD_RANGE(1, MAX_ROUNDS)},
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
    if (json && em_atomic_file_check(json) != EM_OK) {
        fprintf(stderr, "%s: --json: %s\n", spec.command, em_error());
        return 1;
    }
    if (!cmd_sample_prepare(spec.command, &a, &model, &vocab, &ids, &n))
        return 1;
    sample_setup setup = {
        .model = model, .load = a.load, .prompt = a.prompt, .json = json, .ids = ids,
        .n_ids = n, .tokens = a.tokens, .opts = cmd_sample_generate_opts(&a, false),
        .threads = omp_get_max_threads(), .rounds = rounds, .torch = !no_torch};
    em_status st = run(&setup);
    if (st != EM_OK)
        fprintf(stderr, "%s: %s\n", spec.command, em_error());
    em_module_free(model);
    free(ids);
    return st == EM_OK ? 0 : 1;
}
