/* CPU softmax and log_softmax over the last dim of contiguous (rows, cols) data, and their
 * gradients: f32 and f64 natively, f16/bf16 through f32; cross-entropy of rows against class
 * indices (f32, f64). The typed body is cpu_softmax_impl_internal.h. */
#include <math.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_features_internal.h"

#define REAL float
#define REAL_EXP expf
#define REAL_LOG logf
#define SM_FN(name) softmax_##name##_f32
#define SM_ROW_STATS(n, x, mx, lse) em_cpu_log_softmax_stats_f32(n, x, mx, lse)
#include "backend_cpu/cpu_softmax_impl_internal.h"
#undef REAL
#undef REAL_EXP
#undef REAL_LOG
#undef SM_FN
#undef SM_ROW_STATS

#define REAL double
#define REAL_EXP exp
#define REAL_LOG log
#define SM_FN(name) softmax_##name##_f64
#define SM_ROW_STATS(n, x, mx, lse) false
#include "backend_cpu/cpu_softmax_impl_internal.h"
#undef REAL
#undef REAL_EXP
#undef REAL_LOG
#undef SM_FN
#undef SM_ROW_STATS

/* f32 rows: log_softmax's gradient on AVX2+FMA where the CPU has them (cpu_log_softmax_avx2.c) */
static void softmax_rows_grad_f32(bool log, int64_t rows, int64_t cols, const float *gy,
                                  const float *y, float *gx)
{
    if (log && em_cpu_has_avx2())
        em_cpu_log_softmax_grad_f32_avx2(rows, cols, gy, y, gx);
    else
        softmax_grad_f32(log, rows, cols, gy, y, gx);
}

int em_cpu_softmax(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *x, void *y)
{
    if (rows < 0 || cols < 0)
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32) {
        softmax_softmax_f32(log, rows, cols, x, y);
        return EM_KERNEL_OK;
    }
    if (dt == EM_F64) {
        softmax_softmax_f64(log, rows, cols, x, y);
        return EM_KERNEL_OK;
    }
    if (!em_cpu_is_half(dt))
        return EM_KERNEL_UNSUPPORTED;
    float *fx = em_cpu_widen(dt, x, rows * cols);
    float *fy = em_cpu_f32_buffer(rows * cols);
    int rc = fx && fy ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    if (rc == EM_KERNEL_OK) {
        softmax_softmax_f32(log, rows, cols, fx, fy);
        em_cpu_f32_to_half_2d(dt, y, fy, 1, rows * cols, rows * cols);
    }
    em_cpu_scratch_free(fx);
    em_cpu_scratch_free(fy);
    return rc;
}

int em_cpu_softmax_grad(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *gy,
                        const void *y, void *gx)
{
    if (rows < 0 || cols < 0)
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32) {
        softmax_rows_grad_f32(log, rows, cols, gy, y, gx);
        return EM_KERNEL_OK;
    }
    if (dt == EM_F64) {
        softmax_grad_f64(log, rows, cols, gy, y, gx);
        return EM_KERNEL_OK;
    }
    if (!em_cpu_is_half(dt))
        return EM_KERNEL_UNSUPPORTED;
    float *fgy = em_cpu_widen(dt, gy, rows * cols);
    float *fy = em_cpu_widen(dt, y, rows * cols);
    float *fgx = em_cpu_f32_buffer(rows * cols);
    int rc = fgy && fy && fgx ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    if (rc == EM_KERNEL_OK) {
        softmax_rows_grad_f32(log, rows, cols, fgy, fy, fgx);
        em_cpu_f32_to_half_2d(dt, gx, fgx, 1, rows * cols, rows * cols);
    }
    em_cpu_scratch_free(fgy);
    em_cpu_scratch_free(fy);
    em_cpu_scratch_free(fgx);
    return rc;
}

int em_cpu_cross_entropy(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                         const int64_t *target, void *loss, double *stats)
{
    if (rows < 0 || cols < 0 || (dt != EM_F32 && dt != EM_F64))
        return EM_KERNEL_UNSUPPORTED;
    bool ok = dt == EM_F32 ? softmax_xent_f32(rows, cols, x, target, loss, stats)
                           : softmax_xent_f64(rows, cols, x, target, loss, stats);
    return ok ? EM_KERNEL_OK : EM_KERNEL_BAD_INDEX;
}

int em_cpu_cross_entropy_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                              const int64_t *target, const double *stats, const void *g,
                              void *gx)
{
    if (rows < 0 || cols < 0 || (dt != EM_F32 && dt != EM_F64))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32 && em_cpu_has_avx2())
        em_cpu_cross_entropy_grad_f32_avx2(rows, cols, x, target, stats, g, gx);
    else if (dt == EM_F32)
        softmax_xent_grad_f32(rows, cols, x, target, stats, g, gx);
    else
        softmax_xent_grad_f64(rows, cols, x, target, stats, g, gx);
    return EM_KERNEL_OK;
}
