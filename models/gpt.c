/* GPT: a decoder-only transformer language model in GPT-2's shape. Token and position
 * embeddings, a stack of pre-LN causal transformer blocks with GELU feed-forward, a final
 * LayerNorm and an LM head tied to the token embedding; GPT-2's initialisation; a forward that
 * reads and extends a key/value cache for generation. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gpt.h"
#include "models/gpt_internal.h"
#include "nn/nn_internal.h"

/* em_gpt_settings's values as the type's settings hold them */
typedef struct {
    int64_t vocab_size, block_size, n_layer, n_head, n_embd;
    double dropout;
} gpt_options;

typedef struct {
    em_module base;
    gpt_options o;
} gpt_model;

/* the children */
enum { WTE, WPE, DROP, BLOCKS, LN_F, N_CHILDREN };

static em_module *child(em_module *m, int i)
{
    return m->children[i].module;
}

bool em_gpt_settings_of(const em_module *m, em_gpt_settings *c)
{
    if (!m || em_module_own_type(m) != &em_gpt_type) {
        em_set_error(EM_ERR_ARG, "em_gpt: the module is %s, not a GPT",
                     m ? m->type->type_name : "NULL");
        return false;
    }
    const gpt_options *o = &((const gpt_model *)m)->o;
    *c = (em_gpt_settings){.vocab_size = o->vocab_size, .block_size = o->block_size,
                         .n_layer = (int)o->n_layer, .n_head = o->n_head, .n_embd = o->n_embd,
                         .dropout = o->dropout};
    return true;
}

em_tensor *em_gpt_forward(em_module *m, const em_tensor *idx, em_kv_cache *cache)
{
    const char *fn = "em_gpt_forward";
    em_gpt_settings c;
    if (!idx || !em_gpt_settings_of(m, &c))
        return NULL;
    int64_t at = em_kv_cache_len(cache);
    char buf[64];
    if (idx->ndim != 2 || idx->dtype != EM_I64 || at + idx->shape[1] > c.block_size) {
        em_set_error(EM_ERR_ARG, "%s: needs i64 token ids (B, T) with %lld cached + T <= "
                     "block_size %lld, got %s %s", fn, (long long)at, (long long)c.block_size,
                     em_dtype_name(idx->dtype), em_shape_str(idx, buf, sizeof buf));
        return NULL;
    }
    int64_t t = idx->shape[1];
    em_scope_begin();
    em_tensor *pos = em_arange((double)at, (double)(at + t), 1, EM_I64);          // (T)
    if (pos && idx->device != EM_CPU)
        pos = em_to_device(pos, idx->device);
    em_tensor *x = em_add(em_forward(child(m, WTE), idx), em_forward(child(m, WPE), pos));
    x = em_forward(child(m, DROP), x);                                            // (B, T, E)
    em_module *blocks = child(m, BLOCKS);
    for (int l = 0; l < blocks->n_children && x; l++) {
        em_module *block = blocks->children[l].module;
        x = cache ? em_transformer_layer_forward(block, x, cache, l) : em_forward(block, x);
    }
    x = em_forward(child(m, LN_F), x);
    em_tensor *logits = em_linear(x, child(m, WTE)->params[0].value, NULL);      // (B, T, V)
    if (logits && cache && em_kv_cache_advance(cache, t) != EM_OK)
        logits = NULL;
    return em_nn_scope_return(logits);
}

em_kv_cache *em_gpt_kv_cache_new(const em_module *m, int64_t batch)
{
    em_gpt_settings c;
    if (!em_gpt_settings_of(m, &c))
        return NULL;
    return em_kv_cache_new(c.n_layer, batch, c.n_head, c.block_size, c.n_embd / c.n_head,
                           EM_F32);
}

em_status em_gpt_checkpoint_blocks(em_module *m)
{
    em_gpt_settings c;
    if (!em_gpt_settings_of(m, &c))
        return em_error_status();
    em_module *blocks = child(m, BLOCKS);
    for (int l = 0; l < blocks->n_children; l++)
        if (!em_checkpoint_module(blocks->children[l].module))
            return em_error_status();
    return EM_OK;
}

static em_tensor *gpt_forward(em_module *m, const em_tensor *idx)
{
    return em_gpt_forward(m, idx, NULL);
}

/* Its own part of a forward: the positions' add (1 per embedding element) and the LM head's
 * product, 2 E V per token (the blocks, embeddings and ln_f count their own). */
static double gpt_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const gpt_options *o = em_module_options(m);
    double tokens = (double)(em_numel(y) / o->vocab_size), e = (double)o->n_embd;
    return tokens * (e + 2 * e * (double)o->vocab_size);
}

/* token and position embeddings, the blocks (feed-forward 4E), ln_f */
static double gpt_elements(const void *options)
{
    const gpt_options *o = options;
    double e = (double)o->n_embd;
    return ((double)o->vocab_size + (double)o->block_size) * e +
           (double)o->n_layer * em_transformer_layer_elements(e, 4 * e) + 2 * e;
}

static bool gpt_check(const void *options, char *why, size_t n)
{
    const gpt_options *o = options;
    return em_check_divides("n_head", o->n_head, "n_embd", o->n_embd, why, n);
}

static em_module *gpt_build(const em_module_type *type, const void *options,
                            em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const gpt_options *o = options;
    return em_gpt((em_gpt_settings){.vocab_size = o->vocab_size, .block_size = o->block_size,
                                  .n_layer = (int)o->n_layer, .n_head = o->n_head,
                                  .n_embd = o->n_embd, .dropout = o->dropout});
}

static const em_setting gpt_settings[] = {
    EM_SIZE_SETTING(gpt_options, vocab_size, 1, 0),
    EM_SIZE_SETTING(gpt_options, block_size, 1, 0),
    {.name = "n_layer", .kind = EM_SETTING_INT, .offset = offsetof(gpt_options, n_layer),
     .min = 1, .max = 100000},
    EM_SIZE_SETTING(gpt_options, n_head, 1, 0),
    EM_SIZE_SETTING(gpt_options, n_embd, 1, 0),
    EM_REAL_SETTING(gpt_options, dropout, 0, 1, 0),
};

EM_MODULE_TYPE(em_gpt_type) = {
    .type_name = "GPT",
    .forward = gpt_forward,
    EM_SETTINGS(gpt_settings),
    .options_offset = offsetof(gpt_model, o),
    .options_size = sizeof(gpt_options),
    .build = gpt_build,
    .check = gpt_check,
    .tensor_elements = gpt_elements,
    .flops = gpt_flops,
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* GPT-2's initialisation: matrices and embeddings N(0, 0.02), the projections back into the
 * residual stream (attention's out_proj, the feed-forward's linear2) N(0, 0.02 / sqrt(2 L)),
 * biases 0, LayerNorms 1 and 0. */
static em_status gpt2_init(em_module *m, int n_layer)
{
    int n = em_module_parameters(m, NULL, 0);
    if (n < 0)
        return em_error_status();
    em_param_ref *refs = malloc((size_t)(n ? n : 1) * sizeof *refs);
    if (!refs)
        return em_set_error(EM_ERR_MEMORY, "em_gpt: out of memory for %d parameters", n);
    if (em_module_parameters(m, refs, n) != n) {
        free(refs);
        return em_error_status();
    }
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++) {
        const char *name = refs[i].name;
        em_tensor *p = refs[i].value;
        if (strstr(name, "norm") || !strncmp(name, "ln_f.", 5))
            st = ends_with(name, "weight") ? em_fill_(p, 1.0) : em_zero_(p);
        else if (ends_with(name, "bias"))
            st = em_zero_(p);
        else if (ends_with(name, "out_proj.weight") || ends_with(name, "linear2.weight"))
            st = em_normal_(p, 0.0, 0.02 / sqrt(2.0 * n_layer), NULL);
        else
            st = em_normal_(p, 0.0, 0.02, NULL);
    }
    free(refs);
    return st;
}

em_module *em_gpt(em_gpt_settings c)
{
    if (c.vocab_size < 1 || c.block_size < 1 || c.n_layer < 1 || c.n_head < 1 ||
        c.n_embd < 1 || c.n_embd % c.n_head || !(c.dropout >= 0 && c.dropout < 1)) {
        em_set_error(EM_ERR_ARG, "em_gpt: bad settings: vocab_size %lld, block_size %lld, "
                     "n_layer %d, n_head %lld, n_embd %lld (a multiple of n_head), dropout %g",
                     (long long)c.vocab_size, (long long)c.block_size, c.n_layer,
                     (long long)c.n_head, (long long)c.n_embd, c.dropout);
        return NULL;
    }
    gpt_model *g = (gpt_model *)em_module_alloc(sizeof *g, &em_gpt_type);
    if (!g)
        return NULL;
    g->o = (gpt_options){.vocab_size = c.vocab_size, .block_size = c.block_size,
                         .n_layer = c.n_layer, .n_head = c.n_head, .n_embd = c.n_embd,
                         .dropout = c.dropout};
    em_gpt_onnx_register(&em_gpt_type);
    em_module *m = &g->base, *blocks = em_module_list(0);
    em_transformer_opts block = {.dim_feedforward = 4 * c.n_embd, .dropout = c.dropout,
                                 .activation = EM_ACTIVATION_GELU, .norm_first = true,
                                 .causal = true};
    for (int l = 0; l < c.n_layer && blocks; l++)
        blocks = em_module_list_append(blocks,
                                       em_transformer_encoder_layer(c.n_embd, c.n_head, block));
    const char *names[N_CHILDREN] = {"wte", "wpe", "drop", "h", "ln_f"};
    em_embedding_opts plain = {0};
    em_module *kids[N_CHILDREN] = {em_embedding_layer(c.vocab_size, c.n_embd, plain),
                                   em_embedding_layer(c.block_size, c.n_embd, plain),
                                   em_dropout_layer(c.dropout), blocks,
                                   em_layer_norm_layer(c.n_embd, (em_layer_norm_opts){1e-5})};
    bool ok = em_module_add_children(m, N_CHILDREN, names, kids);
    if (!ok || gpt2_init(m, c.n_layer) != EM_OK) {
        em_module_free(m);
        return NULL;
    }
    return m;
}
