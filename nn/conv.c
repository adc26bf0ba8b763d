/* Conv2d and Conv1d: weight (out, in/groups, k, k) or (out, in/groups, k) and bias (out),
 * PyTorch's default initialisation (kaiming_uniform_(a = sqrt 5), bias U(+-1/sqrt(fan_in)));
 * stride, padding, dilation and groups as in torch.nn.Conv2d and Conv1d. */
#include <math.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t in_ch, out_ch, kernel;
    em_conv2d_opts opts; /* defaults filled in; a Conv1d's are its width's, height 1 */
} conv2d_layer; /* params: weight (out_ch, in_ch / groups, kernel[, kernel]), bias (out_ch) */

static em_tensor *conv2d_forward(em_module *m, const em_tensor *x /* (N, C_in, H, W) */)
{
    conv2d_layer *c = (conv2d_layer *)m;
    return em_conv2d(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL,
                     c->opts);
}

static em_tensor *conv1d_forward(em_module *m, const em_tensor *x /* (N, C_in, L) */)
{
    const em_conv2d_opts *o = &((conv2d_layer *)m)->opts;
    em_conv1d_opts o1 = {.stride = o->stride[1], .padding = o->padding[1],
                         .dilation = o->dilation[1], .groups = o->groups};
    return em_conv1d(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL, o1);
}

static void conv_describe(const em_module *m, char *buf, size_t n)
{
    const conv2d_layer *c = (const conv2d_layer *)m;
    char padding[24] = "same";
    if (c->opts.padding[1] != EM_PADDING_SAME)
        snprintf(padding, sizeof padding, "%lld", (long long)c->opts.padding[1]);
    snprintf(buf, n, "%lld, %lld, kernel_size=%lld, stride=%lld, padding=%s, dilation=%lld, "
             "groups=%lld, bias=%s", (long long)c->in_ch, (long long)c->out_ch,
             (long long)c->kernel, (long long)c->opts.stride[1], padding,
             (long long)c->opts.dilation[1], (long long)c->opts.groups,
             m->n_params > 1 ? "true" : "false");
}

const em_module_type em_conv2d_type = {"Conv2d", conv2d_forward, NULL, conv_describe};
const em_module_type em_conv1d_type = {"Conv1d", conv1d_forward, NULL, conv_describe};

bool em_conv_layer_config(const em_module *m, em_conv2d_opts *o)
{
    if (!m || (m->type != &em_conv2d_type && m->type != &em_conv1d_type))
        return false;
    *o = ((const conv2d_layer *)m)->opts;
    return true;
}

bool em_conv2d_layer_config(const em_module *m, em_conv2d_opts *o)
{
    return m && m->type == &em_conv2d_type && em_conv_layer_config(m, o);
}

/* A Conv2d (spatial 2) or Conv1d (spatial 1) with the given settings (0: the default). */
static em_module *conv_new(const char *fn, const em_module_type *type, int spatial,
                           int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride,
                           int64_t padding, int64_t dilation, int64_t groups, bool bias)
{
    stride = stride ? stride : 1;
    dilation = dilation ? dilation : 1;
    groups = groups ? groups : 1;
    padding = padding == EM_PADDING_VALID ? 0 : padding;
    if (padding == EM_PADDING_SAME && stride > 1) {
        em_set_error(EM_ERR_ARG, "%s: padding EM_PADDING_SAME needs stride 1 (given %lld)", fn,
                     (long long)stride);
        return NULL;
    }
    if (in_ch <= 0 || out_ch <= 0 || kernel <= 0 || stride < 0 || dilation < 0 || groups < 0 ||
        (padding < 0 && padding != EM_PADDING_SAME) || in_ch % groups || out_ch % groups) {
        em_set_error(EM_ERR_ARG, "%s: bad sizes: in %lld, out %lld, kernel %lld, stride %lld, "
                     "padding %lld, dilation %lld, groups %lld", fn, (long long)in_ch,
                     (long long)out_ch, (long long)kernel, (long long)stride, (long long)padding,
                     (long long)dilation, (long long)groups);
        return NULL;
    }
    conv2d_layer *c = (conv2d_layer *)em_module_alloc(sizeof *c, type);
    if (!c)
        return NULL;
    c->in_ch = in_ch;
    c->out_ch = out_ch;
    c->kernel = kernel;
    bool two = spatial == 2; /* a Conv1d has height 1: stride 1, no padding, dilation 1 */
    /* padding EM_PADDING_SAME: a Conv2d's both dims, a Conv1d's width (index 1) */
    c->opts = (em_conv2d_opts){.stride = {two ? stride : 1, stride},
                               .padding = {two ? padding : 0, padding},
                               .dilation = {two ? dilation : 1, dilation}, .groups = groups};
    em_shape ws = two ? EM_SHAPE(out_ch, in_ch / groups, kernel, kernel)
                               : EM_SHAPE(out_ch, in_ch / groups, kernel);
    return em_conv_layer_init(&c->base, ws, out_ch, bias);
}

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

em_module *em_conv2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv2d_layer_opts o)
{
    return conv_new("em_conv2d_layer", &em_conv2d_type, 2, in_ch, out_ch, kernel, o.stride,
                    o.padding, o.dilation, o.groups, !o.no_bias);
}

em_module *em_conv1d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv1d_layer_opts o)
{
    return conv_new("em_conv1d_layer", &em_conv1d_type, 1, in_ch, out_ch, kernel, o.stride,
                    o.padding, o.dilation, o.groups, !o.no_bias);
}
