/* CPU layer norm over the last dim of contiguous (rows, cols) data, forward and backward, f32 and
 * f64 (row statistics summed in double). The typed body is cpu_layer_norm_impl_internal.h. */
#include <math.h>

#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

#define LN_BLOCK_ROWS 64 /* rows per partial sum of the weight and bias gradients */
#define LN_LANES 8       /* partial sums of a row's statistics, added in a fixed tree of 8 */

#define REAL float
#define LN_FN(name) layer_norm_##name##_f32
#include "backend_cpu/cpu_layer_norm_impl_internal.h"
#undef REAL
#undef LN_FN

#define REAL double
#define LN_FN(name) layer_norm_##name##_f64
#include "backend_cpu/cpu_layer_norm_impl_internal.h"
#undef REAL
#undef LN_FN

int em_cpu_layer_norm(em_dtype dt, int64_t rows, int64_t cols, const void *x, const void *w,
                      const void *b, double eps, void *y, double *stats)
{
    if (rows < 0 || cols <= 0 || (dt != EM_F32 && dt != EM_F64))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        layer_norm_forward_f32(rows, cols, x, w, b, eps, y, stats);
    else
        layer_norm_forward_f64(rows, cols, x, w, b, eps, y, stats);
    return EM_KERNEL_OK;
}

int em_cpu_layer_norm_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x, const void *w,
                           const double *stats, const void *gy, void *gx, void *gw, void *gb)
{
    if (rows < 0 || cols <= 0 || (dt != EM_F32 && dt != EM_F64))
        return EM_KERNEL_UNSUPPORTED;
    bool ok = dt == EM_F32
                  ? layer_norm_backward_f32(rows, cols, x, w, stats, gy, gx, gw, gb)
                  : layer_norm_backward_f64(rows, cols, x, w, stats, gy, gx, gw, gb);
    return ok ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}
