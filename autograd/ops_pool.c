/* 2-D max and average pooling (NCHW). Max pooling saves the argmax of each window for its
 * backward rule; average pooling optionally divides by in-bounds elements only. */
#include "autograd/autograd_internal.h"

/* ints: kernel[2], stride[2], pad[2], count_include_pad */
static em_pool2d_shape pool_shape(const em_tensor *x, const int64_t *p)
{
    em_pool2d_shape s = {
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .kernel = {p[0], p[1]}, .stride = {p[2], p[3]}, .pad = {p[4], p[5]},
        .count_include_pad = p[6] != 0,
    };
    s.h_out = (s.h + 2 * s.pad[0] - s.kernel[0]) / s.stride[0] + 1;
    s.w_out = (s.w + 2 * s.pad[1] - s.kernel[1]) / s.stride[1] + 1;
    return s;
}

/* Check the arguments and fill the parameters p[7]; false with an error naming fn. */
static bool pool_args(const char *fn, const em_tensor *x, em_pool2d_opts o, int64_t *p)
{
    p[0] = o.kernel[0];
    p[1] = o.kernel[1];
    p[2] = o.stride[0] ? o.stride[0] : o.kernel[0];
    p[3] = o.stride[1] ? o.stride[1] : o.kernel[1];
    p[4] = o.padding[0];
    p[5] = o.padding[1];
    p[6] = !o.exclude_pad;
    bool ok = x->ndim == 4 && p[0] > 0 && p[1] > 0 && p[2] > 0 && p[3] > 0 && p[4] >= 0 &&
              p[5] >= 0 && 2 * p[4] <= p[0] && 2 * p[5] <= p[1];
    ok = ok && x->shape[2] + 2 * p[4] >= p[0] && x->shape[3] + 2 * p[5] >= p[1];
    if (!ok) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: kernel %lldx%lld stride %lldx%lld padding %lldx%lld does not "
                     "fit x %s", fn, (long long)p[0], (long long)p[1], (long long)p[2],
                     (long long)p[3], (long long)p[4], (long long)p[5],
                     em_shape_str(x, b, sizeof b));
        return false;
    }
    return true;
}

/* saved: argmax (max pooling only) */
static em_status pool_backward(em_node *node, const em_tensor *g, em_tensor **grad_in)
{
    const char *fn = node->op;
    const em_tensor *x = node->inputs[0];
    em_pool2d_shape s = pool_shape(x, node->ints);
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

static em_tensor *pool(const char *fn, const char *op, bool max, const em_tensor *x,
                       em_pool2d_opts o)
{
    int64_t p[7];
    if (!x || !pool_args(fn, x, o, p))
        return NULL;
    em_pool2d_shape s = pool_shape(x, p);
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be || !em_kernel_present(max ? (const void *)be->max_pool2d : (const void *)be->avg_pool2d,
                                  fn, x))
        return NULL;
    em_scope_begin();
    const em_tensor *xc = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    em_shape ys = EM_SHAPE(s.n, s.c, s.h_out, s.w_out);
    em_tensor *y = em_empty_on(ys, x->dtype, x->device);
    em_tensor *arg = max ? em_empty_on(ys, EM_I64, x->device) : NULL;
    if (!xc || !y || (max && !arg))
        return em_scope_return(NULL);
    int rc = max ? be->max_pool2d(&s, x->dtype, em_data_ptr(xc), em_data_ptr(y), em_data_ptr(arg))
                 : be->avg_pool2d(&s, x->dtype, em_data_ptr(xc), em_data_ptr(y));
    if (em_kernel_status(rc, fn, x) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in = (em_tensor *)x;
    em_node *node;
    if (!em_record(y, op, pool_backward, &in, 1, &node))
        return em_scope_return(NULL);
    if (node) {
        for (int i = 0; i < 7; i++)
            node->ints[i] = p[i];
        node->saved[0] = em_retain(arg);
    }
    return em_scope_return(y);
}

em_tensor *em_max_pool2d(const em_tensor *x, em_pool2d_opts o)
{
    return pool("em_max_pool2d", "max_pool2d", true, x, o);
}

em_tensor *em_avg_pool2d(const em_tensor *x, em_pool2d_opts o)
{
    return pool("em_avg_pool2d", "avg_pool2d", false, x, o);
}
