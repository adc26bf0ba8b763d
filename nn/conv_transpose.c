/* ConvTranspose2d: weight (in, out/groups, k, k) and bias (out), PyTorch's default
 * initialisation (kaiming_uniform_(a = sqrt 5) over fan_in = out/groups k k, bias U(+-1/sqrt
 * fan_in)); stride, padding, output_padding, dilation and groups as in
 * torch.nn.ConvTranspose2d. */
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_conv_transpose_options o;
    em_conv_transpose2d_opts opts; /* o as em_conv_transpose2d takes it */
} conv_transpose2d_layer; /* params: weight (in_channels, out_channels / groups, k, k), bias */

static em_tensor *conv_transpose2d_forward(em_module *m, const em_tensor *x /* (N, C_in, H, W) */)
{
    return em_conv_transpose2d(x, m->params[0].value,
                               m->n_params > 1 ? m->params[1].value : NULL,
                               ((conv_transpose2d_layer *)m)->opts);
}

/* Every input element times its (out / groups) k k kernel taps, 2 FLOPs a multiply-accumulate;
 * 1 per bias add of every output. */
static double conv_transpose2d_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    const em_conv_transpose_options *o = em_module_options(m);
    double taps = (double)(o->out_channels / o->groups) * (double)o->kernel_size *
                  (double)o->kernel_size;
    return 2 * (double)em_numel(x) * taps + (o->bias ? (double)em_numel(y) : 0);
}

static double conv_transpose2d_elements(const void *options)
{
    const em_conv_transpose_options *o = options;
    return (double)o->in_channels * (double)(o->out_channels / o->groups) *
               (double)o->kernel_size * (double)o->kernel_size +
           (o->bias ? (double)o->out_channels : 0);
}

static bool conv_transpose2d_check(const void *options, char *why, size_t n)
{
    const em_conv_transpose_options *o = options;
    if (!em_check_divides("groups", o->groups, "in_channels", o->in_channels, why, n) ||
        !em_check_divides("groups", o->groups, "out_channels", o->out_channels, why, n))
        return false;
    if (o->output_padding < o->stride || o->output_padding < o->dilation)
        return true;
    snprintf(why, n, "setting 'output_padding' is %lld, not below stride %lld or dilation %lld",
             (long long)o->output_padding, (long long)o->stride, (long long)o->dilation);
    return false;
}

static em_module *conv_transpose2d_new(const em_module_type *type,
                                       em_conv_transpose_options o)
{
    conv_transpose2d_layer *c = (conv_transpose2d_layer *)em_module_alloc(sizeof *c, type);
    if (!c)
        return NULL;
    c->o = o;
    c->opts = (em_conv_transpose2d_opts){
        .stride = {o.stride, o.stride}, .padding = {o.padding, o.padding},
        .output_padding = {o.output_padding, o.output_padding},
        .dilation = {o.dilation, o.dilation}, .groups = o.groups};
    int64_t k = o.kernel_size;
    return em_conv_layer_init(&c->base, EM_SHAPE(o.in_channels, o.out_channels / o.groups, k, k),
                              o.out_channels, o.bias);
}

static em_module *conv_transpose2d_build(const em_module_type *type, const void *options,
                                         em_module **children, int n)
{
    (void)children, (void)n;
    return conv_transpose2d_new(type, *(const em_conv_transpose_options *)options);
}

static const em_setting conv_transpose2d_settings[] = {
    EM_SIZE_SETTING(em_conv_transpose_options, in_channels, 1, EM_SETTING_POSITIONAL),
    EM_SIZE_SETTING(em_conv_transpose_options, out_channels, 1, EM_SETTING_POSITIONAL),
    EM_SIZE_SETTING(em_conv_transpose_options, kernel_size, 1, 0),
    EM_SIZE_SETTING(em_conv_transpose_options, stride, 1, 0),
    EM_SIZE_SETTING(em_conv_transpose_options, padding, 0, 0),
    EM_SIZE_SETTING(em_conv_transpose_options, output_padding, 0, 0),
    EM_SIZE_SETTING(em_conv_transpose_options, dilation, 1, 0),
    EM_SIZE_SETTING(em_conv_transpose_options, groups, 1, 0),
    EM_BOOL_SETTING(em_conv_transpose_options, bias, 1),
};

EM_MODULE_TYPE(em_conv_transpose2d_type) = {
    .type_name = "ConvTranspose2d",
    .forward = conv_transpose2d_forward,
    EM_SETTINGS(conv_transpose2d_settings),
    .options_offset = offsetof(conv_transpose2d_layer, o),
    .options_size = sizeof(em_conv_transpose_options),
    .build = conv_transpose2d_build,
    .check = conv_transpose2d_check,
    .tensor_elements = conv_transpose2d_elements,
    .flops = conv_transpose2d_flops,
};

em_module *em_conv_transpose2d_layer(int64_t in_ch, int64_t out_ch, int64_t kernel,
                                     em_conv_transpose2d_layer_opts o)
{
    em_conv_transpose_options c = {
        .in_channels = in_ch, .out_channels = out_ch, .kernel_size = kernel,
        .stride = o.stride ? o.stride : 1, .padding = o.padding,
        .output_padding = o.output_padding, .dilation = o.dilation ? o.dilation : 1,
        .groups = o.groups ? o.groups : 1, .bias = !o.no_bias};
    if (in_ch <= 0 || out_ch <= 0 || kernel <= 0 || c.stride < 0 || o.padding < 0 ||
        c.dilation < 0 || c.groups < 0 || in_ch % c.groups || out_ch % c.groups ||
        o.output_padding < 0 || (o.output_padding >= c.stride && o.output_padding >= c.dilation)) {
        em_set_error(EM_ERR_ARG, "em_conv_transpose2d_layer: bad sizes: in %lld, out %lld, "
                     "kernel %lld, stride %lld, padding %lld, output_padding %lld (below stride "
                     "or dilation), dilation %lld, groups %lld", (long long)in_ch,
                     (long long)out_ch, (long long)kernel, (long long)c.stride,
                     (long long)o.padding, (long long)o.output_padding, (long long)c.dilation,
                     (long long)c.groups);
        return NULL;
    }
    return conv_transpose2d_new(&em_conv_transpose2d_type, c);
}
