/* Element conversion between all dtypes on the CPU: a 9x9 table of strided row converters,
 * generated from one load and one store rule per dtype, plus vector bulk f32 <-> f16/bf16. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/convert_internal.h"
#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* load rules: the natural C value of one stored element (bool8 is the 1-byte bool dtype) */
#define LOAD_f32(p) (*(const float *)(p))
#define LOAD_f64(p) (*(const double *)(p))
#define LOAD_f16(p) em_f16_to_f32(*(const uint16_t *)(p))
#define LOAD_bf16(p) em_bf16_to_f32(*(const uint16_t *)(p))
#define LOAD_i8(p) (*(const int8_t *)(p))
#define LOAD_u8(p) (*(const uint8_t *)(p))
#define LOAD_i32(p) (*(const int32_t *)(p))
#define LOAD_i64(p) (*(const int64_t *)(p))
#define LOAD_bool8(p) ((uint8_t)(*(const uint8_t *)(p) != 0))

/* store rules, by the C type of the value */
#define TO_INT(T, v) \
    _Generic((v), float: (T)em_f64_to_i64(v), double: (T)em_f64_to_i64(v), default: (T)(v))
#define TO_HALF(fn, v) _Generic((v), float: fn(v), default: fn(em_f64_to_f32_odd((double)(v))))
#define STORE_f32(p, v) (*(float *)(p) = (float)(v))
#define STORE_f64(p, v) (*(double *)(p) = (double)(v))
#define STORE_f16(p, v) (*(uint16_t *)(p) = TO_HALF(em_f32_to_f16, v))
#define STORE_bf16(p, v) (*(uint16_t *)(p) = TO_HALF(em_f32_to_bf16, v))
#define STORE_i8(p, v) (*(int8_t *)(p) = TO_INT(int8_t, v))
#define STORE_u8(p, v) (*(uint8_t *)(p) = TO_INT(uint8_t, v))
#define STORE_i32(p, v) (*(int32_t *)(p) = TO_INT(int32_t, v))
#define STORE_i64(p, v) (*(int64_t *)(p) = TO_INT(int64_t, v))
#define STORE_bool8(p, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))

#define DEFINE_CONVERT(S, D)                                                                  \
    static void convert_##S##_##D(char *dst, int64_t dst_step, const char *src,               \
                                  int64_t src_step, int64_t n)                                \
    {                                                                                         \
        for (int64_t i = 0; i < n; i++)                                                       \
            STORE_##D(dst + i * dst_step, LOAD_##S(src + i * src_step));                      \
    }

#define FOR_EACH_DTYPE(X, S) X(S, f32) X(S, f64) X(S, f16) X(S, bf16) X(S, i8) X(S, u8) \
    X(S, i32) X(S, i64) X(S, bool8)
#define DEFINE_FROM(S) FOR_EACH_DTYPE(DEFINE_CONVERT, S)
DEFINE_FROM(f32)
DEFINE_FROM(f64)
DEFINE_FROM(f16)
DEFINE_FROM(bf16)
DEFINE_FROM(i8)
DEFINE_FROM(u8)
DEFINE_FROM(i32)
DEFINE_FROM(i64)
DEFINE_FROM(bool8)

#define ENTRY(S, D) convert_##S##_##D,
#define ROW(S) {FOR_EACH_DTYPE(ENTRY, S)},
/* indexed [src][dst] in em_dtype order */
static const em_cpu_convert_fn converters[EM_NDTYPES][EM_NDTYPES] = {
    ROW(f32) ROW(f64) ROW(f16) ROW(bf16) ROW(i8) ROW(u8) ROW(i32) ROW(i64) ROW(bool8)};

em_cpu_convert_fn em_cpu_converter(em_dtype src, em_dtype dst)
{
    return converters[src][dst];
}

__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src,
                                                                 int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        dst[i] = em_f32_to_f16(src[i]);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                 int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++)
        dst[i] = em_f16_to_f32(src[i]);
}

/* em_f32_to_bf16 sixteen lanes at a time (em_store_bf16x16_avx2). */
EM_AVX2 static void f32_to_bf16_avx2(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        em_store_bf16x16_avx2(dst + i, _mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8));
    for (; i < n; i++)
        dst[i] = em_f32_to_bf16(src[i]);
}

/* em_f32_to_bf16 on AVX512_BF16's conversion, which rounds to nearest even and quiets NaN as
 * em_f32_to_bf16 does (the top 16 bits, the quiet bit set) but takes a subnormal input as zero:
 * lanes holding one (the "denormal" class) are rounded by the integer rule instead (adding
 * 0x7fff and the kept part's lowest bit, then dropping 16 bits). Sixteen f32 of f into bf16. */
#define BF16_CONVERT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
BF16_CONVERT static inline __m256i bf16x16_avx512(__m512 f)
{
    __m256i h = (__m256i)_mm512_cvtneps_pbh(f);
    const __mmask16 subnormal = _mm512_fpclass_ps_mask(f, 0x20);
    if (subnormal) {
        const __m512i b = _mm512_castps_si512(f);
        const __m512i even = _mm512_add_epi32(
            _mm512_set1_epi32(0x7fff), _mm512_and_si512(_mm512_srli_epi32(b, 16),
                                                        _mm512_set1_epi32(1)));
        const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(b, even), 16);
        h = _mm256_mask_mov_epi16(h, subnormal, _mm512_cvtepi32_epi16(rounded));
    }
    return h;
}

/* 32 values a step with whole loads and stores (one conversion of two vectors where neither
 * holds a subnormal), the rest 16 at a time masked: twice the rate of a masked 16 a step (2.1
 * -> 1.3 us for 25,088 values in L2 on Zen 4), which the narrowing of activations under bf16
 * autocast pays wherever a kernel writes f32 first. */
BF16_CONVERT static void f32_to_bf16_avx512(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 f0 = _mm512_loadu_ps(src + i), f1 = _mm512_loadu_ps(src + i + 16);
        __m512i h = (__m512i)_mm512_cvtne2ps_pbh(f1, f0);
        if (_mm512_fpclass_ps_mask(f0, 0x20) | _mm512_fpclass_ps_mask(f1, 0x20))
            h = _mm512_inserti64x4(_mm512_castsi256_si512(bf16x16_avx512(f0)),
                                   bf16x16_avx512(f1), 1);
        _mm512_storeu_si512(dst + i, h);
    }
    for (; i < n; i += 16) {
        const __mmask16 keep = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(dst + i, keep,
                                 bf16x16_avx512(_mm512_maskz_loadu_ps(keep, src + i)));
    }
}

__attribute__((target("avx2"))) static void bf16_to_f32_avx2(float *dst, const uint16_t *src,
                                                              int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(h, 16));
    }
    for (; i < n; i++)
        dst[i] = em_bf16_to_f32(src[i]);
}

void em_cpu_f32_to_half_n(em_dtype dt, uint16_t *dst, const float *src, int64_t n)
{
    if (dt == EM_F16 && em_cpu_has_f16c()) {
        f32_to_f16_f16c(dst, src, n);
    } else if (dt == EM_BF16 && em_cpu_has_avx512_bf16()) {
        f32_to_bf16_avx512(dst, src, n);
    } else if (dt == EM_BF16 && em_cpu_has_avx2()) {
        f32_to_bf16_avx2(dst, src, n);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = dt == EM_F16 ? em_f32_to_f16(src[i]) : em_f32_to_bf16(src[i]);
    }
}

void em_cpu_half_to_f32_n(em_dtype dt, float *dst, const uint16_t *src, int64_t n)
{
    if (dt == EM_F16 && em_cpu_has_f16c()) {
        f16_to_f32_f16c(dst, src, n);
    } else if (dt == EM_BF16 && em_cpu_has_avx2()) {
        bf16_to_f32_avx2(dst, src, n);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = dt == EM_F16 ? em_f16_to_f32(src[i]) : em_bf16_to_f32(src[i]);
    }
}
