/* The one loader of model files (recipes/model_file.h): the metadata read from the header, then
 * em_model_load for a whole-model file, or the older kinds' reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/model_file.h"

#define MAX_CACHE_KEYS ((int64_t)1 << 27) /* 1 GiB of keys and values: GPT-2 XL's are 2^26.2 */

bool recipe_shape_parse(const char *text, em_shape *s)
{
    em_shape out = {0};
    const char *p = text;
    while (p && *p && out.ndim < 7) {
        char *end = NULL;
        long long d = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : 0;
        if (d < 1 || d > 2147483647LL || (*end && *end != ','))
            return false;
        out.d[out.ndim++] = d;
        p = *end ? end + 1 : NULL;
    }
    if (p || out.ndim == 0)
        return false;
    *s = out;
    return true;
}

/* The recipe the file's metadata names (NULL: one this ember does not know), else the one the
 * caller gave (NULL: none), checked against it. */
static em_status file_recipe(const em_safetensors *meta, const char *path, const recipe_spec *rc,
                             const recipe_spec **out)
{
    const char *name = em_safetensors_meta(meta, "recipe");
    if (rc && name && strcmp(name, rc->name))
        return em_set_error(EM_ERR_ARG, "'%s' holds a model of the %s recipe, not of %s", path,
                            name, rc->name);
    *out = name ? recipe_find(name) : rc;
    return EM_OK;
}

/* The input shape and vocabulary the metadata gives. */
static em_status file_io(const em_safetensors *meta, const char *path, recipe_model *m)
{
    const char *shape = em_safetensors_meta(meta, "input_shape");
    const char *vocab = em_safetensors_meta(meta, "gpt.vocab");
    if (shape && !recipe_shape_parse(shape, &m->input))
        return em_set_error(EM_ERR_IO, "%s: input_shape '%.64s' is no list of sizes (\"1,28,28\")",
                            path, shape);
    if (!shape && m->recipe)
        m->input = m->recipe->sample;
    if (vocab && em_char_vocab_from(vocab, strlen(vocab), &m->vocab) != EM_OK)
        return em_set_error(EM_ERR_IO, "%s: the gpt vocabulary is bad", path);
    return EM_OK;
}

em_status recipe_model_load(const char *path, const recipe_spec *rc, recipe_model *out)
{
    *out = (recipe_model){0};
    em_safetensors *meta = NULL;
    em_status st = em_safetensors_load_meta(path, &meta);
    if (st == EM_OK)
        st = file_recipe(meta, path, rc, &out->recipe);
    bool whole = st == EM_OK && em_safetensors_meta(meta, "ember.model");
    if (st == EM_OK && whole && !(out->model = em_model_load(path)))
        st = em_error_status();
    else if (st == EM_OK && !whole)
        st = recipe_model_load_v0(path, out->recipe, out);
    if (st == EM_OK)
        st = file_io(meta, path, out);
    em_safetensors_free(meta);
    if (st != EM_OK)
        recipe_model_free(out);
    return st;
}

void recipe_model_free(recipe_model *m)
{
    em_module_free(m->model);
    *m = (recipe_model){0};
}

void recipe_model_meta(const recipe_model *m, recipe_meta *out)
{
    *out = (recipe_meta){0};
    if (m->recipe) {
        recipe_meta_put(out, "recipe", "%s", m->recipe->name);
        m->recipe->meta(m->recipe, m->model, &m->vocab, out);
        return;
    }
    char shape[96];
    recipe_shape_text(m->input, shape, sizeof shape);
    if (m->input.ndim)
        recipe_meta_put(out, "input_shape", "%s", shape);
    if (m->vocab.size)
        recipe_meta_put(out, "gpt.vocab", "%.*s", m->vocab.size, m->vocab.chars);
}

em_status recipe_model_gpt(const recipe_model *m, const char *path, em_gpt_settings *c)
{
    if (!recipe_is_gpt(m->model, c))
        return em_set_error(EM_ERR_ARG, "%s holds %s%s%s, not a gpt model", path,
                            m->recipe ? "a model of recipe '" : "no gpt",
                            m->recipe ? m->recipe->name : "", m->recipe ? "'" : "");
    if (m->vocab.size != c->vocab_size)
        return em_set_error(EM_ERR_IO, "%s: the gpt vocabulary is missing or not the model's "
                            "(%d characters for %lld tokens)", path, m->vocab.size,
                            (long long)c->vocab_size);
    if ((int64_t)c->n_layer * c->block_size > MAX_CACHE_KEYS / c->n_embd)
        return em_set_error(EM_ERR_IO, "%s: n_layer = %d x block_size = %lld x n_embd = %lld "
                            "keys to cache a sequence are more than 2^27", path, c->n_layer,
                            (long long)c->block_size, (long long)c->n_embd);
    return EM_OK;
}
