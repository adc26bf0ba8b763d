/* GELU with erf (PyTorch's default gelu) and its gradient over contiguous f32, 8 lanes at a time
 * on AVX2+FMA. With u = x / sqrt(2), 1 + erf(u) is erfc(-u) for u < 0 and 2 - erfc(u) otherwise,
 * and erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), the Chebyshev fit of Numerical Recipes'
 * erfcc: relative error below 1.2e-7 for every z >= 0, so gelu keeps f32 accuracy even far into
 * the negative tail where 1 + erf is tiny. */
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

#define SQRT_HALF 0.70710678118654752440f   /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794f /* 1 / sqrt(2 pi) */

/* 1 + erf(u) of 8 lanes; *gauss gets exp(-u^2) (the gradient's density term) */
EM_AVX2 static inline __m256 one_plus_erf(__m256 u, __m256 *gauss)
{
    static const float c[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f,
                                -0.18628806f, 0.27886807f, -1.13520398f, 1.48851587f,
                                -0.82215223f, 0.17087277f};
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    __m256 z = _mm256_andnot_ps(sign, u);                                  // |u|
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, one));
    __m256 p = _mm256_set1_ps(c[9]);
    for (int i = 8; i >= 0; i--)
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[i]));
    __m256 z2 = _mm256_mul_ps(z, z);
    *gauss = em_exp8_avx2(_mm256_xor_ps(z2, sign));
    __m256 erfc = _mm256_mul_ps(t, em_exp8_avx2(_mm256_sub_ps(p, z2)));   // erfc(|u|)
    __m256 neg = _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, neg);
}

/* y (n) = x / 2 (1 + erf(x / sqrt 2)); the tail that fills no whole vector runs padded */
EM_AVX2 static void gelu_avx2(int64_t n, float *y, const float *x)
{
    const __m256 half = _mm256_set1_ps(0.5f), s = _mm256_set1_ps(SQRT_HALF);
    for (int64_t i = 0; i < n; i += 8) {
        float in[8] = {0}, out[8];
        int64_t m = n - i < 8 ? n - i : 8;
        const float *src = m == 8 ? x + i : in;
        for (int64_t k = 0; m < 8 && k < m; k++)
            in[k] = x[i + k];
        __m256 v = _mm256_loadu_ps(src), g;
        __m256 r = _mm256_mul_ps(_mm256_mul_ps(half, v), one_plus_erf(_mm256_mul_ps(v, s), &g));
        _mm256_storeu_ps(m == 8 ? y + i : out, r);
        for (int64_t k = 0; m < 8 && k < m; k++)
            y[i + k] = out[k];
    }
}

/* gx (n) = gy (1/2 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)) */
EM_AVX2 static void gelu_grad_avx2(int64_t n, float *gx, const float *gy, const float *x)
{
    const __m256 half = _mm256_set1_ps(0.5f), s = _mm256_set1_ps(SQRT_HALF);
    const __m256 k = _mm256_set1_ps(INV_SQRT_2PI);
    for (int64_t i = 0; i < n; i += 8) {
        float xin[8] = {0}, gin[8] = {0}, out[8];
        int64_t m = n - i < 8 ? n - i : 8;
        for (int64_t j = 0; m < 8 && j < m; j++) {
            xin[j] = x[i + j];
            gin[j] = gy[i + j];
        }
        __m256 v = _mm256_loadu_ps(m == 8 ? x + i : xin), g;
        __m256 cdf = _mm256_mul_ps(half, one_plus_erf(_mm256_mul_ps(v, s), &g));
        __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(v, k), g, cdf);
        __m256 r = _mm256_mul_ps(_mm256_loadu_ps(m == 8 ? gy + i : gin), d);
        _mm256_storeu_ps(m == 8 ? gx + i : out, r);
        for (int64_t j = 0; m < 8 && j < m; j++)
            gx[i + j] = out[j];
    }
}

bool em_cpu_gelu_f32(int64_t n, float *y, const float *x)
{
    if (!em_cpu_has_avx2())
        return false;
    gelu_avx2(n, y, x);
    return true;
}

bool em_cpu_gelu_grad_f32(int64_t n, float *gx, const float *gy, const float *x)
{
    if (!em_cpu_has_avx2())
        return false;
    gelu_grad_avx2(n, gx, gy, x);
    return true;
}
