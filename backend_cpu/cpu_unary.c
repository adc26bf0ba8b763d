/* Unary elementwise kernels and their gradients on the CPU: f32 and f64 natively, f16/bf16
 * computed in f32, integer dtypes (computed in i64, wrapping) for the sign/abs/scale family. */
#include <tgmath.h>

#include "backend/convert_internal.h"
#include "backend/kernel_args_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define SQRT_HALF 0.70710678118654752440      /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794   /* 1 / sqrt(2 pi) */
#define GELU_KAPPA 0.044715

typedef enum { FAM_F32, FAM_F64, FAM_I64, FAM_NONE } family;

static family family_of(em_dtype dt)
{
    if (dt == EM_F32 || dt == EM_F16 || dt == EM_BF16)
        return FAM_F32;
    if (dt == EM_F64)
        return FAM_F64;
    return em_dtype_is_int(dt) ? FAM_I64 : FAM_NONE;
}

/* y[i] = expr over a contiguous run, with v = x[i]. */
#define MAP(expr)                                                                                 \
    do {                                                                                          \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                       \
        {                                                                                         \
            const __auto_type v = x[i];                                                           \
            y[i] = (expr);                                                                        \
        }                                                                                         \
    } while (0)

/* The float kernels, once per compute type T; <tgmath.h> picks expf or exp from T. */
#define DEFINE_UNARY_FLOAT(NAME, T)                                                               \
    EM_WIDEST_LANES_UNFUSED static void NAME(em_unary_op op, double dp0, double dp1, int64_t n,   \
                                             T *restrict y, const T *restrict x)                  \
    {                                                                                             \
        const T p0 = (T)dp0, p1 = (T)dp1, h = (T)0.5, one = (T)1, zero = (T)0;                    \
        switch (op) {                                                                             \
        case EM_UNARY_NEG: MAP(-v); break;                                                        \
        case EM_UNARY_ABS: MAP(fabs(v)); break;                                                   \
        case EM_UNARY_SIGN: MAP(v > zero ? one : v < zero ? -one : v); break;                     \
        case EM_UNARY_EXP: MAP(exp(v)); break;                                                    \
        case EM_UNARY_LOG: MAP(log(v)); break;                                                    \
        case EM_UNARY_LOG1P: MAP(log1p(v)); break;                                                \
        case EM_UNARY_SQRT: MAP(sqrt(v)); break;                                                  \
        case EM_UNARY_RSQRT: MAP(one / sqrt(v)); break;                                           \
        case EM_UNARY_SQUARE: MAP(v * v); break;                                                  \
        case EM_UNARY_RECIPROCAL: MAP(one / v); break;                                            \
        case EM_UNARY_SIN: MAP(sin(v)); break;                                                    \
        case EM_UNARY_COS: MAP(cos(v)); break;                                                    \
        case EM_UNARY_TANH: MAP(tanh(v)); break;                                                  \
        case EM_UNARY_SIGMOID: MAP(one / (one + exp(-v))); break;                                 \
        case EM_UNARY_RELU: MAP(v < zero ? zero : v); break;                                      \
        case EM_UNARY_LEAKY_RELU: MAP(v < zero ? v * p0 : v); break;                              \
        case EM_UNARY_GELU: MAP(h * v * (one + erf(v * (T)SQRT_HALF))); break;                    \
        case EM_UNARY_GELU_TANH:                                                                  \
            MAP(h * v * (one + tanh((T)SQRT_2_OVER_PI * (v + (T)GELU_KAPPA * v * v * v))));       \
            break;                                                                                \
        case EM_UNARY_SILU: MAP(v / (one + exp(-v))); break;                                      \
        case EM_UNARY_FLOOR: MAP(floor(v)); break;                                                \
        case EM_UNARY_CEIL: MAP(ceil(v)); break;                                                  \
        case EM_UNARY_ROUND: MAP(nearbyint(v)); break;                                            \
        case EM_UNARY_CLAMP: MAP((v < p0 ? p0 : v) > p1 ? p1 : (v < p0 ? p0 : v)); break;         \
        case EM_UNARY_ADD_SCALAR: MAP(v + p0); break;                                             \
        case EM_UNARY_MUL_SCALAR: MAP(v * p0); break;                                             \
        case EM_UNARY_POW_SCALAR: MAP(pow(v, p0)); break;                                         \
        default: break;                                                                           \
        }                                                                                         \
    }

DEFINE_UNARY_FLOAT(unary_f32, float)
DEFINE_UNARY_FLOAT(unary_f64, double)

/* Integer ops wrap (two's complement through uint64_t), like PyTorch's integer tensors. */
static void unary_i64(em_unary_op op, double dp0, double dp1, int64_t n, int64_t *restrict y,
                      const int64_t *restrict x)
{
    const int64_t p0 = em_f64_to_i64(dp0), p1 = em_f64_to_i64(dp1);
    const int64_t lo = dp0 > (double)p0 ? p0 + 1 : p0; /* smallest integer >= min */
    const int64_t hi = dp1 < (double)p1 ? p1 - 1 : p1; /* largest integer <= max */
    switch (op) {
    case EM_UNARY_NEG: MAP((int64_t)(0 - (uint64_t)v)); break;
    case EM_UNARY_ABS: MAP(v < 0 ? (int64_t)(0 - (uint64_t)v) : v); break;
    case EM_UNARY_SIGN: MAP((int64_t)(v > 0) - (int64_t)(v < 0)); break;
    case EM_UNARY_SQUARE: MAP((int64_t)((uint64_t)v * (uint64_t)v)); break;
    case EM_UNARY_RELU: MAP(v < 0 ? 0 : v); break;
    case EM_UNARY_CLAMP: MAP((v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v)); break;
    case EM_UNARY_ADD_SCALAR: MAP((int64_t)((uint64_t)v + (uint64_t)p0)); break;
    case EM_UNARY_MUL_SCALAR: MAP((int64_t)((uint64_t)v * (uint64_t)p0)); break;
    default: break;
    }
}

typedef struct {
    em_unary_op op;
    double p0, p1;
    em_dtype dt;
    family fam;
} unary_ctx;

/* operands: 0 = out, 1 = in */
static void unary_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const unary_ctx *c = vctx;
    if (s[0] == 1 && s[1] == 1 && c->dt == EM_F32) {
        if (c->op != EM_UNARY_GELU || !em_cpu_gelu_f32(n, (float *)p[0], (const float *)p[1]))
            unary_f32(c->op, c->p0, c->p1, n, (float *)p[0], (const float *)p[1]);
        return;
    }
    if (s[0] == 1 && s[1] == 1 && c->dt == EM_F64) {
        unary_f64(c->op, c->p0, c->p1, n, (double *)p[0], (const double *)p[1]);
        return;
    }
    const size_t es = em_dtype_size(c->dt);
    for (int64_t i = 0; i < n; i += EM_STAGE_BLOCK) {
        const int64_t m = n - i < EM_STAGE_BLOCK ? n - i : EM_STAGE_BLOCK;
        char *y = p[0] + i * s[0] * (int64_t)es;
        const char *x = p[1] + i * s[1] * (int64_t)es;
        if (c->fam == FAM_F32) {
            float xb[EM_STAGE_BLOCK], yb[EM_STAGE_BLOCK];
            unary_f32(c->op, c->p0, c->p1, m, yb, em_view_f32(c->dt, x, s[1], m, xb));
            em_store_f32(c->dt, y, s[0], m, yb);
        } else if (c->fam == FAM_F64) {
            double xb[EM_STAGE_BLOCK], yb[EM_STAGE_BLOCK];
            unary_f64(c->op, c->p0, c->p1, m, yb, em_view_f64(c->dt, x, s[1], m, xb));
            em_store_f64(c->dt, y, s[0], m, yb);
        } else {
            int64_t xb[EM_STAGE_BLOCK], yb[EM_STAGE_BLOCK];
            unary_i64(c->op, c->p0, c->p1, m, yb, em_view_i64(c->dt, x, s[1], m, xb));
            em_store_i64(c->dt, y, s[0], m, yb);
        }
    }
}

int em_cpu_unary(em_unary_op op, double p0, double p1, const em_arr *out, const em_arr *in)
{
    const family fam = family_of(out->dtype);
    if ((unsigned)op >= EM_UNARY_COUNT || in->dtype != out->dtype || fam == FAM_NONE ||
        !em_arr_same_shape(out, in) || (fam == FAM_I64 && !em_unary_int_supported(op)))
        return EM_KERNEL_UNSUPPORTED;
    unary_ctx c = {op, p0, p1, out->dtype, fam};
    em_iter it;
    em_iter_init(&it, out->ndim, out->shape, 2, (const em_arr *[]){out, in}, 0);
    em_iter_run(&it, 1, unary_run, &c);
    return EM_KERNEL_OK;
}

/* ---- gradients: gx[i] = gy[i] * f'(x[i]), over contiguous runs ---- */

/* gx[i] = expr with g = gy[i] (and v = src[i], x or y as the op reads it). */
#define GMAP(expr)                                                                                \
    do {                                                                                          \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                       \
        {                                                                                         \
            const __auto_type g = gy[i];                                                          \
            const __auto_type v = src[i];                                                         \
            gx[i] = (expr);                                                                       \
        }                                                                                         \
    } while (0)

#define GMAP_G(expr)                                                                              \
    do {                                                                                          \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                       \
        {                                                                                         \
            const __auto_type g = gy[i];                                                          \
            gx[i] = (expr);                                                                       \
        }                                                                                         \
    } while (0)

#define ZERO_FILL()                                                                               \
    do {                                                                                          \
        for (int64_t i = 0; i < n; i++)                                                           \
            gx[i] = 0;                                                                            \
    } while (0)

#define DEFINE_UNARY_GRAD_FLOAT(NAME, T)                                                          \
    EM_WIDEST_LANES_UNFUSED static void NAME(em_unary_op op, bool from_y, double dp0, double dp1, \
                                             int64_t n, T *restrict gx, const T *restrict gy,     \
                                             const T *restrict src)                               \
    {                                                                                             \
        const T p0 = (T)dp0, p1 = (T)dp1, h = (T)0.5, one = (T)1, two = (T)2, zero = (T)0;        \
        const T beta = (T)SQRT_2_OVER_PI, kappa = (T)GELU_KAPPA;                                  \
        switch (op) {                                                                             \
        case EM_UNARY_NEG: GMAP_G(-g); break;                                                     \
        case EM_UNARY_ABS: GMAP(v > zero ? g : v < zero ? -g : zero); break;                      \
        case EM_UNARY_SIGN: case EM_UNARY_FLOOR: case EM_UNARY_CEIL: case EM_UNARY_ROUND:         \
            ZERO_FILL();                                                                          \
            break;                                                                                \
        case EM_UNARY_EXP:                                                                        \
            if (from_y)                                                                           \
                GMAP(g * v);                                                                      \
            else                                                                                  \
                GMAP(g * exp(v));                                                                 \
            break;                                                                                \
        case EM_UNARY_LOG: GMAP(g / v); break;                                                    \
        case EM_UNARY_LOG1P: GMAP(g / (one + v)); break;                                          \
        case EM_UNARY_SQRT:                                                                       \
            if (from_y)                                                                           \
                GMAP(g * h / v);                                                                  \
            else                                                                                  \
                GMAP(g * h / sqrt(v));                                                            \
            break;                                                                                \
        case EM_UNARY_RSQRT:                                                                      \
            if (from_y)                                                                           \
                GMAP(-h * g * v * v * v);                                                         \
            else                                                                                  \
                GMAP(-h * g / (v * sqrt(v)));                                                     \
            break;                                                                                \
        case EM_UNARY_SQUARE: GMAP(g * two * v); break;                                           \
        case EM_UNARY_RECIPROCAL:                                                                 \
            if (from_y)                                                                           \
                GMAP(-g * v * v);                                                                 \
            else                                                                                  \
                GMAP(-g / (v * v));                                                               \
            break;                                                                                \
        case EM_UNARY_SIN: GMAP(g * cos(v)); break;                                               \
        case EM_UNARY_COS: GMAP(-g * sin(v)); break;                                              \
        case EM_UNARY_TANH:                                                                       \
            if (from_y)                                                                           \
                GMAP(g * (one - v * v));                                                          \
            else                                                                                  \
                GMAP(g * (one - tanh(v) * tanh(v)));                                              \
            break;                                                                                \
        case EM_UNARY_SIGMOID:                                                                    \
            if (from_y)                                                                           \
                GMAP(g * v * (one - v));                                                          \
            else                                                                                  \
                GMAP(g / (one + exp(-v)) * (one - one / (one + exp(-v))));                        \
            break;                                                                                \
        case EM_UNARY_RELU: GMAP(v > zero ? g : zero); break;                                     \
        case EM_UNARY_LEAKY_RELU: GMAP(v > zero ? g : g * p0); break;                             \
        case EM_UNARY_GELU:                                                                       \
            GMAP(g * (h * (one + erf(v * (T)SQRT_HALF)) +                                         \
                      v * (T)INV_SQRT_2PI * exp(-h * v * v)));                                    \
            break;                                                                                \
        case EM_UNARY_GELU_TANH: /* PyTorch's formula, t = tanh(beta (x + kappa x^3)) */          \
            GMAP(g * (h * (one + tanh(beta * (v + kappa * v * v * v))) +                          \
                      h * v * (one - tanh(beta * (v + kappa * v * v * v)) *                       \
                                         tanh(beta * (v + kappa * v * v * v))) *                  \
                          beta * (one + (T)3 * kappa * v * v)));                                  \
            break;                                                                                \
        case EM_UNARY_SILU: /* s (1 + x (1 - s)), s = sigmoid(x) */                               \
            GMAP(g / (one + exp(-v)) * (one + v * (one - one / (one + exp(-v)))));                \
            break;                                                                                \
        case EM_UNARY_CLAMP: GMAP(v >= p0 && v <= p1 ? g : zero); break;                          \
        case EM_UNARY_ADD_SCALAR: GMAP_G(g); break;                                               \
        case EM_UNARY_MUL_SCALAR: GMAP_G(g * p0); break;                                          \
        case EM_UNARY_POW_SCALAR:                                                                 \
            if (p0 == zero)                                                                       \
                ZERO_FILL();                                                                      \
            else                                                                                  \
                GMAP(g * p0 * pow(v, p0 - one));                                                  \
            break;                                                                                \
        default: break;                                                                           \
        }                                                                                         \
    }

DEFINE_UNARY_GRAD_FLOAT(unary_grad_f32, float)
DEFINE_UNARY_GRAD_FLOAT(unary_grad_f64, double)

typedef struct {
    em_unary_op op;
    double p0, p1;
    em_dtype dt;
    bool from_y;
} grad_ctx;

/* operands: 0 = gx, 1 = gy, 2 = src (x or y; gy itself when the op reads neither) */
static void unary_grad_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const grad_ctx *c = vctx;
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && c->dt == EM_F32) {
        if (c->op != EM_UNARY_GELU || !em_cpu_gelu_grad_f32(n, (float *)p[0],
                                                            (const float *)p[1],
                                                            (const float *)p[2]))
            unary_grad_f32(c->op, c->from_y, c->p0, c->p1, n, (float *)p[0],
                           (const float *)p[1], (const float *)p[2]);
        return;
    }
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && c->dt == EM_F64) {
        unary_grad_f64(c->op, c->from_y, c->p0, c->p1, n, (double *)p[0], (const double *)p[1],
                       (const double *)p[2]);
        return;
    }
    const int64_t es = (int64_t)em_dtype_size(c->dt);
    for (int64_t i = 0; i < n; i += EM_STAGE_BLOCK) {
        const int64_t m = n - i < EM_STAGE_BLOCK ? n - i : EM_STAGE_BLOCK;
        char *gx = p[0] + i * s[0] * es;
        const char *gy = p[1] + i * s[1] * es, *src = p[2] + i * s[2] * es;
        if (c->dt == EM_F64) {
            double gyb[EM_STAGE_BLOCK], srcb[EM_STAGE_BLOCK], gxb[EM_STAGE_BLOCK];
            unary_grad_f64(c->op, c->from_y, c->p0, c->p1, m, gxb,
                           em_view_f64(c->dt, gy, s[1], m, gyb),
                           em_view_f64(c->dt, src, s[2], m, srcb));
            em_store_f64(c->dt, gx, s[0], m, gxb);
        } else {
            float gyb[EM_STAGE_BLOCK], srcb[EM_STAGE_BLOCK], gxb[EM_STAGE_BLOCK];
            unary_grad_f32(c->op, c->from_y, c->p0, c->p1, m, gxb,
                           em_view_f32(c->dt, gy, s[1], m, gyb),
                           em_view_f32(c->dt, src, s[2], m, srcb));
            em_store_f32(c->dt, gx, s[0], m, gxb);
        }
    }
}

int em_cpu_unary_grad(em_unary_op op, double p0, double p1, const em_arr *gx, const em_arr *gy,
                      const em_arr *x, const em_arr *y)
{
    const family fam = family_of(gx->dtype);
    if ((unsigned)op >= EM_UNARY_COUNT || (fam != FAM_F32 && fam != FAM_F64) ||
        gy->dtype != gx->dtype || !em_arr_same_shape(gx, gy))
        return EM_KERNEL_UNSUPPORTED;
    bool from_y;
    const em_arr *src = em_unary_grad_source(op, gy, x, y, &from_y);
    if (src == NULL || src->dtype != gx->dtype || !em_arr_same_shape(gx, src))
        return EM_KERNEL_UNSUPPORTED;
    grad_ctx c = {op, p0, p1, gx->dtype, from_y};
    em_iter it;
    em_iter_init(&it, gx->ndim, gx->shape, 3, (const em_arr *[]){gx, gy, src}, 0);
    em_iter_run(&it, 1, unary_grad_run, &c);
    return EM_KERNEL_OK;
}
