/* ONNX export: walks a module tree in order, runs an example through each layer to learn its
 * shapes, and writes one ONNX node (or a few) per layer with its tensors as initializers, in
 * protobuf through io/protobuf.c. A layer's mapping is found by its module type: the built-in
 * table, or one a user registered. Field numbers are onnx.proto's (IR version 8). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "export/onnx.h"
#include "export/onnx_internal.h"
#include "io/atomic_file.h"
#include "io/protobuf_internal.h"
#include "io/utf8.h"
#include "prune/prune.h"
#include "quant/quantize.h"

/* onnx.proto field numbers */
enum { MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_GRAPH = 7,
       MODEL_OPSET = 8 };
enum { OPSET_DOMAIN = 1, OPSET_VERSION = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11,
       GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTRIBUTE = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_INTS_TYPE = 7 };
enum { TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9 };
enum { VALUE_NAME = 1, VALUE_TYPE = 2, TYPE_TENSOR = 1, TTYPE_ELEM = 1, TTYPE_SHAPE = 2,
       SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2 };
enum { ONNX_FLOAT = 1, ONNX_INT64 = 7, IR_VERSION = 8, DEFAULT_OPSET = 17 };

#define NAME_MAX_LEN 256
/* A layer's dotted name leaves room in NAME_MAX_LEN for "/<op>_<node number>" and ".<tensor>" */
#define LAYER_MAX_LEN 192

struct em_onnx_builder {
    em_pb graph;             /* nodes and initializers so far */
    char value[NAME_MAX_LEN]; /* the name of the value flowing between layers */
    int n_values;            /* values named so far ("v1", "v2", ...) */
    int n_nodes;             /* nodes so far, to make node names unique */
    em_tensor *x;            /* the example as it leaves the last exported layer (owned) */
    const char *layer;       /* the layer being written */
    const em_module *folded; /* the BatchNorm2d folded into the Conv2d being written, or NULL */
    char **names;            /* (n_names) initializer names written so far */
    int n_names;
    bool allow_nonfinite;    /* em_onnx_opts.allow_nonfinite */
};
typedef struct em_onnx_builder exporter;

/* A fresh value name into out. */
static void next_value(exporter *e, char *out)
{
    snprintf(out, NAME_MAX_LEN, "v%d", ++e->n_values);
}

static void attr_begin(em_pb *a, const char *name, int type)
{
    em_pb_string(a, ATTR_NAME, name);
    em_pb_int(a, ATTR_TYPE, type);
}

static void attr_int(em_pb *node, const char *name, int64_t v)
{
    em_pb a = {0};
    attr_begin(&a, name, ATTR_INT);
    em_pb_int(&a, ATTR_I, v);
    em_pb_message(node, NODE_ATTRIBUTE, &a);
}

static void attr_float(em_pb *node, const char *name, double v)
{
    em_pb a = {0};
    attr_begin(&a, name, ATTR_FLOAT);
    em_pb_float(&a, ATTR_F, (float)v);
    em_pb_message(node, NODE_ATTRIBUTE, &a);
}

static void attr_string(em_pb *node, const char *name, const char *v)
{
    em_pb a = {0};
    attr_begin(&a, name, ATTR_STRING);
    em_pb_string(&a, ATTR_S, v);
    em_pb_message(node, NODE_ATTRIBUTE, &a);
}

static void attr_ints(em_pb *node, const char *name, const int64_t *v, int n)
{
    em_pb a = {0};
    attr_begin(&a, name, ATTR_INTS_TYPE);
    for (int i = 0; i < n; i++)
        em_pb_int(&a, ATTR_INTS, v[i]);
    em_pb_message(node, NODE_ATTRIBUTE, &a);
}

/* Starts a node op(inputs) -> output named after the layer; the caller adds attributes and
 * hands it to node_end. */
static em_pb node_begin(exporter *e, const char *op, const char *layer,
                        const char *const *inputs, int n_in, const char *output)
{
    em_pb n = {0};
    for (int i = 0; i < n_in; i++)
        em_pb_string(&n, NODE_INPUT, inputs[i]);
    em_pb_string(&n, NODE_OUTPUT, output);
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s%s%s_%d", layer, *layer ? "/" : "", op, ++e->n_nodes);
    em_pb_string(&n, NODE_NAME, name);
    em_pb_string(&n, NODE_OP, op);
    return n;
}

static void node_end(exporter *e, em_pb *n)
{
    em_pb_message(&e->graph, GRAPH_NODE, n);
}

/* A node op(inputs) with attributes whose output becomes the current value. */
static void node(exporter *e, const char *op, const char *layer, const char *const *inputs,
                 int n_in, const em_onnx_attr *attrs, int n_attrs)
{
    char out[NAME_MAX_LEN];
    next_value(e, out);
    em_pb n = node_begin(e, op, layer, inputs, n_in, out);
    for (int i = 0; i < n_attrs; i++) {
        const em_onnx_attr *a = &attrs[i];
        if (a->kind == EM_ONNX_ATTR_INT)
            attr_int(&n, a->name, a->i);
        else if (a->kind == EM_ONNX_ATTR_FLOAT)
            attr_float(&n, a->name, a->f);
        else if (a->kind == EM_ONNX_ATTR_STRING)
            attr_string(&n, a->name, a->s);
        else
            attr_ints(&n, a->name, a->ints, a->n_ints);
    }
    node_end(e, &n);
    strcpy(e->value, out);
}

/* A node with one input (the current value) and no attributes; the current value moves on. */
static void simple_node(exporter *e, const char *op, const char *layer)
{
    const char *in[] = {e->value};
    node(e, op, layer, in, 1, NULL, 0);
}

/* An initializer of onnx_type (f32 or i64) from host values v with the given shape; NaN or Inf
 * among f32 values is an error naming the tensor unless the caller allowed them. */
static em_status initializer_raw(exporter *e, const char *name, const void *v, int onnx_type,
                                 em_shape s)
{
    int64_t n = em_shape_numel(&s), bad = 0;
    for (int64_t i = 0; onnx_type == ONNX_FLOAT && i < n; i++)
        bad += !isfinite(((const float *)v)[i]);
    if (bad && !e->allow_nonfinite)
        return em_set_error(EM_ERR_NUMERIC, "em_onnx_export: '%s' holds %lld NaN or Inf values "
                            "of %lld (em_onnx_opts.allow_nonfinite writes them)", name,
                            (long long)bad, (long long)n);
    em_pb t = {0};
    for (int i = 0; i < s.ndim; i++)
        em_pb_int(&t, TENSOR_DIMS, s.d[i]);
    em_pb_int(&t, TENSOR_DATA_TYPE, onnx_type);
    em_pb_string(&t, TENSOR_NAME, name);
    size_t size = onnx_type == ONNX_INT64 ? sizeof(int64_t) : sizeof(float);
    em_pb_bytes(&t, TENSOR_RAW, v, size * (size_t)n); /* little-endian hosts */
    em_pb_message(&e->graph, GRAPH_INITIALIZER, &t);
    return EM_OK;
}

/* "<layer>.<local>" (just local for the root) into out; an error when it does not fit. */
static em_status tensor_name(const char *layer, const char *local, char *out)
{
    if (snprintf(out, NAME_MAX_LEN, "%s%s%s", layer, *layer ? "." : "", local) >= NAME_MAX_LEN)
        return em_set_error(EM_ERR_ARG, "em_onnx_export: the name of tensor '%s' of layer '%s' "
                            "is longer than %d bytes", local, layer, NAME_MAX_LEN - 1);
    return EM_OK;
}

static em_status initializer_f32(exporter *e, const char *name, const float *v, em_shape s)
{
    return initializer_raw(e, name, v, ONNX_FLOAT, s);
}

/* Whether an initializer called name was written (a tied weight is written once), else
 * remembers the name; false with an error when memory runs out. */
static bool written_before(exporter *e, const char *name, em_status *st)
{
    *st = EM_OK;
    for (int i = 0; i < e->n_names; i++)
        if (!strcmp(e->names[i], name))
            return true;
    char **names = realloc(e->names, (size_t)(e->n_names + 1) * sizeof *names);
    char *kept = names ? malloc(strlen(name) + 1) : NULL;
    if (names)
        e->names = names;
    if (!kept)
        *st = em_set_error(EM_ERR_MEMORY, "em_onnx_export: out of memory");
    else
        e->names[e->n_names++] = strcpy(kept, name);
    return false;
}

/* An initializer holding tensor t (i64 kept, any other dtype as f32) under "<layer>.<local>";
 * its name goes to out. A name written before is not written again. */
static em_status initializer(exporter *e, const char *layer, const char *local,
                             const em_tensor *t, char *out)
{
    if (tensor_name(layer, local, out) != EM_OK)
        return EM_ERR_ARG;
    em_status st;
    if (written_before(e, out, &st) || st != EM_OK)
        return st;
    bool i64 = t->dtype == EM_I64;
    void *v = i64 ? malloc(sizeof(int64_t) * (size_t)(em_numel(t) ? em_numel(t) : 1))
                  : (void *)em_host_f32(t, "em_onnx_export");
    if (i64 && v && em_copy_to_host(t, EM_I64, v) != EM_OK) {
        free(v);
        return em_error_status();
    }
    if (!v)
        return i64 ? em_set_error(EM_ERR_MEMORY, "em_onnx_export: out of memory")
                   : em_error_status();
    st = initializer_raw(e, out, v, i64 ? ONNX_INT64 : ONNX_FLOAT, em_shape_of(t));
    free(v);
    return st;
}

/* A one-element constant named "<layer>.<local>" (finite, and short beside LAYER_MAX_LEN). */
static void constant(exporter *e, const char *layer, const char *local, float v, char *out)
{
    tensor_name(layer, local, out);
    initializer_f32(e, out, &v, EM_SCALAR_SHAPE);
}

/* op(a, b) -> the new current value */
static void binary_node(exporter *e, const char *op, const char *layer, const char *a,
                        const char *b)
{
    const char *in[] = {a, b};
    node(e, op, layer, in, 2, NULL, 0);
}

/* Layer m's weight and bias (where it has one) as initializers, and node n begun: op(the
 * current value, weight[, bias]) into out, a new value name. */
static em_status weighted_node_begin(exporter *e, const char *op, const em_module *m,
                                     const char *layer, char *out, em_pb *n)
{
    const em_tensor *w = m->params[0].value, *b = m->n_params > 1 ? m->params[1].value : NULL;
    char wn[NAME_MAX_LEN], bn[NAME_MAX_LEN];
    if (initializer(e, layer, "weight", w, wn) != EM_OK ||
        (b && initializer(e, layer, "bias", b, bn) != EM_OK))
        return em_error_status();
    next_value(e, out);
    const char *in[] = {e->value, wn, bn};
    *n = node_begin(e, op, layer, in, b ? 3 : 2, out);
    return EM_OK;
}

static em_status export_linear(exporter *e, const em_module *m, const char *layer)
{
    const em_tensor *w = m->params[0].value, *b = m->n_params > 1 ? m->params[1].value : NULL;
    char wn[NAME_MAX_LEN], bn[NAME_MAX_LEN], out[NAME_MAX_LEN];
    if (e->x->ndim == 2) { /* Gemm: y = x W^T + b */
        em_pb n;
        if (weighted_node_begin(e, "Gemm", m, layer, out, &n) != EM_OK)
            return em_error_status();
        attr_int(&n, "transB", 1);
        node_end(e, &n);
        strcpy(e->value, out);
        return EM_OK;
    }
    em_tensor *wt = em_transpose(w, 0, 1); /* MatMul over the leading dims: x (*, in) W^T */
    em_status st = wt ? initializer(e, layer, "weight_t", wt, wn) : em_error_status();
    em_release(wt);
    if (st != EM_OK || (b && initializer(e, layer, "bias", b, bn) != EM_OK))
        return em_error_status();
    binary_node(e, "MatMul", layer, e->value, wn);
    if (b)
        binary_node(e, "Add", layer, e->value, bn);
    return EM_OK;
}
EM_ONNX_MAPPING(em_linear_type, export_linear);

/* ONNX's pads of a Conv2d or Conv1d with options o over sp spatial dims: the begins, then the
 * ends; EM_PADDING_SAME as PyTorch's, the odd one at the end. */
static void conv_pads(const em_conv_options *o, int sp, int64_t *pads)
{
    int64_t begin = o->padding, end = begin;
    if (o->padding == EM_PADDING_SAME) {
        int64_t total = o->dilation * (o->kernel_size - 1);
        begin = total / 2;
        end = total - begin;
    }
    for (int i = 0; i < sp; i++) {
        pads[i] = begin;
        pads[sp + i] = end;
    }
}

/* n copies of v into out: a square layer's per-dim attribute */
static const int64_t *each_dim(int64_t v, int n, int64_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = v;
    return out;
}

/* Conv2d or Conv1d, with the BatchNorm2d that follows a Conv2d (e->folded, or NULL) folded into
 * its weight and bias: w' = w g / sqrt(var + eps) per output channel,
 * b' = (b - mean) g / sqrt(var + eps) + beta. */
static em_status export_conv(exporter *e, const em_module *m, const char *layer)
{
    const em_module *bn = e->folded;
    const em_conv_options *o = em_module_options(m);
    const em_tensor *w = m->params[0].value, *b = m->n_params > 1 ? m->params[1].value : NULL;
    int64_t c_out = w->shape[0], per = em_numel(w) / c_out;
    if (bn && em_numel(bn->params[0].value) != c_out)
        return em_set_error(EM_ERR_ARG, "em_onnx_export: layer '%s': the BatchNorm2d after it has "
                            "%lld channels, its Conv2d %lld outputs", layer,
                            (long long)em_numel(bn->params[0].value), (long long)c_out);
    float *wv = em_host_f32(w, "em_onnx_export");
    float *bv = calloc((size_t)c_out, sizeof *bv);
    float *g = NULL, *beta = NULL, *mean = NULL, *var = NULL;
    em_status st = wv && bv ? EM_OK : em_set_error(EM_ERR_MEMORY, "em_onnx_export: out of memory");
    if (st == EM_OK && b && em_copy_to_host(b, EM_F32, bv) != EM_OK)
        st = em_error_status();
    if (st == EM_OK && bn) {
        double eps = ((const em_batch_norm_options *)em_module_options(bn))->eps;
        g = em_host_f32(bn->params[0].value, "em_onnx_export");
        beta = em_host_f32(bn->params[1].value, "em_onnx_export");
        mean = em_host_f32(bn->buffers[0].value, "em_onnx_export");
        var = em_host_f32(bn->buffers[1].value, "em_onnx_export");
        if (!g || !beta || !mean || !var)
            st = em_error_status();
        for (int64_t c = 0; st == EM_OK && c < c_out; c++) {
            double k = g[c] / sqrt((double)var[c] + eps);
            for (int64_t i = 0; i < per; i++)
                wv[c * per + i] = (float)(wv[c * per + i] * k);
            bv[c] = (float)((bv[c] - mean[c]) * k + beta[c]);
        }
    }
    char wn[NAME_MAX_LEN], bname[NAME_MAX_LEN], out[NAME_MAX_LEN];
    if (st == EM_OK) {
        tensor_name(layer, "weight", wn);
        tensor_name(layer, "bias", bname);
        st = initializer_f32(e, wn, wv, em_shape_of(w));
    }
    if (st == EM_OK && (b || bn))
        st = initializer_f32(e, bname, bv, EM_SHAPE(c_out));
    if (st == EM_OK) {
        next_value(e, out);
        const char *in[] = {e->value, wn, bname};
        em_pb n = node_begin(e, "Conv", layer, in, b || bn ? 3 : 2, out);
        int sp = w->ndim - 2; /* 2 spatial dims, or a Conv1d's 1 */
        int64_t pads[4] = {0}, v[2] = {0}; /* pads: begins then ends, of the sp dims */
        conv_pads(o, sp, pads);
        attr_ints(&n, "kernel_shape", w->shape + 2, sp);
        attr_ints(&n, "strides", each_dim(o->stride, sp, v), sp);
        attr_ints(&n, "pads", pads, 2 * sp);
        attr_ints(&n, "dilations", each_dim(o->dilation, sp, v), sp);
        attr_int(&n, "group", o->groups);
        node_end(e, &n);
        strcpy(e->value, out);
    }
    free(wv);
    free(bv);
    free(g);
    free(beta);
    free(mean);
    free(var);
    return st;
}
EM_ONNX_MAPPING(em_conv2d_type, export_conv);
EM_ONNX_MAPPING(em_conv1d_type, export_conv);

/* ConvTranspose2d: ONNX's ConvTranspose has PyTorch's weight layout (C_in, C_out/group, KH, KW)
 * and output size. */
static em_status export_conv_transpose(exporter *e, const em_module *m, const char *layer)
{
    const em_conv_transpose_options *o = em_module_options(m);
    char out[NAME_MAX_LEN];
    em_pb n;
    if (weighted_node_begin(e, "ConvTranspose", m, layer, out, &n) != EM_OK)
        return em_error_status();
    int64_t v[4];
    attr_ints(&n, "kernel_shape", m->params[0].value->shape + 2, 2);
    attr_ints(&n, "strides", each_dim(o->stride, 2, v), 2);
    attr_ints(&n, "pads", each_dim(o->padding, 4, v), 4);
    attr_ints(&n, "output_padding", each_dim(o->output_padding, 2, v), 2);
    attr_ints(&n, "dilations", each_dim(o->dilation, 2, v), 2);
    attr_int(&n, "group", o->groups);
    node_end(e, &n);
    strcpy(e->value, out);
    return EM_OK;
}
EM_ONNX_MAPPING(em_conv_transpose2d_type, export_conv_transpose);

static em_status export_pool(exporter *e, const em_module *m, const char *layer)
{
    const em_pool_options *o = em_module_options(m);
    bool max = em_module_own_type(m) == &em_max_pool2d_type;
    char out[NAME_MAX_LEN];
    next_value(e, out);
    const char *in[] = {e->value};
    em_pb n = node_begin(e, max ? "MaxPool" : "AveragePool", layer, in, 1, out);
    int64_t v[4];
    attr_ints(&n, "kernel_shape", each_dim(o->kernel_size, 2, v), 2);
    attr_ints(&n, "strides", each_dim(o->stride, 2, v), 2);
    attr_ints(&n, "pads", each_dim(o->padding, 4, v), 4);
    if (max && o->dilation > 1)
        attr_ints(&n, "dilations", each_dim(o->dilation, 2, v), 2);
    if (!max) /* the layer counts the padding in each window's mean, as PyTorch's default */
        attr_int(&n, "count_include_pad", 1);
    node_end(e, &n);
    strcpy(e->value, out);
    return EM_OK;
}
EM_ONNX_MAPPING(em_max_pool2d_type, export_pool);
EM_ONNX_MAPPING(em_avg_pool2d_type, export_pool);

static em_status export_adaptive_pool(exporter *e, const em_module *m, const char *layer)
{
    const em_adaptive_pool_options *o = em_module_options(m);
    int64_t oh = o->out_h, ow = o->out_w;
    if (oh == 1 && ow == 1) {
        simple_node(e, "GlobalAveragePool", layer);
        return EM_OK;
    }
    int64_t h = e->x->shape[2], w = e->x->shape[3];
    if (h % oh || w % ow)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_onnx_export: %s: AdaptiveAvgPool2d from "
                            "%lldx%lld to %lldx%lld has uneven bins, which ONNX cannot express",
                            layer, (long long)h, (long long)w, (long long)oh, (long long)ow);
    char out[NAME_MAX_LEN];
    next_value(e, out);
    const char *in[] = {e->value};
    em_pb n = node_begin(e, "AveragePool", layer, in, 1, out);
    int64_t k[2] = {h / oh, w / ow};
    attr_ints(&n, "kernel_shape", k, 2);
    attr_ints(&n, "strides", k, 2);
    node_end(e, &n);
    strcpy(e->value, out);
    return EM_OK;
}
EM_ONNX_MAPPING(em_adaptive_avg_pool2d_type, export_adaptive_pool);

/* BatchNormalization (inference) or LayerNormalization over the last dim. */
static em_status export_norm(exporter *e, const em_module *m, const char *layer)
{
    bool batch = em_module_own_type(m) != &em_layer_norm_type;
    em_setting_value eps;
    char names[4][NAME_MAX_LEN], out[NAME_MAX_LEN];
    if (em_module_setting(m, "eps", &eps) != EM_OK)
        return em_error_status();
    if (initializer(e, layer, "weight", m->params[0].value, names[0]) != EM_OK ||
        initializer(e, layer, "bias", m->params[1].value, names[1]) != EM_OK ||
        (batch && (initializer(e, layer, "running_mean", m->buffers[0].value, names[2]) ||
                   initializer(e, layer, "running_var", m->buffers[1].value, names[3]))))
        return em_error_status();
    next_value(e, out);
    const char *in[] = {e->value, names[0], names[1], names[2], names[3]};
    em_pb n = node_begin(e, batch ? "BatchNormalization" : "LayerNormalization", layer, in,
                         batch ? 5 : 3, out);
    attr_float(&n, "epsilon", eps.r);
    if (!batch)
        attr_int(&n, "axis", -1);
    node_end(e, &n);
    strcpy(e->value, out);
    return EM_OK;
}
EM_ONNX_MAPPING(em_batch_norm1d_type, export_norm);
EM_ONNX_MAPPING(em_batch_norm2d_type, export_norm);
EM_ONNX_MAPPING(em_layer_norm_type, export_norm);

/* GELU in opset-17 operators: 0.5 x (1 + erf(x / sqrt 2)), or with the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
static em_status export_gelu(exporter *e, const char *layer, bool tanh_approx)
{
    char x[NAME_MAX_LEN], c[NAME_MAX_LEN];
    strcpy(x, e->value);
    if (tanh_approx) {
        constant(e, layer, "cube_coef", 0.044715f, c);
        binary_node(e, "Mul", layer, x, x);
        binary_node(e, "Mul", layer, e->value, x);
        binary_node(e, "Mul", layer, e->value, c);
        binary_node(e, "Add", layer, e->value, x);
        constant(e, layer, "sqrt_2_over_pi", (float)sqrt(2.0 / M_PI), c);
        binary_node(e, "Mul", layer, e->value, c);
        simple_node(e, "Tanh", layer);
    } else {
        constant(e, layer, "sqrt_2", (float)M_SQRT2, c);
        binary_node(e, "Div", layer, x, c);
        simple_node(e, "Erf", layer);
    }
    constant(e, layer, "one", 1.0f, c);
    binary_node(e, "Add", layer, e->value, c);
    binary_node(e, "Mul", layer, e->value, x);
    constant(e, layer, "half", 0.5f, c);
    binary_node(e, "Mul", layer, e->value, c);
    return EM_OK;
}

/* Runs the example through m (and the BatchNorm folded after it) to move e->x on. */
static em_status advance(exporter *e, em_module *m, em_module *folded)
{
    em_tensor *y = em_forward(m, e->x);
    if (y && folded) {
        em_tensor *z = em_forward(folded, y);
        em_release(y);
        y = z;
    }
    if (!y)
        return em_error_status();
    em_release(e->x);
    e->x = y;
    return EM_OK;
}

static em_status export_dropout(exporter *e, const em_module *m, const char *layer)
{
    (void)m;
    simple_node(e, "Identity", layer);
    return EM_OK;
}
EM_ONNX_MAPPING(em_dropout_type, export_dropout);

/* Writes child (local name `local`) as a branch from the layer's input value `in` and example
 * x_in, whatever the branches before it left; its output value's name into out. */
static em_status branch(exporter *e, em_module *child, const char *local, const char *in,
                        em_tensor *x_in, char *out)
{
    em_release(e->x);
    e->x = em_retain(x_in);
    strcpy(e->value, in);
    em_status st = em_onnx_child(e, child, local);
    strcpy(out, e->value);
    return st;
}

/* y = body(x) + shortcut(x) (the identity when there is none) */
static em_status export_residual(exporter *e, const em_module *m, const char *layer)
{
    char in[NAME_MAX_LEN], body[NAME_MAX_LEN], skip[NAME_MAX_LEN];
    strcpy(in, e->value);
    strcpy(skip, in);
    em_tensor *x_in = em_retain(e->x);
    em_status st = branch(e, m->children[0].module, "body", in, x_in, body);
    if (st == EM_OK && m->n_children > 1)
        st = branch(e, m->children[1].module, "shortcut", in, x_in, skip);
    em_release(x_in);
    if (st == EM_OK)
        binary_node(e, "Add", layer, body, skip);
    return st;
}
EM_ONNX_MAPPING(em_residual_type, export_residual);

/* y = Concat(branch_0(x), ..., branch_n-1(x), axis = dim) */
static em_status export_concat(exporter *e, const em_module *m, const char *layer)
{
    int n = m->n_children;
    char in[NAME_MAX_LEN], (*outs)[NAME_MAX_LEN] = malloc((size_t)n * sizeof *outs);
    const char **names = malloc((size_t)n * sizeof *names);
    if (!outs || !names) {
        free(outs);
        free(names);
        return em_set_error(EM_ERR_MEMORY, "em_onnx_export: out of memory");
    }
    strcpy(in, e->value);
    em_tensor *x_in = em_retain(e->x);
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++) {
        st = branch(e, m->children[i].module, m->children[i].name, in, x_in, outs[i]);
        names[i] = outs[i];
    }
    em_release(x_in);
    em_setting_value dim;
    if (st == EM_OK && (st = em_module_setting(m, "dim", &dim)) == EM_OK) {
        em_onnx_attr axis = {.name = "axis", .kind = EM_ONNX_ATTR_INT, .i = dim.i};
        node(e, "Concat", layer, names, n, &axis, 1);
    }
    free(outs);
    free(names);
    return st;
}
EM_ONNX_MAPPING(em_concat_type, export_concat);

/* Gather(weight, ids): ids i64 (B, ...) -> (B, ..., dim) */
static em_status export_embedding(exporter *e, const em_module *m, const char *layer)
{
    char w[NAME_MAX_LEN];
    if (initializer(e, layer, "weight", m->params[0].value, w) != EM_OK)
        return em_error_status();
    binary_node(e, "Gather", layer, w, e->value);
    return EM_OK;
}
EM_ONNX_MAPPING(em_embedding_type, export_embedding);

/* A layer whose type names its ONNX operator: that operator on the current value, each
 * attribute its setting's value (a real as a float, an int or bool as an int). */
static em_status export_declared(exporter *e, const em_module *m, const char *layer)
{
    const em_module_type *t = em_module_own_type(m);
    em_onnx_attr attrs[2];
    int n = 0;
    for (int i = 0; i < 2 && t->onnx.attributes[i].attribute; i++, n++) {
        em_setting_value v;
        if (em_module_setting(m, t->onnx.attributes[i].setting, &v) != EM_OK)
            return em_error_status();
        bool real = v.kind == EM_SETTING_REAL || v.kind == EM_SETTING_REAL_OR_NONE;
        attrs[n] = (em_onnx_attr){.name = t->onnx.attributes[i].attribute,
                                  .kind = real ? EM_ONNX_ATTR_FLOAT : EM_ONNX_ATTR_INT,
                                  .f = v.r, .i = v.i};
    }
    const char *in[] = {e->value};
    node(e, t->onnx.op, layer, in, 1, attrs, n);
    return EM_OK;
}

/* em_onnx_register's mappings, looked up before the built-in ones */
static em_onnx_mapping *registered;
static int n_registered;
static pthread_mutex_t registered_lock = PTHREAD_MUTEX_INITIALIZER;

em_status em_onnx_register(const em_module_type *type, em_onnx_exporter fn)
{
    if (!type || !fn)
        return em_set_error(EM_ERR_ARG, "em_onnx_register: type and exporter must be given");
    em_status st = EM_OK;
    pthread_mutex_lock(&registered_lock);
    int i = 0;
    while (i < n_registered && registered[i].type != type)
        i++;
    em_onnx_mapping *grown = i < n_registered ? registered
                                      : realloc(registered, (size_t)(i + 1) * sizeof *grown);
    if (grown) {
        registered = grown;
        registered[i] = (em_onnx_mapping){type, fn};
        n_registered += i == n_registered;
    } else {
        st = em_set_error(EM_ERR_MEMORY, "em_onnx_register: out of memory");
    }
    pthread_mutex_unlock(&registered_lock);
    return st;
}

/* The exporter of modules of type, or NULL when it has none. */
static em_onnx_exporter mapping_of(const em_module_type *type)
{
    em_onnx_exporter fn = NULL;
    pthread_mutex_lock(&registered_lock);
    for (int i = 0; i < n_registered && !fn; i++)
        if (registered[i].type == type)
            fn = registered[i].fn;
    pthread_mutex_unlock(&registered_lock);
    for (int i = 0; em_onnx_builtin_mappings[i] && !fn; i++)
        if (em_onnx_builtin_mappings[i]->type == type)
            fn = em_onnx_builtin_mappings[i]->fn;
    return fn ? fn : type->onnx.op ? export_declared : NULL;
}

static em_status export_leaf(exporter *e, em_module *m, em_module *folded, const char *layer)
{
    if (em_prune_is_pruned(m))
        return em_set_error(EM_ERR_UNSUPPORTED, "em_onnx_export: layer '%s' (%s) holds pruned "
                            "parameters (em_prune_remove_all makes them plain first)",
                            *layer ? layer : "(root)", m->type->type_name);
    em_onnx_exporter fn = mapping_of(em_module_own_type(m));
    if (!fn)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_onnx_export: layer '%s' (%s) has no ONNX "
                            "mapping%s", *layer ? layer : "(root)", m->type->type_name,
                            !em_is_quantized(m) ? ""
                            : ": ember's int8 kernels have no ONNX form; export the f32 model "
                              "and quantize the file with onnxruntime's quantize_dynamic");
    const char *outer_layer = e->layer;
    const em_module *outer_folded = e->folded;
    em_tensor *x_in = em_retain(e->x); /* a mapping that writes children moves e->x on */
    e->layer = layer;
    e->folded = folded;
    em_status st = fn(e, m, layer);
    e->layer = outer_layer;
    e->folded = outer_folded;
    em_release(e->x);
    e->x = x_in;
    return st == EM_OK ? advance(e, m, folded) : st;
}

static bool is_type(const em_module *m, const em_module_type *type)
{
    return m && em_module_own_type(m) == type;
}

static bool is_sequential(const em_module *m)
{
    return m->type->traits & EM_TRAIT_SEQUENTIAL;
}

static em_status export_module(exporter *e, em_module *m, const char *prefix)
{
    if (!is_sequential(m))
        return export_leaf(e, m, NULL, prefix);
    for (int i = 0; i < m->n_children; i++) {
        em_module *c = m->children[i].module;
        em_module *next = i + 1 < m->n_children ? m->children[i + 1].module : NULL;
        em_module *folded = is_type(c, &em_conv2d_type) && is_type(next, &em_batch_norm2d_type)
                                ? next : NULL;
        char name[NAME_MAX_LEN];
        if (snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "",
                     m->children[i].name) >= LAYER_MAX_LEN)
            return em_set_error(EM_ERR_ARG, "em_onnx_export: the dotted name of layer '%s' is "
                                "longer than %d bytes (a tree too deep, or long names)",
                                m->children[i].name, LAYER_MAX_LEN - 1);
        em_status st = is_sequential(c) ? export_module(e, c, name)
                                        : export_leaf(e, c, folded, name);
        if (st != EM_OK)
            return st;
        i += folded != NULL;
    }
    return EM_OK;
}

em_status em_onnx_child(em_onnx_builder *b, em_module *child, const char *local)
{
    if (!b || !child || !local)
        return em_set_error(EM_ERR_ARG, "em_onnx_child: builder, child and local name must be "
                            "given");
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s%s%s", b->layer, *b->layer ? "." : "", local);
    return export_module(b, child, name);
}

em_status em_onnx_op(em_onnx_builder *b, const char *op, const char *a, const char *second,
                     const em_onnx_attr *attr)
{
    const char *in[] = {a, second};
    node(b, op, b->layer, in, second ? 2 : 1, attr, attr ? 1 : 0);
    return EM_OK;
}

const char *em_onnx_i64(em_onnx_builder *b, const char *local, em_shape s, const int64_t *v)
{
    em_tensor *t = em_from_data(s, EM_I64, v);
    const char *name = t ? em_onnx_initializer(b, local, t) : NULL;
    em_release(t);
    return name;
}

const char *em_onnx_f32(em_onnx_builder *b, const char *local, float v)
{
    em_tensor *t = em_from_data(EM_SCALAR_SHAPE, EM_F32, &v);
    const char *name = t ? em_onnx_initializer(b, local, t) : NULL;
    em_release(t);
    return name;
}

em_status em_onnx_gelu(em_onnx_builder *b, bool tanh_approximation)
{
    return export_gelu(b, b->layer, tanh_approximation);
}

const char *em_onnx_value(const em_onnx_builder *b)
{
    return b ? b->value : NULL;
}

const em_tensor *em_onnx_example(const em_onnx_builder *b)
{
    return b ? b->x : NULL;
}

const char *em_onnx_initializer(em_onnx_builder *b, const char *local, const em_tensor *t)
{
    if (!b || !local || !t) {
        em_set_error(EM_ERR_ARG, "em_onnx_initializer: builder, local name and tensor must be "
                     "given");
        return NULL;
    }
    char name[NAME_MAX_LEN];
    if (initializer(b, b->layer, local, t, name) != EM_OK)
        return NULL;
    for (int i = 0; i < b->n_names; i++) /* the builder's copy, valid until the export ends */
        if (!strcmp(b->names[i], name))
            return b->names[i];
    return NULL;
}

em_status em_onnx_node(em_onnx_builder *b, const char *op, const char *const *inputs,
                       int n_inputs, const em_onnx_attr *attrs, int n_attrs)
{
    bool ok = b && op && n_inputs >= 0 && (inputs || !n_inputs) && n_attrs >= 0 &&
              (attrs || !n_attrs);
    for (int i = 0; ok && i < n_inputs; i++)
        ok = inputs[i] != NULL;
    for (int i = 0; ok && i < n_attrs; i++)
        ok = attrs[i].name && (attrs[i].kind == EM_ONNX_ATTR_INT ||
                               attrs[i].kind == EM_ONNX_ATTR_FLOAT ||
                               (attrs[i].kind == EM_ONNX_ATTR_STRING && attrs[i].s) ||
                               (attrs[i].kind == EM_ONNX_ATTR_INTS && attrs[i].n_ints >= 0 &&
                                (attrs[i].ints || !attrs[i].n_ints)));
    if (!ok)
        return em_set_error(EM_ERR_ARG, "em_onnx_node: needs a builder, an op, %d named "
                            "inputs and %d named attributes of a known kind", n_inputs, n_attrs);
    node(b, op, b->layer, inputs, n_inputs, attrs, n_attrs);
    return EM_OK;
}

/* A graph input or output: f32 (i64 for token ids) with t's shape, dim 0 the symbol "batch"
 * unless fixed, dim 1 the symbol "sequence" when dynamic. */
static void value_info(em_pb *graph, int field, const char *name, const em_tensor *t,
                       const em_onnx_opts *o)
{
    em_pb shape = {0};
    for (int i = 0; i < t->ndim; i++) {
        em_pb d = {0};
        if (i == 0 && !o->fixed_batch)
            em_pb_string(&d, DIM_PARAM, "batch");
        else if (i == 1 && o->dynamic_sequence)
            em_pb_string(&d, DIM_PARAM, "sequence");
        else
            em_pb_int(&d, DIM_VALUE, t->shape[i]);
        em_pb_message(&shape, SHAPE_DIM, &d);
    }
    em_pb tensor_type = {0}, type = {0}, info = {0};
    em_pb_int(&tensor_type, TTYPE_ELEM, t->dtype == EM_I64 ? ONNX_INT64 : ONNX_FLOAT);
    em_pb_message(&tensor_type, TTYPE_SHAPE, &shape);
    em_pb_message(&type, TYPE_TENSOR, &tensor_type);
    em_pb_string(&info, VALUE_NAME, name);
    em_pb_message(&info, VALUE_TYPE, &type);
    em_pb_message(graph, field, &info);
}

static em_status write_file(const char *path, const em_pb *model)
{
    em_atomic_file *af = em_atomic_file_new(path);
    if (!af)
        return em_error_status();
    if (fwrite(model->data, 1, model->len, em_atomic_file_stream(af)) != model->len) {
        em_atomic_file_free(af);
        return em_set_error(EM_ERR_IO, "em_onnx_export: cannot write %s", path);
    }
    return em_atomic_file_commit(af);
}

em_status em_onnx_export(em_module *model, const em_tensor *example_input, const char *path,
                         em_onnx_opts o)
{
    const char *fn = "em_onnx_export";
    if (!model || !example_input || !path)
        return em_set_error(EM_ERR_ARG, "%s: model, example_input and path must be given", fn);
    int opset = o.opset ? o.opset : DEFAULT_OPSET;
    em_dtype dt = example_input->dtype;
    if (opset < DEFAULT_OPSET || (dt != EM_F32 && dt != EM_I64) || example_input->ndim < 1 ||
        (o.dynamic_sequence && example_input->ndim < 2))
        return em_set_error(EM_ERR_ARG, "%s: need opset >= 17 (got %d) and an f32 example "
                            "(B, ...) (i64 token ids (B, T)), with a dim 1 for a dynamic "
                            "sequence; got %s with %d dims", fn, opset,
                            em_dtype_name(example_input->dtype), example_input->ndim);
    const char *in_name = o.input_name ? o.input_name : "input";
    const char *out_name = o.output_name ? o.output_name : "output";
    if (!*in_name || !*out_name || !strcmp(in_name, out_name) ||
        strlen(in_name) >= LAYER_MAX_LEN || strlen(out_name) >= LAYER_MAX_LEN)
        return em_set_error(EM_ERR_ARG, "%s: input and output names must differ, and each be 1 "
                            "to %d bytes", fn, LAYER_MAX_LEN - 1);
    if (em_utf8_check(fn, "input name", in_name) != EM_OK ||
        em_utf8_check(fn, "output name", out_name) != EM_OK)
        return EM_ERR_ARG;
    bool was_training = model->training, grad = em_set_grad_enabled(false);
    em_module_eval(model);
    exporter e = {.x = em_retain((em_tensor *)example_input),
                  .allow_nonfinite = o.allow_nonfinite};
    snprintf(e.value, sizeof e.value, "%s", in_name);
    em_status st = export_module(&e, model, "");
    if (st == EM_OK) { /* the last value renamed to the graph's output */
        const char *in[] = {e.value};
        em_pb n = node_begin(&e, "Identity", "", in, 1, out_name);
        node_end(&e, &n);
        em_pb_string(&e.graph, GRAPH_NAME, "ember");
        value_info(&e.graph, GRAPH_INPUT, in_name, example_input, &o);
        value_info(&e.graph, GRAPH_OUTPUT, out_name, e.x, &o);
        em_pb model_pb = {0}, opset_pb = {0};
        em_pb_int(&model_pb, MODEL_IR_VERSION, IR_VERSION);
        em_pb_string(&model_pb, MODEL_PRODUCER, "ember");
        em_pb_string(&model_pb, MODEL_PRODUCER_VERSION, "0.1.0");
        em_pb_string(&opset_pb, OPSET_DOMAIN, "");
        em_pb_int(&opset_pb, OPSET_VERSION, opset);
        em_pb_message(&model_pb, MODEL_OPSET, &opset_pb);
        em_pb_message(&model_pb, MODEL_GRAPH, &e.graph);
        st = model_pb.failed ? em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn)
                             : write_file(path, &model_pb);
        em_pb_free(&model_pb);
    }
    em_pb_free(&e.graph);
    em_release(e.x);
    for (int i = 0; i < e.n_names; i++)
        free(e.names[i]);
    free(e.names);
    em_module_train(model, was_training);
    em_set_grad_enabled(grad);
    return st;
}
