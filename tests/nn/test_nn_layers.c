/* nn layers: each forward against hand-computed or PyTorch-pinned values (Linear, Conv2d,
 * BatchNorm with running statistics, LayerNorm, activations, pooling, Embedding, Dropout), and
 * every layer's gradients by finite differences. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers/gradcheck.h"
#include "nn/nn.h"

static void set_values(em_tensor *t, const double *v)
{
    em_tensor *src = em_from_data(em_shape_of(t), EM_F64, v);
    cr_assert_eq(em_copy_(t, src), EM_OK, "%s", em_error());
    em_release(src);
}

static em_tensor *f32(em_shape s, const double *v)
{
    em_tensor *t = em_empty(s, EM_F32);
    set_values(t, v);
    return t;
}

/* asserts t has shape s and holds want (row-major) within tol */
static void expect(const em_tensor *t, em_shape s, const double *want, double tol)
{
    cr_assert_not_null(t, "%s", em_error());
    cr_assert_eq(t->ndim, s.ndim);
    for (int i = 0; i < s.ndim; i++)
        cr_assert_eq(t->shape[i], s.d[i], "dim %d: %lld vs %lld", i, (long long)t->shape[i],
                     (long long)s.d[i]);
    int64_t n = em_numel(t);
    double got[n];
    cr_assert_eq(em_copy_to_host(t, EM_F64, got), EM_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol, "element %lld: %.9g, want %.9g", (long long)i,
                  got[i], want[i]);
}

/* the module's forward of x, made and checked inside the caller's scope */
static em_tensor *run(em_module *m, const em_tensor *x)
{
    em_tensor *y = em_forward(m, x);
    cr_assert_not_null(y, "%s", em_error());
    return y;
}

static void setup(void)
{
    em_error_clear();
    em_manual_seed(0);
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
}

TestSuite(nn_layers, .init = setup, .fini = teardown);

/* An output size a model file can set (2^28 bins on 8 positions) is refused by the memory it
 * needs, at once: the bins were a stack array once, and one op per bin. */
Test(nn_layers, adaptive_pool_of_a_huge_output_size_is_refused_not_run)
{
    cr_assert_eq(em_memory_set_budget(EM_CPU, (size_t)256 << 20), EM_OK);
    em_tensor *x = em_zeros(EM_SHAPE(1, 3, 8, 8), EM_F32);
    em_module *ad = em_adaptive_avg_pool2d_layer(1, 350830405);
    cr_assert_null(em_forward(ad, x));
    cr_assert(strstr(em_error(), "budget"), "%s", em_error());
    em_error_clear();
    em_module_free(ad);
    em_release(x);
    cr_assert_eq(em_memory_set_budget(EM_CPU, 0), EM_OK);
}

Test(nn_layers, linear_with_set_weights)
{
    em_module *l = em_linear_layer(3, 2, true);
    set_values(em_module_find(l, "weight"), (double[]){1, 2, 3, 4, 5, 6});
    set_values(em_module_find(l, "bias"), (double[]){0.5, -1});
    em_tensor *x = f32(EM_SHAPE(2, 3), (double[]){1, 1, 1, 1, 0, -1});
    expect(run(l, x), EM_SHAPE(2, 2), (double[]){6.5, 14, -1.5, -3}, 1e-6);
    em_module_free(l);

    em_module *nb = em_linear_layer(3, 1, false);
    cr_assert_eq(nb->n_params, 1);
    set_values(em_module_find(nb, "weight"), (double[]){1, 1, 1});
    expect(run(nb, x), EM_SHAPE(2, 1), (double[]){3, 0}, 1e-6);
    em_module_free(nb);
}

Test(nn_layers, linear_and_conv_default_init_bounds)
{
    em_module *l = em_linear_layer(64, 32, true);
    em_tensor *w = em_module_find(l, "weight"), *b = em_module_find(l, "bias");
    double bound = 1.0 / sqrt(64.0);
    cr_assert_leq(em_item(em_amax(em_abs(w), NULL, 0, false)), bound + 1e-7);
    cr_assert_leq(em_item(em_amax(em_abs(b), NULL, 0, false)), bound + 1e-7);
    cr_assert_gt(em_item(em_amax(em_abs(w), NULL, 0, false)), 0.9 * bound);
    em_module_free(l);

    em_module *c = em_conv2d_layer(4, 8, 3, (em_conv2d_layer_opts){0});
    em_tensor *cw = em_module_find(c, "weight");
    cr_assert_eq(cw->ndim, 4);
    cr_assert_eq(cw->shape[1], 4);
    cr_assert_leq(em_item(em_amax(em_abs(cw), NULL, 0, false)), 1.0 / 6.0 + 1e-7);
    em_module_free(c);
}

Test(nn_layers, conv2d_on_a_3x3_input)
{
    em_module *c = em_conv2d_layer(1, 1, 2, (em_conv2d_layer_opts){0});
    set_values(em_module_find(c, "weight"), (double[]){1, 2, 3, 4});
    set_values(em_module_find(c, "bias"), (double[]){0.5});
    em_tensor *x = f32(EM_SHAPE(1, 1, 3, 3), (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    expect(run(c, x), EM_SHAPE(1, 1, 2, 2), (double[]){37.5, 47.5, 67.5, 77.5}, 1e-5);
    em_module_free(c);

    /* padding 1, stride 2, no bias: a 1x1 kernel of weight 2 samples the padded grid */
    em_module *p = em_conv2d_layer(1, 1, 1, (em_conv2d_layer_opts){.stride = 2, .padding = 1,
                                                                   .no_bias = true});
    set_values(em_module_find(p, "weight"), (double[]){2});
    expect(run(p, x), EM_SHAPE(1, 1, 3, 3), (double[]){0, 0, 0, 0, 10, 0, 0, 0, 0}, 1e-6);
    em_module_free(p);
}

Test(nn_layers, batch_norm1d_training_step_and_eval)
{
    em_module *bn = em_batch_norm1d_layer(2, (em_batch_norm_opts){0});
    em_tensor *x = f32(EM_SHAPE(4, 2), (double[]){1, 2, 2, 4, 3, 6, 4, 8});
    /* pinned from torch.nn.BatchNorm1d(2) */
    expect(run(bn, x), EM_SHAPE(4, 2),
           (double[]){-1.34163535, -1.34163928, -0.44721174, -0.44721305, 0.44721186,
                      0.44721323, 1.34163547, 1.34163952}, 1e-5);
    expect(em_module_find(bn, "running_mean"), EM_SHAPE(2), (double[]){0.25, 0.5}, 1e-6);
    expect(em_module_find(bn, "running_var"), EM_SHAPE(2), (double[]){1.0666666, 1.5666666},
           1e-6);
    cr_assert_eq(em_item(em_module_find(bn, "num_batches_tracked")), 1);
    cr_assert_not(em_module_find(bn, "running_mean")->requires_grad);

    em_module_eval(bn);
    expect(run(bn, x), EM_SHAPE(4, 2),
           (double[]){0.72618103, 1.19839931, 1.69442248, 2.79626513, 2.66266394, 4.39413118,
                      3.63090515, 5.99199677}, 1e-5);
    cr_assert_eq(em_item(em_module_find(bn, "num_batches_tracked")), 1);

    em_tensor *one = f32(EM_SHAPE(1, 2), (double[]){1, 2});
    em_module_train(bn, true);
    cr_assert_null(em_forward(bn, one));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_assert_null(em_forward(bn, f32(EM_SHAPE(2, 2, 1, 1), (double[]){1, 2, 3, 4})));
    em_error_clear();
    em_module_free(bn);
}

Test(nn_layers, batch_norm2d_against_a_reference_loop)
{
    em_module *bn = em_batch_norm2d_layer(2, (em_batch_norm_opts){.eps = 1e-3, .momentum = 0.5});
    set_values(em_module_find(bn, "weight"), (double[]){2, -1});
    set_values(em_module_find(bn, "bias"), (double[]){0.5, 1});
    double xv[2 * 2 * 3], want[2 * 2 * 3];
    for (int i = 0; i < 12; i++)
        xv[i] = sin(1.7 * i) * 3 + i % 4;
    double rm[2], rv[2];
    for (int c = 0; c < 2; c++) {
        double s = 0, ss = 0;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 3; k++)
                s += xv[n * 6 + c * 3 + k];
        double mean = s / 6;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 3; k++)
                ss += pow(xv[n * 6 + c * 3 + k] - mean, 2);
        double var = ss / 6, w = c ? -1 : 2, b = c ? 1 : 0.5;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 3; k++)
                want[n * 6 + c * 3 + k] = (xv[n * 6 + c * 3 + k] - mean) / sqrt(var + 1e-3) * w + b;
        rm[c] = 0.5 * mean;
        rv[c] = 0.5 + 0.5 * ss / 5;
    }
    em_tensor *x = f32(EM_SHAPE(2, 2, 3, 1), xv);
    expect(run(bn, x), EM_SHAPE(2, 2, 3, 1), want, 1e-5);
    expect(em_module_find(bn, "running_mean"), EM_SHAPE(2), rm, 1e-5);
    expect(em_module_find(bn, "running_var"), EM_SHAPE(2), rv, 1e-5);
    cr_assert_null(em_forward(bn, f32(EM_SHAPE(2, 2), (double[]){1, 2, 3, 4})));
    em_error_clear();
    em_module_free(bn);
}

Test(nn_layers, layer_norm_with_weight_and_bias)
{
    em_module *ln = em_layer_norm_layer(4, (em_layer_norm_opts){0});
    set_values(em_module_find(ln, "weight"), (double[]){1, 2, 1, 0.5});
    set_values(em_module_find(ln, "bias"), (double[]){0, 0.5, 0, -1});
    em_tensor *x = f32(EM_SHAPE(2, 4), (double[]){1, 2, 3, 4, -1, 0, 0, 5});
    double want[8] = {-1.34163547, -0.39442372, 0.44721180, -0.32918227,
                      -0.85280204, -0.35280204, -0.42640102, -0.14719796};
    expect(run(ln, x), EM_SHAPE(2, 4), want, 1e-5);
    /* normalized_size spanning the last two dims: the same rows seen as (2, 2, 2) */
    em_tensor *x3 = em_reshape(x, EM_SHAPE(2, 2, 2));
    expect(run(ln, x3), EM_SHAPE(2, 2, 2), want, 1e-5);
    cr_assert_null(em_forward(ln, f32(EM_SHAPE(1, 3), (double[]){1, 2, 3})));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    em_module_free(ln);
}

Test(nn_layers, activations_match_pytorch)
{
    em_tensor *a = f32(EM_SHAPE(4), (double[]){-2, -0.5, 0, 1.5});
    struct { em_module *m; double want[4]; } cases[] = {
        {em_relu_layer(), {0, 0, 0, 1.5}},
        {em_leaky_relu_layer(0.1), {-0.2, -0.05, 0, 1.5}},
        {em_gelu_layer(false), {-0.04550010, -0.15426879, 0, 1.39978909}},
        {em_gelu_layer(true), {-0.04540229, -0.15428600, 0, 1.39957154}},
        {em_silu_layer(), {-0.23840584, -0.18877034, 0, 1.22636163}},
        {em_softsign_layer(), {-2 / 3.0, -1 / 3.0, 0, 0.6}}, /* x / (1 + |x|) */
        /* numpy in f64 on PyTorch's formulas: x tanh(log1p(exp(x))); where(b x > t, x,
         * log1p(exp(b x)) / b); clip(x, lo, hi); where(x > 0, x, a expm1(x)), SELU's with its
         * alpha and scale; x clip(x + 3, 0, 6) / 6; min(x, 0) - log1p(exp(-|x|)) */
        {em_mish_layer(), {-0.25250148, -0.22074377, 0, 1.40337827}},
        {em_softplus_layer(1, 20), {0.12692801, 0.47407698, 0.69314718, 1.70141328}},
        {em_softplus_layer(2, 1), {0.00907496, 0.15663084, 0.34657359, 1.5}},
        {em_hardtanh_layer(-1, 1), {-1, -0.5, 0, 1}},
        {em_elu_layer(1), {-0.86466472, -0.39346934, 0, 1.5}},
        {em_elu_layer(0.5), {-0.43233236, -0.19673467, 0, 1.5}},
        /* where(x > 0, x, a expm1(x / a)): CELU(1) is ELU(1) */
        {em_celu_layer(2), {-1.26424112, -0.44239843, 0, 1.5}},
        {em_celu_layer(1), {-0.86466472, -0.39346934, 0, 1.5}},
        {em_selu_layer(), {-1.52016647, -0.69175819, 0, 1.57605148}},
        {em_hardswish_layer(), {-1 / 3.0, -0.20833333, 0, 1.125}},
        {em_logsigmoid_layer(), {-2.12692801, -0.97407698, -0.69314718, -0.20141328}},
        {em_tanh_layer(), {-0.96402758, -0.46211717, 0, 0.90514827}},
        {em_sigmoid_layer(), {0.11920292, 0.37754068, 0.5, 0.81757444}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect(run(cases[i].m, a), EM_SHAPE(4), cases[i].want, 1e-5);
        em_module_free(cases[i].m);
    }

    em_module *sm = em_softmax_layer(1);
    em_tensor *z = f32(EM_SHAPE(2, 3), (double[]){1, 2, 3, 0, 0, 0});
    expect(run(sm, z), EM_SHAPE(2, 3),
           (double[]){0.09003057, 0.24472847, 0.66524096, 1 / 3.0, 1 / 3.0, 1 / 3.0}, 1e-6);
    em_module_free(sm);

    em_module *fl = em_flatten_layer();
    em_tensor *y = run(fl, em_reshape(em_arange(0, 24, 1, EM_F32), EM_SHAPE(2, 3, 2, 2)));
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[1], 12);
    cr_assert_eq(em_get(y, (int64_t[]){1, 5}), 17);
    em_module_free(fl);
}

Test(nn_layers, max_avg_and_adaptive_pooling)
{
    em_tensor *x = em_reshape(em_arange(0, 16, 1, EM_F32), EM_SHAPE(1, 1, 4, 4));
    em_module *mp = em_max_pool2d_layer(2, (em_pool2d_layer_opts){0});
    em_module *ap = em_avg_pool2d_layer(2, (em_pool2d_layer_opts){0});
    expect(run(mp, x), EM_SHAPE(1, 1, 2, 2), (double[]){5, 7, 13, 15}, 0);
    expect(run(ap, x), EM_SHAPE(1, 1, 2, 2), (double[]){2.5, 4.5, 10.5, 12.5}, 1e-6);
    em_module *mp3 = em_max_pool2d_layer(3, (em_pool2d_layer_opts){.stride = 1, .padding = 1});
    em_tensor *y = run(mp3, x);
    cr_assert_eq(y->shape[2], 4);
    cr_assert_eq(em_get(y, (int64_t[]){0, 0, 0, 0}), 5);
    cr_assert_eq(em_get(y, (int64_t[]){0, 0, 2, 1}), 14);

    em_module *ad = em_adaptive_avg_pool2d_layer(2, 2);
    expect(run(ad, x), EM_SHAPE(1, 1, 2, 2), (double[]){2.5, 4.5, 10.5, 12.5}, 1e-6);
    /* uneven bins, pinned from torch.nn.functional.adaptive_avg_pool2d */
    em_tensor *x5 = em_reshape(em_arange(0, 25, 1, EM_F32), EM_SHAPE(1, 1, 5, 5));
    em_module *ad32 = em_adaptive_avg_pool2d_layer(3, 2);
    expect(run(ad32, x5), EM_SHAPE(1, 1, 3, 2), (double[]){3.5, 5.5, 11, 13, 18.5, 20.5}, 1e-5);
    em_tensor *g = em_adaptive_avg_pool2d(x5, 1, 1);
    expect(g, EM_SHAPE(1, 1, 1, 1), (double[]){12}, 1e-5);
    /* more bins than positions, and bins of two widths: torch 2.15's adaptive_avg_pool2d */
    em_tensor *x23 = em_reshape(em_arange(0, 6, 1, EM_F32), EM_SHAPE(1, 1, 2, 3));
    expect(em_adaptive_avg_pool2d(x23, 5, 4), EM_SHAPE(1, 1, 5, 4),
           (double[]){0, 0.5, 1.5, 2, 0, 0.5, 1.5, 2, 1.5, 2, 3, 3.5, 3, 3.5, 4.5, 5, 3, 3.5,
                      4.5, 5}, 1e-6);
    em_tensor *x57 = em_reshape(em_arange(0, 35, 1, EM_F32), EM_SHAPE(1, 1, 5, 7));
    expect(em_adaptive_avg_pool2d(x57, 3, 4), EM_SHAPE(1, 1, 3, 4),
           (double[]){4, 5.5, 7.5, 9, 14.5, 16, 18, 19.5, 25, 26.5, 28.5, 30}, 1e-5);
    cr_assert_null(em_adaptive_avg_pool2d(em_arange(0, 4, 1, EM_F32), 1, 1));
    em_error_clear();
    cr_assert_null(em_max_pool2d_layer(0, (em_pool2d_layer_opts){0}));
    em_error_clear();
    em_module_free(mp);
    em_module_free(ap);
    em_module_free(mp3);
    em_module_free(ad);
    em_module_free(ad32);
}

Test(nn_layers, dilated_max_pool_same_padding_and_conv_transpose_layers)
{
    /* MaxPool2d(2, stride 1, dilation 2) on 0..15 as 4x4: the max of x[i..i+2][j..j+2] taps */
    em_tensor *x = em_reshape(em_arange(0, 16, 1, EM_F32), EM_SHAPE(1, 1, 4, 4));
    em_module *mp = em_max_pool2d_layer(2, (em_pool2d_layer_opts){.stride = 1, .dilation = 2});
    expect(run(mp, x), EM_SHAPE(1, 1, 2, 2), (double[]){10, 11, 14, 15}, 0);
    char desc[256];
    em_module_describe(mp, desc, sizeof desc);
    cr_assert_str_eq(desc, "kernel_size=2, stride=1, padding=0, dilation=2");
    cr_assert_null(em_max_pool2d_layer(2, (em_pool2d_layer_opts){.stride = 1, .dilation = -1}));
    cr_assert_not_null(strstr(em_error(), "dilation -1"), "%s", em_error());
    em_error_clear();

    em_module *same = em_conv2d_layer(1, 2, 4, (em_conv2d_layer_opts){.padding = EM_PADDING_SAME});
    em_tensor *ys = run(same, x);
    cr_assert(ys->shape[1] == 2 && ys->shape[2] == 4 && ys->shape[3] == 4);
    em_module_describe(same, desc, sizeof desc);
    cr_assert_str_eq(desc, "1, 2, kernel_size=4, stride=1, padding=same, dilation=1, groups=1, "
                           "bias=true");
    cr_assert_null(em_conv2d_layer(1, 2, 3, (em_conv2d_layer_opts){.padding = EM_PADDING_SAME,
                                                                   .stride = 2}));
    cr_assert_not_null(strstr(em_error(), "needs stride 1"), "%s", em_error());
    em_error_clear();

    em_module *up = em_conv_transpose2d_layer(1, 4, 3, (em_conv_transpose2d_layer_opts){
        .stride = 2, .padding = 1, .output_padding = 1, .groups = 1});
    cr_assert_eq(em_module_find(up, "weight")->shape[0], 1);
    cr_assert_eq(em_module_find(up, "weight")->shape[1], 4);
    em_tensor *yu = run(up, x); /* (4 - 1) 2 - 2 + 2 + 1 + 1 = 8 */
    cr_assert(yu->shape[1] == 4 && yu->shape[2] == 8 && yu->shape[3] == 8);
    em_module_describe(up, desc, sizeof desc);
    cr_assert_str_eq(desc, "1, 4, kernel_size=3, stride=2, padding=1, output_padding=1, "
                           "dilation=1, groups=1, bias=true");
    cr_assert_null(em_conv_transpose2d_layer(2, 4, 3, (em_conv_transpose2d_layer_opts){
        .stride = 2, .output_padding = 2}));
    cr_assert_not_null(strstr(em_error(), "output_padding 2 (below stride or dilation)"), "%s",
                       em_error());
    em_error_clear();
    em_module_free(mp);
    em_module_free(same);
    em_module_free(up);
}

Test(nn_layers, embedding_lookup)
{
    em_module *e = em_embedding_layer(4, 3, (em_embedding_opts){0});
    em_tensor *w = em_module_find(e, "weight");
    cr_assert_eq(w->shape[0], 4);
    cr_assert_eq(w->shape[1], 3);
    set_values(w, (double[]){0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
    em_tensor *idx = em_from_data(EM_SHAPE(2, 2), EM_I64, (int64_t[]){2, 0, 3, 3});
    expect(run(e, idx), EM_SHAPE(2, 2, 3),
           (double[]){20, 21, 22, 0, 1, 2, 30, 31, 32, 30, 31, 32}, 0);
    em_module_free(e);

    /* N(0, 1) initialisation */
    em_module *big = em_embedding_layer(100, 100, (em_embedding_opts){0});
    em_tensor *bw = em_module_find(big, "weight");
    cr_assert_float_eq(em_item(em_mean_all(bw)), 0.0, 0.03);
    cr_assert_float_eq(em_item(em_var(bw, NULL, 0, 1, false)), 1.0, 0.05);
    em_module_free(big);
}

Test(nn_layers, embedding_padding_row_starts_at_zero_and_stays_there)
{
    em_module *e = em_embedding_layer(4, 3, (em_embedding_opts){.padding_idx = -2,
                                                                      .has_padding_idx = true});
    cr_assert_not_null(e, "%s", em_error());
    em_tensor *w = em_module_find(e, "weight");
    double row2[3];
    em_copy_to_host(em_narrow(w, 0, 2, 1), EM_F64, row2);
    cr_assert(row2[0] == 0 && row2[1] == 0 && row2[2] == 0, "the padding row starts at zero");
    em_setting_value padding;
    cr_assert_eq(em_module_setting(e, "padding_idx", &padding), EM_OK, "%s", em_error());
    cr_assert(!padding.none && padding.i == 2, "padding_idx counted from the start");

    /* the gradient of every looked-up row but the padding one */
    em_tensor *idx = em_from_data(EM_SHAPE(3), EM_I64, (int64_t[]){2, 0, 2});
    cr_assert_eq(em_backward(em_sum_all(run(e, idx))), EM_OK, "%s", em_error());
    expect(w->grad, EM_SHAPE(4, 3), (double[]){1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0);
    em_module_free(e);

    cr_assert_null(em_embedding_layer(4, 3, (em_embedding_opts){.padding_idx = 4,
                                                                      .has_padding_idx = true}));
    cr_assert_str_eq(em_error(), "em_embedding_layer: padding_idx 4 is outside [-4, 4)");
    em_error_clear();
    em_module *relu = em_relu_layer();
    cr_assert_eq(em_module_setting(relu, "padding_idx", &padding), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_module_setting: a ReLU has no setting 'padding_idx'");
    em_error_clear();
    em_module_free(relu);
}

Test(nn_layers, dropout_rate_scaling_and_determinism)
{
    em_module *d = em_dropout_layer(0.25);
    em_tensor *x = em_ones(EM_SHAPE(100, 100), EM_F32);
    em_manual_seed(42);
    em_tensor *y = run(d, x);
    int64_t zeros = 0, n = em_numel(y);
    float v[10000];
    em_copy_to_host(y, EM_F32, v);
    for (int64_t i = 0; i < n; i++) {
        cr_assert(v[i] == 0.0f || fabsf(v[i] - 1.0f / 0.75f) < 1e-6f, "value %g", v[i]);
        zeros += v[i] == 0.0f;
    }
    cr_assert(fabs((double)zeros / n - 0.25) < 0.02, "drop rate %g", (double)zeros / n);
    em_manual_seed(42);
    em_tensor *again = run(d, x);
    float w[10000];
    em_copy_to_host(again, EM_F32, w);
    cr_assert_arr_eq(v, w, sizeof v);

    em_module_eval(d);
    expect(run(d, f32(EM_SHAPE(3), (double[]){1, -2, 3})), EM_SHAPE(3), (double[]){1, -2, 3}, 0);
    em_module_free(d);

    em_tensor *small = f32(EM_SHAPE(3), (double[]){1, -2, 3});
    expect(em_dropout(small, 1.0, true, NULL), EM_SHAPE(3), (double[]){0, 0, 0}, 0);
    expect(em_dropout(small, 0.0, true, NULL), EM_SHAPE(3), (double[]){1, -2, 3}, 0);
    em_generator g = em_generator_new(7);
    cr_assert_not_null(em_dropout(small, 0.5, true, &g));
    cr_assert_null(em_dropout(small, 1.5, true, NULL));
    cr_assert_null(em_dropout_layer(-0.1));
    em_error_clear();
}

/* ---- gradient checks: the layer's parameters replaced by f64 leaves ---- */

typedef struct {
    em_module *m;
    em_tensor *index; /* i64 input of an Embedding, else NULL */
} layer_ctx;

/* inputs: x (unless ctx has an index), then the module's parameters in order */
static em_tensor *layer_fn(em_tensor *const *inputs, void *ctx)
{
    layer_ctx *c = ctx;
    return em_forward(c->m, c->index ? c->index : inputs[0]);
}

/* Puts f64 leaves in place of m's parameters; leaves[first..] receive them. */
static void use_f64_params(em_module *m, em_tensor **leaves, int first, uint64_t seed)
{
    for (int i = 0; i < m->n_params; i++) {
        em_tensor *p = m->params[i].value;
        leaves[first + i] = em_gradcheck_leaf(em_shape_of(p), -1, 1, seed + (uint64_t)i);
        m->params[i].value = em_retain(leaves[first + i]);
        em_release(p);
    }
}

static void gradcheck_layer(em_module *m, em_shape x_shape, double tol)
{
    em_tensor *leaves[4] = {em_gradcheck_leaf(x_shape, -2, 2, 11)};
    use_f64_params(m, leaves, 1, 100);
    layer_ctx c = {.m = m};
    cr_assert(em_test_gradcheck(layer_fn, &c, leaves, 1 + m->n_params, 1e-6, tol), "%s: %s",
              m->type->type_name, em_error());
    for (int i = 0; i <= m->n_params; i++)
        em_release(leaves[i]);
    em_module_free(m);
}

/* d CELU / dx = exp(x / alpha) below 0, 1 above: by hand at alpha 2, then by finite
 * differences; alpha 0 (a divisor) is refused */
Test(nn_layers, celu_gradient)
{
    em_module *m = em_celu_layer(2);
    em_tensor *x = em_requires_grad_(f32(EM_SHAPE(4), (double[]){-2, -0.5, 0.25, 1.5}), true);
    cr_assert_eq(em_backward(em_sum_all(run(m, x))), EM_OK, "%s", em_error());
    expect(x->grad, EM_SHAPE(4), (double[]){0.36787944, 0.77880078, 1, 1}, 1e-6);
    em_module_free(m);
    gradcheck_layer(em_celu_layer(0.7), EM_SHAPE(2, 5), 1e-6);
    cr_assert_null(em_celu_layer(0));
    cr_assert_str_eq(em_error(), "em_celu_layer: setting 'alpha' is 0; it divides, so it must "
                                 "not be");
    em_error_clear();
}

Test(nn_layers, gradcheck_linear)
{
    gradcheck_layer(em_linear_layer(4, 3, true), EM_SHAPE(2, 4), 1e-6);
    gradcheck_layer(em_linear_layer(3, 2, false), EM_SHAPE(2, 5, 3), 1e-6);
}

Test(nn_layers, gradcheck_conv2d)
{
    gradcheck_layer(em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){.padding = 1, .stride = 2}),
                    EM_SHAPE(2, 2, 5, 5), 1e-6);
    gradcheck_layer(em_conv2d_layer(4, 2, 2, (em_conv2d_layer_opts){.groups = 2, .no_bias = true}),
                    EM_SHAPE(1, 4, 3, 3), 1e-6);
}

Test(nn_layers, gradcheck_batch_norm_training_and_eval)
{
    gradcheck_layer(em_batch_norm1d_layer(3, (em_batch_norm_opts){0}), EM_SHAPE(4, 3), 1e-5);
    gradcheck_layer(em_batch_norm1d_layer(2, (em_batch_norm_opts){0}), EM_SHAPE(3, 2, 2), 1e-5);
    gradcheck_layer(em_batch_norm2d_layer(2, (em_batch_norm_opts){0}), EM_SHAPE(2, 2, 2, 3), 1e-5);
    em_module *ev = em_batch_norm2d_layer(2, (em_batch_norm_opts){0});
    set_values(em_module_find(ev, "running_mean"), (double[]){0.5, -0.25});
    set_values(em_module_find(ev, "running_var"), (double[]){2, 0.5});
    em_module_eval(ev);
    gradcheck_layer(ev, EM_SHAPE(2, 2, 2, 2), 1e-6);
}

Test(nn_layers, gradcheck_layer_norm)
{
    gradcheck_layer(em_layer_norm_layer(5, (em_layer_norm_opts){0}), EM_SHAPE(3, 5), 1e-5);
    gradcheck_layer(em_layer_norm_layer(6, (em_layer_norm_opts){0}), EM_SHAPE(2, 2, 3), 1e-5);
}

Test(nn_layers, gradcheck_group_and_instance_norm)
{
    gradcheck_layer(em_group_norm_layer(2, 4, (em_group_norm_opts){0}), EM_SHAPE(2, 4, 3), 1e-5);
    gradcheck_layer(em_group_norm_layer(3, 6, (em_group_norm_opts){0}), EM_SHAPE(2, 6, 2, 2), 1e-5);
    gradcheck_layer(em_instance_norm1d_layer(3, (em_instance_norm_opts){.affine = true}),
                    EM_SHAPE(2, 3, 4), 1e-5);
    gradcheck_layer(em_instance_norm2d_layer(2, (em_instance_norm_opts){
                        .affine = true, .track_running_stats = true}),
                    EM_SHAPE(2, 2, 2, 3), 1e-5);
    em_module *ev = em_instance_norm2d_layer(2, (em_instance_norm_opts){
        .affine = true, .track_running_stats = true});
    set_values(em_module_find(ev, "running_mean"), (double[]){0.5, -0.25});
    set_values(em_module_find(ev, "running_var"), (double[]){2, 0.5});
    em_module_eval(ev);
    gradcheck_layer(ev, EM_SHAPE(2, 2, 2, 2), 1e-6);
}

Test(nn_layers, gradcheck_pooling_and_activations)
{
    gradcheck_layer(em_adaptive_avg_pool2d_layer(2, 3), EM_SHAPE(1, 2, 5, 4), 1e-6);
    gradcheck_layer(em_avg_pool2d_layer(2, (em_pool2d_layer_opts){.stride = 1}),
                    EM_SHAPE(1, 1, 3, 3), 1e-6);
    gradcheck_layer(em_gelu_layer(false), EM_SHAPE(2, 3), 1e-6);
    gradcheck_layer(em_softmax_layer(-1), EM_SHAPE(2, 3), 1e-6);
    gradcheck_layer(em_flatten_layer(), EM_SHAPE(2, 2, 2), 1e-6);
}

Test(nn_layers, gradcheck_embedding_weight)
{
    em_module *e = em_embedding_layer(5, 3, (em_embedding_opts){0});
    em_tensor *leaves[1];
    use_f64_params(e, leaves, 0, 7);
    layer_ctx c = {.m = e, .index = em_from_data(EM_SHAPE(4), EM_I64, (int64_t[]){1, 4, 1, 0})};
    cr_assert(em_test_gradcheck(layer_fn, &c, leaves, 1, 1e-6, 1e-6), "%s", em_error());
    em_release(leaves[0]);
    em_module_free(e);
}

/* the same mask on every call: a fresh generator from one seed */
static em_tensor *dropout_fn(em_tensor *const *inputs, void *ctx)
{
    (void)ctx;
    em_generator g = em_generator_new(3);
    return em_dropout(inputs[0], 0.5, true, &g);
}

Test(nn_layers, gradcheck_dropout_under_a_fixed_seed)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3, 4), -1, 1, 5);
    cr_assert(em_test_gradcheck(dropout_fn, NULL, &x, 1, 1e-6, 1e-6), "%s", em_error());
    em_release(x);
}

/* Upsample and Pad: their forward is em_interpolate's and em_pad's with the settings they were
 * made with (hand-computed values), what a summary prints, and settings refused when made. */
Test(nn_layers, upsample_and_pad_layers)
{
    em_tensor *x = f32(EM_SHAPE(1, 1, 2, 2), (double[]){1, 2, 3, 4});
    em_module *up = em_upsample_layer((em_interpolate_opts){.scale_factor = {2, 1}});
    expect(em_forward(up, x), EM_SHAPE(1, 1, 4, 2), (double[]){1, 2, 1, 2, 3, 4, 3, 4}, 0);
    char buf[128];
    em_module_describe(up, buf, sizeof buf);
    cr_assert_str_eq(buf, "scale_factor=(2, 1), mode='nearest'");
    em_module *pad = em_pad_layer((int64_t[]){1, 0, 0, 1}, 4, EM_PAD_REPLICATE, 0);
    expect(em_forward(pad, x), EM_SHAPE(1, 1, 3, 3), (double[]){1, 1, 2, 3, 3, 4, 3, 3, 4}, 0);
    em_module_describe(pad, buf, sizeof buf);
    cr_assert_str_eq(buf, "mode='replicate', padding=(1, 0, 0, 1)");
    em_module *zero = em_pad_layer((int64_t[]){0, 1}, 2, EM_PAD_CONSTANT, 0);
    expect(em_forward(zero, x), EM_SHAPE(1, 1, 2, 3), (double[]){1, 2, 0, 3, 4, 0}, 0);
    em_module_describe(zero, buf, sizeof buf);
    cr_assert_str_eq(buf, "mode='constant', padding=(0, 1), value=0");
    em_module_free(up);
    em_module_free(pad);
    em_module_free(zero);

    em_interpolate_opts bad[3] = {{.size = {4}, .scale_factor = {2}},
                                  {.size = {4}, .align_corners = true},
                                  {.scale_factor = {-2}}};
    for (int i = 0; i < 3; i++) {
        cr_assert_null(em_upsample_layer(bad[i]));
        cr_assert(strstr(em_error(), "em_upsample_layer: needs a known mode"), "%s", em_error());
        em_error_clear();
    }
    cr_assert_null(em_pad_layer((int64_t[]){1, 1}, 3, EM_PAD_CONSTANT, 0));
    cr_assert(strstr(em_error(), "em_pad_layer: needs 2, 4 or 6 pads (got 3)"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_pad_layer((int64_t[]){1, 1}, 2, EM_PAD_REFLECT, 2));
    cr_assert(strstr(em_error(), "0 unless the mode is constant (got 2)"), "%s", em_error());
    em_error_clear();
}
