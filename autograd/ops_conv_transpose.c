/* 2-D transposed convolution (NCHW, groups, stride, padding, output_padding, dilation): the
 * input gradient of the conv2d that maps its output back to its input, so it runs on the
 * backend's conv kernels: forward conv2d_grad_input, x's gradient conv2d, w's conv2d_grad_weight
 * (CPU and CUDA both have them); the bias is added by em_add. Under autocast it runs low. */
#include "autograd/autograd_internal.h"

/* The options with PyTorch's defaults filled in: the node's parameters. */
static em_conv_transpose2d_opts transpose_params(em_conv_transpose2d_opts o)
{
    for (int i = 0; i < 2; i++) {
        o.stride[i] = o.stride[i] ? o.stride[i] : 1;
        o.dilation[i] = o.dilation[i] ? o.dilation[i] : 1;
    }
    o.groups = o.groups ? o.groups : 1;
    return o;
}

/* Output size along one dim: (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1,
 * or -1 (below 1 or beyond int64) */
static int64_t transposed_size(const em_conv_transpose2d_opts *p, int i, int64_t in, int64_t k)
{
    return em_transposed_outputs(in, k, p->stride[i], p->padding[i], p->dilation[i],
                                 p->output_padding[i]);
}

/* The conv2d whose input gradient this is: its input is y (N, C_out, H_out, W_out), its weight
 * w (C_in, C_out/groups, KH, KW) read as (conv C_out, conv C_in/groups, KH, KW), its output x. */
static em_conv2d_shape transpose_shape(const em_tensor *x /* (N, C_in, H, W) */,
                                       const em_tensor *w /* (C_in, C_out/groups, KH, KW) */,
                                       const em_conv_transpose2d_opts *p)
{
    return (em_conv2d_shape){
        .n = x->shape[0], .c_in = w->shape[1] * p->groups, .c_out = x->shape[1],
        .h = transposed_size(p, 0, x->shape[2], w->shape[2]),
        .w = transposed_size(p, 1, x->shape[3], w->shape[3]),
        .kh = w->shape[2], .kw = w->shape[3], .h_out = x->shape[2], .w_out = x->shape[3],
        .stride = {p->stride[0], p->stride[1]}, .pad = {p->padding[0], p->padding[1]},
        .dilation = {p->dilation[0], p->dilation[1]}, .groups = p->groups,
    };
}

/* saved: x, w (contiguous). gx = conv2d(g, w) (N, C_in, H, W); gw = conv2d_grad_weight with x as
 * the conv's output gradient and g as its input (C_in, C_out/groups, KH, KW). */
static em_status conv_transpose2d_backward(em_node *node,
                                           const em_tensor *g /* (N, C_out, H_out, W_out) */,
                                           em_tensor **grad_in)
{
    const char *fn = "em_conv_transpose2d";
    const em_tensor *x = node->saved[0], *w = node->saved[1];
    em_conv2d_shape s = transpose_shape(x, w, node->params);
    const em_backend *be = em_tensor_backend(x, fn);
    const em_tensor *gc = em_is_contiguous(g) ? g : em_tensor_contiguous_raw(g);
    if (!be || !gc)
        return em_error_status();
    if (node->inputs[0]) {
        em_tensor *gx = em_empty_on(em_shape_of(x), x->dtype, x->device);
        if (!gx || !em_kernel_present((const void *)be->conv2d, fn, x) ||
            em_kernel_status(be->conv2d(&s, x->dtype, em_data_ptr(gc), em_data_ptr(w), NULL,
                                        em_data_ptr(gx)), fn, x) != EM_OK)
            return em_error_status();
        grad_in[0] = gx;
    }
    if (node->inputs[1]) {
        em_tensor *gw = em_empty_on(em_shape_of(w), w->dtype, w->device);
        if (!gw || !em_kernel_present((const void *)be->conv2d_grad_weight, fn, x) ||
            em_kernel_status(be->conv2d_grad_weight(&s, x->dtype, em_data_ptr(x),
                                                    em_data_ptr(gc), em_data_ptr(gw), NULL),
                             fn, x) != EM_OK)
            return em_error_status();
        grad_in[1] = gw;
    }
    return EM_OK;
}

/* PyTorch's argument rules; false with an error naming what was wrong. */
static bool transpose_args(const em_tensor *x, const em_tensor *w, const em_tensor *b,
                           const em_conv_transpose2d_opts *p)
{
    const char *fn = "em_conv_transpose2d";
    char sx[128], sw[128], sb[128];
    int64_t c_out;
    if (!em_check_kernel_size(fn, w))
        return false;
    bool ok = x->ndim == 4 && w->ndim == 4 && p->groups > 0 && x->shape[1] == w->shape[0] &&
              w->shape[0] % p->groups == 0 && em_size_mul(w->shape[1], p->groups, &c_out) &&
              (!b || (b->ndim == 1 && b->shape[0] == c_out));
    for (int i = 0; i < 2; i++)
        ok = ok && p->stride[i] > 0 && p->padding[i] >= 0 && p->dilation[i] > 0 &&
             p->output_padding[i] >= 0 &&
             (p->output_padding[i] < p->stride[i] || p->output_padding[i] < p->dilation[i]) &&
             transposed_size(p, i, x->shape[2 + i], w->shape[2 + i]) > 0;
    if (!ok)
        em_set_error(EM_ERR_ARG, "%s: bad shapes or options: x %s, w %s (C_in, C_out/groups, KH, "
                     "KW), b %s, stride %lldx%lld, padding %lldx%lld, output_padding %lldx%lld "
                     "(below stride or dilation), dilation %lldx%lld, groups %lld", fn,
                     em_shape_str(x, sx, sizeof sx), em_shape_str(w, sw, sizeof sw),
                     b ? em_shape_str(b, sb, sizeof sb) : "none", (long long)p->stride[0],
                     (long long)p->stride[1], (long long)p->padding[0], (long long)p->padding[1],
                     (long long)p->output_padding[0], (long long)p->output_padding[1],
                     (long long)p->dilation[0], (long long)p->dilation[1], (long long)p->groups);
    else if (w->dtype != x->dtype || w->device != x->device ||
             (b && (b->dtype != x->dtype || b->device != x->device))) {
        em_set_error(EM_ERR_ARG, "%s: x, w and b must share dtype and device: %s, %s%s%s", fn,
                     em_dtype_name(x->dtype), em_dtype_name(w->dtype), b ? ", " : "",
                     b ? em_dtype_name(b->dtype) : "");
        ok = false;
    }
    return ok;
}

static em_tensor *conv_transpose2d(const em_tensor *x /* (N, C_in, H, W) */,
                                   const em_tensor *w /* (C_in, C_out/groups, KH, KW) */,
                                   const em_tensor *b /* (C_out) or NULL */,
                                   em_conv_transpose2d_opts p)
{
    const char *fn = "em_conv_transpose2d";
    if (!transpose_args(x, w, b, &p))
        return NULL;
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be || !em_kernel_present((const void *)be->conv2d_grad_input, fn, x))
        return NULL;
    em_conv2d_shape s = transpose_shape(x, w, &p);
    int64_t numel;
    if (!em_checked_elements(fn, (int64_t[]){s.n, s.c_in, s.h, s.w}, 4, x->dtype, x->device,
                             &numel))
        return NULL;
    em_scope_begin();
    em_op_begin("conv_transpose2d", x);
    const em_tensor *xc = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    const em_tensor *wc = em_is_contiguous(w) ? w : em_tensor_contiguous_raw(w);
    em_tensor *y = em_empty_on(EM_SHAPE(s.n, s.c_in, s.h, s.w), x->dtype, x->device);
    if (!xc || !wc || !y ||
        em_kernel_status(be->conv2d_grad_input(&s, x->dtype, em_data_ptr(xc), em_data_ptr(wc),
                                               em_data_ptr(y)), fn, x) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)w};
    em_node *node;
    if (!em_record(y, "conv_transpose2d", conv_transpose2d_backward, in, 2, &p, sizeof p, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain((em_tensor *)xc);
        node->saved[1] = em_retain((em_tensor *)wc);
    }
    if (b)
        y = em_add(y, em_reshape(b, EM_SHAPE(1, s.c_in, 1, 1)));
    return em_scope_return(y); // (N, C_out, H_out, W_out)
}

/* Under autocast x, w and b are cast to the low dtype first (em_to_dtype: an f32 leaf gets its
 * gradient in f32), as PyTorch's autocast does for conv_transpose2d. */
em_tensor *em_conv_transpose2d(const em_tensor *x /* (N, C_in, H, W) */,
                               const em_tensor *w /* (C_in, C_out/groups, KH, KW) */,
                               const em_tensor *b /* (C_out) or NULL */,
                               em_conv_transpose2d_opts o)
{
    const char *fn = "em_conv_transpose2d";
    if (!em_present(x, fn, "x") || !em_present(w, fn, "w"))
        return NULL;
    em_conv_transpose2d_opts p = transpose_params(o);
    const em_tensor *t[3] = {x, w, b};
    if (!em_autocast_needed(EM_AUTOCAST_LOW, t, 3))
        return conv_transpose2d(x, w, b, p);
    em_scope_begin();
    bool ok = em_autocast_inputs(EM_AUTOCAST_LOW, t, 3);
    return em_scope_return(ok ? conv_transpose2d(t[0], t[1], t[2], p) : NULL);
}
