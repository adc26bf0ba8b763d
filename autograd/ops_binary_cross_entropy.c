/* Binary cross entropy on probabilities, elementwise, as PyTorch's binary_cross_entropy: each log
 * clamped at -100 so a probability of 0 or 1 gives a finite loss, and PyTorch's gradient
 * g (x - t) / max(x (1 - x), eps), finite there too (the composition of log and clamp would
 * give 0 * inf = NaN). em_binary_cross_entropy (nn/) weights and reduces it. */
#include <math.h>

#include "autograd/autograd_internal.h"

/* PyTorch's epsilon is the float 1e-12 (9.999999960041972e-13 as a double), also in f64 */
#define BCE_EPSILON ((double)1e-12f)

/* saved: x, t */
static em_status bce_backward(em_node *node, const em_tensor *g /* x's shape */,
                              em_tensor **grad_in)
{
    const em_tensor *x = node->saved[0], *t = node->saved[1];
    if (node->inputs[0]) {
        em_tensor *var = em_mul(x, em_add_scalar(em_neg(x), 1.0)); /* x (1 - x) */
        grad_in[0] = em_div(em_mul(g, em_sub(x, t)), em_clamp(var, BCE_EPSILON, INFINITY));
        if (!grad_in[0])
            return em_error_status();
    }
    if (node->inputs[1]) { /* -logit(x) g, as PyTorch's */
        grad_in[1] = em_mul(g, em_sub(em_log1p(em_neg(x)), em_log(x)));
        if (!grad_in[1])
            return em_error_status();
    }
    return EM_OK;
}

/* max(log v, -100) for v in [0, 1] (of_one_minus: max(log1p(-v), -100)), without making the
 * -inf that anomaly mode would report: the log never sees 0. Grad mode off. */
static em_tensor *log_at_least_minus_100(const em_tensor *v, bool of_one_minus)
{
    em_shape s0 = {.ndim = 0};
    const char *fn = "em_binary_cross_entropy";
    em_tensor *edge = em_raw_full(fn, &s0, v->dtype, v->device, of_one_minus ? 1 : 0);
    em_tensor *away = em_raw_full(fn, &s0, v->dtype, v->device, of_one_minus ? 0 : 1);
    em_tensor *lowest = em_raw_full(fn, &s0, v->dtype, v->device, -100);
    em_tensor *inside = em_ne(v, edge), *safe = em_where(inside, v, away);
    em_tensor *logged = of_one_minus ? em_log1p(em_neg(safe)) : em_log(safe);
    return em_where(inside, em_clamp(logged, -100, INFINITY), lowest);
}

em_tensor *em_binary_cross_entropy_elementwise(const em_tensor *input, const em_tensor *target)
{
    const char *fn = "em_binary_cross_entropy";
    if (!em_present(input, fn, "input") || !em_present(target, fn, "target"))
        return NULL;
    if (!em_same_shape(input, target) || !em_dtype_is_float(input->dtype) ||
        !em_dtype_is_float(target->dtype) || input->device != target->device) {
        char bi[128], bt[128];
        em_set_error(EM_ERR_ARG, "%s: input %s %s and target %s %s must be floating point of one "
                     "shape on one device", fn, em_dtype_name(input->dtype),
                     em_shape_str(input, bi, sizeof bi), em_dtype_name(target->dtype),
                     em_shape_str(target, bt, sizeof bt));
        return NULL;
    }
    const em_tensor *io[2] = {input, target};
    if (em_autocast_needed(EM_AUTOCAST_F32, io, 2)) { /* f32 under autocast */
        em_scope_begin();
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, io, 2);
        return em_scope_return(ok ? em_binary_cross_entropy_elementwise(io[0], io[1]) : NULL);
    }
    em_scope_begin();
    const em_tensor *x = input, *t = target->dtype == input->dtype
                                         ? target : em_to_dtype(target, input->dtype);
    em_op_begin("binary_cross_entropy", x);
    bool grad = em_set_grad_enabled(false); /* -(t log x + (1 - t) log(1 - x)), logs >= -100 */
    em_tensor *log_x = log_at_least_minus_100(x, false);
    em_tensor *log_1mx = log_at_least_minus_100(x, true);
    em_tensor *y = em_neg(em_add(em_mul(t, log_x),
                                 em_mul(em_add_scalar(em_neg(t), 1.0), log_1mx)));
    em_set_grad_enabled(grad);
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)t};
    em_node *node;
    if (!y || !em_record(y, "binary_cross_entropy", bce_backward, in, 2, NULL, 0, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain(in[0]);
        node->saved[1] = em_retain(in[1]);
    }
    return em_scope_return(y);
}
