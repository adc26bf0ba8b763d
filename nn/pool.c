/* Pooling layers: max and average over k x k windows, and adaptive average pooling with
 * PyTorch's bins (start = floor(i H / out), end = ceil((i + 1) H / out)). */
#include <stdio.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    bool max;
    em_pool2d_opts opts;
} pool2d_layer;

static em_tensor *pool2d_forward(em_module *m, const em_tensor *x)
{
    pool2d_layer *p = (pool2d_layer *)m;
    return p->max ? em_max_pool2d(x, p->opts) : em_avg_pool2d(x, p->opts);
}

static void pool2d_describe(const em_module *m, char *buf, size_t n)
{
    const pool2d_layer *p = (const pool2d_layer *)m;
    int k = snprintf(buf, n, "kernel_size=%lld, stride=%lld, padding=%lld",
                     (long long)p->opts.kernel[0], (long long)p->opts.stride[0],
                     (long long)p->opts.padding[0]);
    if (p->max && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", dilation=%lld", (long long)p->opts.dilation[0]);
}

const em_module_type em_max_pool2d_type = {"MaxPool2d", pool2d_forward, NULL,
                                           pool2d_describe};
const em_module_type em_avg_pool2d_type = {"AvgPool2d", pool2d_forward, NULL,
                                           pool2d_describe};

bool em_pool2d_layer_config(const em_module *m, em_pool2d_opts *o)
{
    if (!m || (m->type != &em_max_pool2d_type && m->type != &em_avg_pool2d_type))
        return false;
    *o = ((const pool2d_layer *)m)->opts;
    return true;
}

static em_module *pool2d_layer_new(bool max, int64_t kernel, int64_t stride, int64_t padding,
                                   int64_t dilation, const char *fn)
{
    if (kernel <= 0 || stride < 0 || padding < 0 || 2 * padding > kernel || dilation <= 0) {
        em_set_error(EM_ERR_ARG, "%s: bad sizes: kernel %lld, stride %lld, padding %lld, "
                     "dilation %lld (padding must be at most half the kernel)", fn,
                     (long long)kernel, (long long)stride, (long long)padding,
                     (long long)dilation);
        return NULL;
    }
    pool2d_layer *p = (pool2d_layer *)em_module_alloc(
        sizeof *p, max ? &em_max_pool2d_type : &em_avg_pool2d_type);
    if (!p)
        return NULL;
    p->max = max;
    stride = stride ? stride : kernel;
    p->opts = (em_pool2d_opts){.kernel = {kernel, kernel}, .stride = {stride, stride},
                               .padding = {padding, padding}, .dilation = {dilation, dilation}};
    return &p->base;
}

em_module *em_max_pool2d_layer(int64_t kernel, int64_t stride, int64_t padding)
{
    return pool2d_layer_new(true, kernel, stride, padding, 1, "em_max_pool2d_layer");
}

em_module *em_max_pool2d_layer_dilated(int64_t kernel, int64_t stride, int64_t padding,
                                       int64_t dilation)
{
    return pool2d_layer_new(true, kernel, stride, padding, dilation,
                            "em_max_pool2d_layer_dilated");
}

em_module *em_avg_pool2d_layer(int64_t kernel, int64_t stride, int64_t padding)
{
    return pool2d_layer_new(false, kernel, stride, padding, 1, "em_avg_pool2d_layer");
}

/* Adaptive average pooling of x (N, C, H, W) along dim (2 or 3) to out bins: avg_pool2d when
 * the size divides evenly, else the mean of each bin's window, joined along dim. */
static em_tensor *adaptive_dim(const em_tensor *x, int dim, int64_t out)
{
    int64_t in = x->shape[dim];
    if (in % out == 0) {
        int64_t k = in / out;
        em_pool2d_opts o = {.kernel = {dim == 2 ? k : 1, dim == 3 ? k : 1}};
        return em_avg_pool2d(x, o);
    }
    em_tensor *bins[out];
    for (int64_t i = 0; i < out; i++) {
        int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
        bins[i] = em_mean(em_narrow(x, dim, start, end - start), &dim, 1, true);
    }
    return em_cat(bins, (int)out, dim);
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
    int64_t out_h, out_w;
} adaptive_pool_layer;

static em_tensor *adaptive_forward(em_module *m, const em_tensor *x)
{
    adaptive_pool_layer *p = (adaptive_pool_layer *)m;
    return em_adaptive_avg_pool2d(x, p->out_h, p->out_w);
}

static void adaptive_describe(const em_module *m, char *buf, size_t n)
{
    const adaptive_pool_layer *p = (const adaptive_pool_layer *)m;
    snprintf(buf, n, "output_size=(%lld, %lld)", (long long)p->out_h, (long long)p->out_w);
}

const em_module_type em_adaptive_avg_pool2d_type = {"AdaptiveAvgPool2d", adaptive_forward,
                                                    NULL, adaptive_describe};

bool em_adaptive_pool_layer_size(const em_module *m, int64_t *h, int64_t *w)
{
    if (!m || m->type != &em_adaptive_avg_pool2d_type)
        return false;
    *h = ((const adaptive_pool_layer *)m)->out_h;
    *w = ((const adaptive_pool_layer *)m)->out_w;
    return true;
}

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
    p->out_h = out_h;
    p->out_w = out_w;
    return &p->base;
}

