/* Linear: y = x W^T + b with weight (out, in) and bias (out), initialised as PyTorch does
 * (kaiming_uniform_(a = sqrt 5) for W, U(-1/sqrt(in), 1/sqrt(in)) for b). */
#include <math.h>
#include <stddef.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_linear_options o;
} linear_layer; /* params: weight (out_features, in_features), bias (out_features) if any */

static em_tensor *linear_forward(em_module *m, const em_tensor *x)
{
    return em_linear(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL);
}

em_tensor *em_linear_relu_forward(em_module *m, const em_tensor *x)
{
    return em_linear_relu(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL);
}

double em_linear_flops(int64_t in_features, bool bias, const em_tensor *y)
{
    return (double)em_numel(y) * (2.0 * (double)in_features + bias);
}

static double linear_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const em_linear_options *o = em_module_options(m);
    return em_linear_flops(o->in_features, o->bias, y);
}

static double linear_elements(const void *options)
{
    const em_linear_options *o = options;
    return (double)o->out_features * (double)(o->in_features + o->bias);
}

static em_module *linear_build(const em_module_type *type, const void *options,
                               em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const em_linear_options *o = options;
    return em_linear_layer(o->in_features, o->out_features, o->bias);
}

static const em_setting linear_settings[] = {EM_LINEAR_SETTINGS(em_linear_options)};

EM_MODULE_TYPE(em_linear_type) = {
    .type_name = "Linear",
    .forward = linear_forward,
    EM_SETTINGS(linear_settings),
    .options_offset = offsetof(linear_layer, o),
    .options_size = sizeof(em_linear_options),
    .traits = EM_TRAIT_MATMUL,
    .build = linear_build,
    .tensor_elements = linear_elements,
    .flops = linear_flops,
};

bool em_module_is_linear(const em_module *m)
{
    return m && m->type == &em_linear_type;
}

em_module *em_linear_layer(int64_t in_features, int64_t out_features, bool bias)
{
    if (in_features <= 0 || out_features <= 0) {
        em_set_error(EM_ERR_ARG, "em_linear_layer: features must be positive: in %lld, out %lld",
                     (long long)in_features, (long long)out_features);
        return NULL;
    }
    linear_layer *l = (linear_layer *)em_module_alloc(sizeof *l, &em_linear_type);
    if (!l)
        return NULL;
    l->o = (em_linear_options){in_features, out_features, bias};
    em_tensor *w = em_module_add_param(&l->base, "weight",
                                       em_empty(EM_SHAPE(out_features, in_features), EM_F32));
    bool ok = w && em_init_kaiming_uniform_(w, sqrt(5.0), EM_FAN_IN, NULL) == EM_OK;
    if (ok && bias) {
        double bound = 1.0 / sqrt((double)in_features);
        ok = em_module_add_param(&l->base, "bias",
                                 em_uniform(EM_SHAPE(out_features), EM_F32, -bound, bound,
                                            NULL)) != NULL;
    }
    if (!ok) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}
