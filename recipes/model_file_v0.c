/* The model files of ember 0.1.0's older kinds, which hold no module tree: a training checkpoint
 * of version 1 (the model's tensors under "model."), a recipe's model file (em_module_save with
 * "recipe"; a pruned, shrunk or quantized one says so in its metadata: "ember.pruned",
 * "ember.quantized") and parameters alone. The model is the recipe's: built by it, or, for gpt,
 * sized by the file's gpt.* metadata, whose sizes are checked against sane limits and against the
 * tensors the file holds before the model is built, so that a small file cannot make ember
 * allocate a model of any size it names. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/model_file.h"

/* The largest sizes a gpt file may name: far above what the recipe trains, far below what
 * would exhaust memory before the tensor checks could matter. */
enum { MAX_LAYERS = 1024, MAX_EMBD = 1 << 16, MAX_BLOCK = 1 << 20 };

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
static em_status check_tensors(const em_safetensors *f, const em_gpt_settings *c,
                               const char *prefix, const char *path)
{
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

/* The settings f's metadata give (its tensors' names start with prefix), checked. */
static em_status read_gpt_settings(const em_safetensors *f, const char *prefix, const char *path,
                             em_gpt_settings *c)
{
    const char *chars = em_safetensors_meta(f, "gpt.vocab");
    em_char_vocab vocab;
    if (!chars || em_char_vocab_from(chars, strlen(chars), &vocab) != EM_OK)
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
    *c = (em_gpt_settings){.vocab_size = vocab.size, .n_layer = (int)n_layer, .n_head = n_head,
                         .n_embd = n_embd, .block_size = block};
    return check_tensors(f, c, prefix, path);
}

/* The model of rc's structure for f: rc's model, or a gpt of the size f's metadata gives. */
static em_module *structure(const recipe_spec *rc, const em_safetensors *f, const char *prefix,
                            const char *path)
{
    em_gpt_settings c;
    if (!rc->language_model)
        return rc->build(NULL);
    return read_gpt_settings(f, prefix, path, &c) == EM_OK ? em_gpt(c) : NULL;
}

/* The model part of a training checkpoint into model (the generator left as it was). */
static em_status load_checkpoint_model(em_module *model, const char *path)
{
    em_generator saved = *em_default_generator();
    em_train_state s = {.model = model};
    em_status st = em_train_checkpoint_load(path, &s);
    *em_default_generator() = saved;
    return st;
}

/* A model file of f's structure (pruned, shrunk or quantized as its metadata says) into model. */
static em_status load_model_file(em_module *model, const em_safetensors *f, const char *path)
{
    em_status st = em_prune_prepare_load(model, f);
    if (st == EM_OK)
        st = em_quantize_prepare_load(model, f);
    if (st == EM_OK)
        st = em_module_load(model, path);
    return st == EM_OK ? em_quantize_repack(model) : st;
}

em_status recipe_model_load_v0(const char *path, const recipe_spec *rc, recipe_model *out)
{
    if (!rc)
        return em_set_error(EM_ERR_ARG, "'%s' holds no module tree and names no recipe (a file "
                            "of weights alone): name the recipe whose model it holds", path);
    em_safetensors *f = NULL;
    em_status st = em_safetensors_load(path, &f);
    if (st != EM_OK)
        return st;
    const char *kind = em_safetensors_meta(f, "ember.kind");
    bool checkpoint = kind && !strcmp(kind, "train_checkpoint");
    bool version_1 = checkpoint && !em_safetensors_meta(f, "ember.checkpoint_version");
    out->model = structure(rc, f, version_1 ? "model." : "", path);
    if (!out->model)
        st = em_error_status();
    else if (checkpoint)
        st = load_checkpoint_model(out->model, path);
    else
        st = load_model_file(out->model, f, path);
    em_safetensors_free(f);
    return st;
}
