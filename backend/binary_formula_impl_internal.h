/* The formula of each binary op at one float type, included by
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
