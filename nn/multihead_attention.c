/* MultiheadAttention, batch first (PyTorch's nn.MultiheadAttention(batch_first=True)): one fused
 * in-projection in_proj_weight (3E, E) for q, k and v, heads split by views, the fused
 * scaled dot-product attention, out_proj; and the key/value cache that lets a decoder attend
 * to earlier positions without recomputing them. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "tensor/core_internal.h"

typedef struct {
    em_module base;
    em_mha_options o;
} mha_layer; /* params: in_proj_weight (3E, E), in_proj_bias (3E) if any; child out_proj */

static bool is_mha(const em_module *m)
{
    return m && em_module_own_type(m) == &em_multihead_attention_type;
}

struct em_kv_cache {
    int n_layers;
    int64_t len, max_len;
    em_tensor **k, **v; /* per layer (B, H, max_len, D), owned */
};

em_kv_cache *em_kv_cache_new(int n_layers, int64_t batch, int64_t heads, int64_t max_len,
                             int64_t head_dim, em_dtype dtype)
{
    if (n_layers < 1 || batch < 1 || heads < 1 || max_len < 1 || head_dim < 1 ||
        !em_dtype_is_float(dtype)) {
        em_set_error(EM_ERR_ARG, "em_kv_cache_new: bad sizes or dtype: %d layers, batch %lld, "
                     "%lld heads, %lld positions of %lld, %s", n_layers, (long long)batch,
                     (long long)heads, (long long)max_len, (long long)head_dim,
                     em_dtype_name(dtype));
        return NULL;
    }
    em_kv_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->k = calloc((size_t)n_layers, sizeof *c->k);
        c->v = calloc((size_t)n_layers, sizeof *c->v);
    }
    if (!c || !c->k || !c->v) {
        em_kv_cache_free(c);
        em_set_error(EM_ERR_MEMORY, "em_kv_cache_new: out of memory");
        return NULL;
    }
    c->n_layers = n_layers;
    c->max_len = max_len;
    em_shape s = EM_SHAPE(batch, heads, max_len, head_dim);
    for (int l = 0; l < n_layers; l++) {
        c->k[l] = em_empty(s, dtype);
        c->v[l] = em_empty(s, dtype);
        if (!c->k[l] || !c->v[l]) {
            em_kv_cache_free(c);
            return NULL;
        }
        em_scope_forget(c->k[l]); /* the cache holds them, also when made inside a scope */
        em_scope_forget(c->v[l]);
    }
    return c;
}

void em_kv_cache_free(em_kv_cache *c)
{
    if (!c)
        return;
    for (int l = 0; c->k && c->v && l < c->n_layers; l++) {
        em_release(c->k[l]);
        em_release(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c);
}

int64_t em_kv_cache_len(const em_kv_cache *c)
{
    return c ? c->len : 0;
}

int64_t em_kv_cache_capacity(const em_kv_cache *c)
{
    return c ? c->max_len : 0;
}

em_status em_kv_cache_advance(em_kv_cache *c, int64_t n)
{
    if (!c || n < 0 || c->len + n > c->max_len)
        return em_set_error(EM_ERR_ARG, "em_kv_cache_advance: %lld more positions do not fit "
                            "(%lld of %lld held)", (long long)n, (long long)(c ? c->len : 0),
                            (long long)(c ? c->max_len : 0));
    c->len += n;
    return EM_OK;
}

void em_kv_cache_reset(em_kv_cache *c)
{
    if (c)
        c->len = 0;
}

/* x (B, T, E) -> (B, H, T, E / H): a view of the heads */
static em_tensor *split_heads(const em_tensor *x, int64_t heads)
{
    int64_t b = x->shape[0], t = x->shape[1], e = x->shape[2];
    return em_permute(em_view(x, EM_SHAPE(b, t, heads, e / heads)), (int[]){0, 2, 1, 3});
}

/* The rows [from, from + 3E/3) of the in-projection: q (0), k (1) or v (2). */
static em_tensor *projection(const mha_layer *l, const em_tensor *x, int which)
{
    const em_module *m = &l->base;
    int64_t e = l->o.embed_dim;
    em_tensor *w = em_narrow(m->params[0].value, 0, which * e, e);
    em_tensor *b = m->n_params > 1 ? em_narrow(m->params[1].value, 0, which * e, e) : NULL;
    if (!w || (m->n_params > 1 && !b))
        return NULL;
    return em_linear(x, w, b);
}

/* The bool (Lq, Lk) mask of keys j <= offset + i: causal attention of queries that follow
 * `offset` positions (already in a cache). */
static em_tensor *causal_mask(int64_t lq, int64_t lk, int64_t offset)
{
    em_tensor *i = em_reshape(em_arange((double)offset, (double)(offset + lq), 1, EM_F32),
                              EM_SHAPE(lq, 1));
    return em_le(em_arange(0, (double)lk, 1, EM_F32), i);
}

/* The SDPA mask of PyTorch's MHA masks: attn_mask (Lq, Lk) or (B * H, Lq, Lk), bool true where
 * attending is not allowed, or float added; key_padding_mask (B, Lk) bool true for keys to
 * ignore. Both become one float mask broadcastable to (B, H, Lq, Lk); NULL when neither is
 * given (no error) or on error. */
static em_tensor *sdpa_mask(const mha_layer *l, const em_mha_call *c, int64_t b, int64_t lq,
                            int64_t lk, em_dtype dt)
{
    const char *fn = "em_multihead_attention";
    char buf[96];
    em_tensor *add = NULL, *zero = em_scalar(0, dt), *ninf = em_scalar(-INFINITY, dt);
    if (c->attn_mask) {
        const em_tensor *m = c->attn_mask;
        bool two = m->ndim == 2 && m->shape[0] == lq && m->shape[1] == lk;
        bool three = m->ndim == 3 && m->shape[0] == b * l->o.num_heads && m->shape[1] == lq &&
                     m->shape[2] == lk;
        if (!two && !three) {
            em_set_error(EM_ERR_ARG, "%s: attn_mask %s must be (Lq, Lk) = (%lld, %lld) or "
                         "(B * num_heads, Lq, Lk)", fn, em_shape_str(m, buf, sizeof buf),
                         (long long)lq, (long long)lk);
            return NULL;
        }
        add = m->dtype == EM_BOOL ? em_where(m, ninf, zero) : em_to_dtype(m, dt);
        if (three)
            add = em_reshape(add, EM_SHAPE(b, l->o.num_heads, lq, lk));
    }
    if (c->key_padding_mask) {
        const em_tensor *k = c->key_padding_mask;
        if (k->ndim != 2 || k->shape[0] != b || k->shape[1] != lk || k->dtype != EM_BOOL) {
            em_set_error(EM_ERR_ARG, "%s: key_padding_mask %s %s must be bool (B, Lk) = "
                         "(%lld, %lld)", fn, em_dtype_name(k->dtype),
                         em_shape_str(k, buf, sizeof buf), (long long)b, (long long)lk);
            return NULL;
        }
        em_tensor *pad = em_reshape(em_where(k, ninf, zero), EM_SHAPE(b, 1, 1, lk));
        add = add ? em_add(add, pad) : pad;
    }
    return add;
}

/* The SDPA mask and causal flag of the call's masks over lk keys (no cache): the causal
 * diagonal joins the caller's masks when both are given. False after an error. */
static bool call_masks(const mha_layer *l, const em_mha_call *c, int64_t b, int64_t lq,
                       int64_t lk, em_dtype dt, em_tensor **mask, bool *causal)
{
    *mask = NULL;
    *causal = c->is_causal;
    if (!c->attn_mask && !c->key_padding_mask)
        return true;
    *mask = sdpa_mask(l, c, b, lq, lk, dt);
    if (*mask && *causal)
        *mask = em_where(causal_mask(lq, lk, 0), *mask, em_scalar(-INFINITY, dt));
    *causal = false;
    return *mask != NULL;
}

static em_sdpa_opts sdpa_opts(const mha_layer *l, em_tensor *mask, bool causal)
{
    return (em_sdpa_opts){.attn_mask = mask, .is_causal = causal,
                          .dropout_p = l->base.training ? l->o.dropout : 0};
}

/* Self-attention without a cache: one in-projection (B, T, 3E) that the packed attention op
 * reads q, k and v from as views. (B, H, T, D) */
static em_tensor *self_attention(const mha_layer *l, const em_tensor *x, const em_mha_call *c)
{
    const em_module *m = &l->base;
    em_tensor *qkv = em_linear(x, m->params[0].value,
                               m->n_params > 1 ? m->params[1].value : NULL); // (B, T, 3E)
    em_tensor *mask;
    bool causal;
    if (!qkv || !call_masks(l, c, x->shape[0], x->shape[1], x->shape[1], qkv->dtype, &mask,
                            &causal))
        return NULL;
    return em_self_attention_packed(qkv, l->o.num_heads, sdpa_opts(l, mask, causal));
}

/* Attention of separate query, key and value (each its own block of the in-projection), or of
 * self-attention through a key/value cache. (B, H, Lq, D) */
static em_tensor *attention(const mha_layer *l, const em_tensor *query, const em_tensor *key,
                            const em_tensor *value, const em_mha_call *c)
{
    const char *fn = "em_multihead_attention";
    int64_t lq = query->shape[1], h = l->o.num_heads;
    em_tensor *q = split_heads(projection(l, query, 0), h);
    em_tensor *k = split_heads(projection(l, key, 1), h);
    em_tensor *v = split_heads(projection(l, value, 2), h);
    if (!q || !k || !v)
        return NULL;
    em_tensor *mask = NULL;
    bool causal = c->is_causal;
    if (c->cache) { /* append this call's keys and values; attend over everything cached */
        int64_t at = c->cache->len, lk = at + lq;
        if (lk > c->cache->max_len) {
            em_set_error(EM_ERR_ARG, "%s: the cache holds %lld of %lld positions; %lld more do "
                         "not fit", fn, (long long)at, (long long)c->cache->max_len,
                         (long long)lq);
            return NULL;
        }
        em_tensor *ck = c->cache->k[c->layer], *cv = c->cache->v[c->layer];
        if (em_copy_(em_narrow(ck, 2, at, lq), k) != EM_OK ||
            em_copy_(em_narrow(cv, 2, at, lq), v) != EM_OK)
            return NULL;
        k = em_narrow(ck, 2, 0, lk);
        v = em_narrow(cv, 2, 0, lk);
        if (causal && at > 0) {
            mask = causal_mask(lq, lk, at);
            causal = false;
        }
    } else if (!call_masks(l, c, query->shape[0], lq, k->shape[2], q->dtype, &mask, &causal)) {
        return NULL;
    }
    return em_scaled_dot_product_attention(q, k, v, sdpa_opts(l, mask, causal));
}

em_tensor *em_multihead_attention(em_module *m, const em_tensor *query, const em_tensor *key,
                                  const em_tensor *value, em_mha_call c)
{
    const char *fn = "em_multihead_attention";
    if (!query || !key || !value)
        return NULL;
    if (!is_mha(m)) {
        em_set_error(EM_ERR_ARG, "%s: the module is not a MultiheadAttention", fn);
        return NULL;
    }
    mha_layer *l = (mha_layer *)m;
    const em_tensor *in[3] = {query, key, value};
    char bq[64], bk[64], bv[64];
    for (int i = 0; i < 3; i++)
        if (in[i]->ndim != 3 || in[i]->shape[2] != l->o.embed_dim ||
            in[i]->shape[0] != query->shape[0] || (i == 2 && key->shape[1] != value->shape[1])) {
            em_set_error(EM_ERR_ARG, "%s: query, key, value must be (B, Lq, %lld), (B, Lk, %lld) "
                         "and (B, Lk, %lld): %s, %s, %s", fn, (long long)l->o.embed_dim,
                         (long long)l->o.embed_dim, (long long)l->o.embed_dim,
                         em_shape_str(query, bq, sizeof bq), em_shape_str(key, bk, sizeof bk),
                         em_shape_str(value, bv, sizeof bv));
            return NULL;
        }
    if (c.cache && (c.layer < 0 || c.layer >= c.cache->n_layers || key != query ||
                    value != query || c.attn_mask || c.key_padding_mask)) {
        em_set_error(EM_ERR_ARG, "%s: a cache serves self-attention without masks of a layer "
                     "in [0, %d), not layer %d", fn, c.cache->n_layers, c.layer);
        return NULL;
    }
    int64_t b = query->shape[0], lq = query->shape[1], e = l->o.embed_dim;
    em_scope_begin();
    em_tensor *y = key == query && value == query && !c.cache ? self_attention(l, query, &c)
                                                              : attention(l, query, key, value,
                                                                          &c);
    // (B, H, Lq, D), stored (B, Lq, H, D)
    y = em_reshape(em_transpose(y, 1, 2), EM_SHAPE(b, lq, e));
    return em_nn_scope_return(em_forward(m->children[0].module, y));
}

static em_tensor *mha_forward(em_module *m, const em_tensor *x)
{
    return em_multihead_attention(m, x, x, x, (em_mha_call){
        .is_causal = ((mha_layer *)m)->o.causal});
}

static void mha_describe(const em_module *m, char *buf, size_t n)
{
    const em_mha_options *o = &((const mha_layer *)m)->o;
    snprintf(buf, n, "embed_dim=%lld, num_heads=%lld, dropout=%g, batch_first=True%s",
             (long long)o->embed_dim, (long long)o->num_heads, o->dropout,
             o->causal ? ", causal" : "");
}

/* Per sample of T positions: the in-projection 2 T E 3E (+ 3 T E for its bias), the scores
 * q k^T 2 T T E, their softmax 3 H T T and the weighted values 2 T T E. */
double em_mha_flops(const em_mha_options *o, const em_tensor *y)
{
    double b = (double)y->shape[0], t = (double)y->shape[1], e = (double)o->embed_dim;
    double h = (double)o->num_heads;
    return b * (6 * t * e * e + (o->bias ? 3 * t * e : 0) + 4 * t * t * e + 3 * h * t * t);
}

static double mha_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    return em_mha_flops(em_module_options(m), y);
}

/* in_proj (3E, E) and out_proj (E, E), with their biases */
double em_mha_tensor_elements(double e, bool bias)
{
    return 4 * e * e + (bias ? 4 * e : 0);
}

static double mha_elements(const void *options)
{
    const em_mha_options *o = options;
    return em_mha_tensor_elements((double)o->embed_dim, o->bias);
}

static bool mha_check(const void *options, char *why, size_t n)
{
    const em_mha_options *o = options;
    return em_check_divides("num_heads", o->num_heads, "embed_dim", o->embed_dim, why, n);
}

static em_module *mha_build(const em_module_type *type, const void *options,
                            em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const em_mha_options *o = options;
    return em_multihead_attention_layer(o->embed_dim, o->num_heads, (em_mha_opts){
        .dropout = o->dropout, .no_bias = !o->bias, .causal = o->causal});
}

static const em_setting mha_settings[] = {
    EM_SIZE_SETTING(em_mha_options, embed_dim, 1, 0),
    EM_SIZE_SETTING(em_mha_options, num_heads, 1, 0),
    EM_REAL_SETTING(em_mha_options, dropout, 0, 1, 0),
    EM_BOOL_SETTING(em_mha_options, bias, 1),
    EM_BOOL_SETTING(em_mha_options, causal, 0),
};

EM_MODULE_TYPE(em_multihead_attention_type) = {
    .type_name = "MultiheadAttention",
    .forward = mha_forward,
    .describe = mha_describe,
    EM_SETTINGS(mha_settings),
    .options_offset = offsetof(mha_layer, o),
    .options_size = sizeof(em_mha_options),
    .build = mha_build,
    .check = mha_check,
    .tensor_elements = mha_elements,
    .flops = mha_flops,
};

em_module *em_multihead_attention_layer(int64_t embed_dim, int64_t num_heads, em_mha_opts o)
{
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads || !(o.dropout >= 0 &&
                                                                       o.dropout < 1)) {
        em_set_error(EM_ERR_ARG, "em_multihead_attention_layer: embed_dim %lld must be a "
                     "positive multiple of num_heads %lld, dropout %g in [0, 1)",
                     (long long)embed_dim, (long long)num_heads, o.dropout);
        return NULL;
    }
    mha_layer *l = (mha_layer *)em_module_alloc(sizeof *l, &em_multihead_attention_type);
    if (!l)
        return NULL;
    l->o = (em_mha_options){.embed_dim = embed_dim, .num_heads = num_heads,
                            .dropout = o.dropout, .bias = !o.no_bias, .causal = o.causal};
    em_tensor *w = em_module_add_param(&l->base, "in_proj_weight",
                                       em_empty(EM_SHAPE(3 * embed_dim, embed_dim), EM_F32));
    /* PyTorch's init: xavier_uniform_ over the whole (3E, E) matrix, zero biases */
    bool ok = w && em_init_xavier_uniform_(w, 1.0, NULL) == EM_OK;
    if (ok && !o.no_bias)
        ok = em_module_add_param(&l->base, "in_proj_bias",
                                 em_zeros(EM_SHAPE(3 * embed_dim), EM_F32)) != NULL;
    em_module *out = ok ? em_module_add_child(&l->base, "out_proj",
                                              em_linear_layer(embed_dim, embed_dim, !o.no_bias))
                        : NULL;
    if (out && !o.no_bias)
        ok = em_zero_(out->params[1].value) == EM_OK;
    if (!ok || !out) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}
