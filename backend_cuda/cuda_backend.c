/* The CUDA backend's table: device discovery, device memory and cuBLAS matrix products.
 * Entries left NULL are reported by the ops as "not supported on cuda". */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/backend_internal.h"

static cublasHandle_t cublas_handle;

static void *cuda_alloc(size_t nbytes)
{
    void *ptr = NULL;
    if (cudaMalloc(&ptr, nbytes ? nbytes : 1) != cudaSuccess)
        return NULL;
    return ptr;
}

static void cuda_free(void *ptr)
{
    cudaFree(ptr);
}

static int cuda_status(cudaError_t err)
{
    return err == cudaSuccess ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}

static int cuda_copy_from_host(void *dst, const void *src_host, size_t nbytes)
{
    return cuda_status(cudaMemcpy(dst, src_host, nbytes, cudaMemcpyHostToDevice));
}

static int cuda_copy_to_host(void *dst_host, const void *src, size_t nbytes)
{
    return cuda_status(cudaMemcpy(dst_host, src, nbytes, cudaMemcpyDeviceToHost));
}

static int cuda_synchronize(void)
{
    return cuda_status(cudaDeviceSynchronize());
}

/* Row-major C = A @ B is column-major C^T = B^T @ A^T: swap the operands and m/n. */
static int cuda_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const void *a, int64_t lda, int64_t stride_a,
                     const void *b, int64_t ldb, int64_t stride_b,
                     double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st;
    if (dt == EM_F64) {
        st = cublasDgemmStridedBatched(cublas_handle, op_b, op_a, (int)n, (int)m, (int)k, &alpha,
                                       b, (int)ldb, stride_b, a, (int)lda, stride_a, &beta, c,
                                       (int)ldc, stride_c, (int)batch);
    } else if (dt == EM_F32 || dt == EM_F16 || dt == EM_BF16) {
        cudaDataType type = dt == EM_F32 ? CUDA_R_32F : dt == EM_F16 ? CUDA_R_16F : CUDA_R_16BF;
        float alpha_f = (float)alpha, beta_f = (float)beta;
        st = cublasGemmStridedBatchedEx(cublas_handle, op_b, op_a, (int)n, (int)m, (int)k,
                                        &alpha_f, b, type, (int)ldb, stride_b, a, type, (int)lda,
                                        stride_a, &beta_f, c, type, (int)ldc, stride_c, (int)batch,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        return EM_KERNEL_UNSUPPORTED;
    }
    return st == CUBLAS_STATUS_SUCCESS ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}

static const em_backend cuda_backend = {
    .device = EM_CUDA,
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_from_host = cuda_copy_from_host,
    .copy_to_host = cuda_copy_to_host,
    .synchronize = cuda_synchronize,
    .gemm = cuda_gemm,
};

void em_cuda_backend_discover(void); /* listed in backend_list.c */

void em_cuda_backend_discover(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
        return;
    if (cublasCreate(&cublas_handle) == CUBLAS_STATUS_SUCCESS)
        em_backend_register(&cuda_backend);
}
