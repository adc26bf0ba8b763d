/* Group normalisation (PyTorch's F.group_norm and nn.GroupNorm): each sample's channels split
 * into groups, each group normalised over its channels and positions as one row of
 * em_layer_norm_rows (the fused row kernel on CPU; CUDA composes it of kernels it has), then a
 * per-channel weight and bias. */
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
    int64_t num_groups, channels;
    double eps;
} group_norm_layer; /* params (when affine): weight, bias (channels) */

static em_tensor *group_norm_forward(em_module *m, const em_tensor *x)
{
    group_norm_layer *g = (group_norm_layer *)m;
    bool affine = m->n_params == 2;
    return em_group_norm(x, g->num_groups, affine ? m->params[0].value : NULL,
                         affine ? m->params[1].value : NULL, g->eps);
}

static void group_norm_describe(const em_module *m, char *buf, size_t n)
{
    const group_norm_layer *g = (const group_norm_layer *)m;
    snprintf(buf, n, "%lld, %lld, eps=%g, affine=%s", (long long)g->num_groups,
             (long long)g->channels, g->eps, m->n_params ? "True" : "False");
}

const em_module_type em_group_norm_type = {"GroupNorm", group_norm_forward, NULL,
                                           group_norm_describe};

bool em_group_norm_layer_config(const em_module *m, int64_t *num_groups, int64_t *channels,
                                double *eps, bool *affine)
{
    if (!m || m->type != &em_group_norm_type)
        return false;
    const group_norm_layer *g = (const group_norm_layer *)m;
    *num_groups = g->num_groups;
    *channels = g->channels;
    *eps = g->eps;
    *affine = m->n_params == 2;
    return true;
}

em_module *em_group_norm_layer(int64_t num_groups, int64_t channels, double eps, bool affine)
{
    if (num_groups <= 0 || channels <= 0 || channels % num_groups || !(eps >= 0)) {
        em_set_error(EM_ERR_ARG, "em_group_norm_layer: channels (%lld) must be divisible by "
                     "num_groups (%lld), both > 0, and eps (%g) >= 0", (long long)channels,
                     (long long)num_groups, eps);
        return NULL;
    }
    group_norm_layer *g = (group_norm_layer *)em_module_alloc(sizeof *g, &em_group_norm_type);
    if (!g)
        return NULL;
    g->num_groups = num_groups;
    g->channels = channels;
    g->eps = eps ? eps : 1e-5;
    if (affine && (!em_module_add_param(&g->base, "weight", em_ones(EM_SHAPE(channels), EM_F32)) ||
                   !em_module_add_param(&g->base, "bias",
                                        em_zeros(EM_SHAPE(channels), EM_F32)))) {
        em_module_free(&g->base);
        return NULL;
    }
    return &g->base;
}
