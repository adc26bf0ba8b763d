/* Vector norms on the CPU for gradient clipping and the guards: sum of |x|^p (or max |x|) over
 * a contiguous array, in fixed chunks summed in order (the same on any thread count); f32 sums
 * of |x| and x^2 run in f32 over blocks of 256, added up in double. */
#include <math.h>

#include "backend_cpu/cpu_kernels_internal.h"

#define CHUNK 16384
#define MAX_CHUNKS 256
#define BLOCK 256

/* f32 x^2 (p = 2) or |x| (p = 1) sums: vectorized f32 blocks, double across blocks */
static double block_sum_f32(const float *x, int64_t n, bool square)
{
    double acc = 0;
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t end = b + BLOCK < n ? b + BLOCK : n;
        float part = 0;
        if (square) {
#pragma omp simd reduction(+ : part)
            for (int64_t i = b; i < end; i++)
                part += x[i] * x[i];
        } else {
#pragma omp simd reduction(+ : part)
            for (int64_t i = b; i < end; i++)
                part += fabsf(x[i]);
        }
        acc += part;
    }
    return acc;
}

/* sum |x|^p (p = 1 and 2 without pow), or max |x| for p = inf with NaN passed through */
#define CHUNK_SUM(T)                                                                     \
    static double chunk_##T(const T *x, int64_t n, double p)                            \
    {                                                                                    \
        double acc = 0;                                                                  \
        if (p == 2) {                                                                    \
            _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++)       \
                acc += (double)x[i] * (double)x[i];                                      \
        } else if (p == 1) {                                                             \
            _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++)       \
                acc += fabs((double)x[i]);                                               \
        } else if (isinf(p)) {                                                           \
            bool nan = false;                                                            \
            for (int64_t i = 0; i < n; i++) {                                            \
                double a = fabs((double)x[i]);                                           \
                nan |= isnan(a);                                                         \
                acc = a > acc ? a : acc;                                                 \
            }                                                                            \
            if (nan)                                                                     \
                acc = NAN;                                                               \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++)                                              \
                acc += pow(fabs((double)x[i]), p);                                       \
        }                                                                                \
        return acc;                                                                      \
    }
CHUNK_SUM(float)
CHUNK_SUM(double)

static double array_pow_sum(em_dtype dt, int64_t n, double p, const void *x)
{
    int64_t chunk = n / MAX_CHUNKS + 1 > CHUNK ? n / MAX_CHUNKS + 1 : CHUNK;
    int64_t nchunk = n > 0 ? (n + chunk - 1) / chunk : 0;
    double part[MAX_CHUNKS + 1];
#pragma omp parallel for schedule(static) if (n >= EM_CPU_PARALLEL_MIN) \
        num_threads(em_cpu_threads())
    for (int64_t c = 0; c < nchunk; c++) {
        int64_t start = c * chunk, len = n - start < chunk ? n - start : chunk;
        if (dt == EM_F32 && (p == 1 || p == 2))
            part[c] = block_sum_f32((const float *)x + start, len, p == 2);
        else if (dt == EM_F32)
            part[c] = chunk_float((const float *)x + start, len, p);
        else
            part[c] = chunk_double((const double *)x + start, len, p);
    }
    double acc = 0;
    for (int64_t c = 0; c < nchunk; c++) {
        if (isinf(p))
            acc = part[c] > acc || isnan(part[c]) ? part[c] : acc;
        else
            acc += part[c];
    }
    return acc;
}

int em_cpu_norm_pow_sum(em_dtype dt, double p, const em_array_list *l, double *out)
{
    if ((dt != EM_F32 && dt != EM_F64) || !(p > 0))
        return EM_KERNEL_UNSUPPORTED;
    for (int i = 0; i < l->n; i++)
        out[i] = array_pow_sum(dt, l->numel[i], p, l->data[i]);
    return EM_KERNEL_OK;
}
