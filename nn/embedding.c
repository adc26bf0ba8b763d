/* Embedding: a table of num vectors of size dim, initialised N(0, 1); looks up rows by i64
 * index. */
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t num, dim;
} embedding_layer; /* params: weight (num, dim) */

static em_tensor *embedding_forward(em_module *m, const em_tensor *x)
{
    return em_embedding(m->params[0].value, x);
}

static void embedding_describe(const em_module *m, char *buf, size_t n)
{
    const embedding_layer *e = (const embedding_layer *)m;
    snprintf(buf, n, "%lld, %lld", (long long)e->num, (long long)e->dim);
}

const em_module_type em_embedding_type = {"Embedding", embedding_forward, NULL,
                                          embedding_describe};

em_module *em_embedding_layer(int64_t num, int64_t dim)
{
    if (num <= 0 || dim <= 0) {
        em_set_error(EM_ERR_ARG, "em_embedding_layer: sizes must be positive: num %lld, dim %lld",
                     (long long)num, (long long)dim);
        return NULL;
    }
    embedding_layer *e = (embedding_layer *)em_module_alloc(sizeof *e, &em_embedding_type);
    if (!e)
        return NULL;
    e->num = num;
    e->dim = dim;
    if (!em_module_add_param(&e->base, "weight", em_randn(EM_SHAPE(num, dim), EM_F32, NULL))) {
        em_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}
