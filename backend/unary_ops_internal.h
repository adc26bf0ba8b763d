/* The unary elementwise ops of the kernel table: their list, their named parameters, and each
 * op's formula and derivative, written once (unary_formula_impl_internal.h) for the CPU kernels,
 * the CUDA kernels (__host__ __device__ under nvcc) and the tests' references
 * (op_formula_internal.h). */
#ifndef EMBER_UNARY_OPS_INTERNAL_H
#define EMBER_UNARY_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/convert_internal.h"
#include "backend/op_formula_internal.h"

/* Every unary op in enum order, as X(op): the kernels expand a loop per op from the list. */
#define EM_UNARY_OPS(X)                                                                          \
    X(EM_UNARY_NEG) X(EM_UNARY_ABS) X(EM_UNARY_SIGN)                                              \
    X(EM_UNARY_EXP) X(EM_UNARY_LOG) X(EM_UNARY_LOG1P)                                             \
    X(EM_UNARY_SQRT) X(EM_UNARY_RSQRT) X(EM_UNARY_SQUARE) X(EM_UNARY_RECIPROCAL)                  \
    X(EM_UNARY_SIN) X(EM_UNARY_COS) X(EM_UNARY_TANH) X(EM_UNARY_SIGMOID)                          \
    X(EM_UNARY_RELU) X(EM_UNARY_LEAKY_RELU) X(EM_UNARY_GELU) X(EM_UNARY_GELU_TANH)                \
    X(EM_UNARY_SILU) X(EM_UNARY_FLOOR) X(EM_UNARY_CEIL) X(EM_UNARY_ROUND)                         \
    X(EM_UNARY_CLAMP) X(EM_UNARY_ADD_SCALAR) X(EM_UNARY_MUL_SCALAR) X(EM_UNARY_POW_SCALAR)      \
    X(EM_UNARY_SOFTSIGN) X(EM_UNARY_MISH) X(EM_UNARY_SOFTPLUS) X(EM_UNARY_HARDTANH)             \
    X(EM_UNARY_ELU) X(EM_UNARY_SELU) X(EM_UNARY_HARDSWISH) X(EM_UNARY_LOGSIGMOID)

typedef enum { EM_UNARY_OPS(EM_OP_ENUM_ENTRY) } em_unary_op;
enum { EM_UNARY_COUNT = 0 EM_UNARY_OPS(EM_OP_COUNT_ONE) };

/* The scalars of the ops that take them; an op reads only its own fields (zero for the rest). */
typedef struct {
    double negative_slope; /* LEAKY_RELU */
    double min, max;       /* CLAMP: either may be -inf/+inf; HARDTANH: min < max, finite */
    double alpha;          /* ELU: the negative branch's scale */
    double beta, threshold; /* SOFTPLUS: log1p(exp(beta x)) / beta, x where beta x > threshold */
    double scalar;         /* ADD_SCALAR (x + scalar), MUL_SCALAR (x * scalar) */
    double exponent;       /* POW_SCALAR (x ^ exponent) */
} em_unary_params;

#define EM_SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define EM_SQRT_HALF 0.70710678118654752440      /* 1 / sqrt(2) */
#define EM_INV_SQRT_2PI 0.39894228040143267794   /* 1 / sqrt(2 pi) */
#define EM_GELU_KAPPA 0.044715
#define EM_SELU_ALPHA 1.6732632423543772848170429916717 /* PyTorch's SELU constants */
#define EM_SELU_SCALE 1.0507009873554804934193349852946

/* em_unary_value_f32 / em_unary_grad_value_f32 (float), em_unary_value_f64 /
 * em_unary_grad_value_f64 (double): the formulas at one type each. */
#define EM_UNARY_T float
#define EM_UNARY_FN(name) name##_f32
#include "backend/unary_formula_impl_internal.h"
#undef EM_UNARY_T
#undef EM_UNARY_FN
#define EM_UNARY_T double
#define EM_UNARY_FN(name) name##_f64
#include "backend/unary_formula_impl_internal.h"
#undef EM_UNARY_T
#undef EM_UNARY_FN

#ifndef __CUDACC__
/* The formulas of v's type (float or double), for C's type-generic kernels. */
#define em_unary_value(op, v, p)                                                                 \
    _Generic((v), float: em_unary_value_f32, double: em_unary_value_f64)(op, v, p)
#define em_unary_grad_value(op, from_y, g, v, p)                                                 \
    _Generic((v), float: em_unary_grad_value_f32, double: em_unary_grad_value_f64)(op, from_y,   \
                                                                                    g, v, p)
#endif

/* The integer ops (em_unary_int_supported) compute in i64, wrapping through uint64_t like
 * PyTorch's integer tensors; their parameters as integers: truncated, saturated, NaN as 0, and
 * clamp's bounds moved in to the integers within [min, max]. */
typedef struct {
    int64_t scalar, lo, hi;
} em_unary_int_params;

static inline em_unary_int_params em_unary_int_params_of(const em_unary_params *p)
{
    const int64_t lo = em_f64_to_i64(p->min), hi = em_f64_to_i64(p->max);
    em_unary_int_params q = {em_f64_to_i64(p->scalar), p->min > (double)lo ? lo + 1 : lo,
                             p->max < (double)hi ? hi - 1 : hi};
    return q;
}

EM_FORMULA int64_t em_unary_int_value(em_unary_op op, int64_t v, const em_unary_int_params *p)
{
    switch (op) {
    case EM_UNARY_NEG: return (int64_t)(0 - (uint64_t)v);
    case EM_UNARY_ABS: return v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
    case EM_UNARY_SIGN: return (int64_t)(v > 0) - (int64_t)(v < 0);
    case EM_UNARY_SQUARE: return (int64_t)((uint64_t)v * (uint64_t)v);
    case EM_UNARY_RELU: return v < 0 ? 0 : v;
    case EM_UNARY_CLAMP: return (v < p->lo ? p->lo : v) > p->hi ? p->hi : (v < p->lo ? p->lo : v);
    case EM_UNARY_ADD_SCALAR: return (int64_t)((uint64_t)v + (uint64_t)p->scalar);
    case EM_UNARY_MUL_SCALAR: return (int64_t)((uint64_t)v * (uint64_t)p->scalar);
    case EM_UNARY_EXP: case EM_UNARY_LOG: case EM_UNARY_LOG1P: case EM_UNARY_SQRT:
    case EM_UNARY_RSQRT: case EM_UNARY_RECIPROCAL: case EM_UNARY_SIN: case EM_UNARY_COS:
    case EM_UNARY_TANH: case EM_UNARY_SIGMOID: case EM_UNARY_LEAKY_RELU: case EM_UNARY_GELU:
    case EM_UNARY_GELU_TANH: case EM_UNARY_SILU: case EM_UNARY_FLOOR: case EM_UNARY_CEIL:
    case EM_UNARY_ROUND: case EM_UNARY_POW_SCALAR: case EM_UNARY_SOFTSIGN: case EM_UNARY_MISH:
    case EM_UNARY_SOFTPLUS: case EM_UNARY_HARDTANH: case EM_UNARY_ELU: case EM_UNARY_SELU:
    case EM_UNARY_HARDSWISH: case EM_UNARY_LOGSIGMOID:
        break; /* float ops only: the kernels take no integers for them */
    }
    return 0;
}

#endif
