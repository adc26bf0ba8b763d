/* Element conversion between all dtypes on the CPU: a 9x9 table of strided row converters,
 * generated from one load and one store rule per dtype, plus F16C bulk f32 <-> f16. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/convert_internal.h"
#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_features_internal.h"

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

void em_cpu_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n)
{
    if (em_cpu_has_f16c()) {
        f32_to_f16_f16c(dst, src, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = em_f32_to_f16(src[i]);
}

void em_cpu_f16_to_f32_n(float *dst, const uint16_t *src, int64_t n)
{
    if (em_cpu_has_f16c()) {
        f16_to_f32_f16c(dst, src, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = em_f16_to_f32(src[i]);
}
