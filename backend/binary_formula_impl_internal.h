/* The formula and partial derivatives of each binary op at one float type, included by
 * binary_ops_internal.h once per type: expects EM_BINARY_T (float or double) and
 * EM_BINARY_FN(name), which names the function for that type. The math functions take and give
 * EM_BINARY_T (<tgmath.h> in C, the CUDA overloads under nvcc), so f32 computes in f32. */

/* a op b; a comparison gives 1 where it holds, else 0 (em_binary_holds). maximum and minimum
 * propagate NaN, as PyTorch's. */
EM_FORMULA EM_BINARY_T EM_BINARY_FN(em_binary_value)(em_binary_op op, EM_BINARY_T a,
                                                     EM_BINARY_T b)
{
    typedef EM_BINARY_T T;
    switch (op) {
    case EM_BINARY_ADD: return a + b;
    case EM_BINARY_SUB: return a - b;
    case EM_BINARY_MUL: return a * b;
    case EM_BINARY_DIV: return a / b;
    case EM_BINARY_POW: return pow(a, b);
    case EM_BINARY_MAXIMUM: return a != a || a > b ? a : b;
    case EM_BINARY_MINIMUM: return a != a || a < b ? a : b;
    EM_BINARY_COMPARE_OPS(EM_OP_CASE)
        return em_binary_holds(op, a < b, a == b, a > b) ? (T)1 : (T)0;
    }
    return a; /* not an op: the kernels take none but the list's */
}

/* g times the partial derivative of y = a op b by a (wrt_b false) or by b. PyTorch's rules
 * where it has none: pow's by a is 0 where b = 0, its by b 0 where a = 0 <= b; maximum
 * (minimum) gives g to the larger (smaller) operand and half of it to each on a tie, and all of
 * it to b where a is NaN; the comparisons are piecewise constant. */
EM_FORMULA EM_BINARY_T EM_BINARY_FN(em_binary_grad_value)(em_binary_op op, bool wrt_b,
                                                          EM_BINARY_T g, EM_BINARY_T a,
                                                          EM_BINARY_T b, EM_BINARY_T y)
{
    typedef EM_BINARY_T T;
    const T zero = (T)0, one = (T)1;
    switch (op) {
    case EM_BINARY_ADD: return g;
    case EM_BINARY_SUB: return wrt_b ? -g : g;
    case EM_BINARY_MUL: return wrt_b ? g * a : g * b;
    case EM_BINARY_DIV: return wrt_b ? -(g * y / b) : g / b; /* by b: -y / b */
    case EM_BINARY_POW:
        if (wrt_b) /* y log(a) */
            return g * (a == zero && b >= zero ? zero : y * log(a));
        return g * (b == zero ? zero : b * pow(a, b - one)); /* b a^(b - 1) */
    case EM_BINARY_MAXIMUM:
    case EM_BINARY_MINIMUM: { /* a's share: 1 where a wins, 1/2 on a tie (both comparisons
                                * made, so that a loop over them vectorizes) */
        const T wins = (op == EM_BINARY_MAXIMUM ? a > b : a < b) ? one : zero;
        const T share = wins + (a == b ? (T)0.5 : zero);
        return g * (wrt_b ? one - share : share);
    }
    EM_BINARY_COMPARE_OPS(EM_OP_CASE) return zero;
    }
    return zero; /* not an op: the kernels take none but the list's */
}
