/* Activation quantization for the int8 products: 7-bit unsigned values (see cpu_int8_gemm.c),
 * per tensor, with calibrated parameters or those of the tensor's own range. */
#include <math.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_int8_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

void em_cpu_qparams_u7(float min, float max, float *scale, int32_t *zero_point)
{
    float lo = min < 0 ? min : 0, hi = max > 0 ? max : 0;
    float s = (hi - lo) / (float)EM_CPU_U7_MAX;
    if (!(s > 0) || !isfinite(s) || !isfinite(1.0f / s))
        s = 1.0f;
    float z = nearbyintf(-lo / s);
    *scale = s;
    *zero_point = (int32_t)(z < 0 ? 0 : z > EM_CPU_U7_MAX ? EM_CPU_U7_MAX : z);
}

static inline uint8_t quantize_one(float x, float inv, float zp)
{
    float q = fmaxf(nearbyintf(x * inv) + zp, 0.0f); /* NaN becomes 0 */
    return (uint8_t)fminf(q, (float)EM_CPU_U7_MAX);
}

EM_AVX2 static void minmax_avx2(const float *x, int64_t n, float *mn, float *mx)
{
    __m256 lo = _mm256_set1_ps(INFINITY), hi = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        lo = _mm256_min_ps(lo, v);
        hi = _mm256_max_ps(hi, v);
    }
    float l[8], h[8];
    _mm256_storeu_ps(l, lo);
    _mm256_storeu_ps(h, hi);
    for (int j = 0; j < 8; j++) {
        *mn = fminf(*mn, l[j]);
        *mx = fmaxf(*mx, h[j]);
    }
    for (; i < n; i++) {
        *mn = fminf(*mn, x[i]);
        *mx = fmaxf(*mx, x[i]);
    }
}

/* 8 values to the low 8 bytes */
EM_AVX2 static inline __m128i quantize8(__m256 v, __m256 inv, __m256 zp)
{
    v = _mm256_mul_ps(v, inv);
    v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), /* max_ps(NaN, 0) is 0 */
                      _mm256_set1_ps((float)EM_CPU_U7_MAX));
    __m256i w = _mm256_cvttps_epi32(v);
    __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
    return _mm_packus_epi16(_mm_packus_epi32(lo, hi), _mm_setzero_si128());
}

EM_AVX2 static void quantize_avx2(const float *x, int64_t n, float inv, float zp, uint8_t *q)
{
    const __m256 vinv = _mm256_set1_ps(inv), vzp = _mm256_set1_ps(zp);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storel_epi64((__m128i *)(q + i), quantize8(_mm256_loadu_ps(x + i), vinv, vzp));
    if (i == n)
        return;
    float tail[8] = {0};
    uint8_t out[16];
    memcpy(tail, x + i, (size_t)(n - i) * sizeof(float));
    _mm_storeu_si128((__m128i *)out, quantize8(_mm256_loadu_ps(tail), vinv, vzp));
    memcpy(q + i, out, (size_t)(n - i));
}

/* Values per piece of a quantization spread over the threads: fixed pieces, so a range and the
 * bytes are the same on any number of threads. A batch of 64 x 784 (range and bytes), best of
 * 2000 calls on a busy 2-core Zen 4 EPYC: 12.5 us in one pass, 10.8 us in pieces on one thread,
 * 7.9 us on two. */
#define QUANT_PIECE 8192

/* q (n) from x (n), one piece */
static void quantize_piece(bool avx2, int64_t n, const float *x, float inv, float zp, uint8_t *q)
{
    if (avx2) {
        quantize_avx2(x, n, inv, zp, q);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = quantize_one(x[i], inv, zp);
}

/* x (n) quantized into q, a task per QUANT_PIECE values */
typedef struct {
    bool avx2;
    int64_t n;
    const float *x;
    float inv, zp;
    uint8_t *q;
} quantize_pieces;

static void quantize_task(void *ctx, int64_t t)
{
    const quantize_pieces *c = ctx;
    const int64_t i = t * QUANT_PIECE;
    quantize_piece(c->avx2, c->n - i < QUANT_PIECE ? c->n - i : QUANT_PIECE, c->x + i, c->inv,
                   c->zp, c->q + i);
}

void em_int8_quantize_fixed(bool avx2, int64_t n, const float *x, float scale,
                            int32_t zero_point, uint8_t *q)
{
    quantize_pieces c = {avx2, n, x, 1.0f / scale, (float)zero_point, q};
    em_cpu_run_tasks((n + QUANT_PIECE - 1) / QUANT_PIECE, true, quantize_task, &c);
}

/* The smallest and largest of x (n) into *mn, *mx, one piece */
static void range_piece(bool avx2, int64_t n, const float *x, float *mn, float *mx)
{
    *mn = INFINITY;
    *mx = -INFINITY;
    if (avx2) {
        minmax_avx2(x, n, mn, mx);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        *mn = fminf(*mn, x[i]);
        *mx = fmaxf(*mx, x[i]);
    }
}

void em_int8_quantize_range(bool avx2, int64_t n, const float *x, uint8_t *q, float *scale,
                            int32_t *zero_point)
{
    const int64_t pieces = (n + QUANT_PIECE - 1) / QUANT_PIECE;
    float *lo = pieces > 1 ? em_cpu_scratch(2 * (size_t)pieces * sizeof(float)) : NULL;
    float mn = INFINITY, mx = -INFINITY;
    if (!lo) {
        range_piece(avx2, n, x, &mn, &mx);
    } else {
        float *hi = lo + pieces; // (pieces) beside lo's
        #pragma omp parallel for num_threads(em_cpu_threads())
        for (int64_t p = 0; p < pieces; p++) {
            const int64_t at = p * QUANT_PIECE;
            range_piece(avx2, n - at < QUANT_PIECE ? n - at : QUANT_PIECE, x + at, lo + p, hi + p);
        }
        for (int64_t p = 0; p < pieces; p++) { /* in order: NaN as the one pass met it */
            mn = fminf(mn, lo[p]);
            mx = fmaxf(mx, hi[p]);
        }
        em_cpu_scratch_free(lo);
    }
    em_cpu_qparams_u7(n > 0 ? mn : 0, n > 0 ? mx : 0, scale, zero_point);
    em_int8_quantize_fixed(avx2, n, x, *scale, *zero_point, q);
}

int em_cpu_quantize_u7(int64_t n, const float *x, uint8_t *q, float *scale, int32_t *zero_point)
{
    em_int8_quantize_range(em_cpu_has_avx2(), n, x, q, scale, zero_point);
    return EM_KERNEL_OK;
}
