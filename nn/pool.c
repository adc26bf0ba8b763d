/* Pooling layers: max and average over k x k windows, and adaptive average pooling with
 * PyTorch's bins (start = floor(i H / out), end = ceil((i + 1) H / out)). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/nn_internal.h"
#include "tensor/tensor_internal.h"

typedef struct {
    em_module base;
    em_pool_options o;
    em_pool2d_opts opts; /* o as em_max_pool2d and em_avg_pool2d take it */
} pool2d_layer;

static em_tensor *max_pool2d_forward(em_module *m, const em_tensor *x)
{
    return em_max_pool2d(x, ((pool2d_layer *)m)->opts);
}

static em_tensor *avg_pool2d_forward(em_module *m, const em_tensor *x)
{
    return em_avg_pool2d(x, ((pool2d_layer *)m)->opts);
}

/* kernel x kernel taps read (compared or summed) per output */
static double pool2d_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    const em_pool_options *o = em_module_options(m);
    return (double)em_numel(y) * (double)(o->kernel_size * o->kernel_size);
}

static bool pool2d_check(const void *options, char *why, size_t n)
{
    const em_pool_options *o = options;
    if (2 * o->padding <= o->kernel_size)
        return true;
    snprintf(why, n, "setting 'padding' is %lld, more than half kernel_size %lld",
             (long long)o->padding, (long long)o->kernel_size);
    return false;
}

em_pool2d_opts em_pool_opts_2d(const em_pool_options *o)
{
    return (em_pool2d_opts){.kernel = {o->kernel_size, o->kernel_size},
                            .stride = {o->stride, o->stride}, .padding = {o->padding, o->padding},
                            .dilation = {o->dilation, o->dilation}};
}

static em_module *pool2d_new(const em_module_type *type, em_pool_options o)
{
    pool2d_layer *p = (pool2d_layer *)em_module_alloc(sizeof *p, type);
    if (!p)
        return NULL;
    p->o = o;
    p->opts = em_pool_opts_2d(&o);
    return &p->base;
}

static em_module *pool2d_build(const em_module_type *type, const void *options,
                               em_module **children, int n)
{
    (void)children, (void)n;
    return pool2d_new(type, *(const em_pool_options *)options);
}

/* AvgPool2d's are the first three (it has no dilation) */
static const em_setting pool2d_settings[] = {
    EM_SIZE_SETTING(em_pool_options, kernel_size, 1, 0),
    EM_SIZE_SETTING(em_pool_options, stride, 1, 0),
    EM_SIZE_SETTING(em_pool_options, padding, 0, 0),
    EM_SIZE_SETTING(em_pool_options, dilation, 1, EM_SETTING_ADDED_LATER),
};

EM_MODULE_TYPE(em_max_pool2d_type) = {
    .type_name = "MaxPool2d",
    .forward = max_pool2d_forward,
    EM_SETTINGS(pool2d_settings),
    .options_offset = offsetof(pool2d_layer, o),
    .options_size = sizeof(em_pool_options),
    .build = pool2d_build,
    .check = pool2d_check,
    .flops = pool2d_flops,
};

EM_MODULE_TYPE(em_avg_pool2d_type) = {
    .type_name = "AvgPool2d",
    .forward = avg_pool2d_forward,
    .settings = pool2d_settings,
    .n_settings = 3,
    .options_offset = offsetof(pool2d_layer, o),
    .options_size = sizeof(em_pool_options),
    .build = pool2d_build,
    .check = pool2d_check,
    .flops = pool2d_flops,
};

static em_module *pool2d_layer_new(const em_module_type *type, int64_t kernel,
                               em_pool2d_layer_opts o, const char *fn)
{
    em_pool_options p = {.kernel_size = kernel, .stride = o.stride ? o.stride : kernel,
                         .padding = o.padding, .dilation = o.dilation ? o.dilation : 1};
    if (kernel <= 0 || o.stride < 0 || o.padding < 0 || 2 * o.padding > kernel ||
        o.dilation < 0 || (type == &em_avg_pool2d_type && p.dilation != 1)) {
        em_set_error(EM_ERR_ARG, "%s: bad sizes: kernel %lld, stride %lld, padding %lld, "
                     "dilation %lld (padding must be at most half the kernel; an AvgPool2d has "
                     "no dilation)", fn, (long long)kernel, (long long)o.stride,
                     (long long)o.padding, (long long)o.dilation);
        return NULL;
    }
    return pool2d_new(type, p);
}

em_module *em_max_pool2d_layer(int64_t kernel, em_pool2d_layer_opts o)
{
    return pool2d_layer_new(&em_max_pool2d_type, kernel, o, "em_max_pool2d_layer");
}

em_module *em_avg_pool2d_layer(int64_t kernel, em_pool2d_layer_opts o)
{
    return pool2d_layer_new(&em_avg_pool2d_type, kernel, o, "em_avg_pool2d_layer");
}

/* Bin i of `out` over `in` positions: [floor(i in / out), ceil((i + 1) in / out)), in 128 bits
 * so no size overflows. */
static int64_t bin_start(int64_t i, int64_t in, int64_t out)
{
    return (int64_t)((__int128)i * in / out);
}

static int64_t bin_end(int64_t i, int64_t in, int64_t out)
{
    return (int64_t)(((__int128)(i + 1) * in + out - 1) / out);
}

/* A tensor of shape from values (of dtype) moved to like's device and cast to like's dtype
 * unless index; NULL with an error. */
static em_tensor *values_like(em_shape shape, em_dtype dtype, const void *values,
                              const em_tensor *like)
{
    em_tensor *t = em_from_data(shape, dtype, values);
    if (t && like->device != EM_CPU)
        t = em_to_device(t, like->device);
    return dtype == EM_I64 ? t : em_to_dtype(t, like->dtype);
}

/* Adaptive average pooling of x (N, C, H, W) along dim (2 or 3) to out bins: avg_pool2d when
 * the size divides evenly; else, as bins hold at most `widest` positions, the sum over j <
 * widest of x at each bin's position start + j (where that is still inside the bin), divided by
 * the bins' sizes: `widest` gathers of the output's size, however many bins there are. */
static em_tensor *adaptive_dim(const em_tensor *x, int dim, int64_t out)
{
    int64_t in = x->shape[dim];
    if (in % out == 0) {
        int64_t k = in / out;
        em_pool2d_opts o = {.kernel = {dim == 2 ? k : 1, dim == 3 ? k : 1}};
        return em_avg_pool2d(x, o);
    }
    int64_t widest = 0;
    for (int64_t i = 0; i < out; i++) {
        int64_t w = bin_end(i, in, out) - bin_start(i, in, out);
        widest = w > widest ? w : widest;
    }
    int64_t sizes[1] = {out};
    int64_t n;
    if (!em_checked_elements("em_adaptive_avg_pool2d", sizes, 1, EM_I64, x->device, &n))
        return NULL;
    int64_t *at = malloc((size_t)out * sizeof *at);
    float *inside = malloc((size_t)out * sizeof *inside);
    float *count = malloc((size_t)out * sizeof *count);
    if (!at || !inside || !count) {
        free(at), free(inside), free(count);
        em_set_error(EM_ERR_MEMORY, "em_adaptive_avg_pool2d: out of memory for %lld bins",
                     (long long)out);
        return NULL;
    }
    em_shape along = dim == 2 ? EM_SHAPE(1, 1, out, 1) : EM_SHAPE(1, 1, 1, out);
    for (int64_t i = 0; i < out; i++)
        count[i] = (float)(bin_end(i, in, out) - bin_start(i, in, out));
    em_tensor *sum = NULL;
    for (int64_t j = 0; j < widest; j++) {
        for (int64_t i = 0; i < out; i++) {
            int64_t start = bin_start(i, in, out), end = bin_end(i, in, out);
            inside[i] = start + j < end;
            at[i] = start + j < end ? start + j : start;
        }
        em_tensor *index = values_like(EM_SHAPE(out), EM_I64, at, x);
        em_tensor *term = em_mul(em_index_select(x, dim, index),
                                 values_like(along, EM_F32, inside, x));
        sum = j ? em_add(sum, term) : term;
    }
    em_tensor *y = em_div(sum, values_like(along, EM_F32, count, x));
    free(at), free(inside), free(count);
    return y;
}

em_tensor *em_adaptive_avg_pool2d(const em_tensor *x, int64_t out_h, int64_t out_w)
{
    if (!em_present(x, "em_adaptive_avg_pool2d", "x"))
        return NULL;
    if (x->ndim != 4 || out_h <= 0 || out_w <= 0 || x->shape[2] <= 0 || x->shape[3] <= 0) {
        char buf[64];
        em_set_error(EM_ERR_ARG, "em_adaptive_avg_pool2d: need x (N, C, H, W) with H, W > 0 "
                     "and a positive output size: %s to (%lld, %lld)",
                     em_shape_str(x, buf, sizeof buf),
                     (long long)out_h, (long long)out_w);
        return NULL;
    }
    em_scope_begin();
    em_tensor *y = adaptive_dim(adaptive_dim(x, 2, out_h), 3, out_w);
    em_keep(y);
    em_scope_end();
    return y;
}

typedef struct {
    em_module base;
    em_adaptive_pool_options o;
} adaptive_pool_layer;

static em_tensor *adaptive_forward(em_module *m, const em_tensor *x)
{
    const em_adaptive_pool_options *o = &((adaptive_pool_layer *)m)->o;
    return em_adaptive_avg_pool2d(x, o->out_h, o->out_w);
}

static void adaptive_describe(const em_module *m, char *buf, size_t n)
{
    const em_adaptive_pool_options *o = &((const adaptive_pool_layer *)m)->o;
    snprintf(buf, n, "output_size=(%lld, %lld)", (long long)o->out_h, (long long)o->out_w);
}

/* every input element summed once (in its bin) */
static double adaptive_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)m, (void)y;
    return (double)em_numel(x);
}

static em_module *adaptive_build(const em_module_type *type, const void *options,
                                 em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const em_adaptive_pool_options *o = options;
    return em_adaptive_avg_pool2d_layer(o->out_h, o->out_w);
}

static const em_setting adaptive_settings[] = {
    EM_SIZE_SETTING(em_adaptive_pool_options, out_h, 1, 0),
    EM_SIZE_SETTING(em_adaptive_pool_options, out_w, 1, 0),
};

EM_MODULE_TYPE(em_adaptive_avg_pool2d_type) = {
    .type_name = "AdaptiveAvgPool2d",
    .forward = adaptive_forward,
    .describe = adaptive_describe,
    EM_SETTINGS(adaptive_settings),
    .options_offset = offsetof(adaptive_pool_layer, o),
    .options_size = sizeof(em_adaptive_pool_options),
    .build = adaptive_build,
    .flops = adaptive_flops,
};

em_module *em_adaptive_avg_pool2d_layer(int64_t out_h, int64_t out_w)
{
    if (out_h <= 0 || out_w <= 0) {
        em_set_error(EM_ERR_ARG, "em_adaptive_avg_pool2d_layer: output size must be positive: "
                     "(%lld, %lld)", (long long)out_h, (long long)out_w);
        return NULL;
    }
    adaptive_pool_layer *p =
        (adaptive_pool_layer *)em_module_alloc(sizeof *p, &em_adaptive_avg_pool2d_type);
    if (!p)
        return NULL;
    p->o = (em_adaptive_pool_options){out_h, out_w};
    return &p->base;
}
