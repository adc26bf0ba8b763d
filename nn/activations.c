/* The parameter-free layers: ReLU, LeakyReLU, GELU, SiLU, Softsign, Mish, Softplus, Hardtanh,
 * ELU, CELU, SELU, Hardswish, LogSigmoid, Tanh, Sigmoid, Softmax, Flatten and Identity, one
 * module type each over a shared layer that holds the settings of every kind. */
#include <float.h>
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_activation_options o;
} act_layer;

static const em_activation_options *options_of(const em_module *m)
{
    return &((const act_layer *)m)->o;
}

/* A layer of type with options o, checked against type's settings; NULL with an error naming
 * fn. */
static em_module *act_new(const em_module_type *type, em_activation_options o, const char *fn)
{
    char why[160];
    if (!em_options_check(type, &o, why, sizeof why)) {
        em_set_error(EM_ERR_ARG, "%s: %s", fn, why);
        return NULL;
    }
    act_layer *a = (act_layer *)em_module_alloc(sizeof *a, type);
    if (!a)
        return NULL;
    a->o = o;
    return &a->base;
}

static em_module *act_build(const em_module_type *type, const void *options,
                            em_module **children, int n)
{
    (void)children, (void)n;
    return act_new(type, *(const em_activation_options *)options, type->type_name);
}

/* What every activation type's description shares: its options, elementwise, built by act_new */
#define ACTIVATION                                                                            \
    .options_offset = offsetof(act_layer, o), .options_size = sizeof(em_activation_options), \
    .traits = EM_TRAIT_ELEMENTWISE, .build = act_build
/* An activation's real setting (finite) of em_activation_options' field */
#define REAL(field, default_value)                                                            \
    EM_REAL_SETTING(em_activation_options, field, -DBL_MAX, DBL_MAX, default_value)

/* ---- without settings ---- */
static em_tensor *relu_forward(em_module *m, const em_tensor *x) { (void)m; return em_relu(x); }
static em_tensor *silu_forward(em_module *m, const em_tensor *x) { (void)m; return em_silu(x); }
static em_tensor *mish_forward(em_module *m, const em_tensor *x) { (void)m; return em_mish(x); }
static em_tensor *selu_forward(em_module *m, const em_tensor *x) { (void)m; return em_selu(x); }
static em_tensor *tanh_forward(em_module *m, const em_tensor *x) { (void)m; return em_tanh(x); }

static em_tensor *softsign_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_softsign(x);
}

static em_tensor *hardswish_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_hardswish(x);
}

static em_tensor *logsigmoid_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_logsigmoid(x);
}

static em_tensor *sigmoid_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_sigmoid(x);
}

EM_MODULE_TYPE(em_relu_type) = {.type_name = "ReLU", .forward = relu_forward, ACTIVATION,
                                .onnx = {.op = "Relu"}};
EM_MODULE_TYPE(em_silu_type) = {.type_name = "SiLU", .forward = silu_forward, ACTIVATION};
EM_MODULE_TYPE(em_softsign_type) = {.type_name = "Softsign", .forward = softsign_forward,
                                    ACTIVATION, .onnx = {.op = "Softsign"}};
EM_MODULE_TYPE(em_mish_type) = {.type_name = "Mish", .forward = mish_forward, ACTIVATION};
/* ONNX's default alpha and gamma are PyTorch's constants */
EM_MODULE_TYPE(em_selu_type) = {.type_name = "SELU", .forward = selu_forward, ACTIVATION,
                                .onnx = {.op = "Selu"}};
EM_MODULE_TYPE(em_hardswish_type) = {.type_name = "Hardswish", .forward = hardswish_forward,
                                     ACTIVATION, .onnx = {.op = "HardSwish"}};
EM_MODULE_TYPE(em_logsigmoid_type) = {.type_name = "LogSigmoid", .forward = logsigmoid_forward,
                                      ACTIVATION};
EM_MODULE_TYPE(em_tanh_type) = {.type_name = "Tanh", .forward = tanh_forward, ACTIVATION,
                                .onnx = {.op = "Tanh"}};
EM_MODULE_TYPE(em_sigmoid_type) = {.type_name = "Sigmoid", .forward = sigmoid_forward,
                                   ACTIVATION, .onnx = {.op = "Sigmoid"}};

bool em_module_is_relu(const em_module *m)
{
    return m && m->type == &em_relu_type;
}

static const em_activation_options none = {0};
em_module *em_relu_layer(void) { return act_new(&em_relu_type, none, "em_relu_layer"); }
em_module *em_silu_layer(void) { return act_new(&em_silu_type, none, "em_silu_layer"); }
em_module *em_softsign_layer(void)
{
    return act_new(&em_softsign_type, none, "em_softsign_layer");
}
em_module *em_mish_layer(void) { return act_new(&em_mish_type, none, "em_mish_layer"); }
em_module *em_selu_layer(void) { return act_new(&em_selu_type, none, "em_selu_layer"); }
em_module *em_hardswish_layer(void)
{
    return act_new(&em_hardswish_type, none, "em_hardswish_layer");
}
em_module *em_logsigmoid_layer(void)
{
    return act_new(&em_logsigmoid_type, none, "em_logsigmoid_layer");
}
em_module *em_tanh_layer(void) { return act_new(&em_tanh_type, none, "em_tanh_layer"); }
em_module *em_sigmoid_layer(void) { return act_new(&em_sigmoid_type, none, "em_sigmoid_layer"); }

/* ---- LeakyReLU(negative_slope) ---- */
static em_tensor *leaky_relu_forward(em_module *m, const em_tensor *x)
{
    return em_leaky_relu(x, options_of(m)->negative_slope);
}

static const em_setting leaky_relu_settings[] = {REAL(negative_slope, 0.01)};

EM_MODULE_TYPE(em_leaky_relu_type) = {
    .type_name = "LeakyReLU", .forward = leaky_relu_forward, ACTIVATION,
    EM_SETTINGS(leaky_relu_settings),
    .onnx = {.op = "LeakyRelu", .attributes = {{"alpha", "negative_slope"}}},
};

em_module *em_leaky_relu_layer(double negative_slope)
{
    return act_new(&em_leaky_relu_type, (em_activation_options){.negative_slope = negative_slope},
                   "em_leaky_relu_layer");
}

/* ---- GELU(approximate) ---- */
static em_tensor *gelu_forward(em_module *m, const em_tensor *x)
{
    return em_gelu(x, options_of(m)->tanh_approximation);
}

static void gelu_describe(const em_module *m, char *buf, size_t n)
{
    snprintf(buf, n, "approximate='%s'", options_of(m)->tanh_approximation ? "tanh" : "none");
}

static const em_setting gelu_settings[] = {
    EM_BOOL_SETTING(em_activation_options, tanh_approximation, 0)};

EM_MODULE_TYPE(em_gelu_type) = {.type_name = "GELU", .forward = gelu_forward,
                                .describe = gelu_describe, ACTIVATION,
                                EM_SETTINGS(gelu_settings)};

em_module *em_gelu_layer(bool tanh_approximation)
{
    return act_new(&em_gelu_type,
                   (em_activation_options){.tanh_approximation = tanh_approximation},
                   "em_gelu_layer");
}

/* ---- Softplus(beta, threshold) ---- */
static em_tensor *softplus_forward(em_module *m, const em_tensor *x)
{
    return em_softplus(x, options_of(m)->beta, options_of(m)->threshold);
}

/* Whether setting name's value v, which the layer divides by, is not 0; else false with why. */
static bool divisor_check(const char *name, double v, char *why, size_t n)
{
    if (v != 0)
        return true;
    snprintf(why, n, "setting '%s' is 0; it divides, so it must not be", name);
    return false;
}

static bool softplus_check(const void *options, char *why, size_t n)
{
    return divisor_check("beta", ((const em_activation_options *)options)->beta, why, n);
}

static const em_setting softplus_settings[] = {REAL(beta, 1), REAL(threshold, 20)};

EM_MODULE_TYPE(em_softplus_type) = {.type_name = "Softplus", .forward = softplus_forward,
                                    ACTIVATION, EM_SETTINGS(softplus_settings),
                                    .check = softplus_check};

em_module *em_softplus_layer(double beta, double threshold)
{
    return act_new(&em_softplus_type, (em_activation_options){.beta = beta,
                                                              .threshold = threshold},
                   "em_softplus_layer");
}

/* ---- Hardtanh(min_val, max_val) ---- */
static em_tensor *hardtanh_forward(em_module *m, const em_tensor *x)
{
    return em_hardtanh(x, options_of(m)->min_val, options_of(m)->max_val);
}

static bool hardtanh_check(const void *options, char *why, size_t n)
{
    const em_activation_options *o = options;
    if (o->min_val <= o->max_val)
        return true;
    snprintf(why, n, "setting 'min_val' is %g, above max_val %g", o->min_val, o->max_val);
    return false;
}

static const em_setting hardtanh_settings[] = {REAL(min_val, -1), REAL(max_val, 1)};

EM_MODULE_TYPE(em_hardtanh_type) = {.type_name = "Hardtanh", .forward = hardtanh_forward,
                                    ACTIVATION, EM_SETTINGS(hardtanh_settings),
                                    .check = hardtanh_check};

em_module *em_hardtanh_layer(double min_val, double max_val)
{
    return act_new(&em_hardtanh_type, (em_activation_options){.min_val = min_val,
                                                              .max_val = max_val},
                   "em_hardtanh_layer");
}

/* ---- ELU(alpha) ---- */
static em_tensor *elu_forward(em_module *m, const em_tensor *x)
{
    return em_elu(x, options_of(m)->alpha);
}

static const em_setting alpha_settings[] = {REAL(alpha, 1)};

EM_MODULE_TYPE(em_elu_type) = {.type_name = "ELU", .forward = elu_forward, ACTIVATION,
                               EM_SETTINGS(alpha_settings),
                               .onnx = {.op = "Elu", .attributes = {{"alpha", "alpha"}}}};

em_module *em_elu_layer(double alpha)
{
    return act_new(&em_elu_type, (em_activation_options){.alpha = alpha}, "em_elu_layer");
}

/* ---- CELU(alpha): max(0, x) + min(0, alpha (exp(x / alpha) - 1)), which is alpha ELU(x / alpha)
 * with ELU's alpha 1 ---- */
static em_tensor *celu_forward(em_module *m, const em_tensor *x)
{
    double alpha = options_of(m)->alpha;
    em_scope_begin();
    em_tensor *y = em_mul_scalar(em_elu(em_mul_scalar(x, 1 / alpha), 1), alpha);
    return em_nn_scope_return(y);
}

static bool celu_check(const void *options, char *why, size_t n)
{
    return divisor_check("alpha", ((const em_activation_options *)options)->alpha, why, n);
}

EM_MODULE_TYPE(em_celu_type) = {.type_name = "CELU", .forward = celu_forward, ACTIVATION,
                                EM_SETTINGS(alpha_settings), .check = celu_check,
                                .onnx = {.op = "Celu", .attributes = {{"alpha", "alpha"}}}};

em_module *em_celu_layer(double alpha)
{
    return act_new(&em_celu_type, (em_activation_options){.alpha = alpha}, "em_celu_layer");
}

/* ---- Softmax(dim) and Flatten: not elementwise ---- */
static em_tensor *softmax_forward(em_module *m, const em_tensor *x)
{
    return em_softmax(x, (int)options_of(m)->dim);
}

/* an exp, a sum and a divide per element */
static double softmax_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)m, (void)x;
    return 3 * (double)em_numel(y);
}

static const em_setting softmax_settings[] = {
    {.name = "dim", .kind = EM_SETTING_INT, .offset = offsetof(em_activation_options, dim),
     .min = -EM_MAX_DIMS, .max = EM_MAX_DIMS - 1}};

EM_MODULE_TYPE(em_softmax_type) = {
    .type_name = "Softmax",
    .forward = softmax_forward,
    EM_SETTINGS(softmax_settings),
    .options_offset = offsetof(act_layer, o),
    .options_size = sizeof(em_activation_options),
    .build = act_build,
    .flops = softmax_flops,
    .onnx = {.op = "Softmax", .attributes = {{"axis", "dim"}}},
};

em_module *em_softmax_layer(int dim)
{
    return act_new(&em_softmax_type, (em_activation_options){.dim = dim}, "em_softmax_layer");
}

static em_tensor *flatten_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_flatten(x, 1, -1);
}

static void flatten_describe(const em_module *m, char *buf, size_t n)
{
    (void)m;
    snprintf(buf, n, "start_dim=1, end_dim=-1");
}

/* ONNX's Flatten flattens from its default axis 1, as this layer does */
EM_MODULE_TYPE(em_flatten_type) = {
    .type_name = "Flatten",
    .forward = flatten_forward,
    .describe = flatten_describe,
    .options_offset = offsetof(act_layer, o),
    .options_size = sizeof(em_activation_options),
    .build = act_build,
    .flops = em_no_flops,
    .onnx = {.op = "Flatten"},
};

em_module *em_flatten_layer(void)
{
    return act_new(&em_flatten_type, none, "em_flatten_layer");
}

static em_tensor *identity_forward(em_module *m, const em_tensor *x)
{
    (void)m;
    return em_reshape(x, em_shape_of(x));
}

/* nn.Identity: a branch that passes its input on (em_concat_skip's first), no arithmetic */
EM_MODULE_TYPE(em_identity_type) = {
    .type_name = "Identity",
    .forward = identity_forward,
    ACTIVATION,
    .flops = em_no_flops,
    .onnx = {.op = "Identity"},
};

em_module *em_identity_layer(void)
{
    return act_new(&em_identity_type, none, "em_identity_layer");
}
