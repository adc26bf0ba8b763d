/* Tile products and score-row operations of the CPU attention kernels: portable C for f32 and
 * f64, and f32 on AVX2+FMA (a 4-row x 16-column register tile for the products, a polynomial
 * exp over 8 lanes). */
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
                                int64_t ldc, bool accumulate)                                     \
    {                                                                                             \
        const REAL *a = a_, *b = b_;                                                              \
        REAL *c = c_;                                                                             \
        for (int64_t i = 0; i < m; i++) {                                                         \
            REAL *ci = c + i * ldc;                                                               \
            if (!accumulate)                                                                      \
                for (int64_t j = 0; j < n; j++)                                                   \
                    ci[j] = 0;                                                                    \
            for (int64_t l = 0; l < k; l++) {                                                     \
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
    static const em_att_tiles tiles_##SUFFIX = {matmul_##SUFFIX, exp_sum_##SUFFIX,                \
                                                row_max_##SUFFIX};

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

EM_AVX2 static void matmul_avx2(int64_t m, int64_t n, int64_t k, const void *a_, int64_t a_row,
                             int64_t a_col, const void *b_, int64_t ldb, void *c_, int64_t ldc,
                             bool accumulate)
{
    const float *a = a_, *b = b_;
    float *c = c_;
    for (int64_t j = 0; j < n; j += 16) {
        int64_t i = 0;
        for (; i + 4 <= m; i += 4)
            tile_4x16(k, a + i * a_row, a_row, a_col, b + j, ldb, c + i * ldc + j, ldc,
                      accumulate);
        for (; i < m; i++)
            tile_1x16(k, a + i * a_row, a_col, b + j, ldb, c + i * ldc + j, accumulate);
    }
}

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
    double sum = em_hsum8_avx2(acc);
    if (j < n) {
        float in[8] = {0}, out[8];
        for (int64_t t = j; t < n; t++)
            in[t - j] = x[t];
        _mm256_storeu_ps(out, em_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(in), s)));
        for (int64_t t = j; t < n; t++) {
            y[t] = out[t - j];
            sum += out[t - j];
        }
    }
    return sum;
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

static const em_att_tiles tiles_avx2 = {matmul_avx2, exp_sum_avx2, row_max_avx2};

const em_att_tiles *em_cpu_att_tiles_f32(bool avx2)
{
    return avx2 && em_cpu_has_avx2() ? &tiles_avx2 : &tiles_f32;
}

const em_att_tiles *em_cpu_att_tiles_f64(void)
{
    return &tiles_f64;
}
