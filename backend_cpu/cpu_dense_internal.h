/* Helpers shared by the CPU dense kernels (gemm, conv, pool, softmax): f16/bf16 buffers are
 * widened to f32, run through the f32 kernel (f32 accumulation) and narrowed back. */
#ifndef EMBER_CPU_DENSE_INTERNAL_H
#define EMBER_CPU_DENSE_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

#include "backend_cpu/cpu_kernels_internal.h"

static inline bool em_cpu_is_half(em_dtype dt)
{
    return dt == EM_F16 || dt == EM_BF16;
}

/* cpu_pool_2x2.c: f32 max pooling over 2x2 windows at stride 2 without padding, when it applies
 * (x (N, C, H, W), y and argmax (N, C, H/2, W/2)). */
bool em_cpu_max_pool2d_2x2_applies(const em_pool2d_shape *s);
void em_cpu_max_pool2d_2x2_f32(const em_pool2d_shape *s, const float *x, float *y,
                               em_pool_tap *argmax);
/* gx (n, c, h, w) = the gradient of that pooling from gy and its argmax, every input written;
 * false (nothing done) where the dense kernel needs AVX-512 the CPU lacks */
bool em_cpu_max_pool2d_2x2_grad_f32(const em_pool2d_shape *s, const float *gy,
                                    const em_pool_tap *argmax, float *gx);

/* dst[i] = src[i] widened, for a (rows, cols) matrix with row stride ld; dst is packed. */
static inline void em_cpu_half_to_f32_2d(em_dtype dt, float *dst, const void *src,
                                         int64_t rows, int64_t cols, int64_t ld)
{
    const uint16_t *s = src; // (rows, ld)
    #pragma omp parallel for collapse(2) if (rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[r * cols + c] = dt == EM_F16 ? em_f16_to_f32(s[r * ld + c])
                                             : em_bf16_to_f32(s[r * ld + c]);
}

/* dst = src narrowed (round to nearest even), for a (rows, cols) matrix; src is packed. */
static inline void em_cpu_f32_to_half_2d(em_dtype dt, void *dst, const float *src,
                                         int64_t rows, int64_t cols, int64_t ld)
{
    uint16_t *d = dst; // (rows, ld)
    #pragma omp parallel for collapse(2) if (rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            d[r * ld + c] = dt == EM_F16 ? em_f32_to_f16(src[r * cols + c])
                                         : em_f32_to_bf16(src[r * cols + c]);
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
