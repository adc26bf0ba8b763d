/* The CPU GEMM kernel against a naive triple loop: every transpose combination, odd sizes,
 * padded leading dimensions, batches with gaps, f32/f64/f16/bf16, beta 0 over NaN, k = 0, and the
 * register-tile kernel of a Linear's x @ w^T and g @ w. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

static uint64_t rng_state = 12345;

static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static void store(em_dtype dt, void *buf, int64_t i, double v)
{
    switch (dt) {
    case EM_F32: ((float *)buf)[i] = (float)v; break;
    case EM_F64: ((double *)buf)[i] = v; break;
    case EM_F16: ((uint16_t *)buf)[i] = em_f32_to_f16((float)v); break;
    default: ((uint16_t *)buf)[i] = em_f32_to_bf16((float)v); break;
    }
}

static double load(em_dtype dt, const void *buf, int64_t i)
{
    switch (dt) {
    case EM_F32: return ((const float *)buf)[i];
    case EM_F64: return ((const double *)buf)[i];
    case EM_F16: return em_f16_to_f32(((const uint16_t *)buf)[i]);
    default: return em_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
}

/* A buffer of n random values of dt. */
static void *random_buf(em_dtype dt, int64_t n)
{
    void *b = malloc((size_t)n * em_dtype_size(dt));
    for (int64_t i = 0; i < n; i++)
        store(dt, b, i, rnd());
    return b;
}

/* Runs em_cpu_gemm on padded, gapped random operands and compares each C[b] with the naive
 * alpha * op(A) op(B) + beta * C0 computed in double from the stored (rounded) operands. */
static void check_gemm(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                       double alpha, double beta, int64_t batch, int64_t pad)
{
    const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
    const int64_t lda = ca + pad, ldb = cb + pad, ldc = n + pad;
    const int64_t sa = ra * lda + 7, sb = rb * ldb + 3, sc = m * ldc + 5;
    void *a = random_buf(dt, sa * batch), *b = random_buf(dt, sb * batch);
    void *c = random_buf(dt, sc * batch);
    double *c0 = malloc((size_t)(sc * batch) * sizeof(double));
    for (int64_t i = 0; i < sc * batch; i++) {
        if (beta == 0)
            store(dt, c, i, NAN);
        c0[i] = load(dt, c, i);
    }
    int rc = em_cpu_gemm(dt, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                         batch);
    cr_assert_eq(rc, EM_KERNEL_OK);
    const double tol = dt == EM_F64 ? 1e-12 : dt == EM_F32 ? 1e-5 : dt == EM_F16 ? 2e-3 : 1e-2;
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double sum = 0;
                for (int64_t p = 0; p < k; p++) {
                    double av = load(dt, a, bi * sa + (ta ? p * lda + i : i * lda + p));
                    double bv = load(dt, b, bi * sb + (tb ? j * ldb + p : p * ldb + j));
                    sum += av * bv;
                }
                const int64_t at = bi * sc + i * ldc + j;
                double want = alpha * sum + (beta == 0 ? 0 : beta * c0[at]);
                double got = load(dt, c, at);
                cr_assert(fabs(got - want) <= tol * (1 + sqrt((double)k)),
                          "%s ta=%d tb=%d [%ld,%ld,%ld] b=%ld (%ld,%ld): got %g want %g",
                          em_dtype_name(dt), ta, tb, (long)m, (long)n, (long)k, (long)bi,
                          (long)i, (long)j, got, want);
            }
    /* the gaps between rows and between batch entries are untouched */
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = n; j < (i + 1 < m ? ldc : sc - i * ldc); j++) {
                const int64_t at = bi * sc + i * ldc + j;
                cr_assert(load(dt, c, at) == c0[at] || (isnan(c0[at]) && isnan(load(dt, c, at))));
            }
    free(a);
    free(b);
    free(c);
    free(c0);
}

Test(cpu_gemm, f32_all_transposes_odd_sizes)
{
    for (int t = 0; t < 4; t++) {
        check_gemm(EM_F32, t & 1, t & 2, 37, 29, 53, 1.0, 0.0, 1, 0);
        check_gemm(EM_F32, t & 1, t & 2, 13, 41, 7, 0.5, 1.0, 1, 3);
        check_gemm(EM_F32, t & 1, t & 2, 1, 17, 9, 2.0, 0.0, 1, 0);
    }
}

/* One row or one column of C runs as a matrix-vector product: every transpose, padded leading
 * dimensions (the vector then strided), beta 0 over NaN and beta 1, batched, and large enough to
 * be split over threads. */
Test(cpu_gemm, one_row_or_one_column_as_matrix_vector)
{
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int d = 0; d < 2; d++)
        for (int t = 0; t < 4; t++) {
            check_gemm(dts[d], t & 1, t & 2, 1, 29, 53, 1.5, 0.0, 1, 3);
            check_gemm(dts[d], t & 1, t & 2, 1, 29, 53, 1.0, 1.0, 3, 0);
            check_gemm(dts[d], t & 1, t & 2, 31, 1, 47, -0.5, 0.0, 2, 2);
            check_gemm(dts[d], t & 1, t & 2, 31, 1, 47, 1.0, 1.0, 1, 5);
            check_gemm(dts[d], t & 1, t & 2, 1, 1, 9, 1.0, 0.0, 1, 1);
            check_gemm(dts[d], t & 1, t & 2, 1, 600, 784, 1.0, 0.0, 1, 0); /* columns split */
            check_gemm(dts[d], t & 1, t & 2, 700, 1, 500, 1.0, 1.0, 1, 1); /* rows split */
        }
}

Test(cpu_gemm, f32_batched_with_gaps)
{
    for (int t = 0; t < 4; t++) {
        check_gemm(EM_F32, t & 1, t & 2, 11, 9, 13, 1.0, 0.0, 3, 2);
        check_gemm(EM_F32, t & 1, t & 2, 11, 9, 13, -1.5, 1.0, 3, 1);
    }
}

Test(cpu_gemm, f32_large_products_split_over_threads)
{
    check_gemm(EM_F32, false, false, 300, 70, 50, 1.0, 0.0, 1, 0);  /* rows split */
    check_gemm(EM_F32, true, true, 33, 310, 40, 1.0, 1.0, 1, 5);     /* columns split */
    check_gemm(EM_F32, false, true, 20, 20, 20, 1.0, 0.0, 80, 1);    /* batch spread */
    check_gemm(EM_F32, true, false, 150, 120, 40, 1.0, 0.5, 2, 0);   /* batch < threads */
}

/* Where OpenBLAS has its unpacked small-matrix kernels (em_cpu_blas_small_kernels), single A B^T
 * and A^T B products are cut into blocks those kernels take: rows or columns of 16 or more,
 * both where needed, and K in passes that add into C; sizes with a partial last block, padding,
 * alpha and beta. */
Test(cpu_gemm, f32_products_in_small_matrix_blocks)
{
    em_cpu_blas_choose_core(); /* as the backend's discovery does: the widest kernel set */
    cr_log_info("OpenBLAS small-matrix kernels: %s", em_cpu_blas_small_kernels() ? "yes" : "no");
    check_gemm(EM_F32, false, true, 40, 150, 70, 1.0, 0.0, 1, 0);  /* 16 columns per block */
    check_gemm(EM_F32, false, true, 40, 150, 70, -0.5, 1.0, 1, 3);
    check_gemm(EM_F32, true, false, 100, 300, 50, 1.0, 0.0, 1, 2);  /* 64 rows per block */
    check_gemm(EM_F32, true, false, 100, 300, 50, 2.0, 1.0, 1, 0);
    check_gemm(EM_F32, false, true, 40, 150, 20, 1.0, 0.0, 1, 0);  /* K < 32: packed */
    check_gemm(EM_F32, false, true, 64, 40, 2000, 1.0, 0.0, 1, 1); /* K in 3 passes */
    check_gemm(EM_F32, false, true, 64, 40, 2000, 0.5, 1.0, 1, 0);
    check_gemm(EM_F32, true, false, 40, 1000, 70, 1.0, 0.0, 1, 0); /* 16 rows x 512 cols */
    check_gemm(EM_F32, true, false, 40, 1000, 70, -1.0, 1.0, 1, 2);
}

/* A Linear's x @ w^T and g @ w (cpu_gemm_tiles.c's register tiles over panels of w): rows not a
 * multiple of the tile's 6, a last panel of fewer than 16 columns, padded leading dimensions,
 * beta 0 over NaN and beta 1 (a bias preloaded in C), k of 1, several sweeps over panels (k
 * 1000), rows split over threads; and what it leaves to OpenBLAS (alpha != 1, beta other than 0
 * and 1). */
Test(cpu_gemm, f32_linear_products_in_register_tiles)
{
    check_gemm(EM_F32, false, false, 517, 37, 53, 1.0, 0.0, 1, 2); /* g @ w: b as it is */
    check_gemm(EM_F32, false, false, 600, 130, 300, 1.0, 1.0, 1, 0);
    check_gemm(EM_F32, false, true, 517, 37, 53, 1.0, 0.0, 1, 0);
    check_gemm(EM_F32, false, true, 521, 16, 128, 1.0, 1.0, 1, 3);
    check_gemm(EM_F32, false, true, 512, 97, 1, 1.0, 0.0, 1, 1);
    check_gemm(EM_F32, false, true, 514, 200, 1000, 1.0, 1.0, 1, 0);
    check_gemm(EM_F32, false, true, 700, 130, 200, 1.0, 0.0, 1, 2);
    check_gemm(EM_F32, false, true, 600, 40, 30, 0.5, 1.0, 1, 0);
    check_gemm(EM_F32, false, true, 600, 40, 30, 1.0, -2.0, 1, 1);
}

/* em_cpu_linear (y = x @ w^T + b with the bias in the register tiles) against the naive sum, with
 * and without a bias, a partial last panel and padded rows; unsupported where it does not apply */
/* c (rows, cols; row stride ldc) against start[j] (0 where start is NULL) plus the sums over
 * l < depth of a(i, l) b(l, j), a(i, l) at a[i * a_row + l * a_col] and b(l, j) at
 * b[l * b_row + j * b_col]; c's gap past column cols must still hold NaN */
static void expect_product(const char *what, int64_t rows, int64_t cols, int64_t depth,
                           const float *a, int64_t a_row, int64_t a_col, const float *b,
                           int64_t b_row, int64_t b_col, const float *start, const float *c,
                           int64_t ldc)
{
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) {
            double want = start ? start[j] : 0;
            for (int64_t l = 0; l < depth; l++)
                want += (double)a[i * a_row + l * a_col] * b[l * b_row + j * b_col];
            cr_assert(fabs(c[i * ldc + j] - want) <= 1e-5 * (1 + sqrt((double)depth)),
                      "%s (%ld, %ld): got %g want %g", what, (long)i, (long)j, c[i * ldc + j],
                      want);
        }
        for (int64_t j = cols; j < ldc; j++)
            cr_assert(isnan(c[i * ldc + j]), "%s: the gap past column %ld was written", what,
                      (long)cols);
    }
}

Test(cpu_gemm, linear_adds_its_bias_in_the_tiles)
{
    const int64_t m = 521, n = 37, k = 45, ldx = 50, ldw = 47, ldy = 40;
    float *x = random_buf(EM_F32, m * ldx), *w = random_buf(EM_F32, n * ldw);
    float *b = random_buf(EM_F32, n), *y = malloc(sizeof(float) * (size_t)(m * ldy));
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        for (int64_t i = 0; i < m * ldy; i++)
            y[i] = NAN;
        int rc = em_cpu_linear(EM_F32, m, n, k, x, ldx, w, ldw, with_bias ? b : NULL, y, ldy);
        if (!em_cpu_has_avx2()) {
            cr_assert_eq(rc, EM_KERNEL_UNSUPPORTED);
            continue;
        }
        cr_assert_eq(rc, EM_KERNEL_OK);
        expect_product(with_bias ? "y with bias" : "y", m, n, k, x, ldx, 1, w, 1, ldw,
                       with_bias ? b : NULL, y, ldy);
    }
    cr_expect_eq(em_cpu_linear(EM_F32, 64, n, k, x, ldx, w, ldw, b, y, ldy),
                 EM_KERNEL_UNSUPPORTED, "64 rows: left to gemm");
    cr_expect_eq(em_cpu_linear(EM_F64, m, n, k, x, ldx, w, ldw, b, y, ldy), EM_KERNEL_UNSUPPORTED);
    cr_expect_eq(em_cpu_linear(EM_F32, m, n, 0, x, ldx, w, ldw, b, y, ldy), EM_KERNEL_UNSUPPORTED,
                 "k 0: left to gemm, which writes the bias alone");
    free(x);
    free(w);
    free(b);
    free(y);
}

/* em_cpu_linear_grad (gx = g @ w; the bias gradient, g's column sums, from the same pass over g;
 * the weight gradient g^T x beside it on the same threads) against naive sums: rows over
 * threads, a partial last panel, padded rows, a k that is no multiple of the sums' 4 lanes and
 * leaves the weight gradient a partial last block; the same bits on 1, 2 and 3 threads;
 * unsupported where the tiles do not apply */
Test(cpu_gemm, linear_gradients_in_one_pass)
{
    const int64_t m = 533, n = 37, k = 601, ldg = 602, ldw = 41, ldx = 40, ldgx = 39, ldgw = 38;
    float *g = random_buf(EM_F32, m * ldg), *w = random_buf(EM_F32, k * ldw);
    float *x = random_buf(EM_F32, m * ldx), *gx = malloc(sizeof(float) * (size_t)(m * ldgx));
    float *gb = malloc(sizeof(float) * (size_t)k), *gw = malloc(sizeof(float) * (size_t)(k * ldgw));
    for (int64_t i = 0; i < m * ldgx; i++)
        gx[i] = NAN;
    for (int64_t i = 0; i < k * ldgw; i++)
        gw[i] = NAN;
    em_linear_grads a = {.m = m, .n = n, .k = k, .g = g, .w = w, .x = x, .ldg = ldg, .ldw = ldw,
                         .ldx = ldx, .gx = gx, .gb = gb, .gw = gw, .ldgx = ldgx, .ldgw = ldgw};
    int rc = em_cpu_linear_grad(EM_F32, &a);
    if (!em_cpu_has_avx2()) {
        cr_assert_eq(rc, EM_KERNEL_UNSUPPORTED);
        cr_skip_test("no AVX2+FMA on this CPU");
    }
    cr_assert_eq(rc, EM_KERNEL_OK);
    expect_product("gx", m, n, k, g, ldg, 1, w, ldw, 1, NULL, gx, ldgx);
    expect_product("gw", k, n, m, g, 1, ldg, x, ldx, 1, NULL, gw, ldgw);
    for (int64_t l = 0; l < k; l++) {
        double want = 0;
        for (int64_t i = 0; i < m; i++)
            want += g[i * ldg + l];
        cr_assert(fabs(gb[l] - want) <= 1e-6 * (1 + fabs(want)), "gb[%ld]: got %.9g want %.9g",
                  (long)l, gb[l], want);
    }
    /* the same bits on any number of threads (rows go to threads in chunks as they come free) */
    const int threads = omp_get_max_threads();
    for (int t = 1; t <= 3; t += 2) {
        float *again = malloc(sizeof(float) * (size_t)(m * ldgx));
        float *gb_again = malloc(sizeof(float) * (size_t)k);
        float *gw_again = malloc(sizeof(float) * (size_t)(k * ldgw));
        for (int64_t i = 0; i < m * ldgx; i++) /* as gx before its call: the gaps stay NaN */
            again[i] = NAN;
        for (int64_t i = 0; i < k * ldgw; i++)
            gw_again[i] = NAN;
        em_linear_grads b = a;
        b.gx = again;
        b.gb = gb_again;
        b.gw = gw_again;
        omp_set_num_threads(t);
        cr_assert_eq(em_cpu_linear_grad(EM_F32, &b), EM_KERNEL_OK);
        omp_set_num_threads(threads);
        cr_assert_arr_eq(again, gx, sizeof(float) * (size_t)(m * ldgx), "gx on %d threads", t);
        cr_assert_arr_eq(gb_again, gb, sizeof(float) * (size_t)k, "gb on %d threads", t);
        cr_assert_arr_eq(gw_again, gw, sizeof(float) * (size_t)(k * ldgw), "gw on %d threads", t);
        free(again);
        free(gb_again);
        free(gw_again);
    }
    em_linear_grads few = a;
    few.m = 64;
    cr_expect_eq(em_cpu_linear_grad(EM_F32, &few), EM_KERNEL_UNSUPPORTED,
                 "64 rows: left to gemm and a column sum");
    cr_expect_eq(em_cpu_linear_grad(EM_F64, &a), EM_KERNEL_UNSUPPORTED);
    free(g);
    free(w);
    free(x);
    free(gx);
    free(gb);
    free(gw);
}

Test(cpu_gemm, f64_all_transposes)
{
    for (int t = 0; t < 4; t++) {
        check_gemm(EM_F64, t & 1, t & 2, 23, 19, 31, 1.0, 0.0, 2, 1);
        check_gemm(EM_F64, t & 1, t & 2, 70, 65, 60, 0.25, 1.0, 1, 0);
    }
}

Test(cpu_gemm, half_types_accumulate_in_f32)
{
    for (int t = 0; t < 4; t++) {
        check_gemm(EM_F16, t & 1, t & 2, 9, 14, 21, 1.0, 0.0, 2, 1);
        check_gemm(EM_BF16, t & 1, t & 2, 9, 14, 21, 1.0, 1.0, 2, 1);
    }
}

Test(cpu_gemm, k_zero_scales_c)
{
    float c[6] = {1, 2, NAN, 4, 5, 6};
    float a[1] = {0}, b[1] = {0};
    cr_assert_eq(em_cpu_gemm(EM_F32, false, false, 2, 3, 0, 1.0, a, 1, 0, b, 3, 0, 2.0, c, 3, 0,
                             1), EM_KERNEL_OK);
    cr_assert_float_eq(c[0], 2.0f, 0);
    cr_assert_float_eq(c[5], 12.0f, 0);
    cr_assert_eq(em_cpu_gemm(EM_F32, false, false, 2, 3, 0, 1.0, a, 1, 0, b, 3, 0, 0.0, c, 3, 0,
                             1), EM_KERNEL_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(c[i], 0.0f);
}

Test(cpu_gemm, single_row_any_leading_dimension)
{
    /* (1, 3) @ (3, 2): A's row stride is irrelevant and may be 0 */
    float a[3] = {1, 2, 3}, b[6] = {1, 0, 0, 1, 1, 1}, c[2] = {NAN, NAN};
    cr_assert_eq(em_cpu_gemm(EM_F32, false, false, 1, 2, 3, 1.0, a, 0, 0, b, 2, 0, 0.0, c, 0, 0,
                             1), EM_KERNEL_OK);
    cr_assert_float_eq(c[0], 4.0f, 0);
    cr_assert_float_eq(c[1], 5.0f, 0);
}

Test(cpu_gemm, rejects_integer_dtypes_and_overlapping_rows)
{
    int32_t a[4] = {0}, b[4] = {0}, c[4] = {0};
    cr_assert_eq(em_cpu_gemm(EM_I32, false, false, 2, 2, 2, 1.0, a, 2, 0, b, 2, 0, 0.0, c, 2, 0,
                             1), EM_KERNEL_UNSUPPORTED);
    float fa[4] = {0}, fb[4] = {0}, fc[4] = {0};
    cr_assert_eq(em_cpu_gemm(EM_F32, false, false, 2, 2, 2, 1.0, fa, 1, 0, fb, 2, 0, 0.0, fc, 2,
                             0, 1), EM_KERNEL_UNSUPPORTED);
}
