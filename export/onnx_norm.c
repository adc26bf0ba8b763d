/* ONNX GroupNorm and InstanceNorm1d/2d in opset-17 operators. GroupNorm is composed as
 * exporters compose it (ONNX's GroupNormalization needs opset 18, and changed its scale's shape
 * in 21): Reshape to (N, G, -1), InstanceNormalization with unit scale, Reshape back, then the
 * per-channel weight and bias. InstanceNorm is InstanceNormalization, or BatchNormalization
 * where it normalises by its running statistics (tracking them, in eval); an unbatched input is
 * unsqueezed to a batch of one. */
#include <stdio.h>

#include "export/onnx_internal.h"
#include "nn/nn_internal.h"

/* v (C) as an initializer "<layer>.<local>" of shape (C, 1, ...) to broadcast over the
 * channels of x (N, C, *) from dim 1 on; the name or NULL with an error. */
static const char *channel_initializer(em_onnx_builder *b, const char *local, const em_tensor *v,
                                       int x_ndim)
{
    em_shape s = {.ndim = x_ndim - 1, .d = {em_numel(v)}};
    for (int i = 1; i < s.ndim; i++)
        s.d[i] = 1;
    em_scope_begin();
    em_tensor *t = em_reshape(v, s);
    const char *name = t ? em_onnx_initializer(b, local, t) : NULL;
    em_scope_end();
    return name;
}

/* A (n) tensor of v as an initializer "<layer>.<local>"; the name or NULL with an error. */
static const char *filled(em_onnx_builder *b, const char *local, int64_t n, double v)
{
    em_scope_begin();
    em_tensor *t = em_full(EM_SHAPE(n), EM_F32, v);
    const char *name = t ? em_onnx_initializer(b, local, t) : NULL;
    em_scope_end();
    return name;
}

/* InstanceNormalization of the current value (N, C, *) over each (n, c), scale and bias (C). */
static em_status instance_normalization(em_onnx_builder *b, const char *scale, const char *bias,
                                        double eps)
{
    const char *in[] = {em_onnx_value(b), scale, bias};
    em_onnx_attr epsilon = {.name = "epsilon", .kind = EM_ONNX_ATTR_FLOAT, .f = eps};
    return scale && bias ? em_onnx_node(b, "InstanceNormalization", in, 3, &epsilon, 1)
                         : em_error_status();
}

static em_status export_group_norm(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    const em_group_norm_options *o = em_module_options(m);
    int64_t groups = o->num_groups;
    int ndim = em_onnx_example(b)->ndim;
    char x[256];
    snprintf(x, sizeof x, "%s", em_onnx_value(b));
    const int64_t grouped[] = {0, groups, -1};
    const char *to_groups = em_onnx_i64(b, "group_shape", EM_SHAPE(3), grouped);
    if (!to_groups || em_onnx_op(b, "Shape", x, NULL, NULL) != EM_OK)
        return em_error_status();
    char x_shape[256];
    snprintf(x_shape, sizeof x_shape, "%s", em_onnx_value(b));
    if (em_onnx_op(b, "Reshape", x, to_groups, NULL) != EM_OK || // (N, G, C/G *)
        instance_normalization(b, filled(b, "group_ones", groups, 1),
                               filled(b, "group_zeros", groups, 0), o->eps) != EM_OK ||
        em_onnx_op(b, "Reshape", em_onnx_value(b), x_shape, NULL) != EM_OK) // (N, C, *)
        return em_error_status();
    if (!o->affine)
        return EM_OK;
    const char *w = channel_initializer(b, "weight", m->params[0].value, ndim);
    const char *bias = channel_initializer(b, "bias", m->params[1].value, ndim);
    if (!w || !bias || em_onnx_op(b, "Mul", em_onnx_value(b), w, NULL) != EM_OK)
        return em_error_status();
    return em_onnx_op(b, "Add", em_onnx_value(b), bias, NULL);
}
EM_ONNX_MAPPING(em_group_norm_type, export_group_norm);

/* BatchNormalization of the current value by m's running statistics. */
static em_status by_running_stats(em_onnx_builder *b, const em_module *m, const char *scale,
                                  const char *bias, double eps)
{
    const char *mean = em_onnx_initializer(b, "running_mean", m->buffers[0].value);
    const char *var = em_onnx_initializer(b, "running_var", m->buffers[1].value);
    if (!scale || !bias || !mean || !var)
        return em_error_status();
    const char *in[] = {em_onnx_value(b), scale, bias, mean, var};
    em_onnx_attr epsilon = {.name = "epsilon", .kind = EM_ONNX_ATTR_FLOAT, .f = eps};
    return em_onnx_node(b, "BatchNormalization", in, 5, &epsilon, 1);
}

static em_status export_instance_norm(em_onnx_builder *b, const em_module *m,
                                      const char *layer)
{
    (void)layer;
    const em_instance_norm_options *o = em_module_options(m);
    const em_tensor *x = em_onnx_example(b); // (N, C, *) or unbatched (C, *)
    bool unbatched = x->ndim == (em_module_own_type(m) == &em_instance_norm2d_type ? 3 : 2);
    int64_t c = x->shape[unbatched ? 0 : 1];
    const char *scale = o->affine ? em_onnx_initializer(b, "weight", m->params[0].value)
                                 : filled(b, "ones", c, 1);
    const char *bias = o->affine ? em_onnx_initializer(b, "bias", m->params[1].value)
                                : filled(b, "zeros", c, 0);
    const int64_t zero = 0;
    const char *axis0 = unbatched ? em_onnx_i64(b, "axis_0", EM_SHAPE(1), &zero) : NULL;
    if (unbatched && (!axis0 || em_onnx_op(b, "Unsqueeze", em_onnx_value(b), axis0, NULL)))
        return em_error_status();
    em_status st = o->track_running_stats ? by_running_stats(b, m, scale, bias, o->eps)
                                          : instance_normalization(b, scale, bias, o->eps);
    if (st != EM_OK || !unbatched)
        return st;
    return em_onnx_op(b, "Squeeze", em_onnx_value(b), axis0, NULL);
}
EM_ONNX_MAPPING(em_instance_norm1d_type, export_instance_norm);
EM_ONNX_MAPPING(em_instance_norm2d_type, export_instance_norm);
