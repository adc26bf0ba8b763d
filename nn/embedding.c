/* Embedding: a table of num vectors of size dim, initialised N(0, 1); looks up rows by i64
 * index. A padding row (PyTorch's padding_idx) starts at zero and gets no gradient. */
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t num, dim;
    em_embedding_opts o; /* padding_idx in [0, num) when has_padding_idx */
} embedding_layer; /* params: weight (num, dim) */

static em_tensor *embedding_forward(em_module *m, const em_tensor *x)
{
    const embedding_layer *e = (const embedding_layer *)m;
    if (e->o.has_padding_idx)
        return em_embedding_padded(m->params[0].value, x, e->o.padding_idx);
    return em_embedding(m->params[0].value, x);
}

static void embedding_describe(const em_module *m, char *buf, size_t n)
{
    const embedding_layer *e = (const embedding_layer *)m;
    if (e->o.has_padding_idx)
        snprintf(buf, n, "%lld, %lld, padding_idx=%lld", (long long)e->num, (long long)e->dim,
                 (long long)e->o.padding_idx);
    else
        snprintf(buf, n, "%lld, %lld", (long long)e->num, (long long)e->dim);
}

const em_module_type em_embedding_type = {"Embedding", embedding_forward, NULL,
                                          embedding_describe};

/* w's row i set to zero */
static em_status zero_row(em_tensor *w /* (num, dim) */, int64_t i)
{
    em_scope_begin();
    em_tensor *row = em_narrow(w, 0, i, 1);
    em_status st = row ? em_fill_(row, 0.0) : em_error_status();
    em_scope_end();
    return st;
}

em_module *em_embedding_layer_opts(int64_t num, int64_t dim, em_embedding_opts o)
{
    const char *fn = "em_embedding_layer";
    if (num <= 0 || dim <= 0) {
        em_set_error(EM_ERR_ARG, "%s: sizes must be positive: num %lld, dim %lld", fn,
                     (long long)num, (long long)dim);
        return NULL;
    }
    if (o.has_padding_idx && (o.padding_idx < -num || o.padding_idx >= num)) {
        em_set_error(EM_ERR_ARG, "%s: padding_idx %lld is outside [-%lld, %lld)", fn,
                     (long long)o.padding_idx, (long long)num, (long long)num);
        return NULL;
    }
    o.padding_idx += o.has_padding_idx && o.padding_idx < 0 ? num : 0;
    embedding_layer *e = (embedding_layer *)em_module_alloc(sizeof *e, &em_embedding_type);
    if (!e)
        return NULL;
    e->num = num;
    e->dim = dim;
    e->o = o;
    em_tensor *w = em_randn(EM_SHAPE(num, dim), EM_F32, NULL); /* (num, dim) */
    if (w && o.has_padding_idx && zero_row(w, o.padding_idx) != EM_OK) {
        em_release(w);
        w = NULL;
    }
    if (!em_module_add_param(&e->base, "weight", w)) {
        em_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}

em_module *em_embedding_layer(int64_t num, int64_t dim)
{
    return em_embedding_layer_opts(num, dim, (em_embedding_opts){0});
}

em_status em_embedding_layer_config(const em_module *m, em_embedding_opts *o)
{
    if (!m || m->type != &em_embedding_type || !o)
        return em_set_error(EM_ERR_ARG, "em_embedding_layer_config: not an Embedding module");
    *o = ((const embedding_layer *)m)->o;
    return EM_OK;
}
