/* Layer normalisation over the last normalized_size elements of each sample (the trailing dims
 * whose sizes multiply to it), with an elementwise weight and bias: em_layer_norm_rows over the
 * samples' rows. */
#include <stddef.h>
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
    em_layer_norm_options o;
} layer_norm_layer; /* params: weight, bias (normalized_shape) */

static em_tensor *layer_norm_forward(em_module *m, const em_tensor *x)
{
    const em_layer_norm_options *o = &((layer_norm_layer *)m)->o;
    return em_layer_norm(x, o->normalized_shape, m->params[0].value, m->params[1].value, o->eps);
}

static void layer_norm_describe(const em_module *m, char *buf, size_t n)
{
    const em_layer_norm_options *o = &((const layer_norm_layer *)m)->o;
    snprintf(buf, n, "(%lld,), eps=%g", (long long)o->normalized_shape, o->eps);
}

static double layer_norm_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)m, (void)x;
    return em_norm_flops(y, true, true);
}

static double layer_norm_elements(const void *options)
{
    return 2.0 * (double)((const em_layer_norm_options *)options)->normalized_shape;
}

static em_module *layer_norm_new(const em_module_type *type, em_layer_norm_options o)
{
    layer_norm_layer *l = (layer_norm_layer *)em_module_alloc(sizeof *l, type);
    if (!l)
        return NULL;
    l->o = o;
    int64_t size = o.normalized_shape;
    if (!em_module_add_param(&l->base, "weight", em_ones(EM_SHAPE(size), EM_F32)) ||
        !em_module_add_param(&l->base, "bias", em_zeros(EM_SHAPE(size), EM_F32))) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

static em_module *layer_norm_build(const em_module_type *type, const void *options,
                                   em_module **children, int n)
{
    (void)children, (void)n;
    return layer_norm_new(type, *(const em_layer_norm_options *)options);
}

static const em_setting layer_norm_settings[] = {
    EM_SIZE_SETTING(em_layer_norm_options, normalized_shape, 1, 0),
    EM_REAL_SETTING(em_layer_norm_options, eps, 0, 1, 1e-5),
};

EM_MODULE_TYPE(em_layer_norm_type) = {
    .type_name = "LayerNorm",
    .forward = layer_norm_forward,
    .describe = layer_norm_describe,
    EM_SETTINGS(layer_norm_settings),
    .options_offset = offsetof(layer_norm_layer, o),
    .options_size = sizeof(em_layer_norm_options),
    .build = layer_norm_build,
    .tensor_elements = layer_norm_elements,
    .flops = layer_norm_flops,
};

em_module *em_layer_norm_layer(int64_t normalized_size, em_layer_norm_opts o)
{
    if (normalized_size <= 0 || !(o.eps >= 0)) {
        em_set_error(EM_ERR_ARG, "em_layer_norm_layer: bad arguments: normalized_size %lld, "
                     "eps %g", (long long)normalized_size, o.eps);
        return NULL;
    }
    return layer_norm_new(&em_layer_norm_type,
                          (em_layer_norm_options){normalized_size, o.eps ? o.eps : 1e-5});
}
