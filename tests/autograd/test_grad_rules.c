/* Backward rules at their special points, against hand-computed or PyTorch values where
 * finite differences cannot decide (the op-case table's gradient check covers the rest): ties in
 * maximum and amax/amin, piecewise-constant ops, pow at zero, casts, pooling in ceil mode, and the
 * fused ops (linear with ReLU, ReLU with max pooling) against the two ops they replace. */
#include <criterion/criterion.h>
#include <math.h>

#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(grad_rules, .init = em_scope_begin, .fini = em_scope_end);

Test(grad_rules, piecewise_constant_ops_have_zero_grad)
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

Test(grad_rules, maximum_ties_split_evenly)
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

Test(grad_rules, to_dtype_grad_comes_back_in_input_dtype)
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
Test(grad_rules, pow_at_zero_matches_pytorch)
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

Test(grad_rules, amax_ties_share_evenly)
{
    double v[6] = {1, 3, 3, 2, 2, 2};
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(2, 3), EM_F64, v), true);
    em_tensor *y = em_sum_all(em_amax(x, (int[]){1}, 1, false));
    cr_assert_eq(em_backward(y), EM_OK, "%s", em_error());
    double g[6];
    em_copy_to_host(x->grad, EM_F64, g);
    double want[6] = {0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(g[i], want[i], 1e-15, "element %d", i);
    em_zero_grad(x);
    em_tensor *z = em_amin(x, NULL, 0, false);
    cr_expect_eq(em_item(z), 1.0);
    cr_assert_eq(em_backward(z), EM_OK, "%s", em_error());
    em_copy_to_host(x->grad, EM_F64, g);
    cr_expect_eq(g[0], 1.0);
    cr_expect_eq(g[1], 0.0);
}

/* ceil_mode against PyTorch 1.13: x (1, 2, 5, 7) = sin(1.7 i), f64; max_pool2d(x, 2, 2, 0,
 * ceil_mode=True) and avg_pool2d(x, 3, 2, 1, ceil_mode=True) both give (1, 2, 3, 4), and the
 * max's gradient of y.sum() puts a 1 at each window's maximum. */
Test(grad_rules, ceil_mode_matches_pytorch)
{
    const double max_torch[24] = {
        0.99166481045246857, 0.39674057313061367, 0.99979290014266919, -0.10863659542407622,
        0.35905835402216829, 0.98560029879063304, 0.77332788956622067, 0.94042896294700595,
        -0.45832545449176587, 0.67022917584337471, -0.43376554097568404, 0.94940386068670113,
        0.75564022573942113, 0.98058949177553401, 0.33331393995491093, 0.55216738490788031,
        0.99885805169523667, 0.42177828338598095, 0.99482679135840635, -0.68001244473605282,
        0.91509476822108005, -0.51778269427897172, 0.71920989696453985, -0.87287896266219345};
    const double grad_torch[70] = {
        0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
        1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1,
        0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1};
    const double avg_torch[24] = {
        0.1369655014524368, 0.011645991356161943, 0.028464684875919948, 0.10997430330539343,
        -0.17511707360400169, 0.18653565849404308, -0.15451997948580792, 0.37222034550445116,
        -0.27610969643989336, 0.13657116133736943, -0.15124287955755805, 0.18578383876069335,
        -0.088918813362196342, -0.040833813941310422, 0.0010336788808589976,
        -0.15610915685442769, 0.23514578792357044, -0.20227960649324669, 0.17922179031280402,
        -0.3771003287245055, 0.2757605112728484, -0.11989313534251345, 0.14137203418900596,
        -0.14352651310047085};
    double xv[70];
    for (int i = 0; i < 70; i++)
        xv[i] = sin(1.7 * i);
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(1, 2, 5, 7), EM_F64, xv), true);
    em_tensor *y = em_max_pool2d(x, (em_pool2d_opts){.kernel = {2, 2}, .ceil_mode = true});
    em_tensor *z = em_avg_pool2d(x, (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                     .padding = {1, 1}, .ceil_mode = true});
    cr_assert(y && z, "%s", em_error());
    cr_assert(em_same_shape(y, em_zeros(EM_SHAPE(1, 2, 3, 4), EM_F64)));
    cr_assert(em_same_shape(z, y));
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    double yv[24], zv[24], gv[70];
    em_copy_to_host(y, EM_F64, yv);
    em_copy_to_host(z, EM_F64, zv);
    em_copy_to_host(x->grad, EM_F64, gv);
    for (int i = 0; i < 24; i++) {
        cr_expect_eq(yv[i], max_torch[i], "max[%d]", i);
        cr_expect_float_eq(zv[i], avg_torch[i], 1e-15, "avg[%d]", i);
    }
    for (int i = 0; i < 70; i++)
        cr_expect_eq(gv[i], grad_torch[i], "grad[%d]", i);
    em_release(x);
}

/* a max pooling case: its options, and whether the input is seen transposed (dims 2 and 3) */
typedef struct {
    em_pool2d_opts o;
    bool permuted;
} pool_case;

/* x (n) f32 in steps of 0.25 over [-2, 2): exact zeros, ties and all-negative windows. */
static em_tensor *coarse_f32_leaf(em_shape shape, uint64_t seed)
{
    em_tensor *u = em_gradcheck_leaf(shape, -8, 8, seed);
    int64_t n = em_numel(u);
    double v[n];
    float f[n];
    em_copy_to_host(u, EM_F64, v);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)(floor(v[i]) / 4);
    em_release(u);
    return em_requires_grad_(em_from_data(shape, EM_F32, f), true);
}

/* y of max_pool2d(relu(x)) or of the fused op, and x's gradient of sum(y * wt) into gx. */
static em_tensor *relu_pool_run(bool fused, const pool_case *c, em_tensor *x,
                                const em_tensor *wt, float *gx)
{
    const em_tensor *in = c->permuted ? em_transpose(x, 2, 3) : x;
    em_tensor *y = fused ? em_relu_max_pool2d(in, c->o) : em_max_pool2d(em_relu(in), c->o);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(em_mul(y, wt))), EM_OK, "%s", em_error());
    em_copy_to_host(x->grad, EM_F32, gx);
    return y;
}

/* The fused op gives max_pool2d(relu(x))'s values and gradients exactly, tolerance 0: ReLU is
 * monotone, so the pooled maximum of relu(x) is relu of the pooled maximum, taken at the same
 * element whenever it is positive; elsewhere both gradients are 0. Only the sign of a zero
 * output may differ (-0 pooled from x is kept by ReLU), which == does not see. */
Test(grad_rules, relu_max_pool_equals_unfused_f32)
{
    const pool_case cases[] = {
        {{.kernel = {2, 2}}, false},
        {{.kernel = {2, 2}}, true},
        {{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, false},
        {{.kernel = {2, 3}, .stride = {1, 2}}, false},
        {{.kernel = {2, 2}, .ceil_mode = true}, true},
    };
    const em_shape shapes[] = {EM_SHAPE(3, 4, 8, 12), EM_SHAPE(2, 3, 7, 9)};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t si = 0; si < 2; si++) {
            em_shape xs = shapes[si];
            em_tensor *x1 = coarse_f32_leaf(xs, 60 + k), *x2 = coarse_f32_leaf(xs, 60 + k);
            em_tensor *probe = em_max_pool2d(cases[k].permuted ? em_transpose(x1, 2, 3) : x1,
                                             cases[k].o);
            cr_assert_not_null(probe, "%s", em_error());
            em_tensor *w64 = em_gradcheck_leaf(em_shape_of(probe), -1, 1, 70 + k);
            em_tensor *wt = em_to_dtype(em_requires_grad_(w64, false), EM_F32);
            int64_t nx = em_numel(x1), ny = em_numel(probe);
            float g1[nx], g2[nx], y1[ny], y2[ny];
            em_copy_to_host(relu_pool_run(false, &cases[k], x1, wt, g1), EM_F32, y1);
            em_copy_to_host(relu_pool_run(true, &cases[k], x2, wt, g2), EM_F32, y2);
            for (int64_t i = 0; i < ny; i++)
                cr_expect_eq(y1[i], y2[i], "case %zu shape %zu: y[%lld]", k, si, (long long)i);
            for (int64_t i = 0; i < nx; i++)
                cr_expect_eq(g1[i], g2[i], "case %zu shape %zu: gx[%lld]", k, si, (long long)i);
            em_release(x1);
            em_release(x2);
        }
}

/* Without grad the fused op records nothing and gives the same values. */
Test(grad_rules, relu_max_pool_no_grad)
{
    em_tensor *x = coarse_f32_leaf(EM_SHAPE(2, 3, 6, 5), 80);
    em_pool2d_opts o = {.kernel = {2, 2}};
    bool prev = em_set_grad_enabled(false);
    em_tensor *y = em_relu_max_pool2d(x, o), *ref = em_max_pool2d(em_relu(x), o);
    em_set_grad_enabled(prev);
    cr_assert(y && ref, "%s", em_error());
    cr_expect_not(y->requires_grad);
    cr_assert_eq(em_numel(y), 36); /* (2, 3, 3, 2) */
    float yv[36], rv[36];
    em_copy_to_host(y, EM_F32, yv);
    em_copy_to_host(ref, EM_F32, rv);
    for (int i = 0; i < 36; i++)
        cr_expect_eq(yv[i], rv[i], "y[%d]", i);
    em_release(x);
}

/* In f32 the one op gives the bytes of em_relu(em_linear(...)), forward and every gradient. */
Test(grad_rules, linear_relu_equals_the_two_ops)
{
    em_tensor *p[2][3];
    const em_tensor *out[2], *grads[2][3];
    for (int fused = 0; fused < 2; fused++) {
        em_manual_seed(5); /* the same values both times */
        em_shape shapes[3] = {EM_SHAPE(33, 20), EM_SHAPE(17, 20), EM_SHAPE(17)};
        for (int i = 0; i < 3; i++)
            p[fused][i] = em_requires_grad_(em_randn(shapes[i], EM_F32, NULL), true);
        em_tensor *y = fused ? em_linear_relu(p[fused][0], p[fused][1], p[fused][2])
                             : em_relu(em_linear(p[fused][0], p[fused][1], p[fused][2]));
        cr_assert_eq(em_backward(em_sum_all(em_mul(y, y))), EM_OK, "%s", em_error());
        out[fused] = y;
        for (int i = 0; i < 3; i++)
            grads[fused][i] = p[fused][i]->grad;
    }
    int64_t zeros = 0;
    for (int64_t i = 0; i < em_numel(out[0]); i++)
        zeros += ((const float *)em_data_ptr(out[0]))[i] == 0;
    cr_assert(zeros > 100 && zeros < 461, "%lld of 561 outputs are 0", (long long)zeros);
    cr_assert_arr_eq(em_data_ptr(out[0]), em_data_ptr(out[1]), 561 * sizeof(float));
    for (int i = 0; i < 3; i++)
        cr_assert_arr_eq(em_data_ptr(grads[0][i]), em_data_ptr(grads[1][i]),
                         (size_t)em_numel(grads[0][i]) * sizeof(float), "gradient %d", i);
}

/* clamp with tensor bounds against PyTorch 2.15 (torch.clamp(x, lo, hi).sum().backward() in
 * f64): every order of x, lo and hi over {0, 1, 2}, ties and lo > hi included. */
Test(grad_rules, clamp_tensor_matches_pytorch)
{
    double xv[27], lov[27], hiv[27];
    for (int i = 0; i < 27; i++) {
        xv[i] = i / 9;
        lov[i] = i / 3 % 3;
        hiv[i] = i % 3;
    }
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(27), EM_F64, xv), true);
    em_tensor *lo = em_requires_grad_(em_from_data(EM_SHAPE(27), EM_F64, lov), true);
    em_tensor *hi = em_requires_grad_(em_from_data(EM_SHAPE(27), EM_F64, hiv), true);
    em_tensor *y = em_clamp_tensor(x, lo, hi);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    double yv[27], gx[27], glo[27], ghi[27];
    em_copy_to_host(y, EM_F64, yv);
    em_copy_to_host(x->grad, EM_F64, gx);
    em_copy_to_host(lo->grad, EM_F64, glo);
    em_copy_to_host(hi->grad, EM_F64, ghi);
    static const double want[27][4] = { /* y, x.grad, lo.grad, hi.grad */
        {0, 1, 0, 0},   {0, .5, .5, 0}, {0, .5, .5, 0}, {0, 0, 0, 1}, {1, 0, 1, 0},
        {1, 0, 1, 0},   {0, 0, 0, 1},   {1, 0, 0, 1},   {2, 0, 1, 0}, {0, 0, 0, 1},
        {1, .5, 0, .5}, {1, 1, 0, 0},   {0, 0, 0, 1},   {1, 1, 0, 0}, {1, .5, .5, 0},
        {0, 0, 0, 1},   {1, 0, 0, 1},   {2, 0, 1, 0},   {0, 0, 0, 1}, {1, 0, 0, 1},
        {2, .5, 0, .5}, {0, 0, 0, 1},   {1, 0, 0, 1},   {2, .5, 0, .5}, {0, 0, 0, 1},
        {1, 0, 0, 1},   {2, 1, 0, 0}};
    for (int i = 0; i < 27; i++)
        cr_expect(yv[i] == want[i][0] && gx[i] == want[i][1] && glo[i] == want[i][2] &&
                      ghi[i] == want[i][3],
                  "x %g lo %g hi %g: y %g, grads %g %g %g, want %g %g %g %g", xv[i], lov[i],
                  hiv[i], yv[i], gx[i], glo[i], ghi[i], want[i][0], want[i][1], want[i][2],
                  want[i][3]);
}

/* One bound, broadcast: a 0-d min over a row; its gradient sums the places x < min. */
Test(grad_rules, clamp_tensor_one_broadcast_bound)
{
    em_tensor *x = em_requires_grad_(
        em_from_data(EM_SHAPE(2, 3), EM_F32, (float[]){-2, 0.5, 3, 0.5, -1, 0.25}), true);
    em_tensor *lo = em_requires_grad_(em_scalar(0.5, EM_F32), true);
    em_tensor *y = em_clamp_tensor(x, lo, NULL);
    cr_assert_not_null(y, "%s", em_error());
    float yv[6], gx[6], glo;
    em_copy_to_host(y, EM_F32, yv);
    float want_y[] = {0.5f, 0.5f, 3, 0.5f, 0.5f, 0.5f}, want_gx[] = {0, 0.5f, 1, 0.5f, 0, 0};
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    em_copy_to_host(x->grad, EM_F32, gx);
    em_copy_to_host(lo->grad, EM_F32, &glo);
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(yv[i], want_y[i]);
        cr_expect_eq(gx[i], want_gx[i], "x.grad[%d] %g", i, gx[i]);
    }
    cr_expect_eq(glo, 4.0f); /* x = -2, -1, 0.25 lie below 0.5; x = 0.5 twice shares half */
    cr_assert_null(em_clamp_tensor(x, NULL, NULL));
    cr_assert_str_eq(em_error(), "em_clamp_tensor: at least one of min and max must be given");
    em_error_clear();
}

/* hardtanh's gradient and clamp's stop at the bounds, as PyTorch 2.15's (torch.clamp(x, -1, 1)
 * on x = -1, 0, 1, 2 gives 0, 1, 0, 0; 1.13's gave 1 at the bounds) */
Test(grad_rules, hardtanh_and_clamp_stop_at_the_bounds)
{
    for (int k = 0; k < 2; k++) {
        em_tensor *x = em_requires_grad_(
            em_from_data(EM_SHAPE(4), EM_F64, (double[]){-1, 0, 1, 2}), true);
        em_tensor *y = k ? em_clamp(x, -1, 1) : em_hardtanh(x, -1, 1);
        cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
        double g[4];
        em_copy_to_host(x->grad, EM_F64, g);
        cr_expect(g[0] == 0 && g[1] == 1 && g[2] == 0 && g[3] == 0, "%s: %g %g %g %g",
                  k ? "clamp" : "hardtanh", g[0], g[1], g[2], g[3]);
    }
    cr_assert_null(em_hardtanh(em_scalar(0, EM_F32), 1, 1));
    cr_assert_str_eq(em_error(), "em_hardtanh: min_val 1 must be less than max_val 1");
    em_error_clear();
    cr_assert_null(em_softplus(em_scalar(0, EM_F32), 0, 20));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_assert_null(em_elu(em_scalar(0, EM_F32), NAN));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
}

/* hardswish's gradient at its kinks, as PyTorch 2.x: 0 at -3, 1 at 3, x / 3 + 1/2 strictly
 * between (1.13 took [-3, 3], giving -0.5 and 1.5). Values from PyTorch 2.15:
 * x = torch.tensor([-3., 3., -3.5, 0., 1., -2.9999, 2.9999], dtype=torch.float64,
 * requires_grad=True); F.hardswish(x).sum().backward(); x.grad */
Test(grad_rules, hardswish_kinks_match_pytorch_2)
{
    em_tensor *x = em_requires_grad_(
        em_from_data(EM_SHAPE(7), EM_F64, (double[]){-3, 3, -3.5, 0, 1, -2.9999, 2.9999}), true);
    cr_assert_eq(em_backward(em_sum_all(em_hardswish(x))), EM_OK, "%s", em_error());
    double g[7];
    em_copy_to_host(x->grad, EM_F64, g);
    const double want[7] = {0.0, 1.0, 0.0, 0.5, 0.8333333333333333, -0.49996666666666656,
                            1.4999666666666664};
    for (int i = 0; i < 7; i++)
        cr_expect(fabs(g[i] - want[i]) <= 1e-15, "x[%d]: %.17g, PyTorch %.17g", i, g[i], want[i]);
}

/* PyTorch's rules where finite differences cannot see them: prod at zeros (the product of the
 * others at a lone zero, 0 with two), std and the norms where they are 0 (0, not NaN). */
Test(grad_rules, prod_std_and_norm_at_zero)
{
    em_tensor *x = em_requires_grad_(
        em_from_data(EM_SHAPE(3, 3), EM_F64, (double[]){2, 0, 3, 0, 0, 2, 1, 2, 4}), true);
    cr_assert_eq(em_backward(em_sum_all(em_prod(x, (int[]){1}, 1, false))), EM_OK, "%s",
                 em_error());
    double g[9], want[] = {0, 6, 0, 0, 0, 0, 8, 4, 2};
    em_copy_to_host(x->grad, EM_F64, g);
    for (int i = 0; i < 9; i++)
        cr_expect_eq(g[i], want[i], "prod grad[%d] %g", i, g[i]);

    em_tensor *c = em_requires_grad_(em_full(EM_SHAPE(2, 3), EM_F64, 1.5), true);
    em_tensor *zero_norms = em_add(em_sum_all(em_std(c, (int[]){1}, 1, 1, false)),
                                   em_sum_all(em_vector_norm(em_sub(c, c), 2, NULL, 0, false)));
    zero_norms = em_add(zero_norms, em_vector_norm(em_sub(c, c), 3, NULL, 0, false));
    zero_norms = em_add(zero_norms, em_vector_norm(em_sub(c, c), 0.5, NULL, 0, false));
    cr_assert_eq(em_backward(zero_norms), EM_OK, "%s", em_error());
    double gc[6];
    em_copy_to_host(c->grad, EM_F64, gc);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(gc[i], 0.0, "grad[%d] %g", i, gc[i]);

    /* the inf-norm's ties share the gradient, each with its sign */
    em_tensor *t = em_requires_grad_(
        em_from_data(EM_SHAPE(4), EM_F64, (double[]){-3, 1, 3, 2}), true);
    cr_assert_eq(em_backward(em_vector_norm(t, INFINITY, NULL, 0, false)), EM_OK);
    double gt[4];
    em_copy_to_host(t->grad, EM_F64, gt);
    cr_expect(gt[0] == -0.5 && gt[1] == 0 && gt[2] == 0.5 && gt[3] == 0);
}

/* cumprod's gradient with zeros in a line, against the sum over k >= i of the product of x_j,
 * j <= k, j != i (numpy, f64): finite differences agree but cannot reach an exact 0 input. */
Test(grad_rules, cumprod_with_zeros_matches_the_product_rule)
{
    em_tensor *x = em_requires_grad_(
        em_from_data(EM_SHAPE(3, 5), EM_F64, (double[]){2, 0, 3, 0, 4, 1.5, -2, 0.5, 4, 1,
                                                         0, 2, 3, 1, 1}), true);
    em_tensor *y = em_cumprod(x, 1);
    cr_assert_not_null(y, "%s", em_error());
    double yv[15], want_y[] = {2, 0, 0, 0, 0, 1.5, -3, -1.5, -6, -6, 0, 0, 0, 0, 0};
    em_copy_to_host(y, EM_F64, yv);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    double g[15], want_g[] = {1, 8, 0, 0, 0, -10, 8.25, -27, -3, -6, 21, 0, 0, 0, 0};
    em_copy_to_host(x->grad, EM_F64, g);
    for (int i = 0; i < 15; i++) {
        cr_expect_eq(yv[i], want_y[i], "y[%d] %g", i, yv[i]);
        cr_expect(fabs(g[i] - want_g[i]) < 1e-12, "grad[%d] %g, want %g", i, g[i], want_g[i]);
    }
}
