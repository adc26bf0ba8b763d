/* Conv2d: weight (out, in/groups, k, k) and bias (out), PyTorch's default initialisation;
 * stride, padding, dilation and groups as in torch.nn.Conv2d. */
#include <math.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t in_ch, out_ch, kernel;
    em_conv2d_opts opts;
} conv2d_layer; /* params: weight (out_ch, in_ch / groups, kernel, kernel), bias (out_ch) */

static em_tensor *conv2d_forward(em_module *m, const em_tensor *x)
{
    conv2d_layer *c = (conv2d_layer *)m;
    return em_conv2d(x, m->params[0].value, m->n_params > 1 ? m->params[1].value : NULL,
                     c->opts);
}

static void conv2d_describe(const em_module *m, char *buf, size_t n)
{
    const conv2d_layer *c = (const conv2d_layer *)m;
    snprintf(buf, n, "%lld, %lld, kernel_size=%lld, stride=%lld, padding=%lld, dilation=%lld, "
             "groups=%lld, bias=%s", (long long)c->in_ch, (long long)c->out_ch,
             (long long)c->kernel, (long long)c->opts.stride[0], (long long)c->opts.padding[0],
             (long long)c->opts.dilation[0], (long long)c->opts.groups,
             m->n_params > 1 ? "true" : "false");
}

static const em_module_type conv2d_type = {"Conv2d", conv2d_forward, NULL, conv2d_describe};

bool em_conv2d_layer_config(const em_module *m, em_conv2d_opts *o)
{
    if (!m || m->type != &conv2d_type)
        return false;
    *o = ((const conv2d_layer *)m)->opts;
    return true;
}

em_module *em_conv2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel, em_conv2d_layer_opts o)
{
    int64_t stride = o.stride ? o.stride : 1, dilation = o.dilation ? o.dilation : 1;
    int64_t groups = o.groups ? o.groups : 1;
    if (in_ch <= 0 || out_ch <= 0 || kernel <= 0 || stride < 0 || dilation < 0 || groups < 0 ||
        o.padding < 0 || in_ch % groups || out_ch % groups) {
        em_set_error(EM_ERR_ARG, "em_conv2d_layer: bad sizes: in %lld, out %lld, kernel %lld, "
                     "stride %lld, padding %lld, dilation %lld, groups %lld",
                     (long long)in_ch, (long long)out_ch, (long long)kernel, (long long)stride,
                     (long long)o.padding, (long long)dilation, (long long)groups);
        return NULL;
    }
    conv2d_layer *c = (conv2d_layer *)em_module_alloc(sizeof *c, &conv2d_type);
    if (!c)
        return NULL;
    c->in_ch = in_ch;
    c->out_ch = out_ch;
    c->kernel = kernel;
    c->opts = (em_conv2d_opts){.stride = {stride, stride}, .padding = {o.padding, o.padding},
                               .dilation = {dilation, dilation}, .groups = groups};
    em_tensor *w = em_module_add_param(&c->base, "weight",
                                       em_empty(EM_SHAPE(out_ch, in_ch / groups, kernel, kernel),
                                                EM_F32));
    bool ok = w && em_init_kaiming_uniform_(w, sqrt(5.0), EM_FAN_IN, NULL) == EM_OK;
    if (ok && !o.no_bias) {
        double bound = 1.0 / sqrt((double)(in_ch / groups * kernel * kernel));
        ok = em_module_add_param(&c->base, "bias",
                                 em_uniform(EM_SHAPE(out_ch), EM_F32, -bound, bound, NULL)) != NULL;
    }
    if (!ok) {
        em_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}
