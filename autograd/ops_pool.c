/* 2-D max and average pooling (NCHW). Max pooling saves the argmax of each window for its
 * backward rule; average pooling optionally divides by in-bounds elements only. relu_max_pool2d
 * is max_pool2d(relu(x)) as one op: ReLU commutes with the maximum, so the pooling kernel applies
 * it to the maxima as it writes them (a quarter of the values for 2x2 windows) and leaves no
 * argmax where they are not positive; the full-size ReLU output and its gradient are never made. */
#include "autograd/autograd_internal.h"

/* The node's parameters are the options with the defaults filled in (pool_args). */
static em_pool2d_shape pool_shape(const em_tensor *x /* (N, C, H, W) */, const em_pool2d_opts *p)
{
    em_pool2d_shape s = {
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .kernel = {p->kernel[0], p->kernel[1]}, .stride = {p->stride[0], p->stride[1]},
        .pad = {p->padding[0], p->padding[1]}, .dilation = {p->dilation[0], p->dilation[1]},
        .count_include_pad = !p->exclude_pad,
    };
    s.h_out = em_window_outputs(s.h, s.kernel[0], s.stride[0], s.pad[0], s.dilation[0],
                                p->ceil_mode);
    s.w_out = em_window_outputs(s.w, s.kernel[1], s.stride[1], s.pad[1], s.dilation[1],
                                p->ceil_mode);
    return s;
}

/* Check the arguments and fill in the stride's and dilation's defaults; false with an error
 * naming fn. PyTorch's rules: padding at most half the kernel, at least one output. */
static bool pool_args(const char *fn, const em_tensor *x /* (N, C, H, W) */, em_pool2d_opts *p,
                      bool dilation_allowed)
{
    if (!dilation_allowed && (p->dilation[0] > 1 || p->dilation[1] > 1)) {
        em_set_error(EM_ERR_ARG, "%s: takes no dilation (given %lldx%lld)", fn,
                     (long long)p->dilation[0], (long long)p->dilation[1]);
        return false;
    }
    for (int i = 0; i < 2; i++) {
        p->stride[i] = p->stride[i] ? p->stride[i] : p->kernel[i];
        p->dilation[i] = p->dilation[i] ? p->dilation[i] : 1;
    }
    const int64_t *k = p->kernel, *st = p->stride, *pad = p->padding, *d = p->dilation;
    bool ok = x->ndim == 4 && k[0] > 0 && k[1] > 0 && st[0] > 0 && st[1] > 0 && pad[0] >= 0 &&
              pad[1] >= 0 && pad[0] <= k[0] / 2 && pad[1] <= k[1] / 2 && d[0] > 0 && d[1] > 0;
    for (int i = 0; ok && i < 2; i++) /* a window fits: at least one output */
        ok = em_window_outputs(x->shape[2 + i], k[i], st[i], pad[i], d[i], false) > 0;
    if (!ok) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: kernel %lldx%lld stride %lldx%lld padding %lldx%lld "
                     "dilation %lldx%lld does not fit x %s (padding at most half the kernel)", fn,
                     (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1],
                     (long long)pad[0], (long long)pad[1], (long long)d[0], (long long)d[1],
                     em_shape_str(x, b, sizeof b));
        return false;
    }
    return true;
}

/* saved: argmax, each maximum's tap in its window (em_pool_tap, 2 bytes: dtype has no int16, so
 * held as u8 (N, C, H_out, 2 W_out)); max pooling only; relu_max_pool2d's is -1 where its output
 * is not positive, ReLU's zero gradient */
static em_status pool_backward(em_node *node, const em_tensor *g /* (N, C, H_out, W_out) */,
                               em_tensor **grad_in)
{
    const char *fn = node->op;
    const em_tensor *x = node->inputs[0];
    em_pool2d_shape s = pool_shape(x, node->params);
    const em_backend *be = em_tensor_backend(x, fn);
    const void *entry = !be ? NULL : node->saved[0] ? (const void *)be->max_pool2d_grad
                                                    : (const void *)be->avg_pool2d_grad;
    if (!be || !em_kernel_present(entry, fn, x))
        return em_error_status();
    const em_tensor *gc = em_is_contiguous(g) ? g : em_tensor_contiguous_raw(g);
    em_tensor *gx = em_empty_on(em_shape_of(x), x->dtype, x->device);
    if (!gc || !gx)
        return em_error_status();
    int rc = node->saved[0]
                 ? be->max_pool2d_grad(&s, x->dtype, em_data_ptr(gc),
                                       em_data_ptr(node->saved[0]), em_data_ptr(gx))
                 : be->avg_pool2d_grad(&s, x->dtype, em_data_ptr(gc), em_data_ptr(gx));
    if (em_kernel_status(rc, fn, x) != EM_OK)
        return em_error_status();
    grad_in[0] = gx;
    return EM_OK;
}

/* The pooling op named op; kind says which. */
typedef enum { POOL_AVG, POOL_MAX, POOL_RELU_MAX } pool_kind;

static em_tensor *pool(const char *fn, const char *op, pool_kind kind,
                       const em_tensor *x /* (N, C, H, W) */, em_pool2d_opts o)
{
    const bool max = kind != POOL_AVG;
    if (!em_present(x, fn, "x") || !pool_args(fn, x, &o, max))
        return NULL;
    int64_t window, numel, sweep;
    if (!em_size_mul(o.kernel[0], o.kernel[1], &window) || (max && window > EM_POOL_MAX_TAPS)) {
        em_set_error(EM_ERR_ARG, "%s: a %lldx%lld window has more than %d taps", fn,
                     (long long)o.kernel[0], (long long)o.kernel[1], EM_POOL_MAX_TAPS);
        return NULL;
    }
    em_pool2d_shape s = pool_shape(x, &o);
    s.relu = kind == POOL_RELU_MAX;
    if (!em_checked_elements(fn, (int64_t[]){s.n, s.c, s.h_out, s.w_out}, 4, x->dtype, x->device,
                             &numel))
        return NULL;
    if (!em_size_mul(numel, window, &sweep)) { /* the taps the kernels visit */
        em_set_error(EM_ERR_ARG, "%s: a %lldx%lld window over %lld outputs is more taps than "
                     "int64 counts", fn, (long long)o.kernel[0], (long long)o.kernel[1],
                     (long long)numel);
        return NULL;
    }
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be || !em_kernel_present(max ? (const void *)be->max_pool2d : (const void *)be->avg_pool2d,
                                  fn, x))
        return NULL;
    em_scope_begin();
    em_op_begin(op, x);
    const em_tensor *xc = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    em_shape ys = EM_SHAPE(s.n, s.c, s.h_out, s.w_out);
    em_tensor *y = em_empty_on(ys, x->dtype, x->device);
    const em_shape taps = EM_SHAPE(s.n, s.c, s.h_out, s.w_out * (int64_t)sizeof(em_pool_tap));
    em_tensor *arg = max ? em_empty_on(taps, EM_U8, x->device) : NULL;
    if (!xc || !y || (max && !arg))
        return em_scope_return(NULL);
    int rc = max ? be->max_pool2d(&s, x->dtype, em_data_ptr(xc), em_data_ptr(y), em_data_ptr(arg))
                 : be->avg_pool2d(&s, x->dtype, em_data_ptr(xc), em_data_ptr(y));
    if (em_kernel_status(rc, fn, x) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in = (em_tensor *)x;
    em_node *node;
    if (!em_record(y, op, pool_backward, &in, 1, &o, sizeof o, &node))
        return em_scope_return(NULL);
    if (node)
        node->saved[0] = em_retain(arg);
    return em_scope_return(y);
}

em_tensor *em_max_pool2d(const em_tensor *x /* (N, C, H, W) */, em_pool2d_opts o)
{
    return pool("em_max_pool2d", "max_pool2d", POOL_MAX, x, o);
}

em_tensor *em_relu_max_pool2d(const em_tensor *x /* (N, C, H, W) */, em_pool2d_opts o)
{
    return pool("em_relu_max_pool2d", "relu_max_pool2d", POOL_RELU_MAX, x, o);
}

em_tensor *em_avg_pool2d(const em_tensor *x /* (N, C, H, W) */, em_pool2d_opts o)
{
    return pool("em_avg_pool2d", "avg_pool2d", POOL_AVG, x, o);
}
