/* CPU 2-D max and average pooling (NCHW) and their gradients: f32 and f64 natively, bf16 2x2
 * max pooling natively, other f16/bf16 through f32. The typed body is
 * cpu_pool_impl_internal.h. */
#include <math.h>
#include <string.h>

#include "backend_cpu/cpu_dense_internal.h"

#define REAL float
#define POOL_FN(name) pool_##name##_f32
#include "backend_cpu/cpu_pool_impl_internal.h"
#undef REAL
#undef POOL_FN

#define REAL double
#define POOL_FN(name) pool_##name##_f64
#include "backend_cpu/cpu_pool_impl_internal.h"
#undef REAL
#undef POOL_FN

static bool pool_shape_ok(const em_pool2d_shape *s)
{
    return s->n >= 0 && s->c >= 0 && s->h >= 0 && s->w >= 0 && s->h_out >= 0 && s->w_out >= 0
           && s->kernel[0] >= 1 && s->kernel[1] >= 1 && s->stride[0] >= 1 && s->stride[1] >= 1
           && s->pad[0] >= 0 && s->pad[1] >= 0 && s->dilation[0] >= 1 && s->dilation[1] >= 1;
}

static bool pool_dtype_ok(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64 || em_cpu_is_half(dt);
}

static int64_t x_numel(const em_pool2d_shape *s)
{
    return s->n * s->c * s->h * s->w;
}

static int64_t y_numel(const em_pool2d_shape *s)
{
    return s->n * s->c * s->h_out * s->w_out;
}

typedef enum { POOL_MAX, POOL_MAX_GRAD, POOL_AVG, POOL_AVG_GRAD } pool_kind;

/* f32 max pooling and its gradient on the 2x2 kernels where they apply, else the general ones */
static void max_pool_f32(const em_pool2d_shape *s, const float *x, float *y, em_pool_tap *argmax)
{
    if (!em_cpu_max_pool2d_2x2_applies(s) || !em_cpu_max_pool2d_2x2(s, EM_F32, x, y, argmax))
        pool_max_pool_f32(s, x, y, argmax);
}

static void max_pool_grad_f32(const em_pool2d_shape *s, const float *gy,
                              const em_pool_tap *argmax, float *gx)
{
    if (!em_cpu_max_pool2d_2x2_applies(s) ||
        !em_cpu_max_pool2d_2x2_grad(s, EM_F32, gy, argmax, gx))
        pool_max_pool_grad_f32(s, gy, argmax, gx);
}

/* f16/bf16: widen `in` (x for a forward kernel, gy for a gradient), run the f32 kernel, narrow. */
static int pool_half(pool_kind kind, const em_pool2d_shape *s, em_dtype dt, const void *in,
                     void *out, em_pool_tap *argmax_out, const em_pool_tap *argmax_in)
{
    const bool fwd = kind == POOL_MAX || kind == POOL_AVG;
    const int64_t n_in = fwd ? x_numel(s) : y_numel(s), n_out = fwd ? y_numel(s) : x_numel(s);
    float *fin = em_cpu_widen(dt, in, n_in);
    float *fout = em_cpu_f32_buffer(n_out);
    int rc = fin && fout ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    if (rc == EM_KERNEL_OK) {
        switch (kind) {
        case POOL_MAX:
            max_pool_f32(s, fin, fout, argmax_out);
            break;
        case POOL_MAX_GRAD:
            max_pool_grad_f32(s, fin, argmax_in, fout);
            break;
        case POOL_AVG:
            pool_avg_pool_f32(s, fin, fout);
            break;
        case POOL_AVG_GRAD:
            pool_avg_pool_grad_f32(s, fin, fout);
            break;
        }
        em_cpu_f32_to_half_2d(dt, out, fout, 1, n_out, n_out);
    }
    em_cpu_scratch_free(fin);
    em_cpu_scratch_free(fout);
    return rc;
}

int em_cpu_max_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                      em_pool_tap *argmax)
{
    if (!pool_shape_ok(s) || !pool_dtype_ok(dt))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        max_pool_f32(s, x, y, argmax);
    else if (dt == EM_F64)
        pool_max_pool_f64(s, x, y, argmax);
    else if (!em_cpu_max_pool2d_2x2_applies(s) ||
             !em_cpu_max_pool2d_2x2(s, dt, x, y, argmax))
        return pool_half(POOL_MAX, s, dt, x, y, argmax, NULL);
    return EM_KERNEL_OK;
}

int em_cpu_max_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                           const em_pool_tap *argmax, void *gx)
{
    if (!pool_shape_ok(s) || !pool_dtype_ok(dt))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        max_pool_grad_f32(s, gy, argmax, gx);
    else if (dt == EM_F64)
        pool_max_pool_grad_f64(s, gy, argmax, gx);
    else if (!em_cpu_max_pool2d_2x2_applies(s) ||
             !em_cpu_max_pool2d_2x2_grad(s, dt, gy, argmax, gx))
        return pool_half(POOL_MAX_GRAD, s, dt, gy, gx, NULL, argmax);
    return EM_KERNEL_OK;
}

int em_cpu_avg_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y)
{
    if (!pool_shape_ok(s) || !pool_dtype_ok(dt))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        pool_avg_pool_f32(s, x, y);
    else if (dt == EM_F64)
        pool_avg_pool_f64(s, x, y);
    else
        return pool_half(POOL_AVG, s, dt, x, y, NULL, NULL);
    return EM_KERNEL_OK;
}

int em_cpu_avg_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy, void *gx)
{
    if (!pool_shape_ok(s) || !pool_dtype_ok(dt))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        pool_avg_pool_grad_f32(s, gy, gx);
    else if (dt == EM_F64)
        pool_avg_pool_grad_f64(s, gy, gx);
    else
        return pool_half(POOL_AVG_GRAD, s, dt, gy, gx, NULL, NULL);
    return EM_KERNEL_OK;
}
