/* The fused scaled dot-product attention: values and gradients in f64 against the naive
 * composition softmax(q k^T * scale + mask) v built from autograd ops (tile-crossing lengths,
 * D from 16 to 128, causal and not, bool and float masks, dropout replayed from the same
 * generator), central-difference gradients of the op itself and of a learned float mask, the
 * AVX2 and portable f32 paths, f16/bf16, rows that see no key, and the errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "tensor/tensor_internal.h"
#include "helpers/gradcheck.h"

TestSuite(attention, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    int64_t b, h, lq, lk, d, dv;
} dims;

typedef struct {
    bool causal;
    double dropout_p;
    int mask; /* 0 none, 1 bool (B, 1, Lq, Lk), 2 float (1, 1, Lq, Lk), 3 bool (B, 1, 1, Lk) */
} variant;

/* The mask of variant v for d, with every query row seeing key 0. */
static em_tensor *make_mask(const dims *d, int kind, uint64_t seed)
{
    if (kind == 0)
        return NULL;
    em_generator g = em_generator_new(seed);
    em_shape s = kind == 1 ? EM_SHAPE(d->b, 1, d->lq, d->lk)
               : kind == 2 ? EM_SHAPE(1, 1, d->lq, d->lk) : EM_SHAPE(d->b, 1, 1, d->lk);
    if (kind == 2)
        return em_normal(s, EM_F64, 0.0, 2.0, &g);
    em_tensor *keep = em_bernoulli(s, EM_F64, 0.7, &g);
    em_tensor *first = em_lt(em_arange(0, (double)d->lk, 1, EM_F64), em_scalar(1, EM_F64));
    return em_ne(em_maximum(keep, em_to_dtype(first, EM_F64)), em_scalar(0, EM_F64));
}

/* dropout(softmax(q k^T * scale + mask)) v from autograd ops; the dropout mask is em_bernoulli's
 * from gen, as the fused kernel draws it */
static em_tensor *naive(em_tensor *q, em_tensor *k, em_tensor *v, const variant *var,
                        const em_tensor *mask, em_generator *gen)
{
    int64_t lq = q->shape[2], lk = k->shape[2];
    em_tensor *s = em_mul_scalar(em_matmul(q, em_transpose(k, -2, -1)),
                                 1.0 / sqrt((double)q->shape[3]));
    if (var->causal) {
        em_tensor *i = em_reshape(em_arange(0, (double)lq, 1, EM_F64), EM_SHAPE(lq, 1));
        em_tensor *j = em_arange(0, (double)lk, 1, EM_F64);
        s = em_where(em_le(j, i), s, em_scalar(-INFINITY, q->dtype));
    }
    if (mask && mask->dtype == EM_BOOL)
        s = em_where(mask, s, em_scalar(-INFINITY, q->dtype));
    else if (mask)
        s = em_add(s, mask);
    em_tensor *p = em_softmax(s, -1);
    if (var->dropout_p > 0) {
        em_tensor *keep = em_bernoulli(EM_SHAPE(q->shape[0], q->shape[1], lq, lk), q->dtype,
                                       1.0 - var->dropout_p, gen);
        p = em_mul(p, em_mul_scalar(keep, 1.0 / (1.0 - var->dropout_p)));
    }
    return em_matmul(p, v);
}

static em_tensor *fused(em_tensor *q, em_tensor *k, em_tensor *v, const variant *var,
                        const em_tensor *mask, em_generator *gen)
{
    return em_scaled_dot_product_attention(q, k, v, (em_sdpa_opts){
        .attn_mask = mask, .dropout_p = var->dropout_p, .is_causal = var->causal, .gen = gen});
}

/* The largest |a - b| / max(1, |b|) over the elements. */
static double max_rel_diff(const em_tensor *a, const em_tensor *b)
{
    cr_assert_not_null(a, "%s", em_error());
    cr_assert_not_null(b, "%s", em_error());
    cr_assert(em_same_shape(a, b));
    int64_t n = em_numel(a);
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    cr_assert_eq(em_copy_to_host(a, EM_F64, x), EM_OK);
    cr_assert_eq(em_copy_to_host(b, EM_F64, y), EM_OK);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs(x[i] - y[i]) / fmax(1.0, fabs(y[i]));
        if (!(diff <= worst))
            worst = diff;
    }
    free(x);
    free(y);
    return worst;
}

/* Runs fn on fresh leaves q, k, v of dtype dt (values from seed), seeds backward with a fixed
 * weight; out and the grads go to res[0..3]. */
typedef em_tensor *(*attention_fn)(em_tensor *, em_tensor *, em_tensor *, const variant *,
                                   const em_tensor *, em_generator *);
static void run(attention_fn f, const dims *d, const variant *var, em_dtype dt, uint64_t seed,
                em_tensor **res)
{
    em_generator g = em_generator_new(seed);
    em_tensor *x[3] = {em_randn(EM_SHAPE(d->b, d->h, d->lq, d->d), dt, &g),
                       em_randn(EM_SHAPE(d->b, d->h, d->lk, d->d), dt, &g),
                       em_randn(EM_SHAPE(d->b, d->h, d->lk, d->dv), dt, &g)};
    em_tensor *w = em_randn(EM_SHAPE(d->b, d->h, d->lq, d->dv), dt, &g);
    em_tensor *mask = make_mask(d, var->mask, seed + 7);
    if (mask && mask->dtype != EM_BOOL)
        mask = em_to_dtype(mask, dt);
    for (int i = 0; i < 3; i++)
        em_requires_grad_(x[i], true);
    em_generator drop = em_generator_new(seed + 11);
    res[0] = f(x[0], x[1], x[2], var, mask, &drop);
    cr_assert_not_null(res[0], "%s", em_error());
    cr_assert_eq(em_backward_grad(res[0], w), EM_OK, "%s", em_error());
    for (int i = 0; i < 3; i++)
        res[i + 1] = x[i]->grad;
}

static void expect_match(const dims *d, const variant *var, double tol)
{
    em_tensor *want[4], *got[4];
    run(naive, d, var, EM_F64, 42, want);
    run(fused, d, var, EM_F64, 42, got);
    static const char *names[4] = {"out", "grad q", "grad k", "grad v"};
    for (int i = 0; i < 4; i++) {
        double diff = max_rel_diff(got[i], want[i]);
        cr_expect(diff <= tol, "%s differs by %.3g: B %lld H %lld Lq %lld Lk %lld D %lld Dv %lld "
                  "causal %d dropout %g mask %d", names[i], diff, (long long)d->b,
                  (long long)d->h, (long long)d->lq, (long long)d->lk, (long long)d->d,
                  (long long)d->dv, var->causal, var->dropout_p, var->mask);
    }
}

Test(attention, matches_the_composition_in_f64)
{
    const dims shapes[] = {
        {2, 3, 67, 67, 16, 16},   /* a partial second tile */
        {1, 2, 130, 70, 32, 24},  /* more queries than keys, Dv != D */
        {1, 1, 65, 129, 128, 128},/* more keys than queries */
        {2, 2, 5, 3, 64, 40},     /* shorter than one tile */
        {1, 2, 1, 100, 48, 48},   /* one query (decoding) */
        {1, 1, 128, 128, 96, 80}, /* whole tiles */
        {4, 3, 130, 130, 16, 16}, /* heads enough that a thread takes all blocks of one */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int causal = 0; causal < 2; causal++)
            expect_match(&shapes[i], &(variant){.causal = causal}, 1e-11);
}

Test(attention, masks_match_the_composition)
{
    const dims d = {2, 2, 70, 75, 16, 24};
    for (int kind = 1; kind <= 3; kind++)
        expect_match(&d, &(variant){.mask = kind}, 1e-11);
}

Test(attention, dropout_replays_the_generator)
{
    const dims shapes[] = {{2, 2, 70, 70, 16, 16}, {1, 3, 33, 90, 32, 32}};
    for (int i = 0; i < 2; i++) {
        expect_match(&shapes[i], &(variant){.dropout_p = 0.3}, 1e-11);
        expect_match(&shapes[i], &(variant){.dropout_p = 0.5, .causal = true}, 1e-11);
        expect_match(&shapes[i], &(variant){.dropout_p = 0.2, .mask = 1}, 1e-11);
    }
}

/* The op itself by central differences: a generator reset before each call replays dropout. */
typedef struct {
    variant var;
    em_tensor *mask;
} fd_ctx;

static em_tensor *apply_fused(em_tensor *const *x, void *ctx)
{
    fd_ctx *c = ctx;
    em_generator g = em_generator_new(5);
    return fused(x[0], x[1], x[2], &c->var, c->mask, &g);
}

Test(attention, gradcheck_central_differences)
{
    const dims d = {1, 1, 66, 66, 4, 3}; /* 66 rows cross a tile */
    const variant vars[] = {{.causal = true}, {.dropout_p = 0.25}, {.mask = 2}};
    for (int i = 0; i < 3; i++) {
        fd_ctx c = {vars[i], make_mask(&d, vars[i].mask, 3)};
        em_tensor *x[3] = {em_gradcheck_leaf(EM_SHAPE(1, 1, d.lq, d.d), -1, 1, 10),
                           em_gradcheck_leaf(EM_SHAPE(1, 1, d.lk, d.d), -1, 1, 11),
                           em_gradcheck_leaf(EM_SHAPE(1, 1, d.lk, d.dv), -1, 1, 12)};
        cr_expect(em_test_gradcheck(apply_fused, &c, x, 3, 1e-6, 1e-6), "variant %d", i);
    }
}

static em_tensor *apply_with_learned_mask(em_tensor *const *x, void *ctx)
{
    (void)ctx;
    return em_scaled_dot_product_attention(x[0], x[1], x[2], (em_sdpa_opts){.attn_mask = x[3]});
}

/* A float mask that requires grad (a learned bias, broadcast over the batch and the queries'
 * heads) gets its gradient, as q, k and v do: f64 central differences */
Test(attention, a_learned_float_mask_passes_gradcheck)
{
    em_tensor *x[4] = {em_gradcheck_leaf(EM_SHAPE(2, 2, 5, 3), -1, 1, 20),
                       em_gradcheck_leaf(EM_SHAPE(2, 2, 4, 3), -1, 1, 21),
                       em_gradcheck_leaf(EM_SHAPE(2, 2, 4, 2), -1, 1, 22),
                       em_gradcheck_leaf(EM_SHAPE(1, 2, 1, 4), -1, 1, 23)};
    cr_expect(em_test_gradcheck(apply_with_learned_mask, NULL, x, 4, 1e-6, 1e-6));
}

/* q, k, v, out, grads (B, H, L, X) f32 arrays for calling the kernel paths directly */
typedef struct {
    em_tensor *t[9]; /* q k v out gout gq gk gv lse */
    em_arr a[9];
} kernel_args;

static kernel_args kernel_setup(const dims *d, uint64_t seed)
{
    kernel_args k;
    em_generator g = em_generator_new(seed);
    em_shape s[9] = {EM_SHAPE(d->b, d->h, d->lq, d->d), EM_SHAPE(d->b, d->h, d->lk, d->d),
                     EM_SHAPE(d->b, d->h, d->lk, d->dv), EM_SHAPE(d->b, d->h, d->lq, d->dv),
                     EM_SHAPE(d->b, d->h, d->lq, d->dv), EM_SHAPE(d->b, d->h, d->lq, d->d),
                     EM_SHAPE(d->b, d->h, d->lk, d->d), EM_SHAPE(d->b, d->h, d->lk, d->dv),
                     EM_SHAPE(d->b, d->h, d->lq)};
    for (int i = 0; i < 9; i++) {
        k.t[i] = em_normal(s[i], EM_F32, 0, 1.5, &g);
        k.a[i] = em_tensor_arr(k.t[i]);
    }
    return k;
}

Test(attention, avx2_and_portable_paths_agree)
{
    if (!em_cpu_has_avx2())
        cr_skip_test("no AVX2+FMA on this CPU");
    const dims shapes[] = {{2, 2, 67, 131, 24, 40}, {1, 3, 129, 129, 64, 64},
                           {1, 1, 3, 200, 128, 16}, {4, 4, 129, 129, 32, 32}};
    for (int i = 0; i < 4; i++)
        for (int causal = 0; causal < 2; causal++) {
            em_attention_params p = {.scale = 0.125, .causal = causal, .dropout_p = 0.1,
                                     .seed = 3, .offset = 100};
            kernel_args k[2] = {kernel_setup(&shapes[i], 9), kernel_setup(&shapes[i], 9)};
            for (int path = 0; path < 2; path++) {
                em_arr *a = k[path].a;
                cr_assert_eq(em_cpu_attention_path(path, &p, &a[0], &a[1], &a[2], NULL, &a[3],
                                                   &a[8]), EM_KERNEL_OK);
                cr_assert_eq(em_cpu_attention_grad_path(path, &p, &a[0], &a[1], &a[2], NULL,
                                                        &a[3], &a[8], &a[4], &a[5], &a[6],
                                                        &a[7]), EM_KERNEL_OK);
            }
            for (int t = 3; t < 9; t++)
                if (t != 4)
                    cr_expect(max_rel_diff(k[1].t[t], k[0].t[t]) < 2e-5,
                              "shape %d causal %d array %d: %g", i, causal, t,
                              max_rel_diff(k[1].t[t], k[0].t[t]));
        }
}

Test(attention, half_dtypes_follow_f32)
{
    const dims d = {1, 2, 70, 70, 32, 32};
    em_tensor *want[4];
    run(fused, &d, &(variant){.causal = true}, EM_F32, 3, want);
    em_dtype dts[2] = {EM_F16, EM_BF16};
    double tol[2] = {2e-2, 1e-1};
    for (int i = 0; i < 2; i++) {
        em_tensor *got[4];
        run(fused, &d, &(variant){.causal = true}, dts[i], 3, got);
        cr_expect_eq(got[0]->dtype, dts[i]);
        for (int j = 0; j < 4; j++)
            cr_expect(max_rel_diff(got[j], want[j]) < tol[i], "%s array %d: %g",
                      em_dtype_name(dts[i]), j, max_rel_diff(got[j], want[j]));
    }
}

Test(attention, a_row_that_sees_no_key_gives_zeros)
{
    em_tensor *q = em_requires_grad_(em_randn(EM_SHAPE(1, 1, 3, 4), EM_F64, NULL), true);
    em_tensor *k = em_requires_grad_(em_randn(EM_SHAPE(1, 1, 2, 4), EM_F64, NULL), true);
    em_tensor *v = em_requires_grad_(em_randn(EM_SHAPE(1, 1, 2, 4), EM_F64, NULL), true);
    bool keep[6] = {true, false, false, false, true, true}; /* row 1 sees nothing */
    em_tensor *mask = em_from_data(EM_SHAPE(3, 2), EM_BOOL, keep);
    em_tensor *y = em_scaled_dot_product_attention(q, k, v, (em_sdpa_opts){.attn_mask = mask});
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    for (int64_t x = 0; x < 4; x++) {
        cr_expect_eq(em_get(y, (int64_t[]){0, 0, 1, x}), 0.0);
        cr_expect_eq(em_get(q->grad, (int64_t[]){0, 0, 1, x}), 0.0);
        cr_expect(fabs(em_get(y, (int64_t[]){0, 0, 0, x}) - em_get(v, (int64_t[]){0, 0, 0, x}))
                  < 1e-15, "row 0 sees key 0 only");
    }
}

Test(attention, known_values)
{
    /* one head, q = [[1, 0]], k = [[1, 0], [0, 1]], v = [[1, 2], [3, 4]], scale 1:
     * weights softmax([1, 0]) = [e/(e+1), 1/(e+1)] */
    em_tensor *q = em_from_data(EM_SHAPE(1, 1, 1, 2), EM_F64, (double[]){1, 0});
    em_tensor *k = em_from_data(EM_SHAPE(1, 1, 2, 2), EM_F64, (double[]){1, 0, 0, 1});
    em_tensor *v = em_from_data(EM_SHAPE(1, 1, 2, 2), EM_F64, (double[]){1, 2, 3, 4});
    em_tensor *y = em_scaled_dot_product_attention(q, k, v, (em_sdpa_opts){.scale = 1});
    cr_assert_not_null(y, "%s", em_error());
    double w0 = M_E / (M_E + 1), w1 = 1 / (M_E + 1);
    cr_expect(fabs(em_get(y, (int64_t[]){0, 0, 0, 0}) - (w0 + 3 * w1)) < 1e-15);
    cr_expect(fabs(em_get(y, (int64_t[]){0, 0, 0, 1}) - (2 * w0 + 4 * w1)) < 1e-15);
}

static void expect_error(em_tensor *y, const char *needle)
{
    cr_expect_null(y);
    cr_expect(strstr(em_error(), needle), "error \"%s\" lacks \"%s\"", em_error(), needle);
    em_error_clear();
}

/* The packed op is em_scaled_dot_product_attention on q, k, v viewed out of qkv: the same bits
 * forward and backward, its gradient landing in one (B, T, 3E) tensor. */
Test(attention, packed_self_attention_is_sdpa_on_views_of_qkv)
{
    const int64_t b = 2, t = 9, e = 8, h = 2, d = e / h;
    em_generator gen = em_generator_new(3);
    em_tensor *qkv = em_requires_grad_(em_uniform(EM_SHAPE(b, t, 3 * e), EM_F32, -1, 1, &gen),
                                       true);
    em_tensor *qkv2 = em_requires_grad_(em_clone(em_detach(qkv)), true);
    em_tensor *y = em_self_attention_packed(qkv, h, (em_sdpa_opts){.is_causal = true});
    em_tensor *parts = em_view(qkv2, EM_SHAPE(b, t, 3, h, d)), *qkv_views[3];
    for (int i = 0; i < 3; i++)
        qkv_views[i] = em_permute(em_select(parts, 2, i), (int[]){0, 2, 1, 3});
    em_tensor *want = em_scaled_dot_product_attention(qkv_views[0], qkv_views[1], qkv_views[2],
                                                      (em_sdpa_opts){.is_causal = true});
    cr_assert(y && want, "%s", em_error());
    cr_assert_eq(y->shape[1], h);
    em_tensor *w = em_uniform(em_shape_of(y), EM_F32, -1, 1, &gen);
    cr_assert_eq(em_backward(em_sum_all(em_mul(y, w))), EM_OK, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(em_mul(want, w))), EM_OK, "%s", em_error());
    em_tensor *yc = em_contiguous(y), *wc = em_contiguous(want);
    cr_expect_eq(memcmp(em_data_ptr(yc), em_data_ptr(wc), sizeof(float) * em_numel(yc)), 0);
    cr_expect_eq(memcmp(em_data_ptr(qkv->grad), em_data_ptr(qkv2->grad),
                        sizeof(float) * em_numel(qkv)), 0, "the gradients differ");
    cr_assert_null(em_self_attention_packed(qkv, 3, (em_sdpa_opts){0}));
    cr_expect(strstr(em_error(), "em_self_attention_packed: qkv must be floating (B, T, 3 E) "
                                 "with E a multiple of 3 heads: f32 [2,9,24]"), "%s", em_error());
    em_error_clear();
}

Test(attention, bad_input_names_what_is_wrong)
{
    em_tensor *q = em_zeros(EM_SHAPE(2, 4, 8, 16), EM_F32);
    em_tensor *k = em_zeros(EM_SHAPE(2, 4, 8, 16), EM_F32);
    em_tensor *k32 = em_zeros(EM_SHAPE(2, 4, 8, 32), EM_F32);
    em_tensor *v = em_zeros(EM_SHAPE(2, 4, 9, 16), EM_F32);
    em_tensor *vd = em_zeros(EM_SHAPE(2, 4, 8, 16), EM_F64);
    expect_error(em_scaled_dot_product_attention(q, k32, k, (em_sdpa_opts){0}),
                 "q, k, v must be (B, H, Lq, D), (B, H, Lk, D) and (B, H, Lk, Dv): "
                 "[2,4,8,16], [2,4,8,32], [2,4,8,16]");
    expect_error(em_scaled_dot_product_attention(q, k, v, (em_sdpa_opts){0}), "[2,4,9,16]");
    expect_error(em_scaled_dot_product_attention(em_zeros(EM_SHAPE(8, 16), EM_F32), k, k,
                                                 (em_sdpa_opts){0}), "must be (B, H, Lq, D)");
    expect_error(em_scaled_dot_product_attention(q, k, vd, (em_sdpa_opts){0}),
                 "one floating dtype: f32, f32, f64");
    expect_error(em_scaled_dot_product_attention(q, k, k, (em_sdpa_opts){.dropout_p = 1}),
                 "dropout_p in [0, 1)");
    em_tensor *mask = em_ones(EM_SHAPE(8, 8), EM_BOOL);
    expect_error(em_scaled_dot_product_attention(q, k, k, (em_sdpa_opts){
                     .attn_mask = mask, .is_causal = true}), "not both");
    expect_error(em_scaled_dot_product_attention(q, k, k, (em_sdpa_opts){
                     .attn_mask = em_ones(EM_SHAPE(3, 8, 8), EM_BOOL)}),
                 "attn_mask [3,8,8] does not broadcast to (B, H, Lq, Lk)");
    expect_error(em_scaled_dot_product_attention(q, k, k, (em_sdpa_opts){
                     .attn_mask = em_ones(EM_SHAPE(8, 8), EM_I32)}), "bool or floating, not i32");
    expect_error(em_scaled_dot_product_attention(NULL, k, k, (em_sdpa_opts){0}), "");
}
