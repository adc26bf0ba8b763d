/* Autocast: matmul, bmm, linear, conv2d and conv_transpose2d run in f16/bf16 and match f32
 * within the rounding bound; softmax, reductions, exp/log and losses come out f32; mixed binary
 * ops, cat, stack and the other ops of several inputs promote; f32 leaves get f32 gradients
 * matching an f32 run; regions nest; outside them nothing changes; an MLP's graph holds about
 * half the bytes besides the low-precision copies of its weights and input that backward
 * multiplies with. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "nn/nn.h"

static void setup(void)
{
    em_error_clear();
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
    cr_expect_eq(em_autocast_dtype(), EM_F32, "a test left autocast on");
}

TestSuite(autocast, .init = setup, .fini = teardown);

/* Unit roundoff of a half dtype: 2^-8 for bf16 (8 significand bits), 2^-11 for f16. */
static double roundoff(em_dtype dt)
{
    return dt == EM_BF16 ? 0x1p-8 : 0x1p-11;
}

static double *host(const em_tensor *t)
{
    cr_assert_not_null(t, "%s", em_error());
    double *v = malloc((size_t)em_numel(t) * sizeof *v);
    cr_assert_eq(em_copy_to_host(t, EM_F64, v), EM_OK, "%s", em_error());
    return v;
}

/* |got - want| <= bound[i] elementwise (both as f64 on the host) */
static void expect_within(const em_tensor *got, const em_tensor *want, const double *bound,
                          const char *what)
{
    cr_assert_eq(em_numel(got), em_numel(want));
    double *g = host(got), *w = host(want);
    for (int64_t i = 0; i < em_numel(got); i++)
        cr_assert(fabs(g[i] - w[i]) <= bound[i], "%s element %lld: %.8g vs f32 %.8g (bound %.3g)",
                  what, (long long)i, g[i], w[i], bound[i]);
    free(g);
    free(w);
}

/* The error bound of a half-precision product with f32 accumulation against f32:
 * inputs rounded (2u each) and the output rounded (u), so 3u * sum |a||b| + slack; absab holds
 * sum_k |a_ik||b_kj| per output element. */
static double *product_bound(const em_tensor *absab, em_dtype dt)
{
    double *b = host(absab);
    for (int64_t i = 0; i < em_numel(absab); i++)
        b[i] = 3 * roundoff(dt) * b[i] + 1e-6;
    return b;
}

static void linear_case(em_dtype low)
{
    em_generator gen = em_generator_new(1);
    em_tensor *x = em_requires_grad_(em_uniform(EM_SHAPE(8, 32), EM_F32, -1, 1, &gen), true);
    em_tensor *w = em_requires_grad_(em_uniform(EM_SHAPE(16, 32), EM_F32, -1, 1, &gen), true);
    em_tensor *b = em_requires_grad_(em_uniform(EM_SHAPE(16), EM_F32, -1, 1, &gen), true);
    em_tensor *ref = em_linear(x, w, b);
    cr_assert_eq(em_autocast_begin(low), EM_OK);
    em_tensor *y = em_linear(x, w, b);
    cr_assert_eq(em_autocast_end(), EM_OK);
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->dtype, low, "linear ran in %s", em_dtype_name(y->dtype));
    double *bound = product_bound(em_add(em_linear(em_abs(x), em_abs(w), NULL), em_abs(b)), low);
    expect_within(y, ref, bound, "linear");
    free(bound);

    /* d sum(y) / dw[o][i] = sum_n x[n][i], d/db = N: f32 grads on the f32 master weights */
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    cr_assert_not_null(w->grad);
    cr_expect_eq(w->grad->dtype, EM_F32);
    cr_expect_eq(b->grad->dtype, EM_F32);
    em_tensor *want_gw = em_expand(em_sum(x, (int[]){0}, 1, true), EM_SHAPE(16, 32));
    em_tensor *gw_bound = em_mul_scalar(em_expand(em_sum(em_abs(x), (int[]){0}, 1, true),
                                                  EM_SHAPE(16, 32)), 3 * roundoff(low));
    double *gw_b = host(gw_bound);
    expect_within(w->grad, want_gw, gw_b, "grad w");
    free(gw_b);
    /* d sum(y) / dx[n][i] = sum_o w[o][i] */
    cr_expect_eq(x->grad->dtype, EM_F32);
    em_tensor *want_gx = em_expand(em_sum(w, (int[]){0}, 1, true), EM_SHAPE(8, 32));
    em_tensor *gx_bound = em_mul_scalar(em_expand(em_sum(em_abs(w), (int[]){0}, 1, true),
                                                  EM_SHAPE(8, 32)), 3 * roundoff(low));
    double *gx_b = host(gx_bound);
    expect_within(x->grad, want_gx, gx_b, "grad x");
    free(gx_b);
    double *gb = host(b->grad);
    for (int i = 0; i < 16; i++)
        cr_expect_eq(gb[i], 8.0, "grad b[%d] = %g", i, gb[i]);
    free(gb);
}

Test(autocast, linear_bf16_matches_f32_and_grads_reach_f32_leaves) { linear_case(EM_BF16); }
Test(autocast, linear_f16_matches_f32_and_grads_reach_f32_leaves) { linear_case(EM_F16); }

Test(autocast, matmul_and_bmm_run_low)
{
    em_generator gen = em_generator_new(2);
    em_tensor *a = em_uniform(EM_SHAPE(3, 5, 24), EM_F32, -1, 1, &gen);
    em_tensor *b = em_uniform(EM_SHAPE(24, 7), EM_F32, -1, 1, &gen);
    em_tensor *c = em_uniform(EM_SHAPE(3, 24, 7), EM_F32, -1, 1, &gen);
    em_dtype lows[2] = {EM_F16, EM_BF16};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(em_autocast_begin(lows[k]), EM_OK);
        em_tensor *y = em_matmul(a, b), *z = em_bmm(a, c);
        em_autocast_end();
        cr_assert_not_null(y, "%s", em_error());
        cr_assert_not_null(z, "%s", em_error());
        cr_expect_eq(y->dtype, lows[k]);
        cr_expect_eq(z->dtype, lows[k]);
        double *by = product_bound(em_matmul(em_abs(a), em_abs(b)), lows[k]);
        double *bz = product_bound(em_bmm(em_abs(a), em_abs(c)), lows[k]);
        expect_within(y, em_matmul(a, b), by, "matmul");
        expect_within(z, em_bmm(a, c), bz, "bmm");
        free(by);
        free(bz);
    }
}

/* A convolution y = conv(x, w, b) (b (C_out) added per channel), in f32 and under each low
 * autocast dtype: y comes out low within the product's rounding bound, and the f32 leaves x and
 * w get f32 gradients while w stays a leaf. */
typedef em_tensor *(*conv_fn)(const em_tensor *x, const em_tensor *w, const em_tensor *b);

static void check_conv_low(conv_fn conv, const char *name, em_tensor *x, em_tensor *w,
                           const em_tensor *b)
{
    em_tensor *ref = conv(x, w, b);
    em_dtype lows[2] = {EM_F16, EM_BF16};
    for (int k = 0; k < 2; k++) {
        em_zero_grad(w);
        em_zero_grad(x);
        cr_assert_eq(em_autocast_begin(lows[k]), EM_OK);
        em_tensor *y = conv(x, w, b);
        em_tensor *loss = em_sum_all(y);
        em_autocast_end();
        cr_assert_not_null(loss, "%s: %s", name, em_error());
        cr_expect_eq(y->dtype, lows[k], "%s", name);
        cr_expect_eq(loss->dtype, EM_F32, "sum runs in f32");
        em_tensor *abs_y = em_add(conv(em_abs(x), em_abs(w), NULL),
                                  em_reshape(em_abs(b), EM_SHAPE(1, b->shape[0], 1, 1)));
        double *bound = product_bound(abs_y, lows[k]);
        expect_within(y, ref, bound, name);
        free(bound);
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        cr_expect_eq(w->grad->dtype, EM_F32, "%s", name);
        cr_expect_eq(x->grad->dtype, EM_F32, "%s", name);
        cr_expect_eq(w->requires_grad && !w->node, true, "%s: w stays an f32 leaf", name);
    }
}

static em_tensor *conv2d_padded(const em_tensor *x, const em_tensor *w, const em_tensor *b)
{
    return em_conv2d(x, w, b, (em_conv2d_opts){.padding = {1, 1}});
}

static em_tensor *conv_transpose2d_strided(const em_tensor *x, const em_tensor *w,
                                           const em_tensor *b)
{
    return em_conv_transpose2d(x, w, b, (em_conv_transpose2d_opts){
        .stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}});
}

Test(autocast, convolutions_run_low_and_grads_are_f32)
{
    em_generator gen = em_generator_new(3);
    em_tensor *x = em_requires_grad_(em_uniform(EM_SHAPE(2, 3, 6, 6), EM_F32, -1, 1, &gen), true);
    em_tensor *w = em_requires_grad_(em_uniform(EM_SHAPE(4, 3, 3, 3), EM_F32, -1, 1, &gen), true);
    check_conv_low(conv2d_padded, "conv2d", x, w, em_uniform(EM_SHAPE(4), EM_F32, -1, 1, &gen));
    gen = em_generator_new(5);
    x = em_requires_grad_(em_uniform(EM_SHAPE(2, 4, 5, 5), EM_F32, -1, 1, &gen), true);
    w = em_requires_grad_(em_uniform(EM_SHAPE(4, 3, 3, 3), EM_F32, -1, 1, &gen), true);
    check_conv_low(conv_transpose2d_strided, "conv_transpose2d", x, w,
                   em_uniform(EM_SHAPE(3), EM_F32, -1, 1, &gen));
}

Test(autocast, f32_ops_and_losses_come_out_f32)
{
    em_generator gen = em_generator_new(4);
    em_tensor *h = em_to_dtype(em_uniform(EM_SHAPE(6, 5), EM_F32, 0.5, 2, &gen), EM_BF16);
    em_tensor *target = em_from_data(EM_SHAPE(6), EM_I64, (int64_t[]){0, 1, 2, 3, 4, 0});
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *outs[] = {em_softmax(h, 1), em_log_softmax(h, -1), em_exp(h), em_log(h),
                         em_sum_all(h), em_mean(h, (int[]){1}, 1, false),
                         em_var(h, NULL, 0, 1, false), em_rsqrt(h),
                         em_cross_entropy(h, target, (em_cross_entropy_opts){0}),
                         em_mse_loss(h, em_zeros(EM_SHAPE(6, 5), EM_BF16), EM_REDUCTION_MEAN)};
    em_tensor *kept_low[] = {em_relu(h), em_amax(h, NULL, 0, false), em_mul(h, h)};
    em_autocast_end();
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        cr_assert_not_null(outs[i], "%s", em_error());
        cr_expect_eq(outs[i]->dtype, EM_F32, "f32-policy op %zu gave %s", i,
                     em_dtype_name(outs[i]->dtype));
    }
    for (size_t i = 0; i < sizeof kept_low / sizeof *kept_low; i++)
        cr_expect_eq(kept_low[i]->dtype, EM_BF16, "op %zu should stay bf16", i);
    /* the f32 results are those of the f32 op on the bf16 values, exactly */
    em_tensor *h32 = em_to_dtype(h, EM_F32);
    em_tensor *ce = em_cross_entropy(h32, target, (em_cross_entropy_opts){0});
    cr_expect_eq(em_item(outs[8]), em_item(ce));
    cr_expect_eq(em_item(outs[4]), em_item(em_sum_all(h32)));
}

Test(autocast, mixed_binary_ops_promote_inside_only)
{
    em_tensor *lo = em_full(EM_SHAPE(2, 3), EM_BF16, 1.5);
    em_tensor *hi = em_full(EM_SHAPE(2, 3), EM_F32, 0.25);
    em_tensor *h16 = em_full(EM_SHAPE(2, 3), EM_F16, 2.0);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *s = em_add(lo, hi), *t = em_mul(h16, lo);
    em_tensor *w = em_where(em_gt(hi, lo), lo, hi);
    em_autocast_end();
    cr_assert_not_null(s, "%s", em_error());
    cr_expect_eq(s->dtype, EM_F32);
    cr_expect_eq(em_get(s, (int64_t[]){1, 2}), 1.75);
    cr_expect_eq(t->dtype, EM_F32, "f16 with bf16 promotes to f32");
    cr_expect_eq(em_get(t, (int64_t[]){0, 0}), 3.0);
    cr_expect_eq(w->dtype, EM_F32);
    em_error_clear();
    cr_expect_null(em_add(lo, hi), "outside a region mixed dtypes stay an error");
    cr_expect(strstr(em_error(), "dtypes differ"), "%s", em_error());
}

/* cat and stack, and the other ops that take several tensors, follow the binary ops' rule:
 * inside a region float dtypes promote to the widest, each input's gradient coming back in its
 * own dtype; outside, mixed dtypes are an error that says so, naming the op. Values from
 * PyTorch 2.15: a = tensor([[.1, .2, .3], [.4, .5, .6]]).bfloat16(), b = tensor([[1.1, 1.2,
 * 1.3]]); under torch.autocast('cpu', torch.bfloat16), cat([a, b]) is f32 holding a's bf16
 * values and b's; (cat([a, b]) * tensor([1., 2., 3.])).sum().backward() gives a a bf16 gradient
 * and b an f32 one, both [1, 2, 3] per row. */
Test(autocast, cat_stack_and_other_multi_input_ops_promote_like_binary_ops)
{
    em_tensor *a = em_requires_grad_(em_to_dtype(em_from_data(EM_SHAPE(2, 3), EM_F32, (float[]){
        0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}), EM_BF16), true);
    em_tensor *b = em_requires_grad_(em_from_data(EM_SHAPE(1, 3), EM_F32,
                                                  (float[]){1.1f, 1.2f, 1.3f}), true);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *y = em_cat((em_tensor *[]){a, b}, 2, 0);
    em_tensor *st = em_stack((em_tensor *[]){em_select(a, 0, 0), em_select(b, 0, 0)}, 2, 1);
    em_tensor *o = em_outer(em_select(a, 0, 0), em_select(b, 0, 0));
    em_tensor *idx = em_from_data(EM_SHAPE(1, 3), EM_I64, (int64_t[]){1, 0, 1});
    em_tensor *sa = em_scatter_add(a, 0, idx, b);
    em_tensor *ip = em_index_put(b, (em_tensor *[]){em_from_data(EM_SHAPE(1), EM_I64,
                                                                 (int64_t[]){0})},
                                 1, em_narrow(a, 0, 1, 1), false);
    em_tensor *e = em_einsum("ij,kj->ik", (em_tensor *[]){a, b}, 2);
    em_tensor *mm = em_addmm(em_narrow(em_select(a, 0, 0), 0, 0, 2), b, em_transpose(a, 0, 1), 1,
                             1);
    em_autocast_end();
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->dtype, EM_F32);
    const double want[9] = {0.10009765625, 0.2001953125, 0.30078125, 0.400390625, 0.5,
                            0.6015625, 1.100000023841858, 1.2000000476837158, 1.2999999523162842};
    double *v = host(y);
    for (int i = 0; i < 9; i++)
        cr_expect_eq(v[i], want[i], "element %d: %.17g, PyTorch %.17g", i, v[i], want[i]);
    free(v);
    cr_assert_not_null(st, "%s", em_error());
    cr_expect(st->dtype == EM_F32 && st->shape[0] == 3 && st->shape[1] == 2);
    cr_expect(o && o->dtype == EM_F32, "outer promotes as mul does");
    cr_expect(sa && sa->dtype == EM_F32 && em_get(sa, (int64_t[]){1, 0}) == (float)(0.400390625f + 1.1f),
              "scatter_add promotes self and src");
    cr_expect(ip && ip->dtype == EM_F32 && em_get(ip, (int64_t[]){0, 2}) == 0.6015625,
              "index_put promotes self and values");
    cr_expect(e && e->dtype == EM_BF16, "einsum runs low, as matmul does");
    cr_expect(mm && mm->dtype == EM_BF16, "addmm runs low");
    em_tensor *w = em_from_data(EM_SHAPE(3), EM_F32, (float[]){1, 2, 3});
    cr_assert_eq(em_backward(em_sum_all(em_mul(y, w))), EM_OK, "%s", em_error());
    cr_expect_eq(a->grad->dtype, EM_BF16, "a's gradient comes back in its own dtype");
    cr_expect_eq(b->grad->dtype, EM_F32);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(em_get(a->grad, (int64_t[]){i / 3, i % 3}), i % 3 + 1);
    cr_expect_eq(em_get(b->grad, (int64_t[]){0, 2}), 3);

    cr_expect_null(em_cat((em_tensor *[]){a, b}, 2, 0), "outside a region: an error");
    cr_expect_str_eq(em_error(), "em_cat: dtypes differ: tensor 0 (bf16 [2,3]) and tensor 1 "
                                 "(f32 [1,3])");
    em_error_clear();
    cr_expect_null(em_stack((em_tensor *[]){b, a}, 2, 0));
    cr_expect_str_eq(em_error(), "em_stack: tensor 1 is [2,3], tensor 0 is [1,3]");
    em_error_clear();
    cr_expect_null(em_stack((em_tensor *[]){em_narrow(a, 0, 0, 1), b}, 2, 0));
    cr_expect_str_eq(em_error(), "em_stack: dtypes differ: tensor 0 (bf16 [1,3]) and tensor 1 "
                                 "(f32 [1,3])");
    em_error_clear();
    cr_expect_null(em_outer(em_select(a, 0, 0), em_select(b, 0, 0)));
    cr_expect_str_eq(em_error(), "em_outer: dtypes differ: a bf16 [3] and b f32 [3]");
    em_error_clear();
}

Test(autocast, regions_nest_and_f32_opens_a_hole)
{
    em_tensor *x = em_ones(EM_SHAPE(2, 4), EM_F32), *w = em_ones(EM_SHAPE(3, 4), EM_F32);
    cr_expect_eq(em_autocast_dtype(), EM_F32);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    cr_expect_eq(em_linear(x, w, NULL)->dtype, EM_BF16);
    cr_assert_eq(em_autocast_begin(EM_F16), EM_OK);
    cr_expect_eq(em_autocast_dtype(), EM_F16);
    cr_expect_eq(em_linear(x, w, NULL)->dtype, EM_F16);
    cr_assert_eq(em_autocast_begin(EM_F32), EM_OK);
    cr_expect_eq(em_linear(x, w, NULL)->dtype, EM_F32);
    cr_expect_eq(em_autocast_end(), EM_OK);
    cr_expect_eq(em_linear(x, w, NULL)->dtype, EM_F16);
    cr_expect_eq(em_autocast_end(), EM_OK);
    cr_expect_eq(em_linear(x, w, NULL)->dtype, EM_BF16);
    cr_expect_eq(em_autocast_end(), EM_OK);
    cr_expect_eq(em_autocast_dtype(), EM_F32);
    cr_expect_eq(em_linear(x, w, NULL)->dtype, EM_F32);
    em_error_clear();
    cr_expect_eq(em_autocast_end(), EM_ERR_STATE);
    em_error_clear();
    cr_expect_eq(em_autocast_begin(EM_I8), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "em_autocast_begin: dtype must be f16, bf16 or f32"), "%s",
              em_error());
    cr_expect_eq(em_autocast_dtype(), EM_F32);
}

Test(autocast, outside_a_region_nothing_changes)
{
    em_tensor *h = em_full(EM_SHAPE(2, 3), EM_BF16, 0.5);
    cr_expect_eq(em_softmax(h, 1)->dtype, EM_BF16);
    cr_expect_eq(em_sum_all(h)->dtype, EM_BF16);
    cr_expect_eq(em_exp(h)->dtype, EM_BF16);
    em_tensor *x = em_ones(EM_SHAPE(2, 4), EM_F32), *w = em_ones(EM_SHAPE(3, 4), EM_F32);
    em_tensor *y = em_linear(x, w, NULL);
    cr_expect_eq(y->dtype, EM_F32);
    cr_expect_null(y->node, "no cast nodes appear outside a region");
}

/* A 784-64-10-like MLP (smaller) with cross-entropy; grads of each parameter. */
static em_module *small_mlp(void)
{
    em_manual_seed(11);
    /* made one at a time, the last first: an argument list has no order of evaluation (GCC
     * goes right to left, clang left to right), and these are the weights the tolerances below
     * were set on */
    em_module *out = em_linear_layer(32, 5, true);
    em_module *hidden = em_linear_layer(32, 32, true);
    em_module *in = em_linear_layer(20, 32, true);
    return em_sequential(5, in, em_relu_layer(), hidden, em_gelu_layer(false), out);
}

static void mlp_grads(em_module *net, em_dtype low, const em_tensor *x, const em_tensor *y,
                      double *out_loss, em_tensor **grads)
{
    em_module_zero_grad(net);
    if (low != EM_F32)
        cr_assert_eq(em_autocast_begin(low), EM_OK);
    em_tensor *loss = em_cross_entropy(em_forward(net, x), y, (em_cross_entropy_opts){0});
    if (low != EM_F32)
        em_autocast_end();
    cr_assert_not_null(loss, "%s", em_error());
    cr_expect_eq(loss->dtype, EM_F32);
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    *out_loss = em_item(loss);
    em_param_ref p[6];
    cr_assert_eq(em_module_parameters(net, p, 6), 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(p[i].value->grad->dtype, EM_F32, "%s grad", p[i].name);
        grads[i] = em_clone(p[i].value->grad);
    }
}

Test(autocast, mlp_gradients_match_f32_within_half_tolerance)
{
    em_module *net = small_mlp();
    em_generator gen = em_generator_new(5);
    em_tensor *x = em_randn(EM_SHAPE(16, 20), EM_F32, &gen);
    em_tensor *y = em_randint(EM_SHAPE(16), EM_I64, 0, 5, &gen);
    double loss32, loss_low;
    em_tensor *g32[6], *glow[6];
    mlp_grads(net, EM_F32, x, y, &loss32, g32);
    em_dtype lows[2] = {EM_BF16, EM_F16};
    for (int k = 0; k < 2; k++) {
        mlp_grads(net, lows[k], x, y, &loss_low, glow);
        /* bf16: ~3 significant digits through three layers; f16 eight times finer */
        double tol = lows[k] == EM_BF16 ? 0.03 : 0.004;
        cr_expect(fabs(loss_low - loss32) <= tol * fabs(loss32), "%s loss %g vs %g",
                  em_dtype_name(lows[k]), loss_low, loss32);
        for (int i = 0; i < 6; i++) {
            double *a = host(glow[i]), *b = host(g32[i]), amax = 0, dmax = 0;
            for (int64_t j = 0; j < em_numel(glow[i]); j++) {
                amax = fmax(amax, fabs(b[j]));
                dmax = fmax(dmax, fabs(a[j] - b[j]));
            }
            cr_expect(dmax <= 2 * tol * amax, "%s param %d: max |diff| %g vs max |grad| %g",
                      em_dtype_name(lows[k]), i, dmax, amax);
            free(a);
            free(b);
        }
    }
    em_module_free(net);
}

/* Bytes a graph holds after an MLP forward: live bytes after minus before (the parameters and
 * the input batch already exist; under autocast the graph also holds their low-precision copies,
 * which its backward multiplies with). */
static size_t graph_bytes(em_module *net, const em_tensor *x, const em_tensor *y, em_dtype low)
{
    em_scope_begin();
    size_t before = em_memory_get_stats(EM_CPU).live_bytes;
    if (low != EM_F32)
        em_autocast_begin(low);
    em_tensor *loss = em_cross_entropy(em_forward(net, x), y, (em_cross_entropy_opts){0});
    if (low != EM_F32)
        em_autocast_end();
    cr_assert_not_null(loss, "%s", em_error());
    size_t held = em_memory_get_stats(EM_CPU).live_bytes - before;
    em_scope_end();
    return held;
}

Test(autocast, saved_activations_take_about_half_the_bytes)
{
    em_manual_seed(6);
    em_module *net = em_sequential(0);
    for (int i = 0; i < 8; i++)
        net = em_sequential_append(em_sequential_append(net, em_linear_layer(64, 64, true)),
                                   em_relu_layer());
    net = em_sequential_append(net, em_linear_layer(64, 10, true));
    cr_assert_not_null(net, "%s", em_error());
    em_generator gen = em_generator_new(6);
    em_tensor *x = em_randn(EM_SHAPE(512, 64), EM_F32, &gen);
    em_tensor *y = em_randint(EM_SHAPE(512), EM_I64, 0, 10, &gen);
    size_t f32 = graph_bytes(net, x, y, EM_F32), bf16 = graph_bytes(net, x, y, EM_BF16),
           f16 = graph_bytes(net, x, y, EM_F16);
    /* the 2-byte copies of the input batch and of every weight matrix */
    size_t copies = 2 * (size_t)(em_numel(x) + 8 * 64 * 64 + 64 * 10);
    cr_log_info("graph bytes after an MLP forward: f32 %zu, bf16 %zu, f16 %zu (copies %zu)", f32,
                bf16, f16, copies);
    cr_expect(bf16 - copies <= 0.55 * (double)f32, "bf16 %zu vs f32 %zu", bf16, f32);
    cr_expect(f16 - copies <= 0.55 * (double)f32, "f16 %zu vs f32 %zu", f16, f32);
    em_module_free(net);
}
