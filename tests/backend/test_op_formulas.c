/* The op registries' formulas (backend/binary_ops_internal.h, backend/reduce_ops_internal.h)
 * against libm and hand values: what every backend's kernels compute, checked once here. */
#include <criterion/criterion.h>
#include <math.h>

#include "backend/backend_internal.h"

/* ---- binary ---- */

/* The formulas themselves against libm and hand values: NaN propagation, comparisons with NaN,
 * integer wrapping. */
Test(binary_formulas, match_libm_and_hand_values)
{
    const double pts[][2] = {{2.5, -1.25}, {-3.0, 3.0}, {0.0, 0.0}, {7.0, 0.5}, {NAN, 1.0},
                             {1.0, NAN}, {-0.0, 0.0}, {INFINITY, 2.0}};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        const double a = pts[i][0], b = pts[i][1];
        const double want[EM_BINARY_COUNT] = {
            [EM_BINARY_ADD] = a + b, [EM_BINARY_SUB] = a - b, [EM_BINARY_MUL] = a * b,
            [EM_BINARY_DIV] = a / b, [EM_BINARY_POW] = pow(a, b),
            [EM_BINARY_MAXIMUM] = isnan(a) || isnan(b) ? NAN : fmax(a, b),
            [EM_BINARY_MINIMUM] = isnan(a) || isnan(b) ? NAN : fmin(a, b),
            [EM_BINARY_EQ] = a == b, [EM_BINARY_NE] = a != b, [EM_BINARY_LT] = a < b,
            [EM_BINARY_LE] = a <= b, [EM_BINARY_GT] = a > b, [EM_BINARY_GE] = a >= b};
        for (int op = 0; op < EM_BINARY_COUNT; op++) {
            const double got = em_binary_value_f64(op, a, b);
            cr_assert(isnan(want[op]) ? isnan(got) : got == want[op], "op %d (%g, %g): %g vs %g",
                      op, a, b, got, want[op]);
            const float got32 = em_binary_value_f32(op, (float)a, (float)b);
            cr_assert(isnan(want[op]) ? isnan(got32)
                                      : got32 == want[op] ||
                                            fabs(got32 - want[op]) <= 1e-6 * fabs(want[op]),
                      "f32 op %d (%g, %g): %g vs %g", op, a, b, got32, want[op]);
        }
    }
    cr_assert(em_binary_value_f64(EM_BINARY_MAXIMUM, -0.0, 0.0) == 0.0); /* the later on a tie */
    cr_assert_eq(em_binary_int_value(EM_BINARY_ADD, INT64_MAX, 1), INT64_MIN);
    cr_assert_eq(em_binary_int_value(EM_BINARY_MUL, INT64_MIN, -1), INT64_MIN);
    cr_assert_eq(em_binary_int_value(EM_BINARY_SUB, -4, 9), -13);
    cr_assert_eq(em_binary_int_value(EM_BINARY_MINIMUM, -4, 9), -4);
    cr_assert_eq(em_binary_int_value(EM_BINARY_GE, 9, 9), 1);
    cr_assert_eq(em_binary_int_value(EM_BINARY_LT, 9, 9), 0);
}

Test(binary_formulas, the_gradient_is_g_where_the_registry_says_so)
{
    const double pts[][3] = {{2.5, -1.25, 0.5}, {-3.0, 3.0, -2.0}, {0.0, 0.0, 1e300}};
    for (int op = 0; op < EM_BINARY_COUNT; op++)
        for (int wrt_b = 0; wrt_b < 2; wrt_b++)
            for (int i = 0; i < 3; i++) {
                const double a = pts[i][0], b = pts[i][1], g = pts[i][2];
                const double got =
                    em_binary_grad_value_f64(op, wrt_b, g, a, b, em_binary_value_f64(op, a, b));
                if (em_binary_grad_is_g(op, wrt_b))
                    cr_assert_eq(got, g, "op %d by %d", op, wrt_b);
                if (em_binary_is_compare(op))
                    cr_assert_eq(got, 0, "comparison %d", op);
            }
    cr_assert(em_binary_grad_is_g(EM_BINARY_ADD, true));
    cr_assert(!em_binary_grad_is_g(EM_BINARY_SUB, true));
}

/* ---- reductions ---- */

static const em_fold folds[] = {
#define FOLD_ENTRY(k) k,
    EM_FOLDS(FOLD_ENTRY)
#undef FOLD_ENTRY
};
#define N_FOLDS (int)(sizeof folds / sizeof folds[0])

Test(reduce_formulas, the_identity_changes_no_element)
{
    const double xs[] = {-3.5, 0.0, 2.25, -INFINITY, INFINITY, NAN};
    const int64_t is[] = {-7, 0, 9, INT64_MIN, INT64_MAX};
    for (int f = 0; f < N_FOLDS; f++) {
        const em_fold k = folds[f];
        for (int i = 0; i < 6; i++) {
            const double x = xs[i], mean = 0.5;
            const double got = em_fold_step_f(k, em_fold_identity_f(k), x, mean);
            const double want = k == EM_FOLD_SQDEV ? (x - mean) * (x - mean) : x;
            cr_assert(isnan(want) ? isnan(got) : got == want, "fold %d x %g: %g", k, x, got);
        }
        for (int i = 0; i < 5 && k != EM_FOLD_SQDEV; i++)
            cr_assert_eq(em_fold_step_i(k, em_fold_identity_i(k), is[i]), is[i], "fold %d", k);
    }
}

/* The folds of a short row, step by step and as partial results combined. */
Test(reduce_formulas, steps_and_combinations_match_hand_values)
{
    const double x[] = {1.5, -2.0, 4.0, 0.25};
    double sum = em_fold_identity_f(EM_FOLD_SUM), prod = em_fold_identity_f(EM_FOLD_PROD);
    double max = em_fold_identity_f(EM_FOLD_MAX), min = em_fold_identity_f(EM_FOLD_MIN);
    double sq = em_fold_identity_f(EM_FOLD_SQDEV);
    for (int i = 0; i < 4; i++) {
        sum = em_fold_step_f(EM_FOLD_SUM, sum, x[i], 0);
        prod = em_fold_step_f(EM_FOLD_PROD, prod, x[i], 0);
        max = em_fold_step_f(EM_FOLD_MAX, max, x[i], 0);
        min = em_fold_step_f(EM_FOLD_MIN, min, x[i], 0);
        sq = em_fold_step_f(EM_FOLD_SQDEV, sq, x[i], 0.9375);
    }
    cr_assert(sum == 3.75 && prod == -3.0 && max == 4.0 && min == -2.0);
    cr_assert_eq(sq, 18.796875); /* 0.5625^2 + 2.9375^2 + 3.0625^2 + 0.6875^2 */
    /* partial results: sums and squared deviations add, NaN wins max and min from either side */
    cr_assert_eq(em_fold_combine_f(EM_FOLD_SQDEV, 2.5, 4.0), 6.5);
    cr_assert_eq(em_fold_combine_f(EM_FOLD_PROD, -2.0, 4.0), -8.0);
    cr_assert(isnan(em_fold_combine_f(EM_FOLD_MAX, 1.0, NAN)));
    cr_assert(isnan(em_fold_combine_f(EM_FOLD_MIN, NAN, 1.0)));
    cr_assert_eq(em_fold_step_i(EM_FOLD_SUM, INT64_MAX, 1), INT64_MIN); /* wraps */
    cr_assert_eq(em_fold_step_i(EM_FOLD_PROD, INT64_MIN, -1), INT64_MIN);
}

/* The position an arg fold gives for xs (n): sequentially, and as the partial results of single
 * elements met from the last one back (the total order's any-order combination). */
static void arg_positions(bool max, const double *xs, int n, int64_t *forward, int64_t *backward)
{
    const em_fold k = max ? EM_FOLD_ARGMAX : EM_FOLD_ARGMIN;
    double v = em_fold_identity_f(k), w = em_fold_identity_f(k);
    *forward = *backward = EM_ARG_NONE;
    for (int i = 0; i < n; i++) {
        if (em_fold_arg_better_f(max, xs[i], i, v, *forward)) {
            v = xs[i];
            *forward = i;
        }
        const int j = n - 1 - i;
        if (em_fold_arg_better_f(max, xs[j], j, w, *backward)) {
            w = xs[j];
            *backward = j;
        }
    }
}

Test(reduce_formulas, arg_folds_pick_the_first_nan_else_the_first_extreme)
{
    const double rows[][6] = {{3, 7, 7, NAN, NAN, -1}, {3, 7, 7, -1, -1, 2},
                              {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
                              {5, -1, 5, -1, 0, 0}};
    const int64_t want_max[] = {3, 1, 0, 0}, want_min[] = {3, 3, 0, 1};
    for (int r = 0; r < 4; r++) {
        int64_t f, b;
        arg_positions(true, rows[r], 6, &f, &b);
        cr_assert(f == want_max[r] && b == want_max[r], "argmax row %d: %ld %ld", r, (long)f,
                  (long)b);
        arg_positions(false, rows[r], 6, &f, &b);
        cr_assert(f == want_min[r] && b == want_min[r], "argmin row %d: %ld %ld", r, (long)f,
                  (long)b);
    }
    cr_assert(em_fold_arg_better_i(true, INT64_MIN, 0, em_fold_identity_i(EM_FOLD_ARGMAX),
                                   EM_ARG_NONE));
    cr_assert(!em_fold_arg_better_i(true, 9, 4, 9, 2) && em_fold_arg_better_i(true, 9, 2, 9, 4));
    cr_assert(em_fold_arg_takes_f(false, NAN, -INFINITY) && !em_fold_arg_takes_f(false, 1, NAN));
}

Test(reduce_formulas, every_op_has_its_fold_and_divisor)
{
    const em_reduce_params unbiased = {.correction = 1};
    const em_fold want[EM_REDUCE_COUNT] = {
        [EM_REDUCE_SUM] = EM_FOLD_SUM, [EM_REDUCE_MEAN] = EM_FOLD_SUM,
        [EM_REDUCE_PROD] = EM_FOLD_PROD, [EM_REDUCE_MAX] = EM_FOLD_MAX,
        [EM_REDUCE_MIN] = EM_FOLD_MIN, [EM_REDUCE_ARGMAX] = EM_FOLD_ARGMAX,
        [EM_REDUCE_ARGMIN] = EM_FOLD_ARGMIN, [EM_REDUCE_VAR] = EM_FOLD_SQDEV};
    for (int op = 0; op < EM_REDUCE_COUNT; op++) {
        cr_assert_eq(em_reduce_fold(op), want[op], "op %d", op);
        const double div = em_reduce_divisor(op, &unbiased, 5);
        cr_assert_eq(div, op == EM_REDUCE_MEAN ? 5 : op == EM_REDUCE_VAR ? 4 : 1, "op %d", op);
    }
    cr_assert_eq(em_reduce_divisor(EM_REDUCE_VAR, &unbiased, 1), 0); /* inf or NaN, as PyTorch */
    for (int f = 0; f < N_FOLDS; f++)
        cr_assert_eq(em_fold_is_arg(folds[f]),
                     folds[f] == EM_FOLD_ARGMAX || folds[f] == EM_FOLD_ARGMIN);
}
