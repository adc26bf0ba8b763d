/* SyncBatchNorm: a BatchNorm module whose training statistics cover every rank's batch. The
 * per-channel sums go through em_dist_sum_over_ranks (whose backward sums the gradients over
 * ranks), mean first, then the variance around it, as one process over the whole batch would
 * compute them. Made by retyping a BatchNorm module in place: same parameters and buffers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"
#include "distributed/dist.h"
#include "nn/nn_internal.h"

/* A BatchNorm module's type retyped: its description kept (its options, eps and momentum,
 * read through it), the forward synchronised. */
typedef struct {
    em_module_type type;
    const em_module_type *inner; /* the BatchNorm type it replaced */
} sync_type;

/* The BatchNorm options every SyncBatchNorm keeps (nn/batch_norm.c) */
static const em_batch_norm_options *options_of(const em_module *m)
{
    return em_module_options(m);
}

/* The sum of x over every dim but 1, over every rank: (1, C, 1, ...) */
static em_tensor *sum_all_ranks(const em_tensor *x)
{
    int dims[EM_MAX_DIMS], nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != 1)
            dims[nd++] = i;
    return em_dist_sum_over_ranks(em_sum(x, dims, nd, true));
}

/* running = (1 - momentum) running + momentum stat, outside autograd */
static em_status update_running(em_tensor *running, const em_tensor *stat, double momentum)
{
    em_tensor *s = em_reshape(em_detach(stat), em_shape_of(running));
    em_tensor *upd = em_add(em_mul_scalar(running, 1.0 - momentum),
                            em_mul_scalar(em_to_dtype(s, running->dtype), momentum));
    return upd ? em_copy_(running, upd) : em_error_status();
}

/* (C) viewed as (1, C, 1, ...) to broadcast against x */
static em_tensor *per_channel(const em_tensor *v, const em_tensor *x)
{
    em_shape s = {.ndim = x->ndim};
    for (int i = 0; i < x->ndim; i++)
        s.d[i] = i == 1 ? x->shape[1] : 1;
    return em_reshape(v, s);
}

/* The factor a training step moves the running statistics by: momentum, or 1 / the batches
 * counted with this one for EM_BN_CUMULATIVE_AVERAGE (NaN with em_item's error). */
static double step_momentum(const em_module *m)
{
    double momentum = options_of(m)->momentum;
    return momentum == EM_BN_CUMULATIVE_AVERAGE ? 1.0 / (em_item(m->buffers[2].value) + 1)
                                                : momentum;
}

/* x (N, C, *) -> normalised over the whole distributed batch */
static em_tensor *sync_forward_training(em_module *m, const em_tensor *x)
{
    em_tensor *weight = m->params[0].value, *bias = m->params[1].value;
    em_tensor *running_mean = m->buffers[0].value, *running_var = m->buffers[1].value;
    em_scope_begin();
    em_tensor *count = em_scalar((double)(em_numel(x) / x->shape[1]), EM_I64);
    if (!count || em_dist_allreduce(count, EM_DIST_SUM) != EM_OK)
        return em_scope_return(NULL);
    double n = em_item(count);
    if (n <= 1) {
        char b[64];
        em_set_error(EM_ERR_ARG, "SyncBatchNorm: training needs more than one value per "
                     "channel over all ranks: x %s", em_shape_str(x, b, sizeof b));
        return em_scope_return(NULL);
    }
    em_tensor *mean = em_mul_scalar(sum_all_ranks(x), 1.0 / n);               // (1, C, 1, ...)
    em_tensor *centred = em_sub(x, mean);                                     // (N, C, *)
    em_tensor *var = em_mul_scalar(sum_all_ranks(em_square(centred)), 1.0 / n); // (1, C, 1, ...)
    bool grad = em_set_grad_enabled(false);
    double momentum = step_momentum(m);
    em_status st = mean && var && !isnan(momentum)
                       ? update_running(running_mean, mean, momentum) : em_error_status();
    if (st == EM_OK)
        st = update_running(running_var, em_mul_scalar(var, n / (n - 1)), momentum);
    if (st == EM_OK)
        st = em_fill_(m->buffers[2].value, em_item(m->buffers[2].value) + 1);
    em_set_grad_enabled(grad);
    double eps = options_of(m)->eps;
    em_tensor *y = st == EM_OK ? em_mul(centred, em_rsqrt(em_add_scalar(var, eps))) : NULL;
    y = em_add(em_mul(y, per_channel(weight, x)), per_channel(bias, x));
    return em_scope_return(y);
}

static em_tensor *sync_forward(em_module *m, const em_tensor *x)
{
    if (x->ndim < 2 || x->shape[1] != em_numel(m->params[0].value)) {
        char b[64];
        em_set_error(EM_ERR_ARG, "SyncBatchNorm: expected (N, %lld, *), got %s",
                     (long long)em_numel(m->params[0].value), em_shape_str(x, b, sizeof b));
        return NULL;
    }
    if (m->training && em_dist_initialized())
        return sync_forward_training(m, x);
    double momentum = m->training ? step_momentum(m) : 0;
    em_tensor *y = isnan(momentum) ? NULL
                                   : em_batch_norm(x, m->buffers[0].value, m->buffers[1].value,
                                                   m->params[0].value, m->params[1].value,
                                                   m->training, momentum,
                                                   options_of(m)->eps);
    if (y && m->training)
        em_fill_(m->buffers[2].value, em_item(m->buffers[2].value) + 1);
    return y;
}

static void sync_destroy(em_module *m)
{
    sync_type *t = (sync_type *)m->type;
    if (t->inner->destroy)
        t->inner->destroy(m);
    free(t);
}

/* Retype one BatchNorm module; false with an error when m is none or memory runs out. */
static bool convert_one(em_module *m)
{
    sync_type *t = calloc(1, sizeof *t);
    if (!t) {
        em_set_error(EM_ERR_MEMORY, "em_sync_batch_norm_convert: out of memory");
        return false;
    }
    t->inner = m->type;
    t->type = *m->type; /* the BatchNorm's description: saved and described as one */
    t->type.type_name = "SyncBatchNorm";
    t->type.forward = sync_forward;
    t->type.destroy = sync_destroy;
    t->type.wraps = m->type;
    m->type = &t->type;
    return true;
}

static bool is_batch_norm(const em_module *m)
{
    return m->type == &em_batch_norm1d_type || m->type == &em_batch_norm2d_type;
}

int em_sync_batch_norm_convert(em_module *m)
{
    if (!m) {
        em_set_error(EM_ERR_ARG, "em_sync_batch_norm_convert: NULL module");
        return -1;
    }
    int n = 0;
    if (is_batch_norm(m)) {
        if (!convert_one(m))
            return -1;
        n++;
    }
    for (int i = 0; i < m->n_children; i++) {
        int k = em_sync_batch_norm_convert(m->children[i].module);
        if (k < 0)
            return -1;
        n += k;
    }
    return n;
}

em_module *em_sync_batch_norm_layer(int64_t features, em_batch_norm_opts o)
{
    em_module *m = em_batch_norm2d_layer(features, o);
    if (m && !convert_one(m)) {
        em_module_free(m);
        return NULL;
    }
    return m;
}
