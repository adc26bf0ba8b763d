/* Embedding: a table of num vectors of size dim, initialised N(0, 1); looks up rows by i64
 * index. A padding row (PyTorch's padding_idx) starts at zero and gets no gradient. */
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_embedding_options o;
} embedding_layer; /* params: weight (num_embeddings, embedding_dim) */

static em_tensor *embedding_forward(em_module *m, const em_tensor *x)
{
    const em_embedding_options *o = &((const embedding_layer *)m)->o;
    if (o->padding_idx >= 0)
        return em_embedding_padded(m->params[0].value, x, o->padding_idx);
    return em_embedding(m->params[0].value, x);
}

static double embedding_elements(const void *options)
{
    const em_embedding_options *o = options;
    return (double)o->num_embeddings * (double)o->embedding_dim;
}

static bool embedding_check(const void *options, char *why, size_t n)
{
    const em_embedding_options *o = options;
    if (o->padding_idx < o->num_embeddings)
        return true;
    snprintf(why, n, "setting 'padding_idx' is %lld, outside [0, %lld]",
             (long long)o->padding_idx, (long long)o->num_embeddings - 1);
    return false;
}

/* w's row i set to zero */
static em_status zero_row(em_tensor *w /* (num, dim) */, int64_t i)
{
    em_scope_begin();
    em_tensor *row = em_narrow(w, 0, i, 1);
    em_status st = row ? em_fill_(row, 0.0) : em_error_status();
    em_scope_end();
    return st;
}

static em_module *embedding_new(const em_module_type *type, em_embedding_options o)
{
    embedding_layer *e = (embedding_layer *)em_module_alloc(sizeof *e, type);
    if (!e)
        return NULL;
    e->o = o;
    em_tensor *w = em_randn(EM_SHAPE(o.num_embeddings, o.embedding_dim), EM_F32, NULL);
    if (w && o.padding_idx >= 0 && zero_row(w, o.padding_idx) != EM_OK) {
        em_release(w);
        w = NULL;
    }
    if (!em_module_add_param(&e->base, "weight", w)) {
        em_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}

static em_module *embedding_build(const em_module_type *type, const void *options,
                                  em_module **children, int n)
{
    (void)children, (void)n;
    return embedding_new(type, *(const em_embedding_options *)options);
}

/* padding_idx, counted from the start, is left out of files and summaries when there is none */
static const em_setting embedding_settings[] = {
    EM_SIZE_SETTING(em_embedding_options, num_embeddings, 1,
                    EM_SETTING_POSITIONAL),
    EM_SIZE_SETTING(em_embedding_options, embedding_dim, 1,
                    EM_SETTING_POSITIONAL),
    {.name = "padding_idx", .kind = EM_SETTING_INT_OR_NONE,
     .offset = offsetof(em_embedding_options, padding_idx), .min = 0, .max = EM_MAX_SIZE,
     .def = -1, .none_value = -1, .flags = EM_SETTING_NONE_OMITTED},
};

EM_MODULE_TYPE(em_embedding_type) = {
    .type_name = "Embedding",
    .forward = embedding_forward,
    EM_SETTINGS(embedding_settings),
    .options_offset = offsetof(embedding_layer, o),
    .options_size = sizeof(em_embedding_options),
    .traits = EM_TRAIT_INDEX_INPUT,
    .build = embedding_build,
    .check = embedding_check,
    .tensor_elements = embedding_elements,
    .flops = em_no_flops,
};

em_module *em_embedding_layer(int64_t num, int64_t dim, em_embedding_opts o)
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
    int64_t padding = !o.has_padding_idx ? -1 : o.padding_idx < 0 ? o.padding_idx + num
                                                                  : o.padding_idx;
    return embedding_new(&em_embedding_type, (em_embedding_options){num, dim, padding});
}
