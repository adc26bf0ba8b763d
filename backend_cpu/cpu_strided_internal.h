/* N-d strided iteration for CPU kernels: several same-shaped operands walked as runs along the
 * innermost dim, with size-1 dims dropped and contiguous dims merged; plus dtype staging helpers. */
#ifndef EMBER_CPU_STRIDED_INTERNAL_H
#define EMBER_CPU_STRIDED_INTERNAL_H

#include "backend/backend_internal.h"

#define EM_ITER_MAX_OPS 4

/* Elements a kernel stages at a time into its on-stack compute buffers. */
#define EM_STAGE_BLOCK 256

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

/* One run of n elements: ptrs[k] points at operand k's first element; strides[k] is operand k's
 * step in elements (0 for a broadcast operand). */
typedef void (*em_iter_fn)(void *ctx, int64_t n, char *const *ptrs, const int64_t *strides);

/* Visits linear positions [start, end) in the iteration's row-major order, operands based at
 * data[k] (it->data, or other base pointers with the same strides). Runs never cross rows. */
void em_iter_range(const em_iter *it, char *const *data, int64_t start, int64_t end,
                   em_iter_fn fn, void *ctx);

/* ptrs[k] = operand k's address at linear position pos, operands based at data[k]. */
void em_iter_offsets(const em_iter *it, char *const *data, int64_t pos, char **ptrs);

/* Visits every element once, split into contiguous position ranges across OpenMP threads when
 * numel * cost >= EM_CPU_PARALLEL_MIN (cost: work per element, in element visits). fn must be
 * safe to call concurrently on disjoint ranges. */
void em_iter_run(const em_iter *it, int64_t cost, em_iter_fn fn, void *ctx);

int64_t em_arr_numel(const em_arr *a);
bool em_arr_same_shape(const em_arr *a, const em_arr *b);

/* Staging: n elements of dtype dt at p (stride in elements, may be 0) to or from a contiguous
 * compute buffer. Loads accept every dtype (bool reads 0/1). Float stores accept float dtypes
 * only; integer stores accept integer dtypes and bool (nonzero -> 1) and wrap like C casts. */
void em_load_f32(em_dtype dt, const void *p, int64_t stride, int64_t n, float *dst);
void em_load_f64(em_dtype dt, const void *p, int64_t stride, int64_t n, double *dst);
void em_load_i64(em_dtype dt, const void *p, int64_t stride, int64_t n, int64_t *dst);
void em_store_f32(em_dtype dt, void *p, int64_t stride, int64_t n, const float *src);
void em_store_f64(em_dtype dt, void *p, int64_t stride, int64_t n, const double *src);
void em_store_i64(em_dtype dt, void *p, int64_t stride, int64_t n, const int64_t *src);

/* Compute views: a pointer to n values as a contiguous f32/f64/i64 array, p itself when it already
 * is one (dt native and stride 1), else buf (>= n entries) filled by a load. */
const float *em_view_f32(em_dtype dt, const void *p, int64_t stride, int64_t n, float *buf);
const double *em_view_f64(em_dtype dt, const void *p, int64_t stride, int64_t n, double *buf);
const int64_t *em_view_i64(em_dtype dt, const void *p, int64_t stride, int64_t n, int64_t *buf);

/* i8, u8, i32, i64 (not bool). */
bool em_dtype_is_int(em_dtype dt);

#endif
