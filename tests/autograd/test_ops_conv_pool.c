/* padding "same" for conv2d and conv1d, max pooling with dilation and conv_transpose2d, against
 * PyTorch 2.15's values (torch.nn.functional on the inputs below, in f64, printed to 10 digits);
 * gradients are checked by finite differences in f64, and bad arguments give clear errors. */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers/gradcheck.h"
#include "helpers/reference.h"

TestSuite(ops_conv_pool, .init = em_scope_begin, .fini = em_scope_end);

/* sin(i a + b) for i = 0.., in f64: the inputs the PyTorch references were computed on */
static em_tensor *wave(em_shape s, double a, double b)
{
    return em_ref_wave(s, a, b, 1);
}

static void expect_values(const em_tensor *t, const double *want, int64_t n, double tol)
{
    cr_assert(em_ref_close(t, want, n, tol), "%s", em_error());
}

static void expect_error(const em_tensor *t, const char *part)
{
    cr_assert_null(t);
    cr_assert_not_null(strstr(em_error(), part), "%s", em_error());
    em_error_clear();
}

/* ---- padding "same" ---- */

Test(ops_conv_pool, conv2d_padding_same_as_pytorch)
{
    /* F.conv2d(x, w, b, padding="same", dilation=(1, 2)): 1 row of padding in all (the odd one
     * at the bottom), 4 columns (2 each side) */
    em_tensor *x = wave(EM_SHAPE(1, 2, 4, 5), 0.7, 0.3), *w = wave(EM_SHAPE(3, 2, 2, 3), 1.3, 0.1),
              *b = wave(EM_SHAPE(3), 0.9, 0.5);
    static const double want[60] = {
        1.531808908, 3.664343635, 6.378673762, 3.466257962, 1.079711926, -1.802026581,
        -3.256484019, -4.966933907, -1.400566099, 1.293646658, 3.700004357, 4.291542419,
        4.780736763, 1.013654597, -1.645826473, -1.48365034, -1.026075369, -0.2846593438,
        1.292016225, 2.304444251, -0.4731320814, -2.419664807, -4.829754836, -1.71717475,
        0.7978359278, 3.598021108, 4.798088448, 6.134622932, 2.492950951, -0.2323307025,
        -2.449088334, -2.75017778, -2.843301061, 0.8646550107, 3.453860791, 2.943457896,
        2.34627822, 1.427276915, -0.01507617827, -0.9215435983, 2.593500646, 4.331364484,
        6.409149521, 3.132650364, 0.5184617138, -2.167562685, -3.099265443, -4.046320913,
        -0.3717511186, 2.352864209, 4.354208186, 4.361342905, 4.057310725, 0.451658968,
        -2.03712087, -1.184434726, -0.4546043525, 0.631280692, 1.922515469, 2.712466696};
    em_conv2d_opts o = {.padding = {EM_PADDING_SAME}, .dilation = {1, 2}};
    em_tensor *y = em_conv2d(x, w, b, o);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[1] == 3 && y->shape[2] == 4 && y->shape[3] == 5);
    expect_values(y, want, 60, 1e-9);

    o.stride[1] = 2;
    expect_error(em_conv2d(x, w, b, o), "EM_PADDING_SAME needs stride 1");
    em_conv2d_opts valid = {.padding = {EM_PADDING_VALID, EM_PADDING_VALID}};
    y = em_conv2d(x, w, b, valid);
    cr_assert(y && y->shape[2] == 3 && y->shape[3] == 3, "%s", em_error());
    expect_error(em_conv2d(x, w, b, (em_conv2d_opts){.padding = {-3, 0}}), "padding -3x0");
}

Test(ops_conv_pool, conv1d_padding_same_as_pytorch)
{
    /* F.conv1d(x, w, padding="same"), kernel 4: 1 before, 2 after */
    em_tensor *x = wave(EM_SHAPE(1, 2, 6), 0.7, 0.3), *w = wave(EM_SHAPE(2, 2, 4), 1.3, 0.1);
    static const double want[12] = {-1.370040109, 1.005647907,  2.438011561,  2.723740283,
                                    0.8408850026, -0.9983687477, 2.326942698, 1.562444547,
                                    -0.2745930163, -1.982485193, -2.266144943, -0.5566338905};
    em_tensor *y = em_conv1d(x, w, NULL, (em_conv1d_opts){.padding = EM_PADDING_SAME});
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->ndim == 3 && y->shape[2] == 6);
    expect_values(y, want, 12, 1e-9);
    expect_error(em_conv1d(x, w, NULL, (em_conv1d_opts){.padding = EM_PADDING_SAME, .stride = 2}),
                 "em_conv1d: padding EM_PADDING_SAME needs stride 1");
}

/* ---- max pooling with dilation ---- */

Test(ops_conv_pool, max_pool2d_dilation_as_pytorch)
{
    /* F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=(2, 2)): windows that reach padding */
    em_tensor *x = wave(EM_SHAPE(1, 2, 6, 7), 0.7, 0.3);
    static const double want[36] = {
        0.8504366206, 0.8504366206, 0.8504366206, 0.8414709848, 0.8591618149, 0.8591618149,
        0.8504366206, 0.8504366206, 0.8504366206, 0.9839066946, 0.9839066946, 0.8591618149,
        0.9807632477, 0.9807632477, 0.9807632477, 0.9839066946, 0.9839066946, -0.00885130929,
        -0.6761178354, 0.3902362353, 0.3902362353, 0.5977603669, 0.9773425124, 0.9773425124,
        0.8990972401, 0.8990972401, 0.5841965844, 0.906330408, 0.906330408, 0.906330408,
        0.8990972401, 0.9133073315, 0.9133073315, 0.906330408, 0.906330408, 0.906330408};
    em_pool2d_opts o = {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 2}};
    em_tensor *y = em_max_pool2d(x, o);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[2] == 6 && y->shape[3] == 3);
    expect_values(y, want, 36, 1e-9);
    em_tensor *f = em_max_pool2d(em_to_dtype(x, EM_F32), o); /* the f32 kernel */
    expect_values(f, want, 36, 1e-6);

    /* F.max_pool2d(x, 3, 1, 0, dilation=2): every window inside the plane */
    static const double inside[6] = {0.9916648105, 0.9839066946, 0.9916648105,
                                     0.9893582466, 0.9807632477, 0.9893582466};
    em_pool2d_opts in = {.kernel = {3, 3}, .stride = {1, 1}, .dilation = {2, 2}};
    expect_values(em_max_pool2d(em_narrow(x, 1, 0, 1), in), inside, 6, 1e-9);
    expect_values(em_max_pool2d(em_to_dtype(em_narrow(x, 1, 0, 1), EM_F32), in), inside, 6, 1e-6);

    expect_error(em_avg_pool2d(x, o), "em_avg_pool2d: takes no dilation");
    expect_error(em_max_pool2d(x, (em_pool2d_opts){.kernel = {2, 2}, .padding = {2, 0}}),
                 "padding at most half the kernel");
    expect_error(em_max_pool2d(x, (em_pool2d_opts){.kernel = {3, 3}, .dilation = {4, 1}}),
                 "dilation 4x1 does not fit");
}

/* ---- conv_transpose2d ---- */

static em_tensor *apply_conv_transpose(em_tensor *const *x, void *ctx)
{
    return em_conv_transpose2d(x[0], x[1], x[2], *(const em_conv_transpose2d_opts *)ctx);
}

Test(ops_conv_pool, conv_transpose2d_as_pytorch)
{
    /* F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
     * groups=2, dilation=(1, 2)) */
    em_tensor *x = wave(EM_SHAPE(1, 2, 2, 3), 0.7, 0.3), *w = wave(EM_SHAPE(2, 2, 3, 2), 1.3, 0.1),
              *b = wave(EM_SHAPE(4), 0.9, 0.5);
    static const double want[80] = {
        0.6057249291, 0.8390533073, 0.6795926967, -0.1574018024, -0.2710688645, 0.3009074892,
        -0.216752226, 0.3507131165, 0.7825542091, 0.1854149524, 0.7681049118, 0.4971962771,
        -0.2932624341, 0.4479571895, 0.9424811172, -0.08274047499, 0.444819307, 1.199089661,
        0.4923796349, 0.288806497, 0.7254818572, 0.2452112725, -0.09186427546, 0.4018684939,
        0.2977053082, 1.810517567, 1.455010236, 1.314586578, 1.80729064, 1.806681613,
        0.391247634, 0.9488713975, 1.055247863, 0.9566124975, 1.409788526, 1.329031821,
        1.006600211, 1.326487472, 1.02560242, 0.3946043995, 1.256277589, 1.207141167,
        0.2743442279, 0.143221277, 0.4907349284, -0.1190371301, -0.0312860538, 0.3250586659,
        0.1112699042, -0.1279430753, 0.582984482, 0.3015148603, 0.4414147778, 1.325672049,
        1.420411544, 1.022091478, 1.500176463, 1.558827958, 0.5693787273, 0.5405752146,
        -0.8632069485, -0.7857515161, -1.116078478, -0.7360866566, -0.3451810469,
        0.03433113647, -0.5423768846, -0.02738053649, 0.5367245221, -0.01213133071,
        0.1981281422, 0.6418183914, 0.995185625, 0.5940096951, 0.7005787462, -0.1870181552,
        -0.409542853, -0.7747201389, -0.8986324189, -1.035891379};
    em_conv_transpose2d_opts o = {.stride = {2, 1}, .padding = {1, 0}, .output_padding = {1, 0},
                                  .dilation = {1, 2}, .groups = 2};
    em_tensor *y = em_conv_transpose2d(x, w, b, o);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[1] == 4 && y->shape[2] == 4 && y->shape[3] == 5);
    expect_values(y, want, 80, 1e-9);

    em_tensor *leaves[3] = {em_gradcheck_leaf(EM_SHAPE(1, 2, 2, 3), -1, 1, 1),
                            em_gradcheck_leaf(EM_SHAPE(2, 2, 3, 2), -1, 1, 2),
                            em_gradcheck_leaf(EM_SHAPE(4), -1, 1, 3)};
    cr_assert(em_test_gradcheck_default(apply_conv_transpose, &o, leaves, 3));
}

Test(ops_conv_pool, conv_transpose2d_output_padding_below_dilation)
{
    /* F.conv_transpose2d(x, w, stride=1, output_padding=1, dilation=2): output_padding at the
     * stride, below the dilation; the last row and column get nothing */
    em_tensor *x = wave(EM_SHAPE(1, 1, 2, 2), 0.7, 0.3), *w = wave(EM_SHAPE(1, 1, 2, 2), 1.3, 0.1);
    static const double want[25] = {
        0.02950279192, 0.08400692342, 0.2912203079, 0.8292273548, 0, 0.0990012862,
        0.06743379713, 0.9772358197, 0.6656350089, 0, 0.1262993905, 0.3596277687,
        -0.2236504298, -0.636827341, 0, 0.4238175879, 0.2886793732, -0.7504944031,
        -0.5111922205, 0, 0, 0, 0, 0, 0};
    em_conv_transpose2d_opts o = {.output_padding = {1, 1}, .dilation = {2, 2}};
    expect_values(em_conv_transpose2d(x, w, NULL, o), want, 25, 1e-9);
    em_tensor *leaves[3] = {em_gradcheck_leaf(EM_SHAPE(1, 1, 2, 2), -1, 1, 4),
                            em_gradcheck_leaf(EM_SHAPE(1, 1, 2, 2), -1, 1, 5), NULL};
    cr_assert(em_test_gradcheck_default(apply_conv_transpose, &o, leaves, 2));
}

Test(ops_conv_pool, conv_transpose2d_bad_arguments)
{
    em_tensor *x = wave(EM_SHAPE(1, 2, 3, 3), 0.7, 0.3), *w = wave(EM_SHAPE(2, 3, 2, 2), 1.3, 0.1);
    em_conv_transpose2d_opts too_much = {.output_padding = {1, 0}};
    expect_error(em_conv_transpose2d(x, w, NULL, too_much),
                 "output_padding 1x0 (below stride or dilation)");
    expect_error(em_conv_transpose2d(x, wave(EM_SHAPE(3, 3, 2, 2), 1, 0), NULL,
                                     (em_conv_transpose2d_opts){0}),
                 "w [3,3,2,2] (C_in, C_out/groups, KH, KW)");
    expect_error(em_conv_transpose2d(x, w, wave(EM_SHAPE(2), 1, 0), (em_conv_transpose2d_opts){0}),
                 "b [2]");
    expect_error(em_conv_transpose2d(x, w, NULL, (em_conv_transpose2d_opts){.padding = {3, 3}}),
                 "padding 3x3");
    expect_error(em_conv_transpose2d(x, em_to_dtype(w, EM_F32), NULL,
                                     (em_conv_transpose2d_opts){0}),
                 "must share dtype and device");
}

/* A kernel of size 0 in either dim computes nothing: refused naming the size, as PyTorch's
 * "kernel size should be greater than zero" (not the backend's "not supported"). */
Test(ops_conv_pool, a_kernel_of_size_0_is_refused_naming_it)
{
    em_tensor *x = wave(EM_SHAPE(1, 2, 4, 4), 0.7, 0.3);
    expect_error(em_conv_transpose2d(x, em_zeros(EM_SHAPE(2, 3, 0, 0), EM_F64), NULL,
                                     (em_conv_transpose2d_opts){0}),
                 "em_conv_transpose2d: kernel size 0x0 of w [2,3,0,0]: must be at least 1");
    expect_error(em_conv_transpose2d(x, em_zeros(EM_SHAPE(2, 3, 0, 3), EM_F64), NULL,
                                     (em_conv_transpose2d_opts){0}),
                 "em_conv_transpose2d: kernel size 0x3 of w [2,3,0,3]: must be at least 1");
    expect_error(em_conv2d(x, em_zeros(EM_SHAPE(3, 2, 2, 0), EM_F64), NULL, (em_conv2d_opts){0}),
                 "em_conv2d: kernel size 2x0 of w [3,2,2,0]: must be at least 1");
    expect_error(em_conv2d(x, em_zeros(EM_SHAPE(3, 2, 0, 2), EM_F64), NULL,
                           (em_conv2d_opts){.padding = {EM_PADDING_SAME, EM_PADDING_SAME}}),
                 "em_conv2d: kernel size 0x2 of w [3,2,0,2]: must be at least 1");
    expect_error(em_conv1d(em_zeros(EM_SHAPE(1, 2, 4), EM_F64), em_zeros(EM_SHAPE(3, 2, 0), EM_F64),
                           NULL, (em_conv1d_opts){0}),
                 "em_conv1d: kernel size 0 of w [3,2,0]: must be at least 1");
}
