/* Gradient checks (central differences, f64) for the elementwise ops: every unary function,
 * broadcasting binary arithmetic, where, and dtype casts; on contiguous, permuted and sliced
 * inputs. */
#include <criterion/criterion.h>
#include <math.h>

#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(grad_elementwise, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    const char *name;
    em_tensor *(*f)(const em_tensor *);
    double lo, hi;
} unary_case;

static em_tensor *leaky(const em_tensor *t) { return em_leaky_relu(t, 0.1); }
static em_tensor *gelu_erf(const em_tensor *t) { return em_gelu(t, false); }
static em_tensor *gelu_tanh(const em_tensor *t) { return em_gelu(t, true); }
static em_tensor *clamp(const em_tensor *t) { return em_clamp(t, -0.5, 0.5); }
static em_tensor *clamp_lo(const em_tensor *t) { return em_clamp(t, -0.3, INFINITY); }
static em_tensor *add_s(const em_tensor *t) { return em_add_scalar(t, 1.5); }
static em_tensor *mul_s(const em_tensor *t) { return em_mul_scalar(t, -2.5); }
static em_tensor *pow_3(const em_tensor *t) { return em_pow_scalar(t, 3.0); }
static em_tensor *pow_frac(const em_tensor *t) { return em_pow_scalar(t, 2.5); }
static em_tensor *cast_round_trip(const em_tensor *t)
{
    return em_mul(em_to_dtype(t, EM_F64), t);
}

static const unary_case unary_cases[] = {
    {"neg", em_neg, -1, 1},          {"abs", em_abs, -1, 1},
    {"exp", em_exp, -1, 1},          {"log", em_log, 0.5, 2},
    {"log1p", em_log1p, 0, 1},       {"sqrt", em_sqrt, 0.5, 2},
    {"rsqrt", em_rsqrt, 0.5, 2},     {"square", em_square, -1, 1},
    {"reciprocal", em_reciprocal, 0.5, 2}, {"sin", em_sin, -2, 2},
    {"cos", em_cos, -2, 2},          {"tanh", em_tanh, -2, 2},
    {"sigmoid", em_sigmoid, -3, 3},  {"relu", em_relu, -1, 1},
    {"leaky_relu", leaky, -1, 1},    {"gelu", gelu_erf, -2, 2},
    {"gelu_tanh", gelu_tanh, -2, 2}, {"silu", em_silu, -2, 2},
    {"clamp", clamp, -1, 1},         {"clamp_lo", clamp_lo, -1, 1},
    {"add_scalar", add_s, -1, 1},    {"mul_scalar", mul_s, -1, 1},
    {"pow_scalar", pow_3, -1, 1},    {"pow_scalar_frac", pow_frac, 0.5, 2},
    {"to_dtype", cast_round_trip, -1, 1},
};

static em_tensor *apply_unary(em_tensor *const *x, void *ctx)
{
    return ((const unary_case *)ctx)->f(x[0]);
}

/* the op applied to a permuted view (2, 3, 4) -> (4, 2, 3) */
static em_tensor *apply_unary_permuted(em_tensor *const *x, void *ctx)
{
    return ((const unary_case *)ctx)->f(em_permute(x[0], (int[]){2, 0, 1}));
}

/* the op applied to a strided slice: every second row */
static em_tensor *apply_unary_sliced(em_tensor *const *x, void *ctx)
{
    return ((const unary_case *)ctx)->f(em_slice(x[0], 0, 1, 6, 2));
}

Test(grad_elementwise, unary_all)
{
    for (size_t i = 0; i < sizeof unary_cases / sizeof unary_cases[0]; i++) {
        const unary_case *c = &unary_cases[i];
        em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3, 4), c->lo, c->hi, 100 + i);
        cr_expect(em_gradcheck_default(apply_unary, (void *)c, &x, 1), "%s contiguous", c->name);
        cr_expect(em_gradcheck_default(apply_unary_permuted, (void *)c, &x, 1), "%s permuted",
                  c->name);
        em_release(x);
        em_tensor *y = em_gradcheck_leaf(EM_SHAPE(6, 3), c->lo, c->hi, 200 + i);
        cr_expect(em_gradcheck_default(apply_unary_sliced, (void *)c, &y, 1), "%s sliced",
                  c->name);
        em_release(y);
    }
    cr_expect_str_empty(em_error());
}

Test(grad_elementwise, piecewise_constant_ops_have_zero_grad)
{
    em_tensor *(*fs[])(const em_tensor *) = {em_sign, em_floor, em_ceil, em_round};
    for (int i = 0; i < 4; i++) {
        em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3, 2), -3, 3, 7);
        em_tensor *y = em_sum_all(fs[i](x));
        cr_assert_eq(em_backward(y), EM_OK, "%s", em_error());
        for (int64_t k = 0; k < 6; k++)
            cr_expect_eq(em_get(x->grad, (int64_t[]){k / 2, k % 2}), 0.0);
        em_release(y);
        em_release(x);
    }
}

typedef em_tensor *(*binary_fn)(const em_tensor *, const em_tensor *);

typedef struct {
    const char *name;
    binary_fn f;
    double alo, ahi, blo, bhi;
} binary_case;

static const binary_case binary_cases[] = {
    {"add", em_add, -1, 1, -1, 1},        {"sub", em_sub, -1, 1, -1, 1},
    {"mul", em_mul, -1, 1, -1, 1},        {"div", em_div, -1, 1, 0.5, 2},
    {"pow", em_pow, 0.5, 2, -1.5, 1.5},   {"maximum", em_maximum, -1, 1, -1, 1},
    {"minimum", em_minimum, -1, 1, -1, 1},
};

static em_tensor *apply_binary(em_tensor *const *x, void *ctx)
{
    return ((const binary_case *)ctx)->f(x[0], x[1]);
}

/* a (4, 3) seen transposed as (3, 4), b (5, 1, 1) sliced to every second of 3 planes */
static em_tensor *apply_binary_views(em_tensor *const *x, void *ctx)
{
    return ((const binary_case *)ctx)->f(em_transpose(x[0], 0, 1), em_slice(x[1], 0, 0, 5, 2));
}

Test(grad_elementwise, binary_broadcast)
{
    for (size_t i = 0; i < sizeof binary_cases / sizeof binary_cases[0]; i++) {
        const binary_case *c = &binary_cases[i];
        em_tensor *x[2] = {em_gradcheck_leaf(EM_SHAPE(3, 1, 4), c->alo, c->ahi, 10 + i),
                           em_gradcheck_leaf(EM_SHAPE(5, 1), c->blo, c->bhi, 20 + i)};
        cr_expect(em_gradcheck_default(apply_binary, (void *)c, x, 2), "%s (3,1,4)+(5,1)",
                  c->name);
        em_release(x[0]);
        em_release(x[1]);
        em_tensor *y[2] = {em_gradcheck_leaf(EM_SHAPE(4, 3), c->alo, c->ahi, 30 + i),
                           em_gradcheck_leaf(EM_SHAPE(5, 1, 1), c->blo, c->bhi, 40 + i)};
        cr_expect(em_gradcheck_default(apply_binary_views, (void *)c, y, 2), "%s views",
                  c->name);
        em_release(y[0]);
        em_release(y[1]);
        em_tensor *z[2] = {em_gradcheck_leaf(EM_SHAPE(2, 3), c->alo, c->ahi, 50 + i),
                           em_gradcheck_leaf(EM_SHAPE(2, 3), c->blo, c->bhi, 60 + i)};
        cr_expect(em_gradcheck_default(apply_binary, (void *)c, z, 2), "%s same shape",
                  c->name);
        em_release(z[0]);
        em_release(z[1]);
    }
}

Test(grad_elementwise, binary_one_side_needs_grad)
{
    em_tensor *x[2] = {em_gradcheck_leaf(EM_SHAPE(2, 3), -1, 1, 1),
                       em_requires_grad_(em_gradcheck_leaf(EM_SHAPE(3), 0.5, 2, 2), false)};
    const binary_case *c = &binary_cases[3];
    cr_expect(em_gradcheck_default(apply_binary, (void *)c, x, 2));
    cr_expect_null(x[1]->grad);
    em_release(x[0]);
    em_release(x[1]);
}

Test(grad_elementwise, maximum_ties_split_evenly)
{
    em_tensor *a = em_requires_grad_(em_from_data(EM_SHAPE(3), EM_F64, (double[]){1, 2, 3}), true);
    em_tensor *b = em_requires_grad_(em_from_data(EM_SHAPE(3), EM_F64, (double[]){0, 2, 5}), true);
    em_tensor *y = em_sum_all(em_maximum(a, b));
    cr_assert_eq(em_backward(y), EM_OK, "%s", em_error());
    double ga[3], gb[3];
    em_copy_to_host(a->grad, EM_F64, ga);
    em_copy_to_host(b->grad, EM_F64, gb);
    cr_expect_eq(ga[0], 1.0);
    cr_expect_eq(ga[1], 0.5);
    cr_expect_eq(ga[2], 0.0);
    cr_expect_eq(gb[0], 0.0);
    cr_expect_eq(gb[1], 0.5);
    cr_expect_eq(gb[2], 1.0);
    em_release(y);
    em_release(a);
    em_release(b);
}

static em_tensor *scalar_adapts(em_tensor *const *x, void *ctx)
{
    (void)ctx;
    /* a 0-d f32 operand takes the f64 operand's dtype */
    em_scope_begin();
    em_tensor *s = em_scalar(2.0, EM_F32);
    em_tensor *y = em_keep(em_mul(em_add(x[0], s), s));
    em_scope_end();
    return y;
}

Test(grad_elementwise, zero_dim_operand_adapts_dtype)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 2), -1, 1, 3);
    cr_expect(em_gradcheck_default(scalar_adapts, NULL, &x, 1));
    em_release(x);
}

typedef struct {
    em_tensor *cond; /* bool (3, 4) */
} where_ctx;

static em_tensor *apply_where(em_tensor *const *x, void *ctx)
{
    return em_where(((where_ctx *)ctx)->cond, x[0], x[1]);
}

Test(grad_elementwise, where_broadcast)
{
    bool cv[12] = {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0};
    where_ctx c = {em_from_data(EM_SHAPE(3, 4), EM_BOOL, cv)};
    em_tensor *x[2] = {em_gradcheck_leaf(EM_SHAPE(3, 4), -1, 1, 4),
                       em_gradcheck_leaf(EM_SHAPE(4), -1, 1, 5)};
    cr_expect(em_gradcheck_default(apply_where, &c, x, 2));
    em_release(x[0]);
    em_release(x[1]);
    em_release(c.cond);
}

Test(grad_elementwise, to_dtype_grad_comes_back_in_input_dtype)
{
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(2), EM_F32, (float[]){1, 2}), true);
    em_tensor *y = em_sum_all(em_mul_scalar(em_to_dtype(x, EM_F64), 3.0));
    cr_assert_eq(em_backward(y), EM_OK, "%s", em_error());
    cr_assert_not_null(x->grad);
    cr_expect_eq(x->grad->dtype, EM_F32);
    float g[2];
    em_copy_to_host(x->grad, EM_F32, g);
    cr_expect_eq(g[0], 3.0f);
    cr_expect_eq(g[1], 3.0f);
    em_release(y);
    em_release(x);
}

/* got equals want, where inf and NaN count as values */
static void expect_same(double got, double want, const char *what, int i)
{
    if (isnan(want) || isinf(want))
        cr_expect(isnan(want) ? isnan(got) : got == want, "%s[%d] %g, want %g", what, i, got, want);
    else
        cr_expect_float_eq(got, want, 1e-12, "%s[%d] %g, want %g", what, i, got, want);
}

/* pow at a = 0 and b = 0: PyTorch 1.13's values (torch.pow on these f64 tensors, backward of
 * ones): d/da is 0 where b = 0, d/db is 0 where a = 0 and b >= 0; inf and NaN elsewhere as
 * PyTorch gives them. */
Test(grad_elementwise, pow_at_zero_matches_pytorch)
{
    const double av[6] = {0, 0, 0, 2, -2, 0}, bv[6] = {2, 0, -1, 0.5, 3, 0.5};
    const double ga_torch[6] = {0, 0, -INFINITY, 0.3535533905932738, 12, INFINITY};
    const double gb_torch[6] = {0, 0, -INFINITY, 0.9802581434685472, NAN, 0};
    em_tensor *a = em_requires_grad_(em_from_data(EM_SHAPE(6), EM_F64, av), true);
    em_tensor *b = em_requires_grad_(em_from_data(EM_SHAPE(6), EM_F64, bv), true);
    cr_assert_eq(em_backward(em_sum_all(em_pow(a, b))), EM_OK, "%s", em_error());
    double ga[6], gb[6];
    em_copy_to_host(a->grad, EM_F64, ga);
    em_copy_to_host(b->grad, EM_F64, gb);
    for (int i = 0; i < 6; i++) {
        expect_same(ga[i], ga_torch[i], "d/da", i);
        expect_same(gb[i], gb_torch[i], "d/db", i);
    }
    em_release(a);
    em_release(b);
}
