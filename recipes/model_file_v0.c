/* Loading a gpt model file (`ember sample gpt --load`, `ember eval gpt`): the size its metadata
 * gives is checked against sane limits and against the tensors the file holds before the model
 * is built, so a small file cannot make ember allocate a model of any size it names. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/recipes.h"

/* The largest sizes a gpt file may name: far above what the recipe trains, far below what
 * would exhaust memory before the tensor checks could matter. The key/value cache of one
 * sampled sequence (n_layer x block_size x n_embd keys and as many values) is bounded too, as
 * its size is no multiple of the file's: 2^27 keys and values take 1 GiB (GPT-2 XL's 2^26.2). */
enum { MAX_LAYERS = 1024, MAX_EMBD = 1 << 16, MAX_BLOCK = 1 << 20 };
#define MAX_CACHE_KEYS ((int64_t)1 << 27)

/* The integer metadata entry key of f in [1, max], or -1 with an error naming the file, the
 * field and its value. */
static int64_t meta_int(const em_safetensors *f, const char *key, long long max,
                        const char *path)
{
    const char *v = em_safetensors_meta(f, key);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : -1;
    if (!v || *end || x < 1 || x > max) {
        em_set_error(EM_ERR_IO, "%s: the gpt metadata %s = %s is missing or out of range "
                     "(1 to %lld)", path, key, v ? v : "(none)", max);
        return -1;
    }
    return x;
}

/* Whether tensor t (`name` in the file) has the shape (rows, cols) that `fields` (the metadata
 * and its values) fix; else an error naming all of them. */
static bool has_shape(const em_tensor *t, const char *name, int64_t rows, int64_t cols,
                      const char *fields, const char *path)
{
    if (t && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols)
        return true;
    char buf[64];
    em_set_error(EM_ERR_IO, "%s: %s should be [%lld,%lld] (%s); the file holds %s", path, name,
                 (long long)rows, (long long)cols, fields,
                 t ? em_shape_str(t, buf, sizeof buf) : "no such tensor");
    return false;
}

/* The model's tensor `name` in f (a training checkpoint prefixes the model's names), or NULL;
 * full gets the name as the file spells it. */
static const em_tensor *model_tensor(const em_safetensors *f, const char *prefix,
                                     const char *name, char *full, size_t n)
{
    snprintf(full, n, "%s%s", prefix, name);
    return em_safetensors_get(f, full);
}

/* l when name is "h.<l>.self_attn.in_proj_weight", else -1 (a number too large for a long reads
 * as LONG_MAX). */
static long block_of(const char *name)
{
    if (strncmp(name, "h.", 2) || !isdigit((unsigned char)name[2]))
        return -1;
    char *end = NULL;
    long l = strtol(name + 2, &end, 10);
    return strcmp(end, ".self_attn.in_proj_weight") ? -1 : l;
}

/* The tensors whose shapes the metadata fixes and that pruning and quantization leave as they
 * are: wte.weight (vocab, E), wpe.weight (block_size, E) and each of the n_layer blocks'
 * h.<l>.self_attn.in_proj_weight (3E, E). The model built from c is then at most a few times
 * the size of the file. */
static em_status check_tensors(const em_safetensors *f, const em_gpt_config *c, const char *path)
{
    const char *kind = em_safetensors_meta(f, "ember.kind");
    bool version_1 = kind && !strcmp(kind, "train_checkpoint") &&
                     !em_safetensors_meta(f, "ember.checkpoint_version");
    const char *prefix = version_1 ? "model." : "";
    size_t skip = strlen(prefix);
    int64_t e = c->n_embd;
    char wte[64], wpe[64], by_vocab[96], by_block[96], by_embd[48];
    snprintf(by_vocab, sizeof by_vocab, "gpt.vocab of %lld characters, gpt.n_embd = %lld",
             (long long)c->vocab_size, (long long)e);
    snprintf(by_block, sizeof by_block, "gpt.block_size = %lld, gpt.n_embd = %lld",
             (long long)c->block_size, (long long)e);
    snprintf(by_embd, sizeof by_embd, "gpt.n_embd = %lld", (long long)e);
    if (!has_shape(model_tensor(f, prefix, "wte.weight", wte, sizeof wte), wte, c->vocab_size,
                   e, by_vocab, path) ||
        !has_shape(model_tensor(f, prefix, "wpe.weight", wpe, sizeof wpe), wpe, c->block_size,
                   e, by_block, path))
        return em_error_status();
    int blocks = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const char *name = f->names[i];
        long l = strncmp(name, prefix, skip) ? -1 : block_of(name + skip);
        if (l < 0)
            continue;
        if (l >= c->n_layer)
            return em_set_error(EM_ERR_IO, "%s: gpt.n_layer = %d, but the file holds %s", path,
                                c->n_layer, name);
        if (!has_shape(f->tensors[i], name, 3 * e, e, by_embd, path))
            return em_error_status();
        blocks++;
    }
    if (blocks != c->n_layer)
        return em_set_error(EM_ERR_IO, "%s: gpt.n_layer = %d, but the file holds the tensors of "
                            "%d block%s", path, c->n_layer, blocks, blocks == 1 ? "" : "s");
    return EM_OK;
}

/* The config f's metadata gives, checked; vocab gets the vocabulary. */
static em_status read_config(const em_safetensors *f, const char *path, em_gpt_config *c,
                             em_char_vocab *vocab)
{
    const char *recipe = em_safetensors_meta(f, "recipe");
    const char *chars = em_safetensors_meta(f, "gpt.vocab");
    if (!recipe || strcmp(recipe, "gpt"))
        return em_set_error(EM_ERR_ARG, "%s holds %s%s%s, not a gpt model", path,
                            recipe ? "a model of recipe '" : "no recipe's model",
                            recipe ? recipe : "", recipe ? "'" : "");
    if (!chars || em_char_vocab_from(chars, strlen(chars), vocab) != EM_OK)
        return em_set_error(EM_ERR_IO, "%s: the gpt vocabulary is missing or bad", path);
    int64_t n_layer = meta_int(f, "gpt.n_layer", MAX_LAYERS, path);
    int64_t n_embd = n_layer > 0 ? meta_int(f, "gpt.n_embd", MAX_EMBD, path) : -1;
    int64_t n_head = n_embd > 0 ? meta_int(f, "gpt.n_head", n_embd, path) : -1;
    int64_t block = n_head > 0 ? meta_int(f, "gpt.block_size", MAX_BLOCK, path) : -1;
    if (block < 0)
        return em_error_status();
    if (n_embd % n_head)
        return em_set_error(EM_ERR_IO, "%s: gpt.n_embd = %lld is not a multiple of gpt.n_head = "
                            "%lld", path, (long long)n_embd, (long long)n_head);
    if (n_layer * block * n_embd > MAX_CACHE_KEYS) /* at most 2^10 x 2^20 x 2^16 */
        return em_set_error(EM_ERR_IO, "%s: gpt.n_layer = %lld x gpt.block_size = %lld x "
                            "gpt.n_embd = %lld keys to cache a sequence are more than 2^27",
                            path, (long long)n_layer, (long long)block, (long long)n_embd);
    *c = (em_gpt_config){.vocab_size = vocab->size, .n_layer = (int)n_layer, .n_head = n_head,
                         .n_embd = n_embd, .block_size = block};
    return check_tensors(f, c, path);
}

em_status recipe_gpt_load(const char *path, em_module **model, em_char_vocab *vocab)
{
    *model = NULL;
    em_safetensors *f = NULL;
    em_status st = em_safetensors_load(path, &f);
    em_gpt_config c = {0};
    if (st == EM_OK)
        st = read_config(f, path, &c, vocab);
    em_safetensors_free(f);
    if (st != EM_OK)
        return st;
    *model = em_gpt(c);
    st = *model ? recipe_load_model_any(*model, recipe_find("gpt"), path) : em_error_status();
    if (st != EM_OK) {
        em_module_free(*model);
        *model = NULL;
    }
    return st;
}
