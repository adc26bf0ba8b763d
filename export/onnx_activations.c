/* ONNX mappings of the activation layers ONNX has no operator for, composed of opset-17
 * operators: SiLU x sigmoid(x), Mish x tanh(softplus(x)), Hardtanh as Clip, LogSigmoid
 * -softplus(-x), Softplus(beta x) / beta, GELU (em_onnx_gelu). Each reads its layer's options;
 * the activations that are one ONNX operator (Relu, LeakyRelu, Elu, ...) name it in their
 * type's description instead. */
#include <stdio.h>

#include "export/onnx_internal.h"
#include "nn/nn_internal.h"

/* op(the current value) */
static em_status unary(em_onnx_builder *b, const char *op)
{
    return em_onnx_op(b, op, em_onnx_value(b), NULL, NULL);
}

static const em_activation_options *options_of(const em_module *m)
{
    return em_module_options(m);
}

static em_status export_gelu(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    return em_onnx_gelu(b, options_of(m)->tanh_approximation);
}
EM_ONNX_MAPPING(em_gelu_type, export_gelu);

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
EM_ONNX_MAPPING(em_silu_type, export_silu);

static em_status export_mish(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    return times_input(b, "Softplus", "Tanh");
}
EM_ONNX_MAPPING(em_mish_type, export_mish);

/* Softplus(beta x) / beta: ONNX's Softplus has no threshold, so only thresholds of 20 and more
 * export (where ember's x and ONNX's x + log1p(exp(-beta x)) / beta differ by 2e-9 / beta). */
static em_status export_softplus(em_onnx_builder *b, const em_module *m, const char *layer)
{
    const em_activation_options *o = options_of(m);
    if (!(o->threshold >= 20))
        return em_set_error(EM_ERR_UNSUPPORTED, "em_onnx_export: %s: Softplus with threshold %g "
                            "has no ONNX mapping (ONNX's Softplus has no threshold; 20 or more "
                            "exports)", layer, o->threshold);
    const char *beta = em_onnx_f32(b, "beta", (float)o->beta);
    if (!beta || em_onnx_op(b, "Mul", em_onnx_value(b), beta, NULL) != EM_OK ||
        unary(b, "Softplus") != EM_OK)
        return em_error_status();
    return em_onnx_op(b, "Div", em_onnx_value(b), beta, NULL);
}
EM_ONNX_MAPPING(em_softplus_type, export_softplus);

static em_status export_hardtanh(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    const em_activation_options *o = options_of(m);
    const char *lo = em_onnx_f32(b, "min_val", (float)o->min_val);
    const char *hi = lo ? em_onnx_f32(b, "max_val", (float)o->max_val) : NULL;
    if (!hi)
        return em_error_status();
    return em_onnx_node(b, "Clip", (const char *[]){em_onnx_value(b), lo, hi}, 3, NULL, 0);
}
EM_ONNX_MAPPING(em_hardtanh_type, export_hardtanh);

static em_status export_logsigmoid(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)m, (void)layer;
    em_status st = unary(b, "Neg");
    st = st == EM_OK ? unary(b, "Softplus") : st;
    return st == EM_OK ? unary(b, "Neg") : st;
}
EM_ONNX_MAPPING(em_logsigmoid_type, export_logsigmoid);
