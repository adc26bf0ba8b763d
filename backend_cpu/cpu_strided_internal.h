/* N-d strided iteration for CPU kernels: the operands of an em_iter (backend/strided_internal.h)
 * walked as runs along the innermost dim, split across threads; plus dtype staging helpers. */
#ifndef EMBER_CPU_STRIDED_INTERNAL_H
#define EMBER_CPU_STRIDED_INTERNAL_H

#include "backend/strided_internal.h"

/* Elements a kernel stages at a time into its on-stack compute buffers. */
#define EM_STAGE_BLOCK 256

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

#endif
