/* Elementwise ops: unary functions (rule: the backend's unary_grad), broadcasting binary
 * arithmetic (rules summed back to each operand's shape), where, and the comparisons. */
#include <math.h>

#include "autograd/autograd_internal.h"

/* ---- unary: t (*) -> y of t's shape; saved x, then a detached alias of y ---- */

typedef struct {
    em_unary_op op;
    em_unary_params p; /* the op's scalars */
} unary_params;

static em_status unary_backward(em_node *node, const em_tensor *g /* x's shape */,
                                em_tensor **grad_in)
{
    const unary_params *p = node->params;
    em_unary_op op = p->op;
    const em_tensor *x = node->saved[0], *y = node->saved[1];
    em_shape s = em_shape_of(x);
    if (op == EM_UNARY_SIGN || op == EM_UNARY_FLOOR || op == EM_UNARY_CEIL ||
        op == EM_UNARY_ROUND) {
        grad_in[0] = em_raw_full("em_backward", &s, x->dtype, x->device, 0.0);
        return grad_in[0] ? EM_OK : em_error_status();
    }
    const em_backend *be = em_tensor_backend(x, node->op);
    if (!be || !em_kernel_present((const void *)be->unary_grad, node->op, x))
        return em_error_status();
    em_tensor *gx = em_empty_on(s, x->dtype, x->device);
    if (!gx)
        return em_error_status();
    em_arr agx = em_tensor_arr(gx), agy = em_tensor_arr(g), ax = em_tensor_arr(x),
           ay = em_tensor_arr(y);
    em_status st = em_kernel_status(
        be->unary_grad(op, &p->p, &agx, &agy, &ax, &ay), node->op, x);
    grad_in[0] = st == EM_OK ? gx : NULL;
    return st;
}

/* The unary ops autocast runs in f32 (PyTorch's list): exp, softplus and the log, power and
 * reciprocal families, whose results leave a half's range or precision. */
static bool f32_under_autocast(em_unary_op op)
{
    return op == EM_UNARY_EXP || op == EM_UNARY_LOG || op == EM_UNARY_LOG1P ||
           op == EM_UNARY_POW_SCALAR || op == EM_UNARY_RSQRT || op == EM_UNARY_RECIPROCAL ||
           op == EM_UNARY_SOFTPLUS;
}

static em_tensor *unary(const char *fn, const char *op_name, em_unary_op op, em_unary_params p,
                        const em_tensor *t /* (*) */)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    if (f32_under_autocast(op) && em_autocast_needed(EM_AUTOCAST_F32, &t, 1)) {
        em_scope_begin();
        const em_tensor *c = t;
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, &c, 1);
        return em_scope_return(ok ? unary(fn, op_name, op, p, c) : NULL);
    }
    em_scope_begin();
    em_op_begin(op_name, t);
    em_tensor *in = (em_tensor *)t;
    em_tensor *y = em_raw_unary(fn, op, p, t);
    unary_params params = {.op = op, .p = p};
    em_node *node;
    if (!y || !em_record(y, op_name, unary_backward, &in, 1, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain(in);
        node->saved[1] = em_retain(em_alias_of(y));
        if (!node->saved[1])
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

/* A unary op without parameters. */
static em_tensor *plain(const char *fn, const char *op_name, em_unary_op op,
                        const em_tensor *t /* (*) */)
{
    return unary(fn, op_name, op, (em_unary_params){0}, t);
}

em_tensor *em_add_scalar(const em_tensor *t, double s)
{
    return unary("em_add_scalar", "add_scalar", EM_UNARY_ADD_SCALAR,
                 (em_unary_params){.scalar = s}, t);
}

em_tensor *em_mul_scalar(const em_tensor *t, double s)
{
    return unary("em_mul_scalar", "mul_scalar", EM_UNARY_MUL_SCALAR,
                 (em_unary_params){.scalar = s}, t);
}

em_tensor *em_pow_scalar(const em_tensor *t, double p)
{
    return unary("em_pow_scalar", "pow_scalar", EM_UNARY_POW_SCALAR,
                 (em_unary_params){.exponent = p}, t);
}

em_tensor *em_neg(const em_tensor *t) { return plain("em_neg", "neg", EM_UNARY_NEG, t); }
em_tensor *em_abs(const em_tensor *t) { return plain("em_abs", "abs", EM_UNARY_ABS, t); }
em_tensor *em_sign(const em_tensor *t) { return plain("em_sign", "sign", EM_UNARY_SIGN, t); }
em_tensor *em_exp(const em_tensor *t) { return plain("em_exp", "exp", EM_UNARY_EXP, t); }
em_tensor *em_log(const em_tensor *t) { return plain("em_log", "log", EM_UNARY_LOG, t); }
em_tensor *em_sqrt(const em_tensor *t) { return plain("em_sqrt", "sqrt", EM_UNARY_SQRT, t); }
em_tensor *em_sin(const em_tensor *t) { return plain("em_sin", "sin", EM_UNARY_SIN, t); }
em_tensor *em_cos(const em_tensor *t) { return plain("em_cos", "cos", EM_UNARY_COS, t); }
em_tensor *em_tanh(const em_tensor *t) { return plain("em_tanh", "tanh", EM_UNARY_TANH, t); }
em_tensor *em_relu(const em_tensor *t) { return plain("em_relu", "relu", EM_UNARY_RELU, t); }
em_tensor *em_silu(const em_tensor *t) { return plain("em_silu", "silu", EM_UNARY_SILU, t); }

em_tensor *em_log1p(const em_tensor *t)
{
    return plain("em_log1p", "log1p", EM_UNARY_LOG1P, t);
}

em_tensor *em_rsqrt(const em_tensor *t)
{
    return plain("em_rsqrt", "rsqrt", EM_UNARY_RSQRT, t);
}

em_tensor *em_square(const em_tensor *t)
{
    return plain("em_square", "square", EM_UNARY_SQUARE, t);
}

em_tensor *em_reciprocal(const em_tensor *t)
{
    return plain("em_reciprocal", "reciprocal", EM_UNARY_RECIPROCAL, t);
}

em_tensor *em_sigmoid(const em_tensor *t)
{
    return plain("em_sigmoid", "sigmoid", EM_UNARY_SIGMOID, t);
}

em_tensor *em_softsign(const em_tensor *t)
{
    return plain("em_softsign", "softsign", EM_UNARY_SOFTSIGN, t);
}

em_tensor *em_mish(const em_tensor *t) { return plain("em_mish", "mish", EM_UNARY_MISH, t); }
em_tensor *em_selu(const em_tensor *t) { return plain("em_selu", "selu", EM_UNARY_SELU, t); }

em_tensor *em_hardswish(const em_tensor *t)
{
    return plain("em_hardswish", "hardswish", EM_UNARY_HARDSWISH, t);
}

em_tensor *em_logsigmoid(const em_tensor *t)
{
    return plain("em_logsigmoid", "logsigmoid", EM_UNARY_LOGSIGMOID, t);
}

em_tensor *em_softplus(const em_tensor *t, double beta, double threshold)
{
    if (t && (!isfinite(beta) || beta == 0 || isnan(threshold))) {
        em_set_error(EM_ERR_ARG, "em_softplus: beta must be finite and non-zero and threshold a "
                     "number, not beta %g, threshold %g", beta, threshold);
        return NULL;
    }
    return unary("em_softplus", "softplus", EM_UNARY_SOFTPLUS,
                 (em_unary_params){.beta = beta, .threshold = threshold}, t);
}

em_tensor *em_hardtanh(const em_tensor *t, double min_val, double max_val)
{
    if (t && !(min_val < max_val)) {
        em_set_error(EM_ERR_ARG, "em_hardtanh: min_val %g must be less than max_val %g", min_val,
                     max_val);
        return NULL;
    }
    return unary("em_hardtanh", "hardtanh", EM_UNARY_HARDTANH,
                 (em_unary_params){.min = min_val, .max = max_val}, t);
}

em_tensor *em_elu(const em_tensor *t, double alpha)
{
    if (t && !isfinite(alpha)) {
        em_set_error(EM_ERR_ARG, "em_elu: alpha must be finite, not %g", alpha);
        return NULL;
    }
    return unary("em_elu", "elu", EM_UNARY_ELU, (em_unary_params){.alpha = alpha}, t);
}

em_tensor *em_leaky_relu(const em_tensor *t, double negative_slope)
{
    return unary("em_leaky_relu", "leaky_relu", EM_UNARY_LEAKY_RELU,
                 (em_unary_params){.negative_slope = negative_slope}, t);
}

em_tensor *em_gelu(const em_tensor *t, bool tanh_approximation)
{
    return plain("em_gelu", "gelu", tanh_approximation ? EM_UNARY_GELU_TANH : EM_UNARY_GELU, t);
}

em_tensor *em_floor(const em_tensor *t)
{
    return plain("em_floor", "floor", EM_UNARY_FLOOR, t);
}

em_tensor *em_ceil(const em_tensor *t) { return plain("em_ceil", "ceil", EM_UNARY_CEIL, t); }

em_tensor *em_round(const em_tensor *t)
{
    return plain("em_round", "round", EM_UNARY_ROUND, t);
}

em_tensor *em_clamp(const em_tensor *t, double min, double max)
{
    if (t && min > max) {
        em_set_error(EM_ERR_ARG, "em_clamp: min %g is greater than max %g", min, max);
        return NULL;
    }
    return unary("em_clamp", "clamp", EM_UNARY_CLAMP,
                 (em_unary_params){.min = min, .max = max}, t);
}

/* ---- clamp with tensor bounds: t, min, max (either bound NULL) broadcast to y's shape ---- */

static em_status clamp_tensor_backward(em_node *node, const em_tensor *g /* y's shape */,
                                       em_tensor **grad_in)
{
    const em_tensor *x = node->saved[0], *lo = node->saved[1], *hi = node->saved[2];
    em_tensor *zero = em_raw_full("em_backward", &(em_shape){.ndim = 0}, g->dtype, g->device, 0);
    em_tensor *half = em_mul_scalar(g, 0.5);
    /* PyTorch 2.x's rule. With lo < hi (or one bound): x takes g strictly inside, and where it
     * equals a bound shares g half and half with that bound; a bound takes g where x lies beyond
     * it. With lo == hi: x takes g where it equals both, else the bound x lies beyond. With
     * lo > hi (y is hi): hi takes g. */
    em_tensor *gi[3] = {NULL, NULL, NULL};
    if (node->inputs[0]) {
        em_tensor *at_lo = lo ? em_where(em_eq(x, lo), half, zero) : zero;
        em_tensor *at_hi = hi ? em_where(em_eq(x, hi), half, zero) : zero;
        em_tensor *below_hi = hi ? em_where(em_lt(x, hi), g, at_hi) : (em_tensor *)g;
        gi[0] = lo ? em_where(em_gt(x, lo), below_hi, at_lo) : below_hi;
        if (lo && hi)
            gi[0] = em_where(em_lt(lo, hi), gi[0],
                             em_where(em_eq(lo, hi), em_where(em_eq(x, lo), g, zero), zero));
    }
    if (lo && node->inputs[1]) {
        em_tensor *beyond = em_where(em_lt(x, lo), g, zero);
        gi[1] = em_where(em_lt(x, lo), g, em_where(em_eq(x, lo), half, zero));
        if (hi)
            gi[1] = em_where(em_lt(lo, hi), gi[1], em_where(em_eq(lo, hi), beyond, zero));
    }
    if (hi && node->inputs[2]) {
        em_tensor *beyond = em_where(em_gt(x, hi), g, zero);
        gi[2] = em_where(em_gt(x, hi), g, em_where(em_eq(x, hi), half, zero));
        if (lo)
            gi[2] = em_where(em_lt(lo, hi), gi[2], em_where(em_eq(lo, hi), beyond, g));
    }
    for (int i = 0; i < 3; i++) {
        em_shape s = node->inputs[i] ? em_shape_of(node->inputs[i]) : (em_shape){0};
        if (node->inputs[i] && !(grad_in[i] = em_grad_sum_to(gi[i], &s)))
            return em_error_status();
    }
    return EM_OK;
}

/* bound in t's dtype (a cast the gradient flows back through), on t's device; NULL passes */
static bool clamp_bound(const em_tensor *t, const em_tensor **bound, const char *name)
{
    if (!*bound)
        return true;
    if ((*bound)->device != t->device) {
        em_set_error(EM_ERR_ARG, "em_clamp_tensor: %s is on %s, t on %s", name,
                     em_device_name((*bound)->device), em_device_name(t->device));
        return false;
    }
    if ((*bound)->dtype != t->dtype)
        *bound = em_to_dtype(*bound, t->dtype);
    return *bound != NULL;
}

em_tensor *em_clamp_tensor(const em_tensor *t, const em_tensor *min, const em_tensor *max)
{
    const char *fn = "em_clamp_tensor";
    if (!em_present(t, fn, "t"))
        return NULL;
    if (!min && !max) {
        em_set_error(EM_ERR_ARG, "em_clamp_tensor: at least one of min and max must be given");
        return NULL;
    }
    em_scope_begin();
    if (!clamp_bound(t, &min, "min") || !clamp_bound(t, &max, "max"))
        return em_scope_return(NULL);
    em_op_begin("clamp_tensor", t);
    em_tensor *y = (em_tensor *)t;
    if (min)
        y = em_raw_binary(fn, EM_BINARY_MAXIMUM, y, min);
    if (y && max)
        y = em_raw_binary(fn, EM_BINARY_MINIMUM, y, max);
    em_tensor *in[3] = {(em_tensor *)t, (em_tensor *)min, (em_tensor *)max};
    em_node *node;
    if (!y || !em_record(y, "clamp_tensor", clamp_tensor_backward, in, 3, NULL, 0, &node))
        return em_scope_return(NULL);
    for (int i = 0; node && i < 3; i++)
        node->saved[i] = in[i] ? em_retain(in[i]) : NULL;
    return em_scope_return(y);
}

/* ---- binary: a and b broadcast to y's shape (comparisons give bool) ---- */

/* Bring a and b to one device and dtype. A 0-d CPU operand that needs no gradient (em_scalar's)
 * moves to the other's device; otherwise the devices must match. Their dtypes meet as every
 * op's several inputs do (em_unify_dtypes). Called inside the op's scope (the copy and the cast
 * are temporaries of it). */
static bool unify(const char *fn, const em_tensor **a /* (*) */, const em_tensor **b /* (*) */)
{
    if ((*a)->device != (*b)->device) {
        if ((*a)->ndim == 0 && (*a)->device == EM_CPU && !(*a)->requires_grad)
            *a = em_to_device(*a, (*b)->device);
        else if ((*b)->ndim == 0 && (*b)->device == EM_CPU && !(*b)->requires_grad)
            *b = em_to_device(*b, (*a)->device);
        else {
            em_set_error(EM_ERR_ARG, "%s: tensors on different devices: %s and %s", fn,
                         em_device_name((*a)->device), em_device_name((*b)->device));
            return false;
        }
        if (!*a || !*b)
            return false;
    }
    const em_tensor *ab[2] = {*a, *b};
    if (!em_unify_dtypes(fn, (const char *[]){"", ""}, ab, 2))
        return false;
    *a = ab[0];
    *b = ab[1];
    return true;
}

typedef struct {
    em_binary_op op;
} binary_params;

/* g (y's shape) times the partial derivative of y = a op b by a or b (wrt_b), from the
 * backend's binary_grad; g itself where that derivative is 1. */
static em_tensor *binary_partial(const em_node *node, em_binary_op op, bool wrt_b,
                                 const em_tensor *g)
{
    if (em_binary_grad_is_g(op, wrt_b))
        return (em_tensor *)g;
    const em_tensor *a = node->saved[0], *b = node->saved[1], *y = node->saved[2];
    const em_backend *be = em_tensor_backend(g, node->op);
    if (!be || !em_kernel_present((const void *)be->binary_grad, node->op, g))
        return NULL;
    em_shape s = em_shape_of(g);
    em_tensor *gx = em_empty_on(s, g->dtype, g->device);
    if (!gx)
        return NULL;
    em_arr o = em_tensor_arr(gx), ag = em_tensor_arr(g), aa = em_tensor_arr_broadcast(a, &s),
           ab = em_tensor_arr_broadcast(b, &s), ay = em_tensor_arr(y);
    if (em_kernel_status(be->binary_grad(op, wrt_b, &o, &ag, &aa, &ab, &ay), node->op, g) != EM_OK)
        return NULL;
    return gx;
}

/* saved: a, b, a detached alias of y; each input's gradient summed back to its shape */
static em_status binary_backward(em_node *node, const em_tensor *g /* y's shape */,
                                 em_tensor **grad_in)
{
    const em_binary_op op = ((const binary_params *)node->params)->op;
    for (int k = 0; k < 2; k++) {
        if (!node->inputs[k])
            continue;
        em_shape s = em_shape_of(node->saved[k]);
        if (!(grad_in[k] = em_grad_sum_to(binary_partial(node, op, k == 1, g), &s)))
            return em_error_status();
    }
    return EM_OK;
}

static em_tensor *binary(const char *fn, const char *op_name, em_binary_op op,
                         const em_tensor *a /* (*) */, const em_tensor *b /* broadcasts with a */)
{
    if (!em_present(a, fn, "a") || !em_present(b, fn, "b"))
        return NULL;
    em_scope_begin();
    if (!unify(fn, &a, &b))
        return em_scope_return(NULL);
    const bool compare = em_binary_is_compare(op); /* records no node */
    if (!compare)
        em_op_begin(op_name, a);
    em_tensor *y = em_raw_binary(fn, op, a, b);
    if (!y || compare)
        return em_scope_return(y);
    em_tensor *in[2] = {(em_tensor *)a, (em_tensor *)b};
    binary_params params = {.op = op};
    em_node *node;
    if (!em_record(y, op_name, binary_backward, in, 2, &params, sizeof params, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain(in[0]);
        node->saved[1] = em_retain(in[1]);
        node->saved[2] = em_retain(em_alias_of(y));
        if (!node->saved[2])
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

em_tensor *em_add(const em_tensor *a, const em_tensor *b)
{
    return binary("em_add", "add", EM_BINARY_ADD, a, b);
}

em_tensor *em_sub(const em_tensor *a, const em_tensor *b)
{
    return binary("em_sub", "sub", EM_BINARY_SUB, a, b);
}

em_tensor *em_mul(const em_tensor *a, const em_tensor *b)
{
    return binary("em_mul", "mul", EM_BINARY_MUL, a, b);
}

em_tensor *em_div(const em_tensor *a, const em_tensor *b)
{
    return binary("em_div", "div", EM_BINARY_DIV, a, b);
}

em_tensor *em_pow(const em_tensor *a, const em_tensor *b)
{
    if (a && b && em_autocast_needed(EM_AUTOCAST_F32, (const em_tensor *[]){a, b}, 2)) {
        em_scope_begin();
        const em_tensor *t[2] = {a, b};
        bool ok = em_autocast_inputs(EM_AUTOCAST_F32, t, 2);
        return em_scope_return(ok ? em_pow(t[0], t[1]) : NULL);
    }
    return binary("em_pow", "pow", EM_BINARY_POW, a, b);
}

em_tensor *em_maximum(const em_tensor *a, const em_tensor *b)
{
    return binary("em_maximum", "maximum", EM_BINARY_MAXIMUM, a, b);
}

em_tensor *em_minimum(const em_tensor *a, const em_tensor *b)
{
    return binary("em_minimum", "minimum", EM_BINARY_MINIMUM, a, b);
}

em_tensor *em_eq(const em_tensor *a, const em_tensor *b)
{
    return binary("em_eq", "eq", EM_BINARY_EQ, a, b);
}

em_tensor *em_ne(const em_tensor *a, const em_tensor *b)
{
    return binary("em_ne", "ne", EM_BINARY_NE, a, b);
}

em_tensor *em_lt(const em_tensor *a, const em_tensor *b)
{
    return binary("em_lt", "lt", EM_BINARY_LT, a, b);
}

em_tensor *em_le(const em_tensor *a, const em_tensor *b)
{
    return binary("em_le", "le", EM_BINARY_LE, a, b);
}

em_tensor *em_gt(const em_tensor *a, const em_tensor *b)
{
    return binary("em_gt", "gt", EM_BINARY_GT, a, b);
}

em_tensor *em_ge(const em_tensor *a, const em_tensor *b)
{
    return binary("em_ge", "ge", EM_BINARY_GE, a, b);
}

/* ---- where: saved cond; g goes to a where cond holds, to b elsewhere ---- */

static em_status where_backward(em_node *node, const em_tensor *g /* y's shape */,
                                em_tensor **grad_in)
{
    const em_tensor *cond = node->saved[0];
    em_tensor *zero = em_raw_full("em_backward", &(em_shape){.ndim = 0}, g->dtype, g->device, 0);
    for (int i = 0; i < 2; i++) {
        if (!node->inputs[i + 1])
            continue;
        em_shape s = em_shape_of(node->inputs[i + 1]);
        em_tensor *gi = i == 0 ? em_where(cond, g, zero) : em_where(cond, zero, g);
        if (!(grad_in[i + 1] = em_grad_sum_to(gi, &s)))
            return em_error_status();
    }
    return EM_OK;
}

em_tensor *em_where(const em_tensor *cond /* bool, broadcasts with a and b */,
                    const em_tensor *a /* (*) */, const em_tensor *b /* broadcasts with a */)
{
    if (!em_present(cond, "em_where", "cond") || !em_present(a, "em_where", "a")
        || !em_present(b, "em_where", "b"))
        return NULL;
    const char *fn = "em_where";
    if (cond->dtype != EM_BOOL) {
        em_set_error(EM_ERR_ARG, "em_where: cond must be bool, not %s", em_dtype_name(cond->dtype));
        return NULL;
    }
    em_scope_begin();
    if (!unify(fn, &a, &b))
        return em_scope_return(NULL);
    em_op_begin("where", a);
    em_shape sc = em_shape_of(cond), sa = em_shape_of(a), sb = em_shape_of(b), s1, s;
    if (!em_broadcast_shapes(&sa, &sb, &s1) || !em_broadcast_shapes(&s1, &sc, &s)) {
        char bc[128], ba[128], bb[128];
        em_set_error(EM_ERR_ARG, "em_where: shapes do not broadcast: %s, %s and %s",
                     em_shape_str(cond, bc, sizeof bc), em_shape_str(a, ba, sizeof ba),
                     em_shape_str(b, bb, sizeof bb));
        return em_scope_return(NULL);
    }
    const em_backend *be = em_tensor_backend(a, fn);
    if (!be || !em_kernel_present((const void *)be->where, fn, a))
        return em_scope_return(NULL);
    em_tensor *y = em_empty_on(s, a->dtype, a->device);
    if (!y)
        return em_scope_return(NULL);
    em_arr o = em_tensor_arr(y), ac = em_tensor_arr_broadcast(cond, &s),
           aa = em_tensor_arr_broadcast(a, &s), ab = em_tensor_arr_broadcast(b, &s);
    if (em_kernel_status(be->where(&o, &ac, &aa, &ab), fn, a) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in[3] = {NULL, (em_tensor *)a, (em_tensor *)b};
    em_node *node;
    if (!em_record(y, "where", where_backward, in, 3, NULL, 0, &node))
        return em_scope_return(NULL);
    if (node)
        node->saved[0] = em_retain((em_tensor *)cond);
    return em_scope_return(y);
}
