/* Instance normalisation (PyTorch's F.instance_norm, nn.InstanceNorm1d and nn.InstanceNorm2d):
 * each channel of each sample normalised over its positions (group norm with a group per
 * channel), or with running statistics in their place; the running statistics, when given, move
 * towards the batch's mean over samples of each instance's mean and unbiased variance. */
#include <stddef.h>
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
    em_instance_norm_options o;
    int sample_ndim; /* the dims of an unbatched input: 2 (C, L) or 3 (C, H, W) */
} instance_norm_layer; /* params (affine): weight, bias (num_features); buffers (tracking):
                          running_mean, running_var (num_features), num_batches_tracked (i64
                          0-d, kept at 0 as PyTorch's InstanceNorm keeps it) */

static em_tensor *instance_norm_forward(em_module *m, const em_tensor *x)
{
    instance_norm_layer *l = (instance_norm_layer *)m;
    const em_instance_norm_options *o = &l->o;
    char buf[64];
    int feature_dim = x->ndim - l->sample_ndim;
    if (feature_dim != 0 && feature_dim != 1) {
        em_set_error(EM_ERR_ARG, "%s: expected %dD or %dD input, got %s", m->type->type_name,
                     l->sample_ndim, l->sample_ndim + 1, em_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    if ((o->affine || o->track_running_stats) && x->shape[feature_dim] != o->num_features) {
        em_set_error(EM_ERR_ARG, "%s: expected input's size at dim=%d to match num_features "
                     "(%lld), but got %s", m->type->type_name, feature_dim,
                     (long long)o->num_features, em_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    bool track = o->track_running_stats;
    em_scope_begin();
    const em_tensor *batch = feature_dim ? x : em_unsqueeze(x, 0); // (N, C, *)
    em_tensor *y = em_instance_norm(batch, track ? m->buffers[0].value : NULL,
                                    track ? m->buffers[1].value : NULL,
                                    o->affine ? m->params[0].value : NULL,
                                    o->affine ? m->params[1].value : NULL,
                                    m->training || !track, o->momentum, o->eps);
    return em_nn_scope_return(feature_dim ? y : em_squeeze(y, 0));
}

/* the statistics come from the input unless it tracks them and runs in eval */
static double instance_norm_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const em_instance_norm_options *o = em_module_options(m);
    return em_norm_flops(y, m->training || !o->track_running_stats, o->affine);
}

/* weight and bias when affine; running mean and variance and the batch count when tracking */
static double instance_norm_elements(const void *options)
{
    const em_instance_norm_options *o = options;
    double f = (double)o->num_features;
    return 2.0 * f * o->affine + (2.0 * f + 1) * o->track_running_stats;
}

static bool add_tensors(em_module *m, int64_t f, const em_instance_norm_options *o)
{
    return (!o->affine || (em_module_add_param(m, "weight", em_ones(EM_SHAPE(f), EM_F32)) &&
                           em_module_add_param(m, "bias", em_zeros(EM_SHAPE(f), EM_F32)))) &&
           (!o->track_running_stats ||
            (em_module_add_buffer(m, "running_mean", em_zeros(EM_SHAPE(f), EM_F32)) &&
             em_module_add_buffer(m, "running_var", em_ones(EM_SHAPE(f), EM_F32)) &&
             em_module_add_buffer(m, "num_batches_tracked", em_zeros(EM_SCALAR_SHAPE, EM_I64))));
}

static em_module *instance_norm_new(const em_module_type *type, em_instance_norm_options o)
{
    instance_norm_layer *l = (instance_norm_layer *)em_module_alloc(sizeof *l, type);
    if (!l)
        return NULL;
    l->o = o;
    l->sample_ndim = type == &em_instance_norm2d_type ? 3 : 2;
    if (!add_tensors(&l->base, o.num_features, &o)) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

static em_module *instance_norm_build(const em_module_type *type, const void *options,
                                      em_module **children, int n)
{
    (void)children, (void)n;
    return instance_norm_new(type, *(const em_instance_norm_options *)options);
}

static const em_setting instance_norm_settings[] = {
    EM_SIZE_SETTING(em_instance_norm_options, num_features, 1,
                    EM_SETTING_POSITIONAL),
    EM_REAL_SETTING(em_instance_norm_options, eps, 0, 1, 1e-5),
    EM_REAL_SETTING(em_instance_norm_options, momentum, 0, 1, 0.1),
    EM_BOOL_SETTING(em_instance_norm_options, affine, 0),
    EM_BOOL_SETTING(em_instance_norm_options, track_running_stats, 0),
};

#define INSTANCE_NORM                                                                         \
    .forward = instance_norm_forward, EM_SETTINGS(instance_norm_settings),                   \
    .options_offset = offsetof(instance_norm_layer, o),                                       \
    .options_size = sizeof(em_instance_norm_options), .build = instance_norm_build,           \
    .tensor_elements = instance_norm_elements, .flops = instance_norm_flops
EM_MODULE_TYPE(em_instance_norm1d_type) = {.type_name = "InstanceNorm1d", INSTANCE_NORM};
EM_MODULE_TYPE(em_instance_norm2d_type) = {.type_name = "InstanceNorm2d", INSTANCE_NORM};

static em_module *instance_norm_layer_new(const em_module_type *type, int64_t features,
                                          em_instance_norm_opts o, const char *fn)
{
    if (features <= 0 || !(o.eps >= 0) || !(o.momentum >= 0 && o.momentum <= 1)) {
        em_set_error(EM_ERR_ARG, "%s: bad arguments: num_features %lld (> 0), eps %g (>= 0), "
                     "momentum %g (in [0, 1])", fn, (long long)features, o.eps, o.momentum);
        return NULL;
    }
    return instance_norm_new(type, (em_instance_norm_options){
        .num_features = features, .eps = o.eps ? o.eps : 1e-5,
        .momentum = o.momentum ? o.momentum : 0.1, .affine = o.affine,
        .track_running_stats = o.track_running_stats});
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
