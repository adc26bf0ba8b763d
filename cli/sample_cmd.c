/* `ember sample [gpt] --load FILE`: text from a trained GPT (its vocabulary in the same file),
 * the characters/s on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cmd/sample.h"
#include "cli/cli_internal.h"

int cli_cmd_sample(int argc, char **argv)
{
    cmd_sample_args a = {.prompt = "\n", .tokens = 256, .temperature = 0.8};
    const char *recipe = NULL;
    bool no_cache = false;
    const cmd_opt opts[] = {
        CMD_SAMPLE_OPTS(a),
        {"no-cache", CMD_OPT_FLAG, &no_cache, NULL,
         .help = "recompute the whole context every step"},
        {0}};
    const cmd_spec spec = {
        .command = "ember sample", .operands = "gpt", .n_operands = 1, .operand = &recipe,
        .operands_optional = true,
        .about = "Continues the prompt with text sampled from a trained gpt model (a GPT whose "
                 "file holds its\nvocabulary, gpt.vocab): the text goes to stdout, tokens/s to "
                 "stderr. The same seed gives the\nsame text.",
        .opts = opts};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (recipe && strcmp(recipe, "gpt")) {
        fprintf(stderr, "ember sample: only the gpt recipe samples text, not '%s'\n", recipe);
        return 2;
    }
    em_module *model = NULL;
    em_char_vocab vocab;
    int64_t *ids = NULL, n = 0, *out = malloc((size_t)a.tokens * sizeof *out);
    char *text = malloc((size_t)a.tokens + 1);
    if (!out || !text || !cmd_sample_prepare(spec.command, &a, &model, &vocab, &ids, &n)) {
        free(out);
        free(text);
        return 1;
    }
    double t0 = bench_now_s();
    em_status st = em_gpt_generate(model, ids, n, a.tokens,
                                   cmd_sample_generate_opts(&a, no_cache), out);
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
