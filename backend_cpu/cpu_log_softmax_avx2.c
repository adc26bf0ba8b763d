/* log_softmax and cross-entropy (against class indices) of f32 rows on AVX2+FMA: a row's max
 * and log of its sum of exp in 8 lanes with the vector exp (2 ulp), for cpu_softmax.c's
 * forwards (its SM_ROW_STATS), and both gradients, where cpu_softmax.c calls libm's expf per
 * element (the language model's (4096, 97) logits: 1.9 -> 0.3 ms forward and as much again
 * backward, 2 threads). Both ops take a row's stats from here and the same formulas, so the
 * fused loss and its gradient keep the bits of log_softmax and a gather, as on the portable
 * path. */
#include <math.h>
#include <omp.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* 8 elements of x from j on, pad past n */
EM_AVX2 static inline __m256 load_row(const float *x, int64_t j, int64_t n, float pad)
{
    if (j + 8 <= n)
        return _mm256_loadu_ps(x + j);
    float part[8];
    for (int64_t t = 0; t < 8; t++)
        part[t] = j + t < n ? x[j + t] : pad;
    return _mm256_loadu_ps(part);
}

/* out[j..] = the lanes of v that fall before n */
EM_AVX2 static inline void store_row(float *out, int64_t j, int64_t n, __m256 v)
{
    if (j + 8 <= n) {
        _mm256_storeu_ps(out + j, v);
        return;
    }
    float part[8];
    _mm256_storeu_ps(part, v);
    for (int64_t t = j; t < n; t++)
        out[t] = part[t - j];
}

/* -(exp(z) s), the product rounded before the sign flips: the xor keeps the compiler from fusing
 * it into a following add (one multiply-add would round once, and the two gradients below would
 * part from each other's bits) */
EM_AVX2 static inline __m256 neg_exp_times(__m256 z, __m256 s)
{
    return _mm256_xor_ps(_mm256_mul_ps(em_exp8_avx2(z), s), _mm256_set1_ps(-0.0f));
}

/* The row's max (NaN where it holds one, as cpu_softmax.c's) and log of its sum of exp(x - max) */
EM_AVX2 static void row_stats_avx2(int64_t n, const float *x, float *max, float *log_sum)
{
    __m256 mx = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
        __m256 v = load_row(x, j, n, -INFINITY);
        mx = _mm256_max_ps(mx, v);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    float lanes[8], m = -INFINITY;
    _mm256_storeu_ps(lanes, mx);
    for (int t = 0; t < 8; t++)
        m = lanes[t] > m ? lanes[t] : m;
    m = _mm256_movemask_ps(nan) ? NAN : m;
    __m256 sum = _mm256_setzero_ps(), sub = _mm256_set1_ps(m);
    for (int64_t j = 0; j < n; j += 8)
        sum = _mm256_add_ps(sum, em_exp8_avx2(_mm256_sub_ps(load_row(x, j, n, -INFINITY), sub)));
    *max = m;
    *log_sum = logf(em_hsum8_avx2(sum));
}

bool em_cpu_log_softmax_stats_f32(int64_t n, const float *x, float *max, float *log_sum)
{
    if (!em_cpu_has_avx2())
        return false;
    row_stats_avx2(n, x, max, log_sum);
    return true;
}

/* out (n) = the gradient of the row's loss given its g, from the forward's stats */
EM_AVX2 static void row_grad(int64_t n, const float *x, int64_t target, const double *stats,
                             float g, float *out)
{
    const float s = -g;
    const __m256 mx = _mm256_set1_ps((float)stats[0]), lse = _mm256_set1_ps((float)stats[1]);
    const __m256 vs = _mm256_set1_ps(s);
    for (int64_t j = 0; j < n; j += 8) {
        __m256 lp = _mm256_sub_ps(_mm256_sub_ps(load_row(x, j, n, -INFINITY), mx), lse);
        store_row(out, j, n, neg_exp_times(lp, vs));
    }
    out[target] = s + out[target]; /* s - exp(lp) s at the target */
}

void em_cpu_cross_entropy_grad_f32_avx2(int64_t rows, int64_t cols, const float *x,
                                        const int64_t *t, const double *stats, const float *g,
                                        float *gx)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        row_grad(cols, x + r * cols, t[r], stats + 2 * r, g[r], gx + r * cols);
}

/* gx (n) = gy - exp(y) sum(gy), the sum in double in the order of the row */
EM_AVX2 static void log_softmax_grad_row(int64_t n, const float *gy, const float *y, float *gx)
{
    double acc = 0;
    for (int64_t j = 0; j < n; j++)
        acc += gy[j];
    const __m256 sum = _mm256_set1_ps((float)acc);
    for (int64_t j = 0; j < n; j += 8)
        store_row(gx, j, n, _mm256_add_ps(load_row(gy, j, n, 0.0f),
                                          neg_exp_times(load_row(y, j, n, -INFINITY), sum)));
}

void em_cpu_log_softmax_grad_f32_avx2(int64_t rows, int64_t cols, const float *gy,
                                      const float *y, float *gx)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        log_softmax_grad_row(cols, gy + r * cols, y + r * cols, gx + r * cols);
}
