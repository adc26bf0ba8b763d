/* AVX2+FMA building blocks the CPU kernels share: exp and a horizontal sum over 8 f32 lanes.
 * Functions carry the target attribute, so callers compile without -mavx2 and pick them at run
 * time (em_cpu_has_avx2, em_cpu_use_avx512). */
#ifndef EMBER_CPU_SIMD_INTERNAL_H
#define EMBER_CPU_SIMD_INTERNAL_H

#include <immintrin.h>
#include <stdint.h>

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

/* Eight f32 lanes (as bits) rounded to bf16 as em_f32_to_bf16 rounds (nearest even; a NaN made
 * quiet, its top payload bits kept): each lane's bf16 bits in its low half. */
EM_AVX2 static inline __m256i em_bf16_bits8_avx2(__m256i f)
{
    const __m256i top = _mm256_srli_epi32(f, 16);
    const __m256i even = _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                          _mm256_and_si256(top, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(f, even), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(f, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
}

/* dst (16) = the 16 f32 of lo, hi rounded to bf16 (em_bf16_bits8_avx2). */
EM_AVX2 static inline void em_store_bf16x16_avx2(uint16_t *dst, __m256 lo, __m256 hi)
{
    /* pack within 128-bit lanes (values < 2^16, so no saturation), then restore order */
    const __m256i packed = _mm256_packus_epi32(em_bf16_bits8_avx2(_mm256_castps_si256(lo)),
                                               em_bf16_bits8_avx2(_mm256_castps_si256(hi)));
    _mm256_storeu_si256((__m256i *)dst, _mm256_permute4x64_epi64(packed, 0xd8));
}

#endif
