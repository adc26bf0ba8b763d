/* Binary elementwise kernels and their gradients on the CPU, with the formulas of
 * backend/binary_ops_internal.h (arithmetic, maximum/minimum, comparisons to bool), and where();
 * broadcast inputs arrive with stride 0 and run as scalar-operand loops. f16/bf16 compute in f32,
 * integers and bool in i64. */
#include "backend/binary_ops_internal.h"
#include "backend/kernel_args_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

typedef enum { FAM_F32, FAM_F64, FAM_I64 } family;

/* Compute family of an input dtype; bool compares as an integer. */
static family family_of(em_dtype dt)
{
    if (dt == EM_F32 || dt == EM_F16 || dt == EM_BF16)
        return FAM_F32;
    return dt == EM_F64 ? FAM_F64 : FAM_I64;
}

/* y[i] = expr with a = pa[i * sa], b = pb[i * sb]; sa, sb are 0 (broadcast) or 1, not both 0. */
#define MAP2(expr)                                                                                \
    do {                                                                                          \
        if (sa && sb) {                                                                           \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                   \
            {                                                                                     \
                const __auto_type a = pa[i];                                                      \
                const __auto_type b = pb[i];                                                      \
                y[i] = (expr);                                                                    \
            }                                                                                     \
        } else if (sa) {                                                                          \
            const __auto_type b = pb[0];                                                          \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                   \
            {                                                                                     \
                const __auto_type a = pa[i];                                                      \
                y[i] = (expr);                                                                    \
            }                                                                                     \
        } else {                                                                                  \
            const __auto_type a = pa[0];                                                          \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                   \
            {                                                                                     \
                const __auto_type b = pb[i];                                                      \
                y[i] = (expr);                                                                    \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* The kernels, once per compute type T (em_binary_value picks the formulas of T): a loop per op
 * of the kernel's kind, in which the op is a constant; y (n), pa, pb (n) or one broadcast
 * element. binary_f32, binary_f64, binary_i64 write T; compare_f32, compare_f64, compare_i64
 * write 0/1 bytes. */
#define BINARY_CASE(op)                                                                           \
    case op:                                                                                      \
        if (!em_binary_is_compare(op))                                                            \
            MAP2(em_binary_value(op, a, b));                                                      \
        break;
#define COMPARE_CASE(op)                                                                          \
    case op:                                                                                      \
        if (em_binary_is_compare(op))                                                             \
            MAP2(em_binary_value(op, a, b) != 0);                                                 \
        break;
#define DEFINE_BINARY(NAME, CASE, T, OUT)                                                         \
    static void NAME(em_binary_op op, int64_t n, OUT *restrict y, const T *restrict pa,           \
                     int64_t sa, const T *restrict pb, int64_t sb)                                \
    {                                                                                             \
        switch (op) {                                                                             \
            EM_BINARY_OPS(CASE)                                                                   \
        }                                                                                         \
    }

DEFINE_BINARY(binary_f32, BINARY_CASE, float, float)
DEFINE_BINARY(binary_f64, BINARY_CASE, double, double)
DEFINE_BINARY(binary_i64, BINARY_CASE, int64_t, int64_t)
DEFINE_BINARY(compare_f32, COMPARE_CASE, float, uint8_t)
DEFINE_BINARY(compare_f64, COMPARE_CASE, double, uint8_t)
DEFINE_BINARY(compare_i64, COMPARE_CASE, int64_t, uint8_t)

typedef struct {
    em_binary_op op;
    em_dtype dt, out_dt;
    family fam;
    bool compare;
} binary_ctx;

/* Runs the compute kernel on contiguous-or-broadcast operands (steps 0 or 1). */
#define COMPUTE(T)                                                                                \
    if (c->compare)                                                                               \
        compare_##T(c->op, n, y, a, sa, b, sb);                                                   \
    else                                                                                          \
        binary_##T(c->op, n, y, a, sa, b, sb);                                                    \
    break;
static void binary_compute(const binary_ctx *c, int64_t n, void *y, const void *a, int64_t sa,
                           const void *b, int64_t sb)
{
    switch (c->fam) {
    case FAM_F32: COMPUTE(f32)
    case FAM_F64: COMPUTE(f64)
    case FAM_I64: COMPUTE(i64)
    }
}

static em_dtype native_dtype(family fam)
{
    return fam == FAM_F32 ? EM_F32 : fam == FAM_F64 ? EM_F64 : EM_I64;
}

/* A compute view of one input block: a stride-0 operand stays one element with step 0 unless
 * widen asks for m copies (so that at least one operand of a block is a run). */
static const void *input_view(family fam, em_dtype dt, const char *p, int64_t s, int64_t m,
                              bool widen, void *buf, int64_t *step)
{
    *step = s != 0 || widen;
    const int64_t len = *step ? m : 1;
    if (fam == FAM_F32)
        return em_view_f32(dt, p, s, len, buf);
    if (fam == FAM_F64)
        return em_view_f64(dt, p, s, len, buf);
    return em_view_i64(dt, p, s, len, buf);
}

static void output_store(const binary_ctx *c, char *p, int64_t s, int64_t m, const void *buf)
{
    if (c->compare) {
        const uint8_t *src = buf;
        uint8_t *dst = (uint8_t *)p;
        for (int64_t i = 0; i < m; i++)
            dst[i * s] = src[i];
    } else if (c->fam == FAM_F32) {
        em_store_f32(c->out_dt, p, s, m, buf);
    } else if (c->fam == FAM_F64) {
        em_store_f64(c->out_dt, p, s, m, buf);
    } else {
        em_store_i64(c->out_dt, p, s, m, buf);
    }
}

/* operands: 0 = out, 1 = a, 2 = b */
static void binary_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const binary_ctx *c = vctx;
    const em_dtype native = native_dtype(c->fam);
    if (c->dt == native && (c->compare || c->out_dt == native) && s[0] == 1 && s[1] <= 1 &&
        s[2] <= 1 && (s[1] | s[2])) {
        binary_compute(c, n, p[0], p[1], s[1], p[2], s[2]);
        return;
    }
    const int64_t es = (int64_t)em_dtype_size(c->dt), eo = (int64_t)em_dtype_size(c->out_dt);
    union {
        float f[EM_STAGE_BLOCK];
        double d[EM_STAGE_BLOCK];
        int64_t i[EM_STAGE_BLOCK];
        uint8_t u[EM_STAGE_BLOCK];
    } abuf, bbuf, ybuf;
    for (int64_t i = 0; i < n; i += EM_STAGE_BLOCK) {
        const int64_t m = n - i < EM_STAGE_BLOCK ? n - i : EM_STAGE_BLOCK;
        int64_t sa, sb;
        const void *a = input_view(c->fam, c->dt, p[1] + i * s[1] * es, s[1], m, s[2] == 0,
                                   &abuf, &sa);
        const void *b = input_view(c->fam, c->dt, p[2] + i * s[2] * es, s[2], m, false, &bbuf,
                                   &sb);
        binary_compute(c, m, &ybuf, a, sa, b, sb);
        output_store(c, p[0] + i * s[0] * eo, s[0], m, &ybuf);
    }
}

int em_cpu_binary(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b)
{
    if (!em_binary_args_ok(op, out, a, b))
        return EM_KERNEL_UNSUPPORTED;
    binary_ctx c = {op, a->dtype, out->dtype, family_of(a->dtype), em_binary_is_compare(op)};
    em_iter it;
    em_iter_init(&it, out->ndim, out->shape, 3, (const em_arr *[]){out, a, b}, 0);
    em_iter_run(&it, 1, binary_run, &c);
    return EM_KERNEL_OK;
}

/* ---- gradients: gx[i] = g[i] times op's partial derivative at (a[i], b[i], y[i]) ---- */

/* Comparisons that may raise FP exceptions made where C's order would skip them (ember reads no
 * exception flags): maximum's and minimum's share of g then vectorizes, branch-free. */
#define NO_TRAPS __attribute__((optimize("no-trapping-math")))

/* The gradient kernels, once per compute type T (em_binary_grad_value picks the derivatives of
 * T): a loop per op and operand, in which both are constants. gx, a, b, y (n); g (n), or one
 * element where sg is 0 (the gradient of a sum or a mean). binary_grad_f32, binary_grad_f64. */
#define GMAP(op, wrt_b)                                                                           \
    do {                                                                                          \
        if (sg) {                                                                                 \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                   \
                gx[i] = em_binary_grad_value(op, wrt_b, g[i], a[i], b[i], y[i]);                  \
        } else {                                                                                  \
            const __auto_type g0 = g[0];                                                          \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                   \
                gx[i] = em_binary_grad_value(op, wrt_b, g0, a[i], b[i], y[i]);                    \
        }                                                                                         \
    } while (0)
#define GRAD_CASE(op)                                                                             \
    case op:                                                                                      \
        if (wrt_b)                                                                                \
            GMAP(op, true);                                                                       \
        else                                                                                      \
            GMAP(op, false);                                                                      \
        break;
#define DEFINE_BINARY_GRAD(NAME, T)                                                               \
    NO_TRAPS static void NAME(em_binary_op op, bool wrt_b, int64_t n, T *restrict gx,             \
                              const T *restrict g, int64_t sg, const T *restrict a,               \
                              const T *restrict b, const T *restrict y)                           \
    {                                                                                             \
        switch (op) {                                                                             \
            EM_BINARY_OPS(GRAD_CASE)                                                              \
        }                                                                                         \
    }

DEFINE_BINARY_GRAD(binary_grad_f32, float)
DEFINE_BINARY_GRAD(binary_grad_f64, double)

typedef struct {
    em_binary_op op;
    bool wrt_b;
    em_dtype dt;
} grad_ctx;

/* The kernel of c's dtype (f32 for f16/bf16) over m elements: gx (m), v = g, a, b, y (m), g one
 * element where sg is 0. */
static void grad_compute(const grad_ctx *c, int64_t m, void *gx, const void *const *v, int64_t sg)
{
    if (c->dt == EM_F64)
        binary_grad_f64(c->op, c->wrt_b, m, gx, v[0], sg, v[1], v[2], v[3]);
    else
        binary_grad_f32(c->op, c->wrt_b, m, gx, v[0], sg, v[1], v[2], v[3]);
}

/* m compute values of c's dtype at p (stride s): p itself or buf (em_view_f32/f64). */
static const void *grad_view(const grad_ctx *c, const char *p, int64_t s, int64_t m, void *buf)
{
    if (c->dt == EM_F64)
        return em_view_f64(c->dt, p, s, m, buf);
    return em_view_f32(c->dt, p, s, m, buf);
}

/* buf (m) = m copies of the element at p, as grad_view with stride 0. */
static const void *grad_splat(const grad_ctx *c, const char *p, int64_t m, void *buf)
{
    if (c->dt == EM_F64) {
        const double v = *(const double *)p;
        double *d = buf;
#pragma omp simd
        for (int64_t i = 0; i < m; i++)
            d[i] = v;
    } else {
        float v, *d = buf;
        em_load_f32(c->dt, p, 0, 1, &v);
#pragma omp simd
        for (int64_t i = 0; i < m; i++)
            d[i] = v;
    }
    return buf;
}

/* operands: 0 = gx, 1 = g, 2 = a, 3 = b, 4 = y. A run of contiguous f32 or f64 operands (g also
 * one broadcast element) goes to the kernel whole; others in blocks: g as one element, a
 * broadcast a, b or y as one block of copies of its element, the rest viewed in place or
 * converted, and gx written in place where it is contiguous f32/f64. */
static void binary_grad_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    const grad_ctx *c = vctx;
    const int64_t es = (int64_t)em_dtype_size(c->dt);
    const bool out_in_place = s[0] == 1 && (c->dt == EM_F32 || c->dt == EM_F64);
    const int64_t sg = s[1] != 0;
    bool flat = out_in_place && s[1] <= 1;
    for (int k = 2; k <= 4; k++)
        flat = flat && s[k] == 1;
    if (flat) {
        grad_compute(c, n, p[0], (const void *[]){p[1], p[2], p[3], p[4]}, sg);
        return;
    }
    union {
        float f[EM_STAGE_BLOCK];
        double d[EM_STAGE_BLOCK];
    } in_buf[4], out_buf;
    const void *v[4];
    if (!sg)
        v[0] = grad_view(c, p[1], 0, 1, &in_buf[0]);
    for (int k = 1; k < 4; k++)
        if (s[k + 1] == 0)
            v[k] = grad_splat(c, p[k + 1], n < EM_STAGE_BLOCK ? n : EM_STAGE_BLOCK, &in_buf[k]);
    for (int64_t i = 0; i < n; i += EM_STAGE_BLOCK) {
        const int64_t m = n - i < EM_STAGE_BLOCK ? n - i : EM_STAGE_BLOCK;
        for (int k = 0; k < 4; k++)
            if (s[k + 1] != 0)
                v[k] = grad_view(c, p[k + 1] + i * s[k + 1] * es, s[k + 1], m, &in_buf[k]);
        char *gx = p[0] + i * s[0] * es;
        if (out_in_place) {
            grad_compute(c, m, gx, v, sg);
            continue;
        }
        grad_compute(c, m, &out_buf, v, sg);
        if (c->dt == EM_F64)
            em_store_f64(c->dt, gx, s[0], m, out_buf.d);
        else
            em_store_f32(c->dt, gx, s[0], m, out_buf.f);
    }
}

int em_cpu_binary_grad(em_binary_op op, bool wrt_b, const em_arr *gx, const em_arr *g,
                       const em_arr *a, const em_arr *b, const em_arr *y)
{
    if (!em_binary_grad_args_ok(op, gx, g, a, b, y))
        return EM_KERNEL_UNSUPPORTED;
    grad_ctx c = {op, wrt_b, gx->dtype};
    em_iter it;
    em_iter_init(&it, gx->ndim, gx->shape, 5, (const em_arr *[]){gx, g, a, b, y}, 0);
    em_iter_run(&it, 1, binary_grad_run, &c);
    return EM_KERNEL_OK;
}

/* y[i] = c[i] ? a[i] : b[i], moving elements as unsigned integers of their width. */
#define WHERE_LOOP(UT)                                                                            \
    do {                                                                                          \
        UT *restrict y = (UT *)p[0];                                                              \
        const uint8_t *restrict c = (const uint8_t *)p[1];                                        \
        const UT *restrict a = (const UT *)p[2], *restrict b = (const UT *)p[3];                  \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = c[i] ? a[i] : b[i];        \
        } else {                                                                                  \
            for (int64_t i = 0; i < n; i++)                                                       \
                y[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]];                            \
        }                                                                                         \
    } while (0)

/* operands: 0 = out, 1 = cond, 2 = a, 3 = b; ctx holds the element size */
static void where_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    switch (*(const size_t *)vctx) {
    case 1: WHERE_LOOP(uint8_t); break;
    case 2: WHERE_LOOP(uint16_t); break;
    case 4: WHERE_LOOP(uint32_t); break;
    default: WHERE_LOOP(uint64_t); break;
    }
}

int em_cpu_where(const em_arr *out, const em_arr *cond, const em_arr *a, const em_arr *b)
{
    if (cond->dtype != EM_BOOL || a->dtype != out->dtype || b->dtype != out->dtype ||
        !em_dtype_valid(out->dtype) || !em_arr_same_shape(out, cond) ||
        !em_arr_same_shape(out, a) || !em_arr_same_shape(out, b))
        return EM_KERNEL_UNSUPPORTED;
    size_t es = em_dtype_size(out->dtype);
    em_iter it;
    em_iter_init(&it, out->ndim, out->shape, 4, (const em_arr *[]){out, cond, a, b}, 0);
    em_iter_run(&it, 1, where_run, &es);
    return EM_KERNEL_OK;
}
