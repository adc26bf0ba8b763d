/* TransformerEncoderLayer, batch first (PyTorch's nn.TransformerEncoderLayer(batch_first=True)):
 * self-attention and a feed-forward block, each with residual dropout, LayerNorm before them
 * (norm_first, the pre-LN block of GPT) or after the residual sums. */
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t d_model, nhead, dim_feedforward;
    double dropout;
    em_activation activation;
    bool norm_first;
} transformer_layer;

/* the children, in PyTorch's order (its state_dict names) */
enum { SELF_ATTN, LINEAR1, DROPOUT, LINEAR2, NORM1, NORM2, DROPOUT1, DROPOUT2, N_CHILDREN };

static em_module *child(em_module *m, int i)
{
    return m->children[i].module;
}

/* dropout1(self_attn(x)) */
static em_tensor *attention_block(em_module *m, const em_tensor *x, em_kv_cache *cache,
                                  int layer)
{
    em_module *sa = child(m, SELF_ATTN);
    em_tensor *y = em_multihead_attention(sa, x, x, x, (em_mha_call){
        .is_causal = em_multihead_attention_causal(sa), .cache = cache, .layer = layer});
    return em_forward(child(m, DROPOUT1), y);
}

/* dropout2(linear2(dropout(activation(linear1(x))))) */
static em_tensor *feed_forward_block(em_module *m, const em_tensor *x)
{
    transformer_layer *l = (transformer_layer *)m;
    em_tensor *h = em_forward(child(m, LINEAR1), x);
    h = l->activation == EM_ACTIVATION_GELU ? em_gelu(h, false) : em_relu(h);
    h = em_forward(child(m, LINEAR2), em_forward(child(m, DROPOUT), h));
    return em_forward(child(m, DROPOUT2), h);
}

em_tensor *em_transformer_layer_forward(em_module *m, const em_tensor *x, em_kv_cache *cache,
                                        int layer)
{
    if (!x)
        return NULL;
    if (!m || strcmp(m->type->type_name, "TransformerEncoderLayer")) {
        em_set_error(EM_ERR_ARG, "em_transformer_layer_forward: the module is not a "
                     "TransformerEncoderLayer");
        return NULL;
    }
    em_scope_begin();
    em_tensor *y;
    if (((transformer_layer *)m)->norm_first) {
        y = em_add(x, attention_block(m, em_forward(child(m, NORM1), x), cache, layer));
        y = em_add(y, feed_forward_block(m, em_forward(child(m, NORM2), y)));
    } else {
        y = em_forward(child(m, NORM1), em_add(x, attention_block(m, x, cache, layer)));
        y = em_forward(child(m, NORM2), em_add(y, feed_forward_block(m, y)));
    }
    return em_nn_scope_return(y);
}

static em_tensor *transformer_forward(em_module *m, const em_tensor *x)
{
    return em_transformer_layer_forward(m, x, NULL, 0);
}

static void transformer_describe(const em_module *m, char *buf, size_t n)
{
    const transformer_layer *l = (const transformer_layer *)m;
    snprintf(buf, n, "d_model=%lld, nhead=%lld, dim_feedforward=%lld, dropout=%g, "
             "activation=%s, norm_first=%s", (long long)l->d_model, (long long)l->nhead,
             (long long)l->dim_feedforward, l->dropout,
             l->activation == EM_ACTIVATION_GELU ? "gelu" : "relu",
             l->norm_first ? "True" : "False");
}

const em_module_type em_transformer_encoder_layer_type = {
    "TransformerEncoderLayer", transformer_forward, NULL, transformer_describe};

bool em_transformer_layer_config(const em_module *m, bool *norm_first, em_activation *act)
{
    if (!m || strcmp(m->type->type_name, "TransformerEncoderLayer"))
        return false;
    *norm_first = ((const transformer_layer *)m)->norm_first;
    *act = ((const transformer_layer *)m)->activation;
    return true;
}

bool em_transformer_layer_settings(const em_module *m, int64_t *d_model, int64_t *nhead,
                                   em_transformer_opts *o)
{
    if (!m || m->type != &em_transformer_encoder_layer_type)
        return false;
    const transformer_layer *l = (const transformer_layer *)m;
    double eps = 0;
    em_layer_norm_layer_eps(m->children[NORM1].module, &eps);
    *d_model = l->d_model;
    *nhead = l->nhead;
    *o = (em_transformer_opts){.dim_feedforward = l->dim_feedforward, .dropout = l->dropout,
                               .activation = l->activation, .layer_norm_eps = eps,
                               .norm_first = l->norm_first,
                               .causal = em_multihead_attention_causal(
                                   m->children[SELF_ATTN].module)};
    return true;
}

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
    l->d_model = d_model;
    l->nhead = nhead;
    l->dim_feedforward = ff;
    l->dropout = o.dropout;
    l->activation = o.activation;
    l->norm_first = o.norm_first;
    em_module *m = &l->base;
    const char *names[N_CHILDREN] = {"self_attn", "linear1", "dropout", "linear2", "norm1",
                                     "norm2", "dropout1", "dropout2"};
    em_module *kids[N_CHILDREN] = {
        em_multihead_attention_layer(d_model, nhead, (em_mha_opts){.dropout = o.dropout,
                                                                   .causal = o.causal}),
        em_linear_layer(d_model, ff, true), em_dropout_layer(o.dropout),
        em_linear_layer(ff, d_model, true), em_layer_norm_layer(d_model, eps),
        em_layer_norm_layer(d_model, eps), em_dropout_layer(o.dropout),
        em_dropout_layer(o.dropout)};
    bool ok = em_module_add_children(m, N_CHILDREN, names, kids);
    if (!ok) {
        em_module_free(m);
        return NULL;
    }
    return m;
}
