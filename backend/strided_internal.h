/* N-d strided iteration setup shared by the backends: several same-shaped operands walked
 * together, size-1 dims dropped, dims ordered so that the first operand is walked in memory
 * order, and neighbouring dims merged where every operand steps through them as one. Each
 * backend runs the result its own way (backend_cpu/cpu_strided.c in runs on threads,
 * backend_cuda/cuda_strided_internal.cuh in kernels); plus shape predicates of em_arr. */
#ifndef EMBER_STRIDED_INTERNAL_H
#define EMBER_STRIDED_INTERNAL_H

#ifdef __cplusplus
extern "C" { /* also declared for the C++ of CUDA kernel files */
#endif

#include "backend/backend_internal.h"

#define EM_ITER_MAX_OPS 5 /* binary_grad: gx, g, a, b, y */

/* Iteration over shape for nops operands. Dims are outermost first after setup. */
typedef struct {
    int ndim; /* >= 1 (a 0-d shape iterates as one element) */
    int nops;
    int64_t numel;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_ITER_MAX_OPS][EM_MAX_DIMS]; /* elements */
    char *data[EM_ITER_MAX_OPS];
    size_t elsize[EM_ITER_MAX_OPS];
} em_iter;

enum {
    EM_ITER_KEEP_ORDER = 1 /* visit in the given dims' row-major order (no reordering by strides) */
};

/* Sets up iteration over shape (ndim dims) for ops[0..nops-1], which must all have at least ndim
 * dims; op k's strides and data are taken from ops[k]. Unless EM_ITER_KEEP_ORDER, dims are
 * reordered so that ops[0] (the output) is walked in memory order. Size-1 dims are dropped and
 * neighbouring dims merged when every operand steps through them as one. */
void em_iter_init(em_iter *it, int ndim, const int64_t *shape, int nops, const em_arr *const *ops,
                  int flags);

int64_t em_arr_numel(const em_arr *a);
bool em_arr_same_shape(const em_arr *a, const em_arr *b);
bool em_arr_contiguous(const em_arr *a); /* row-major and dense (size-1 dims any stride) */

#ifdef __cplusplus
}
#endif

#endif
