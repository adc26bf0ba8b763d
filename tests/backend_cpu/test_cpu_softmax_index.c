/* The CPU softmax kernels against naive rows and finite differences, and the indexing kernels
 * (index_select, index_add, gather, scatter_add) on strided views against naive loops. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"

static uint64_t rng_state = 4242;

static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* ---- softmax ---- */

static void softmax_naive(bool log, int64_t rows, int64_t cols, const double *x, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cols; j++)
            mx = fmax(mx, x[r * cols + j]);
        for (int64_t j = 0; j < cols; j++)
            sum += exp(x[r * cols + j] - mx);
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] = log ? x[r * cols + j] - mx - log1p(sum - 1)
                                  : exp(x[r * cols + j] - mx) / sum;
    }
}

static void check_softmax(int64_t rows, int64_t cols, double scale)
{
    const int64_t n = rows * cols;
    double *x = malloc((size_t)n * 8), *y = malloc((size_t)n * 8), *ky = malloc((size_t)n * 8);
    float *fx = malloc((size_t)n * 4), *fy = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        fx[i] = (float)(rnd() * scale);
        x[i] = fx[i];
    }
    for (int log = 0; log < 2; log++) {
        softmax_naive(log, rows, cols, x, y);
        cr_assert_eq(em_cpu_softmax(EM_F64, log, rows, cols, x, ky), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_softmax(EM_F32, log, rows, cols, fx, fy), EM_KERNEL_OK);
        for (int64_t i = 0; i < n; i++) {
            cr_assert(isfinite(fy[i]) && isfinite(ky[i]));
            cr_assert(fabs(ky[i] - y[i]) <= 1e-12 * (1 + fabs(y[i])), "f64 [%ld] %g vs %g",
                      (long)i, ky[i], y[i]);
            cr_assert(fabs(fy[i] - y[i]) <= 1e-5 * (1 + fabs(y[i])), "f32 [%ld] %g vs %g",
                      (long)i, fy[i], y[i]);
        }
    }
    free(x);
    free(y);
    free(ky);
    free(fx);
    free(fy);
}

Test(cpu_softmax, matches_naive)
{
    check_softmax(7, 13, 3.0);
    check_softmax(1, 1, 1.0);
    check_softmax(300, 200, 5.0); /* rows over threads */
}

Test(cpu_softmax, large_magnitudes_stay_finite)
{
    check_softmax(5, 10, 1e4);
    float x[4] = {1e30f, -1e30f, 1e30f, 0}, y[4];
    cr_assert_eq(em_cpu_softmax(EM_F32, false, 1, 4, x, y), EM_KERNEL_OK);
    cr_assert_float_eq(y[0], 0.5f, 1e-7);
    cr_assert_float_eq(y[1], 0.0f, 1e-7);
    cr_assert_float_eq(y[2], 0.5f, 1e-7);
    cr_assert_eq(em_cpu_softmax(EM_F32, true, 1, 4, x, y), EM_KERNEL_OK);
    cr_assert_float_eq(y[0], -logf(2), 1e-6);
    cr_assert(isinf(y[1]) || y[1] < -1e29f);
}

/* d(sum(softmax(x) * r))/dx by central differences against softmax_grad(gy = r, y). */
Test(cpu_softmax, gradients_match_finite_differences)
{
    enum { ROWS = 3, COLS = 6, N = ROWS * COLS };
    double x[N], r[N], y[N], gx[N], yp[N];
    for (int i = 0; i < N; i++) {
        x[i] = rnd() * 2;
        r[i] = rnd();
    }
    for (int log = 0; log < 2; log++) {
        cr_assert_eq(em_cpu_softmax(EM_F64, log, ROWS, COLS, x, y), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_softmax_grad(EM_F64, log, ROWS, COLS, r, y, gx), EM_KERNEL_OK);
        for (int i = 0; i < N; i++) {
            double keep = x[i], loss[2];
            for (int side = 0; side < 2; side++) {
                x[i] = keep + (side ? -1e-6 : 1e-6);
                em_cpu_softmax(EM_F64, log, ROWS, COLS, x, yp);
                loss[side] = 0;
                for (int k = 0; k < N; k++)
                    loss[side] += yp[k] * r[k];
            }
            x[i] = keep;
            double fd = (loss[0] - loss[1]) / 2e-6;
            cr_assert(fabs(fd - gx[i]) < 1e-7, "log=%d [%d]: fd %.9g kernel %.9g", log, i, fd,
                      gx[i]);
        }
    }
}

Test(cpu_softmax, f32_gradient_and_half_types)
{
    float x[8], y[8], gy[8], gx[8];
    for (int i = 0; i < 8; i++) {
        x[i] = (float)rnd();
        gy[i] = (float)rnd();
    }
    em_cpu_softmax(EM_F32, false, 2, 4, x, y);
    cr_assert_eq(em_cpu_softmax_grad(EM_F32, false, 2, 4, gy, y, gx), EM_KERNEL_OK);
    for (int r = 0; r < 2; r++) {
        double dot = 0;
        for (int j = 0; j < 4; j++)
            dot += gy[r * 4 + j] * y[r * 4 + j];
        for (int j = 0; j < 4; j++)
            cr_assert_float_eq(gx[r * 4 + j], y[r * 4 + j] * (gy[r * 4 + j] - dot), 1e-6);
    }
    uint16_t hx[8], hy[8];
    for (int i = 0; i < 8; i++)
        hx[i] = em_f32_to_bf16(x[i]);
    cr_assert_eq(em_cpu_softmax(EM_BF16, true, 2, 4, hx, hy), EM_KERNEL_OK);
    for (int i = 0; i < 8; i++)
        cr_assert_float_eq(em_bf16_to_f32(hy[i]), logf(y[i]), 3e-2);
    cr_assert_eq(em_cpu_softmax(EM_I32, false, 2, 4, x, y), EM_KERNEL_UNSUPPORTED);
}

/* f32 log_softmax and cross-entropy (vector rows on AVX2, widths inside and past whole 8-lane
 * blocks), forward and gradient, against the formulas in f64 from the same f32 inputs; a row
 * with a NaN gives NaN, and -inf logits (masked classes) get -inf and no gradient. */
Test(cpu_softmax, f32_log_softmax_and_cross_entropy_against_f64)
{
    enum { ROWS = 3, MAX = 97 };
    const int64_t widths[] = {1, 7, 8, 13, 97};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int64_t cols = widths[w], n = ROWS * cols;
        float x[ROWS * MAX], y[ROWS * MAX], gy[ROWS * MAX], gx[ROWS * MAX], g[ROWS], loss[ROWS];
        float xgx[ROWS * MAX];
        int64_t t[ROWS];
        double stats[2 * ROWS];
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)(rnd() * 6);
            gy[i] = (float)rnd();
        }
        for (int r = 0; r < ROWS; r++) {
            g[r] = (float)rnd();
            t[r] = (r * 5) % cols;
        }
        cr_assert_eq(em_cpu_softmax(EM_F32, true, ROWS, cols, x, y), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_softmax_grad(EM_F32, true, ROWS, cols, gy, y, gx), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_cross_entropy(EM_F32, ROWS, cols, x, t, loss, stats), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_cross_entropy_grad(EM_F32, ROWS, cols, x, t, stats, g, xgx),
                     EM_KERNEL_OK);
        for (int r = 0; r < ROWS; r++) {
            const float *xr = x + r * cols;
            double mx = -INFINITY, sum = 0, gsum = 0;
            for (int64_t j = 0; j < cols; j++)
                mx = fmax(mx, xr[j]);
            for (int64_t j = 0; j < cols; j++) {
                sum += exp(xr[j] - mx);
                gsum += gy[r * cols + j];
            }
            for (int64_t j = 0; j < cols; j++) {
                const int64_t i = r * cols + j;
                double want = xr[j] - mx - log(sum), p = exp(want);
                double dwant = gy[i] - p * gsum, xwant = -g[r] * ((j == t[r]) - p);
                cr_assert(fabs(y[i] - want) <= 1e-6 * (1 + fabs(want)), "cols %ld [%ld]: %.9g "
                          "vs %.9g", (long)cols, (long)i, y[i], want);
                cr_assert(fabs(gx[i] - dwant) <= 1e-6 * (1 + fabs(gsum)), "grad cols %ld [%ld]",
                          (long)cols, (long)i);
                cr_assert(fabs(xgx[i] - xwant) <= 1e-6, "xent grad cols %ld [%ld]: %.9g vs %.9g",
                          (long)cols, (long)i, xgx[i], xwant);
            }
            double lwant = -(xr[t[r]] - mx - log(sum));
            cr_assert(fabs(loss[r] - lwant) <= 1e-6 * (1 + lwant), "loss cols %ld row %d",
                      (long)cols, r);
        }
    }
    float x[10] = {1, 2, NAN, 4, 5, 6, 7, 8, 9, 10}, y[10], gy[10] = {0}, gx[10], loss;
    int64_t t = 0;
    double stats[2];
    em_cpu_softmax(EM_F32, true, 1, 10, x, y);
    em_cpu_cross_entropy(EM_F32, 1, 10, x, &t, &loss, stats);
    for (int j = 0; j < 10; j++)
        cr_assert(isnan(y[j]), "a NaN in the row: [%d] %g", j, y[j]);
    cr_assert(isnan(loss));
    x[2] = -INFINITY;
    x[9] = -INFINITY;
    gy[0] = 1;
    em_cpu_softmax(EM_F32, true, 1, 10, x, y);
    em_cpu_softmax_grad(EM_F32, true, 1, 10, gy, y, gx);
    cr_assert(isinf(y[2]) && y[2] < 0 && isinf(y[9]) && y[9] < 0);
    cr_assert(gx[2] == 0 && gx[9] == 0, "masked classes: gradient %g, %g", gx[2], gx[9]);
    double sum = 0;
    for (int j = 0; j < 10; j++)
        sum += j == 2 || j == 9 ? 0 : exp(x[j] - 8.0);
    cr_assert(fabs(y[8] - (1.0 - log(sum))) < 1e-6, "y[8] %.9g", y[8]);
}

/* ---- indexing ---- */

/* A view of `data` with shape and strides given (dtype dt). */
static em_arr view(void *data, em_dtype dt, int ndim, const int64_t *shape, const int64_t *strides)
{
    em_arr a = {.data = data, .dtype = dt, .ndim = ndim};
    for (int d = 0; d < ndim; d++) {
        a.shape[d] = shape[d];
        a.strides[d] = strides[d];
    }
    return a;
}

/* Next coordinate of shape in row-major order; false after the last. */
static bool next_coord(int ndim, const int64_t *shape, int64_t *c)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++c[d] < shape[d])
            return true;
        c[d] = 0;
    }
    return false;
}

static int64_t offset(const em_arr *a, const int64_t *c)
{
    int64_t off = 0;
    for (int d = 0; d < a->ndim; d++)
        off += c[d] * a->strides[d];
    return off;
}

static double get(const em_arr *a, const int64_t *c)
{
    int64_t o = offset(a, c);
    switch (a->dtype) {
    case EM_F32: return ((float *)a->data)[o];
    case EM_F64: return ((double *)a->data)[o];
    case EM_F16: return em_f16_to_f32(((uint16_t *)a->data)[o]);
    case EM_U8: return ((uint8_t *)a->data)[o];
    default: return (double)((int64_t *)a->data)[o];
    }
}

static void set(const em_arr *a, const int64_t *c, double v)
{
    int64_t o = offset(a, c);
    switch (a->dtype) {
    case EM_F32: ((float *)a->data)[o] = (float)v; break;
    case EM_F64: ((double *)a->data)[o] = v; break;
    case EM_F16: ((uint16_t *)a->data)[o] = em_f32_to_f16((float)v); break;
    case EM_U8: ((uint8_t *)a->data)[o] = (uint8_t)v; break;
    default: ((int64_t *)a->data)[o] = (int64_t)v; break;
    }
}

/* (4, 5, 6) stored as a permuted (6, 4, 5) block: strides (5, 1, 20), filled with small
 * integers (exact in every dtype). */
static em_arr permuted_input(em_dtype dt)
{
    const int64_t shape[3] = {4, 5, 6}, strides[3] = {5, 1, 20};
    em_arr a = view(calloc(120, 8), dt, 3, shape, strides);
    int64_t c[3] = {0};
    do
        set(&a, c, (double)((c[0] * 31 + c[1] * 7 + c[2] * 3) % 50));
    while (next_coord(3, a.shape, c));
    return a;
}

/* A packed 1-D i64 index array over ix (n entries); a pointer to a static copy of the view. */
static const em_arr *index_list(const int64_t *ix, int64_t n)
{
    static em_arr a;
    a = (em_arr){.data = (void *)ix, .dtype = EM_I64, .ndim = 1, .shape = {n}, .strides = {1}};
    return &a;
}

Test(cpu_index, index_select_strided_all_widths)
{
    const em_dtype dts[5] = {EM_F32, EM_F64, EM_F16, EM_U8, EM_I64};
    const int64_t idx[7] = {4, 0, 0, 2, 1, 4, 3};
    for (int t = 0; t < 5; t++)
        for (int dim = 0; dim < 3; dim++) {
            em_arr in = permuted_input(dts[t]);
            int64_t shape[3] = {4, 5, 6}, strides[3];
            int64_t n = dim == 0 ? 3 : 7; /* dim 0 has 4 entries: use indices < 4 */
            const int64_t *ix = dim == 0 ? (const int64_t[3]){3, 0, 3} : idx;
            shape[dim] = n;
            strides[2] = 1;
            strides[1] = shape[2];
            strides[0] = shape[1] * shape[2];
            em_arr out = view(calloc(200, 8), dts[t], 3, shape, strides);
            cr_assert_eq(em_cpu_index_select(&out, &in, dim, index_list(ix, n)), EM_KERNEL_OK);
            int64_t c[3] = {0}, ci[3];
            do {
                memcpy(ci, c, sizeof c);
                ci[dim] = ix[c[dim]];
                cr_assert_eq(get(&out, c), get(&in, ci), "dtype %s dim %d",
                             em_dtype_name(dts[t]), dim);
            } while (next_coord(3, out.shape, c));
            free(in.data);
            free(out.data);
        }
}

/* out[.., idx[i], ..] += src[.., i, ..] in index order, exactly as a sequential loop would. */
Test(cpu_index, index_add_in_index_order)
{
    enum { ROWS = 9, N = 200, POST = 300 }; /* big enough for threads */
    int64_t idx[N];
    float *src = malloc(N * POST * 4), *out = malloc(ROWS * POST * 4);
    float *want = malloc(ROWS * POST * 4);
    for (int i = 0; i < N; i++)
        idx[i] = (int64_t)((rnd() + 1) * 4.5) % ROWS;
    for (int i = 0; i < N * POST; i++)
        src[i] = (float)rnd();
    for (int i = 0; i < ROWS * POST; i++)
        out[i] = want[i] = (float)rnd();
    for (int i = 0; i < N; i++)
        for (int q = 0; q < POST; q++)
            want[idx[i] * POST + q] += src[i * POST + q];
    em_arr o = view(out, EM_F32, 2, (int64_t[]){ROWS, POST}, (int64_t[]){POST, 1});
    em_arr s = view(src, EM_F32, 2, (int64_t[]){N, POST}, (int64_t[]){POST, 1});
    cr_assert_eq(em_cpu_index_add(&o, 0, index_list(idx, N), &s), EM_KERNEL_OK);
    for (int i = 0; i < ROWS * POST; i++)
        cr_assert_eq(out[i], want[i], "[%d]", i);
    free(src);
    free(out);
    free(want);
}

Test(cpu_index, index_add_strided_middle_dim)
{
    for (int t = 0; t < 2; t++) {
        em_dtype dt = t ? EM_F64 : EM_F16;
        em_arr out = permuted_input(dt);
        em_arr keep = permuted_input(dt);
        const int64_t idx[3] = {4, 1, 4};
        em_arr src = view(calloc(72, 8), dt, 3, (int64_t[]){4, 3, 6}, (int64_t[]){1, 4, 12});
        int64_t c[3] = {0};
        do
            set(&src, c, (double)(c[0] + c[1] * 2 + c[2]));
        while (next_coord(3, src.shape, c));
        cr_assert_eq(em_cpu_index_add(&out, 1, index_list(idx, 3), &src), EM_KERNEL_OK);
        memset(c, 0, sizeof c);
        do {
            double want = get(&keep, c);
            for (int i = 0; i < 3; i++)
                if (idx[i] == c[1])
                    want += get(&src, (int64_t[]){c[0], i, c[2]});
            cr_assert_eq(get(&out, c), want);
        } while (next_coord(3, out.shape, c));
        free(out.data);
        free(keep.data);
        free(src.data);
    }
}

Test(cpu_index, gather_strided)
{
    for (int dim = 0; dim < 3; dim++) {
        em_arr in = permuted_input(EM_F32);
        int64_t shape[3] = {3, 4, 5}; /* at most in's shape on every dim */
        shape[dim] = 7;
        em_arr idx = view(malloc(7 * 20 * 8), EM_I64, 3, shape,
                          (int64_t[]){1, shape[0], shape[0] * shape[1]}); /* column-major */
        em_arr out = view(calloc(140, 4), EM_F32, 3, shape,
                          (int64_t[]){shape[1] * shape[2], shape[2], 1});
        int64_t c[3] = {0};
        do
            set(&idx, c, (double)((int64_t)((rnd() + 1) * 10) % in.shape[dim]));
        while (next_coord(3, shape, c));
        cr_assert_eq(em_cpu_gather(&out, &in, dim, &idx), EM_KERNEL_OK);
        memset(c, 0, sizeof c);
        do {
            int64_t ci[3] = {c[0], c[1], c[2]};
            ci[dim] = (int64_t)get(&idx, c);
            cr_assert_eq(get(&out, c), get(&in, ci), "dim %d", dim);
        } while (next_coord(3, shape, c));
        free(in.data);
        free(idx.data);
        free(out.data);
    }
}

Test(cpu_index, scatter_add_in_order)
{
    for (int dim = 0; dim < 3; dim++) {
        em_arr out = permuted_input(EM_F32), keep = permuted_input(EM_F32);
        int64_t shape[3] = {3, 4, 5};
        shape[dim] = 8;
        em_arr idx = view(malloc(8 * 20 * 8), EM_I64, 3, shape,
                          (int64_t[]){shape[1] * shape[2], shape[2], 1});
        em_arr src = view(malloc(8 * 20 * 4), EM_F32, 3, shape,
                          (int64_t[]){1, shape[0], shape[0] * shape[1]});
        int64_t c[3] = {0};
        do {
            set(&idx, c, (double)((int64_t)((rnd() + 1) * 10) % out.shape[dim]));
            set(&src, c, rnd());
        } while (next_coord(3, shape, c));
        cr_assert_eq(em_cpu_scatter_add(&out, dim, &idx, &src), EM_KERNEL_OK);
        /* the same adds, one at a time in src's row-major order */
        memset(c, 0, sizeof c);
        do {
            int64_t co[3] = {c[0], c[1], c[2]};
            co[dim] = (int64_t)get(&idx, c);
            set(&keep, co, (float)get(&keep, co) + (float)get(&src, c));
        } while (next_coord(3, shape, c));
        memset(c, 0, sizeof c);
        do
            cr_assert_eq(get(&out, c), get(&keep, c), "dim %d", dim);
        while (next_coord(3, out.shape, c));
        free(out.data);
        free(keep.data);
        free(idx.data);
        free(src.data);
    }
}

Test(cpu_index, rejects_bad_indices_and_shapes)
{
    float in[6] = {1, 2, 3, 4, 5, 6}, out[6];
    em_arr a = view(in, EM_F32, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    em_arr o = view(out, EM_F32, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    cr_assert_eq(em_cpu_index_select(&o, &a, 0, index_list((int64_t[]){0, 2}, 2)),
                 EM_KERNEL_BAD_INDEX);
    cr_assert_eq(em_cpu_index_select(&o, &a, 0, index_list((int64_t[]){-1, 0}, 2)),
                 EM_KERNEL_BAD_INDEX);
    cr_assert_eq(em_cpu_index_select(&o, &a, 2, index_list((int64_t[]){0, 0}, 2)),
                 EM_KERNEL_UNSUPPORTED);
    /* a strided index list: entries 0 and 2 of {1, 9, 0} are read, 9 is skipped */
    em_arr strided = view((int64_t[]){1, 9, 0}, EM_I64, 1, (int64_t[]){2}, (int64_t[]){2});
    cr_assert_eq(em_cpu_index_select(&o, &a, 0, &strided), EM_KERNEL_OK);
    cr_assert(out[0] == 4 && out[2] == 6 && out[3] == 1 && out[5] == 3);
    int64_t iv[6] = {0, 1, 2, 0, 1, 3};
    em_arr ix = view(iv, EM_I64, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    cr_assert_eq(em_cpu_gather(&o, &a, 1, &ix), EM_KERNEL_BAD_INDEX);
    cr_assert_eq(em_cpu_scatter_add(&o, 1, &ix, &a), EM_KERNEL_BAD_INDEX);
    int32_t ii[6] = {0};
    em_arr i32 = view(ii, EM_I32, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    cr_assert_eq(em_cpu_index_add(&i32, 0, index_list((int64_t[]){0, 1}, 2), &i32), EM_KERNEL_UNSUPPORTED);
}
