/* TransformerEncoderLayer, batch first (PyTorch's nn.TransformerEncoderLayer(batch_first=True)):
 * self-attention and a feed-forward block, each with residual dropout, LayerNorm before them
 * (norm_first, the pre-LN block of GPT) or after the residual sums. */
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_transformer_options o;
} transformer_layer;

/* the children, in PyTorch's order (its state_dict names) */
enum { SELF_ATTN, LINEAR1, DROPOUT, LINEAR2, NORM1, NORM2, DROPOUT1, DROPOUT2, N_CHILDREN };

static em_module *child(em_module *m, int i)
{
    return m->children[i].module;
}

/* dropout1(self_attn(x)) with the call's masks or cache; the layer's causal setting joins
 * them */
static em_tensor *attention_block(em_module *m, const em_tensor *x, em_mha_call c)
{
    c.is_causal = ((transformer_layer *)m)->o.causal;
    em_tensor *y = em_multihead_attention(child(m, SELF_ATTN), x, x, x, c);
    return em_forward(child(m, DROPOUT1), y);
}

/* dropout2(linear2(dropout(activation(linear1(x))))) */
static em_tensor *feed_forward_block(em_module *m, const em_tensor *x)
{
    transformer_layer *l = (transformer_layer *)m;
    em_tensor *h = em_forward(child(m, LINEAR1), x);
    h = l->o.gelu ? em_gelu(h, false) : em_relu(h);
    h = em_forward(child(m, LINEAR2), em_forward(child(m, DROPOUT), h));
    return em_forward(child(m, DROPOUT2), h);
}

/* The layer's forward, its self-attention called with c */
static em_tensor *layer_forward(em_module *m, const em_tensor *x, em_mha_call c,
                                const char *fn)
{
    if (!x)
        return NULL;
    if (!m || em_module_own_type(m) != &em_transformer_encoder_layer_type) {
        em_set_error(EM_ERR_ARG, "%s: the module is not a TransformerEncoderLayer", fn);
        return NULL;
    }
    em_scope_begin();
    em_tensor *y;
    if (((transformer_layer *)m)->o.norm_first) {
        y = em_add(x, attention_block(m, em_forward(child(m, NORM1), x), c));
        y = em_add(y, feed_forward_block(m, em_forward(child(m, NORM2), y)));
    } else {
        y = em_forward(child(m, NORM1), em_add(x, attention_block(m, x, c)));
        y = em_forward(child(m, NORM2), em_add(y, feed_forward_block(m, y)));
    }
    return em_nn_scope_return(y);
}

em_tensor *em_transformer_layer_forward(em_module *m, const em_tensor *x, em_kv_cache *cache,
                                        int layer)
{
    return layer_forward(m, x, (em_mha_call){.cache = cache, .layer = layer},
                         "em_transformer_layer_forward");
}

em_tensor *em_transformer_layer_masked(em_module *m, const em_tensor *x,
                                       const em_tensor *src_mask,
                                       const em_tensor *src_key_padding_mask)
{
    return layer_forward(m, x, (em_mha_call){.attn_mask = src_mask,
                                             .key_padding_mask = src_key_padding_mask},
                         "em_transformer_layer_masked");
}

static em_tensor *transformer_forward(em_module *m, const em_tensor *x)
{
    return em_transformer_layer_forward(m, x, NULL, 0);
}

static void transformer_describe(const em_module *m, char *buf, size_t n)
{
    const em_transformer_options *o = &((const transformer_layer *)m)->o;
    snprintf(buf, n, "d_model=%lld, nhead=%lld, dim_feedforward=%lld, dropout=%g, "
             "activation=%s, norm_first=%s", (long long)o->d_model, (long long)o->nhead,
             (long long)o->dim_feedforward, o->dropout, o->gelu ? "gelu" : "relu",
             o->norm_first ? "True" : "False");
}

/* What the layer runs itself: the self-attention (its out_proj, a child run by em_forward,
 * counts its own), the feed-forward activation (1 per element) and the two residual sums. The
 * linears, norms and dropouts count their own. */
static double transformer_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const em_transformer_options *o = em_module_options(m);
    const em_module *sa = m->children[SELF_ATTN].module;
    double tokens = (double)(em_numel(y) / o->d_model);
    return em_mha_flops(em_module_options(sa), y) + tokens * (double)o->dim_feedforward +
           2 * (double)em_numel(y);
}

/* attention, linear1 (ff, d) and linear2 (d, ff) with biases, two LayerNorms */
double em_transformer_layer_elements(double d, double ff)
{
    return em_mha_tensor_elements(d, true) + 2 * d * ff + ff + d + 4 * d;
}

static double transformer_elements(const void *options)
{
    const em_transformer_options *o = options;
    return em_transformer_layer_elements((double)o->d_model, (double)o->dim_feedforward);
}

static bool transformer_check(const void *options, char *why, size_t n)
{
    const em_transformer_options *o = options;
    return em_check_divides("nhead", o->nhead, "d_model", o->d_model, why, n);
}

static em_module *transformer_build(const em_module_type *type, const void *options,
                                    em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const em_transformer_options *o = options;
    return em_transformer_encoder_layer(o->d_model, o->nhead, (em_transformer_opts){
        .dim_feedforward = o->dim_feedforward, .dropout = o->dropout,
        .activation = o->gelu ? EM_ACTIVATION_GELU : EM_ACTIVATION_RELU,
        .layer_norm_eps = o->layer_norm_eps, .norm_first = o->norm_first, .causal = o->causal});
}

static const em_setting transformer_settings[] = {
    EM_SIZE_SETTING(em_transformer_options, d_model, 1, 0),
    EM_SIZE_SETTING(em_transformer_options, nhead, 1, 0),
    EM_SIZE_SETTING(em_transformer_options, dim_feedforward, 1, 0),
    EM_REAL_SETTING(em_transformer_options, dropout, 0, 1, 0),
    EM_BOOL_SETTING(em_transformer_options, gelu, 0),
    EM_REAL_SETTING(em_transformer_options, layer_norm_eps, 0, 1, 1e-5),
    EM_BOOL_SETTING(em_transformer_options, norm_first, 0),
    EM_BOOL_SETTING(em_transformer_options, causal, 0),
};

EM_MODULE_TYPE(em_transformer_encoder_layer_type) = {
    .type_name = "TransformerEncoderLayer",
    .forward = transformer_forward,
    .describe = transformer_describe,
    EM_SETTINGS(transformer_settings),
    .options_offset = offsetof(transformer_layer, o),
    .options_size = sizeof(em_transformer_options),
    .build = transformer_build,
    .check = transformer_check,
    .tensor_elements = transformer_elements,
    .flops = transformer_flops,
};

em_module *em_transformer_encoder_layer(int64_t d_model, int64_t nhead, em_transformer_opts o)
{
    int64_t ff = o.dim_feedforward ? o.dim_feedforward : 2048;
    double eps = o.layer_norm_eps ? o.layer_norm_eps : 1e-5;
    if (ff < 0 || !(o.dropout >= 0 && o.dropout < 1) || o.activation > EM_ACTIVATION_GELU) {
        em_set_error(EM_ERR_ARG, "em_transformer_encoder_layer: bad options: dim_feedforward "
                     "%lld, dropout %g, activation %d", (long long)ff, o.dropout,
                     (int)o.activation);
        return NULL;
    }
    transformer_layer *l = (transformer_layer *)em_module_alloc(
        sizeof *l, &em_transformer_encoder_layer_type);
    if (!l)
        return NULL;
    l->o = (em_transformer_options){
        .d_model = d_model, .nhead = nhead, .dim_feedforward = ff, .dropout = o.dropout,
        .gelu = o.activation == EM_ACTIVATION_GELU, .layer_norm_eps = eps,
        .norm_first = o.norm_first, .causal = o.causal};
    em_module *m = &l->base;
    const char *names[N_CHILDREN] = {"self_attn", "linear1", "dropout", "linear2", "norm1",
                                     "norm2", "dropout1", "dropout2"};
    em_layer_norm_opts norm = {.eps = eps};
    em_module *kids[N_CHILDREN] = {
        em_multihead_attention_layer(d_model, nhead, (em_mha_opts){.dropout = o.dropout,
                                                                   .causal = o.causal}),
        em_linear_layer(d_model, ff, true), em_dropout_layer(o.dropout),
        em_linear_layer(ff, d_model, true), em_layer_norm_layer(d_model, norm),
        em_layer_norm_layer(d_model, norm), em_dropout_layer(o.dropout),
        em_dropout_layer(o.dropout)};
    bool ok = em_module_add_children(m, N_CHILDREN, names, kids);
    if (!ok) {
        em_module_free(m);
        return NULL;
    }
    return m;
}
