/* Binary elementwise kernels (arithmetic, maximum/minimum, comparisons to bool) and where() on the
 * CPU; broadcast inputs arrive with stride 0 and run as scalar-operand loops. */
#include <tgmath.h>

#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

typedef enum { FAM_F32, FAM_F64, FAM_I64, FAM_NONE } family;

/* Compute family of an input dtype; bool compares as an integer. */
static family family_of(em_dtype dt)
{
    if (dt == EM_F32 || dt == EM_F16 || dt == EM_BF16)
        return FAM_F32;
    if (dt == EM_F64)
        return FAM_F64;
    return em_dtype_is_int(dt) || dt == EM_BOOL ? FAM_I64 : FAM_NONE;
}

static bool is_compare(em_binary_op op)
{
    return op >= EM_BINARY_EQ && op <= EM_BINARY_GE;
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

/* Float arithmetic once per compute type T; maximum/minimum propagate NaN like PyTorch. */
#define DEFINE_BINARY_FLOAT(NAME, T)                                                              \
    static void NAME(em_binary_op op, int64_t n, T *restrict y, const T *restrict pa, int64_t sa,  \
                     const T *restrict pb, int64_t sb)                                            \
    {                                                                                             \
        switch (op) {                                                                             \
        case EM_BINARY_ADD: MAP2(a + b); break;                                                   \
        case EM_BINARY_SUB: MAP2(a - b); break;                                                   \
        case EM_BINARY_MUL: MAP2(a * b); break;                                                   \
        case EM_BINARY_DIV: MAP2(a / b); break;                                                   \
        case EM_BINARY_POW: MAP2(pow(a, b)); break;                                               \
        case EM_BINARY_MAXIMUM: MAP2(a != a || a > b ? a : b); break;                             \
        case EM_BINARY_MINIMUM: MAP2(a != a || a < b ? a : b); break;                             \
        default: break;                                                                           \
        }                                                                                         \
    }

DEFINE_BINARY_FLOAT(binary_f32, float)
DEFINE_BINARY_FLOAT(binary_f64, double)

/* Integer arithmetic wraps (two's complement through uint64_t). */
static void binary_i64(em_binary_op op, int64_t n, int64_t *restrict y, const int64_t *restrict pa,
                       int64_t sa, const int64_t *restrict pb, int64_t sb)
{
    switch (op) {
    case EM_BINARY_ADD: MAP2((int64_t)((uint64_t)a + (uint64_t)b)); break;
    case EM_BINARY_SUB: MAP2((int64_t)((uint64_t)a - (uint64_t)b)); break;
    case EM_BINARY_MUL: MAP2((int64_t)((uint64_t)a * (uint64_t)b)); break;
    case EM_BINARY_MAXIMUM: MAP2(a > b ? a : b); break;
    case EM_BINARY_MINIMUM: MAP2(a < b ? a : b); break;
    default: break;
    }
}

/* Comparisons write 0/1 bytes; NaN compares unequal to everything. */
#define DEFINE_COMPARE(NAME, T)                                                                   \
    static void NAME(em_binary_op op, int64_t n, uint8_t *restrict y, const T *restrict pa,       \
                     int64_t sa, const T *restrict pb, int64_t sb)                                \
    {                                                                                             \
        switch (op) {                                                                             \
        case EM_BINARY_EQ: MAP2(a == b); break;                                                   \
        case EM_BINARY_NE: MAP2(a != b); break;                                                   \
        case EM_BINARY_LT: MAP2(a < b); break;                                                    \
        case EM_BINARY_LE: MAP2(a <= b); break;                                                   \
        case EM_BINARY_GT: MAP2(a > b); break;                                                    \
        case EM_BINARY_GE: MAP2(a >= b); break;                                                   \
        default: break;                                                                           \
        }                                                                                         \
    }

DEFINE_COMPARE(compare_f32, float)
DEFINE_COMPARE(compare_f64, double)
DEFINE_COMPARE(compare_i64, int64_t)

typedef struct {
    em_binary_op op;
    em_dtype dt, out_dt;
    family fam;
    bool compare;
} binary_ctx;

/* Runs the compute kernel on contiguous-or-broadcast operands (steps 0 or 1). */
static void binary_compute(const binary_ctx *c, int64_t n, void *y, const void *a, int64_t sa,
                           const void *b, int64_t sb)
{
    switch (c->fam * 2 + c->compare) {
    case FAM_F32 * 2: binary_f32(c->op, n, y, a, sa, b, sb); break;
    case FAM_F64 * 2: binary_f64(c->op, n, y, a, sa, b, sb); break;
    case FAM_I64 * 2: binary_i64(c->op, n, y, a, sa, b, sb); break;
    case FAM_F32 * 2 + 1: compare_f32(c->op, n, y, a, sa, b, sb); break;
    case FAM_F64 * 2 + 1: compare_f64(c->op, n, y, a, sa, b, sb); break;
    case FAM_I64 * 2 + 1: compare_i64(c->op, n, y, a, sa, b, sb); break;
    default: break;
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

static bool arith_supported(em_binary_op op, family fam)
{
    if (fam == FAM_F32 || fam == FAM_F64)
        return true;
    return fam == FAM_I64 && op != EM_BINARY_DIV && op != EM_BINARY_POW;
}

int em_cpu_binary(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b)
{
    if ((unsigned)op >= EM_BINARY_COUNT || a->dtype != b->dtype || !em_arr_same_shape(out, a) ||
        !em_arr_same_shape(out, b))
        return EM_KERNEL_UNSUPPORTED;
    const family fam = family_of(a->dtype);
    const bool compare = is_compare(op);
    if (fam == FAM_NONE)
        return EM_KERNEL_UNSUPPORTED;
    if (compare ? out->dtype != EM_BOOL
                : out->dtype != a->dtype || a->dtype == EM_BOOL || !arith_supported(op, fam))
        return EM_KERNEL_UNSUPPORTED;
    binary_ctx c = {op, a->dtype, out->dtype, fam, compare};
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
