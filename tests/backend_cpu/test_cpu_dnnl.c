/* The oneDNN integration on every CPU: matmul primitives in f32 and u8 x s8 (oneDNN has both on
 * AVX2 too) over transposes, row and batch strides, broadcast batches, bias, alpha and beta;
 * convolutions in f32 against ember's own kernels; the primitive cache (one creation per shape,
 * the LRU bound, threads sharing primitives, runs inside parallel regions); refused operands.
 * bf16 primitives wherever the CPU has AVX512_BF16 or AMX-BF16, with one skip line otherwise.
 * Operands are small integers, so f32 (and bf16) products are exact and compared exactly. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_dnnl_internal.h"
#include "backend_cpu/cpu_features_internal.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static int small_int(int lo, int hi) /* uniform in [lo, hi] */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (int)((rng_state >> 33) % (uint64_t)(hi - lo + 1));
}

static bool has_bf16(void)
{
    return em_cpu_has_avx512_bf16() || em_cpu_has_amx_bf16();
}

/* An operand of a test product: `batch` matrices of (rows, cols) stored row-major, or
 * transposed ((cols, rows) stored), with row stride ld and batch stride s (0: one matrix). */
typedef struct {
    int64_t rows, cols, ld, s;
    bool trans;
} operand;

static int64_t at(const operand *o, int64_t b, int64_t i, int64_t j)
{
    return b * o->s + (o->trans ? j * o->ld + i : i * o->ld + j);
}

static int64_t span(const operand *o, int64_t batch)
{
    int64_t one = (o->trans ? o->cols : o->rows) * o->ld;
    return (o->s ? (batch - 1) * o->s : 0) + one;
}

/* want = alpha * A @ B (+ bias) (+ beta * c0), in double from the f32 values */
static void reference(int64_t batch, const operand *oa, const float *a, const operand *ob,
                      const float *b, const float *bias, float alpha, float beta,
                      const float *c0, int64_t ldc, int64_t sc, double *want)
{
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < oa->rows; i++)
            for (int64_t j = 0; j < ob->cols; j++) {
                double s = 0;
                for (int64_t l = 0; l < oa->cols; l++)
                    s += (double)a[at(oa, t, i, l)] * b[at(ob, t, l, j)];
                s *= alpha;
                if (bias)
                    s += bias[j];
                if (beta != 0)
                    s += beta * (double)c0[t * sc + i * ldc + j];
                want[(t * oa->rows + i) * ob->cols + j] = s;
            }
}

/* One f32 product through em_dnnl_matmul, checked exactly. */
static void check_f32(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int pad,
                      bool broadcast_b, bool with_bias, float alpha, float beta)
{
    operand oa = {m, k, (ta ? m : k) + pad, 0, ta}, ob = {k, n, (tb ? k : n) + pad, 0, tb};
    oa.s = batch > 1 ? (ta ? k : m) * oa.ld + pad : 0;
    ob.s = batch > 1 && !broadcast_b ? (tb ? n : k) * ob.ld : 0;
    const int64_t ldc = n + pad, sc = m * ldc + pad;
    float *a = calloc((size_t)span(&oa, batch), sizeof *a);
    float *b = calloc((size_t)span(&ob, batch), sizeof *b);
    float *c = calloc((size_t)(batch * sc), sizeof *c), *c0 = calloc((size_t)(batch * sc), 4);
    float *bias = calloc((size_t)n, sizeof *bias);
    double *want = calloc((size_t)(batch * m * n), sizeof *want);
    for (int64_t i = 0; i < span(&oa, batch); i++)
        a[i] = (float)small_int(-3, 3);
    for (int64_t i = 0; i < span(&ob, batch); i++)
        b[i] = (float)small_int(-3, 3);
    for (int64_t i = 0; i < batch * sc; i++)
        c[i] = c0[i] = (float)small_int(-9, 9);
    for (int64_t j = 0; j < n; j++)
        bias[j] = (float)small_int(-5, 5);
    reference(batch, &oa, a, &ob, b, with_bias ? bias : NULL, alpha, beta, c0, ldc, sc, want);
    const em_dnnl_matmul_desc d = {
        .a_dt = EM_F32, .b_dt = EM_F32, .c_dt = EM_F32, .bias_dt = EM_F32, .ta = ta, .tb = tb,
        .m = m, .n = n, .k = k, .batch = batch, .lda = oa.ld, .ldb = ob.ld, .ldc = ldc,
        .sa = oa.s, .sb = ob.s, .sc = sc, .alpha = alpha, .beta = beta};
    cr_assert_eq(em_dnnl_matmul(&d, a, b, with_bias ? bias : NULL, c), EM_KERNEL_OK,
                 "batch %lld m %lld n %lld k %lld ta %d tb %d", (long long)batch, (long long)m,
                 (long long)n, (long long)k, ta, tb);
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                cr_assert_eq((double)c[t * sc + i * ldc + j], want[(t * m + i) * n + j],
                             "batch %lld m %lld n %lld k %lld ta %d tb %d: c[%lld][%lld][%lld] "
                             "%g, want %g", (long long)batch, (long long)m, (long long)n,
                             (long long)k, ta, tb, (long long)t, (long long)i, (long long)j,
                             c[t * sc + i * ldc + j], want[(t * m + i) * n + j]);
    free(a);
    free(b);
    free(c);
    free(c0);
    free(bias);
    free(want);
}

Test(dnnl, f32_matmul_transposes_and_row_strides)
{
    static const int64_t sizes[][3] = {{1, 1, 1}, {1, 17, 9}, {3, 5, 7}, {17, 33, 65},
                                       {64, 48, 100}, {130, 20, 3}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int t = 0; t < 4; t++)
            for (int pad = 0; pad <= 3; pad += 3)
                check_f32(1, sizes[s][0], sizes[s][1], sizes[s][2], t & 1, t & 2, pad, false,
                          false, 1, 0);
}

Test(dnnl, f32_matmul_batches_bias_alpha_beta)
{
    for (int t = 0; t < 4; t++) {
        check_f32(3, 9, 13, 21, t & 1, t & 2, 2, false, false, 1, 0);
        check_f32(4, 9, 13, 21, t & 1, t & 2, 1, true, false, 1, 0); /* one B for every A */
        check_f32(1, 7, 11, 5, t & 1, t & 2, 1, false, true, 1, 0);
        check_f32(2, 6, 10, 12, t & 1, t & 2, 0, false, false, 0.5f, 1);
    }
}

/* u8 (0..127, ember's activations) x s8 -> s32, exact */
static void check_u8s8(int64_t m, int64_t n, int64_t k, bool tb, int pad)
{
    const int64_t lda = k + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    uint8_t *a = malloc((size_t)(m * lda));
    int8_t *b = malloc((size_t)((tb ? n : k) * ldb));
    int32_t *c = calloc((size_t)(m * ldc), sizeof *c);
    for (int64_t i = 0; i < m * lda; i++)
        a[i] = (uint8_t)small_int(0, 127);
    for (int64_t i = 0; i < (tb ? n : k) * ldb; i++)
        b[i] = (int8_t)small_int(-128, 127);
    const em_dnnl_matmul_desc d = {.a_dt = EM_U8, .b_dt = EM_I8, .c_dt = EM_I32, .tb = tb,
                                   .m = m, .n = n, .k = k, .batch = 1, .lda = lda, .ldb = ldb,
                                   .ldc = ldc, .alpha = 1};
    cr_assert_eq(em_dnnl_matmul(&d, a, b, NULL, c), EM_KERNEL_OK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t s = 0;
            for (int64_t l = 0; l < k; l++)
                s += (int32_t)a[i * lda + l] * b[tb ? j * ldb + l : l * ldb + j];
            cr_assert_eq(c[i * ldc + j], s, "m %lld n %lld k %lld: c[%lld][%lld] %d, want %d",
                         (long long)m, (long long)n, (long long)k, (long long)i, (long long)j,
                         c[i * ldc + j], s);
        }
    free(a);
    free(b);
    free(c);
}

Test(dnnl, u8s8_matmul_exact)
{
    static const int64_t sizes[][3] = {{1, 1, 1}, {1, 512, 784}, {5, 9, 33}, {64, 50, 79},
                                       {33, 10, 256}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int tb = 0; tb < 2; tb++)
            check_u8s8(sizes[s][0], sizes[s][1], sizes[s][2], tb, tb * 5);
}

Test(dnnl, refuses_what_it_does_not_run)
{
    float x[16] = {0};
    em_dnnl_matmul_desc d = {.a_dt = EM_F32, .b_dt = EM_BF16, .c_dt = EM_F32, .m = 2, .n = 2,
                             .k = 2, .batch = 1, .lda = 2, .ldb = 2, .ldc = 2, .alpha = 1};
    cr_expect_eq(em_dnnl_matmul(&d, x, x, NULL, x), EM_KERNEL_UNSUPPORTED, "mixed dtypes");
    d.b_dt = EM_F32;
    d.beta = 0.5f;
    cr_expect_eq(em_dnnl_matmul(&d, x, x, NULL, x), EM_KERNEL_UNSUPPORTED, "beta 0.5");
    d.beta = 0;
    d.lda = 1;
    cr_expect_eq(em_dnnl_matmul(&d, x, x, NULL, x), EM_KERNEL_UNSUPPORTED, "lda < k");
    d = (em_dnnl_matmul_desc){.a_dt = EM_U8, .b_dt = EM_I8, .c_dt = EM_I32, .m = 2, .n = 2,
                              .k = 2, .batch = 1, .lda = 2, .ldb = 2, .ldc = 2, .alpha = 2};
    cr_expect_eq(em_dnnl_matmul(&d, x, x, NULL, x), EM_KERNEL_UNSUPPORTED, "int8 alpha 2");
    d.alpha = 1;
    d.m = 0;
    cr_expect_eq(em_dnnl_matmul(&d, x, x, NULL, x), EM_KERNEL_UNSUPPORTED, "m 0");
}

/* runs the f32 product (m, m, m) */
static void square(int64_t m)
{
    float *a = calloc((size_t)(m * m), sizeof *a), *c = calloc((size_t)(m * m), sizeof *c);
    for (int64_t i = 0; i < m; i++)
        a[i * m + i] = 2; /* c = 4 I */
    const em_dnnl_matmul_desc d = {.a_dt = EM_F32, .b_dt = EM_F32, .c_dt = EM_F32, .m = m,
                                   .n = m, .k = m, .batch = 1, .lda = m, .ldb = m, .ldc = m,
                                   .alpha = 1};
    cr_assert_eq(em_dnnl_matmul(&d, a, a, NULL, c), EM_KERNEL_OK);
    for (int64_t i = 0; i < m * m; i++)
        cr_assert_eq(c[i], i % (m + 1) == 0 ? 4.0f : 0.0f, "m %lld: c[%lld] %g", (long long)m,
                     (long long)i, c[i]);
    free(a);
    free(c);
}

Test(dnnl, cache_creates_one_primitive_per_shape_and_keeps_its_bound)
{
    /* one thread: the governor cannot change the team (a key) between the calls */
    omp_set_num_threads(1);
    em_dnnl_cache_clear();
    em_dnnl_cache_stats s0 = em_dnnl_cache_get_stats();
    cr_assert_eq(s0.held, 0);
    const int count = omp_get_max_threads();
    square(24);
    em_dnnl_cache_stats s1 = em_dnnl_cache_get_stats();
    cr_expect_eq(s1.created - s0.created, 1);
    for (int i = 0; i < 5; i++)
        square(24);
    em_dnnl_cache_stats s2 = em_dnnl_cache_get_stats();
    cr_expect_eq(s2.created, s1.created, "no primitive made again for a shape it holds");
    cr_expect_eq(s2.hits - s1.hits, 5);
    cr_expect_eq(omp_get_max_threads(), count, "the user's thread count is kept");
    for (int64_t m = 1; m <= EM_DNNL_CACHE_CAPACITY + 6; m++)
        square(m + 30);
    em_dnnl_cache_stats s3 = em_dnnl_cache_get_stats();
    cr_expect_eq(s3.held, EM_DNNL_CACHE_CAPACITY);
    cr_expect_eq(s3.created - s2.created, EM_DNNL_CACHE_CAPACITY + 6);
    square(24); /* evicted long ago: made again */
    cr_expect_eq(em_dnnl_cache_get_stats().created, s3.created + 1);
    em_dnnl_cache_clear();
    cr_expect_eq(em_dnnl_cache_get_stats().held, 0);
}

static void *square_many(void *arg)
{
    for (int i = 0; i < 20; i++)
        square(16 + (int64_t)(intptr_t)arg % 3);
    return NULL;
}

Test(dnnl, threads_share_primitives_and_regions_run_them)
{
    em_dnnl_cache_clear();
    pthread_t th[4];
    for (intptr_t i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, square_many, (void *)i), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* three shapes, made on threads whose teams may differ: a handful of primitives at most */
    cr_expect_leq(em_dnnl_cache_get_stats().held, 12);
    int kept = 1;
    #pragma omp parallel num_threads(2) reduction(&& : kept)
    {
        const int count = omp_get_max_threads();
        square(20 + omp_get_thread_num()); /* inside a region: a team of one */
        kept = omp_get_max_threads() == count;
    }
    cr_expect(kept, "a thread's OpenMP count is set back after a run with another team");
}

/* x, w, b, gy of a convolution as small integers; ember's f32 kernels against oneDNN's in dt */
static void check_conv(em_conv2d_shape s, em_dtype dt)
{
    const int64_t nx = s.n * s.c_in * s.h * s.w, nw = s.c_out * s.c_in * s.kh * s.kw;
    const int64_t ny = s.n * s.c_out * s.h_out * s.w_out;
    float *f[4], *want[4], *got[4];
    const int64_t len[4] = {nx, nw, s.c_out, ny}; /* x, w, b, gy; then y, gx, gw, gb */
    for (int i = 0; i < 4; i++) {
        f[i] = malloc((size_t)len[i] * sizeof(float));
        for (int64_t j = 0; j < len[i]; j++)
            f[i][j] = (float)small_int(-2, 2);
    }
    const int64_t out_len[4] = {ny, nx, nw, s.c_out};
    for (int i = 0; i < 4; i++) {
        want[i] = calloc((size_t)out_len[i], sizeof(float));
        got[i] = calloc((size_t)out_len[i], sizeof(float));
    }
    cr_assert_eq(em_cpu_conv2d(&s, EM_F32, f[0], f[1], f[2], want[0]), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv2d_grad_input(&s, EM_F32, f[3], f[1], want[1]), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_conv2d_grad_weight(&s, EM_F32, f[3], f[0], want[2], want[3]),
                 EM_KERNEL_OK);
    const size_t es = em_dtype_size(dt);
    void *in[4], *out[4];
    for (int i = 0; i < 4; i++) {
        in[i] = malloc((size_t)len[i] * es);
        out[i] = calloc((size_t)out_len[i], es);
        for (int64_t j = 0; j < len[i]; j++)
            if (dt == EM_F32)
                ((float *)in[i])[j] = f[i][j];
            else
                ((uint16_t *)in[i])[j] = em_f32_to_bf16(f[i][j]);
    }
    cr_assert_eq(em_dnnl_conv2d(&s, dt, in[0], in[1], in[2], out[0]), EM_KERNEL_OK);
    cr_assert_eq(em_dnnl_conv2d_grad_input(&s, dt, in[3], in[1], out[1]), EM_KERNEL_OK);
    cr_assert_eq(em_dnnl_conv2d_grad_weight(&s, dt, in[3], in[0], out[2], out[3]), EM_KERNEL_OK);
    /* both gradients in one call (gy reordered once): the same bits as the two calls */
    void *both[3];
    for (int i = 0; i < 3; i++)
        both[i] = calloc((size_t)out_len[i + 1], es);
    cr_assert_eq(em_dnnl_conv2d_grads(&s, dt, in[3], in[0], in[1], both[0], both[1], both[2]),
                 EM_KERNEL_OK);
    for (int i = 0; i < 3; i++) {
        cr_assert(!memcmp(both[i], out[i + 1], (size_t)out_len[i + 1] * es),
                  "%s: %s from em_dnnl_conv2d_grads", em_dtype_name(dt), i ? "gw/gb" : "gx");
        free(both[i]);
    }
    static const char *names[4] = {"y", "gx", "gw", "gb"};
    for (int i = 0; i < 4; i++)
        for (int64_t j = 0; j < out_len[i]; j++) {
            float g = dt == EM_F32 ? ((float *)out[i])[j]
                                   : em_bf16_to_f32(((uint16_t *)out[i])[j]);
            float w = dt == EM_F32 ? want[i][j] : em_bf16_to_f32(em_f32_to_bf16(want[i][j]));
            cr_assert_eq(g, w, "%s c_in %lld c_out %lld stride %lld dilation %lld: %s[%lld] "
                         "%g, want %g", em_dtype_name(dt), (long long)s.c_in,
                         (long long)s.c_out, (long long)s.stride[0], (long long)s.dilation[0],
                         names[i], (long long)j, g, w);
        }
    for (int i = 0; i < 4; i++) {
        free(f[i]);
        free(want[i]);
        free(got[i]);
        free(in[i]);
        free(out[i]);
    }
}

static em_conv2d_shape conv_shape(int64_t n, int64_t c_in, int64_t hw, int64_t c_out,
                                  int64_t k, int64_t stride, int64_t pad, int64_t dilation)
{
    em_conv2d_shape s = {.n = n, .c_in = c_in, .h = hw, .w = hw, .c_out = c_out, .kh = k,
                         .kw = k, .stride = {stride, stride}, .pad = {pad, pad},
                         .dilation = {dilation, dilation}, .groups = 1};
    s.h_out = s.w_out = (hw + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
    return s;
}

Test(dnnl, f32_convolutions_match_embers)
{
    check_conv(conv_shape(2, 16, 8, 32, 3, 1, 1, 1), EM_F32);
    check_conv(conv_shape(3, 3, 9, 5, 3, 2, 1, 1), EM_F32);
    check_conv(conv_shape(2, 8, 10, 16, 3, 1, 2, 2), EM_F32);
    check_conv(conv_shape(1, 32, 7, 16, 1, 1, 0, 1), EM_F32);
}

Test(dnnl, bf16_products_and_convolutions)
{
    if (!has_bf16()) {
        cr_skip_test("no AVX512_BF16 or AMX-BF16 on this CPU: bf16 products run on ember's "
                     "widening kernels");
    }
    const em_cpu_engine *e = em_cpu_engine_for(EM_CPU_PRODUCT_BF16);
    if (!getenv("EMBER_DNNL") && !getenv("EMBER_CPU_ISA"))
        cr_expect(e->dnnl && (strstr(e->isa, "bf16") || strstr(e->isa, "amx")),
                  "bf16 engine: %s", e->isa);
    for (int t = 0; t < 4; t++) {
        const int64_t m = 19, n = 23, k = 40;
        operand oa = {m, k, t & 1 ? m : k, 0, t & 1}, ob = {k, n, t & 2 ? k : n, 0, t & 2};
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) *
                                                                        (size_t)(k * n));
        uint16_t *ha = malloc(2 * (size_t)(m * k)), *hb = malloc(2 * (size_t)(k * n));
        uint16_t *hc = malloc(2 * (size_t)(m * n));
        float *fc = malloc(sizeof(float) * (size_t)(m * n));
        double *want = malloc(sizeof(double) * (size_t)(m * n));
        for (int64_t i = 0; i < m * k; i++)
            ha[i] = em_f32_to_bf16(a[i] = (float)small_int(-3, 3));
        for (int64_t i = 0; i < k * n; i++)
            hb[i] = em_f32_to_bf16(b[i] = (float)small_int(-3, 3));
        reference(1, &oa, a, &ob, b, NULL, 1, 0, NULL, n, 0, want);
        em_dnnl_matmul_desc d = {.a_dt = EM_BF16, .b_dt = EM_BF16, .c_dt = EM_F32,
                                 .ta = t & 1, .tb = t & 2, .m = m, .n = n, .k = k, .batch = 1,
                                 .lda = oa.ld, .ldb = ob.ld, .ldc = n, .alpha = 1};
        cr_assert_eq(em_dnnl_matmul(&d, ha, hb, NULL, fc), EM_KERNEL_OK);
        d.c_dt = EM_BF16;
        cr_assert_eq(em_dnnl_matmul(&d, ha, hb, NULL, hc), EM_KERNEL_OK);
        for (int64_t i = 0; i < m * n; i++) {
            cr_assert_eq((double)fc[i], want[i], "bf16 -> f32 [%lld]", (long long)i);
            cr_assert_eq(hc[i], em_f32_to_bf16((float)want[i]), "bf16 -> bf16 [%lld]",
                         (long long)i);
        }
        free(a);
        free(b);
        free(ha);
        free(hb);
        free(hc);
        free(fc);
        free(want);
    }
    check_conv(conv_shape(2, 16, 8, 32, 3, 1, 1, 1), EM_BF16);
    check_conv(conv_shape(4, 32, 14, 64, 3, 1, 1, 1), EM_BF16);
}

/* n random values in [-1, 1] rounded to dt (f16 or bf16): as f32 and as dt's bits */
static void random_half(em_dtype dt, int64_t n, float *f, uint16_t *h)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = (float)small_int(-1000, 1000) / 1000.0f;
        h[i] = dt == EM_F16 ? em_f32_to_f16(v) : em_f32_to_bf16(v);
        f[i] = dt == EM_F16 ? em_f16_to_f32(h[i]) : em_bf16_to_f32(h[i]);
    }
}

/* |got - want| within bf16's rounding of want (and f32's sums of k terms of at most 1): f16
 * rounds finer */
static void expect_bf16_close(const char *what, int64_t n, const float *got, const float *want,
                              int64_t k)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 0x1p-8f * fabsf(want[i]) + 1e-6f * (float)k,
                  "%s[%lld]: %g, the f32 path %g", what, (long long)i, got[i], want[i]);
}

static void widen(em_dtype dt, int64_t n, const uint16_t *h, float *f)
{
    for (int64_t i = 0; i < n; i++)
        f[i] = dt == EM_F16 ? em_f16_to_f32(h[i]) : em_bf16_to_f32(h[i]);
}

/* The backend's half Linear entries and gemm against the f32 path on the same values: a
 * Linear x (m, n) @ w^T, w (k, n), and its gradients with the parameters' in pdt (f32, or dt
 * itself). */
static void check_half_entries(em_dtype dt, int64_t m, em_dtype pdt)
{
    const int64_t n = 70, k = 130;
    float *x = malloc(4 * (size_t)(m * n)), *w = malloc(4 * (size_t)(k * n));
    float *g = malloc(4 * (size_t)(m * k)), *b = malloc(4 * (size_t)k);
    uint16_t *hx = malloc(2 * (size_t)(m * n)), *hw = malloc(2 * (size_t)(k * n));
    uint16_t *hg = malloc(2 * (size_t)(m * k)), *hb = malloc(2 * (size_t)k);
    random_half(dt, m * n, x, hx);
    random_half(dt, k * n, w, hw);
    random_half(dt, m * k, g, hg);
    random_half(dt, k, b, hb);
    float *want = malloc(4 * (size_t)(m * k)), *got = malloc(4 * (size_t)(m * k));
    uint16_t *hy = malloc(2 * (size_t)(m * k));
    /* y = x @ w^T + b */
    cr_assert_eq(em_cpu_gemm(EM_F32, false, true, m, k, n, 1, x, n, 0, w, n, 0, 0, want, k, 0,
                             1), EM_KERNEL_OK);
    for (int64_t i = 0; i < m * k; i++)
        want[i] += b[i % k];
    cr_assert_eq(em_cpu_linear(dt, m, k, n, hx, n, hw, n, hb, hy, k), EM_KERNEL_OK);
    widen(dt, m * k, hy, got);
    expect_bf16_close("linear y", m * k, got, want, n);
    if (!em_cpu_dnnl_takes(dt)) { /* ember's kernels: the f32 path's bits on the same values */
        if (em_cpu_linear(EM_F32, m, k, n, x, n, w, n, b, want, k) == EM_KERNEL_UNSUPPORTED) {
            for (int64_t i = 0; i < m * k; i++)
                want[i] = b[i % k];
            cr_assert_eq(em_cpu_gemm(EM_F32, false, true, m, k, n, 1, x, n, 0, w, n, 0, 1, want,
                                     k, 0, 1), EM_KERNEL_OK);
        }
        for (int64_t i = 0; i < m * k; i++)
            cr_assert_eq(hy[i], dt == EM_F16 ? em_f32_to_f16(want[i]) : em_f32_to_bf16(want[i]),
                         "%s linear y[%lld] of %lld rows", em_dtype_name(dt), (long long)i,
                         (long long)m);
    }
    /* a batched gemm, one B for three As: c = 0.5 a @ b */
    cr_assert_eq(em_cpu_gemm(EM_F32, false, false, 100, k, n, 0.5, x, n, 100 * n, w, k, 0, 0,
                             want, k, 100 * k, 3), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_gemm(dt, false, false, 100, k, n, 0.5, hx, n, 100 * n, hw, k, 0, 0, hy,
                             k, 100 * k, 3), EM_KERNEL_OK);
    widen(dt, 300 * k, hy, got);
    expect_bf16_close("gemm c", 300 * k, got, want, n);
    /* the gradients: gx = g @ w (dt), gw = g^T @ x and gb = g's column sums (pdt) */
    float *gx_want = malloc(4 * (size_t)(m * n)), *gx = malloc(4 * (size_t)(m * n));
    float *gw_want = malloc(4 * (size_t)(k * n)), *gw = malloc(4 * (size_t)(k * n));
    float *gb_want = calloc((size_t)k, 4), *gb = malloc(4 * (size_t)k);
    uint16_t *hgx = malloc(2 * (size_t)(m * n)), *hgw = malloc(2 * (size_t)(k * n));
    uint16_t *hgb = malloc(2 * (size_t)k);
    cr_assert_eq(em_cpu_gemm(EM_F32, false, false, m, n, k, 1, g, k, 0, w, n, 0, 0, gx_want, n,
                             0, 1), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_gemm(EM_F32, true, false, k, n, m, 1, g, k, 0, x, n, 0, 0, gw_want, n, 0,
                             1), EM_KERNEL_OK);
    for (int64_t i = 0; i < m * k; i++)
        gb_want[i % k] += g[i];
    const bool f32_params = pdt == EM_F32;
    const em_linear_grads a = {.m = m, .n = n, .k = k, .g = hg, .w = hw, .x = hx, .ldg = k,
                               .ldw = n, .ldx = n, .gx = hgx, .gb = f32_params ? (void *)gb : hgb,
                               .gw = f32_params ? (void *)gw : hgw, .ldgx = n, .ldgw = n,
                               .param_dt = pdt};
    cr_assert_eq(em_cpu_linear_grad(dt, &a), EM_KERNEL_OK);
    widen(dt, m * n, hgx, gx);
    expect_bf16_close("gx", m * n, gx, gx_want, k);
    if (f32_params) {
        for (int64_t i = 0; i < k * n; i++) /* f32 results: only the order of the sums differs */
            cr_assert(fabsf(gw[i] - gw_want[i]) <= 1e-5f * (float)m, "gw[%lld]: %g, want %g",
                      (long long)i, gw[i], gw_want[i]);
        for (int64_t i = 0; i < k; i++)
            cr_assert(fabsf(gb[i] - gb_want[i]) <= 1e-5f * (float)m, "gb[%lld]: %g, want %g",
                      (long long)i, gb[i], gb_want[i]);
    } else {
        widen(dt, k * n, hgw, gw);
        widen(dt, k, hgb, gb);
        expect_bf16_close("gw", k * n, gw, gw_want, m);
        expect_bf16_close("gb", k, gb, gb_want, m);
    }
    void *bufs[] = {x,       w,  g,       b,  hx,      hw, hg,  hb,  want, got, hy,
                    gx_want, gx, gw_want, gw, gb_want, gb, hgx, hgw, hgb};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
}

/* bf16 on oneDNN where the CPU multiplies bf16, f16 (and bf16 elsewhere: test_cpu_dnnl_avx2) on
 * ember's kernels, widened once per call (a bf16 forward on the tiles a block of rows at a
 * time); 300 rows on OpenBLAS, 603 on ember's tiles (a part block of rows, a part panel of 2
 * columns). */
Test(dnnl, half_backend_entries_match_the_f32_path)
{
    const em_dtype dts[] = {EM_BF16, EM_F16};
    for (int d = 0; d < 2; d++)
        for (int64_t m = 300; m <= 603; m += 303) {
            check_half_entries(dts[d], m, EM_F32);
            check_half_entries(dts[d], m, dts[d]);
        }
}
