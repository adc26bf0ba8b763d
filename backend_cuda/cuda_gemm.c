/* cuBLAS matrix products: row-major strided-batched GEMM in f32, f64, f16 and bf16 (f32 accumulation
 * for the half types, on tensor cores). */
#include "backend_cuda/cuda_internal.h"

/* Row-major C = A @ B is column-major C^T = B^T @ A^T: swap the operands and m/n. */
int em_cuda_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 double alpha, const void *a, int64_t lda, int64_t stride_a,
                 const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st;
    if (dt == EM_F64) {
        st = cublasDgemmStridedBatched(em_cuda_cublas(), op_b, op_a, (int)n, (int)m, (int)k, &alpha,
                                       b, (int)ldb, stride_b, a, (int)lda, stride_a, &beta, c,
                                       (int)ldc, stride_c, (int)batch);
    } else if (dt == EM_F32 || dt == EM_F16 || dt == EM_BF16) {
        cudaDataType type = dt == EM_F32 ? CUDA_R_32F : dt == EM_F16 ? CUDA_R_16F : CUDA_R_16BF;
        float alpha_f = (float)alpha, beta_f = (float)beta;
        st = cublasGemmStridedBatchedEx(em_cuda_cublas(), op_b, op_a, (int)n, (int)m, (int)k,
                                        &alpha_f, b, type, (int)ldb, stride_b, a, type, (int)lda,
                                        stride_a, &beta_f, c, type, (int)ldc, stride_c, (int)batch,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        return EM_KERNEL_UNSUPPORTED;
    }
    return st == CUBLAS_STATUS_SUCCESS ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}
