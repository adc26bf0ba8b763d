/* Cross-entropy of rows of logits against class indices as one op: -log_softmax(x)[i][t[i]] per
 * row. The backend's kernel computes each row's log_softmax as the softmax kernel does and keeps
 * the row's max and log-sum (N, 2) instead of the (N, C) log-probabilities, so loss and gradient
 * are the values em_log_softmax and a gather give, with two nodes and their tensors fewer. A
 * backend without the kernel runs those ops. Under autocast half logits are widened first, as
 * log_softmax widens them. */
#include "autograd/autograd_internal.h"

/* saved: x (N, C) contiguous, target (N), stats (N, 2) f64 */
static em_status cross_entropy_backward(em_node *node, const em_tensor *g /* (N) */,
                                        em_tensor **grad_in)
{
    const em_tensor *x = node->saved[0], *target = node->saved[1], *stats = node->saved[2];
    const em_backend *be = em_tensor_backend(x, node->op);
    const em_tensor *gc = em_is_contiguous(g) ? g : em_tensor_contiguous_raw(g);
    em_tensor *gx = em_empty_on(em_shape_of(x), x->dtype, x->device);
    if (!be || !gc || !gx)
        return em_error_status();
    int rc = be->cross_entropy_grad(x->dtype, x->shape[0], x->shape[1], em_data_ptr(x),
                                    em_data_ptr(target), em_data_ptr(stats), em_data_ptr(gc),
                                    em_data_ptr(gx));
    if (em_kernel_status(rc, node->op, x) != EM_OK)
        return em_error_status();
    grad_in[0] = gx;
    return EM_OK;
}

static bool check_args(const char *fn, const em_tensor *x, const em_tensor *target)
{
    if (!em_present(x, fn, "x") || !em_present(target, fn, "target"))
        return false;
    if (x->ndim == 2 && em_dtype_is_float(x->dtype) && target->dtype == EM_I64 &&
        target->ndim == 1 && target->shape[0] == x->shape[0] && target->device == x->device)
        return true;
    char bx[64], bt[64];
    em_set_error(EM_ERR_ARG, "%s: expected floating-point x (N, C) and i64 target (N) on one "
                 "device: %s %s on %s, %s %s on %s", fn, em_dtype_name(x->dtype),
                 em_shape_str(x, bx, sizeof bx), em_device_name(x->device),
                 em_dtype_name(target->dtype), em_shape_str(target, bt, sizeof bt),
                 em_device_name(target->device));
    return false;
}

/* The two ops the fused one stands for. */
static em_tensor *composed(const em_tensor *x /* (N, C) */, const em_tensor *target /* (N) */)
{
    int64_t n = x->shape[0];
    em_tensor *picked = em_gather(em_log_softmax(x, 1), 1, em_reshape(target, EM_SHAPE(n, 1)));
    return em_neg(em_reshape(picked, EM_SHAPE(n)));
}

em_tensor *em_cross_entropy_rows(const em_tensor *x /* (N, C) */,
                                 const em_tensor *target /* (N) */)
{
    const char *fn = "em_cross_entropy_rows";
    if (!check_args(fn, x, target))
        return NULL;
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be)
        return NULL;
    em_scope_begin();
    if (em_autocast_needed(EM_AUTOCAST_F32, &x, 1)) { /* in f32 under autocast, as log_softmax */
        const em_tensor *c = x;
        return em_scope_return(em_autocast_inputs(EM_AUTOCAST_F32, &c, 1)
                                   ? em_cross_entropy_rows(c, target) : NULL);
    }
    if (!be->cross_entropy || (x->dtype != EM_F32 && x->dtype != EM_F64))
        return em_scope_return(composed(x, target));
    em_op_begin("cross_entropy_rows", x);
    const em_tensor *xc = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    const em_tensor *tc = em_is_contiguous(target) ? target : em_tensor_contiguous_raw(target);
    em_tensor *loss = em_empty_on(EM_SHAPE(x->shape[0]), x->dtype, x->device);
    em_tensor *stats = em_empty_on(EM_SHAPE(x->shape[0], 2), EM_F64, x->device);
    if (!xc || !tc || !loss || !stats)
        return em_scope_return(NULL);
    int rc = be->cross_entropy(x->dtype, x->shape[0], x->shape[1], em_data_ptr(xc),
                               em_data_ptr(tc), em_data_ptr(loss), em_data_ptr(stats));
    if (em_kernel_status(rc, fn, x) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in = (em_tensor *)x;
    em_node *node;
    if (!em_record(loss, "cross_entropy_rows", cross_entropy_backward, &in, 1, NULL, 0, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain((em_tensor *)xc);
        node->saved[1] = em_retain((em_tensor *)tc);
        node->saved[2] = em_retain(stats);
    }
    return em_scope_return(loss);
}
