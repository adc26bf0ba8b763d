/* f16/bf16 Linear layers where oneDNN does not multiply the dtype (f16 on every CPU, bf16 on
 * CPUs without bf16 instructions): each operand is widened to f32 once per call, multiplied by
 * the f32 kernels (ember's tiles where they apply, else OpenBLAS) and each result narrowed once;
 * a bf16 forward on the tiles widens x a block of rows at a time in cache and rounds y as the
 * tiles store it.
 * The op's own fallback copied the bias into y and widened it back with y, and widened g once
 * for gx and again for gw; and f32 parameters under autocast get their weight and bias
 * gradients in f32 as the sums left them, where the fallback rounded them to the half dtype and
 * widened them back. */
#include <string.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* A packed f32 copy of a (rows, cols) half matrix with row stride ld, or NULL when out of
 * memory. */
static float *widen_rows(em_dtype dt, const void *src, int64_t rows, int64_t cols, int64_t ld)
{
    float *dst = em_cpu_f32_buffer(rows * cols);
    if (dst)
        em_cpu_half_to_f32_2d(dt, dst, src, rows, cols, ld);
    return dst;
}

/* y (m, n) = x (m, k) @ w^T + b, all f32 and packed, w (n, k): the tiles with the bias in their
 * registers where they apply, else the bias copied into y and OpenBLAS adding onto it. */
static int f32_linear(int64_t m, int64_t n, int64_t k, const float *x, const float *w,
                      const float *b, float *y)
{
    if (em_cpu_linear(EM_F32, m, n, k, x, k, w, k, b, y, n) == EM_KERNEL_OK)
        return EM_KERNEL_OK;
    for (int64_t i = 0; b && i < m; i++)
        memcpy(y + i * n, b, (size_t)n * sizeof(float));
    return em_cpu_gemm(EM_F32, false, true, m, n, k, 1.0, x, k, 0, w, k, 0, b ? 1.0 : 0.0, y, n,
                       0, 1);
}

int em_cpu_half_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                       const void *w, int64_t ldw, const void *b, void *y, int64_t ldy)
{
    if (!em_cpu_is_half(dt) || m < 1 || n < 1 || k < 1)
        return EM_KERNEL_UNSUPPORTED;
    float *fb = b ? em_cpu_widen(dt, b, n) : NULL;
    if (b && !fb)
        return EM_KERNEL_FAILED;
    /* bf16 on the tiles where they apply: no widened copy of x and y at all */
    if (dt == EM_BF16 && em_cpu_linear_tiles_bf16(m, n, k, x, ldx, w, ldw, fb, y, ldy)) {
        em_cpu_scratch_free(fb);
        return EM_KERNEL_OK;
    }
    float *fx = widen_rows(dt, x, m, k, ldx), *fw = widen_rows(dt, w, n, k, ldw);
    float *fy = em_cpu_f32_buffer(m * n);
    int rc = fx && fw && fy ? f32_linear(m, n, k, fx, fw, fb, fy) : EM_KERNEL_FAILED;
    if (rc == EM_KERNEL_OK)
        em_cpu_f32_to_half_2d(dt, y, fy, m, n, ldy);
    em_cpu_scratch_free(fx);
    em_cpu_scratch_free(fw);
    em_cpu_scratch_free(fb);
    em_cpu_scratch_free(fy);
    return rc;
}

/* sums (k) += the rows of g (rows, k), packed, in double */
EM_WIDEST_LANES static void add_rows(int64_t rows, int64_t k, const float *g, double *sums)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *row = g + r * k;
        #pragma omp simd
        for (int64_t j = 0; j < k; j++)
            sums[j] += row[j];
    }
}

/* a's gradients, all f32 and packed but gw (row stride ldgw): in one call of the tiles where
 * they take them, else gx and gw by OpenBLAS and gb the column sums of g in double, row after
 * row. */
static int f32_linear_grads(const em_linear_grads *a)
{
    const int rc = em_cpu_linear_grad(EM_F32, a);
    if (rc != EM_KERNEL_UNSUPPORTED)
        return rc;
    const float *g = a->g;
    if (a->gx && em_cpu_gemm(EM_F32, false, false, a->m, a->n, a->k, 1.0, g, a->k, 0, a->w,
                             a->n, 0, 0.0, a->gx, a->n, 0, 1) != EM_KERNEL_OK)
        return EM_KERNEL_FAILED;
    if (a->gw && em_cpu_gemm(EM_F32, true, false, a->k, a->n, a->m, 1.0, g, a->k, 0, a->x, a->n,
                             0, 0.0, a->gw, a->ldgw, 0, 1) != EM_KERNEL_OK)
        return EM_KERNEL_FAILED;
    if (!a->gb)
        return EM_KERNEL_OK;
    double *sums = em_cpu_scratch((size_t)a->k * sizeof(double));
    if (!sums)
        return EM_KERNEL_FAILED;
    memset(sums, 0, (size_t)a->k * sizeof(double));
    add_rows(a->m, a->k, g, sums);
    for (int64_t j = 0; j < a->k; j++)
        ((float *)a->gb)[j] = (float)sums[j];
    em_cpu_scratch_free(sums);
    return EM_KERNEL_OK;
}

int em_cpu_half_linear_grad(em_dtype dt, const em_linear_grads *a)
{
    const em_dtype pdt = a->param_dt;
    if (!em_cpu_is_half(dt) || (pdt != dt && pdt != EM_F32) || a->m < 1 || a->n < 1 || a->k < 1)
        return EM_KERNEL_UNSUPPORTED;
    const bool f32_params = pdt == EM_F32;
    /* f: the f32 problem; g (m, k), w (k, n), x (m, n), gx (m, n), gw (k, n), gb (k) */
    em_linear_grads f = {.m = a->m, .n = a->n, .k = a->k, .ldg = a->k, .ldw = a->n,
                         .ldx = a->n, .ldgx = a->n, .param_dt = EM_F32};
    f.g = widen_rows(dt, a->g, a->m, a->k, a->ldg);
    f.w = a->gx ? widen_rows(dt, a->w, a->k, a->n, a->ldw) : NULL;
    f.x = a->gw ? widen_rows(dt, a->x, a->m, a->n, a->ldx) : NULL;
    f.gx = a->gx ? em_cpu_f32_buffer(a->m * a->n) : NULL;
    f.gw = !a->gw ? NULL : f32_params ? a->gw : em_cpu_f32_buffer(a->k * a->n);
    f.ldgw = f32_params ? a->ldgw : a->n;
    f.gb = !a->gb ? NULL : f32_params ? a->gb : em_cpu_f32_buffer(a->k);
    int rc = f.g && (f.w || !a->gx) && (f.x || !a->gw) && (f.gx || !a->gx) &&
                     (f.gw || !a->gw) && (f.gb || !a->gb)
                 ? f32_linear_grads(&f)
                 : EM_KERNEL_FAILED;
    if (rc == EM_KERNEL_OK && a->gx)
        em_cpu_f32_to_half_2d(dt, a->gx, f.gx, a->m, a->n, a->ldgx);
    if (rc == EM_KERNEL_OK && !f32_params && a->gw)
        em_cpu_f32_to_half_2d(dt, a->gw, f.gw, a->k, a->n, a->ldgw);
    if (rc == EM_KERNEL_OK && !f32_params && a->gb)
        em_cpu_f32_to_half_2d(dt, a->gb, f.gb, 1, a->k, a->k);
    em_cpu_scratch_free((void *)f.g);
    em_cpu_scratch_free((void *)f.w);
    em_cpu_scratch_free((void *)f.x);
    em_cpu_scratch_free(f.gx);
    if (!f32_params) {
        em_cpu_scratch_free(f.gw);
        em_cpu_scratch_free(f.gb);
    }
    return rc;
}
