/* ONNX mappings of the activation layers, one exporter per module type: opset-17 operators
 * where ONNX has the function, composed where it has not (SiLU x sigmoid(x), Mish
 * x tanh(softplus(x)), Hardtanh as Clip, LogSigmoid -softplus(-x), Softplus(beta x) / beta; GELU
 * is em_onnx_gelu). Each reads its layer's settings by name (em_activation_config). */
#include <stdio.h>

#include "export/onnx_internal.h"
#include "nn/nn_internal.h"

/* op(the current value) */
static em_status unary(em_onnx_builder *b, const char *op)
{
    return em_onnx_op(b, op, em_onnx_value(b), NULL, NULL);
}

/* op(the current value) with one float attribute */
static em_status unary_float_attr(em_onnx_builder *b, const char *op, const char *attr,
                                  double v)
{
    em_onnx_attr a = {.name = attr, .kind = EM_ONNX_ATTR_FLOAT, .f = v};
    return em_onnx_op(b, op, em_onnx_value(b), NULL, &a);
}

/* op(the current value) with one integer attribute */
static em_status unary_int_attr(em_onnx_builder *b, const char *op, const char *attr, int64_t v)
{
    em_onnx_attr a = {.name = attr, .kind = EM_ONNX_ATTR_INT, .i = v};
    return em_onnx_op(b, op, em_onnx_value(b), NULL, &a);
}

static em_activation_config settings(const em_module *m)
{
    em_activation_config c = {0};
    em_activation_layer_config(m, &c);
    return c;
}

static em_status export_relu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary(b, "Relu");
}

static em_status export_tanh(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary(b, "Tanh");
}

static em_status export_sigmoid(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary(b, "Sigmoid");
}

static em_status export_softsign(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary(b, "Softsign");
}

/* ONNX's default alpha and gamma are PyTorch's constants */
static em_status export_selu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary(b, "Selu");
}

static em_status export_hardswish(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary(b, "HardSwish");
}

static em_status export_leaky_relu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    return unary_float_attr(b, "LeakyRelu", "alpha", settings(m).negative_slope);
}

static em_status export_elu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    return unary_float_attr(b, "Elu", "alpha", settings(m).alpha);
}

static em_status export_softmax(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    return unary_int_attr(b, "Softmax", "axis", settings(m).dim);
}

static em_status export_flatten(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return unary_int_attr(b, "Flatten", "axis", 1);
}

static em_status export_gelu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    return em_onnx_gelu(b, settings(m).tanh_approximation);
}

/* x * second(first(x)), or x * first(x) when second is NULL */
static em_status times_input(em_onnx_builder *b, const char *first, const char *second)
{
    char x[256];
    snprintf(x, sizeof x, "%s", em_onnx_value(b));
    em_status st = unary(b, first);
    if (st == EM_OK && second)
        st = unary(b, second);
    return st == EM_OK ? em_onnx_op(b, "Mul", x, em_onnx_value(b), NULL) : st;
}

static em_status export_silu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return times_input(b, "Sigmoid", NULL);
}

static em_status export_mish(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return times_input(b, "Softplus", "Tanh");
}

/* Softplus(beta x) / beta: ONNX's Softplus has no threshold, so only thresholds of 20 and more
 * export (where ember's x and ONNX's x + log1p(exp(-beta x)) / beta differ by 2e-9 / beta). */
static em_status export_softplus(em_onnx_builder *b, const em_module *m, const char *layer)
{
    em_activation_config c = settings(m);
    if (!(c.threshold >= 20))
        return em_set_error(EM_ERR_UNSUPPORTED, "em_onnx_export: %s: Softplus with threshold %g "
                            "has no ONNX mapping (ONNX's Softplus has no threshold; 20 or more "
                            "exports)", layer, c.threshold);
    const char *beta = em_onnx_f32(b, "beta", (float)c.beta);
    if (!beta || em_onnx_op(b, "Mul", em_onnx_value(b), beta, NULL) != EM_OK ||
        unary(b, "Softplus") != EM_OK)
        return em_error_status();
    return em_onnx_op(b, "Div", em_onnx_value(b), beta, NULL);
}

static em_status export_hardtanh(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    em_activation_config c = settings(m);
    const char *lo = em_onnx_f32(b, "min_val", (float)c.min_val);
    const char *hi = lo ? em_onnx_f32(b, "max_val", (float)c.max_val) : NULL;
    if (!hi)
        return em_error_status();
    return em_onnx_node(b, "Clip", (const char *[]){em_onnx_value(b), lo, hi}, 3, NULL, 0);
}

static em_status export_logsigmoid(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    em_status st = unary(b, "Neg");
    st = st == EM_OK ? unary(b, "Softplus") : st;
    return st == EM_OK ? unary(b, "Neg") : st;
}

static const em_onnx_mapping activations[] = {
    {&em_relu_type, export_relu},
    {&em_tanh_type, export_tanh},
    {&em_sigmoid_type, export_sigmoid},
    {&em_softsign_type, export_softsign},
    {&em_selu_type, export_selu},
    {&em_hardswish_type, export_hardswish},
    {&em_leaky_relu_type, export_leaky_relu},
    {&em_elu_type, export_elu},
    {&em_softmax_type, export_softmax},
    {&em_flatten_type, export_flatten},
    {&em_gelu_type, export_gelu},
    {&em_silu_type, export_silu},
    {&em_mish_type, export_mish},
    {&em_softplus_type, export_softplus},
    {&em_hardtanh_type, export_hardtanh},
    {&em_logsigmoid_type, export_logsigmoid},
};

em_onnx_exporter em_onnx_activation_exporter(const em_module_type *type)
{
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (activations[i].type == type)
            return activations[i].fn;
    return NULL;
}
