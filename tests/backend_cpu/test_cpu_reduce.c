/* Kernel tests for the CPU reductions: every op over many dim sets and memory layouts against a
 * naive double loop, row and column paths with chunking, NaN and tie rules, integer and
 * low-precision dtypes, variance corrections, empty reductions and determinism across threads. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

static const em_reduce_params no_params, unbiased = {.correction = 1};

static void set_val(em_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case EM_F32: ((float *)p)[i] = (float)v; break;
    case EM_F64: ((double *)p)[i] = v; break;
    case EM_F16: ((uint16_t *)p)[i] = em_f32_to_f16((float)v); break;
    case EM_BF16: ((uint16_t *)p)[i] = em_f32_to_bf16((float)v); break;
    case EM_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case EM_U8: case EM_BOOL: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case EM_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = (int64_t)v; break;
    }
}

static double get_val(em_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case EM_F32: return ((const float *)p)[i];
    case EM_F64: return ((const double *)p)[i];
    case EM_F16: return em_f16_to_f32(((const uint16_t *)p)[i]);
    case EM_BF16: return em_bf16_to_f32(((const uint16_t *)p)[i]);
    case EM_I8: return ((const int8_t *)p)[i];
    case EM_U8: case EM_BOOL: return ((const uint8_t *)p)[i];
    case EM_I32: return ((const int32_t *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

/* Input of logical shape holding src (row-major), stored with dims in memory order perm
 * (outermost first) and the innermost memory dim spaced by gap; *buf receives the storage. */
static em_arr make_input(const double *src, em_dtype dt, int ndim, const int64_t *shape,
                         const int *perm, int64_t gap, void **buf)
{
    em_arr a = {.dtype = dt, .ndim = ndim};
    int64_t step = gap, numel = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        a.shape[perm[k]] = shape[perm[k]];
        a.strides[perm[k]] = step;
        step *= shape[perm[k]];
    }
    for (int d = 0; d < ndim; d++) {
        a.shape[d] = shape[d];
        numel *= shape[d];
    }
    *buf = calloc(step > 0 ? (size_t)step : 1, 8);
    a.data = *buf;
    for (int64_t e = 0; e < numel; e++) {
        int64_t rest = e, off = 0;
        for (int d = ndim - 1; d >= 0; d--) {
            off += rest % shape[d] * a.strides[d];
            rest /= shape[d];
        }
        set_val(dt, a.data, off, src[e]);
    }
    return a;
}

/* Contiguous output: in's shape with 1 on the dims in mask. */
static em_arr make_output(em_dtype dt, int ndim, const int64_t *shape, unsigned mask, void **buf)
{
    em_arr a = {.dtype = dt, .ndim = ndim};
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        a.shape[d] = mask >> d & 1 ? 1 : shape[d];
        a.strides[d] = step;
        step *= a.shape[d];
    }
    *buf = calloc((size_t)step, 8);
    a.data = *buf;
    return a;
}

/* Naive reference in double: res (contiguous over the output shape). */
static void ref_reduce(em_reduce_op op, double corr, int ndim, const int64_t *shape,
                       unsigned mask, const double *src, double *res)
{
    int64_t nout = 1, numel = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        nout *= mask >> d & 1 ? 1 : shape[d];
    }
    double *v = malloc(nout * sizeof(double)), *mean = calloc(nout, sizeof(double));
    int64_t *cnt = calloc(nout, sizeof(int64_t)), *arg = calloc(nout, sizeof(int64_t));
    for (int pass = 0; pass < (op == EM_REDUCE_VAR ? 2 : 1); pass++) {
        for (int64_t o = 0; o < nout; o++) {
            v[o] = op == EM_REDUCE_PROD ? 1 : op == EM_REDUCE_MAX || op == EM_REDUCE_ARGMAX ?
                   -INFINITY : op == EM_REDUCE_MIN || op == EM_REDUCE_ARGMIN ? INFINITY : 0;
            cnt[o] = 0;
        }
        for (int64_t e = 0; e < numel; e++) {
            int64_t rest = e, o = 0, ostep = 1;
            for (int d = ndim - 1; d >= 0; d--) {
                int64_t i = rest % shape[d];
                rest /= shape[d];
                if (!(mask >> d & 1)) {
                    o += i * ostep;
                    ostep *= shape[d];
                }
            }
            double x = src[e];
            int64_t r = cnt[o]++;
            switch (op) {
            case EM_REDUCE_SUM: case EM_REDUCE_MEAN: v[o] += x; break;
            case EM_REDUCE_PROD: v[o] *= x; break;
            case EM_REDUCE_MAX: v[o] = isnan(v[o]) || isnan(x) ? NAN : fmax(v[o], x); break;
            case EM_REDUCE_MIN: v[o] = isnan(v[o]) || isnan(x) ? NAN : fmin(v[o], x); break;
            case EM_REDUCE_ARGMAX: case EM_REDUCE_ARGMIN:
                if (!isnan(v[o]) && (isnan(x) || (op == EM_REDUCE_ARGMAX ? x > v[o] : x < v[o]))) {
                    v[o] = x;
                    arg[o] = r;
                }
                break;
            default: v[o] += pass == 0 ? x : (x - mean[o]) * (x - mean[o]); break;
            }
        }
        for (int64_t o = 0; o < nout; o++)
            mean[o] = v[o] / (double)cnt[o];
    }
    for (int64_t o = 0; o < nout; o++) {
        switch (op) {
        case EM_REDUCE_MEAN: res[o] = v[o] / (double)cnt[o]; break;
        case EM_REDUCE_ARGMAX: case EM_REDUCE_ARGMIN: res[o] = (double)arg[o]; break;
        case EM_REDUCE_VAR: res[o] = v[o] / fmax((double)cnt[o] - corr, 0); break;
        default: res[o] = v[o]; break;
        }
    }
    free(v);
    free(mean);
    free(cnt);
    free(arg);
}

static bool close_to(double got, double want, double rtol)
{
    if (isnan(want))
        return isnan(got);
    return fabs(got - want) <= rtol * (1 + fabs(want));
}

/* Runs op over mask on src stored as dt with the given layout and checks every output. */
static void check_reduce(em_reduce_op op, double corr, em_dtype dt, em_dtype out_dt, int ndim,
                         const int64_t *shape, unsigned mask, const int *perm, int64_t gap,
                         const double *src, double rtol)
{
    void *ib, *ob;
    em_arr in = make_input(src, dt, ndim, shape, perm, gap, &ib);
    em_arr out = make_output(out_dt, ndim, shape, mask, &ob);
    int64_t nout = 1;
    for (int d = 0; d < ndim; d++)
        nout *= out.shape[d];
    double *want = malloc(nout * sizeof(double));
    ref_reduce(op, corr, ndim, shape, mask, src, want);
    const em_reduce_params p = {.correction = corr};
    cr_assert_eq(em_cpu_reduce(op, &p, &out, &in), EM_KERNEL_OK, "op %d mask %u", op, mask);
    for (int64_t o = 0; o < nout; o++) {
        double got = get_val(out_dt, ob, o);
        cr_assert(close_to(got, want[o], rtol), "op %d dt %d mask %u perm %d%d gap %ld out %ld: "
                  "%.10g vs %.10g", op, dt, mask, perm[0], perm[1], (long)gap, (long)o, got,
                  want[o]);
    }
    free(want);
    free(ib);
    free(ob);
}

static em_dtype out_dtype(em_reduce_op op, em_dtype in)
{
    return op == EM_REDUCE_ARGMAX || op == EM_REDUCE_ARGMIN ? EM_I64 : in;
}

Test(cpu_reduce, every_op_dim_set_and_layout_f64)
{
    const int64_t shape[3] = {4, 5, 6};
    const int perms[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
    double src[120];
    for (int i = 0; i < 120; i++)
        src[i] = 3 * sin(i * 1.7) + (i % 7 == 0 ? 0.5 : 0);
    for (int op = 0; op < EM_REDUCE_COUNT; op++)
        for (unsigned mask = 0; mask < 8; mask++)
            for (int p = 0; p < 3; p++)
                for (int64_t gap = 1; gap <= 2; gap++)
                    for (int corr = 0; corr < (op == EM_REDUCE_VAR ? 2 : 1); corr++)
                        check_reduce(op, corr, EM_F64, out_dtype(op, EM_F64), 3, shape, mask,
                                     perms[p], gap, src, 1e-12);
}

Test(cpu_reduce, four_dims_f32_and_strided_output)
{
    const int64_t shape[4] = {3, 4, 2, 5};
    const int perm[4] = {3, 1, 0, 2};
    double src[120];
    for (int i = 0; i < 120; i++)
        src[i] = (float)((i % 3 ? 1 : -1) * (0.8 + (i * 29 % 31) * 0.015));
    for (int op = 0; op < EM_REDUCE_COUNT; op++)
        for (unsigned mask = 0; mask < 16; mask++)
            check_reduce(op, 1, EM_F32, out_dtype(op, EM_F32), 4, shape, mask, perm, 1, src,
                         1e-6);

    double x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
    em_arr in = {.data = x, .dtype = EM_F64, .ndim = 2, .shape = {2, 3}, .strides = {3, 1}};
    em_arr out = {.data = y, .dtype = EM_F64, .ndim = 2, .shape = {1, 3}, .strides = {0, 2}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &out, &in), EM_KERNEL_OK);
    cr_assert(y[0] == 5 && y[2] == 7 && y[4] == 9 && y[1] == 0 && y[3] == 0);
}

/* Shapes that take the column path with several row chunks, the row path with several chunks
 * per output, and narrow columns reduced as strided rows. */
Test(cpu_reduce, large_row_and_column_paths)
{
    const int64_t shapes[][2] = {{3000, 64}, {5, 70001}, {70001, 9}, {70001, 3}, {300, 1100}};
    const int id[2] = {0, 1};
    for (int s = 0; s < 5; s++) {
        const int64_t n = shapes[s][0] * shapes[s][1];
        double *src = malloc(n * sizeof(double));
        for (int64_t i = 0; i < n; i++)
            src[i] = (float)((i * 7919 % 1013) * 0.01 - 4);
        src[n / 2] = NAN;
        const em_reduce_op ops[] = {EM_REDUCE_SUM, EM_REDUCE_MAX, EM_REDUCE_ARGMAX,
                                    EM_REDUCE_ARGMIN, EM_REDUCE_VAR};
        for (unsigned mask = 1; mask < 4; mask++)
            for (int k = 0; k < 5; k++)
                check_reduce(ops[k], 1, EM_F32, out_dtype(ops[k], EM_F32), 2, shapes[s], mask,
                             id, 1, src, 2e-6);
        src[n / 2] = 1.0;
        check_reduce(EM_REDUCE_VAR, 0, EM_F32, EM_F32, 2, shapes[s], 1, id, 1, src, 2e-6);
        check_reduce(EM_REDUCE_MIN, 0, EM_F64, EM_F64, 2, shapes[s], 1, id, 1, src, 0);
        free(src);
    }
}

Test(cpu_reduce, argmax_ties_and_nan)
{
    double x[4], m;
    int64_t idx;
    em_arr in = {.data = x, .dtype = EM_F64, .ndim = 1, .shape = {4}, .strides = {1}};
    em_arr oi = {.data = &idx, .dtype = EM_I64, .ndim = 1, .shape = {1}, .strides = {1}};
    em_arr om = {.data = &m, .dtype = EM_F64, .ndim = 1, .shape = {1}, .strides = {1}};
    memcpy(x, (double[]){1, 3, 3, 2}, sizeof x);
    em_cpu_reduce(EM_REDUCE_ARGMAX, &no_params, &oi, &in);
    cr_assert_eq(idx, 1);
    memcpy(x, (double[]){2, 1, 1, 5}, sizeof x);
    em_cpu_reduce(EM_REDUCE_ARGMIN, &no_params, &oi, &in);
    cr_assert_eq(idx, 1);
    memcpy(x, (double[]){-INFINITY, -INFINITY, -INFINITY, -INFINITY}, sizeof x);
    em_cpu_reduce(EM_REDUCE_ARGMAX, &no_params, &oi, &in);
    cr_assert_eq(idx, 0);
    memcpy(x, (double[]){1, NAN, 5, NAN}, sizeof x);
    em_cpu_reduce(EM_REDUCE_ARGMAX, &no_params, &oi, &in);
    cr_assert_eq(idx, 1);
    em_cpu_reduce(EM_REDUCE_ARGMIN, &no_params, &oi, &in);
    cr_assert_eq(idx, 1);
    em_cpu_reduce(EM_REDUCE_MAX, &no_params, &om, &in);
    cr_assert(isnan(m));
    em_cpu_reduce(EM_REDUCE_MIN, &no_params, &om, &in);
    cr_assert(isnan(m));
    memcpy(x, (double[]){4, 1, 9, 2}, sizeof x); /* argmax over two dims: flat index */
    em_arr in2 = {.data = x, .dtype = EM_F64, .ndim = 2, .shape = {2, 2}, .strides = {2, 1}};
    em_arr oi2 = {.data = &idx, .dtype = EM_I64, .ndim = 2, .shape = {1, 1}, .strides = {1, 1}};
    em_cpu_reduce(EM_REDUCE_ARGMAX, &no_params, &oi2, &in2);
    cr_assert_eq(idx, 2);
}

Test(cpu_reduce, integers)
{
    int8_t x8[50];
    for (int i = 0; i < 50; i++)
        x8[i] = 100;
    int64_t s64;
    em_arr in8 = {.data = x8, .dtype = EM_I8, .ndim = 1, .shape = {50}, .strides = {1}};
    em_arr o64 = {.data = &s64, .dtype = EM_I64, .ndim = 1, .shape = {1}, .strides = {1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &o64, &in8), EM_KERNEL_OK);
    cr_assert_eq(s64, 5000);

    int32_t x32[6] = {2000000000, 2000000000, -7, 2000000000, 2000000000, 5}, s32[2];
    em_arr in32 = {.data = x32, .dtype = EM_I32, .ndim = 2, .shape = {2, 3}, .strides = {3, 1}};
    em_arr sum2 = {.data = &s64, .dtype = EM_I64, .ndim = 2, .shape = {1, 1}, .strides = {1, 1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &sum2, &in32), EM_KERNEL_OK);
    cr_assert_eq(s64, 7999999998LL);
    em_arr rows32 = {.data = s32, .dtype = EM_I32, .ndim = 2, .shape = {2, 1}, .strides = {1, 1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MAX, &no_params, &rows32, &in32), EM_KERNEL_OK);
    cr_assert(s32[0] == 2000000000 && s32[1] == 2000000000);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MIN, &no_params, &rows32, &in32), EM_KERNEL_OK);
    cr_assert(s32[0] == -7 && s32[1] == 5);
    /* wraps */
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &rows32, &in32), EM_KERNEL_OK);
    cr_assert(s32[0] == (int32_t)(uint32_t)3999999993LL);
    int64_t am[2];
    em_arr arg = {.data = am, .dtype = EM_I64, .ndim = 2, .shape = {2, 1}, .strides = {1, 1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_ARGMIN, &no_params, &arg, &in32), EM_KERNEL_OK);
    cr_assert(am[0] == 2 && am[1] == 2);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_ARGMAX, &no_params, &arg, &in32), EM_KERNEL_OK);
    cr_assert(am[0] == 0 && am[1] == 0);

    uint8_t b[5] = {1, 0, 1, 1, 0};
    em_arr inb = {.data = b, .dtype = EM_BOOL, .ndim = 1, .shape = {5}, .strides = {1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &o64, &inb), EM_KERNEL_OK);
    cr_assert_eq(s64, 3);

    const int64_t shape[2] = {700, 60}; /* column and row paths on u8 */
    const int id[2] = {0, 1};
    double *src = malloc(42000 * sizeof(double));
    for (int i = 0; i < 42000; i++)
        src[i] = i * 13 % 256;
    for (unsigned mask = 1; mask < 4; mask++) {
        check_reduce(EM_REDUCE_SUM, 0, EM_U8, EM_I64, 2, shape, mask, id, 1, src, 0);
        check_reduce(EM_REDUCE_MAX, 0, EM_U8, EM_U8, 2, shape, mask, id, 1, src, 0);
        check_reduce(EM_REDUCE_ARGMIN, 0, EM_U8, EM_I64, 2, shape, mask, id, 1, src, 0);
    }
    free(src);
}

Test(cpu_reduce, f16_bf16_accumulate_in_f32)
{
    uint16_t h[1000];
    for (int i = 0; i < 1000; i++)
        h[i] = em_f32_to_f16(0.1f);
    const double exact = 1000.0 * em_f16_to_f32(em_f32_to_f16(0.1f));
    float s32;
    uint16_t s16;
    em_arr in = {.data = h, .dtype = EM_F16, .ndim = 1, .shape = {1000}, .strides = {1}};
    em_arr of = {.data = &s32, .dtype = EM_F32, .ndim = 1, .shape = {1}, .strides = {1}};
    em_arr oh = {.data = &s16, .dtype = EM_F16, .ndim = 1, .shape = {1}, .strides = {1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &of, &in), EM_KERNEL_OK);
    cr_assert_eq(s32, (float)exact);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &oh, &in), EM_KERNEL_OK);
    cr_assert_eq(s16, em_f32_to_f16((float)exact));
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MEAN, &no_params, &oh, &in), EM_KERNEL_OK);
    cr_assert_eq(s16, h[0]);

    const int64_t shape[2] = {40, 33};
    const int perm[2] = {1, 0};
    double src[1320];
    for (int i = 0; i < 1320; i++)
        src[i] = em_bf16_to_f32(em_f32_to_bf16((float)(i % 37) * 0.25f - 3));
    for (unsigned mask = 1; mask < 4; mask++) {
        check_reduce(EM_REDUCE_MEAN, 0, EM_BF16, EM_F32, 2, shape, mask, perm, 1, src, 1e-6);
        check_reduce(EM_REDUCE_MAX, 0, EM_BF16, EM_BF16, 2, shape, mask, perm, 1, src, 0);
        check_reduce(EM_REDUCE_VAR, 1, EM_F16, EM_F32, 2, shape, mask, perm, 1, src, 1e-6);
    }
}

Test(cpu_reduce, var_corrections)
{
    double x[4] = {1, 2, 3, 4}, v;
    em_arr in = {.data = x, .dtype = EM_F64, .ndim = 1, .shape = {4}, .strides = {1}};
    em_arr out = {.data = &v, .dtype = EM_F64, .ndim = 1, .shape = {1}, .strides = {1}};
    em_cpu_reduce(EM_REDUCE_VAR, &no_params, &out, &in);
    cr_assert_float_eq(v, 1.25, 1e-15);
    em_cpu_reduce(EM_REDUCE_VAR, &unbiased, &out, &in);
    cr_assert_float_eq(v, 5.0 / 3.0, 1e-15);
    in.shape[0] = 1;
    em_cpu_reduce(EM_REDUCE_VAR, &unbiased, &out, &in);
    cr_assert(isnan(v));
    em_cpu_reduce(EM_REDUCE_VAR, &no_params, &out, &in);
    cr_assert_eq(v, 0.0);

    float big[1000]; /* a large offset: two passes keep the small variance */
    for (int i = 0; i < 1000; i++)
        big[i] = 1e4f + (i % 2 ? 0.5f : -0.5f);
    float vf;
    em_arr inf = {.data = big, .dtype = EM_F32, .ndim = 1, .shape = {1000}, .strides = {1}};
    em_arr outf = {.data = &vf, .dtype = EM_F32, .ndim = 1, .shape = {1}, .strides = {1}};
    em_cpu_reduce(EM_REDUCE_VAR, &no_params, &outf, &inf);
    cr_assert_float_eq(vf, 0.25f, 1e-7);
}

Test(cpu_reduce, empty_and_unsupported)
{
    double x[6] = {0}, y[3];
    em_arr empty = {.data = x, .dtype = EM_F64, .ndim = 2, .shape = {0, 3}, .strides = {3, 1}};
    em_arr out = {.data = y, .dtype = EM_F64, .ndim = 2, .shape = {1, 3}, .strides = {3, 1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &out, &empty), EM_KERNEL_OK);
    cr_assert(y[0] == 0 && y[2] == 0);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_PROD, &no_params, &out, &empty), EM_KERNEL_OK);
    cr_assert(y[0] == 1 && y[2] == 1);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MEAN, &no_params, &out, &empty), EM_KERNEL_OK);
    cr_assert(isnan(y[1]));
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MAX, &no_params, &out, &empty), EM_KERNEL_UNSUPPORTED);

    int32_t xi[3] = {1, 2, 3}, yi;
    int64_t yl;
    float yf;
    em_arr in_i = {.data = xi, .dtype = EM_I32, .ndim = 1, .shape = {3}, .strides = {1}};
    em_arr o_i = {.data = &yi, .dtype = EM_I32, .ndim = 1, .shape = {1}, .strides = {1}};
    em_arr o_l = {.data = &yl, .dtype = EM_I64, .ndim = 1, .shape = {1}, .strides = {1}};
    em_arr o_f = {.data = &yf, .dtype = EM_F32, .ndim = 1, .shape = {1}, .strides = {1}};
    em_arr in_d = {.data = x, .dtype = EM_F64, .ndim = 1, .shape = {3}, .strides = {1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MEAN, &no_params, &o_i, &in_i), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_VAR, &unbiased, &o_l, &in_i), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &o_f, &in_i), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_MAX, &no_params, &o_l, &in_i), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_ARGMAX, &no_params, &o_f, &in_d), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &o_l, &in_d), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce((em_reduce_op)EM_REDUCE_COUNT, &no_params, &o_f, &in_d),
                 EM_KERNEL_UNSUPPORTED);
    em_arr bad = {.data = y, .dtype = EM_F64, .ndim = 1, .shape = {2}, .strides = {1}};
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &bad, &in_d), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &out, &in_d), EM_KERNEL_UNSUPPORTED);
}

/* Sums of 1M floats: the same bits on every call and for 1 or 2 threads, close to exact. */
Test(cpu_reduce, deterministic_and_accurate)
{
    const int64_t n = 1 << 20;
    float *x = malloc(n * sizeof(float));
    double exact = 0;
    uint32_t state = 12345;
    for (int64_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        x[i] = (float)(state >> 8) / (float)(1 << 24) - 0.3f;
        exact += x[i];
    }
    float s[3];
    em_arr in = {.data = x, .dtype = EM_F32, .ndim = 1, .shape = {n}, .strides = {1}};
    const int threads[3] = {2, 2, 1};
    for (int k = 0; k < 3; k++) {
        em_arr out = {.data = &s[k], .dtype = EM_F32, .ndim = 1, .shape = {1}, .strides = {1}};
        omp_set_num_threads(threads[k]);
        cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &out, &in), EM_KERNEL_OK);
    }
    cr_assert(memcmp(&s[0], &s[1], sizeof(float)) == 0 && memcmp(&s[0], &s[2], sizeof(float)) == 0);
    cr_assert(fabs(s[0] - exact) <= fabs(exact) * 6e-8);

    float cols[2][256]; /* column path: (4096, 256) over dim 0 */
    em_arr in2 = {.data = x, .dtype = EM_F32, .ndim = 2, .shape = {4096, 256}, .strides = {256, 1}};
    for (int k = 0; k < 2; k++) {
        em_arr out = {.data = cols[k], .dtype = EM_F32, .ndim = 2, .shape = {1, 256},
                      .strides = {256, 1}};
        omp_set_num_threads(2 - k);
        cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &out, &in2), EM_KERNEL_OK);
    }
    cr_assert(memcmp(cols[0], cols[1], sizeof cols[0]) == 0);
    omp_set_num_threads(2);
    free(x);
}

/* A column sum of f32 within one chunk of rows (a bias gradient's) is each column summed in
 * double in row order, then rounded: the bits of that loop, for a block of 512 columns and a
 * 5-column tail (64 x 517) and for rows further apart than they are wide (columns 3..39 of a
 * 60 x 50 array: two blocks of 16 lanes and a tail of 5). */
Test(cpu_reduce, f32_column_sums_are_row_order_double_sums)
{
    const int64_t shapes[2][4] = {{64, 517, 517, 0}, {60, 37, 50, 3}}; /* rows, cols, ld, first */
    for (int s = 0; s < 2; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1], ld = shapes[s][2];
        float *x = malloc((size_t)(rows * ld) * sizeof(float)), got[517];
        for (int64_t i = 0; i < rows * ld; i++)
            x[i] = (float)((i * 7919 % 1013) * 0.37 - 180) / 7.0f;
        const float *first = x + shapes[s][3];
        em_arr in = {.data = (void *)first, .dtype = EM_F32, .ndim = 2, .shape = {rows, cols},
                     .strides = {ld, 1}};
        em_arr out = {.data = got, .dtype = EM_F32, .ndim = 2, .shape = {1, cols},
                      .strides = {cols, 1}};
        cr_assert_eq(em_cpu_reduce(EM_REDUCE_SUM, &no_params, &out, &in), EM_KERNEL_OK);
        for (int64_t j = 0; j < cols; j++) {
            double sum = 0;
            for (int64_t r = 0; r < rows; r++)
                sum += first[r * ld + j];
            cr_assert(got[j] == (float)sum, "shape %d column %lld: %.9g, want %.9g", s,
                      (long long)j, got[j], (float)sum);
        }
        free(x);
    }
}
