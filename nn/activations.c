/* The parameter-free layers: ReLU, LeakyReLU, GELU, SiLU, Softsign, Mish, Softplus, Hardtanh,
 * ELU, SELU, Hardswish, LogSigmoid, Tanh, Sigmoid, Softmax and Flatten, one module type each over
 * a shared layer that holds the kind and its settings. */
#include <stdio.h>

#include "nn/nn_internal.h"

typedef enum { ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SILU, ACT_SOFTSIGN, ACT_MISH, ACT_SOFTPLUS,
               ACT_HARDTANH, ACT_ELU, ACT_SELU, ACT_HARDSWISH, ACT_LOGSIGMOID, ACT_TANH,
               ACT_SIGMOID, ACT_SOFTMAX, ACT_FLATTEN, ACT_COUNT } act_kind;

typedef struct {
    em_module base;
    act_kind kind;
    em_activation_config c;
} act_layer;

static em_tensor *act_forward(em_module *m, const em_tensor *x)
{
    const act_layer *a = (const act_layer *)m;
    switch (a->kind) {
    case ACT_RELU: return em_relu(x);
    case ACT_LEAKY_RELU: return em_leaky_relu(x, a->c.negative_slope);
    case ACT_GELU: return em_gelu(x, a->c.tanh_approximation);
    case ACT_SILU: return em_silu(x);
    case ACT_SOFTSIGN: return em_softsign(x);
    case ACT_MISH: return em_mish(x);
    case ACT_SOFTPLUS: return em_softplus(x, a->c.beta, a->c.threshold);
    case ACT_HARDTANH: return em_hardtanh(x, a->c.min_val, a->c.max_val);
    case ACT_ELU: return em_elu(x, a->c.alpha);
    case ACT_SELU: return em_selu(x);
    case ACT_HARDSWISH: return em_hardswish(x);
    case ACT_LOGSIGMOID: return em_logsigmoid(x);
    case ACT_TANH: return em_tanh(x);
    case ACT_SIGMOID: return em_sigmoid(x);
    case ACT_SOFTMAX: return em_softmax(x, a->c.dim);
    case ACT_FLATTEN: return em_flatten(x, 1, -1);
    case ACT_COUNT: break;
    }
    em_set_error(EM_ERR_STATE, "em_forward: unknown activation kind %d", (int)a->kind);
    return NULL;
}

static void act_describe(const em_module *m, char *buf, size_t n)
{
    const act_layer *a = (const act_layer *)m;
    const em_activation_config *c = &a->c;
    switch (a->kind) {
    case ACT_LEAKY_RELU: snprintf(buf, n, "negative_slope=%g", c->negative_slope); break;
    case ACT_GELU:
        snprintf(buf, n, "approximate='%s'", c->tanh_approximation ? "tanh" : "none");
        break;
    case ACT_SOFTPLUS: snprintf(buf, n, "beta=%g, threshold=%g", c->beta, c->threshold); break;
    case ACT_HARDTANH: snprintf(buf, n, "min_val=%g, max_val=%g", c->min_val, c->max_val); break;
    case ACT_ELU: snprintf(buf, n, "alpha=%g", c->alpha); break;
    case ACT_SOFTMAX: snprintf(buf, n, "dim=%d", c->dim); break;
    case ACT_FLATTEN: snprintf(buf, n, "start_dim=1, end_dim=-1"); break;
    default:
        if (n)
            buf[0] = '\0';
    }
}

const em_module_type em_relu_type = {"ReLU", act_forward, NULL, act_describe};
const em_module_type em_leaky_relu_type = {"LeakyReLU", act_forward, NULL, act_describe};
const em_module_type em_gelu_type = {"GELU", act_forward, NULL, act_describe};
const em_module_type em_silu_type = {"SiLU", act_forward, NULL, act_describe};
const em_module_type em_softsign_type = {"Softsign", act_forward, NULL, act_describe};
const em_module_type em_mish_type = {"Mish", act_forward, NULL, act_describe};
const em_module_type em_softplus_type = {"Softplus", act_forward, NULL, act_describe};
const em_module_type em_hardtanh_type = {"Hardtanh", act_forward, NULL, act_describe};
const em_module_type em_elu_type = {"ELU", act_forward, NULL, act_describe};
const em_module_type em_selu_type = {"SELU", act_forward, NULL, act_describe};
const em_module_type em_hardswish_type = {"Hardswish", act_forward, NULL, act_describe};
const em_module_type em_logsigmoid_type = {"LogSigmoid", act_forward, NULL, act_describe};
const em_module_type em_tanh_type = {"Tanh", act_forward, NULL, act_describe};
const em_module_type em_sigmoid_type = {"Sigmoid", act_forward, NULL, act_describe};
const em_module_type em_softmax_type = {"Softmax", act_forward, NULL, act_describe};
const em_module_type em_flatten_type = {"Flatten", act_forward, NULL, act_describe};

static const em_module_type *const act_types[ACT_COUNT] = {
    [ACT_RELU] = &em_relu_type,         [ACT_LEAKY_RELU] = &em_leaky_relu_type,
    [ACT_GELU] = &em_gelu_type,         [ACT_SILU] = &em_silu_type,
    [ACT_SOFTSIGN] = &em_softsign_type, [ACT_MISH] = &em_mish_type,
    [ACT_SOFTPLUS] = &em_softplus_type, [ACT_HARDTANH] = &em_hardtanh_type,
    [ACT_ELU] = &em_elu_type,           [ACT_SELU] = &em_selu_type,
    [ACT_HARDSWISH] = &em_hardswish_type, [ACT_LOGSIGMOID] = &em_logsigmoid_type,
    [ACT_TANH] = &em_tanh_type,
    [ACT_SIGMOID] = &em_sigmoid_type,   [ACT_SOFTMAX] = &em_softmax_type,
    [ACT_FLATTEN] = &em_flatten_type,
};

bool em_module_is_relu(const em_module *m)
{
    return m && m->type == &em_relu_type;
}

bool em_activation_layer_config(const em_module *m, em_activation_config *c)
{
    for (int k = 0; m && k < ACT_COUNT; k++)
        if (m->type == act_types[k]) {
            *c = ((const act_layer *)m)->c;
            return true;
        }
    return false;
}

static em_module *act_layer_new(act_kind kind, em_activation_config c)
{
    act_layer *a = (act_layer *)em_module_alloc(sizeof *a, act_types[kind]);
    if (!a)
        return NULL;
    a->kind = kind;
    a->c = c;
    return &a->base;
}

static em_module *plain_layer(act_kind kind)
{
    return act_layer_new(kind, (em_activation_config){0});
}

em_module *em_relu_layer(void) { return plain_layer(ACT_RELU); }
em_module *em_leaky_relu_layer(double negative_slope)
{
    return act_layer_new(ACT_LEAKY_RELU, (em_activation_config){.negative_slope = negative_slope});
}
em_module *em_gelu_layer(bool tanh_approximation)
{
    return act_layer_new(ACT_GELU,
                         (em_activation_config){.tanh_approximation = tanh_approximation});
}
em_module *em_silu_layer(void) { return plain_layer(ACT_SILU); }
em_module *em_softsign_layer(void) { return plain_layer(ACT_SOFTSIGN); }
em_module *em_mish_layer(void) { return plain_layer(ACT_MISH); }
em_module *em_softplus_layer(double beta, double threshold)
{
    return act_layer_new(ACT_SOFTPLUS,
                         (em_activation_config){.beta = beta, .threshold = threshold});
}
em_module *em_hardtanh_layer(double min_val, double max_val)
{
    return act_layer_new(ACT_HARDTANH,
                         (em_activation_config){.min_val = min_val, .max_val = max_val});
}
em_module *em_elu_layer(double alpha)
{
    return act_layer_new(ACT_ELU, (em_activation_config){.alpha = alpha});
}
em_module *em_selu_layer(void) { return plain_layer(ACT_SELU); }
em_module *em_hardswish_layer(void) { return plain_layer(ACT_HARDSWISH); }
em_module *em_logsigmoid_layer(void) { return plain_layer(ACT_LOGSIGMOID); }
em_module *em_tanh_layer(void) { return plain_layer(ACT_TANH); }
em_module *em_sigmoid_layer(void) { return plain_layer(ACT_SIGMOID); }
em_module *em_softmax_layer(int dim)
{
    return act_layer_new(ACT_SOFTMAX, (em_activation_config){.dim = dim});
}
em_module *em_flatten_layer(void) { return plain_layer(ACT_FLATTEN); }
