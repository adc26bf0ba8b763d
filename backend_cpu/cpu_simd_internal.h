/* AVX2+FMA building blocks the CPU kernels share: exp and a horizontal sum over 8 f32 lanes.
 * Functions carry the target attribute, so callers compile without -mavx2 and pick them at run
 * time (em_cpu_has_avx2, em_cpu_use_avx512). */
#ifndef EMBER_CPU_SIMD_INTERNAL_H
#define EMBER_CPU_SIMD_INTERNAL_H

#include <immintrin.h>

#define EM_AVX2 __attribute__((target("avx2,fma")))
/* AVX-512 F, BW, DQ and VL (Skylake-SP and later), where em_cpu_use_avx512 */
#define EM_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
/* A plain loop compiled three times, for AVX-512, AVX2 and the baseline, the widest the CPU has
 * picked at load time: for loops whose lanes are independent, so every width gives the same
 * bits. */
#define EM_WIDEST_LANES __attribute__((target_clones("avx512f", "avx2", "default")))
/* No multiply and add contracted into an FMA in a function marked EM_UNFUSED, so that every
 * width rounds as the baseline does: GCC takes the attribute; clang has no optimize attribute
 * and takes the pragma EM_UNFUSED_BODY, the first line of such a function's body. */
#if defined(__clang__)
#define EM_UNFUSED
#define EM_UNFUSED_BODY _Pragma("clang fp contract(off)")
#else
#define EM_UNFUSED __attribute__((optimize("fp-contract=off")))
#define EM_UNFUSED_BODY
#endif
#define EM_WIDEST_LANES_UNFUSED EM_WIDEST_LANES EM_UNFUSED

/* exp of 8 lanes (Cephes' expf: 2^n times a degree-5 polynomial on [-ln2/2, ln2/2]), about
 * 2 ulp; below -87.3 (and -inf) it gives 0, NaN stays NaN. */
EM_AVX2 static inline __m256 em_exp8_avx2(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3f);
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 t = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    t = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
    t = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), t);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(t, t), _mm256_add_ps(t, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_andnot_ps(tiny, y);
    return _mm256_blendv_ps(y, x, nan);
}

/* the sum of 8 lanes */
EM_AVX2 static inline float em_hsum8_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
