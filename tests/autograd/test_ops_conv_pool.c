/* max pooling with dilation, against
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
