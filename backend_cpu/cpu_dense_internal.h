/* Helpers shared by the CPU dense kernels (gemm, conv, pool, softmax): f16/bf16 buffers are
 * widened to f32, run through the f32 kernel (f32 accumulation) and narrowed back. */
#ifndef EMBER_CPU_DENSE_INTERNAL_H
#define EMBER_CPU_DENSE_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

/* A contiguous conversion is cut into pieces of this many elements for the threads. */
#define EM_CPU_CONVERT_PIECE 16384

static inline bool em_cpu_is_half(em_dtype dt)
{
    return dt == EM_F16 || dt == EM_BF16;
}

/* cpu_pool_2x2.c: max pooling over 2x2 windows at stride 2 without padding, when it applies
 * (x (N, C, H, W), y and argmax (N, C, H/2, W/2)). */
bool em_cpu_max_pool2d_2x2_applies(const em_pool2d_shape *s);
/* That pooling of f32 or bf16 (dt), and gx (N, C, H, W) = its gradient from gy and its argmax,
 * every input written; false (nothing done) for another dtype. */
bool em_cpu_max_pool2d_2x2(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                           em_pool_tap *argmax);
bool em_cpu_max_pool2d_2x2_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                                const em_pool_tap *argmax, void *gx);

/* What em_cpu_gemm_tiles_f32 does beyond c = a @ op(b) */
typedef struct {
    const float *bias; /* (n) added to every row of c, or NULL */
    bool add_to_c;     /* c += a @ op(b), where there is no bias */
    float *a_col_sums; /* (k) overwritten with the sums of a's columns (a bias gradient), or NULL */
    /* other work for the same threads, handed out before the tiles so that the tiles' chunks
     * even out the threads' ends: side(side_ctx, t) for t < side_tasks, each on one thread */
    int64_t side_tasks;
    void (*side)(void *side_ctx, int64_t task);
    void *side_ctx;
} em_tiles_extras;

/* cpu_gemm_tiles.c: c (m, n) = a (m, k) @ op(b) and the extras, op(b) b^T of b (n, k) when tb,
 * else b (k, n); row strides lda, ldb, ldc; on AVX2+FMA. False (nothing done, the side tasks
 * included) where it does not apply (few rows, k 0 or long, a large b, no AVX2) or its scratch
 * could not be had. */
bool em_cpu_gemm_tiles_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, bool tb, em_tiles_extras extras,
                           float *c, int64_t ldc);
/* A bf16 Linear's forward on those tiles, y (m, n) = x (m, k) @ w^T + bias, w (n, k), bias
 * (n) f32 or NULL: x's rows widened a block at a time in cache, w as it is packed, y rounded
 * to bf16 as it is stored (the bits of widening all, the f32 tiles, and narrowing after).
 * False where the tiles do not apply. */
bool em_cpu_linear_tiles_bf16(int64_t m, int64_t n, int64_t k, const uint16_t *x, int64_t ldx,
                              const uint16_t *w, int64_t ldw, const float *bias, uint16_t *y,
                              int64_t ldy);

/* cpu_linear_half.c: em_cpu_linear and em_cpu_linear_grad for f16/bf16 on the f32 kernels (where
 * oneDNN does not take the dtype): operands widened once, results narrowed once, the parameters'
 * gradients written f32 where param_dt is. */
int em_cpu_half_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                       const void *w, int64_t ldw, const void *b, void *y, int64_t ldy);
int em_cpu_half_linear_grad(em_dtype dt, const em_linear_grads *a);

/* cpu_log_softmax_avx2.c, f32 rows on AVX2+FMA: a row's max and log of its sum of exp(x - max)
 * (false, nothing done, without AVX2); the gradients of log_softmax and of em_cpu_cross_entropy
 * (the caller checks the CPU has AVX2). */
bool em_cpu_log_softmax_stats_f32(int64_t n, const float *x, float *max, float *log_sum);
void em_cpu_log_softmax_grad_f32_avx2(int64_t rows, int64_t cols, const float *gy,
                                      const float *y, float *gx);
void em_cpu_cross_entropy_grad_f32_avx2(int64_t rows, int64_t cols, const float *x,
                                        const int64_t *t, const double *stats, const float *g,
                                        float *gx);

/* Between a packed f32 (rows, cols) matrix f and a half one h with row stride ld: f = h widened
 * when widen, else h = f narrowed (round to nearest even); rows, or pieces of one long run, are
 * spread over the threads. */
static inline void em_cpu_half_f32_2d(em_dtype dt, bool widen, float *f, uint16_t *h,
                                      int64_t rows, int64_t cols, int64_t ld)
{
    if (cols == ld) { /* one run */
        cols = rows * cols;
        rows = 1;
    }
    int64_t piece = rows > 1 ? cols : EM_CPU_CONVERT_PIECE;
    int64_t pieces = rows > 1 ? rows : (cols + piece - 1) / piece;
    #pragma omp parallel for if (rows * cols >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t p = 0; p < pieces; p++) {
        int64_t r = rows > 1 ? p : 0, c0 = rows > 1 ? 0 : p * piece;
        int64_t n = cols - c0 < piece ? cols - c0 : piece;
        if (widen)
            em_cpu_half_to_f32_n(dt, f + r * cols + c0, h + r * ld + c0, n);
        else
            em_cpu_f32_to_half_n(dt, h + r * ld + c0, f + r * cols + c0, n);
    }
}

/* dst[i] = src[i] widened, for a (rows, cols) matrix with row stride ld; dst is packed. */
static inline void em_cpu_half_to_f32_2d(em_dtype dt, float *dst, const void *src,
                                         int64_t rows, int64_t cols, int64_t ld)
{
    em_cpu_half_f32_2d(dt, true, dst, (uint16_t *)src, rows, cols, ld);
}

/* dst = src narrowed (round to nearest even), for a (rows, cols) matrix; src is packed. */
static inline void em_cpu_f32_to_half_2d(em_dtype dt, void *dst, const float *src,
                                         int64_t rows, int64_t cols, int64_t ld)
{
    em_cpu_half_f32_2d(dt, false, (float *)src, dst, rows, cols, ld);
}

/* Element i of f32 or (bf16) bf16 data, as f32: a bf16 is the top half of its f32. */
static inline float em_cpu_f32_or_bf16_at(bool bf16, const void *p, int64_t i)
{
    return bf16 ? em_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* A packed f32 copy of n half values, or NULL when out of memory. */
static inline float *em_cpu_widen(em_dtype dt, const void *src, int64_t n)
{
    float *dst = em_cpu_scratch((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (dst)
        em_cpu_half_to_f32_2d(dt, dst, src, 1, n, n);
    return dst;
}

/* A packed f32 buffer of n values, or NULL when out of memory. */
static inline float *em_cpu_f32_buffer(int64_t n)
{
    return em_cpu_scratch((size_t)(n > 0 ? n : 1) * sizeof(float));
}

#endif
