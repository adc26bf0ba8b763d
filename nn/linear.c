/* Linear: y = x W^T + b with weight (out, in) and bias (out), initialised as PyTorch does
 * (kaiming_uniform_(a = sqrt 5) for W, U(-1/sqrt(in), 1/sqrt(in)) for b). */
#include <math.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t in_features, out_features;
} linear_layer; /* params: weight (out_features, in_features), bias (out_features) if any */

static em_tensor *linear_forward(em_module *m, const em_tensor *x)
{
    return em_linear(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL);
}

em_tensor *em_linear_relu_forward(em_module *m, const em_tensor *x)
{
    return em_linear_relu(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL);
}

static void linear_describe(const em_module *m, char *buf, size_t n)
{
    const linear_layer *l = (const linear_layer *)m;
    snprintf(buf, n, "in_features=%lld, out_features=%lld, bias=%s", (long long)l->in_features,
             (long long)l->out_features, m->n_params > 1 ? "true" : "false");
}

const em_module_type em_linear_type = {"Linear", linear_forward, NULL, linear_describe};

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
    l->in_features = in_features;
    l->out_features = out_features;
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
