/* CPU 2-D convolution (NCHW, stride, padding, dilation, groups): im2col + GEMM per image for f32
 * and f64, or for f32 stride-1 layers on AVX2+FMA the direct kernels of cpu_conv_direct.c, and
 * for 3x3 ones with enough channels Winograd (cpu_conv_winograd.c); bf16 layers of 16+ channels
 * on oneDNN where the CPU multiplies bf16 (cpu_dnnl_conv.c), other f16/bf16 ones through the f32
 * path: the Winograd and direct kernels read and write their images as they are, the others
 * widen them. The typed body is cpu_conv_impl_internal.h. */
#include <omp.h>
#include <string.h>

#include "backend_cpu/cpu_conv_direct_internal.h"
#include "backend_cpu/cpu_conv_winograd_internal.h"
#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_dnnl_internal.h"
#include "backend_cpu/cpu_features_internal.h"

/* grad_weight sums the batch in this many fixed blocks (fewer for a smaller batch). */
#define CONV_GW_BLOCKS 16
/* The padded grid pays off from this many input channels per group; below, its extra pass over
 * the output costs more than the plain im2col it saves. */
#define CONV_GRID_MIN_CIN 8

/* First output column whose tap, at offset d from ow * stride, lands inside the row. */
static int64_t conv_first_inside(int64_t d, int64_t stride, int64_t w_out)
{
    int64_t lo = d >= 0 ? 0 : (-d + stride - 1) / stride;
    return lo < w_out ? lo : w_out;
}

/* One past the last output column whose tap lands inside a row of width w; at least lo. */
static int64_t conv_end_inside(int64_t d, int64_t stride, int64_t w, int64_t w_out, int64_t lo)
{
    int64_t hi = w - 1 - d < 0 ? 0 : (w - 1 - d) / stride + 1;
    hi = hi < w_out ? hi : w_out;
    return hi > lo ? hi : lo;
}

/* A 1x1, stride-1, unpadded convolution: x_n itself is the column matrix. */
static bool conv_is_pointwise(const em_conv2d_shape *s)
{
    return s->kh == 1 && s->kw == 1 && s->stride[0] == 1 && s->stride[1] == 1 && s->pad[0] == 0
           && s->pad[1] == 0 && s->h_out == s->h && s->w_out == s->w;
}

/* The padded grid of a stride-1 convolution: x_n is copied into zero-bordered planes Hp x Wp and
 * outputs are computed H_out rows of Wp columns, the columns past W_out spare. The input a tap
 * (i, j) reads for all outputs is then one run of H_out*Wp values starting at (i*dh, j*dw) of
 * the padded plane; the last tap reads up to `slack` values past the last plane. */
typedef struct {
    int64_t wp, plane; /* padded row width and plane size Hp*Wp */
    int64_t grid;      /* H_out*Wp columns of the column matrix; 0: the grid does not apply */
    int64_t slack;     /* zeros after the last padded plane */
} conv_grid_dims;

static conv_grid_dims conv_grid(const em_conv2d_shape *s)
{
    const int64_t hp = s->h + 2 * s->pad[0], wp = s->w + 2 * s->pad[1];
    conv_grid_dims gd = {0};
    if (s->c_in / s->groups < CONV_GRID_MIN_CIN || s->stride[0] != 1 || s->stride[1] != 1
        || conv_is_pointwise(s)
        || s->h_out > hp - (s->kh - 1) * s->dilation[0]
        || s->w_out > wp - (s->kw - 1) * s->dilation[1])
        return gd;
    gd.wp = wp;
    gd.plane = hp * wp;
    gd.grid = s->h_out * wp;
    gd.slack = (s->kw - 1) * s->dilation[1];
    return gd;
}

/* Scratch values one thread needs per image: the column matrix, and on the grid also the
 * padded planes and one (C_out, H_out*Wp) product. */
static int64_t conv_scratch(const em_conv2d_shape *s)
{
    const conv_grid_dims gd = conv_grid(s);
    const int64_t taps = s->c_in * s->kh * s->kw;
    if (gd.grid > 0)
        return taps * gd.grid + s->c_in * gd.plane + gd.slack + s->c_out * gd.grid;
    return conv_is_pointwise(s) ? 1 : taps * s->h_out * s->w_out;
}

/* Threads to spread `items` images (or blocks) over: all of them when there is one item per
 * thread at least, else one (and the BLAS calls inside spread instead). */
static int conv_threads(int64_t items)
{
    int nt = em_cpu_threads();
    return items >= nt ? nt : 1;
}

static bool conv_shape_ok(const em_conv2d_shape *s)
{
    return s->n >= 0 && s->c_in >= 1 && s->c_out >= 1 && s->groups >= 1
           && s->c_in % s->groups == 0 && s->c_out % s->groups == 0 && s->h >= 0 && s->w >= 0
           && s->kh >= 1 && s->kw >= 1 && s->h_out >= 0 && s->w_out >= 0
           && s->stride[0] >= 1 && s->stride[1] >= 1 && s->dilation[0] >= 1
           && s->dilation[1] >= 1 && s->pad[0] >= 0 && s->pad[1] >= 0;
}

#define REAL float
#define REAL_DT EM_F32
#define CONV_FN(name) conv_##name##_f32
#include "backend_cpu/cpu_conv_impl_internal.h"
#undef REAL
#undef REAL_DT
#undef CONV_FN

#define REAL double
#define REAL_DT EM_F64
#define CONV_FN(name) conv_##name##_f64
#include "backend_cpu/cpu_conv_impl_internal.h"
#undef REAL
#undef REAL_DT
#undef CONV_FN

/* The f32 kernels, on images of dt (f32, or f16/bf16 where half_in_place): Winograd where it
 * is chosen, direct where it fits, else im2col + GEMM (f32 images only). */
static int conv_f32(const em_conv2d_shape *s, em_dtype dt, const void *x, const float *w,
                    const float *bias, void *y)
{
    if (em_cpu_conv_winograd_chosen(s, false))
        return em_cpu_conv_winograd_forward(s, dt, x, w, bias, y);
    if (em_cpu_conv_direct_fits(s))
        return em_cpu_conv_direct_forward(s, dt, x, w, bias, y);
    return conv_conv2d_f32(s, x, w, bias, y);
}

static int conv_grad_input_f32_any(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                   const float *w, void *gx)
{
    if (em_cpu_conv_winograd_chosen(s, true))
        return em_cpu_conv_winograd_grad_input(s, dt, gy, w, gx);
    if (em_cpu_conv_direct_grad_input_fits(s))
        return em_cpu_conv_direct_grad_input(s, dt, gy, w, gx);
    return conv_grad_input_f32(s, gy, w, gx);
}

static int64_t gw_blocks(const em_conv2d_shape *s)
{
    return s->n < CONV_GW_BLOCKS ? s->n : CONV_GW_BLOCKS;
}

static int conv_grad_weight_f32_any(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                    const void *x, float *gw, float *gbias)
{
    if (em_cpu_conv_winograd_chosen(s, false))
        return em_cpu_conv_winograd_grad_weight(s, dt, gy, x, gw, gbias);
    if (!em_cpu_conv_direct_fits(s))
        return conv_grad_weight_f32(s, gy, x, gw, gbias);
    return em_cpu_conv_direct_grad_weight(s, gw_blocks(s), dt, gy, x, gw, gbias);
}

static int64_t x_numel(const em_conv2d_shape *s)
{
    return s->n * s->c_in * s->h * s->w;
}

static int64_t y_numel(const em_conv2d_shape *s)
{
    return s->n * s->c_out * s->h_out * s->w_out;
}

static int64_t w_numel(const em_conv2d_shape *s)
{
    return s->c_out * (s->c_in / s->groups) * s->kh * s->kw;
}

/* Which pass of a convolution. */
typedef enum { CONV_FORWARD, CONV_GRAD_INPUT, CONV_GRAD_WEIGHT } conv_pass;

/* Whether a half convolution's pass runs on kernels that read and write its images as they
 * are: Winograd (cpu_conv_winograd.c) where the f32 path chooses it for that pass, else the
 * direct kernels (cpu_conv_direct.c) where they are its choice (and f16 where the CPU converts
 * it, F16C). Other passes widen the images to f32 first and narrow the result after. */
static bool half_in_place(const em_conv2d_shape *s, em_dtype dt, conv_pass pass)
{
    if (em_cpu_conv_winograd_chosen(s, pass == CONV_GRAD_INPUT))
        return true;
    if (dt == EM_F16 && !em_cpu_has_f16c())
        return false;
    return pass == CONV_GRAD_INPUT ? em_cpu_conv_direct_grad_input_fits(s)
                                   : em_cpu_conv_direct_fits(s);
}

static int half_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                       const void *bias, void *y)
{
    const int rc_dnnl = em_cpu_dnnl_conv2d(s, dt, x, w, bias, y);
    if (rc_dnnl != EM_KERNEL_UNSUPPORTED)
        return rc_dnnl;
    const bool in_place = half_in_place(s, dt, CONV_FORWARD);
    float *fx = in_place ? NULL : em_cpu_widen(dt, x, x_numel(s));
    float *fw = em_cpu_widen(dt, w, w_numel(s));
    float *fb = bias ? em_cpu_widen(dt, bias, s->c_out) : NULL;
    float *fy = in_place ? NULL : em_cpu_f32_buffer(y_numel(s));
    int rc = EM_KERNEL_FAILED;
    if (in_place && fw && (fb || !bias))
        rc = conv_f32(s, dt, x, fw, fb, y);
    else if (fx && fw && fy && (fb || !bias)) {
        rc = conv_f32(s, EM_F32, fx, fw, fb, fy);
        if (rc == EM_KERNEL_OK)
            em_cpu_f32_to_half_2d(dt, y, fy, 1, y_numel(s), y_numel(s));
    }
    em_cpu_scratch_free(fx);
    em_cpu_scratch_free(fw);
    em_cpu_scratch_free(fb);
    em_cpu_scratch_free(fy);
    return rc;
}

int em_cpu_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                  const void *bias, void *y)
{
    if (!conv_shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    switch (dt) {
    case EM_F32:
        return conv_f32(s, EM_F32, x, w, bias, y);
    case EM_F64:
        return conv_conv2d_f64(s, x, w, bias, y);
    case EM_F16:
    case EM_BF16:
        return half_conv2d(s, dt, x, w, bias, y);
    default:
        return EM_KERNEL_UNSUPPORTED;
    }
}

static int half_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy, const void *w,
                           void *gx)
{
    const int rc_dnnl = em_cpu_dnnl_conv2d_grad_input(s, dt, gy, w, gx);
    if (rc_dnnl != EM_KERNEL_UNSUPPORTED)
        return rc_dnnl;
    const bool in_place = half_in_place(s, dt, CONV_GRAD_INPUT);
    float *fgy = in_place ? NULL : em_cpu_widen(dt, gy, y_numel(s));
    float *fw = em_cpu_widen(dt, w, w_numel(s));
    float *fgx = in_place ? NULL : em_cpu_f32_buffer(x_numel(s));
    int rc = EM_KERNEL_FAILED;
    if (in_place && fw)
        rc = conv_grad_input_f32_any(s, dt, gy, fw, gx);
    else if (fgy && fw && fgx) {
        rc = conv_grad_input_f32_any(s, EM_F32, fgy, fw, fgx);
        if (rc == EM_KERNEL_OK)
            em_cpu_f32_to_half_2d(dt, gx, fgx, 1, x_numel(s), x_numel(s));
    }
    em_cpu_scratch_free(fgy);
    em_cpu_scratch_free(fw);
    em_cpu_scratch_free(fgx);
    return rc;
}

int em_cpu_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                             const void *w, void *gx)
{
    if (!conv_shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    switch (dt) {
    case EM_F32:
        return conv_grad_input_f32_any(s, EM_F32, gy, w, gx);
    case EM_F64:
        return conv_grad_input_f64(s, gy, w, gx);
    case EM_F16:
    case EM_BF16:
        return half_grad_input(s, dt, gy, w, gx);
    default:
        return EM_KERNEL_UNSUPPORTED;
    }
}

static int half_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy, const void *x,
                            void *gw, void *gbias)
{
    const int rc_dnnl = em_cpu_dnnl_conv2d_grad_weight(s, dt, gy, x, gw, gbias);
    if (rc_dnnl != EM_KERNEL_UNSUPPORTED)
        return rc_dnnl;
    const bool in_place = half_in_place(s, dt, CONV_GRAD_WEIGHT);
    float *fgy = in_place ? NULL : em_cpu_widen(dt, gy, y_numel(s));
    float *fx = in_place ? NULL : em_cpu_widen(dt, x, x_numel(s));
    float *fgw = em_cpu_f32_buffer(w_numel(s));
    float *fgb = gbias ? em_cpu_f32_buffer(s->c_out) : NULL;
    int rc = EM_KERNEL_FAILED;
    if (in_place && fgw && (fgb || !gbias))
        rc = conv_grad_weight_f32_any(s, dt, gy, x, fgw, fgb);
    else if (fgy && fx && fgw && (fgb || !gbias))
        rc = conv_grad_weight_f32_any(s, EM_F32, fgy, fx, fgw, fgb);
    if (rc == EM_KERNEL_OK) {
        em_cpu_f32_to_half_2d(dt, gw, fgw, 1, w_numel(s), w_numel(s));
        if (gbias)
            em_cpu_f32_to_half_2d(dt, gbias, fgb, 1, s->c_out, s->c_out);
    }
    em_cpu_scratch_free(fgy);
    em_cpu_scratch_free(fx);
    em_cpu_scratch_free(fgw);
    em_cpu_scratch_free(fgb);
    return rc;
}

int em_cpu_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                              const void *x, void *gw, void *gbias)
{
    if (!conv_shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    if (dt != EM_F32 && dt != EM_F64 && !em_cpu_is_half(dt))
        return EM_KERNEL_UNSUPPORTED;
    if (s->n == 0) {
        memset(gw, 0, (size_t)w_numel(s) * em_dtype_size(dt));
        if (gbias)
            memset(gbias, 0, (size_t)s->c_out * em_dtype_size(dt));
        return EM_KERNEL_OK;
    }
    if (dt == EM_F32)
        return conv_grad_weight_f32_any(s, EM_F32, gy, x, gw, gbias);
    if (dt == EM_F64)
        return conv_grad_weight_f64(s, gy, x, gw, gbias);
    return half_grad_weight(s, dt, gy, x, gw, gbias);
}

int em_cpu_conv2d_grads(const em_conv2d_shape *s, em_dtype dt, const void *gy, const void *x,
                        const void *w, void *gx, void *gw, void *gbias)
{
    if (!conv_shape_ok(s) || s->n == 0)
        return EM_KERNEL_UNSUPPORTED;
    return em_cpu_dnnl_conv2d_grads(s, dt, gy, x, w, gx, gw, gbias);
}
