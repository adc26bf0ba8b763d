/* The argument rules of the kernel table that every backend applies alike: the dtypes and
 * shapes a kernel takes (others are EM_KERNEL_UNSUPPORTED) and the operand it reads, as the
 * interface (backend_internal.h) states them. */
#ifndef EMBER_KERNEL_ARGS_INTERNAL_H
#define EMBER_KERNEL_ARGS_INTERNAL_H

#ifdef __cplusplus
extern "C" { /* also declared for the C++ of CUDA kernel files */
#endif

#include "backend/backend_internal.h"

/* The unary ops integer dtypes take (neg, abs, sign, square, relu, clamp, add/mul by a scalar). */
bool em_unary_int_supported(em_unary_op op);

/* The binary ops integer dtypes take (all but div and pow). */
bool em_binary_int_supported(em_binary_op op);

/* Whether binary(op) takes out, a and b: a and b of one dtype and of out's shape; out bool for a
 * comparison, else of a's dtype, a float or (em_binary_int_supported) an integer one. */
bool em_binary_args_ok(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b);

/* Whether binary_grad(op) takes gx, g, a, b and y: op not a comparison, all of one float dtype
 * and of gx's shape. */
bool em_binary_grad_args_ok(em_binary_op op, const em_arr *gx, const em_arr *g, const em_arr *a,
                            const em_arr *b, const em_arr *y);

/* The operand unary_grad reads for op: y when op's derivative reads its output and y is given
 * (*from_y then true), else x, or gy itself when the derivative reads neither; NULL when the
 * operand needed is missing. */
const em_arr *em_unary_grad_source(em_unary_op op, const em_arr *gy, const em_arr *x,
                                   const em_arr *y, bool *from_y);

/* Whether reduce(op) takes in and out: the dtype rules, out of in's rank with each dim equal to
 * in's or 1 (reduced), and an element to pick for max/min/arg unless out is empty. *R is the
 * number of reduced elements per output. */
bool em_reduce_args_ok(em_reduce_op op, const em_arr *out, const em_arr *in, int64_t *R);

/* cumulative: out and in of one shape and float dtype, dim in range. */
bool em_cumulative_args_ok(const em_arr *out, const em_arr *in, int dim);

/* index_select and index_add: same rank and dtype, dim in range, same shape but along dim. */
bool em_index_views_match(const em_arr *a, const em_arr *b, int dim);

/* gather and scatter_add: idx (i64) has ref's shape; big matches ref's rank and dtype and is at
 * least as large on every dim but dim. */
bool em_gather_views_ok(const em_arr *ref, const em_arr *big, const em_arr *idx, int dim);

#ifdef __cplusplus
}
#endif

#endif
