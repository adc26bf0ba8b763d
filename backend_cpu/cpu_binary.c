/* Binary elementwise kernels on the CPU, with the formulas of
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
