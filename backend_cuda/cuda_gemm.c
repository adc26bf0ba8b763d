/* cuBLAS matrix products: row-major strided-batched GEMM in f32, f64, f16 and bf16 (f32
 * accumulation for the half types, on tensor cores; f32 stays f32 unless TF32 is switched on). */
#include <limits.h>

#include "backend_cuda/cuda_internal.h"

static cudaDataType cuda_type(em_dtype dt)
{
    return dt == EM_F32 ? CUDA_R_32F : dt == EM_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* cuBLAS takes int sizes and leading dims: a product beyond them is refused, not truncated. */
static bool fits_int(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                     int64_t batch)
{
    const int64_t v[] = {m, n, k, lda, ldb, ldc, batch};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] < 0 || v[i] > INT_MAX)
            return false;
    return true;
}

/* Row-major C = A @ B is column-major C^T = B^T @ A^T: swap the operands and m/n. a and b are
 * ab_type, c is c_type, accumulation in f32. */
static int gemm_ex(cudaDataType ab_type, cudaDataType c_type, bool trans_a, bool trans_b,
                   int64_t m, int64_t n, int64_t k, double alpha, const void *a, int64_t lda,
                   int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, double beta,
                   void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (!fits_int(m, n, k, lda, ldb, ldc, batch))
        return EM_KERNEL_UNSUPPORTED;
    float alpha_f = (float)alpha, beta_f = (float)beta;
    em_cuda_count_launch();
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        em_cuda_cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        (int)n, (int)m, (int)k, &alpha_f, b, ab_type, (int)ldb, stride_b, a, ab_type, (int)lda,
        stride_a, &beta_f, c, c_type, (int)ldc, stride_c, (int)batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}

int em_cuda_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 double alpha, const void *a, int64_t lda, int64_t stride_a,
                 const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (dt == EM_F64) {
        if (!fits_int(m, n, k, lda, ldb, ldc, batch))
            return EM_KERNEL_UNSUPPORTED;
        em_cuda_count_launch();
        cublasStatus_t st = cublasDgemmStridedBatched(
            em_cuda_cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b, (int)ldb,
            stride_b, a, (int)lda, stride_a, &beta, c, (int)ldc, stride_c, (int)batch);
        return st == CUBLAS_STATUS_SUCCESS ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    }
    if (dt != EM_F32 && dt != EM_F16 && dt != EM_BF16)
        return EM_KERNEL_UNSUPPORTED;
    return gemm_ex(cuda_type(dt), cuda_type(dt), trans_a, trans_b, m, n, k, alpha, a, lda,
                   stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

int em_cuda_gemm_f32_out(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *a, int64_t lda, int64_t stride_a,
                         const void *b, int64_t ldb, int64_t stride_b,
                         double beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (dt != EM_F16 && dt != EM_BF16)
        return EM_KERNEL_UNSUPPORTED;
    return gemm_ex(cuda_type(dt), CUDA_R_32F, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                   b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}
