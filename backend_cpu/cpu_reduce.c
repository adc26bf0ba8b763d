/* Reductions on the CPU: sum, mean, prod, max/min, argmax/argmin and var over any set of dims.
 * Row reductions walk the reduced dims innermost, column reductions accumulate whole rows of kept
 * elements; floats accumulate in double, integers in i64 (wrapping). The reduced space is cut in
 * fixed chunks, so results are the same for any thread count. */
#include <math.h>
#include <stdlib.h>

#include "backend/kernel_args_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"
#include "backend_cpu/cpu_strided_internal.h"

#define CHUNK 32768  /* reduced elements per task; fixed, so sums never depend on threads */
#define COLS 512     /* kept columns per column-reduction task */
#define MIN_COLS 8   /* narrower kept rows reduce as strided rows instead */

typedef enum { K_SUM, K_PROD, K_MAX, K_MIN, K_ARGMAX, K_ARGMIN, K_SQDEV } kind;

/* The running result of one output over part of its reduced space. */
typedef struct {
    double f;    /* float inputs */
    int64_t i;   /* integer inputs */
    int64_t idx; /* arg ops: position in the row-major order of the reduced dims */
} acc;

/* One reduction pass. var runs two: the mean (K_SUM / R), then squared deviations (K_SQDEV). */
typedef struct {
    kind k;
    bool fl;     /* float input: double accumulators; else i64 */
    double div;  /* float result = accumulated / div */
    em_dtype in_dt, out_dt;
    em_iter kept; /* kept dims; operands: 0 = out, 1 = in, 2 = per-output mean (f64) */
    em_iter red;  /* reduced dims; operand: in */
    int64_t R;    /* reduced elements per output */
} pass;

static void acc_init(kind k, acc *a, int64_t pos)
{
    a->idx = pos;
    switch (k) {
    case K_PROD: a->f = 1; a->i = 1; break;
    case K_MAX: case K_ARGMAX: a->f = -INFINITY; a->i = INT64_MIN; break;
    case K_MIN: case K_ARGMIN: a->f = INFINITY; a->i = INT64_MAX; break;
    default: a->f = 0; a->i = 0; break;
    }
}

/* Folds x (at position pos) into v; NaN wins max/min and the first NaN wins argmax/argmin, as in
 * PyTorch; ties keep the earlier position. K_SQDEV takes x already centred. */
static inline void update_f(kind k, double *v, int64_t *idx, double x, int64_t pos)
{
    switch (k) {
    case K_SUM: *v += x; break;
    case K_SQDEV: *v += x * x; break;
    case K_PROD: *v *= x; break;
    case K_MAX: *v = x > *v || x != x ? x : *v; break;
    case K_MIN: *v = x < *v || x != x ? x : *v; break;
    case K_ARGMAX:
        if (x > *v || (x != x && *v == *v)) {
            *v = x;
            *idx = pos;
        }
        break;
    case K_ARGMIN:
        if (x < *v || (x != x && *v == *v)) {
            *v = x;
            *idx = pos;
        }
        break;
    }
}

static inline void update_i(kind k, int64_t *v, int64_t *idx, int64_t x, int64_t pos)
{
    switch (k) {
    case K_SUM: *v = (int64_t)((uint64_t)*v + (uint64_t)x); break;
    case K_PROD: *v = (int64_t)((uint64_t)*v * (uint64_t)x); break;
    case K_MAX: *v = x > *v ? x : *v; break;
    case K_MIN: *v = x < *v ? x : *v; break;
    case K_ARGMAX:
        if (x > *v) {
            *v = x;
            *idx = pos;
        }
        break;
    case K_ARGMIN:
        if (x < *v) {
            *v = x;
            *idx = pos;
        }
        break;
    case K_SQDEV: break;
    }
}

/* Merges a later partial b into a. */
static void combine(const pass *ps, acc *a, const acc *b)
{
    const kind k = ps->k == K_SQDEV ? K_SUM : ps->k;
    if (ps->fl)
        update_f(k, &a->f, &a->idx, b->f, b->idx);
    else
        update_i(k, &a->i, &a->idx, b->i, b->idx);
}

/* Eight independent lanes (vectorizable, fixed order), combined pairwise. */
static double lanes_total(const double *l)
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* Sums of x[i] and of (x[i] - mean)^2 over a contiguous run of T (float or double). */
#define DEFINE_LANE_SUMS(SUM, SQDEV, T)                                                           \
    static double SUM(const T *x, int64_t m)                                                      \
    {                                                                                             \
        double l[8] = {0};                                                                        \
        int64_t i = 0;                                                                            \
        for (; i + 8 <= m; i += 8)                                                                \
            for (int j = 0; j < 8; j++)                                                           \
                l[j] += x[i + j];                                                                 \
        for (int j = 0; i < m; i++, j++)                                                          \
            l[j] += x[i];                                                                         \
        return lanes_total(l);                                                                    \
    }                                                                                             \
    static double SQDEV(const T *x, int64_t m, double mean)                                       \
    {                                                                                             \
        double l[8] = {0};                                                                        \
        int64_t i = 0;                                                                            \
        for (; i + 8 <= m; i += 8)                                                                \
            for (int j = 0; j < 8; j++)                                                           \
                l[j] += (x[i + j] - mean) * (x[i + j] - mean);                                    \
        for (int j = 0; i < m; i++, j++)                                                          \
            l[j] += (x[i] - mean) * (x[i] - mean);                                                \
        return lanes_total(l);                                                                    \
    }

DEFINE_LANE_SUMS(sum_lanes, sqdev_lanes, double)
DEFINE_LANE_SUMS(sum_lanes_f32, sqdev_lanes_f32, float)

/* Folds m consecutive reduced values starting at position pos into one accumulator. */
#define EACH(UPDATE, K, V)                                                                        \
    for (int64_t i = 0; i < m; i++)                                                               \
        UPDATE(K, &a->V, &a->idx, x[i], pos + i)

static void row_block_f(kind k, acc *a, const double *x, int64_t m, int64_t pos, double mean)
{
    switch (k) {
    case K_SUM: a->f += sum_lanes(x, m); break;
    case K_SQDEV: a->f += sqdev_lanes(x, m, mean); break;
    case K_PROD: EACH(update_f, K_PROD, f); break;
    case K_MAX: EACH(update_f, K_MAX, f); break;
    case K_MIN: EACH(update_f, K_MIN, f); break;
    case K_ARGMAX: EACH(update_f, K_ARGMAX, f); break;
    case K_ARGMIN: EACH(update_f, K_ARGMIN, f); break;
    }
}

static void row_block_i(kind k, acc *a, const int64_t *x, int64_t m, int64_t pos)
{
    switch (k) {
    case K_SUM: EACH(update_i, K_SUM, i); break;
    case K_PROD: EACH(update_i, K_PROD, i); break;
    case K_MAX: EACH(update_i, K_MAX, i); break;
    case K_MIN: EACH(update_i, K_MIN, i); break;
    case K_ARGMAX: EACH(update_i, K_ARGMAX, i); break;
    case K_ARGMIN: EACH(update_i, K_ARGMIN, i); break;
    case K_SQDEV: break;
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
    if (ps->in_dt == EM_F32 && s[0] == 1 && (ps->k == K_SUM || ps->k == K_SQDEV)) {
        const float *x = (const float *)p[0];
        c->a->f += ps->k == K_SUM ? sum_lanes_f32(x, n) : sqdev_lanes_f32(x, n, c->mean);
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
    row_ctx c = {ps, a, r0, ps->k == K_SQDEV ? *(const double *)mean : 0};
    em_iter_range(&ps->red, &in, r0, r1, row_run, &c);
}

static void store_result(const pass *ps, const acc *a, char *out)
{
    if (ps->k == K_ARGMAX || ps->k == K_ARGMIN) {
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
            combine(ps, &a, &part[o * nchunk + c]);
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
                    sum[j] += x[q * stride + j0 + j];                                             \
            for (int j = 0; j < COL_SUM_LANES; j++)                                               \
                f[j0 + j] = sum[j];                                                               \
        }                                                                                         \
        for (int64_t q = 0; q < rows; q++)                                                        \
            for (int64_t j = j0; j < w; j++)                                                      \
                f[j] += x[q * stride + j];                                                        \
    }

DEFINE_COL_SUM(col_sum_f64, double)
DEFINE_COL_SUM(col_sum_f32, float)

/* Folds one row of w kept columns (contiguous T values) into the column accumulators; sums
 * are col_run's. */
#define DEFINE_COL_ROW(NAME, T)                                                                   \
    static void NAME(col_ctx *c, const T *x)                                                      \
    {                                                                                             \
        const int64_t w = c->w;                                                                   \
        double *restrict f = c->f;                                                                \
        if (c->ps->k == K_SQDEV) {                                                                \
            _Pragma("omp simd") for (int64_t j = 0; j < w; j++)                                   \
                f[j] += (x[j] - c->mean[j]) * (x[j] - c->mean[j]);                                \
            return;                                                                               \
        }                                                                                         \
        for (int64_t j = 0; j < w; j++)                                                           \
            update_f(c->ps->k, &f[j], &c->idx[j], x[j], c->pos);                                  \
    }

DEFINE_COL_ROW(col_row_f, double)
DEFINE_COL_ROW(col_row_f32, float)

/* A run of reduced positions (operand 0 = in); each position is one row of w kept columns. */
static void col_run(void *vctx, int64_t n, char *const *p, const int64_t *s)
{
    col_ctx *c = vctx;
    const pass *ps = c->ps;
    const int64_t es = (int64_t)ps->red.elsize[0];
    if (ps->k == K_SUM && ps->fl) { /* the run's rows at once where they are f32 or f64 in place */
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
            const int64_t *x = em_view_i64(ps->in_dt, row, c->cstride, c->w, buf);
            for (int64_t j = 0; j < c->w; j++)
                update_i(ps->k, &c->i[j], &c->idx[j], x[j], c->pos);
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
        c.idx[j] = r0;
    }
    if (ps->k == K_SQDEV)
        em_load_f64(EM_F64, ptr[2], ps->kept.strides[2][inner], w, c.mean);
    em_iter_range(&ps->red, &ptr[1], r0, r1, col_run, &c);
    for (int64_t j = 0; j < w; j++)
        out[j] = (acc){c.f[j], c.i[j], c.idx[j]};
}

static void store_cols(const pass *ps, char *out, int64_t w, const acc *a)
{
    const int inner = ps->kept.ndim - 1;
    const int64_t stride = ps->kept.strides[0][inner];
    if (ps->fl && ps->k != K_ARGMAX && ps->k != K_ARGMIN) { /* float results in one store */
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
            for (int64_t j = 0; j < w; j++)
                combine(ps, &a[j], &a[rc * w + j]);
        char *ptr[3];
        em_iter_offsets(kt, kt->data, first, ptr);
        store_cols(ps, ptr[0], w, a);
    }
    em_cpu_scratch_free(part);
    return EM_KERNEL_OK;
}

/* Builds a pass of kind k writing out; mean (f64, out's shape) feeds K_SQDEV. */
static int run_pass(kind k, double div, const em_arr *out, const em_arr *in, const em_arr *mean)
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
    const bool args = k == K_ARGMAX || k == K_ARGMIN;
    em_iter_init(&ps.kept, in->ndim, kshape, 3, (const em_arr *[]){out, in, mean}, 0);
    em_iter_init(&ps.red, in->ndim, rshape, 1, (const em_arr *[]){in}, args ? EM_ITER_KEEP_ORDER : 0);
    if (ps.kept.numel == 0)
        return EM_KERNEL_OK;
    const int64_t ks = ps.kept.strides[1][ps.kept.ndim - 1];
    const int64_t rs = ps.red.strides[0][ps.red.ndim - 1];
    const bool cols = ps.kept.numel > 1 && ps.R > 1 && ps.kept.shape[ps.kept.ndim - 1] >= MIN_COLS &&
                      ks < rs;
    return cols ? run_cols(&ps) : run_rows(&ps);
}

static int reduce_var(double correction, const em_arr *out, const em_arr *in, int64_t R)
{
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
    const double dof = (double)R - correction;
    int rc = run_pass(K_SUM, (double)R, &mean, in, &mean);
    if (rc == EM_KERNEL_OK)
        rc = run_pass(K_SQDEV, dof > 0 ? dof : 0, out, in, &mean);
    em_cpu_scratch_free(mean.data);
    return rc;
}

int em_cpu_reduce(em_reduce_op op, const em_reduce_params *p, const em_arr *out,
                  const em_arr *in)
{
    int64_t R;
    if (!em_reduce_args_ok(op, out, in, &R))
        return EM_KERNEL_UNSUPPORTED;
    switch (op) {
    case EM_REDUCE_SUM: return run_pass(K_SUM, 1, out, in, out);
    case EM_REDUCE_MEAN: return run_pass(K_SUM, (double)R, out, in, out);
    case EM_REDUCE_PROD: return run_pass(K_PROD, 1, out, in, out);
    case EM_REDUCE_MAX: return run_pass(K_MAX, 1, out, in, out);
    case EM_REDUCE_MIN: return run_pass(K_MIN, 1, out, in, out);
    case EM_REDUCE_ARGMAX: return run_pass(K_ARGMAX, 1, out, in, out);
    case EM_REDUCE_ARGMIN: return run_pass(K_ARGMIN, 1, out, in, out);
    default: return reduce_var(p->correction, out, in, R);
    }
}
