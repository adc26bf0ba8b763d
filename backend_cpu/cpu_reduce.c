/* Reductions on the CPU: sum, mean, prod, max/min, argmax/argmin and var over any set of dims,
 * with the folds of backend/reduce_ops_internal.h. Row reductions walk the reduced dims
 * innermost, column reductions accumulate whole rows of kept elements; floats accumulate in
 * double, integers in i64 (wrapping). The reduced space is cut in fixed chunks, so results are
 * the same for any thread count. */
#include <stdlib.h>

#include "backend/kernel_args_internal.h"
#include "backend/reduce_ops_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

#define CHUNK 32768  /* reduced elements per task; fixed, so sums never depend on threads */
#define COLS 512     /* kept columns per column-reduction task */
#define MIN_COLS 8   /* narrower kept rows reduce as strided rows instead */

/* The running result of one output over part of its reduced space. */
typedef struct {
    double f;    /* float inputs */
    int64_t i;   /* integer inputs */
    int64_t idx; /* arg ops: position in the row-major order of the reduced dims */
} acc;

/* One reduction pass. var runs two: the mean (EM_FOLD_SUM / R), then squared deviations
 * (EM_FOLD_SQDEV). */
typedef struct {
    em_fold k;
    bool fl;     /* float input: double accumulators; else i64 */
    double div;  /* float result = accumulated / div */
    em_dtype in_dt, out_dt;
    em_iter kept; /* kept dims; operands: 0 = out, 1 = in, 2 = per-output mean (f64) */
    em_iter red;  /* reduced dims; operand: in */
    int64_t R;    /* reduced elements per output */
} pass;

/* The start of a fold over positions from pos on: an arg fold holds pos until an element takes
 * its place, so that a range of equal extremes (all -inf, say) gives its first position. */
static void acc_init(em_fold k, acc *a, int64_t pos)
{
    a->f = em_fold_identity_f(k);
    a->i = em_fold_identity_i(k);
    a->idx = pos;
}

/* Folds x (at position pos, after every position folded so far) into v, and for an arg fold its
 * position into idx where x takes the best one's place. */
static inline void update_f(em_fold k, double *v, int64_t *idx, double x, int64_t pos)
{
    if (!em_fold_is_arg(k)) {
        *v = em_fold_step_f(k, *v, x, 0);
    } else if (em_fold_arg_takes_f(k == EM_FOLD_ARGMAX, x, *v)) {
        *v = x;
        *idx = pos;
    }
}

static inline void update_i(em_fold k, int64_t *v, int64_t *idx, int64_t x, int64_t pos)
{
    if (!em_fold_is_arg(k)) {
        *v = em_fold_step_i(k, *v, x);
    } else if (em_fold_arg_takes_i(k == EM_FOLD_ARGMAX, x, *v)) {
        *v = x;
        *idx = pos;
    }
}

/* Merges a later partial b into a. */
static inline void merge(em_fold k, bool fl, acc *a, const acc *b)
{
    if (fl && !em_fold_is_arg(k))
        a->f = em_fold_combine_f(k, a->f, b->f);
    else if (fl)
        update_f(k, &a->f, &a->idx, b->f, b->idx);
    else
        update_i(k, &a->i, &a->idx, b->i, b->idx);
}

/* Merges the w later partials b into a, a loop per fold in which the fold is a constant. */
#define COMBINE_CASE(K)                                                                           \
    case K:                                                                                       \
        for (int64_t j = 0; j < w; j++)                                                           \
            merge(K, ps->fl, &a[j], &b[j]);                                                       \
        break;
static void combine(const pass *ps, acc *a, const acc *b, int64_t w)
{
    switch (ps->k) {
        EM_FOLDS(COMBINE_CASE)
    }
}

/* Eight independent lanes (vectorizable, fixed order), combined pairwise. */
static double lanes_total(const double *l)
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* Sums of x[i] and of (x[i] - mean)^2 (the SUM and SQDEV folds) over a contiguous run of T
 * (float or double), in eight lanes. */
#define DEFINE_LANE_SUMS(SUM, SQDEV, T)                                                           \
    static double SUM(const T *x, int64_t m)                                                      \
    {                                                                                             \
        double l[8] = {0};                                                                        \
        int64_t i = 0;                                                                            \
        for (; i + 8 <= m; i += 8)                                                                \
            for (int j = 0; j < 8; j++)                                                           \
                l[j] = em_fold_step_f(EM_FOLD_SUM, l[j], x[i + j], 0);                            \
        for (int j = 0; i < m; i++, j++)                                                          \
            l[j] = em_fold_step_f(EM_FOLD_SUM, l[j], x[i], 0);                                    \
        return lanes_total(l);                                                                    \
    }                                                                                             \
    static double SQDEV(const T *x, int64_t m, double mean)                                       \
    {                                                                                             \
        double l[8] = {0};                                                                        \
        int64_t i = 0;                                                                            \
        for (; i + 8 <= m; i += 8)                                                                \
            for (int j = 0; j < 8; j++)                                                           \
                l[j] = em_fold_step_f(EM_FOLD_SQDEV, l[j], x[i + j], mean);                       \
        for (int j = 0; i < m; i++, j++)                                                          \
            l[j] = em_fold_step_f(EM_FOLD_SQDEV, l[j], x[i], mean);                               \
        return lanes_total(l);                                                                    \
    }

DEFINE_LANE_SUMS(sum_lanes, sqdev_lanes, double)
DEFINE_LANE_SUMS(sum_lanes_f32, sqdev_lanes_f32, float)

/* Folds m consecutive reduced values starting at position pos into one accumulator. */
#define EACH(UPDATE, K, V)                                                                        \
    for (int64_t i = 0; i < m; i++)                                                               \
        UPDATE(K, &a->V, &a->idx, x[i], pos + i)

/* A loop per fold, in which the fold is a constant. */
static void row_block_f(em_fold k, acc *a, const double *x, int64_t m, int64_t pos, double mean)
{
    switch (k) {
    case EM_FOLD_SUM: a->f += sum_lanes(x, m); break;
    case EM_FOLD_SQDEV: a->f += sqdev_lanes(x, m, mean); break;
    case EM_FOLD_PROD: EACH(update_f, EM_FOLD_PROD, f); break;
    case EM_FOLD_MAX: EACH(update_f, EM_FOLD_MAX, f); break;
    case EM_FOLD_MIN: EACH(update_f, EM_FOLD_MIN, f); break;
    case EM_FOLD_ARGMAX: EACH(update_f, EM_FOLD_ARGMAX, f); break;
    case EM_FOLD_ARGMIN: EACH(update_f, EM_FOLD_ARGMIN, f); break;
    }
}

static void row_block_i(em_fold k, acc *a, const int64_t *x, int64_t m, int64_t pos)
{
    switch (k) {
    case EM_FOLD_SUM: EACH(update_i, EM_FOLD_SUM, i); break;
    case EM_FOLD_PROD: EACH(update_i, EM_FOLD_PROD, i); break;
    case EM_FOLD_MAX: EACH(update_i, EM_FOLD_MAX, i); break;
    case EM_FOLD_MIN: EACH(update_i, EM_FOLD_MIN, i); break;
    case EM_FOLD_ARGMAX: EACH(update_i, EM_FOLD_ARGMAX, i); break;
    case EM_FOLD_ARGMIN: EACH(update_i, EM_FOLD_ARGMIN, i); break;
    case EM_FOLD_SQDEV: break; /* float only: VAR takes float inputs */
    }
}

typedef struct {
    const pass *ps;
    acc *a;
    int64_t pos;
    double mean;
} row_ctx;

/* A run of the reduced space (operand 0 = in), staged in blocks. */
static void row_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    row_ctx *c = vctx;
    const pass *ps = c->ps;
    if (ps->in_dt == EM_F32 && s[0] == 1 && (ps->k == EM_FOLD_SUM || ps->k == EM_FOLD_SQDEV)) {
        const float *x = (const float *)p[0];
        c->a->f += ps->k == EM_FOLD_SUM ? sum_lanes_f32(x, n) : sqdev_lanes_f32(x, n, c->mean);
        return;
    }
    const int64_t es = (int64_t)ps->red.elsize[0];
    for (int64_t i = 0; i < n; i += EM_STAGE_BLOCK) {
        const int64_t m = n - i < EM_STAGE_BLOCK ? n - i : EM_STAGE_BLOCK;
        const char *x = p[0] + i * s[0] * es;
        if (ps->fl) {
            double buf[EM_STAGE_BLOCK];
            row_block_f(ps->k, c->a, em_view_f64(ps->in_dt, x, s[0], m, buf), m, c->pos, c->mean);
        } else {
            int64_t buf[EM_STAGE_BLOCK];
            row_block_i(ps->k, c->a, em_view_i64(ps->in_dt, x, s[0], m, buf), m, c->pos);
        }
        c->pos += m;
    }
}

/* Reduces positions [r0, r1) of the reduced space of the output whose input starts at in. */
static void reduce_row_range(const pass *ps, char *in, const char *mean, int64_t r0, int64_t r1,
                             acc *a)
{
    acc_init(ps->k, a, r0);
    row_ctx c = {ps, a, r0, ps->k == EM_FOLD_SQDEV ? *(const double *)mean : 0};
    em_iter_range(&ps->red, &in, r0, r1, row_run, &c);
}

static void store_result(const pass *ps, const acc *a, char *out)
{
    if (em_fold_is_arg(ps->k)) {
        em_store_i64(EM_I64, out, 1, 1, &a->idx);
    } else if (ps->fl) {
        const double v = a->f / ps->div;
        em_store_f64(ps->out_dt, out, 1, 1, &v);
    } else {
        em_store_i64(ps->out_dt, out, 1, 1, &a->i);
    }
}

/* A run of outputs (operands of the kept iteration), each reduced whole by one thread. */
static void rows_out_run(void *vps, int64_t n, char *const *p, const int64_t *s)
{
    const pass *ps = vps;
    const size_t *es = ps->kept.elsize;
    for (int64_t j = 0; j < n; j++) {
        acc a;
        reduce_row_range(ps, p[1] + j * s[1] * (int64_t)es[1], p[2] + j * s[2] * (int64_t)es[2],
                         0, ps->R, &a);
        store_result(ps, &a, p[0] + j * s[0] * (int64_t)es[0]);
    }
}

static int run_rows(const pass *ps)
{
    const int64_t R = ps->R, nout = ps->kept.numel;
    const int64_t nchunk = (R + CHUNK - 1) / CHUNK;
    if (nchunk <= 1) {
        em_iter_run(&ps->kept, R > 0 ? R : 1, rows_out_run, (void *)ps);
        return EM_KERNEL_OK;
    }
    acc *part = em_cpu_scratch((size_t)(nout * nchunk) * sizeof(acc));
    if (!part)
        return EM_KERNEL_FAILED;
#pragma omp parallel for schedule(static) num_threads(em_cpu_threads())
    for (int64_t t = 0; t < nout * nchunk; t++) {
        char *ptr[3];
        em_iter_offsets(&ps->kept, ps->kept.data, t / nchunk, ptr);
        const int64_t r0 = t % nchunk * CHUNK, r1 = r0 + CHUNK < R ? r0 + CHUNK : R;
        reduce_row_range(ps, ptr[1], ptr[2], r0, r1, &part[t]);
    }
    for (int64_t o = 0; o < nout; o++) {
        acc a = part[o * nchunk];
        for (int64_t c = 1; c < nchunk; c++)
            combine(ps, &a, &part[o * nchunk + c], 1);
        char *ptr[3];
        em_iter_offsets(&ps->kept, ps->kept.data, o, ptr);
        store_result(ps, &a, ptr[0]);
    }
    em_cpu_scratch_free(part);
    return EM_KERNEL_OK;
}

/* Column accumulators of one task, one per kept column. */
typedef struct {
    const pass *ps;
    int64_t w;       /* columns */
    int64_t cstride; /* input step between columns, elements */
    int64_t pos;     /* position in the reduced space of the next row */
    double f[COLS];
    int64_t i[COLS];
    int64_t idx[COLS];
    double mean[COLS];
} col_ctx;

/* f (w) += the rows of x (rows, w; rows `stride` elements apart) in double, in row order: a
 * column sum (a bias gradient's), 16 columns held in registers across the rows. */
#define COL_SUM_LANES 16
#define DEFINE_COL_SUM(NAME, T)                                                                   \
    EM_WIDEST_LANES static void NAME(int64_t w, int64_t rows, int64_t stride, double *restrict f, \
                                     const T *restrict x)                                         \
    {                                                                                             \
        int64_t j0 = 0;                                                                           \
        for (; j0 + COL_SUM_LANES <= w; j0 += COL_SUM_LANES) {                                    \
            double sum[COL_SUM_LANES];                                                            \
            for (int j = 0; j < COL_SUM_LANES; j++)                                               \
                sum[j] = f[j0 + j];                                                               \
            for (int64_t q = 0; q < rows; q++)                                                    \
                _Pragma("omp simd") for (int j = 0; j < COL_SUM_LANES; j++)                       \
                    sum[j] = em_fold_step_f(EM_FOLD_SUM, sum[j], x[q * stride + j0 + j], 0);      \
            for (int j = 0; j < COL_SUM_LANES; j++)                                               \
                f[j0 + j] = sum[j];                                                               \
        }                                                                                         \
        for (int64_t q = 0; q < rows; q++)                                                        \
            for (int64_t j = j0; j < w; j++)                                                      \
                f[j] = em_fold_step_f(EM_FOLD_SUM, f[j], x[q * stride + j], 0);                  \
    }

DEFINE_COL_SUM(col_sum_f64, double)
DEFINE_COL_SUM(col_sum_f32, float)

/* Folds one row of w kept columns (contiguous T values) into the column accumulators, a loop per
 * fold in which the fold is a constant; sums are col_run's. */
#define COL_EACH(K)                                                                               \
    for (int64_t j = 0; j < w; j++)                                                               \
        update_f(K, &f[j], &c->idx[j], x[j], c->pos)
#define DEFINE_COL_ROW(NAME, T)                                                                   \
    static void NAME(col_ctx *c, const T *x)                                                      \
    {                                                                                             \
        const int64_t w = c->w;                                                                   \
        double *restrict f = c->f;                                                                \
        switch (c->ps->k) {                                                                       \
        case EM_FOLD_SQDEV:                                                                       \
            _Pragma("omp simd") for (int64_t j = 0; j < w; j++)                                   \
                f[j] = em_fold_step_f(EM_FOLD_SQDEV, f[j], x[j], c->mean[j]);                     \
            break;                                                                                \
        case EM_FOLD_SUM: COL_EACH(EM_FOLD_SUM); break;                                           \
        case EM_FOLD_PROD: COL_EACH(EM_FOLD_PROD); break;                                         \
        case EM_FOLD_MAX: COL_EACH(EM_FOLD_MAX); break;                                           \
        case EM_FOLD_MIN: COL_EACH(EM_FOLD_MIN); break;                                           \
        case EM_FOLD_ARGMAX: COL_EACH(EM_FOLD_ARGMAX); break;                                     \
        case EM_FOLD_ARGMIN: COL_EACH(EM_FOLD_ARGMIN); break;                                     \
        }                                                                                         \
    }

DEFINE_COL_ROW(col_row_f, double)
DEFINE_COL_ROW(col_row_f32, float)

#define COL_EACH_I(K)                                                                             \
    for (int64_t j = 0; j < c->w; j++)                                                            \
        update_i(K, &c->i[j], &c->idx[j], x[j], c->pos)
static void col_row_i(col_ctx *c, const int64_t *x)
{
    switch (c->ps->k) {
    case EM_FOLD_SUM: COL_EACH_I(EM_FOLD_SUM); break;
    case EM_FOLD_PROD: COL_EACH_I(EM_FOLD_PROD); break;
    case EM_FOLD_MAX: COL_EACH_I(EM_FOLD_MAX); break;
    case EM_FOLD_MIN: COL_EACH_I(EM_FOLD_MIN); break;
    case EM_FOLD_ARGMAX: COL_EACH_I(EM_FOLD_ARGMAX); break;
    case EM_FOLD_ARGMIN: COL_EACH_I(EM_FOLD_ARGMIN); break;
    case EM_FOLD_SQDEV: break; /* float only: VAR takes float inputs */
    }
}

/* A run of reduced positions (operand 0 = in); each position is one row of w kept columns. */
static void col_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    col_ctx *c = vctx;
    const pass *ps = c->ps;
    const int64_t es = (int64_t)ps->red.elsize[0];
    if (ps->k == EM_FOLD_SUM && ps->fl) { /* the run's rows at once, f32 or f64 in place */
        if (ps->in_dt == EM_F32 && c->cstride == 1)
            col_sum_f32(c->w, n, s[0], c->f, (const float *)p[0]);
        else if (ps->in_dt == EM_F64 && c->cstride == 1)
            col_sum_f64(c->w, n, s[0], c->f, (const double *)p[0]);
        else
            for (int64_t q = 0; q < n; q++) {
                double buf[COLS];
                col_sum_f64(c->w, 1, 0, c->f,
                            em_view_f64(ps->in_dt, p[0] + q * s[0] * es, c->cstride, c->w, buf));
            }
        c->pos += n;
        return;
    }
    for (int64_t q = 0; q < n; q++, c->pos++) {
        const char *row = p[0] + q * s[0] * es;
        if (ps->in_dt == EM_F32 && c->cstride == 1) {
            col_row_f32(c, (const float *)row);
        } else if (ps->fl) {
            double buf[COLS];
            col_row_f(c, em_view_f64(ps->in_dt, row, c->cstride, c->w, buf));
        } else {
            int64_t buf[COLS];
            col_row_i(c, em_view_i64(ps->in_dt, row, c->cstride, c->w, buf));
        }
    }
}

/* Reduces positions [r0, r1) for w columns whose operands start at ptr (out, in, mean). */
static void reduce_col_range(const pass *ps, char *const *ptr, int64_t w, int64_t r0, int64_t r1,
                             acc *out)
{
    const int inner = ps->kept.ndim - 1;
    col_ctx c = {.ps = ps, .w = w, .cstride = ps->kept.strides[1][inner], .pos = r0};
    acc a;
    acc_init(ps->k, &a, r0);
    for (int64_t j = 0; j < w; j++) {
        c.f[j] = a.f;
        c.i[j] = a.i;
        c.idx[j] = a.idx;
    }
    if (ps->k == EM_FOLD_SQDEV)
        em_load_f64(EM_F64, ptr[2], ps->kept.strides[2][inner], w, c.mean);
    em_iter_range(&ps->red, &ptr[1], r0, r1, col_run, &c);
    for (int64_t j = 0; j < w; j++)
        out[j] = (acc){c.f[j], c.i[j], c.idx[j]};
}

static void store_cols(const pass *ps, char *out, int64_t w, const acc *a)
{
    const int inner = ps->kept.ndim - 1;
    const int64_t stride = ps->kept.strides[0][inner];
    if (ps->fl && !em_fold_is_arg(ps->k)) { /* float results in one store */
        double v[COLS];
        for (int64_t j = 0; j < w; j++)
            v[j] = a[j].f / ps->div;
        em_store_f64(ps->out_dt, out, stride, w, v);
        return;
    }
    for (int64_t j = 0; j < w; j++)
        store_result(ps, &a[j], out + j * stride * (int64_t)ps->kept.elsize[0]);
}

/* Tasks are (kept row, block of COLS columns, chunk of rpc reduced rows); a block's partials sit
 * at part[(first column) * nrc + chunk * w + j] and fold in chunk order. */
static int run_cols(const pass *ps)
{
    const em_iter *kt = &ps->kept;
    const int64_t R = ps->R, C = kt->shape[kt->ndim - 1], nko = kt->numel / C;
    const int64_t ncb = (C + COLS - 1) / COLS;
    const int64_t rpc = CHUNK / (C < COLS ? C : COLS), nrc = (R + rpc - 1) / rpc;
    const int64_t ntask = nko * ncb * nrc;
    acc *part = em_cpu_scratch((size_t)(kt->numel * nrc) * sizeof(acc));
    if (!part)
        return EM_KERNEL_FAILED;
#pragma omp parallel for schedule(static) if (kt->numel * R >= EM_CPU_PARALLEL_MIN) \
        num_threads(em_cpu_threads())
    for (int64_t t = 0; t < ntask; t++) {
        const int64_t rc = t % nrc, cb = t / nrc % ncb, ko = t / (nrc * ncb);
        const int64_t c0 = cb * COLS, w = C - c0 < COLS ? C - c0 : COLS;
        const int64_t r0 = rc * rpc, r1 = r0 + rpc < R ? r0 + rpc : R;
        char *ptr[3];
        em_iter_offsets(kt, kt->data, ko * C + c0, ptr);
        reduce_col_range(ps, ptr, w, r0, r1, &part[(ko * C + c0) * nrc + rc * w]);
    }
    for (int64_t g = 0; g < nko * ncb; g++) {
        const int64_t c0 = g % ncb * COLS, w = C - c0 < COLS ? C - c0 : COLS;
        const int64_t first = g / ncb * C + c0;
        acc *a = &part[first * nrc];
        for (int64_t rc = 1; rc < nrc; rc++)
            combine(ps, a, &a[rc * w], w);
        char *ptr[3];
        em_iter_offsets(kt, kt->data, first, ptr);
        store_cols(ps, ptr[0], w, a);
    }
    em_cpu_scratch_free(part);
    return EM_KERNEL_OK;
}

/* Builds a pass of fold k writing out; mean (f64, out's shape) feeds EM_FOLD_SQDEV. */
static int run_pass(em_fold k, double div, const em_arr *out, const em_arr *in,
                    const em_arr *mean)
{
    pass ps = {.k = k, .fl = em_dtype_is_float(in->dtype), .div = div, .in_dt = in->dtype,
               .out_dt = out->dtype, .R = 1};
    int64_t kshape[EM_MAX_DIMS], rshape[EM_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) {
        const bool reduced = out->shape[d] != in->shape[d];
        kshape[d] = reduced ? 1 : in->shape[d];
        rshape[d] = reduced ? in->shape[d] : 1;
        ps.R *= rshape[d];
    }
    em_iter_init(&ps.kept, in->ndim, kshape, 3, (const em_arr *[]){out, in, mean}, 0);
    em_iter_init(&ps.red, in->ndim, rshape, 1, (const em_arr *[]){in},
                 em_fold_is_arg(k) ? EM_ITER_KEEP_ORDER : 0);
    if (ps.kept.numel == 0)
        return EM_KERNEL_OK;
    const int64_t ks = ps.kept.strides[1][ps.kept.ndim - 1];
    const int64_t rs = ps.red.strides[0][ps.red.ndim - 1];
    const bool cols = ps.kept.numel > 1 && ps.R > 1 && ps.kept.shape[ps.kept.ndim - 1] >= MIN_COLS &&
                      ks < rs;
    return cols ? run_cols(&ps) : run_rows(&ps);
}

/* op's pass, after one for the means (f64, out's shape) where op's fold reads them (var) */
int em_cpu_reduce(em_reduce_op op, const em_reduce_params *p, const em_arr *out,
                  const em_arr *in)
{
    int64_t R;
    if (!em_reduce_args_ok(op, out, in, &R))
        return EM_KERNEL_UNSUPPORTED;
    const em_fold k = em_reduce_fold(op);
    const double div = em_reduce_divisor(op, p, R);
    if (k != EM_FOLD_SQDEV)
        return run_pass(k, div, out, in, out);
    const int64_t nout = em_arr_numel(out);
    em_arr mean = {.data = em_cpu_scratch((size_t)(nout > 0 ? nout : 1) * sizeof(double)),
                   .dtype = EM_F64, .ndim = out->ndim};
    if (!mean.data)
        return EM_KERNEL_FAILED;
    int64_t step = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        mean.shape[d] = out->shape[d];
        mean.strides[d] = step;
        step *= out->shape[d];
    }
    int rc = run_pass(EM_FOLD_SUM, em_reduce_divisor(EM_REDUCE_MEAN, p, R), &mean, in, &mean);
    if (rc == EM_KERNEL_OK)
        rc = run_pass(k, div, out, in, &mean);
    em_cpu_scratch_free(mean.data);
    return rc;
}
