/* Instance normalisation (PyTorch's F.instance_norm, nn.InstanceNorm1d and nn.InstanceNorm2d):
 * each channel of each sample normalised over its positions (group norm with a group per
 * channel), or with running statistics in their place; the running statistics, when given, move
 * towards the batch's mean over samples of each instance's mean and unbiased variance. */
#include <stdio.h>

#include "nn/nn_internal.h"

/* The running statistics' update from x (N, C, *), outside autograd. */
static em_status update_running(const em_tensor *x, em_tensor *running_mean,
                                em_tensor *running_var, double momentum)
{
    int position_dim = 2, sample_dim = 0;
    bool grad = em_set_grad_enabled(false);
    em_scope_begin();
    em_tensor *inst = em_reshape(x, EM_SHAPE(x->shape[0], x->shape[1], -1)); // (N, C, HW)
    em_tensor *mean = em_mean(inst, &position_dim, 1, false);                // (N, C)
    em_tensor *var = em_var(inst, &position_dim, 1, 1, false);               // (N, C) unbiased
    em_status st = EM_OK;
    if (running_mean)
        st = em_norm_update_running(running_mean, em_mean(mean, &sample_dim, 1, false),
                                    momentum);
    if (running_var && st == EM_OK)
        st = em_norm_update_running(running_var, em_mean(var, &sample_dim, 1, false), momentum);
    em_scope_end();
    em_set_grad_enabled(grad);
    return st;
}

/* x (N, C, *), running_mean, running_var, weight and bias (C) or NULL */
em_tensor *em_instance_norm(const em_tensor *x, em_tensor *running_mean, em_tensor *running_var,
                            const em_tensor *weight, const em_tensor *bias, bool use_input_stats,
                            double momentum, double eps)
{
    const char *fn = "em_instance_norm";
    if (!em_norm_check_input(fn, x) ||
        !em_norm_check_channels(fn, running_mean, "running_mean", x) ||
        !em_norm_check_channels(fn, running_var, "running_var", x) ||
        !em_norm_check_channels(fn, weight, "weight", x) ||
        !em_norm_check_channels(fn, bias, "bias", x))
        return NULL;
    char bx[64];
    if (!(momentum >= 0 && momentum <= 1) || !(eps >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: momentum %g must be in [0, 1] and eps %g >= 0", fn,
                     momentum, eps);
        return NULL;
    }
    if (!use_input_stats) {
        if (running_mean && running_var)
            return em_batch_norm(x, running_mean, running_var, weight, bias, false, 0, eps);
        em_set_error(EM_ERR_ARG, "%s: expected running_mean and running_var when "
                     "use_input_stats is false", fn);
        return NULL;
    }
    bool updates = running_mean || running_var;
    if (em_norm_positions(x) <= 1 || (updates && x->shape[0] == 0)) {
        em_set_error(EM_ERR_ARG, "%s: expected more than 1 position per channel%s: x %s", fn,
                     updates ? " and a sample to update the running statistics from" : "",
                     em_shape_str(x, bx, sizeof bx));
        return NULL;
    }
    em_tensor *y = em_group_norm(x, x->shape[1], weight, bias, eps);
    if (y && updates && update_running(x, running_mean, running_var, momentum) != EM_OK) {
        em_release(y);
        return NULL;
    }
    return y;
}

typedef struct {
    em_module base;
    int64_t features;
    int sample_ndim; /* the dims of an unbatched input: 2 (C, L) or 3 (C, H, W) */
    em_instance_norm_opts o;
} instance_norm_layer; /* params (affine): weight, bias (features); buffers (tracking):
                          running_mean, running_var (features), num_batches_tracked (i64 0-d,
                          kept at 0 as PyTorch's InstanceNorm keeps it) */

static em_tensor *instance_norm_forward(em_module *m, const em_tensor *x)
{
    instance_norm_layer *l = (instance_norm_layer *)m;
    char buf[64];
    int feature_dim = x->ndim - l->sample_ndim;
    if (feature_dim != 0 && feature_dim != 1) {
        em_set_error(EM_ERR_ARG, "%s: expected %dD or %dD input, got %s", m->type->type_name,
                     l->sample_ndim, l->sample_ndim + 1, em_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    if ((l->o.affine || l->o.track_running_stats) && x->shape[feature_dim] != l->features) {
        em_set_error(EM_ERR_ARG, "%s: expected input's size at dim=%d to match num_features "
                     "(%lld), but got %s", m->type->type_name, feature_dim,
                     (long long)l->features, em_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    bool track = l->o.track_running_stats;
    em_scope_begin();
    const em_tensor *batch = feature_dim ? x : em_unsqueeze(x, 0); // (N, C, *)
    em_tensor *y = em_instance_norm(batch, track ? m->buffers[0].value : NULL,
                                    track ? m->buffers[1].value : NULL,
                                    l->o.affine ? m->params[0].value : NULL,
                                    l->o.affine ? m->params[1].value : NULL,
                                    m->training || !track, l->o.momentum, l->o.eps);
    return em_nn_scope_return(feature_dim ? y : em_squeeze(y, 0));
}

static void instance_norm_describe(const em_module *m, char *buf, size_t n)
{
    const instance_norm_layer *l = (const instance_norm_layer *)m;
    snprintf(buf, n, "%lld, eps=%g, momentum=%g, affine=%s, track_running_stats=%s",
             (long long)l->features, l->o.eps, l->o.momentum, l->o.affine ? "True" : "False",
             l->o.track_running_stats ? "True" : "False");
}

const em_module_type em_instance_norm1d_type = {"InstanceNorm1d", instance_norm_forward, NULL,
                                                instance_norm_describe};
const em_module_type em_instance_norm2d_type = {"InstanceNorm2d", instance_norm_forward, NULL,
                                                instance_norm_describe};

bool em_instance_norm_layer_config(const em_module *m, int64_t *features,
                                   em_instance_norm_opts *o)
{
    if (!m || (m->type != &em_instance_norm1d_type && m->type != &em_instance_norm2d_type))
        return false;
    const instance_norm_layer *l = (const instance_norm_layer *)m;
    *features = l->features;
    *o = l->o;
    return true;
}

static bool add_tensors(em_module *m, int64_t f, em_instance_norm_opts o)
{
    return (!o.affine || (em_module_add_param(m, "weight", em_ones(EM_SHAPE(f), EM_F32)) &&
                          em_module_add_param(m, "bias", em_zeros(EM_SHAPE(f), EM_F32)))) &&
           (!o.track_running_stats ||
            (em_module_add_buffer(m, "running_mean", em_zeros(EM_SHAPE(f), EM_F32)) &&
             em_module_add_buffer(m, "running_var", em_ones(EM_SHAPE(f), EM_F32)) &&
             em_module_add_buffer(m, "num_batches_tracked", em_zeros(EM_SCALAR_SHAPE, EM_I64))));
}

static em_module *instance_norm_layer_new(const em_module_type *type, int64_t features,
                                          em_instance_norm_opts o, const char *fn)
{
    if (features <= 0 || !(o.eps >= 0) || !(o.momentum >= 0 && o.momentum <= 1)) {
        em_set_error(EM_ERR_ARG, "%s: bad arguments: num_features %lld (> 0), eps %g (>= 0), "
                     "momentum %g (in [0, 1])", fn, (long long)features, o.eps, o.momentum);
        return NULL;
    }
    instance_norm_layer *l = (instance_norm_layer *)em_module_alloc(sizeof *l, type);
    if (!l)
        return NULL;
    l->features = features;
    l->sample_ndim = type == &em_instance_norm2d_type ? 3 : 2;
    l->o = o;
    l->o.eps = o.eps ? o.eps : 1e-5;
    l->o.momentum = o.momentum ? o.momentum : 0.1;
    if (!add_tensors(&l->base, features, o)) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

em_module *em_instance_norm1d_layer(int64_t num_features, em_instance_norm_opts o)
{
    return instance_norm_layer_new(&em_instance_norm1d_type, num_features, o,
                                   "em_instance_norm1d_layer");
}

em_module *em_instance_norm2d_layer(int64_t num_features, em_instance_norm_opts o)
{
    return instance_norm_layer_new(&em_instance_norm2d_type, num_features, o,
                                   "em_instance_norm2d_layer");
}
