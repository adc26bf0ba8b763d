/* What the op registries (unary_ops_internal.h, binary_ops_internal.h, reduce_ops_internal.h)
 * share: EM_FORMULA, which makes a formula an inlined C function for the CPU kernels and the
 * tests and __host__ __device__ under nvcc, and the X-macros that turn an op list into an enum,
 * a count and switch cases. C includers get <tgmath.h>, so that a formula calls the float or the
 * double math function by its operands' type (the CUDA overloads do the same under nvcc). */
#ifndef EMBER_OP_FORMULA_INTERNAL_H
#define EMBER_OP_FORMULA_INTERNAL_H

#ifdef __CUDACC__
#define EM_FORMULA static __host__ __device__ __forceinline__
#else
#include <tgmath.h>
#define EM_FORMULA static inline __attribute__((always_inline))
#endif

/* An op list EM_X_OPS(X) names each op as X(op): `typedef enum { EM_X_OPS(EM_OP_ENUM_ENTRY) }`
 * makes the enum, `enum { EM_X_COUNT = 0 EM_X_OPS(EM_OP_COUNT_ONE) }` its count (outside the
 * enum, so that a switch over the enum names every op and nothing else: -Werror=switch then
 * rejects a switch that forgets one), EM_X_OPS(EM_OP_CASE) a case label per op. */
#define EM_OP_ENUM_ENTRY(op) op,
#define EM_OP_COUNT_ONE(op) +1
#define EM_OP_CASE(op) case op:

#endif
