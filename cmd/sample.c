/* What `ember sample` and `ember bench sample` share (cmd/sample.h). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/sample.h"
#include "recipes/model_file.h"

/* The gpt model in path with its vocabulary (a file that names a recipe names gpt). */
static em_status load_gpt(const char *path, em_module **model, em_char_vocab *vocab)
{
    recipe_model m;
    em_gpt_settings c;
    em_status st = recipe_model_load(path, recipe_find("gpt"), &m);
    if (st == EM_OK && (st = recipe_model_gpt(&m, path, &c)) == EM_OK) {
        *model = m.model;
        *vocab = m.vocab;
        m.model = NULL;
    }
    recipe_model_free(&m);
    return st;
}

bool cmd_sample_prepare(const char *command, const cmd_sample_args *a, em_module **model,
                        em_char_vocab *vocab, int64_t **ids, int64_t *n)
{
    if (a->threads)
        omp_set_num_threads(a->threads);
    size_t len = strlen(a->prompt);
    uint8_t *bytes = malloc(len > 0 ? len : 1);
    *model = NULL;
    *ids = malloc((len > 0 ? len : 1) * sizeof **ids);
    em_status st = bytes && *ids ? load_gpt(a->load, model, vocab)
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

em_generate_opts cmd_sample_generate_opts(const cmd_sample_args *a, bool no_cache)
{
    return (em_generate_opts){.sample = {.temperature = a->temperature, .top_k = a->top_k},
                              .seed = a->seed, .no_cache = no_cache};
}
