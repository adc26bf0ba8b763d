/* Dynamic INT8 quantization: the quantize/dequantize formulas, the QuantizedLinear layer over the
 * backend's int8 kernel, converting a model's Linear layers, and what saving and loading need. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "prune/prune.h"
#include "quant/quantize.h"
#include "quant/quantize_static.h"
#include "tensor/core_internal.h"

#define U7_MAX 127
#define S8_MAX 127
#define LAYER_NAME_MAX 256 /* a dotted layer name in messages, cut beyond this */

em_qparams em_qparams_u7(float min, float max)
{
    float lo = min < 0 ? min : 0, hi = max > 0 ? max : 0;
    float s = (hi - lo) / (float)U7_MAX;
    if (!(s > 0) || !isfinite(s) || !isfinite(1.0f / s))
        s = 1.0f;
    float z = nearbyintf(-lo / s);
    return (em_qparams){.scale = s, .zero_point = (int32_t)(z < 0 ? 0 : z > U7_MAX ? U7_MAX : z)};
}

em_tensor *em_quantize_u7(const em_tensor *x, em_qparams qp)
{
    if (!em_present(x, "em_quantize_u7", "x"))
        return NULL;
    if (!(qp.scale > 0) || qp.zero_point < 0 || qp.zero_point > U7_MAX) {
        em_set_error(EM_ERR_ARG, "em_quantize_u7: scale %g must be > 0 and zero point %d in "
                     "0..127", qp.scale, qp.zero_point);
        return NULL;
    }
    float *v = em_host_f32(x, "em_quantize_u7");
    int64_t n = em_numel(x);
    uint8_t *q = malloc((size_t)(n ? n : 1));
    em_tensor *out = NULL;
    if (v && q) {
        float inv = 1.0f / qp.scale;
        for (int64_t i = 0; i < n; i++) {
            float r = fmaxf(nearbyintf(v[i] * inv) + (float)qp.zero_point, 0.0f);
            q[i] = (uint8_t)fminf(r, (float)U7_MAX);
        }
        out = em_from_data(em_shape_of(x), EM_U8, q);
    } else if (v) {
        em_set_error(EM_ERR_MEMORY, "em_quantize_u7: out of memory");
    }
    free(v);
    free(q);
    return out;
}

em_tensor *em_dequantize_u7(const em_tensor *q, em_qparams qp)
{
    if (!em_present(q, "em_dequantize_u7", "q"))
        return NULL;
    if (q->dtype != EM_U8) {
        em_set_error(EM_ERR_ARG, "em_dequantize_u7: q must be u8, not %s", em_dtype_name(q->dtype));
        return NULL;
    }
    float *v = em_host_f32(q, "em_dequantize_u7");
    if (!v)
        return NULL;
    for (int64_t i = 0; i < em_numel(q); i++)
        v[i] = (v[i] - (float)qp.zero_point) * qp.scale;
    em_tensor *out = em_from_data(em_shape_of(q), EM_F32, v);
    free(v);
    return out;
}

em_tensor *em_quantize_weight_s8(const em_tensor *w, em_quant_granularity g, em_tensor **scale)
{
    if (!em_present(w, "em_quantize_weight_s8", "w")
        || !em_present(scale, "em_quantize_weight_s8", "scale"))
        return NULL;
    char sw[64];
    if (w->ndim != 2 || (g != EM_QUANT_PER_CHANNEL && g != EM_QUANT_PER_TENSOR)) {
        em_set_error(EM_ERR_ARG, "em_quantize_weight_s8: expected w (out, in) and a granularity:"
                     " %s", em_shape_str(w, sw, sizeof sw));
        return NULL;
    }
    int64_t rows = w->shape[0], cols = w->shape[1], ns = g == EM_QUANT_PER_CHANNEL ? rows : 1;
    float *v = em_host_f32(w, "em_quantize_weight_s8");
    float *s = malloc(sizeof *s * (size_t)(ns ? ns : 1));
    int8_t *q = malloc((size_t)(rows * cols > 0 ? rows * cols : 1));
    em_tensor *out = NULL;
    *scale = NULL;
    if (v && s && q) {
        for (int64_t c = 0; c < ns; c++) {
            int64_t from = g == EM_QUANT_PER_CHANNEL ? c * cols : 0;
            int64_t to = g == EM_QUANT_PER_CHANNEL ? from + cols : rows * cols;
            float amax = 0;
            for (int64_t i = from; i < to; i++)
                amax = fmaxf(amax, fabsf(v[i]));
            s[c] = amax > 0 && isfinite(amax / S8_MAX) ? amax / S8_MAX : 1.0f;
        }
        for (int64_t i = 0; i < rows * cols; i++) {
            float r = nearbyintf(v[i] / s[g == EM_QUANT_PER_CHANNEL ? i / cols : 0]);
            q[i] = (int8_t)fminf(fmaxf(r, -S8_MAX), S8_MAX);
        }
        out = em_from_data(em_shape_of(w), EM_I8, q);
        *scale = out ? em_from_data(EM_SHAPE(ns), EM_F32, s) : NULL;
        if (!*scale) {
            em_release(out);
            out = NULL;
        }
    } else if (v) {
        em_set_error(EM_ERR_MEMORY, "em_quantize_weight_s8: out of memory");
    }
    free(v);
    free(s);
    free(q);
    return out;
}

em_tensor *em_dequantize_weight_s8(const em_tensor *q, const em_tensor *scale)
{
    if (!em_present(q, "em_dequantize_weight_s8", "q")
        || !em_present(scale, "em_dequantize_weight_s8", "scale"))
        return NULL;
    char sq[64], ss[64];
    int64_t ns = em_numel(scale);
    if (q->dtype != EM_I8 || q->ndim != 2 || scale->ndim != 1 || (ns != 1 && ns != q->shape[0])) {
        em_set_error(EM_ERR_ARG, "em_dequantize_weight_s8: expected q i8 (out, in) and scale "
                     "(out) or (1): %s, %s", em_shape_str(q, sq, sizeof sq),
                     em_shape_str(scale, ss, sizeof ss));
        return NULL;
    }
    float *v = em_host_f32(q, "em_dequantize_weight_s8");
    float *s = v ? em_host_f32(scale, "em_dequantize_weight_s8") : NULL;
    em_tensor *out = NULL;
    if (s) {
        int64_t cols = q->shape[1];
        for (int64_t i = 0; i < em_numel(q); i++)
            v[i] *= s[ns == 1 ? 0 : i / cols];
        out = em_from_data(em_shape_of(q), EM_F32, v);
    }
    free(v);
    free(s);
    return out;
}

/* ---- the layer ---- */

/* Linear's settings, and whether the weight has one scale */
typedef struct {
    int64_t in_features, out_features;
    bool bias, per_tensor;
} qlinear_options;

typedef struct {
    em_module base;
    qlinear_options o;
    em_tensor *packed; /* u8 (the backend's int8_packed_size): weight in the kernel's layout */
} qlinear_layer; /* buffers: weight i8 (out, in), weight_scale f32 (out) or (1), bias f32 (out) */

static em_tensor *qlinear_forward(em_module *m, const em_tensor *x)
{
    const char *fn = "QuantizedLinear";
    qlinear_layer *l = (qlinear_layer *)m;
    const em_tensor *scale = m->buffers[1].value, *bias = m->n_buffers > 2 ? m->buffers[2].value
                                                                            : NULL;
    char sx[64];
    if (x->dtype != EM_F32 || x->ndim < 1 || x->shape[x->ndim - 1] != l->o.in_features) {
        em_set_error(EM_ERR_ARG, "%s: expected f32 x (*, %lld): %s %s", fn,
                     (long long)l->o.in_features, em_dtype_name(x->dtype),
                     em_shape_str(x, sx, sizeof sx));
        return NULL;
    }
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be)
        return NULL;
    if (!be->qlinear_dynamic || x->device != l->packed->device) {
        em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported on %s", fn,
                     em_device_name(x->device));
        return NULL;
    }
    em_tensor *xc = em_tensor_contiguous_raw(x);
    em_shape s = em_shape_of(x);
    s.d[s.ndim - 1] = l->o.out_features;
    em_tensor *y = xc ? em_empty_on(s, EM_F32, x->device) : NULL;
    if (y) {
        int64_t rows = l->o.in_features ? em_numel(x) / l->o.in_features : 0;
        int rc = be->qlinear_dynamic(rows, l->o.out_features, l->o.in_features, em_data_ptr(xc),
                                     em_data_ptr(l->packed), em_data_ptr(scale), em_numel(scale),
                                     bias ? em_data_ptr(bias) : NULL, em_data_ptr(y));
        if (em_kernel_status(rc, fn, x) != EM_OK) {
            em_release(y);
            y = NULL;
        }
    }
    em_release(xc);
    return y;
}

static void qlinear_destroy(em_module *m)
{
    em_release(((qlinear_layer *)m)->packed);
}

static void qlinear_describe(const em_module *m, char *buf, size_t n)
{
    const qlinear_layer *l = (const qlinear_layer *)m;
    snprintf(buf, n, "in_features=%lld, out_features=%lld, dtype=int8, %s",
             (long long)l->o.in_features, (long long)l->o.out_features,
             em_numel(m->buffers[1].value) == 1 ? "per_tensor" : "per_channel");
}

static double qlinear_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const qlinear_options *o = em_module_options(m);
    return em_linear_flops(o->in_features, o->bias, y);
}

/* weight (out, in), its scales (out) or (1), bias (out) */
static double qlinear_elements(const void *options)
{
    const qlinear_options *o = options;
    double out = (double)o->out_features;
    return out * (double)o->in_features + (o->per_tensor ? 1 : out) + (o->bias ? out : 0);
}

/* Zero weights quantized as options say; the file's are loaded into them. */
static em_module *qlinear_build(const em_module_type *type, const void *options,
                                em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const qlinear_options *o = options;
    em_tensor *w = em_zeros(EM_SHAPE(o->out_features, o->in_features), EM_F32), *b = NULL;
    if (o->bias)
        b = em_zeros(EM_SHAPE(o->out_features), EM_F32);
    em_module *m = w && (b || !o->bias)
                       ? em_quantized_linear(w, b, o->per_tensor ? EM_QUANT_PER_TENSOR
                                                                 : EM_QUANT_PER_CHANNEL)
                       : NULL;
    em_release(w);
    em_release(b);
    return m;
}

static const em_setting qlinear_settings[] = {
    EM_LINEAR_SETTINGS(qlinear_options), EM_BOOL_SETTING(qlinear_options, per_tensor, 0)};

EM_MODULE_TYPE(em_quantized_linear_type) = {
    .type_name = "QuantizedLinear",
    .forward = qlinear_forward,
    .destroy = qlinear_destroy,
    .describe = qlinear_describe,
    EM_SETTINGS(qlinear_settings),
    .options_offset = offsetof(qlinear_layer, o),
    .options_size = sizeof(qlinear_options),
    .build = qlinear_build,
    .tensor_elements = qlinear_elements,
    .flops = qlinear_flops,
};

em_tensor *em_int8_packed(const em_tensor *w, const char *fn)
{
    const em_backend *be = em_tensor_backend(w, fn);
    if (!be)
        return NULL;
    if (!be->int8_pack || !be->int8_packed_size) {
        em_set_error(EM_ERR_UNSUPPORTED, "%s: int8 kernels not supported on %s", fn,
                     em_device_name(w->device));
        return NULL;
    }
    int64_t n = w->shape[0], k = w->shape[1];
    em_tensor *packed = em_empty_on(EM_SHAPE(be->int8_packed_size(n, k)), EM_U8, w->device);
    em_tensor *wc = packed ? em_tensor_contiguous_raw(w) : NULL;
    em_status st = wc ? EM_OK : em_error_status();
    if (st == EM_OK)
        st = em_kernel_status(be->int8_pack(n, k, em_data_ptr(wc), em_data_ptr(packed)), fn, w);
    em_release(wc);
    if (st != EM_OK) {
        em_release(packed);
        return NULL;
    }
    em_scope_forget(packed);
    return packed;
}

/* Packs the weight buffer into l->packed (replacing the old one). */
static em_status qlinear_pack(qlinear_layer *l)
{
    em_tensor *packed = em_int8_packed(l->base.buffers[0].value, "em_quantize_repack");
    if (!packed)
        return em_error_status();
    em_release(l->packed);
    l->packed = packed;
    return EM_OK;
}

em_module *em_quantized_linear(const em_tensor *w, const em_tensor *b, em_quant_granularity g)
{
    if (!em_present(w, "em_quantized_linear", "w"))
        return NULL;
    char sw[64], sb[64];
    if (w->ndim != 2 || (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        em_set_error(EM_ERR_ARG, "em_quantized_linear: expected w (out, in), b (out): %s, %s",
                     em_shape_str(w, sw, sizeof sw), b ? em_shape_str(b, sb, sizeof sb) : "none");
        return NULL;
    }
    em_tensor *scale = NULL, *q = em_quantize_weight_s8(w, g, &scale);
    if (!q)
        return NULL;
    qlinear_layer *l = (qlinear_layer *)em_module_alloc(sizeof *l, &em_quantized_linear_type);
    if (!l) {
        em_release(q);
        em_release(scale);
        return NULL;
    }
    l->o = (qlinear_options){.in_features = w->shape[1], .out_features = w->shape[0],
                             .bias = b != NULL, .per_tensor = g == EM_QUANT_PER_TENSOR};
    /* a failing add_buffer releases the tensor it was given */
    bool ok = em_module_add_buffer(&l->base, "weight", q) != NULL;
    if (!ok)
        em_release(scale);
    ok = ok && em_module_add_buffer(&l->base, "weight_scale", scale);
    if (ok && b)
        ok = em_module_add_buffer(&l->base, "bias", em_tensor_cast_raw(b, EM_F32)) != NULL;
    if (!ok || qlinear_pack(l) != EM_OK) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

static bool is_linear(const em_module *m)
{
    return em_module_own_type(m) == &em_linear_type;
}

em_status em_quantize_dynamic_(em_module *model, em_quantize_opts o)
{
    if (!model)
        return em_set_error(EM_ERR_ARG, "em_quantize_dynamic_: NULL model");
    bool grad = em_set_grad_enabled(false);
    em_status st = EM_OK;
    for (int i = 0; i < model->n_children && st == EM_OK; i++) {
        em_module *c = model->children[i].module, *q = NULL;
        if (em_is_float_rnn(c)) {
            q = em_quantized_rnn(c, o.granularity);
        } else if (is_linear(c)) {
            em_tensor *w = em_prune_param(c, "weight"), *b = em_prune_param(c, "bias");
            q = w ? em_quantized_linear(w, b, o.granularity) : NULL;
            em_release(w);
            em_release(b);
        } else {
            st = em_quantize_dynamic_(c, o);
            continue;
        }
        if (!q) {
            st = em_error_status();
            break;
        }
        em_module_free(em_module_set_child(model, i, q));
    }
    em_set_grad_enabled(grad);
    return st;
}

em_status em_quant_check_scale(const em_module *m, int buffer, const char *layer)
{
    const em_tensor *t = m->buffers[buffer].value;
    int64_t n = em_numel(t);
    float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v || em_copy_to_host(t, EM_F32, v) != EM_OK) {
        free(v);
        return em_has_error() ? em_error_status()
                              : em_set_error(EM_ERR_MEMORY, "em_quantize_repack: out of memory");
    }
    int64_t bad = 0;
    while (bad < n && isfinite(v[bad]) && v[bad] > 0)
        bad++;
    em_status st = EM_OK;
    if (bad < n)
        st = em_set_error(EM_ERR_ARG, "em_quantize_repack: %s '%s': %s[%lld] is %g; a scale must "
                          "be finite and > 0", m->type->type_name, layer, m->buffers[buffer].name,
                          (long long)bad, (double)v[bad]);
    free(v);
    return st;
}

/* Checks and packs every quantized layer of the tree below m, whose dotted name is name[0..len)
 * (name holds LAYER_NAME_MAX bytes). */
static em_status repack_tree(em_module *m, char *name, size_t len)
{
    const char *layer = len ? name : "(the model)";
    em_status st = EM_OK;
    if (m->type == &em_quantized_linear_type) {
        st = em_quant_check_scale(m, 1, layer);
        if (st == EM_OK)
            st = qlinear_pack((qlinear_layer *)m);
    } else {
        st = em_quantize_static_repack(m, layer);
    }
    for (int i = 0; st == EM_OK && i < m->n_children; i++) {
        snprintf(name + len, LAYER_NAME_MAX - len, "%s%s", len ? "." : "", m->children[i].name);
        st = repack_tree(m->children[i].module, name, strlen(name));
        name[len] = '\0';
    }
    return st;
}

em_status em_quantize_repack(em_module *model)
{
    if (!model)
        return em_set_error(EM_ERR_ARG, "em_quantize_repack: NULL model");
    char name[LAYER_NAME_MAX] = "";
    return repack_tree(model, name, 0);
}

/* The first QuantizedLinear of the tree, or NULL. */
static const em_module *first_quantized(const em_module *m)
{
    if (m->type == &em_quantized_linear_type)
        return m;
    for (int i = 0; i < m->n_children; i++) {
        const em_module *q = first_quantized(m->children[i].module);
        if (q)
            return q;
    }
    return NULL;
}

bool em_is_quantized(const em_module *model)
{
    return model && (first_quantized(model) || em_is_static_quantized(model));
}

int em_quantize_meta(const em_module *model, em_st_meta *out)
{
    if (model && em_is_static_quantized(model)) {
        out[0] = (em_st_meta){"ember.quantized", "static_int8"};
        return 1;
    }
    const em_module *q = model ? first_quantized(model) : NULL;
    if (!q)
        return 0;
    out[0] = (em_st_meta){"ember.quantized", "dynamic_int8"};
    out[1] = (em_st_meta){"ember.qscheme", em_numel(q->buffers[1].value) == 1 &&
                                                   ((const qlinear_layer *)q)->o.out_features > 1
                                               ? "per_tensor" : "per_channel"};
    return 2;
}

em_status em_quantize_prepare_load(em_module *model, const em_safetensors *st)
{
    const char *kind = em_safetensors_meta(st, "ember.quantized");
    if (!kind)
        return EM_OK;
    if (!strcmp(kind, "static_int8"))
        return em_quantize_static_structure_(model, (em_static_quant_opts){0});
    if (strcmp(kind, "dynamic_int8"))
        return em_set_error(EM_ERR_UNSUPPORTED, "em_quantize_prepare_load: unknown quantization"
                            " '%s'", kind);
    const char *scheme = em_safetensors_meta(st, "ember.qscheme");
    em_quantize_opts o = {.granularity = scheme && !strcmp(scheme, "per_tensor")
                                             ? EM_QUANT_PER_TENSOR : EM_QUANT_PER_CHANNEL};
    return em_quantize_dynamic_(model, o);
}

static int64_t tensors_nbytes(const em_named_tensor *list, int n)
{
    int64_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += em_numel(list[i].value) * (int64_t)em_dtype_size(list[i].value->dtype);
    return bytes;
}

int64_t em_module_nbytes(const em_module *model)
{
    if (!model)
        return 0;
    int64_t bytes = tensors_nbytes(model->params, model->n_params) +
                    tensors_nbytes(model->buffers, model->n_buffers);
    for (int i = 0; i < model->n_children; i++)
        bytes += em_module_nbytes(model->children[i].module);
    return bytes;
}
