/* The op registries' formulas (backend/binary_ops_internal.h) against libm and hand values: what
 * every backend's kernels compute, checked once here. */
#include <criterion/criterion.h>
#include <math.h>

#include "backend/backend_internal.h"

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
