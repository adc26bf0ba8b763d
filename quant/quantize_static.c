/* Static INT8: min/max and percentile observers, the calibration pass (observing wrappers put
 * around every Linear and Conv2d for the pass), and the static layers over the backend's
 * qlinear_static and qconv2d_static kernels (StaticQuantizedLinear, QuantizedConv2d, each with a
 * ReLU fused or not, and the Identity a fused ReLU leaves), each type described for whole-model
 * files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "prune/prune.h"
#include "quant/quantize_static.h"
#include "tensor/core_internal.h"

#define MAX_TARGETS 256

/* ---- observers ---- */

struct em_calib_observer {
    em_calib_observer_opts o;
    bool any;
    float lo, hi;        /* the extremes seen */
    double *hist;        /* (bins) over [hist_lo, hist_hi] */
    double hist_lo, hist_hi;
};

em_calib_observer *em_calib_observer_new(em_calib_observer_opts o)
{
    o.percentile = o.percentile ? o.percentile : 99.99;
    o.bins = o.bins ? o.bins : 2048;
    if ((o.kind != EM_CALIB_MINMAX && o.kind != EM_CALIB_PERCENTILE) ||
        !(o.percentile > 50 && o.percentile <= 100) || o.bins < 2 || o.bins > (1 << 20)) {
        em_set_error(EM_ERR_ARG,
                     "em_calib_observer_new: bad options: kind %d, percentile %g, bins %d",
                     (int)o.kind, o.percentile, o.bins);
        return NULL;
    }
    em_calib_observer *ob = calloc(1, sizeof *ob);
    if (ob && o.kind == EM_CALIB_PERCENTILE)
        ob->hist = calloc((size_t)o.bins, sizeof *ob->hist);
    if (!ob || (o.kind == EM_CALIB_PERCENTILE && !ob->hist)) {
        free(ob);
        em_set_error(EM_ERR_MEMORY, "em_calib_observer_new: out of memory");
        return NULL;
    }
    ob->o = o;
    return ob;
}

void em_calib_observer_free(em_calib_observer *ob)
{
    if (ob)
        free(ob->hist);
    free(ob);
}

static int bin_of(const em_calib_observer *ob, double v)
{
    double w = (ob->hist_hi - ob->hist_lo) / ob->o.bins;
    int b = w > 0 ? (int)((v - ob->hist_lo) / w) : 0;
    return b < 0 ? 0 : b >= ob->o.bins ? ob->o.bins - 1 : b;
}

/* Widens the histogram's range to [lo, hi], moving each old bin's count to the new bin that
 * holds its centre. */
static em_status rebin(em_calib_observer *ob, double lo, double hi)
{
    int n = ob->o.bins;
    double *old = ob->hist, old_lo = ob->hist_lo, old_w = (ob->hist_hi - ob->hist_lo) / n;
    ob->hist = calloc((size_t)n, sizeof *ob->hist);
    if (!ob->hist) {
        ob->hist = old;
        return em_set_error(EM_ERR_MEMORY, "em_calib_observer_update: out of memory");
    }
    ob->hist_lo = lo;
    ob->hist_hi = hi;
    for (int b = 0; b < n; b++)
        if (old[b] > 0)
            ob->hist[bin_of(ob, old_lo + (b + 0.5) * old_w)] += old[b];
    free(old);
    return EM_OK;
}

em_status em_calib_observer_update(em_calib_observer *ob, const em_tensor *x)
{
    if (!ob || !x)
        return em_set_error(EM_ERR_ARG, "em_calib_observer_update: observer and x must be given");
    float *v = em_host_f32(x, "em_calib_observer_update");
    if (!v)
        return em_error_status();
    int64_t n = em_numel(x);
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            float bad = v[i];
            free(v);
            return em_set_error(EM_ERR_NUMERIC, "em_calib_observer_update: non-finite value %g at "
                                "element %lld", bad, (long long)i);
        }
        lo = fminf(lo, v[i]);
        hi = fmaxf(hi, v[i]);
    }
    em_status st = EM_OK;
    if (n > 0) {
        bool first = !ob->any;
        ob->lo = first ? lo : fminf(ob->lo, lo);
        ob->hi = first ? hi : fmaxf(ob->hi, hi);
        ob->any = true;
        if (ob->hist && first) {
            ob->hist_lo = lo;
            ob->hist_hi = hi > lo ? hi : lo + 1e-6;
        } else if (ob->hist && (lo < ob->hist_lo || hi > ob->hist_hi)) {
            st = rebin(ob, fmin(lo, ob->hist_lo), fmax(hi, ob->hist_hi));
        }
        for (int64_t i = 0; ob->hist && st == EM_OK && i < n; i++)
            ob->hist[bin_of(ob, v[i])] += 1;
    }
    free(v);
    return st;
}

void em_calib_observer_range(const em_calib_observer *ob, float *lo, float *hi)
{
    *lo = *hi = 0;
    if (!ob || !ob->any)
        return;
    *lo = ob->lo;
    *hi = ob->hi;
    if (!ob->hist)
        return;
    double total = 0, w = (ob->hist_hi - ob->hist_lo) / ob->o.bins;
    for (int b = 0; b < ob->o.bins; b++)
        total += ob->hist[b];
    double tail = total * (1 - ob->o.percentile / 100), seen = 0;
    int b_lo = 0, b_hi = ob->o.bins - 1;
    for (seen = 0; b_lo < ob->o.bins - 1 && seen + ob->hist[b_lo] <= tail; b_lo++)
        seen += ob->hist[b_lo];
    for (seen = 0; b_hi > 0 && seen + ob->hist[b_hi] <= tail; b_hi--)
        seen += ob->hist[b_hi];
    *lo = fmaxf(*lo, (float)(ob->hist_lo + b_lo * w));
    *hi = fminf(*hi, (float)(ob->hist_lo + (b_hi + 1) * w));
}

em_qparams em_calib_observer_qparams(const em_calib_observer *ob)
{
    float lo, hi;
    em_calib_observer_range(ob, &lo, &hi);
    return em_qparams_u7(lo, hi);
}

/* ---- the static layers ---- */

/* A static layer's settings: a Linear's sizes (in_features, out_features) or a Conv2d's
 * (in_channels, out_channels, a square kernel, stride, padding and dilation; groups 1), whether
 * it has a bias, whether its weight has one scale, and whether a ReLU is fused into it. The
 * int8 weight, its scales, the activations' scale and zero point and the bias are buffers. */
typedef struct {
    int64_t in, out; /* in_features and out_features, or in_channels and out_channels */
    int64_t kernel_size, stride, padding, dilation; /* QuantizedConv2d */
    bool bias, per_tensor, relu;
} qstatic_options;

typedef struct {
    em_module base;
    qstatic_options o;
    em_tensor *packed; /* u8: the weight in the kernel's layout */
} qstatic_layer; /* buffers: weight i8 (out, k), weight_scale f32 (out) or (1), input_scale f32
                    (1), input_zero_point i32 (1), bias f32 (out) when the layer has one; k is
                    in_features, or in_channels x kernel_size^2 */

/* The layer's buffers in the order it adds them */
enum { WEIGHT, WEIGHT_SCALE, INPUT_SCALE, INPUT_ZERO_POINT, BIAS };

/* the two types, defined below their hooks */
extern const em_module_type em_static_quantized_linear_type, em_quantized_conv2d_type;

static bool is_conv(const em_module *m)
{
    return m->type == &em_quantized_conv2d_type;
}

/* The products per output: in_features, or in_channels x kernel_size^2 */
static int64_t products(const qstatic_options *o, bool conv)
{
    return conv ? o->in * o->kernel_size * o->kernel_size : o->in;
}

static em_tensor *qstatic_forward(em_module *m, const em_tensor *x)
{
    qstatic_layer *l = (qstatic_layer *)m;
    const qstatic_options *o = &l->o;
    const char *fn = m->type->type_name;
    bool conv = is_conv(m);
    int64_t k = products(o, conv);
    const em_tensor *scale = m->buffers[WEIGHT_SCALE].value;
    const em_tensor *bias = o->bias ? m->buffers[BIAS].value : NULL;
    float sx = (float)em_item(m->buffers[INPUT_SCALE].value);
    int32_t zp = (int32_t)em_item(m->buffers[INPUT_ZERO_POINT].value);
    char sh[64];
    bool ok = x->dtype == EM_F32 && (conv ? x->ndim == 4 && x->shape[1] == o->in
                                          : x->ndim >= 1 && x->shape[x->ndim - 1] == o->in);
    if (!ok) {
        em_set_error(EM_ERR_ARG, "%s: expected f32 x %s with %lld %s: %s %s", fn,
                     conv ? "(N, C, H, W)" : "(*, in)", (long long)o->in,
                     conv ? "channels" : "features", em_dtype_name(x->dtype),
                     em_shape_str(x, sh, sizeof sh));
        return NULL;
    }
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be)
        return NULL;
    if ((conv ? !be->qconv2d_static : !be->qlinear_static) || x->device != l->packed->device) {
        em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported on %s", fn, em_device_name(x->device));
        return NULL;
    }
    em_conv2d_shape cs = {0};
    em_shape ys = em_shape_of(x);
    if (conv) {
        cs = (em_conv2d_shape){.n = x->shape[0], .c_in = o->in, .h = x->shape[2],
                               .w = x->shape[3], .c_out = o->out, .kh = o->kernel_size,
                               .kw = o->kernel_size, .groups = 1};
        for (int d = 0; d < 2; d++) {
            cs.stride[d] = o->stride;
            cs.pad[d] = o->padding;
            cs.dilation[d] = o->dilation;
        }
        cs.h_out = (cs.h + 2 * cs.pad[0] - cs.dilation[0] * (cs.kh - 1) - 1) / cs.stride[0] + 1;
        cs.w_out = (cs.w + 2 * cs.pad[1] - cs.dilation[1] * (cs.kw - 1) - 1) / cs.stride[1] + 1;
        if (cs.h_out <= 0 || cs.w_out <= 0) {
            em_set_error(EM_ERR_ARG, "%s: input %s is smaller than the kernel", fn,
                         em_shape_str(x, sh, sizeof sh));
            return NULL;
        }
        ys = EM_SHAPE(cs.n, cs.c_out, cs.h_out, cs.w_out);
    } else {
        ys.d[ys.ndim - 1] = o->out;
    }
    em_tensor *xc = em_tensor_contiguous_raw(x);
    em_tensor *y = xc ? em_empty_on(ys, EM_F32, x->device) : NULL;
    if (y) {
        const void *b = bias ? em_data_ptr(bias) : NULL;
        int rc = conv ? be->qconv2d_static(&cs, em_data_ptr(xc), sx, zp, em_data_ptr(l->packed),
                                           em_data_ptr(scale), em_numel(scale), b, o->relu,
                                           em_data_ptr(y))
                      : be->qlinear_static(em_numel(x) / k, o->out, k, em_data_ptr(xc), sx, zp,
                                           em_data_ptr(l->packed), em_data_ptr(scale),
                                           em_numel(scale), b, o->relu, em_data_ptr(y));
        if (em_kernel_status(rc, fn, x) != EM_OK) {
            em_release(y);
            y = NULL;
        }
    }
    em_release(xc);
    return y;
}

static void qstatic_destroy(em_module *m)
{
    em_release(((qstatic_layer *)m)->packed);
}

/* The settings, then what the calibration gave the activations */
static void qstatic_describe(const em_module *m, char *buf, size_t n)
{
    char settings[256];
    em_describe_settings(m, settings, sizeof settings);
    snprintf(buf, n, "%s, dtype=int8, input_scale=%g, input_zero_point=%d", settings,
             em_item(m->buffers[INPUT_SCALE].value),
             (int)em_item(m->buffers[INPUT_ZERO_POINT].value));
}

/* 2 per multiply-accumulate of every output, 1 per bias add; a fused ReLU's 1 per element */
static double qstatic_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const qstatic_options *o = em_module_options(m);
    return (double)em_numel(y) * (2.0 * (double)products(o, is_conv(m)) + o->bias + o->relu);
}

/* weight (out, k), its scales (out) or (1), the activations' scale and zero point, bias (out) */
static double qstatic_elements(const qstatic_options *o, bool conv)
{
    double out = (double)o->out, k = (double)o->in;
    if (conv)
        k *= (double)o->kernel_size * (double)o->kernel_size;
    return out * k + (o->per_tensor ? 1 : out) + 2 + (o->bias ? out : 0);
}

static double qlinear_elements(const void *options) { return qstatic_elements(options, false); }
static double qconv_elements(const void *options) { return qstatic_elements(options, true); }

/* A static layer of type with settings o, its weight w f32 (out, k) quantized as o says and its
 * bias b f32 (out) (NULL when o has none), the activations quantized by qp. */
static em_module *qstatic_make(const em_module_type *type, qstatic_options o, const em_tensor *w,
                               const em_tensor *b, em_qparams qp)
{
    em_tensor *scale = NULL;
    em_tensor *q = em_quantize_weight_s8(w, o.per_tensor ? EM_QUANT_PER_TENSOR
                                                         : EM_QUANT_PER_CHANNEL, &scale);
    qstatic_layer *l = q ? (qstatic_layer *)em_module_alloc(sizeof *l, type) : NULL;
    if (!l) {
        em_release(q);
        em_release(scale);
        return NULL;
    }
    l->o = o;
    /* a failing add_buffer releases the tensor it was given */
    bool ok = em_module_add_buffer(&l->base, "weight", q) != NULL;
    if (!ok)
        em_release(scale);
    ok = ok && em_module_add_buffer(&l->base, "weight_scale", scale);
    ok = ok && em_module_add_buffer(&l->base, "input_scale",
                                    em_full(EM_SHAPE(1), EM_F32, qp.scale));
    ok = ok && em_module_add_buffer(&l->base, "input_zero_point",
                                    em_full(EM_SHAPE(1), EM_I32, qp.zero_point));
    if (ok && b)
        ok = em_module_add_buffer(&l->base, "bias", em_tensor_cast_raw(b, EM_F32)) != NULL;
    if (!ok || em_quantize_static_repack(&l->base, "(new)") != EM_OK) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

/* Zero weights quantized as options say; the file's are loaded into them. */
static em_module *qstatic_build(const em_module_type *type, const void *options,
                                em_module **children, int n)
{
    (void)children, (void)n;
    const qstatic_options *o = options;
    em_tensor *w = em_zeros(EM_SHAPE(o->out, products(o, type == &em_quantized_conv2d_type)),
                            EM_F32);
    em_tensor *b = o->bias ? em_zeros(EM_SHAPE(o->out), EM_F32) : NULL;
    em_module *m = w && (b || !o->bias)
                       ? qstatic_make(type, *o, w, b, (em_qparams){.scale = 1, .zero_point = 0})
                       : NULL;
    em_release(w);
    em_release(b);
    return m;
}

/* A size setting of that name at a field of qstatic_options */
#define SIZE(setting, field, least)                                                          \
    {.name = setting, .kind = EM_SETTING_INT, .offset = offsetof(qstatic_options, field),    \
     .min = (least), .max = EM_MAX_SIZE, .def = (least)}
/* What follows the sizes in both types' settings */
#define QSTATIC_FLAGS                                                                        \
    EM_BOOL_SETTING(qstatic_options, bias, 1), EM_BOOL_SETTING(qstatic_options, per_tensor, 0), \
    EM_BOOL_SETTING(qstatic_options, relu, 0)
static const em_setting qlinear_settings[] = {
    SIZE("in_features", in, 1), SIZE("out_features", out, 1), QSTATIC_FLAGS};
static const em_setting qconv_settings[] = {
    SIZE("in_channels", in, 1), SIZE("out_channels", out, 1), SIZE("kernel_size", kernel_size, 1),
    SIZE("stride", stride, 1),  SIZE("padding", padding, 0),  SIZE("dilation", dilation, 1),
    QSTATIC_FLAGS};

#define QSTATIC                                                                               \
    .forward = qstatic_forward, .destroy = qstatic_destroy, .describe = qstatic_describe,     \
    .options_offset = offsetof(qstatic_layer, o), .options_size = sizeof(qstatic_options),   \
    .build = qstatic_build, .flops = qstatic_flops
/* "QuantizedLinear" is the dynamic layer's (quant/quantize.c) */
EM_MODULE_TYPE(em_static_quantized_linear_type) = {
    .type_name = "StaticQuantizedLinear", QSTATIC, EM_SETTINGS(qlinear_settings),
    .tensor_elements = qlinear_elements};
EM_MODULE_TYPE(em_quantized_conv2d_type) = {
    .type_name = "QuantizedConv2d", QSTATIC, EM_SETTINGS(qconv_settings),
    .tensor_elements = qconv_elements};

static bool is_static(const em_module *m)
{
    return m->type == &em_static_quantized_linear_type || is_conv(m);
}

/* The activation zero point of a static layer within the 7-bit range. */
static em_status check_zero_point(const em_module *m, const char *layer)
{
    double zp = em_item(m->buffers[INPUT_ZERO_POINT].value);
    if (zp >= 0 && zp <= 127)
        return EM_OK;
    return em_set_error(EM_ERR_ARG, "em_quantize_repack: %s '%s': %s is %g; it must be in 0..127",
                        m->type->type_name, layer, m->buffers[INPUT_ZERO_POINT].name, zp);
}

em_status em_quantize_static_repack(em_module *m, const char *layer)
{
    if (!is_static(m))
        return EM_OK;
    em_status st = em_quant_check_scale(m, WEIGHT_SCALE, layer);
    if (st == EM_OK)
        st = em_quant_check_scale(m, INPUT_SCALE, layer);
    if (st == EM_OK)
        st = check_zero_point(m, layer);
    if (st != EM_OK)
        return st;
    qstatic_layer *l = (qstatic_layer *)m;
    em_tensor *packed = em_int8_packed(m->buffers[WEIGHT].value, "em_quantize_repack");
    if (!packed)
        return em_error_status();
    em_release(l->packed);
    l->packed = packed;
    return EM_OK;
}

bool em_is_static_quantized(const em_module *m)
{
    if (is_static(m))
        return true;
    for (int i = 0; i < m->n_children; i++)
        if (em_is_static_quantized(m->children[i].module))
            return true;
    return false;
}

/* The static layer of a Linear or Conv2d f (its weight as forward uses it, masked when pruned),
 * with activation parameters qp and a ReLU fused when relu. */
static em_module *qstatic_new(const em_module *f, em_qparams qp, em_quant_granularity g,
                              bool relu)
{
    bool conv = em_module_own_type(f) == &em_conv2d_type;
    qstatic_options o = {.per_tensor = g == EM_QUANT_PER_TENSOR, .relu = relu};
    if (conv) {
        const em_conv_options *c = em_module_options(f);
        o.in = c->in_channels;
        o.out = c->out_channels;
        o.kernel_size = c->kernel_size;
        o.stride = c->stride;
        o.padding = c->padding;
        o.dilation = c->dilation;
        o.bias = c->bias;
    } else {
        const em_linear_options *lin = em_module_options(f);
        o.in = lin->in_features;
        o.out = lin->out_features;
        o.bias = lin->bias;
    }
    em_tensor *w = em_prune_param(f, "weight"), *b = em_prune_param(f, "bias");
    em_tensor *w2 = w ? em_reshape(w, EM_SHAPE(o.out, products(&o, conv))) : NULL;
    em_module *q = w2 ? qstatic_make(conv ? &em_quantized_conv2d_type
                                          : &em_static_quantized_linear_type, o, w2, b, qp)
                      : NULL;
    em_release(w2);
    em_release(w);
    em_release(b);
    return q;
}

/* ---- calibration ---- */

typedef struct {
    em_module *parent;
    int index;
    em_module *layer; /* the Linear or Conv2d */
    em_calib_observer *ob;
} target;

/* A module that observes its input, then runs the wrapped layer (not owned). */
typedef struct {
    em_module base;
    target *t;
} observing;

static em_tensor *observing_forward(em_module *m, const em_tensor *x)
{
    target *t = ((observing *)m)->t;
    return em_calib_observer_update(t->ob, x) == EM_OK ? em_forward(t->layer, x) : NULL;
}

static const em_module_type observing_type = {.type_name = "Observing",
                                              .forward = observing_forward,
                                              .flops = em_no_flops};

static bool quantizable(const em_module *m)
{
    const em_module_type *t = em_module_own_type(m);
    const em_conv_options *o = em_module_options(m);
    return t == &em_linear_type ||
           (t == &em_conv2d_type && o->groups == 1 && o->padding >= 0);
}

static int find_targets(em_module *m, target *t, int n)
{
    for (int i = 0; i < m->n_children && n < MAX_TARGETS; i++) {
        em_module *c = m->children[i].module;
        if (quantizable(c))
            t[n++] = (target){.parent = m, .index = i, .layer = c};
        else
            n = find_targets(c, t, n);
    }
    return n;
}

/* Replaces each target with its static layer (qp[i]), fusing a following ReLU; on failure
 * nothing is replaced. */
static em_status convert(target *t, int n, const em_qparams *qp, em_quant_granularity g)
{
    em_module *q[MAX_TARGETS] = {0}, *id[MAX_TARGETS] = {0};
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++) {
        em_module *p = t[i].parent;
        bool fuse = (p->type->traits & EM_TRAIT_SEQUENTIAL) && t[i].index + 1 < p->n_children &&
                    em_module_own_type(p->children[t[i].index + 1].module) == &em_relu_type;
        q[i] = qstatic_new(t[i].layer, qp[i], g, fuse);
        id[i] = fuse ? em_identity_layer() : NULL; /* PyTorch's fusion leaves an Identity */
        if (!q[i] || (fuse && !id[i]))
            st = em_error_status();
    }
    for (int i = 0; i < n; i++) {
        if (st != EM_OK) {
            em_module_free(q[i]);
            em_module_free(id[i]);
            continue;
        }
        em_module_free(em_module_set_child(t[i].parent, t[i].index, q[i]));
        if (id[i])
            em_module_free(em_module_set_child(t[i].parent, t[i].index + 1, id[i]));
    }
    return st;
}

em_status em_quantize_static_structure_(em_module *model, em_static_quant_opts o)
{
    if (!model)
        return em_set_error(EM_ERR_ARG, "em_quantize_static_structure_: NULL model");
    target t[MAX_TARGETS];
    em_qparams qp[MAX_TARGETS];
    int n = find_targets(model, t, 0);
    for (int i = 0; i < n; i++)
        qp[i] = em_qparams_u7(0, 1);
    bool grad = em_set_grad_enabled(false);
    em_status st = convert(t, n, qp, o.granularity);
    em_set_grad_enabled(grad);
    return st;
}

em_status em_quantize_static_(em_module *model, em_tensor *const *calib, int n_batches,
                              em_static_quant_opts o)
{
    if (!model || !calib || n_batches < 1)
        return em_set_error(EM_ERR_ARG, "em_quantize_static_: need a model and at least one "
                            "calibration batch (got %d)", n_batches);
    target t[MAX_TARGETS];
    observing *wrap[MAX_TARGETS] = {0};
    int n = find_targets(model, t, 0);
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++) {
        t[i].ob = em_calib_observer_new(o.observer);
        wrap[i] = t[i].ob ? (observing *)em_module_alloc(sizeof *wrap[i], &observing_type) : NULL;
        if (!wrap[i])
            st = em_error_status();
        else
            wrap[i]->t = &t[i];
    }
    bool was_training = model->training, grad = em_set_grad_enabled(false);
    em_module_eval(model);
    for (int i = 0; i < n && st == EM_OK; i++)
        t[i].parent->children[t[i].index].module = &wrap[i]->base;
    for (int b = 0; b < n_batches && st == EM_OK; b++) {
        em_scope_begin();
        if (!em_forward(model, calib[b]))
            st = em_error_status();
        em_scope_end();
    }
    em_qparams qp[MAX_TARGETS];
    for (int i = 0; i < n; i++) {
        if (wrap[i] && t[i].parent->children[t[i].index].module == &wrap[i]->base)
            t[i].parent->children[t[i].index].module = t[i].layer;
        qp[i] = em_calib_observer_qparams(t[i].ob);
        em_module_free(wrap[i] ? &wrap[i]->base : NULL);
        em_calib_observer_free(t[i].ob);
    }
    if (st == EM_OK)
        st = convert(t, n, qp, o.granularity);
    em_module_train(model, was_training);
    em_set_grad_enabled(grad);
    return st;
}
