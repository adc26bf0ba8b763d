/* Conv2d and Conv1d: weight (out, in/groups, k, k) or (out, in/groups, k) and bias (out),
 * PyTorch's default initialisation (kaiming_uniform_(a = sqrt 5), bias U(+-1/sqrt(fan_in)));
 * stride, padding, dilation and groups as in torch.nn.Conv2d and Conv1d. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_conv_options o;
    em_conv2d_opts opts; /* o as em_conv2d takes it; a Conv1d's in the width's [1], height 1 */
} conv_layer; /* params: weight (out_channels, in_channels / groups, kernel[, kernel]), bias */

static em_tensor *conv2d_forward(em_module *m, const em_tensor *x /* (N, C_in, H, W) */)
{
    return em_conv2d(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL,
                     ((conv_layer *)m)->opts);
}

static em_tensor *conv1d_forward(em_module *m, const em_tensor *x /* (N, C_in, L) */)
{
    const em_conv_options *o = &((conv_layer *)m)->o;
    em_conv1d_opts o1 = {.stride = o->stride, .padding = o->padding, .dilation = o->dilation,
                         .groups = o->groups};
    return em_conv1d(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL, o1);
}

/* "same" for EM_PADDING_SAME, as PyTorch shows padding='same' */
static void conv_describe(const em_module *m, char *buf, size_t n)
{
    const em_conv_options *o = &((const conv_layer *)m)->o;
    char padding[24] = "same";
    if (o->padding != EM_PADDING_SAME)
        snprintf(padding, sizeof padding, "%lld", (long long)o->padding);
    snprintf(buf, n, "%lld, %lld, kernel_size=%lld, stride=%lld, padding=%s, dilation=%lld, "
             "groups=%lld, bias=%s", (long long)o->in_channels, (long long)o->out_channels,
             (long long)o->kernel_size, (long long)o->stride, padding, (long long)o->dilation,
             (long long)o->groups, o->bias ? "true" : "false");
}

em_conv2d_opts em_conv_opts_2d(const em_conv_options *o, int spatial)
{
    bool two = spatial == 2; /* a Conv1d has height 1: stride 1, no padding, dilation 1 */
    return (em_conv2d_opts){.stride = {two ? o->stride : 1, o->stride},
                            .padding = {two ? o->padding : 0, o->padding},
                            .dilation = {two ? o->dilation : 1, o->dilation},
                            .groups = o->groups};
}

/* 2 FLOPs per multiply-accumulate of every output, 1 per bias add */
static double conv_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const em_conv_options *o = em_module_options(m);
    double per_output = (double)em_numel(m->params[0].value) / (double)o->out_channels;
    return (double)em_numel(y) * (2 * per_output + o->bias);
}

static double conv_elements(const em_conv_options *o, int spatial)
{
    double kernel = pow((double)o->kernel_size, spatial);
    return (double)o->out_channels *
           ((double)(o->in_channels / o->groups) * kernel + o->bias);
}

static double conv1d_elements(const void *options) { return conv_elements(options, 1); }
static double conv2d_elements(const void *options) { return conv_elements(options, 2); }

static bool conv_check(const void *options, char *why, size_t n)
{
    const em_conv_options *o = options;
    if (!em_check_divides("groups", o->groups, "in_channels", o->in_channels, why, n) ||
        !em_check_divides("groups", o->groups, "out_channels", o->out_channels, why, n))
        return false;
    if (o->padding != EM_PADDING_SAME || o->stride == 1)
        return true;
    snprintf(why, n, "setting 'padding' is 'same' (-1), which needs stride 1, not %lld",
             (long long)o->stride);
    return false;
}

/* A Conv2d (spatial 2) or Conv1d (spatial 1) from o (defaults filled in, checked). */
static em_module *conv_new(const em_module_type *type, int spatial, em_conv_options o)
{
    conv_layer *c = (conv_layer *)em_module_alloc(sizeof *c, type);
    if (!c)
        return NULL;
    c->o = o;
    c->opts = em_conv_opts_2d(&o, spatial);
    int64_t in = o.in_channels / o.groups, k = o.kernel_size;
    em_shape ws = spatial == 2 ? EM_SHAPE(o.out_channels, in, k, k)
                               : EM_SHAPE(o.out_channels, in, k);
    return em_conv_layer_init(&c->base, ws, o.out_channels, o.bias);
}

static em_module *conv_build(const em_module_type *type, const void *options,
                             em_module **children, int n)
{
    (void)children, (void)n;
    return conv_new(type, type == &em_conv2d_type ? 2 : 1, *(const em_conv_options *)options);
}

#define SIZE(field, least, flags) EM_SIZE_SETTING(em_conv_options, field, least, flags)
static const em_setting conv_settings[] = {
    SIZE(in_channels, 1, EM_SETTING_IN_UNITS),
    SIZE(out_channels, 1, EM_SETTING_OUT_UNITS),
    SIZE(kernel_size, 1, 0),
    SIZE(stride, 1, 0),
    {.name = "padding", .kind = EM_SETTING_INT, .offset = offsetof(em_conv_options, padding),
     .min = EM_PADDING_SAME, .max = EM_MAX_SIZE}, /* -1: EM_PADDING_SAME */
    SIZE(dilation, 1, 0),
    SIZE(groups, 1, 0),
    EM_BOOL_SETTING(em_conv_options, bias, 1),
};

/* What Conv1d's and Conv2d's descriptions share */
#define CONV                                                                                  \
    .describe = conv_describe, EM_SETTINGS(conv_settings),                                   \
    .options_offset = offsetof(conv_layer, o), .options_size = sizeof(em_conv_options),      \
    .traits = EM_TRAIT_MATMUL, .build = conv_build, .check = conv_check, .flops = conv_flops
EM_MODULE_TYPE(em_conv2d_type) = {.type_name = "Conv2d", .forward = conv2d_forward, CONV,
                                  .tensor_elements = conv2d_elements};
EM_MODULE_TYPE(em_conv1d_type) = {.type_name = "Conv1d", .forward = conv1d_forward, CONV,
                                  .tensor_elements = conv1d_elements};

em_module *em_conv_layer_init(em_module *m, em_shape ws, int64_t n_bias, bool bias)
{
    em_tensor *w = em_module_add_param(m, "weight", em_empty(ws, EM_F32));
    bool ok = w && em_init_kaiming_uniform_(w, sqrt(5.0), EM_FAN_IN, NULL) == EM_OK;
    if (ok && bias) {
        double bound = 1.0 / sqrt((double)(em_numel(w) / ws.d[0])); /* 1 / sqrt(fan_in) */
        ok = em_module_add_param(m, "bias",
                                 em_uniform(EM_SHAPE(n_bias), EM_F32, -bound, bound, NULL)) != NULL;
    }
    if (!ok) {
        em_module_free(m);
        return NULL;
    }
    return m;
}

/* The options of a Conv2d or Conv1d made with these arguments (0: the default), checked; false
 * with an error naming fn. */
static bool conv_options(const char *fn, int64_t in_ch, int64_t out_ch, int64_t kernel,
                         int64_t stride, int64_t padding, int64_t dilation, int64_t groups,
                         bool bias, em_conv_options *o)
{
    *o = (em_conv_options){.in_channels = in_ch, .out_channels = out_ch, .kernel_size = kernel,
                           .stride = stride ? stride : 1,
                           .padding = padding == EM_PADDING_VALID ? 0 : padding,
                           .dilation = dilation ? dilation : 1, .groups = groups ? groups : 1,
                           .bias = bias};
    if (o->padding == EM_PADDING_SAME && o->stride > 1) {
        em_set_error(EM_ERR_ARG, "%s: padding EM_PADDING_SAME needs stride 1 (given %lld)", fn,
                     (long long)o->stride);
        return false;
    }
    if (in_ch <= 0 || out_ch <= 0 || kernel <= 0 || o->stride < 0 || o->dilation < 0 ||
        o->groups < 0 || (o->padding < 0 && o->padding != EM_PADDING_SAME) ||
        in_ch % o->groups || out_ch % o->groups) {
        em_set_error(EM_ERR_ARG, "%s: bad sizes: in %lld, out %lld, kernel %lld, stride %lld, "
                     "padding %lld, dilation %lld, groups %lld", fn, (long long)in_ch,
                     (long long)out_ch, (long long)kernel, (long long)o->stride,
                     (long long)o->padding, (long long)o->dilation, (long long)o->groups);
        return false;
    }
    return true;
}

em_module *em_conv2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv2d_layer_opts o)
{
    em_conv_options c;
    return conv_options("em_conv2d_layer", in_ch, out_ch, kernel, o.stride, o.padding,
                        o.dilation, o.groups, !o.no_bias, &c)
               ? conv_new(&em_conv2d_type, 2, c) : NULL;
}

em_module *em_conv1d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv1d_layer_opts o)
{
    em_conv_options c;
    return conv_options("em_conv1d_layer", in_ch, out_ch, kernel, o.stride, o.padding,
                        o.dilation, o.groups, !o.no_bias, &c)
               ? conv_new(&em_conv1d_type, 1, c) : NULL;
}
