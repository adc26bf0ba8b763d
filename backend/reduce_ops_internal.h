/* The reductions of the kernel table: their list, their parameters, and what each computes,
 * written once for the CPU kernels, the CUDA kernels (__host__ __device__ under nvcc) and the
 * tests (op_formula_internal.h): the fold a pass over the reduced elements runs (its identity,
 * the step that takes in one element, the combination of two partial results) and the divisor
 * that finishes a float result. Floats accumulate in double, integers in i64. */
#ifndef EMBER_REDUCE_OPS_INTERNAL_H
#define EMBER_REDUCE_OPS_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_formula_internal.h"

/* Every reduction in enum order, as X(op). ARGMAX/ARGMIN give i64 positions in the row-major
 * order of the reduced dims, the first on ties. */
#define EM_REDUCE_OPS(X)                                                                         \
    X(EM_REDUCE_SUM) X(EM_REDUCE_MEAN) X(EM_REDUCE_PROD) X(EM_REDUCE_MAX) X(EM_REDUCE_MIN)       \
    X(EM_REDUCE_ARGMAX) X(EM_REDUCE_ARGMIN) X(EM_REDUCE_VAR)

typedef enum { EM_REDUCE_OPS(EM_OP_ENUM_ENTRY) } em_reduce_op;
enum { EM_REDUCE_COUNT = 0 EM_REDUCE_OPS(EM_OP_COUNT_ONE) };

/* The parameters of the reductions that take them (zero for the rest). */
typedef struct {
    double correction; /* VAR: divides by R - correction (1 = unbiased) */
} em_reduce_params;

/* What one pass accumulates. A reduction runs one pass (em_reduce_fold), VAR two: EM_FOLD_SUM
 * for the means, then EM_FOLD_SQDEV, the squared deviations from them. */
#define EM_FOLDS(X)                                                                              \
    X(EM_FOLD_SUM) X(EM_FOLD_PROD) X(EM_FOLD_MAX) X(EM_FOLD_MIN) X(EM_FOLD_ARGMAX)               \
    X(EM_FOLD_ARGMIN) X(EM_FOLD_SQDEV)

typedef enum { EM_FOLDS(EM_OP_ENUM_ENTRY) } em_fold;

#define EM_ARG_NONE INT64_MAX /* an arg fold's position before any element: after all of them */

/* Whether fold k picks a position (ARGMAX, ARGMIN) rather than a value. */
EM_FORMULA bool em_fold_is_arg(em_fold k)
{
    switch (k) {
    case EM_FOLD_ARGMAX: case EM_FOLD_ARGMIN: return true;
    case EM_FOLD_SUM: case EM_FOLD_PROD: case EM_FOLD_MAX: case EM_FOLD_MIN: case EM_FOLD_SQDEV:
        return false;
    }
    return false; /* not a fold */
}

/* The fold of op's (last) pass. */
EM_FORMULA em_fold em_reduce_fold(em_reduce_op op)
{
    switch (op) {
    case EM_REDUCE_SUM: case EM_REDUCE_MEAN: return EM_FOLD_SUM;
    case EM_REDUCE_PROD: return EM_FOLD_PROD;
    case EM_REDUCE_MAX: return EM_FOLD_MAX;
    case EM_REDUCE_MIN: return EM_FOLD_MIN;
    case EM_REDUCE_ARGMAX: return EM_FOLD_ARGMAX;
    case EM_REDUCE_ARGMIN: return EM_FOLD_ARGMIN;
    case EM_REDUCE_VAR: return EM_FOLD_SQDEV;
    }
    return EM_FOLD_SUM; /* not an op: the kernels take none but the list's */
}

/* What the float result of op's (last) pass is divided by, with R reduced elements per output:
 * R for MEAN, R - correction for VAR (0 where that is not positive: inf or NaN, as PyTorch's),
 * else 1. VAR's pass for the means divides by R. */
EM_FORMULA double em_reduce_divisor(em_reduce_op op, const em_reduce_params *p, int64_t R)
{
    switch (op) {
    case EM_REDUCE_MEAN: return (double)R;
    case EM_REDUCE_VAR: return (double)R - p->correction > 0 ? (double)R - p->correction : 0;
    case EM_REDUCE_SUM: case EM_REDUCE_PROD: case EM_REDUCE_MAX: case EM_REDUCE_MIN:
    case EM_REDUCE_ARGMAX: case EM_REDUCE_ARGMIN: return 1;
    }
    return 1; /* not an op */
}

/* ---- float inputs, in double ---- */

/* What a pass of fold k starts from: the value no element changes. */
EM_FORMULA double em_fold_identity_f(em_fold k)
{
    switch (k) {
    case EM_FOLD_SUM: case EM_FOLD_SQDEV: return 0;
    case EM_FOLD_PROD: return 1;
    case EM_FOLD_MAX: case EM_FOLD_ARGMAX: return -INFINITY;
    case EM_FOLD_MIN: case EM_FOLD_ARGMIN: return INFINITY;
    }
    return 0; /* not a fold */
}

/* acc with element x taken in (mean: the output's mean, which SQDEV reads). NaN wins max and min,
 * as PyTorch's; for ARGMAX/ARGMIN acc is the best value so far (em_fold_arg_better_f says whether
 * x's position takes over). */
EM_FORMULA double em_fold_step_f(em_fold k, double acc, double x, double mean)
{
    switch (k) {
    case EM_FOLD_SUM: return acc + x;
    case EM_FOLD_SQDEV: return acc + (x - mean) * (x - mean);
    case EM_FOLD_PROD: return acc * x;
    case EM_FOLD_MAX: case EM_FOLD_ARGMAX: return x > acc || x != x ? x : acc;
    case EM_FOLD_MIN: case EM_FOLD_ARGMIN: return x < acc || x != x ? x : acc;
    }
    return acc; /* not a fold */
}

/* Two partial results of fold k in one, a over earlier positions than b (SQDEV's partial sums
 * add). */
EM_FORMULA double em_fold_combine_f(em_fold k, double a, double b)
{
    return em_fold_step_f(k == EM_FOLD_SQDEV ? EM_FOLD_SUM : k, a, b, 0);
}

/* Whether x, at a later position than the best so far v, takes its place in ARGMAX (max) or
 * ARGMIN: a NaN over a number, else a strictly larger (smaller) value. A fold that meets the
 * positions in order (the CPU's) needs no more. */
EM_FORMULA bool em_fold_arg_takes_f(bool max, double x, double v)
{
    return (x != x && v == v) || (max ? x > v : x < v);
}

/* Whether x at position pos beats the best so far, v at position at, in either order: the first
 * NaN, else the first extreme value wins (a total order, so that partial results may meet in
 * any order, as on CUDA). Every element beats the identity at EM_ARG_NONE. */
EM_FORMULA bool em_fold_arg_better_f(bool max, double x, int64_t pos, double v, int64_t at)
{
    return pos < at ? !em_fold_arg_takes_f(max, v, x) : em_fold_arg_takes_f(max, x, v);
}

/* ---- integer and bool inputs, in i64 (sum and prod wrapping through uint64_t) ---- */

EM_FORMULA int64_t em_fold_identity_i(em_fold k)
{
    switch (k) {
    case EM_FOLD_SUM: return 0;
    case EM_FOLD_PROD: return 1;
    case EM_FOLD_MAX: case EM_FOLD_ARGMAX: return INT64_MIN;
    case EM_FOLD_MIN: case EM_FOLD_ARGMIN: return INT64_MAX;
    case EM_FOLD_SQDEV: break; /* float only: VAR takes float inputs */
    }
    return 0;
}

EM_FORMULA int64_t em_fold_step_i(em_fold k, int64_t acc, int64_t x)
{
    switch (k) {
    case EM_FOLD_SUM: return (int64_t)((uint64_t)acc + (uint64_t)x);
    case EM_FOLD_PROD: return (int64_t)((uint64_t)acc * (uint64_t)x);
    case EM_FOLD_MAX: case EM_FOLD_ARGMAX: return x > acc ? x : acc;
    case EM_FOLD_MIN: case EM_FOLD_ARGMIN: return x < acc ? x : acc;
    case EM_FOLD_SQDEV: break; /* float only: VAR takes float inputs */
    }
    return acc;
}

/* As em_fold_arg_takes_f and em_fold_arg_better_f, without NaN. */
EM_FORMULA bool em_fold_arg_takes_i(bool max, int64_t x, int64_t v)
{
    return max ? x > v : x < v;
}

EM_FORMULA bool em_fold_arg_better_i(bool max, int64_t x, int64_t pos, int64_t v, int64_t at)
{
    return pos < at ? !em_fold_arg_takes_i(max, v, x) : em_fold_arg_takes_i(max, x, v);
}

#endif
