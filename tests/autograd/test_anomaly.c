/* Anomaly mode: the first op whose forward output or backward gradient holds a NaN or Inf is
 * named with its direction and input shapes (EM_ERR_NUMERIC); off, nothing is checked. */
#include <criterion/criterion.h>
#include <math.h>

#include "autograd/autograd.h"

static void setup(void)
{
    em_error_clear();
    em_set_anomaly_mode(true);
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
    em_set_anomaly_mode(false);
}

TestSuite(anomaly, .init = setup, .fini = teardown);

static em_tensor *f32(em_shape s, const float *v)
{
    return em_from_data(s, EM_F32, v);
}

static const float vals[12] = {1, 2, 3, -1, 4, 5, 6, 7, 8, 9, 10, 11};

Test(anomaly, forward_nan_names_the_op)
{
    em_tensor *x = em_requires_grad_(f32(EM_SHAPE(4, 3), vals), true);
    em_tensor *y = em_log(em_mul_scalar(x, 2.0));
    cr_expect_null(y);
    cr_expect_eq(em_error_status(), EM_ERR_NUMERIC);
    cr_expect_str_eq(em_error(), "anomaly: em_log produced NaN in forward; inputs [4,3]");
}

Test(anomaly, forward_inf_without_grad_and_shapes_of_each_input)
{
    em_tensor *a = f32(EM_SHAPE(4, 3), vals);
    em_tensor *b = em_zeros(EM_SHAPE(3), EM_F32);
    cr_expect_null(em_div(a, b));
    cr_expect_str_eq(em_error(), "anomaly: em_div produced Inf in forward; inputs [4,3] x [3]");
    em_error_clear();
    em_tensor *w = em_full(EM_SHAPE(2, 3), EM_F32, 1e38);
    em_tensor *bias = em_zeros(EM_SHAPE(2), EM_F32);
    cr_expect_null(em_linear(a, w, bias));
    cr_expect_str_eq(em_error(),
                     "anomaly: em_linear produced Inf in forward; inputs [4,3] x [2,3] x [2]");
}

Test(anomaly, backward_inf_names_the_rule)
{
    /* y = a / b is 1 everywhere, but d(c y)/da = c / b = 1e10 / 1e-30 overflows f32 */
    em_tensor *a = em_requires_grad_(em_full(EM_SHAPE(4, 3), EM_F32, 1e-30), true);
    em_tensor *b = em_requires_grad_(em_full(EM_SHAPE(4, 3), EM_F32, 1e-30), true);
    em_tensor *loss = em_sum_all(em_mul_scalar(em_div(a, b), 1e10));
    cr_assert_not_null(loss, "%s", em_error());
    cr_expect(fabs(em_item(loss) - 12e10) <= 1e-6 * 12e10, "loss %g", em_item(loss));
    cr_expect_eq(em_backward(loss), EM_ERR_NUMERIC);
    cr_expect_str_eq(em_error(), "anomaly: backward of div produced Inf; inputs [4,3] x [4,3]");
}

Test(anomaly, backward_nan_names_the_rule)
{
    /* sqrt(0) = 0 is fine; its gradient 0 * 0.5 / sqrt(0) is NaN */
    em_tensor *x = em_requires_grad_(em_zeros(EM_SHAPE(2, 5), EM_F32), true);
    em_tensor *loss = em_sum_all(em_mul_scalar(em_sqrt(x), 0.0));
    cr_assert_not_null(loss, "%s", em_error());
    cr_expect_eq(em_backward(loss), EM_ERR_NUMERIC);
    cr_expect_str_eq(em_error(), "anomaly: backward of sqrt produced NaN; inputs [2,5]");
}

Test(anomaly, off_nothing_is_checked)
{
    cr_expect(em_anomaly_mode());
    cr_expect(em_set_anomaly_mode(false), "returns the previous mode");
    em_tensor *x = em_requires_grad_(f32(EM_SHAPE(4, 3), vals), true);
    em_tensor *y = em_log(x);
    cr_assert_not_null(y, "%s", em_error());
    cr_expect(isnan(em_get(y, (int64_t[]){1, 0})));
    em_tensor *z = em_requires_grad_(em_zeros(EM_SHAPE(2), EM_F32), true);
    cr_expect_eq(em_backward(em_sum_all(em_mul_scalar(em_sqrt(z), 0.0))), EM_OK);
    cr_expect(!em_has_error(), "%s", em_error());
}

Test(anomaly, finite_runs_pass_through)
{
    em_tensor *x = em_requires_grad_(f32(EM_SHAPE(4, 3), (const float[12]){1, 2, 3, 4, 5, 6, 7,
                                                                           8, 9, 10, 11, 12}),
                                     true);
    em_tensor *loss = em_mean_all(em_log(em_softmax(x, 1)));
    cr_assert_not_null(loss, "%s", em_error());
    cr_expect_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_expect_not_null(x->grad);
}
