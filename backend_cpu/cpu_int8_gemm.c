/* Dynamic int8 products for quantized Linear layers: activations quantized per call to 7-bit
 * unsigned values, s8 weights packed once, int32 accumulation, f32 output with f32 bias. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* Why 7-bit activations: without VNNI the fastest exact AVX2 product is _mm256_maddubs_epi16
 * (u8 x s8, pairs summed to a saturating s16) then _mm256_madd_epi16 by ones (pairs to s32):
 * three instructions per 32 multiply-adds. With a in 0..127 and w in -128..127 a pair sum is
 * at most 2 * 127 * 128 = 32512 < 2^15, so nothing saturates; full 8-bit activations could
 * reach 2 * 255 * 128 and would saturate. The s8 x s8 sign trick (abs/sign) keeps 8 bits but
 * costs a fourth instruction per step, and widening to 16 bits halves the work per
 * instruction. fbgemm's reduce_range (PyTorch's x86 default) makes the same choice. */

/* Packed weights for (n, k): int32 row sums of w (np), then np / 8 panels of kg groups, each
 * group 8 columns x 4 consecutive k bytes (32 bytes); np = n rounded up to 8, kg = ceil(k / 4);
 * the padding is zero. */
#define PANEL 8
#define KGROUP 4
/* rows of C per micro-tile */
#define MR 4
/* a product below this many multiply-adds runs on one thread */
#define PARALLEL_MIN_MNK (1 << 19)

static int64_t round_up(int64_t v, int64_t to)
{
    return (v + to - 1) / to * to;
}

int64_t em_cpu_int8_packed_size(int64_t n, int64_t k)
{
    int64_t np = round_up(n, PANEL), kg = (k + KGROUP - 1) / KGROUP;
    return np * (int64_t)sizeof(int32_t) + np * kg * KGROUP;
}

int em_cpu_int8_pack(int64_t n, int64_t k, const int8_t *w, void *packed)
{
    const int8_t *wq = w; // (n, k)
    int64_t np = round_up(n, PANEL), kg = (k + KGROUP - 1) / KGROUP;
    int32_t *sums = packed; // (np)
    int8_t *panels = (int8_t *)(sums + np); // (np / 8, kg, 8, 4)
    memset(packed, 0, (size_t)em_cpu_int8_packed_size(n, k));
    for (int64_t j = 0; j < n; j++) {
        int8_t *col = panels + (j / PANEL) * kg * PANEL * KGROUP + (j % PANEL) * KGROUP;
        int32_t s = 0;
        for (int64_t i = 0; i < k; i++) {
            col[(i / KGROUP) * PANEL * KGROUP + i % KGROUP] = wq[j * k + i];
            s += wq[j * k + i];
        }
        sums[j] = s;
    }
    return EM_KERNEL_OK;
}

/* What a tile writes: int32 sums to c, or (epi != NULL) f32
 * y = (sum - zp * rowsum(w)) * scale[j] + bias[j] with per-call padded (np) arrays. */
typedef struct {
    const int32_t *corr; /* (np) zero point x weight row sum */
    const float *scale;  /* (np) activation scale x weight scale */
    const float *bias;   /* (np) */
    bool relu;           /* clamp at 0 */
} epilogue;

/* Group g (4 bytes) of a row of a, reading only the valid bytes of a last, partial group. */
static inline int32_t a_group(const uint8_t *row, int64_t g, int64_t k)
{
    int32_t v = 0;
    int64_t left = k - g * KGROUP;
    memcpy(&v, row + g * KGROUP, (size_t)(left < KGROUP ? left : KGROUP));
    return v;
}

/* Writes cols (<= 8) results of one row from the 8 int32 sums of a panel. */
static inline void store_row(const int32_t *sum, int64_t j0, int cols, const epilogue *epi,
                             void *out, int64_t ldo, int64_t row)
{
    if (!epi) {
        memcpy((int32_t *)out + row * ldo + j0, sum, (size_t)cols * sizeof(int32_t));
        return;
    }
    float *y = (float *)out + row * ldo + j0;
    for (int c = 0; c < cols; c++) {
        y[c] = (float)(sum[c] - epi->corr[j0 + c]) * epi->scale[j0 + c] + epi->bias[j0 + c];
        y[c] = epi->relu && !(y[c] > 0) ? 0.0f : y[c];
    }
}

/* ---- portable path ---- */

static void tile_portable(int mr, const uint8_t *a, int64_t lda, int64_t k, const int8_t *panel,
                          int64_t j0, int cols, const epilogue *epi, void *out, int64_t ldo,
                          int64_t row0)
{
    int64_t kg = (k + KGROUP - 1) / KGROUP;
    for (int r = 0; r < mr; r++) {
        int32_t sum[PANEL] = {0};
        const uint8_t *ar = a + (row0 + r) * lda;
        for (int64_t g = 0; g < kg; g++) {
            int32_t packed_a = a_group(ar, g, k);
            const uint8_t *ab = (const uint8_t *)&packed_a;
            const int8_t *b = panel + g * PANEL * KGROUP;
            for (int c = 0; c < PANEL; c++)
                for (int q = 0; q < KGROUP; q++)
                    sum[c] += (int32_t)ab[q] * b[c * KGROUP + q];
        }
        store_row(sum, j0, cols, epi, out, ldo, row0 + r);
    }
}

/* ---- AVX2 path ---- */

__attribute__((target("avx2,fma"), always_inline)) static inline __m256i
dot4(__m256i acc, __m256i a, __m256i b, __m256i ones)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
}

__attribute__((target("avx2,fma"), always_inline)) static inline void
store_avx2(__m256i sum, int64_t j0, int cols, const epilogue *epi, void *out, int64_t ldo,
           int64_t row)
{
    if (cols == PANEL && !epi) {
        _mm256_storeu_si256((__m256i *)((int32_t *)out + row * ldo + j0), sum);
        return;
    }
    if (cols == PANEL) {
        __m256i v = _mm256_sub_epi32(sum, _mm256_loadu_si256((const __m256i *)(epi->corr + j0)));
        __m256 y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(epi->scale + j0),
                                   _mm256_loadu_ps(epi->bias + j0));
        if (epi->relu)
            y = _mm256_max_ps(y, _mm256_setzero_ps());
        _mm256_storeu_ps((float *)out + row * ldo + j0, y);
        return;
    }
    int32_t s[PANEL];
    _mm256_storeu_si256((__m256i *)s, sum);
    store_row(s, j0, cols, epi, out, ldo, row);
}

static inline int32_t load_a32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One k group of four rows (4-byte groups v0..v3) against two panels. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
quad_step(__m256i *c, int32_t v0, int32_t v1, int32_t v2, int32_t v3, __m256i b0, __m256i b1,
          __m256i ones)
{
    __m256i x = _mm256_set1_epi32(v0);
    c[0] = dot4(c[0], x, b0, ones);
    c[1] = dot4(c[1], x, b1, ones);
    x = _mm256_set1_epi32(v1);
    c[2] = dot4(c[2], x, b0, ones);
    c[3] = dot4(c[3], x, b1, ones);
    x = _mm256_set1_epi32(v2);
    c[4] = dot4(c[4], x, b0, ones);
    c[5] = dot4(c[5], x, b1, ones);
    x = _mm256_set1_epi32(v3);
    c[6] = dot4(c[6], x, b0, ones);
    c[7] = dot4(c[7], x, b1, ones);
}

/* Four rows x two panels (16 columns); cols1 == 0 when only the first panel exists. The eight
 * accumulators are named locals so that they live in registers. */
__attribute__((target("avx2,fma"))) static void
tile4_avx2(const uint8_t *a, int64_t lda, int64_t k, const int8_t *p0, const int8_t *p1,
           int64_t j0, int cols0, int cols1, const epilogue *epi, void *out, int64_t ldo,
           int64_t row0)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c[8];
    for (int i = 0; i < 8; i++)
        c[i] = _mm256_setzero_si256();
    const uint8_t *a0 = a + row0 * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
    int64_t kfull = k / KGROUP;
    for (int64_t g = 0; g < kfull; g++) {
        int64_t o = g * KGROUP;
        quad_step(c, load_a32(a0 + o), load_a32(a1 + o), load_a32(a2 + o), load_a32(a3 + o),
                  _mm256_loadu_si256((const __m256i *)(p0 + g * PANEL * KGROUP)),
                  _mm256_loadu_si256((const __m256i *)(p1 + g * PANEL * KGROUP)), ones);
    }
    if (k % KGROUP) /* the last, partial group */
        quad_step(c, a_group(a0, kfull, k), a_group(a1, kfull, k), a_group(a2, kfull, k),
                  a_group(a3, kfull, k),
                  _mm256_loadu_si256((const __m256i *)(p0 + kfull * PANEL * KGROUP)),
                  _mm256_loadu_si256((const __m256i *)(p1 + kfull * PANEL * KGROUP)), ones);
    for (int r = 0; r < 4; r++) {
        store_avx2(c[2 * r], j0, cols0, epi, out, ldo, row0 + r);
        if (cols1)
            store_avx2(c[2 * r + 1], j0 + PANEL, cols1, epi, out, ldo, row0 + r);
    }
}

/* One row x two panels. */
__attribute__((target("avx2,fma"))) static void
tile1_avx2(const uint8_t *a, int64_t lda, int64_t k, const int8_t *p0, const int8_t *p1,
           int64_t j0, int cols0, int cols1, const epilogue *epi, void *out, int64_t ldo,
           int64_t row)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0;
    const uint8_t *a0 = a + row * lda;
    int64_t kfull = k / KGROUP, kg = (k + KGROUP - 1) / KGROUP;
    for (int64_t g = 0; g < kg; g++) {
        __m256i x = _mm256_set1_epi32(g < kfull ? load_a32(a0 + g * KGROUP)
                                                : a_group(a0, g, k));
        c0 = dot4(c0, x, _mm256_loadu_si256((const __m256i *)(p0 + g * PANEL * KGROUP)), ones);
        c1 = dot4(c1, x, _mm256_loadu_si256((const __m256i *)(p1 + g * PANEL * KGROUP)), ones);
    }
    store_avx2(c0, j0, cols0, epi, out, ldo, row);
    if (cols1)
        store_avx2(c1, j0 + PANEL, cols1, epi, out, ldo, row);
}

__attribute__((target("avx2,fma"))) static void
tile_avx2(int mr, const uint8_t *a, int64_t lda, int64_t k, const int8_t *p0, const int8_t *p1,
          int64_t j0, int cols0, int cols1, const epilogue *epi, void *out, int64_t ldo,
          int64_t row0)
{
    if (mr == 4) {
        tile4_avx2(a, lda, k, p0, p1, j0, cols0, cols1, epi, out, ldo, row0);
        return;
    }
    for (int r = 0; r < mr; r++)
        tile1_avx2(a, lda, k, p0, p1, j0, cols0, cols1, epi, out, ldo, row0 + r);
}

bool em_cpu_has_avx2(void)
{
    static int has = -1;
    if (has < 0)
        has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}

/* out (m, n) from a (m, k) and packed w: int32 sums when epi is NULL, else f32 results.
 * Threads split the columns into blocks of two panels. */
static int gemm_driver(bool avx2, int64_t m, int64_t n, int64_t k, const uint8_t *a,
                       int64_t lda, const void *packed, const epilogue *epi, void *out,
                       int64_t ldo)
{
    if (m < 0 || n < 0 || k < 0 || lda < k || ldo < n || (avx2 && !em_cpu_has_avx2()))
        return EM_KERNEL_UNSUPPORTED;
    int64_t np = round_up(n, PANEL), kg = (k + KGROUP - 1) / KGROUP;
    const int8_t *panels = (const int8_t *)((const int32_t *)packed + np); // (np / 8, kg, 8, 4)
    int64_t blocks = (np / PANEL + 1) / 2, panel_bytes = kg * PANEL * KGROUP;
    #pragma omp parallel for schedule(static) if (m * n * k >= PARALLEL_MIN_MNK)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t j0 = blk * 2 * PANEL;
        int cols0 = (int)(n - j0 < PANEL ? n - j0 : PANEL);
        int64_t left1 = n - j0 - PANEL;
        int cols1 = (int)(left1 <= 0 ? 0 : left1 < PANEL ? left1 : PANEL);
        const int8_t *p0 = panels + (j0 / PANEL) * panel_bytes;
        const int8_t *p1 = cols1 ? p0 + panel_bytes : p0;
        for (int64_t i = 0; i < m; i += MR) {
            int mr = (int)(m - i < MR ? m - i : MR);
            if (avx2) {
                tile_avx2(mr, a, lda, k, p0, p1, j0, cols0, cols1, epi, out, ldo, i);
                continue;
            }
            tile_portable(mr, a, lda, k, p0, j0, cols0, epi, out, ldo, i);
            if (cols1)
                tile_portable(mr, a, lda, k, p1, j0 + PANEL, cols1, epi, out, ldo, i);
        }
    }
    return EM_KERNEL_OK;
}

int em_cpu_int8_gemm_path(bool avx2, int64_t m, int64_t n, int64_t k, const uint8_t *a,
                          int64_t lda, const void *packed, int32_t *c, int64_t ldc)
{
    return gemm_driver(avx2, m, n, k, a, lda, packed, NULL, c, ldc);
}

int em_cpu_int8_gemm(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda,
                     const void *packed, int32_t *c, int64_t ldc)
{
    return gemm_driver(em_cpu_has_avx2(), m, n, k, a, lda, packed, NULL, c, ldc);
}

/* y (m, n) = the dequantized product of a and packed w (see em_cpu_int8_gemm_dequant). */
static int gemm_dequant(bool avx2, int64_t m, int64_t n, int64_t k, const uint8_t *a,
                        int64_t lda, const void *packed, float x_scale, int32_t x_zero_point,
                        const float *w_scale, int64_t n_scales, const float *bias, bool relu,
                        float *y, int64_t ldy)
{
    int64_t np = round_up(n, PANEL);
    float *scale = em_cpu_scratch((size_t)np * (2 * sizeof(float) + sizeof(int32_t)));
    if (!scale)
        return EM_KERNEL_FAILED;
    float *b = scale + np;               // (np)
    int32_t *corr = (int32_t *)(b + np); // (np)
    const int32_t *sums = packed;        // (np)
    for (int64_t j = 0; j < np; j++) {
        bool real = j < n;
        scale[j] = real ? x_scale * w_scale[n_scales == 1 ? 0 : j] : 0;
        b[j] = real && bias ? bias[j] : 0;
        corr[j] = x_zero_point * sums[j];
    }
    epilogue epi = {.corr = corr, .scale = scale, .bias = b, .relu = relu};
    int rc = gemm_driver(avx2, m, n, k, a, lda, packed, &epi, y, ldy);
    em_cpu_scratch_free(scale);
    return rc;
}

int em_cpu_int8_gemm_dequant(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda,
                             const void *packed, float x_scale, int32_t x_zero_point,
                             const float *w_scale, int64_t n_scales, const float *bias,
                             bool relu, float *y, int64_t ldy)
{
    if (n_scales != 1 && n_scales != n)
        return EM_KERNEL_UNSUPPORTED;
    return gemm_dequant(em_cpu_has_avx2(), m, n, k, a, lda, packed, x_scale, x_zero_point,
                        w_scale, n_scales, bias, relu, y, ldy);
}

/* ---- activation quantization ---- */

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

__attribute__((target("avx2,fma"))) static void minmax_avx2(const float *x, int64_t n,
                                                            float *mn, float *mx)
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

__attribute__((target("avx2,fma"))) static void quantize_row_avx2(const float *x, int64_t n,
                                                                  float inv, float zp,
                                                                  uint8_t *q)
{
    const __m256 vinv = _mm256_set1_ps(inv), vzp = _mm256_set1_ps(zp);
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps((float)EM_CPU_U7_MAX);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
        v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vzp);
        v = _mm256_min_ps(_mm256_max_ps(v, zero), top); /* max_ps(NaN, 0) is 0 */
        __m256i w = _mm256_cvttps_epi32(v);
        __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
        __m128i p = _mm_packus_epi16(_mm_packus_epi32(lo, hi), _mm_setzero_si128());
        _mm_storel_epi64((__m128i *)(q + i), p);
    }
    for (; i < n; i++)
        q[i] = quantize_one(x[i], inv, zp);
}

static void quantize_rows_fixed(bool avx2, int64_t m, int64_t k, const float *x, float scale,
                                int32_t zero_point, uint8_t *q, int64_t ldq)
{
    float inv = 1.0f / scale, zp = (float)zero_point;
    for (int64_t r = 0; r < m; r++) {
        if (avx2)
            quantize_row_avx2(x + r * k, k, inv, zp, q + r * ldq);
        else
            for (int64_t i = 0; i < k; i++)
                q[r * ldq + i] = quantize_one(x[r * k + i], inv, zp);
        memset(q + r * ldq + k, 0, (size_t)(ldq - k));
    }
}

void em_cpu_quantize_rows_u7(int64_t m, int64_t k, const float *x, float scale,
                             int32_t zero_point, uint8_t *q, int64_t ldq)
{
    quantize_rows_fixed(em_cpu_has_avx2(), m, k, x, scale, zero_point, q, ldq);
}

/* q (m, ldq) = x (m, k) quantized with the tensor's range; pad bytes k..ldq-1 are zero. */
static void quantize_rows(bool avx2, int64_t m, int64_t k, const float *x, uint8_t *q,
                          int64_t ldq, float *scale, int32_t *zero_point)
{
    float mn = INFINITY, mx = -INFINITY;
    if (avx2)
        minmax_avx2(x, m * k, &mn, &mx);
    else
        for (int64_t i = 0; i < m * k; i++) {
            mn = fminf(mn, x[i]);
            mx = fmaxf(mx, x[i]);
        }
    bool any = m > 0 && k > 0;
    em_cpu_qparams_u7(any ? mn : 0, any ? mx : 0, scale, zero_point);
    quantize_rows_fixed(avx2, m, k, x, *scale, *zero_point, q, ldq);
}

int em_cpu_quantize_u7(int64_t n, const float *x, uint8_t *q, float *scale, int32_t *zero_point)
{
    quantize_rows(em_cpu_has_avx2(), 1, n, x, q, n, scale, zero_point);
    return EM_KERNEL_OK;
}

int em_cpu_qlinear_dynamic_path(bool avx2, int64_t m, int64_t n, int64_t k, const float *x,
                                const void *packed, const float *w_scale, int64_t n_scales,
                                const float *bias, float *y)
{
    if (m < 0 || n < 0 || k < 0 || (n_scales != 1 && n_scales != n) ||
        (avx2 && !em_cpu_has_avx2()))
        return EM_KERNEL_UNSUPPORTED;
    int64_t lda = round_up(k > 0 ? k : 1, KGROUP);
    uint8_t *q = em_cpu_scratch((size_t)(m * lda > 0 ? m * lda : 1)); // (m, lda)
    if (!q)
        return EM_KERNEL_FAILED;
    float sx;
    int32_t zp;
    quantize_rows(avx2, m, k, x, q, lda, &sx, &zp);
    int rc = gemm_dequant(avx2, m, n, k, q, lda, packed, sx, zp, w_scale, n_scales, bias, false,
                          y, n);
    em_cpu_scratch_free(q);
    return rc;
}

int em_cpu_qlinear_dynamic(int64_t m, int64_t n, int64_t k, const float *x, const void *packed,
                           const float *w_scale, int64_t n_scales, const float *bias, float *y)
{
    return em_cpu_qlinear_dynamic_path(em_cpu_has_avx2(), m, n, k, x, packed, w_scale, n_scales,
                                       bias, y);
}
