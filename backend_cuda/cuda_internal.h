/* The CUDA backend's shared plumbing, private to backend_cuda/: the one compute stream every
 * kernel, copy and cuBLAS call runs on, the cuBLAS handle, the launch check, the device index
 * flag, and the entry points each cuda_*.cu file gives the table in cuda_backend.c.
 *
 * Conventions for the kernel files (compiled by nvcc as C++, entries extern "C"):
 * - Launch on em_cuda_stream() only, and return em_cuda_launch_status() after the launches, so a
 *   launch error becomes EM_KERNEL_FAILED. Never synchronize inside a kernel entry.
 * - Scratch memory comes from em_cuda_scratch / em_cuda_scratch_free (the accounting allocator,
 *   stream-ordered: a block freed after a launch is reused only by later work on the stream).
 * - Semantics are the CPU kernels' (backend_cpu/), bit for bit where the interface promises it
 *   (integer and index results, RNG, copies); f16/bf16 compute in f32, f32 in f32 (no TF32 unless
 *   the TF32 switch is on), f64 in f64. Reductions are deterministic: a fixed launch shape and a
 *   fixed order of combination, no atomics on floating point.
 * - Index kernels raise the device index flag (em_cuda_raise_bad_index in device code) instead
 *   of failing; synchronize and copy_to_host report it as EM_KERNEL_BAD_INDEX. */
#ifndef EMBER_CUDA_INTERNAL_H
#define EMBER_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/backend_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuda_memory.c */
cudaStream_t em_cuda_stream(void);
cublasHandle_t em_cuda_cublas(void);
bool em_cuda_init(void); /* the stream and cuBLAS handle; false when no usable device */
int em_cuda_status(cudaError_t err); /* EM_KERNEL_OK or EM_KERNEL_FAILED */
int em_cuda_launch_status(void);     /* the last launch's error, as em_cuda_status */
void *em_cuda_alloc(size_t nbytes);
void em_cuda_free(void *ptr);
int em_cuda_copy_from_host(void *dst, const void *src_host, size_t nbytes);
int em_cuda_copy_to_host(void *dst_host, const void *src, size_t nbytes);
int em_cuda_synchronize(void);
void *em_cuda_scratch(size_t nbytes);               /* NULL when out of memory */
void em_cuda_scratch_free(void *ptr, size_t nbytes); /* NULL is fine */
const em_backend *em_cuda_table(void);              /* cuda_backend.c */

/* cuda_index.cu: the device index flag; EM_KERNEL_BAD_INDEX once when raised (and clears it) */
int em_cuda_take_index_error(void);

/* cuda_gemm.c */
int em_cuda_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 double alpha, const void *a, int64_t lda, int64_t stride_a,
                 const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);

#ifdef __cplusplus
}
#endif

#endif
