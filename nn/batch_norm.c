/* Batch normalisation as a composite of autograd ops (its gradients come from theirs): batch
 * statistics and a running-statistics update in training (an exponential moving average, or
 * PyTorch's momentum=None cumulative average), the running statistics in eval. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

/* x (N, C, *), running_mean, running_var, weight, bias (C) or NULL */
em_tensor *em_batch_norm(const em_tensor *x, em_tensor *running_mean, em_tensor *running_var,
                         const em_tensor *weight, const em_tensor *bias, bool training,
                         double momentum, double eps)
{
    const char *fn = "em_batch_norm";
    if (!em_norm_check_input(fn, x))
        return NULL;
    char bx[64];
    int64_t c = x->shape[1], n = c ? em_numel(x) / c : 0;
    if (!em_norm_check_channels(fn, running_mean, "running_mean", x) ||
        !em_norm_check_channels(fn, running_var, "running_var", x) ||
        !em_norm_check_channels(fn, weight, "weight", x) ||
        !em_norm_check_channels(fn, bias, "bias", x))
        return NULL;
    if (training && n <= 1) {
        em_set_error(EM_ERR_ARG, "em_batch_norm: training needs more than one value per channel: "
                     "x %s", em_shape_str(x, bx, sizeof bx));
        return NULL;
    }
    if (!training && (!running_mean || !running_var)) {
        em_set_error(EM_ERR_ARG, "em_batch_norm: eval mode needs running_mean and running_var");
        return NULL;
    }
    int dims[EM_MAX_DIMS], nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != 1)
            dims[nd++] = i;

    em_scope_begin();
    em_tensor *mean, *var; // (1, C, 1, ...)
    if (training) {
        mean = em_mean(x, dims, nd, true);
        var = em_var(x, dims, nd, 0, true);
        bool prev = em_set_grad_enabled(false);
        em_status st = EM_OK;
        if (mean && var && running_mean && running_var) {
            st = em_norm_update_running(running_mean, mean, momentum);
            em_tensor *unbiased = em_mul_scalar(var, (double)n / (double)(n - 1));
            if (st == EM_OK)
                st = em_norm_update_running(running_var, unbiased, momentum);
        }
        em_set_grad_enabled(prev);
        if (st != EM_OK)
            mean = NULL; /* the error is set; the ops below pass the NULL on */
    } else {
        mean = em_norm_per_channel(running_mean, x);
        var = em_norm_per_channel(running_var, x);
    }
    em_tensor *y = em_mul(em_sub(x, mean), em_rsqrt(em_add_scalar(var, eps)));
    if (weight)
        y = em_mul(y, em_norm_per_channel(weight, x));
    if (bias)
        y = em_add(y, em_norm_per_channel(bias, x));
    em_keep(y);
    em_scope_end();
    return y;
}

typedef struct {
    em_module base;
    em_batch_norm_options o;
    int min_ndim, max_ndim; /* accepted input ranks */
} batch_norm_layer; /* params: weight, bias (num_features); buffers: running_mean, running_var
                       (num_features), num_batches_tracked (i64 scalar) */

static em_tensor *batch_norm_forward(em_module *m, const em_tensor *x)
{
    batch_norm_layer *b = (batch_norm_layer *)m;
    if (x->ndim < b->min_ndim || x->ndim > b->max_ndim) {
        char buf[64];
        em_set_error(EM_ERR_ARG, "%s: expected a %s input, got %s", m->type->type_name,
                     b->min_ndim == 4 ? "4-D (N, C, H, W)" : "2-D (N, C) or 3-D (N, C, L)",
                     em_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    em_tensor *tracked = m->buffers[2].value;
    double momentum = b->o.momentum; /* the cumulative average weighs this batch 1 / batches */
    if (m->training && momentum == EM_BN_CUMULATIVE_AVERAGE)
        momentum = 1.0 / (em_item(tracked) + 1);
    em_tensor *y = isnan(momentum) ? NULL /* em_item's error stays */
                                   : em_batch_norm(x, m->buffers[0].value, m->buffers[1].value,
                                                   m->params[0].value, m->params[1].value,
                                                   m->training, momentum, b->o.eps);
    if (y && m->training) { /* counted on the buffer's device, read back only just above */
        em_scope_begin();
        em_status st = em_copy_(tracked, em_add_scalar(tracked, 1));
        em_scope_end();
        if (st != EM_OK) {
            em_release(y);
            return NULL;
        }
    }
    return y;
}

/* Per element: the statistics (a sum, and a subtract, square and sum) in training, then the
 * subtract and multiply that normalise and the affine's multiply and add. */
double em_norm_flops(const em_tensor *y, bool batch_statistics, bool affine)
{
    return (double)em_numel(y) * ((batch_statistics ? 4 : 0) + 2 + (affine ? 2 : 0));
}

static double batch_norm_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    return em_norm_flops(y, m->training, true);
}

/* weight, bias, running mean and variance, and the batch count */
static double batch_norm_elements(const void *options)
{
    return 4.0 * (double)((const em_batch_norm_options *)options)->num_features + 1;
}

static em_module *batch_norm_new(const em_module_type *type, em_batch_norm_options o)
{
    batch_norm_layer *b = (batch_norm_layer *)em_module_alloc(sizeof *b, type);
    if (!b)
        return NULL;
    b->o = o;
    b->min_ndim = type == &em_batch_norm2d_type ? 4 : 2;
    b->max_ndim = type == &em_batch_norm2d_type ? 4 : 3;
    em_module *m = &b->base;
    int64_t f = o.num_features;
    if (!em_module_add_param(m, "weight", em_ones(EM_SHAPE(f), EM_F32)) ||
        !em_module_add_param(m, "bias", em_zeros(EM_SHAPE(f), EM_F32)) ||
        !em_module_add_buffer(m, "running_mean", em_zeros(EM_SHAPE(f), EM_F32)) ||
        !em_module_add_buffer(m, "running_var", em_ones(EM_SHAPE(f), EM_F32)) ||
        !em_module_add_buffer(m, "num_batches_tracked", em_zeros(EM_SCALAR_SHAPE, EM_I64))) {
        em_module_free(m);
        return NULL;
    }
    return m;
}

static em_module *batch_norm_build(const em_module_type *type, const void *options,
                                   em_module **children, int n)
{
    (void)children, (void)n;
    return batch_norm_new(type, *(const em_batch_norm_options *)options);
}

/* momentum None (PyTorch's cumulative average) is null in files */
static const em_setting batch_norm_settings[] = {
    EM_SIZE_SETTING(em_batch_norm_options, num_features, 1,
                    EM_SETTING_POSITIONAL),
    EM_REAL_SETTING(em_batch_norm_options, eps, 0, 1, 1e-5),
    {.name = "momentum", .kind = EM_SETTING_REAL_OR_NONE,
     .offset = offsetof(em_batch_norm_options, momentum), .min = 0, .max = 1, .def = 0.1,
     .none_value = EM_BN_CUMULATIVE_AVERAGE},
};

#define BATCH_NORM                                                                            \
    .forward = batch_norm_forward, EM_SETTINGS(batch_norm_settings),                         \
    .options_offset = offsetof(batch_norm_layer, o),                                          \
    .options_size = sizeof(em_batch_norm_options), .build = batch_norm_build,                 \
    .tensor_elements = batch_norm_elements, .flops = batch_norm_flops
EM_MODULE_TYPE(em_batch_norm1d_type) = {.type_name = "BatchNorm1d", BATCH_NORM};
EM_MODULE_TYPE(em_batch_norm2d_type) = {.type_name = "BatchNorm2d", BATCH_NORM};

static em_module *batch_norm_layer_new(const em_module_type *type, int64_t features,
                                   em_batch_norm_opts o, const char *fn)
{
    bool cumulative = o.momentum == EM_BN_CUMULATIVE_AVERAGE;
    if (features <= 0 || !(o.eps >= 0) || (!cumulative && !(o.momentum >= 0 && o.momentum <= 1))) {
        em_set_error(EM_ERR_ARG, "%s: bad arguments: features %lld, eps %g, momentum %g (in "
                     "[0, 1], or EM_BN_CUMULATIVE_AVERAGE)", fn, (long long)features, o.eps,
                     o.momentum);
        return NULL;
    }
    return batch_norm_new(type, (em_batch_norm_options){
        .num_features = features, .eps = o.eps ? o.eps : 1e-5,
        .momentum = o.momentum ? o.momentum : 0.1});
}

em_module *em_batch_norm1d_layer(int64_t num_features, em_batch_norm_opts o)
{
    return batch_norm_layer_new(&em_batch_norm1d_type, num_features, o, "em_batch_norm1d_layer");
}

em_module *em_batch_norm2d_layer(int64_t num_features, em_batch_norm_opts o)
{
    return batch_norm_layer_new(&em_batch_norm2d_type, num_features, o, "em_batch_norm2d_layer");
}
