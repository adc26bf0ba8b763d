/* The backend's bf16 products on oneDNN (where em_cpu_engine_for chose it): gemm, a Linear's
 * forward with its bias, and a Linear's gradients with the weight's and bias's in f32 where the
 * parameters are f32 (no bf16 result to widen afterwards). bf16 operands go in as they are,
 * products accumulate in f32. */
#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_dnnl_internal.h"

bool em_cpu_dnnl_takes(em_dtype dt)
{
    return dt == EM_BF16 && em_cpu_engine_for(EM_CPU_PRODUCT_BF16)->dnnl;
}

int em_cpu_dnnl_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                     int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                     int64_t stride_c, int64_t batch)
{
    if (!em_cpu_dnnl_takes(dt) || (beta != 0.0 && beta != 1.0))
        return EM_KERNEL_UNSUPPORTED;
    const em_dnnl_matmul_desc d = {
        .a_dt = dt, .b_dt = dt, .c_dt = dt, .ta = trans_a, .tb = trans_b, .m = m, .n = n,
        .k = k, .batch = batch, .lda = lda, .ldb = ldb, .ldc = ldc, .sa = stride_a,
        .sb = stride_b, .sc = stride_c, .alpha = (float)alpha, .beta = (float)beta};
    return em_dnnl_matmul(&d, a, b, NULL, c);
}

int em_cpu_dnnl_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                       const void *w, int64_t ldw, const void *b, void *y, int64_t ldy)
{
    if (!em_cpu_dnnl_takes(dt))
        return EM_KERNEL_UNSUPPORTED;
    const em_dnnl_matmul_desc d = {.a_dt = dt, .b_dt = dt, .c_dt = dt, .bias_dt = dt,
                                   .tb = true, .m = m, .n = n, .k = k, .batch = 1, .lda = ldx,
                                   .ldb = ldw, .ldc = ldy, .alpha = 1};
    return em_dnnl_matmul(&d, x, w, b, y);
}

/* Rows of a bias gradient per task: a fixed cut, so the sums have the same bits on any number
 * of threads. */
#define SUM_ROWS 256

/* A bf16 value widened (its bits are the top half of the f32's). */
static inline float bf16_value(uint16_t b)
{
    const uint32_t bits = (uint32_t)b << 16;
    float v;
    __builtin_memcpy(&v, &bits, sizeof v);
    return v;
}

/* acc (k) = the sums of g's (rows, k) bf16 columns, row after row */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void column_block_sums(int64_t rows, int64_t k, const uint16_t *g, int64_t ldg,
                              float *acc)
{
    for (int64_t j = 0; j < k; j++)
        acc[j] = 0;
    for (int64_t i = 0; i < rows; i++) {
        const uint16_t *row = g + i * ldg;
        #pragma omp simd
        for (int64_t j = 0; j < k; j++)
            acc[j] += bf16_value(row[j]);
    }
}

/* sums (k) = the sums of g's (m, k) bf16 columns in f32: blocks of SUM_ROWS rows on the
 * threads, then the blocks' sums in order */
static int bf16_column_sums(int64_t m, int64_t k, const uint16_t *g, int64_t ldg, float *sums)
{
    const int64_t blocks = (m + SUM_ROWS - 1) / SUM_ROWS;
    float *partial = em_cpu_f32_buffer(blocks * k); // (blocks, k)
    if (!partial)
        return EM_KERNEL_FAILED;
    #pragma omp parallel for if (m * k >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t r0 = b * SUM_ROWS;
        column_block_sums(m - r0 < SUM_ROWS ? m - r0 : SUM_ROWS, k, g + r0 * ldg, ldg,
                          partial + b * k);
    }
    for (int64_t j = 0; j < k; j++) {
        float s = 0;
        for (int64_t b = 0; b < blocks; b++)
            s += partial[b * k + j];
        sums[j] = s;
    }
    em_cpu_scratch_free(partial);
    return EM_KERNEL_OK;
}

/* gb (k) = the sums of g's (m, k) columns, in f32, narrowed where out_dt is bf16 */
static int column_sums(int64_t m, int64_t k, const uint16_t *g, int64_t ldg, em_dtype out_dt,
                       void *gb)
{
    float *sums = out_dt == EM_F32 ? gb : em_cpu_f32_buffer(k);
    if (!sums)
        return EM_KERNEL_FAILED;
    int rc = bf16_column_sums(m, k, g, ldg, sums);
    if (out_dt != EM_F32) {
        em_cpu_f32_to_half_n(EM_BF16, gb, sums, k);
        em_cpu_scratch_free(sums);
    }
    return rc;
}

int em_cpu_dnnl_linear_grad(em_dtype dt, const em_linear_grads *a)
{
    const em_dtype pdt = a->param_dt;
    if (!em_cpu_dnnl_takes(dt) || (pdt != dt && pdt != EM_F32))
        return EM_KERNEL_UNSUPPORTED;
    /* gx (m, n) = g (m, k) @ w (k, n) */
    const em_dnnl_matmul_desc dx = {.a_dt = dt, .b_dt = dt, .c_dt = dt, .m = a->m, .n = a->n,
                                    .k = a->k, .batch = 1, .lda = a->ldg, .ldb = a->ldw,
                                    .ldc = a->ldgx, .alpha = 1};
    int rc = a->gx ? em_dnnl_matmul(&dx, a->g, a->w, NULL, a->gx) : EM_KERNEL_OK;
    if (rc == EM_KERNEL_OK && a->gw) {
        /* gw (k, n) = g^T (k, m) @ x (m, n) */
        const em_dnnl_matmul_desc dw = {.a_dt = dt, .b_dt = dt, .c_dt = pdt, .ta = true,
                                        .m = a->k, .n = a->n, .k = a->m, .batch = 1,
                                        .lda = a->ldg, .ldb = a->ldx, .ldc = a->ldgw, .alpha = 1};
        rc = em_dnnl_matmul(&dw, a->g, a->x, NULL, a->gw);
    }
    if (rc == EM_KERNEL_OK && a->gb)
        rc = column_sums(a->m, a->k, a->g, a->ldg, pdt, a->gb);
    return rc;
}
