/* The binary elementwise ops of the kernel table: their list, and each op's formula and partial
 * derivatives, written once (binary_formula_impl_internal.h) for the CPU kernels, the CUDA
 * kernels (__host__ __device__ under nvcc) and the tests' references (op_formula_internal.h). */
#ifndef EMBER_BINARY_OPS_INTERNAL_H
#define EMBER_BINARY_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/op_formula_internal.h"

/* Every binary op in enum order, as X(op): first those whose result takes the operands' dtype,
 * then the comparisons, whose result is bool. The kernels expand a loop per op from the list. */
#define EM_BINARY_ARITH_OPS(X)                                                                   \
    X(EM_BINARY_ADD) X(EM_BINARY_SUB) X(EM_BINARY_MUL) X(EM_BINARY_DIV) X(EM_BINARY_POW)         \
    X(EM_BINARY_MAXIMUM) X(EM_BINARY_MINIMUM)
#define EM_BINARY_COMPARE_OPS(X)                                                                 \
    X(EM_BINARY_EQ) X(EM_BINARY_NE) X(EM_BINARY_LT) X(EM_BINARY_LE) X(EM_BINARY_GT)             \
    X(EM_BINARY_GE)
#define EM_BINARY_OPS(X) EM_BINARY_ARITH_OPS(X) EM_BINARY_COMPARE_OPS(X)

typedef enum { EM_BINARY_OPS(EM_OP_ENUM_ENTRY) } em_binary_op;
enum { EM_BINARY_COUNT = 0 EM_BINARY_OPS(EM_OP_COUNT_ONE) };

EM_FORMULA bool em_binary_is_compare(em_binary_op op)
{
    switch (op) {
    EM_BINARY_ARITH_OPS(EM_OP_CASE) return false;
    EM_BINARY_COMPARE_OPS(EM_OP_CASE) return true;
    }
    return false; /* not an op */
}

/* Whether comparison op holds between two values that compare as lt (a < b), eq and gt; all
 * three false (a NaN) makes every comparison false but NE. */
EM_FORMULA bool em_binary_holds(em_binary_op op, bool lt, bool eq, bool gt)
{
    switch (op) {
    case EM_BINARY_EQ: return eq;
    case EM_BINARY_NE: return !eq;
    case EM_BINARY_LT: return lt;
    case EM_BINARY_LE: return lt || eq;
    case EM_BINARY_GT: return gt;
    case EM_BINARY_GE: return gt || eq;
    EM_BINARY_ARITH_OPS(EM_OP_CASE) break; /* not comparisons */
    }
    return false;
}

/* Whether op's partial derivative by a (wrt_b false) or by b is 1, so that the gradient is g
 * itself and needs no kernel (em_binary_grad_value gives g there too). */
EM_FORMULA bool em_binary_grad_is_g(em_binary_op op, bool wrt_b)
{
    switch (op) {
    case EM_BINARY_ADD: return true;
    case EM_BINARY_SUB: return !wrt_b;
    case EM_BINARY_MUL: case EM_BINARY_DIV: case EM_BINARY_POW: case EM_BINARY_MAXIMUM:
    case EM_BINARY_MINIMUM: return false;
    EM_BINARY_COMPARE_OPS(EM_OP_CASE) return false;
    }
    return false; /* not an op */
}

/* em_binary_value_f32 / em_binary_grad_value_f32 (float), em_binary_value_f64 /
 * em_binary_grad_value_f64 (double): the formulas at one type each. */
#define EM_BINARY_T float
#define EM_BINARY_FN(name) name##_f32
#include "backend/binary_formula_impl_internal.h"
#undef EM_BINARY_T
#undef EM_BINARY_FN
#define EM_BINARY_T double
#define EM_BINARY_FN(name) name##_f64
#include "backend/binary_formula_impl_internal.h"
#undef EM_BINARY_T
#undef EM_BINARY_FN

/* The integer ops (em_binary_int_supported) compute in i64: add, sub and mul wrap through
 * uint64_t like PyTorch's integer tensors; a comparison gives 1 where it holds, else 0. */
EM_FORMULA int64_t em_binary_int_value(em_binary_op op, int64_t a, int64_t b)
{
    switch (op) {
    case EM_BINARY_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case EM_BINARY_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case EM_BINARY_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case EM_BINARY_MAXIMUM: return a > b ? a : b;
    case EM_BINARY_MINIMUM: return a < b ? a : b;
    case EM_BINARY_DIV: case EM_BINARY_POW:
        break; /* float ops only: the kernels take no integers for them */
    EM_BINARY_COMPARE_OPS(EM_OP_CASE) return em_binary_holds(op, a < b, a == b, a > b);
    }
    return 0;
}

#ifndef __CUDACC__
/* The formulas of the operands' type (float, double or int64_t), for C's type-generic kernels. */
#define em_binary_value(op, a, b)                                                                \
    _Generic((a), float: em_binary_value_f32, double: em_binary_value_f64,                       \
             int64_t: em_binary_int_value)(op, a, b)
#define em_binary_grad_value(op, wrt_b, g, a, b, y)                                              \
    _Generic((g), float: em_binary_grad_value_f32, double: em_binary_grad_value_f64)(op, wrt_b,  \
                                                                                      g, a, b, y)
#endif

#endif
