/* padding "same" for conv2d and conv1d and max pooling with dilation, against
 * PyTorch 2.15's values (torch.nn.functional on the inputs below, in f64, printed to 10 digits);
 * gradients are checked by finite differences in f64, and bad arguments give clear errors. */
#include <criterion/criterion.h>
#include <string.h>

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
