/* em_outer, em_addmm and em_baddbmm: values against PyTorch 2.15's torch.outer, torch.addmm and
 * torch.baddbmm (computed in f64 on the inputs below and printed to 10 digits), beta 0 leaving
 * a NaN input out, and argument errors. Gradients are checked by the op cases. */
#include <criterion/criterion.h>
#include <math.h>

#include "helpers/reference.h"

TestSuite(products, .init = em_scope_begin, .fini = em_scope_end);

static em_tensor *wave(em_shape s, double a, double b)
{
    return em_ref_wave(s, a, b, 1);
}

static void expect_values(const em_tensor *t, const double *want, int64_t n)
{
    cr_assert(em_ref_close(t, want, n, 1e-9), "%s", em_error());
}

Test(products, outer_addmm_baddbmm_as_pytorch)
{
    em_tensor *u = wave(EM_SHAPE(3), 0.6, 0.1), *v = wave(EM_SHAPE(2), 1.3, 0.2);
    em_tensor *o = em_outer(u, v);
    cr_assert(o && o->ndim == 2 && o->shape[0] == 3 && o->shape[1] == 2, "%s", em_error());
    expect_values(o, (double[]){0.0198338381, 0.0995833326, 0.1279862968, 0.6426039133,
                                0.1914294599, 0.9611444593}, 6);

    em_tensor *a = wave(EM_SHAPE(2, 3), 0.3, 0.1), *b = wave(EM_SHAPE(3, 4), 0.7, 0.2);
    em_tensor *in = wave(EM_SHAPE(1, 4), 0.9, 0.1); /* broadcast over the rows */
    expect_values(em_addmm(in, a, b, 0.5, -1.5),
                  (double[]){0.3866912841, 0.4050479055, 0.1123784116, -0.3686850667,
                             0.2917950955, -0.1247352733, -0.6031264505, -0.9333984953}, 8);

    em_tensor *b1 = wave(EM_SHAPE(2, 2, 3), 0.5, 0.3), *b2 = wave(EM_SHAPE(2, 3, 2), 0.9, -0.4);
    em_tensor *bi = wave(EM_SHAPE(2), 0.7, 0.0); /* broadcast over batches and rows */
    expect_values(em_baddbmm(bi, b1, b2, -2.0, 0.75),
                  (double[]){0.4016928700, -1.3723164980, 0.2520496677, -0.7267974600,
                             -0.6179179370, -1.6460280251, 0.1521071084, -1.5997320039}, 8);
}

Test(products, beta_zero_leaves_a_nan_input_out)
{
    em_tensor *a = wave(EM_SHAPE(2, 3), 0.3, 0.1), *b = wave(EM_SHAPE(3, 4), 0.7, 0.2);
    em_tensor *nan = em_full(EM_SHAPE(2, 4), EM_F64, NAN);
    em_tensor *want = em_matmul(a, b), *y = em_addmm(nan, a, b, 0, 1);
    cr_assert_not_null(y, "%s", em_error());
    for (int64_t i = 0; i < 8; i++)
        cr_assert_eq(em_get(y, (int64_t[]){i / 4, i % 4}), em_get(want, (int64_t[]){i / 4, i % 4}));
    em_tensor *b1 = wave(EM_SHAPE(2, 2, 3), 0.5, 0.3), *b2 = wave(EM_SHAPE(2, 3, 2), 0.9, -0.4);
    em_tensor *yb = em_baddbmm(em_full(EM_SHAPE(2, 2, 2), EM_F64, NAN), b1, b2, 0, 2);
    cr_assert_not_null(yb, "%s", em_error());
    cr_assert(isfinite(em_item(em_sum_all(yb))));
    /* beta 1 lets it through, as PyTorch's */
    cr_assert(isnan(em_get(em_addmm(nan, a, b, 1, 1), (int64_t[]){0, 0})));
}

Test(products, autocast_runs_them_in_its_low_dtype)
{
    em_tensor *in = em_ones(EM_SHAPE(2, 2), EM_F32), *m = em_ones(EM_SHAPE(2, 2), EM_F32);
    em_tensor *b = em_ones(EM_SHAPE(1, 2, 2), EM_F32);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *y = em_addmm(in, m, m, 1, 1), *yb = em_baddbmm(in, b, b, 0.5, 2);
    cr_assert_eq(em_autocast_end(), EM_OK);
    cr_assert(y && yb, "%s", em_error());
    cr_assert(y->dtype == EM_BF16 && yb->dtype == EM_BF16);
    cr_assert_eq(em_get(y, (int64_t[]){1, 1}), 3.0);               /* 1 + (1 + 1) */
    cr_assert_eq(em_get(yb, (int64_t[]){0, 1, 0}), 4.5);            /* 0.5 + 2 (1 + 1) */
}

Test(products, bad_arguments_are_named)
{
    em_tensor *m = em_zeros(EM_SHAPE(3, 4), EM_F32), *n = em_zeros(EM_SHAPE(5, 5), EM_F32);
    cr_assert_null(em_outer(m, em_zeros(EM_SHAPE(3), EM_F32)));
    cr_assert_str_eq(em_error(), "em_outer: expected 1-D a and b, got [3,4] and [3]");
    em_error_clear();
    cr_assert_null(em_addmm(em_zeros(EM_SHAPE(3, 5), EM_F32), m, n, 1, 1));
    cr_assert_str_eq(em_error(), "em_addmm: expected mat1 (n, m) and mat2 (m, p), got [3,4] and "
                                 "[5,5]");
    em_error_clear();
    cr_assert_null(em_addmm(em_zeros(EM_SHAPE(2, 5), EM_F32), m, em_zeros(EM_SHAPE(4, 5), EM_F32),
                            1, 1));
    cr_assert_str_eq(em_error(), "em_addmm: input [2,5] does not broadcast to the product's "
                                 "shape [3,5]");
    em_error_clear();
    cr_assert_null(em_addmm(em_zeros(EM_SHAPE(3, 5), EM_F64), m, em_zeros(EM_SHAPE(4, 5), EM_F32),
                            1, 1));
    cr_assert_str_eq(em_error(), "em_addmm: dtypes differ: f64 [3,5] and f32 [3,4]");
    em_error_clear();
    em_tensor *b1 = em_zeros(EM_SHAPE(2, 3, 4), EM_F32);
    cr_assert_null(em_baddbmm(em_zeros(EM_SHAPE(2, 1, 1, 1), EM_F32), b1,
                              em_zeros(EM_SHAPE(2, 4, 5), EM_F32), 1, 1));
    cr_assert_str_eq(em_error(), "em_baddbmm: input [2,1,1,1] does not broadcast to the "
                                 "product's shape [2,3,5]");
    em_error_clear();
    cr_assert_null(em_baddbmm(em_zeros(EM_SHAPE(3, 5), EM_F32), b1,
                              em_zeros(EM_SHAPE(3, 4, 5), EM_F32), 1, 1));
    cr_assert_str_eq(em_error(), "em_baddbmm: expected batch1 (B, n, m) and batch2 (B, m, p), "
                                 "got [2,3,4] and [3,4,5]");
    em_error_clear();
    cr_assert_null(em_baddbmm(NULL, b1, em_zeros(EM_SHAPE(2, 4, 5), EM_F32), 1, 1));
    cr_assert_str_eq(em_error(), "em_baddbmm: input is NULL");
    em_error_clear();
}
