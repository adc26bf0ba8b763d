/* The parameter-free layers: ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, Softmax and Flatten,
 * one module type each over a shared layer that holds the kind and its one argument. */
#include <stdio.h>

#include "nn/nn_internal.h"

typedef enum { ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SILU, ACT_TANH, ACT_SIGMOID, ACT_SOFTMAX,
               ACT_FLATTEN, ACT_COUNT } act_kind;

typedef struct {
    em_module base;
    act_kind kind;
    double arg; /* negative_slope, tanh approximation (0/1), softmax dim */
} act_layer;

static em_tensor *act_forward(em_module *m, const em_tensor *x)
{
    const act_layer *a = (const act_layer *)m;
    switch (a->kind) {
    case ACT_RELU: return em_relu(x);
    case ACT_LEAKY_RELU: return em_leaky_relu(x, a->arg);
    case ACT_GELU: return em_gelu(x, a->arg != 0);
    case ACT_SILU: return em_silu(x);
    case ACT_TANH: return em_tanh(x);
    case ACT_SIGMOID: return em_sigmoid(x);
    case ACT_SOFTMAX: return em_softmax(x, (int)a->arg);
    case ACT_FLATTEN: return em_flatten(x, 1, -1);
    case ACT_COUNT: break;
    }
    em_set_error(EM_ERR_STATE, "em_forward: unknown activation kind %d", (int)a->kind);
    return NULL;
}

static void act_describe(const em_module *m, char *buf, size_t n)
{
    const act_layer *a = (const act_layer *)m;
    if (a->kind == ACT_LEAKY_RELU)
        snprintf(buf, n, "negative_slope=%g", a->arg);
    else if (a->kind == ACT_GELU)
        snprintf(buf, n, "approximate='%s'", a->arg != 0 ? "tanh" : "none");
    else if (a->kind == ACT_SOFTMAX)
        snprintf(buf, n, "dim=%d", (int)a->arg);
    else if (a->kind == ACT_FLATTEN)
        snprintf(buf, n, "start_dim=1, end_dim=-1");
    else if (n)
        buf[0] = '\0';
}

const em_module_type em_relu_type = {"ReLU", act_forward, NULL, act_describe};
const em_module_type em_leaky_relu_type = {"LeakyReLU", act_forward, NULL, act_describe};
const em_module_type em_gelu_type = {"GELU", act_forward, NULL, act_describe};
const em_module_type em_silu_type = {"SiLU", act_forward, NULL, act_describe};
const em_module_type em_tanh_type = {"Tanh", act_forward, NULL, act_describe};
const em_module_type em_sigmoid_type = {"Sigmoid", act_forward, NULL, act_describe};
const em_module_type em_softmax_type = {"Softmax", act_forward, NULL, act_describe};
const em_module_type em_flatten_type = {"Flatten", act_forward, NULL, act_describe};

static const em_module_type *const act_types[ACT_COUNT] = {
    [ACT_RELU] = &em_relu_type,       [ACT_LEAKY_RELU] = &em_leaky_relu_type,
    [ACT_GELU] = &em_gelu_type,       [ACT_SILU] = &em_silu_type,
    [ACT_TANH] = &em_tanh_type,       [ACT_SIGMOID] = &em_sigmoid_type,
    [ACT_SOFTMAX] = &em_softmax_type, [ACT_FLATTEN] = &em_flatten_type,
};

bool em_module_is_relu(const em_module *m)
{
    return m && m->type == &em_relu_type;
}

bool em_activation_layer_arg(const em_module *m, double *arg)
{
    for (int k = 0; m && k < ACT_COUNT; k++)
        if (m->type == act_types[k]) {
            *arg = ((const act_layer *)m)->arg;
            return true;
        }
    return false;
}

static em_module *act_layer_new(act_kind kind, double arg)
{
    act_layer *a = (act_layer *)em_module_alloc(sizeof *a, act_types[kind]);
    if (!a)
        return NULL;
    a->kind = kind;
    a->arg = arg;
    return &a->base;
}

em_module *em_relu_layer(void) { return act_layer_new(ACT_RELU, 0); }
em_module *em_leaky_relu_layer(double negative_slope)
{
    return act_layer_new(ACT_LEAKY_RELU, negative_slope);
}
em_module *em_gelu_layer(bool tanh_approximation)
{
    return act_layer_new(ACT_GELU, tanh_approximation);
}
em_module *em_silu_layer(void) { return act_layer_new(ACT_SILU, 0); }
em_module *em_tanh_layer(void) { return act_layer_new(ACT_TANH, 0); }
em_module *em_sigmoid_layer(void) { return act_layer_new(ACT_SIGMOID, 0); }
em_module *em_softmax_layer(int dim) { return act_layer_new(ACT_SOFTMAX, dim); }
em_module *em_flatten_layer(void) { return act_layer_new(ACT_FLATTEN, 0); }
