/* Group normalisation (PyTorch's F.group_norm and nn.GroupNorm): each sample's channels split
 * into groups, each group normalised over its channels and positions as one row of
 * em_layer_norm_rows (the fused row kernel on CPU; CUDA composes it of kernels it has), then a
 * per-channel weight and bias. */
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

/* x (N, C, *), weight and bias (C) or NULL */
em_tensor *em_group_norm(const em_tensor *x, int64_t num_groups, const em_tensor *weight,
                         const em_tensor *bias, double eps)
{
    const char *fn = "em_group_norm";
    if (!em_norm_check_input(fn, x) || !em_norm_check_channels(fn, weight, "weight", x) ||
        !em_norm_check_channels(fn, bias, "bias", x))
        return NULL;
    char bx[64];
    int64_t n = x->shape[0], c = x->shape[1], positions = em_norm_positions(x);
    if (num_groups <= 0 || c % num_groups || positions == 0 || !(eps >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: expected num_groups > 0 dividing the channels of x %s, "
                     "at least one position per channel and eps >= 0: num_groups %lld, eps %g",
                     fn, em_shape_str(x, bx, sizeof bx), (long long)num_groups, eps);
        return NULL;
    }
    em_scope_begin();
    em_shape rows = EM_SHAPE(n * num_groups, c / num_groups * positions);
    em_tensor *y = em_layer_norm_rows(em_reshape(x, rows), NULL, NULL, eps); // (N G, C/G *)
    y = em_reshape(y, em_shape_of(x));                                       // (N, C, *)
    if (weight)
        y = em_mul(y, em_norm_per_channel(weight, y));
    if (bias)
        y = em_add(y, em_norm_per_channel(bias, y));
    return em_nn_scope_return(y);
}

typedef struct {
    em_module base;
    em_group_norm_options o;
} group_norm_layer; /* params (when affine): weight, bias (num_channels) */

static em_tensor *group_norm_forward(em_module *m, const em_tensor *x)
{
    const em_group_norm_options *o = &((group_norm_layer *)m)->o;
    return em_group_norm(x, o->num_groups, o->affine ? m->params[0].value : NULL,
                         o->affine ? m->params[1].value : NULL, o->eps);
}

static double group_norm_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    return em_norm_flops(y, true, ((const group_norm_layer *)m)->o.affine);
}

static double group_norm_elements(const void *options)
{
    const em_group_norm_options *o = options;
    return 2.0 * (double)o->num_channels * o->affine;
}

static bool group_norm_check(const void *options, char *why, size_t n)
{
    const em_group_norm_options *o = options;
    return em_check_divides("num_groups", o->num_groups, "num_channels", o->num_channels, why,
                            n);
}

static em_module *group_norm_new(const em_module_type *type, em_group_norm_options o)
{
    group_norm_layer *g = (group_norm_layer *)em_module_alloc(sizeof *g, type);
    if (!g)
        return NULL;
    g->o = o;
    int64_t c = o.num_channels;
    if (o.affine && (!em_module_add_param(&g->base, "weight", em_ones(EM_SHAPE(c), EM_F32)) ||
                     !em_module_add_param(&g->base, "bias", em_zeros(EM_SHAPE(c), EM_F32)))) {
        em_module_free(&g->base);
        return NULL;
    }
    return &g->base;
}

static em_module *group_norm_build(const em_module_type *type, const void *options,
                                   em_module **children, int n)
{
    (void)children, (void)n;
    return group_norm_new(type, *(const em_group_norm_options *)options);
}

static const em_setting group_norm_settings[] = {
    EM_SIZE_SETTING(em_group_norm_options, num_groups, 1,
                    EM_SETTING_POSITIONAL),
    EM_SIZE_SETTING(em_group_norm_options, num_channels, 1,
                    EM_SETTING_POSITIONAL),
    EM_REAL_SETTING(em_group_norm_options, eps, 0, 1, 1e-5),
    EM_BOOL_SETTING(em_group_norm_options, affine, 1),
};

EM_MODULE_TYPE(em_group_norm_type) = {
    .type_name = "GroupNorm",
    .forward = group_norm_forward,
    EM_SETTINGS(group_norm_settings),
    .options_offset = offsetof(group_norm_layer, o),
    .options_size = sizeof(em_group_norm_options),
    .build = group_norm_build,
    .check = group_norm_check,
    .tensor_elements = group_norm_elements,
    .flops = group_norm_flops,
};

em_module *em_group_norm_layer(int64_t num_groups, int64_t channels, em_group_norm_opts o)
{
    if (num_groups <= 0 || channels <= 0 || channels % num_groups || !(o.eps >= 0)) {
        em_set_error(EM_ERR_ARG, "em_group_norm_layer: channels (%lld) must be divisible by "
                     "num_groups (%lld), both > 0, and eps (%g) >= 0", (long long)channels,
                     (long long)num_groups, o.eps);
        return NULL;
    }
    return group_norm_new(&em_group_norm_type, (em_group_norm_options){
        .num_groups = num_groups, .num_channels = channels, .eps = o.eps ? o.eps : 1e-5,
        .affine = !o.no_affine});
}
