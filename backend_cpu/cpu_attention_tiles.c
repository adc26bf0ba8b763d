/* Tile products and score-row operations of the CPU attention kernels: portable C for f32 and
 * f64, and f32 on AVX2+FMA (a 4-row x 16-column register tile for the products, a polynomial
 * exp over 8 lanes, 8 x 8 transposes in registers). */
#include <immintrin.h>
#include <math.h>

#include "backend_cpu/cpu_attention_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* ---- portable C, one body per real type ---- */

#define DEFINE_PORTABLE_TILES(REAL, EXP, SUFFIX)                                                  \
    static void matmul_##SUFFIX(int64_t m, int64_t n, int64_t k, const void *a_, int64_t a_row,   \
                                int64_t a_col, const void *b_, int64_t ldb, void *c_,             \
                                int64_t ldc, bool accumulate, em_att_tri tri)                     \
    {                                                                                             \
        const REAL *a = a_, *b = b_;                                                              \
        REAL *c = c_;                                                                             \
        for (int64_t i = 0; i < m; i++) {                                                         \
            REAL *ci = c + i * ldc;                                                               \
            if (!accumulate)                                                                      \
                for (int64_t j = 0; j < n; j++)                                                   \
                    ci[j] = 0;                                                                    \
            int64_t l0 = tri == EM_ATT_A_UPPER ? i : 0;                                           \
            int64_t l1 = tri == EM_ATT_A_LOWER && i + 1 < k ? i + 1 : k;                          \
            for (int64_t l = l0; l < l1; l++) {                                                   \
                const REAL ail = a[i * a_row + l * a_col];                                        \
                const REAL *bl = b + l * ldb;                                                     \
                for (int64_t j = 0; j < n; j++)                                                   \
                    ci[j] += ail * bl[j];                                                         \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    static double exp_sum_##SUFFIX(int64_t n, const void *x_, double sub, void *y_)               \
    {                                                                                             \
        const REAL *x = x_;                                                                       \
        REAL *y = y_;                                                                             \
        double sum = 0;                                                                           \
        for (int64_t j = 0; j < n; j++) {                                                         \
            y[j] = EXP(x[j] - (REAL)sub);                                                         \
            sum += y[j];                                                                          \
        }                                                                                         \
        return sum;                                                                               \
    }                                                                                             \
    static double row_max_##SUFFIX(int64_t n, const void *x_)                                     \
    {                                                                                             \
        const REAL *x = x_;                                                                       \
        REAL mx = -INFINITY;                                                                      \
        for (int64_t j = 0; j < n; j++)                                                           \
            mx = x[j] > mx || isnan(x[j]) ? x[j] : mx;                                            \
        return mx;                                                                                \
    }                                                                                             \
    static void transpose_##SUFFIX(int64_t rows, int64_t n, const void *src_, int64_t src_row,    \
                                   double scale, void *dst_, int64_t ldd)                         \
    {                                                                                             \
        const REAL *src = src_;                                                                   \
        REAL *dst = dst_;                                                                         \
        for (int64_t r = 0; r < rows; r++)                                                        \
            for (int64_t x = 0; x < n; x++)                                                       \
                dst[x * ldd + r] = (REAL)scale * src[r * src_row + x];                            \
    }                                                                                             \
    static const em_att_tiles tiles_##SUFFIX = {matmul_##SUFFIX, exp_sum_##SUFFIX,                \
                                                row_max_##SUFFIX, transpose_##SUFFIX};

DEFINE_PORTABLE_TILES(float, expf, f32)
DEFINE_PORTABLE_TILES(double, exp, f64)

/* ---- f32 on AVX2+FMA ---- */

/* c (4, 16) (+)= a (4, k) @ b (k, 16), the 8 accumulators in registers */
EM_AVX2 static void tile_4x16(int64_t k, const float *a, int64_t a_row, int64_t a_col,
                           const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
    __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    if (accumulate) {
        c00 = _mm256_loadu_ps(c);
        c01 = _mm256_loadu_ps(c + 8);
        c10 = _mm256_loadu_ps(c + ldc);
        c11 = _mm256_loadu_ps(c + ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc);
        c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc);
        c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    }
    const float *a0 = a, *a1 = a + a_row, *a2 = a + 2 * a_row, *a3 = a + 3 * a_row;
    for (int64_t l = 0; l < k; l++, b += ldb) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
        x = _mm256_broadcast_ss(a0 + l * a_col);
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a1 + l * a_col);
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a2 + l * a_col);
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a3 + l * a_col);
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
    }
    _mm256_storeu_ps(c, c00);
    _mm256_storeu_ps(c + 8, c01);
    _mm256_storeu_ps(c + ldc, c10);
    _mm256_storeu_ps(c + ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20);
    _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30);
    _mm256_storeu_ps(c + 3 * ldc + 8, c31);
}

/* c (1, 16) (+)= a (1, k) @ b (k, 16) */
EM_AVX2 static void tile_1x16(int64_t k, const float *a, int64_t a_col, const float *b,
                           int64_t ldb, float *c, bool accumulate)
{
    __m256 c0 = accumulate ? _mm256_loadu_ps(c) : _mm256_setzero_ps();
    __m256 c1 = accumulate ? _mm256_loadu_ps(c + 8) : _mm256_setzero_ps();
    for (int64_t l = 0; l < k; l++, b += ldb) {
        __m256 x = _mm256_broadcast_ss(a + l * a_col);
        c0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b), c0);
        c1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 8), c1);
    }
    _mm256_storeu_ps(c, c0);
    _mm256_storeu_ps(c + 8, c1);
}

/* The terms l0..l1 of rows i..i+rows of a product, tri as em_att_tiles.matmul's */
static inline void tri_terms(em_att_tri tri, int64_t i, int64_t rows, int64_t k, int64_t *l0,
                             int64_t *l1)
{
    *l0 = tri == EM_ATT_A_UPPER ? (i < k ? i : k) : 0;
    *l1 = tri == EM_ATT_A_LOWER && i + rows < k ? i + rows : k;
}

EM_AVX2 static void matmul_avx2(int64_t m, int64_t n, int64_t k, const void *a_, int64_t a_row,
                             int64_t a_col, const void *b_, int64_t ldb, void *c_, int64_t ldc,
                             bool accumulate, em_att_tri tri)
{
    const float *a = a_, *b = b_;
    float *c = c_;
    for (int64_t j = 0; j < n; j += 16) {
        int64_t i = tri == EM_ATT_C_LOWER ? j / 4 * 4 : 0, l0, l1; /* rows above j: masked */
        for (; i + 4 <= m; i += 4) {
            tri_terms(tri, i, 4, k, &l0, &l1);
            tile_4x16(l1 - l0, a + i * a_row + l0 * a_col, a_row, a_col, b + l0 * ldb + j, ldb,
                      c + i * ldc + j, ldc, accumulate);
        }
        for (; i < m; i++) {
            tri_terms(tri, i, 1, k, &l0, &l1);
            tile_1x16(l1 - l0, a + i * a_row + l0 * a_col, a_col, b + l0 * ldb + j, ldb,
                      c + i * ldc + j, accumulate);
        }
    }
}

/* The lanes of a vector before `count`, as a mask for the loads and stores of a row's tail */
EM_AVX2 static inline __m256i lanes_before(int64_t count)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The tail of a row (under 8 values, as rows on the causal diagonal mostly end) in one masked
 * vector: its missing lanes read -inf, whose exp is 0 in the sum, and are not stored. */
EM_AVX2 static double exp_sum_avx2(int64_t n, const void *x_, double sub, void *y_)
{
    const float *x = x_;
    float *y = y_;
    __m256 s = _mm256_set1_ps((float)sub), acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = em_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + j), s));
        _mm256_storeu_ps(y + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (j < n) {
        __m256i in = lanes_before(n - j);
        __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + j, in),
                                    _mm256_castsi256_ps(in));
        __m256 e = em_exp8_avx2(_mm256_sub_ps(v, s));
        _mm256_maskstore_ps(y + j, in, e);
        acc = _mm256_add_ps(acc, e);
    }
    return em_hsum8_avx2(acc);
}

EM_AVX2 static double row_max_avx2(int64_t n, const void *x_)
{
    const float *x = x_;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + j));
    float lanes[8], m = -INFINITY;
    _mm256_storeu_ps(lanes, mx);
    for (int t = 0; t < 8; t++)
        m = lanes[t] > m ? lanes[t] : m;
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* How many rows past the 8 being transposed the transpose asks the cache for: the rows of one
 * head lie far apart in a packed (B, T, 3 E) projection, a cache miss each without it. */
#define TRANSPOSE_PREFETCH_ROWS 16

/* dst (8, 8) = s * the 8 x 8 block at src (row stride src_row), transposed */
EM_AVX2 static void transpose_8x8(const float *src, int64_t src_row, __m256 s, float *dst,
                                  int64_t ldd)
{
    __m256 r0 = _mm256_mul_ps(s, _mm256_loadu_ps(src));
    __m256 r1 = _mm256_mul_ps(s, _mm256_loadu_ps(src + src_row));
    __m256 r2 = _mm256_mul_ps(s, _mm256_loadu_ps(src + 2 * src_row));
    __m256 r3 = _mm256_mul_ps(s, _mm256_loadu_ps(src + 3 * src_row));
    __m256 r4 = _mm256_mul_ps(s, _mm256_loadu_ps(src + 4 * src_row));
    __m256 r5 = _mm256_mul_ps(s, _mm256_loadu_ps(src + 5 * src_row));
    __m256 r6 = _mm256_mul_ps(s, _mm256_loadu_ps(src + 6 * src_row));
    __m256 r7 = _mm256_mul_ps(s, _mm256_loadu_ps(src + 7 * src_row));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* Blocks of 8 x 8 in registers, the rows TRANSPOSE_PREFETCH_ROWS on asked for; the edges of
 * rows or n not a multiple of 8 element by element */
EM_AVX2 static void transpose_avx2(int64_t rows, int64_t n, const void *src_, int64_t src_row,
                                   double scale, void *dst_, int64_t ldd)
{
    const float *src = src_;
    float *dst = dst_;
    const float sc = (float)scale;
    const __m256 s = _mm256_set1_ps(sc);
    const int64_t rows8 = rows / 8 * 8, n8 = n / 8 * 8;
    for (int64_t r = 0; r < rows8; r += 8) {
        for (int64_t ahead = r + TRANSPOSE_PREFETCH_ROWS;
             ahead < r + TRANSPOSE_PREFETCH_ROWS + 8 && ahead < rows; ahead++)
            for (int64_t x = 0; x < n; x += 16)
                __builtin_prefetch(src + ahead * src_row + x);
        for (int64_t x = 0; x < n8; x += 8)
            transpose_8x8(src + r * src_row + x, src_row, s, dst + x * ldd + r, ldd);
        for (int64_t x = n8; x < n; x++)
            for (int64_t i = r; i < r + 8; i++)
                dst[x * ldd + i] = sc * src[i * src_row + x];
    }
    for (int64_t r = rows8; r < rows; r++)
        for (int64_t x = 0; x < n; x++)
            dst[x * ldd + r] = sc * src[r * src_row + x];
}

static const em_att_tiles tiles_avx2 = {matmul_avx2, exp_sum_avx2, row_max_avx2, transpose_avx2};

const em_att_tiles *em_cpu_att_tiles_f32(bool avx2)
{
    return avx2 && em_cpu_has_avx2() ? &tiles_avx2 : &tiles_f32;
}

const em_att_tiles *em_cpu_att_tiles_f64(void)
{
    return &tiles_f64;
}
