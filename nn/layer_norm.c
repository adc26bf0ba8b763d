/* Layer normalisation over the last normalized_size elements of each sample (the trailing dims
 * whose sizes multiply to it), with an elementwise weight and bias: em_layer_norm_rows over the
 * samples' rows. */
#include <stdio.h>

#include "nn/nn_internal.h"

/* x (*, normalized dims), weight and bias (normalized_size) or NULL */
em_tensor *em_layer_norm(const em_tensor *x, int64_t normalized_size, const em_tensor *weight,
                         const em_tensor *bias, double eps)
{
    if (!em_present(x, "em_layer_norm", "x"))
        return NULL;
    char bx[64], bv[64];
    int64_t inner = 1;
    int k = x->ndim;
    while (k > 0 && inner < normalized_size)
        inner *= x->shape[--k];
    if (normalized_size <= 0 || inner != normalized_size || !em_dtype_is_float(x->dtype)) {
        em_set_error(EM_ERR_ARG, "em_layer_norm: the trailing dims of %s x %s do not hold "
                     "normalized_size %lld elements", em_dtype_name(x->dtype),
                     em_shape_str(x, bx, sizeof bx), (long long)normalized_size);
        return NULL;
    }
    const em_tensor *vecs[2] = {weight, bias};
    for (int i = 0; i < 2; i++)
        if (vecs[i] && em_numel(vecs[i]) != normalized_size) {
            em_set_error(EM_ERR_ARG, "em_layer_norm: %s %s must hold normalized_size %lld "
                         "elements", i ? "bias" : "weight",
                         em_shape_str(vecs[i], bv, sizeof bv), (long long)normalized_size);
            return NULL;
        }
    em_shape rows = EM_SHAPE(-1, normalized_size), vec = EM_SHAPE(normalized_size);
    em_scope_begin();
    em_tensor *y = em_layer_norm_rows(em_reshape(x, rows), weight ? em_reshape(weight, vec) : NULL,
                                      bias ? em_reshape(bias, vec) : NULL, eps); // (R, C)
    y = em_keep(em_reshape(y, em_shape_of(x)));
    em_scope_end();
    return y;
}

typedef struct {
    em_module base;
    int64_t normalized_size;
    double eps;
} layer_norm_layer; /* params: weight, bias (normalized_size) */

static em_tensor *layer_norm_forward(em_module *m, const em_tensor *x)
{
    layer_norm_layer *l = (layer_norm_layer *)m;
    return em_layer_norm(x, l->normalized_size, m->params[0].value, m->params[1].value, l->eps);
}

static void layer_norm_describe(const em_module *m, char *buf, size_t n)
{
    const layer_norm_layer *l = (const layer_norm_layer *)m;
    snprintf(buf, n, "(%lld,), eps=%g", (long long)l->normalized_size, l->eps);
}

const em_module_type em_layer_norm_type = {"LayerNorm", layer_norm_forward, NULL,
                                           layer_norm_describe};

bool em_layer_norm_layer_eps(const em_module *m, double *eps)
{
    if (!m || m->type != &em_layer_norm_type)
        return false;
    *eps = ((const layer_norm_layer *)m)->eps;
    return true;
}

em_module *em_layer_norm_layer(int64_t normalized_size, double eps)
{
    if (normalized_size <= 0 || eps < 0) {
        em_set_error(EM_ERR_ARG, "em_layer_norm_layer: bad arguments: normalized_size %lld, "
                     "eps %g", (long long)normalized_size, eps);
        return NULL;
    }
    layer_norm_layer *l = (layer_norm_layer *)em_module_alloc(sizeof *l, &em_layer_norm_type);
    if (!l)
        return NULL;
    l->normalized_size = normalized_size;
    l->eps = eps ? eps : 1e-5;
    if (!em_module_add_param(&l->base, "weight", em_ones(EM_SHAPE(normalized_size), EM_F32)) ||
        !em_module_add_param(&l->base, "bias", em_zeros(EM_SHAPE(normalized_size), EM_F32))) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}
