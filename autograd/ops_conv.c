/* 2-D convolution (NCHW, groups, stride, padding, dilation) on the backend's conv kernels, with
 * the input and weight gradients from conv2d_grad_input / conv2d_grad_weight, or both from
 * conv2d_grads. */
#include "autograd/autocast_copies_internal.h"
#include "autograd/autograd_internal.h"

/* The node's parameters are the options with PyTorch's defaults filled in (conv_params). */
static em_conv2d_opts conv_params(em_conv2d_opts o)
{
    for (int i = 0; i < 2; i++) {
        o.stride[i] = o.stride[i] ? o.stride[i] : 1;
        o.dilation[i] = o.dilation[i] ? o.dilation[i] : 1;
    }
    o.groups = o.groups ? o.groups : 1;
    for (int i = 0; i < 2; i++)
        o.padding[i] = o.padding[i] == EM_PADDING_VALID ? 0 : o.padding[i];
    return o;
}

static em_conv2d_shape conv_shape(const em_tensor *x /* (N, C_in, H, W) */,
                                  const em_tensor *w /* (C_out, C_in/groups, KH, KW) */,
                                  const em_conv2d_opts *p)
{
    em_conv2d_shape s = {
        .n = x->shape[0], .c_in = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .c_out = w->shape[0], .kh = w->shape[2], .kw = w->shape[3],
        .stride = {p->stride[0], p->stride[1]}, .pad = {p->padding[0], p->padding[1]},
        .dilation = {p->dilation[0], p->dilation[1]}, .groups = p->groups,
    };
    s.h_out = em_window_outputs(s.h, s.kh, s.stride[0], s.pad[0], s.dilation[0], false);
    s.w_out = em_window_outputs(s.w, s.kw, s.stride[1], s.pad[1], s.dilation[1], false);
    return s;
}

/* The gradients asked for, in dt: gx from conv2d_grad_input, gw (+ gb) from conv2d_grad_weight,
 * or both from conv2d_grads where the backend has it for this call. */
static em_status conv2d_grads(const em_backend *be, const em_conv2d_shape *s, em_dtype dt,
                              const em_tensor *gc, const em_tensor *xl, const em_tensor *wl,
                              em_tensor *gx, em_tensor *gw, em_tensor *gb)
{
    const char *fn = "em_conv2d";
    void *gb_data = gb ? em_data_ptr(gb) : NULL;
    int rc = EM_KERNEL_UNSUPPORTED;
    if (gx && gw && be->conv2d_grads)
        rc = be->conv2d_grads(s, dt, em_data_ptr(gc), em_data_ptr(xl), em_data_ptr(wl),
                              em_data_ptr(gx), em_data_ptr(gw), gb_data);
    if (rc != EM_KERNEL_UNSUPPORTED)
        return em_kernel_status(rc, fn, gc);
    if (gx && (!em_kernel_present((const void *)be->conv2d_grad_input, fn, gc) ||
               em_kernel_status(be->conv2d_grad_input(s, dt, em_data_ptr(gc), em_data_ptr(wl),
                                                      em_data_ptr(gx)),
                                fn, gc) != EM_OK))
        return em_error_status();
    if (gw && (!em_kernel_present((const void *)be->conv2d_grad_weight, fn, gc) ||
               em_kernel_status(be->conv2d_grad_weight(s, dt, em_data_ptr(gc), em_data_ptr(xl),
                                                       em_data_ptr(gw), gb_data),
                                fn, gc) != EM_OK))
        return em_error_status();
    return EM_OK;
}

/* saved: x, w (contiguous, in the convolution's dtype: under autocast the low copies it ran
 * on). The kernels run in g's dtype; a gradient is cast to its input's own dtype. */
static em_status conv2d_backward(em_node *node, const em_tensor *g /* (N, C_out, H_out, W_out) */,
                                 em_tensor **grad_in)
{
    const char *fn = "em_conv2d";
    const em_tensor *x = node->saved[0], *w = node->saved[1];
    em_dtype dt = g->dtype;
    em_conv2d_shape s = conv_shape(x, w, node->params);
    const em_backend *be = em_tensor_backend(x, fn);
    const em_tensor *gc = em_is_contiguous(g) ? g : em_tensor_contiguous_raw(g);
    if (!be || !gc)
        return em_error_status();
    const bool want_gx = node->inputs[0], want_gw = node->inputs[1] || node->inputs[2];
    const em_tensor *wl = want_gx ? em_as_dtype_raw(w, dt) : NULL;
    const em_tensor *xl = want_gw ? em_as_dtype_raw(x, dt) : NULL;
    em_tensor *gx = want_gx ? em_empty_on(em_shape_of(x), dt, x->device) : NULL;
    em_tensor *gw = want_gw ? em_empty_on(em_shape_of(w), dt, w->device) : NULL;
    em_tensor *gb = node->inputs[2] ? em_empty_on(EM_SHAPE(s.c_out), dt, w->device) : NULL;
    if ((want_gx && (!wl || !gx)) || (want_gw && (!xl || !gw)) || (node->inputs[2] && !gb) ||
        conv2d_grads(be, &s, dt, gc, xl, wl, gx, gw, gb) != EM_OK)
        return em_error_status();
    if (want_gx && !(grad_in[0] = (em_tensor *)em_as_dtype_raw(gx, node->inputs[0]->dtype)))
        return em_error_status();
    if (node->inputs[1] &&
        !(grad_in[1] = (em_tensor *)em_as_dtype_raw(gw, node->inputs[1]->dtype)))
        return em_error_status();
    if (gb && !(grad_in[2] = (em_tensor *)em_as_dtype_raw(gb, node->inputs[2]->dtype)))
        return em_error_status();
    return EM_OK;
}

/* The convolution in dtype dt; under autocast x, w and b may be f32 leaves, cast here. */
static em_tensor *conv2d(const em_tensor *x /* (N, C_in, H, W) */,
                         const em_tensor *w /* (C_out, C_in/groups, KH, KW) */,
                         const em_tensor *b /* (C_out) or NULL */, em_conv2d_opts o, em_dtype dt,
                         bool autocast)
{
    const char *fn = "em_conv2d";
    em_conv2d_opts p = conv_params(o);
    char sx[128], sw[128], sb[128];
    int64_t c_in_grouped;
    if (!em_check_kernel_size(fn, w))
        return NULL;
    bool ok = x->ndim == 4 && w->ndim == 4 && p.stride[0] > 0 && p.stride[1] > 0 &&
              p.padding[0] >= 0 && p.padding[1] >= 0 && p.dilation[0] > 0 && p.dilation[1] > 0 &&
              p.groups > 0 && x->shape[1] % p.groups == 0 && w->shape[0] % p.groups == 0 &&
              em_size_mul(w->shape[1], p.groups, &c_in_grouped) && c_in_grouped == x->shape[1] &&
              (!b || (b->ndim == 1 && b->shape[0] == w->shape[0]));
    em_conv2d_shape s = ok ? conv_shape(x, w, &p) : (em_conv2d_shape){0};
    ok = ok && s.h_out > 0 && s.w_out > 0;
    if (!ok) {
        em_set_error(EM_ERR_ARG, "%s: bad shapes x %s, w %s, b %s (stride %lldx%lld, padding "
                     "%lldx%lld, dilation %lldx%lld, groups %lld)", fn,
                     em_shape_str(x, sx, sizeof sx), em_shape_str(w, sw, sizeof sw),
                     b ? em_shape_str(b, sb, sizeof sb) : "none", (long long)p.stride[0],
                     (long long)p.stride[1], (long long)p.padding[0], (long long)p.padding[1],
                     (long long)p.dilation[0], (long long)p.dilation[1], (long long)p.groups);
        return NULL;
    }
    const em_tensor *t[3] = {x, w, b};
    bool dtypes_ok = true; /* one dtype, or under autocast dt and f32 */
    for (int i = 0; i < 3; i++)
        dtypes_ok = dtypes_ok &&
                    (!t[i] || t[i]->dtype == dt || (autocast && t[i]->dtype == EM_F32));
    if (!dtypes_ok || w->device != x->device || (b && b->device != x->device)) {
        em_set_error(EM_ERR_ARG, "%s: x, w and b must share dtype and device: %s, %s%s%s", fn,
                     em_dtype_name(x->dtype), em_dtype_name(w->dtype), b ? ", " : "",
                     b ? em_dtype_name(b->dtype) : "");
        return NULL;
    }
    const em_backend *be = em_tensor_backend(x, fn);
    int64_t numel;
    if (!be || !em_kernel_present((const void *)be->conv2d, fn, x) ||
        !em_checked_elements(fn, (int64_t[]){s.n, s.c_out, s.h_out, s.w_out}, 4, dt, x->device,
                             &numel))
        return NULL;
    em_scope_begin();
    em_op_begin("conv2d", x);
    const em_tensor *xc = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    const em_tensor *wc = em_is_contiguous(w) ? w : em_tensor_contiguous_raw(w);
    const em_tensor *bc = !b || em_is_contiguous(b) ? b : em_tensor_contiguous_raw(b);
    const em_tensor *xl = xc ? em_autocast_weight(xc, dt) : NULL;
    const em_tensor *wl = wc ? em_autocast_weight(wc, dt) : NULL;
    const em_tensor *bl = bc ? em_autocast_weight(bc, dt) : NULL;
    em_tensor *y = em_empty_on(EM_SHAPE(s.n, s.c_out, s.h_out, s.w_out), dt, x->device);
    if (!xl || !wl || (b && !bl) || !y)
        return em_scope_return(NULL);
    int rc = be->conv2d(&s, dt, em_data_ptr(xl), em_data_ptr(wl), bl ? em_data_ptr(bl) : NULL,
                        em_data_ptr(y));
    if (em_kernel_status(rc, fn, x) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in[3] = {(em_tensor *)x, (em_tensor *)w, (em_tensor *)b};
    em_node *node;
    if (!em_record(y, "conv2d", conv2d_backward, in, 3, &p, sizeof p, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain((em_tensor *)xl);
        node->saved[1] = em_retain((em_tensor *)wl);
    }
    return em_scope_return(y);
}

/* padding = EM_PADDING_SAME as PyTorch: dilation (k - 1) in all per dim, total / 2 before. Where
 * the total is odd the convolution pads its after-side amount on both sides and the first
 * output row / column, the extra one before, is dropped: the same values, no padded copy of x. */
static em_tensor *conv2d_same(const em_tensor *x /* (N, C_in, H, W) */,
                              const em_tensor *w /* (C_out, C_in/groups, KH, KW) */,
                              const em_tensor *b /* (C_out) or NULL */, em_conv2d_opts o)
{
    if (w->ndim != 4 || (o.stride[0] > 1 || o.stride[1] > 1) ||
        (o.padding[1] != 0 && o.padding[1] != EM_PADDING_SAME)) {
        char sw[128];
        em_set_error(EM_ERR_ARG, "em_conv2d: padding EM_PADDING_SAME needs stride 1 (given "
                     "%lldx%lld), padding[1] 0 or EM_PADDING_SAME (given %lld) and w (C_out, "
                     "C_in/groups, KH, KW) (given %s)", (long long)o.stride[0],
                     (long long)o.stride[1], (long long)o.padding[1],
                     em_shape_str(w, sw, sizeof sw));
        return NULL;
    }
    if (!em_check_kernel_size("em_conv2d", w))
        return NULL;
    int64_t drop[2];
    for (int i = 0; i < 2; i++) {
        int64_t total;
        if (__builtin_mul_overflow(o.dilation[i] ? o.dilation[i] : 1, w->shape[2 + i] - 1,
                                   &total) || total == INT64_MAX) {
            char sw[128];
            em_set_error(EM_ERR_ARG, "em_conv2d: padding EM_PADDING_SAME of w %s with dilation "
                         "%lld overflows a size", em_shape_str(w, sw, sizeof sw),
                         (long long)o.dilation[i]);
            return NULL;
        }
        o.padding[i] = (total + 1) / 2;
        drop[i] = total % 2;
    }
    em_scope_begin();
    em_tensor *y = em_conv2d(x, w, b, o); // (N, C_out, H + drop[0], W + drop[1])
    for (int i = 0; i < 2 && y; i++)
        if (drop[i])
            y = em_narrow(y, 2 + i, 1, y->shape[2 + i] - 1);
    return em_scope_return(y); // (N, C_out, H, W)
}

em_tensor *em_conv2d(const em_tensor *x /* (N, C_in, H, W) */,
                     const em_tensor *w /* (C_out, C_in/groups, KH, KW) */,
                     const em_tensor *b /* (C_out) or NULL */, em_conv2d_opts o)
{
    if (!em_present(x, "em_conv2d", "x") || !em_present(w, "em_conv2d", "w"))
        return NULL;
    if (o.padding[0] == EM_PADDING_SAME)
        return conv2d_same(x, w, b, o);
    if (em_autocast_needed(EM_AUTOCAST_LOW, (const em_tensor *[]){x, w, b}, 3)) {
        em_scope_begin();
        const em_tensor *t[3] = {x, w, b};
        bool ok = em_autocast_layer_inputs(t, 3);
        return em_scope_return(ok ? conv2d(t[0], t[1], t[2], o, em_autocast_dtype(), true)
                                  : NULL);
    }
    return conv2d(x, w, b, o, x->dtype, false);
}

/* ---- conv1d: conv2d over a height of 1 (views in and out, so its gradients are conv2d's) ---- */

em_tensor *em_conv1d(const em_tensor *x /* (N, C_in, L) */,
                     const em_tensor *w /* (C_out, C_in/groups, K) */,
                     const em_tensor *b /* (C_out) or NULL */, em_conv1d_opts o)
{
    if (!em_present(x, "em_conv1d", "x") || !em_present(w, "em_conv1d", "w"))
        return NULL;
    if (x->ndim != 3 || w->ndim != 3) {
        char sx[128], sw[128];
        em_set_error(EM_ERR_ARG, "em_conv1d: expected x (N, C_in, L) and w (C_out, C_in/groups, "
                     "K): %s, %s", em_shape_str(x, sx, sizeof sx), em_shape_str(w, sw, sizeof sw));
        return NULL;
    }
    if (w->shape[2] == 0) {
        char sw[128];
        em_set_error(EM_ERR_ARG, "em_conv1d: kernel size 0 of w %s: must be at least 1",
                     em_shape_str(w, sw, sizeof sw));
        return NULL;
    }
    if (o.padding == EM_PADDING_SAME && o.stride > 1) {
        em_set_error(EM_ERR_ARG, "em_conv1d: padding EM_PADDING_SAME needs stride 1 (given %lld)",
                     (long long)o.stride);
        return NULL;
    }
    int64_t pad_h = o.padding == EM_PADDING_SAME ? EM_PADDING_SAME : 0; /* height 1: none */
    em_conv2d_opts o2 = {.stride = {1, o.stride}, .padding = {pad_h, o.padding},
                         .dilation = {1, o.dilation}, .groups = o.groups};
    em_scope_begin();
    em_tensor *y = em_conv2d(em_unsqueeze(x, 2), em_unsqueeze(w, 2), b, o2);
    return em_scope_return(y ? em_squeeze(y, 2) : NULL); // (N, C_out, L_out)
}
