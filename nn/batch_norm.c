/* Batch normalisation as a composite of autograd ops (its gradients come from theirs): batch
 * statistics and a running-statistics update in training (an exponential moving average, or
 * PyTorch's momentum=None cumulative average), the running statistics in eval. */
#include <math.h>
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
    int64_t features;
    int min_ndim, max_ndim; /* accepted input ranks */
    double eps, momentum; /* momentum: EM_BN_CUMULATIVE_AVERAGE or in (0, 1] */
} batch_norm_layer; /* params: weight, bias (features); buffers: running_mean, running_var
                       (features), num_batches_tracked (i64 scalar) */

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
    double momentum = b->momentum; /* the cumulative average weighs this batch 1 / batches */
    if (m->training && momentum == EM_BN_CUMULATIVE_AVERAGE)
        momentum = 1.0 / (em_item(tracked) + 1);
    em_tensor *y = isnan(momentum) ? NULL /* em_item's error stays */
                                   : em_batch_norm(x, m->buffers[0].value, m->buffers[1].value,
                                                   m->params[0].value, m->params[1].value,
                                                   m->training, momentum, b->eps);
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

static void batch_norm_describe(const em_module *m, char *buf, size_t n)
{
    const batch_norm_layer *b = (const batch_norm_layer *)m;
    if (b->momentum == EM_BN_CUMULATIVE_AVERAGE)
        snprintf(buf, n, "%lld, eps=%g, momentum=None", (long long)b->features, b->eps);
    else
        snprintf(buf, n, "%lld, eps=%g, momentum=%g", (long long)b->features, b->eps, b->momentum);
}

const em_module_type em_batch_norm1d_type = {"BatchNorm1d", batch_norm_forward, NULL,
                                             batch_norm_describe};
const em_module_type em_batch_norm2d_type = {"BatchNorm2d", batch_norm_forward, NULL,
                                             batch_norm_describe};

bool em_batch_norm_layer_eps(const em_module *m, double *eps)
{
    if (!m || (m->type != &em_batch_norm1d_type && m->type != &em_batch_norm2d_type))
        return false;
    *eps = ((const batch_norm_layer *)m)->eps;
    return true;
}

static em_module *batch_norm_layer_new(const em_module_type *type, int64_t features, double eps,
                                       double momentum, const char *fn)
{
    bool cumulative = momentum == EM_BN_CUMULATIVE_AVERAGE;
    if (features <= 0 || !(eps >= 0) || (!cumulative && !(momentum >= 0 && momentum <= 1))) {
        em_set_error(EM_ERR_ARG, "%s: bad arguments: features %lld, eps %g, momentum %g (in "
                     "[0, 1], or EM_BN_CUMULATIVE_AVERAGE)", fn, (long long)features, eps,
                     momentum);
        return NULL;
    }
    batch_norm_layer *b = (batch_norm_layer *)em_module_alloc(sizeof *b, type);
    if (!b)
        return NULL;
    b->features = features;
    b->eps = eps ? eps : 1e-5;
    b->momentum = momentum ? momentum : 0.1;
    b->min_ndim = type == &em_batch_norm2d_type ? 4 : 2;
    b->max_ndim = type == &em_batch_norm2d_type ? 4 : 3;
    em_module *m = &b->base;
    if (!em_module_add_param(m, "weight", em_ones(EM_SHAPE(features), EM_F32)) ||
        !em_module_add_param(m, "bias", em_zeros(EM_SHAPE(features), EM_F32)) ||
        !em_module_add_buffer(m, "running_mean", em_zeros(EM_SHAPE(features), EM_F32)) ||
        !em_module_add_buffer(m, "running_var", em_ones(EM_SHAPE(features), EM_F32)) ||
        !em_module_add_buffer(m, "num_batches_tracked", em_zeros(EM_SCALAR_SHAPE, EM_I64))) {
        em_module_free(m);
        return NULL;
    }
    return m;
}

em_module *em_batch_norm1d_layer(int64_t features, double eps, double momentum)
{
    return batch_norm_layer_new(&em_batch_norm1d_type, features, eps, momentum,
                                "em_batch_norm1d_layer");
}

em_module *em_batch_norm2d_layer(int64_t channels, double eps, double momentum)
{
    return batch_norm_layer_new(&em_batch_norm2d_type, channels, eps, momentum,
                                "em_batch_norm2d_layer");
}

em_status em_batch_norm_layer_config(const em_module *m, double *eps, double *momentum)
{
    if (!m || (m->type != &em_batch_norm1d_type && m->type != &em_batch_norm2d_type))
        return em_set_error(EM_ERR_ARG, "em_batch_norm_layer_config: not a BatchNorm1d or "
                                        "BatchNorm2d module");
    const batch_norm_layer *b = (const batch_norm_layer *)m;
    *eps = b->eps;
    *momentum = b->momentum;
    return EM_OK;
}
