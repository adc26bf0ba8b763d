/* ConvTranspose2d: weight (in, out/groups, k, k) and bias (out), PyTorch's default
 * initialisation (kaiming_uniform_(a = sqrt 5) over fan_in = out/groups k k, bias U(+-1/sqrt
 * fan_in)); stride, padding, output_padding, dilation and groups as in
 * torch.nn.ConvTranspose2d. */
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    int64_t in_ch, out_ch, kernel;
    em_conv_transpose2d_opts opts; /* defaults filled in, square */
} conv_transpose2d_layer; /* params: weight (in_ch, out_ch / groups, kernel, kernel), bias */

static em_tensor *conv_transpose2d_forward(em_module *m, const em_tensor *x /* (N, C_in, H, W) */)
{
    return em_conv_transpose2d(x, m->params[0].value,
                               m->n_params > 1 ? m->params[1].value : NULL,
                               ((conv_transpose2d_layer *)m)->opts);
}

static void conv_transpose2d_describe(const em_module *m, char *buf, size_t n)
{
    const conv_transpose2d_layer *c = (const conv_transpose2d_layer *)m;
    snprintf(buf, n, "%lld, %lld, kernel_size=%lld, stride=%lld, padding=%lld, "
             "output_padding=%lld, dilation=%lld, groups=%lld, bias=%s", (long long)c->in_ch,
             (long long)c->out_ch, (long long)c->kernel, (long long)c->opts.stride[0],
             (long long)c->opts.padding[0], (long long)c->opts.output_padding[0],
             (long long)c->opts.dilation[0], (long long)c->opts.groups,
             m->n_params > 1 ? "true" : "false");
}

const em_module_type em_conv_transpose2d_type = {"ConvTranspose2d", conv_transpose2d_forward,
                                                 NULL, conv_transpose2d_describe};

bool em_conv_transpose2d_layer_config(const em_module *m, em_conv_transpose2d_opts *o)
{
    if (!m || m->type != &em_conv_transpose2d_type)
        return false;
    *o = ((const conv_transpose2d_layer *)m)->opts;
    return true;
}

em_module *em_conv_transpose2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel,
                                     em_conv_transpose2d_layer_opts o)
{
    int64_t stride = o.stride ? o.stride : 1, dilation = o.dilation ? o.dilation : 1;
    int64_t groups = o.groups ? o.groups : 1;
    if (in_ch <= 0 || out_ch <= 0 || kernel <= 0 || stride < 0 || o.padding < 0 ||
        dilation < 0 || groups < 0 || in_ch % groups || out_ch % groups ||
        o.output_padding < 0 || (o.output_padding >= stride && o.output_padding >= dilation)) {
        em_set_error(EM_ERR_ARG, "em_conv_transpose2d_layer: bad sizes: in %lld, out %lld, "
                     "kernel %lld, stride %lld, padding %lld, output_padding %lld (below stride "
                     "or dilation), dilation %lld, groups %lld", (long long)in_ch,
                     (long long)out_ch, (long long)kernel, (long long)stride,
                     (long long)o.padding, (long long)o.output_padding, (long long)dilation,
                     (long long)groups);
        return NULL;
    }
    conv_transpose2d_layer *c =
        (conv_transpose2d_layer *)em_module_alloc(sizeof *c, &em_conv_transpose2d_type);
    if (!c)
        return NULL;
    c->in_ch = in_ch;
    c->out_ch = out_ch;
    c->kernel = kernel;
    c->opts = (em_conv_transpose2d_opts){
        .stride = {stride, stride}, .padding = {o.padding, o.padding},
        .output_padding = {o.output_padding, o.output_padding},
        .dilation = {dilation, dilation}, .groups = groups};
    return em_conv_layer_init(&c->base, EM_SHAPE(in_ch, out_ch / groups, kernel, kernel), out_ch,
                              !o.no_bias);
}
