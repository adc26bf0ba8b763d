/* Layer normalisation of rows as one op: the backend's kernel normalises each row of (R, C) and
 * keeps its mean and rstd (R, 2), from which backward gives x, weight and bias their gradients in
 * one call. Where the backend has no such kernel, or for f16/bf16, the op is composed of mean,
 * var and elementwise ops (under autocast a half input is cast up to f32 first, as PyTorch's
 * autocast runs layer_norm in f32). */
#include "autograd/autograd_internal.h"

/* saved: x (R, C) contiguous, weight (C) contiguous or NULL, stats (R, 2) f64 */
static em_status layer_norm_backward(em_node *node, const em_tensor *g /* (R, C) */,
                                     em_tensor **grad_in)
{
    const em_tensor *x = node->saved[0], *w = node->saved[1], *stats = node->saved[2];
    const em_backend *be = em_tensor_backend(x, node->op);
    const em_tensor *gc = em_is_contiguous(g) ? g : em_tensor_contiguous_raw(g);
    em_shape vec = EM_SHAPE(x->shape[1]);
    em_tensor *gx = node->inputs[0] ? em_empty_on(em_shape_of(x), x->dtype, x->device) : NULL;
    em_tensor *gw = node->inputs[1] ? em_empty_on(vec, x->dtype, x->device) : NULL;
    em_tensor *gb = node->inputs[2] ? em_empty_on(vec, x->dtype, x->device) : NULL;
    em_tensor *scratch = gx ? NULL : em_empty_on(em_shape_of(x), x->dtype, x->device);
    if (!be || !gc || (!gx && !scratch) || (node->inputs[1] && !gw) || (node->inputs[2] && !gb))
        return em_error_status();
    int rc = be->layer_norm_grad(x->dtype, x->shape[0], x->shape[1], em_data_ptr(x),
                                 w ? em_data_ptr(w) : NULL, em_data_ptr(stats), em_data_ptr(gc),
                                 em_data_ptr(gx ? gx : scratch), gw ? em_data_ptr(gw) : NULL,
                                 gb ? em_data_ptr(gb) : NULL);
    if (em_kernel_status(rc, node->op, x) != EM_OK)
        return em_error_status();
    grad_in[0] = gx;
    grad_in[1] = gw;
    grad_in[2] = gb;
    return EM_OK;
}

/* The ops the fused one stands for. */
static em_tensor *composed(const em_tensor *x /* (R, C) */, const em_tensor *weight,
                           const em_tensor *bias, double eps)
{
    int last = -1;
    em_tensor *mean = em_mean(x, &last, 1, true), *var = em_var(x, &last, 1, 0, true);
    em_tensor *y = em_mul(em_sub(x, mean), em_rsqrt(em_add_scalar(var, eps)));
    if (weight)
        y = em_mul(y, weight);
    return bias ? em_add(y, bias) : y;
}

static bool check_args(const char *fn, const em_tensor *x, const em_tensor *w,
                       const em_tensor *b)
{
    if (!em_present(x, fn, "x"))
        return false;
    char bx[64], bv[64];
    if (x->ndim != 2 || !em_dtype_is_float(x->dtype) || x->shape[1] == 0) {
        em_set_error(EM_ERR_ARG, "%s: expected floating-point rows x (R, C), C > 0: %s %s", fn,
                     em_dtype_name(x->dtype), em_shape_str(x, bx, sizeof bx));
        return false;
    }
    const em_tensor *vecs[2] = {w, b};
    for (int i = 0; i < 2; i++)
        if (vecs[i] && (vecs[i]->ndim != 1 || vecs[i]->shape[0] != x->shape[1] ||
                        vecs[i]->device != x->device)) {
            em_set_error(EM_ERR_ARG, "%s: %s %s on %s must be (%lld) on %s like x's rows", fn,
                         i ? "bias" : "weight", em_shape_str(vecs[i], bv, sizeof bv),
                         em_device_name(vecs[i]->device), (long long)x->shape[1],
                         em_device_name(x->device));
            return false;
        }
    return true;
}

/* Whether the backend's kernel serves these operands (else the composed ops run). */
static bool fused(const em_backend *be, const em_tensor *x, const em_tensor *w,
                  const em_tensor *b)
{
    return be->layer_norm && (x->dtype == EM_F32 || x->dtype == EM_F64) &&
           (!w || w->dtype == x->dtype) && (!b || b->dtype == x->dtype);
}

/* y (R, C) and, when recording, the node, from contiguous operands. */
static em_tensor *run_fused(const em_backend *be, const em_tensor *x, const em_tensor *w,
                            const em_tensor *b, double eps, em_tensor *const *inputs)
{
    const em_tensor *xc = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    const em_tensor *wc = !w || em_is_contiguous(w) ? w : em_tensor_contiguous_raw(w);
    const em_tensor *bc = !b || em_is_contiguous(b) ? b : em_tensor_contiguous_raw(b);
    em_tensor *y = em_empty_on(em_shape_of(x), x->dtype, x->device);
    em_tensor *stats = em_empty_on(EM_SHAPE(x->shape[0], 2), EM_F64, x->device);
    if (!xc || (w && !wc) || (b && !bc) || !y || !stats)
        return NULL;
    int rc = be->layer_norm(x->dtype, x->shape[0], x->shape[1], em_data_ptr(xc),
                            wc ? em_data_ptr(wc) : NULL, bc ? em_data_ptr(bc) : NULL, eps,
                            em_data_ptr(y), em_data_ptr(stats));
    if (em_kernel_status(rc, "em_layer_norm_rows", x) != EM_OK)
        return NULL;
    em_node *node;
    if (!em_record(y, "layer_norm", layer_norm_backward, inputs, 3, NULL, 0, &node))
        return NULL;
    if (node) {
        node->saved[0] = em_retain((em_tensor *)xc);
        node->saved[1] = wc ? em_retain((em_tensor *)wc) : NULL;
        node->saved[2] = em_retain(stats);
    }
    return y;
}

em_tensor *em_layer_norm_rows(const em_tensor *x, const em_tensor *weight, const em_tensor *bias,
                              double eps)
{
    const char *fn = "em_layer_norm_rows";
    if (!check_args(fn, x, weight, bias))
        return NULL;
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be)
        return NULL;
    em_scope_begin();
    const em_tensor *ops[3] = {x, weight, bias};
    if (em_autocast_needed(EM_AUTOCAST_F32, ops, 3) && !em_autocast_inputs(EM_AUTOCAST_F32, ops, 3))
        return em_scope_return(NULL);
    if (!fused(be, ops[0], ops[1], ops[2]))
        return em_scope_return(composed(ops[0], ops[1], ops[2], eps));
    em_op_begin("layer_norm", ops[0]);
    em_tensor *inputs[3] = {(em_tensor *)ops[0], (em_tensor *)ops[1], (em_tensor *)ops[2]};
    return em_scope_return(run_fused(be, ops[0], ops[1], ops[2], eps, inputs));
}
