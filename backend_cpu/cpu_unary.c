/* Unary elementwise kernels and their gradients on the CPU: f32 and f64 natively, f16/bf16
 * computed in f32, integer dtypes (computed in i64, wrapping) for the sign/abs/scale family. */
#include "backend/kernel_args_internal.h"
#include "backend/unary_ops_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

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

/* The float kernels, once per compute type T (em_unary_value picks the formulas of T): a loop per
 * op, in which the op is a constant. y (n), x (n). */
#define UNARY_CASE(op)                                                                            \
    case op: MAP(em_unary_value(op, v, &pv)); break;
#define DEFINE_UNARY_FLOAT(NAME, T)                                                              \
    EM_WIDEST_LANES_UNFUSED static void NAME(em_unary_op op, const em_unary_params *p, int64_t n, \
                                             T *restrict y, const T *restrict x)                  \
    {                                                                                             \
        EM_UNFUSED_BODY                                                                           \
        const em_unary_params pv = *p;                                                            \
        switch (op) {                                                                             \
            EM_UNARY_OPS(UNARY_CASE)                                                              \
        }                                                                                         \
    }

DEFINE_UNARY_FLOAT(unary_f32, float)
DEFINE_UNARY_FLOAT(unary_f64, double)

/* The integer ops (em_unary_int_supported), wrapping: a loop per op, as above (the float-only
 * ops' loops are never reached). y (n), x (n). */
#define INT_CASE(op)                                                                              \
    case op: MAP(em_unary_int_value(op, v, &q)); break;
static void unary_i64(em_unary_op op, const em_unary_params *p, int64_t n, int64_t *restrict y,
                      const int64_t *restrict x)
{
    const em_unary_int_params q = em_unary_int_params_of(p);
    switch (op) {
        EM_UNARY_OPS(INT_CASE)
    }
}

/* f32 over a contiguous run: GELU on its AVX2 kernel where the CPU has it, else the loop */
static void unary_run_f32(em_unary_op op, const em_unary_params *p, int64_t n, float *y,
                          const float *x)
{
    if (op != EM_UNARY_GELU || !em_cpu_gelu_f32(n, y, x))
        unary_f32(op, p, n, y, x);
}

typedef struct {
    em_unary_op op;
    em_unary_params p;
    em_dtype dt;
    family fam;
} unary_ctx;

/* operands: 0 = out, 1 = in */
static void unary_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const unary_ctx *c = vctx;
    if (s[0] == 1 && s[1] == 1 && c->dt == EM_F32) {
        unary_run_f32(c->op, &c->p, n, (float *)p[0], (const float *)p[1]);
        return;
    }
    if (s[0] == 1 && s[1] == 1 && c->dt == EM_F64) {
        unary_f64(c->op, &c->p, n, (double *)p[0], (const double *)p[1]);
        return;
    }
    const size_t es = em_dtype_size(c->dt);
    for (int64_t i = 0; i < n; i += EM_STAGE_BLOCK) {
        const int64_t m = n - i < EM_STAGE_BLOCK ? n - i : EM_STAGE_BLOCK;
        char *y = p[0] + i * s[0] * (int64_t)es;
        const char *x = p[1] + i * s[1] * (int64_t)es;
        if (c->fam == FAM_F32) {
            float xb[EM_STAGE_BLOCK], yb[EM_STAGE_BLOCK];
            unary_run_f32(c->op, &c->p, m, yb, em_view_f32(c->dt, x, s[1], m, xb));
            em_store_f32(c->dt, y, s[0], m, yb);
        } else if (c->fam == FAM_F64) {
            double xb[EM_STAGE_BLOCK], yb[EM_STAGE_BLOCK];
            unary_f64(c->op, &c->p, m, yb, em_view_f64(c->dt, x, s[1], m, xb));
            em_store_f64(c->dt, y, s[0], m, yb);
        } else {
            int64_t xb[EM_STAGE_BLOCK], yb[EM_STAGE_BLOCK];
            unary_i64(c->op, &c->p, m, yb, em_view_i64(c->dt, x, s[1], m, xb));
            em_store_i64(c->dt, y, s[0], m, yb);
        }
    }
}

int em_cpu_unary(em_unary_op op, const em_unary_params *p, const em_arr *out, const em_arr *in)
{
    const family fam = family_of(out->dtype);
    if ((unsigned)op >= EM_UNARY_COUNT || in->dtype != out->dtype || fam == FAM_NONE ||
        !em_arr_same_shape(out, in) || (fam == FAM_I64 && !em_unary_int_supported(op)))
        return EM_KERNEL_UNSUPPORTED;
    unary_ctx c = {op, *p, out->dtype, fam};
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

/* The gradient kernels, once per compute type T (em_unary_grad_value picks the derivatives of T):
 * a loop per op and operand read, in which both are constants. gx (n), gy (n), src (n). */
#define GRAD_CASE(op)                                                                             \
    case op:                                                                                      \
        if (from_y)                                                                               \
            GMAP(em_unary_grad_value(op, true, g, v, &pv));                                       \
        else                                                                                      \
            GMAP(em_unary_grad_value(op, false, g, v, &pv));                                      \
        break;
#define DEFINE_UNARY_GRAD_FLOAT(NAME, T)                                                         \
    EM_WIDEST_LANES_UNFUSED static void NAME(em_unary_op op, bool from_y,                         \
                                             const em_unary_params *p, int64_t n,                 \
                                             T *restrict gx, const T *restrict gy,                \
                                             const T *restrict src)                               \
    {                                                                                             \
        EM_UNFUSED_BODY                                                                           \
        const em_unary_params pv = *p;                                                            \
        switch (op) {                                                                             \
            EM_UNARY_OPS(GRAD_CASE)                                                               \
        }                                                                                         \
    }

DEFINE_UNARY_GRAD_FLOAT(unary_grad_f32, float)
DEFINE_UNARY_GRAD_FLOAT(unary_grad_f64, double)

/* f32 over a contiguous run: GELU's gradient on its AVX2 kernel where the CPU has it */
static void unary_grad_run_f32(em_unary_op op, bool from_y, const em_unary_params *p, int64_t n,
                               float *gx, const float *gy, const float *src)
{
    if (op != EM_UNARY_GELU || !em_cpu_gelu_grad_f32(n, gx, gy, src))
        unary_grad_f32(op, from_y, p, n, gx, gy, src);
}

typedef struct {
    em_unary_op op;
    em_unary_params p;
    em_dtype dt;
    bool from_y;
} grad_ctx;

/* operands: 0 = gx, 1 = gy, 2 = src (x or y; gy itself when the op reads neither) */
static void unary_grad_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const grad_ctx *c = vctx;
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && c->dt == EM_F32) {
        unary_grad_run_f32(c->op, c->from_y, &c->p, n, (float *)p[0], (const float *)p[1],
                           (const float *)p[2]);
        return;
    }
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && c->dt == EM_F64) {
        unary_grad_f64(c->op, c->from_y, &c->p, n, (double *)p[0], (const double *)p[1],
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
            unary_grad_f64(c->op, c->from_y, &c->p, m, gxb,
                           em_view_f64(c->dt, gy, s[1], m, gyb),
                           em_view_f64(c->dt, src, s[2], m, srcb));
            em_store_f64(c->dt, gx, s[0], m, gxb);
        } else {
            float gyb[EM_STAGE_BLOCK], srcb[EM_STAGE_BLOCK], gxb[EM_STAGE_BLOCK];
            unary_grad_run_f32(c->op, c->from_y, &c->p, m, gxb,
                               em_view_f32(c->dt, gy, s[1], m, gyb),
                               em_view_f32(c->dt, src, s[2], m, srcb));
            em_store_f32(c->dt, gx, s[0], m, gxb);
        }
    }
}

int em_cpu_unary_grad(em_unary_op op, const em_unary_params *p, const em_arr *gx,
                      const em_arr *gy, const em_arr *x, const em_arr *y)
{
    const family fam = family_of(gx->dtype);
    if ((unsigned)op >= EM_UNARY_COUNT || (fam != FAM_F32 && fam != FAM_F64) ||
        gy->dtype != gx->dtype || !em_arr_same_shape(gx, gy))
        return EM_KERNEL_UNSUPPORTED;
    bool from_y;
    const em_arr *src = em_unary_grad_source(op, gy, x, y, &from_y);
    if (src == NULL || src->dtype != gx->dtype || !em_arr_same_shape(gx, src))
        return EM_KERNEL_UNSUPPORTED;
    grad_ctx c = {op, *p, gx->dtype, from_y};
    em_iter it;
    em_iter_init(&it, gx->ndim, gx->shape, 3, (const em_arr *[]){gx, gy, src}, 0);
    em_iter_run(&it, 1, unary_grad_run, &c);
    return EM_KERNEL_OK;
}
