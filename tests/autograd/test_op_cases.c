/* The op-case table (helpers/op_cases.c) on the CPU, every case in each of its input layouts:
 * every differentiable case passes the f64 finite-difference gradient check and leaves its fixed
 * and index inputs without a gradient, and every case's f32, f16 and bf16 forward values agree
 * with its f64 values on the same (rounded) inputs; and every op of the unary and binary op
 * lists (backend/unary_ops_internal.h, backend/binary_ops_internal.h) has a case. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/binary_ops_internal.h"
#include "backend/unary_ops_internal.h"
#include "helpers/gradcheck.h"
#include "helpers/op_cases.h"

TestSuite(op_cases, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    int k;
    unsigned layout;
} case_ctx;

static em_tensor *apply_case(em_tensor *const *inputs, void *ctx)
{
    const case_ctx *c = ctx;
    return em_op_case_apply(c->k, c->layout, inputs, EM_CPU);
}

Test(op_cases, f64_gradients_match_finite_differences)
{
    int failed = 0, checked = 0;
    for (int k = 0; k < em_n_op_cases; k++) {
        const em_op_case *c = &em_op_cases[k];
        for (int v = 0; v < EM_CASE_N_LAYOUTS; v++) {
            case_ctx ctx = {k, em_case_layouts[v]};
            if ((c->flags & EM_CASE_NO_GRAD) || !em_op_case_has_layout(k, ctx.layout))
                continue;
            const char *layout = em_case_layout_name(ctx.layout);
            em_scope_begin();
            em_tensor *in[EM_CASE_MAX_INPUTS];
            cr_assert(em_op_case_inputs(k, ctx.layout, EM_F64, EM_CPU, true, in), "%s %s: %s",
                      c->name, layout, em_error());
            if (!em_test_gradcheck_default(apply_case, &ctx, in, c->n_inputs)) {
                cr_log_error("gradient check failed: %s %s (%s)", c->name, layout, em_error());
                failed++;
            }
            for (int i = 0; i < c->n_inputs; i++)
                cr_expect(in[i]->requires_grad || !in[i]->grad,
                          "%s %s: input %d is held fixed but got a gradient", c->name, layout, i);
            checked++;
            em_scope_end();
        }
    }
    cr_assert_eq(failed, 0, "%d of %d gradient checks failed", failed, checked);
}

/* The case's output on inputs of dtype, widened to f64 on the host; *n its element count. */
static double *forward_values(int k, unsigned layout, em_dtype dtype, em_tensor **in, int64_t *n)
{
    em_tensor *y = em_op_case_apply(k, layout, in, EM_CPU);
    cr_assert(y, "%s %s in %s: %s", em_op_cases[k].name, em_case_layout_name(layout),
              em_dtype_name(dtype), em_error());
    *n = em_numel(y);
    double *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    cr_assert_eq(em_copy_to_host(y, EM_F64, v), EM_OK, "%s", em_error());
    return v;
}

/* Largest relative error a dtype's result may show against f64 on the same inputs: its rounding
 * of the output (and of intermediates the op keeps in that dtype), a few units of it. */
static double dtype_tolerance(em_dtype dt)
{
    switch (dt) {
    case EM_F32:
        return 2e-6;
    case EM_F16:
        return 4e-3;  /* 2^-10 per rounding, a few roundings deep */
    default:
        return 3e-2;  /* bf16: 2^-7 per rounding */
    }
}

/* Case k in layout and dtype against f64 on the same rounded inputs; false (logged) when an
 * element disagrees. */
static bool forward_matches_f64(int k, unsigned layout, em_dtype dt)
{
    const em_op_case *c = &em_op_cases[k];
    em_scope_begin();
    em_tensor *low[EM_CASE_MAX_INPUTS], *wide[EM_CASE_MAX_INPUTS];
    cr_assert(em_op_case_inputs(k, layout, dt, EM_CPU, false, low), "%s", em_error());
    for (int i = 0; i < c->n_inputs; i++) /* f64 copies of the rounded inputs */
        wide[i] = low[i]->dtype == EM_I64 ? low[i] : em_to_dtype(low[i], EM_F64);
    int64_t n, n64;
    double *got = forward_values(k, layout, dt, low, &n);
    double *want = forward_values(k, layout, EM_F64, wide, &n64);
    cr_assert_eq(n, n64);
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale += fabs(want[i]) / (double)n;
    double tol = (c->flags & EM_CASE_EXACT) ? 0 : dtype_tolerance(dt);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (fabs(want[i]) + scale))) {
            cr_log_error("%s %s in %s: element %lld is %.9g, f64 gives %.9g", c->name,
                         em_case_layout_name(layout), em_dtype_name(dt), (long long)i, got[i],
                         want[i]);
            ok = false;
        }
    free(got);
    free(want);
    em_scope_end();
    return ok;
}

Test(op_cases, low_precision_forward_matches_f64)
{
    const em_dtype dts[3] = {EM_F32, EM_F16, EM_BF16};
    int failed = 0;
    for (int k = 0; k < em_n_op_cases; k++) {
        const em_op_case *c = &em_op_cases[k];
        if (c->flags & EM_CASE_RNG)
            continue;
        for (int v = 0; v < EM_CASE_N_LAYOUTS; v++)
            for (int t = 0; t < 3; t++) {
                /* exact outputs (truncating casts, comparisons) of f16/bf16 arithmetic are not
                 * those of f64: a rounded intermediate lands on the other side of an integer */
                if (!em_op_case_has_layout(k, em_case_layouts[v]) ||
                    (dts[t] != EM_F32 && (c->flags & (EM_CASE_NO_HALF | EM_CASE_EXACT))))
                    continue;
                failed += !forward_matches_f64(k, em_case_layouts[v], dts[t]);
            }
    }
    cr_assert_eq(failed, 0, "%d op case/layout/dtype triples disagree with f64", failed);
}

Test(op_cases, rng_cases_repeat_for_a_seed)
{
    for (int k = 0; k < em_n_op_cases; k++) {
        const em_op_case *c = &em_op_cases[k];
        if (!(c->flags & EM_CASE_RNG))
            continue;
        em_tensor *in[EM_CASE_MAX_INPUTS];
        cr_assert(em_op_case_inputs(k, 0, EM_F32, EM_CPU, false, in), "%s", em_error());
        int64_t n, n2;
        double *a = forward_values(k, 0, EM_F32, in, &n);
        double *b = forward_values(k, 0, EM_F32, in, &n2);
        cr_assert_eq(n, n2);
        bool varied = false;
        for (int64_t i = 0; i < n; i++) {
            cr_assert_eq(a[i], b[i], "%s: element %lld differs between two seeded runs", c->name,
                         (long long)i);
            varied |= a[i] != a[0];
        }
        cr_assert(varied, "%s: every element is the same", c->name);
        free(a);
        free(b);
    }
}

/* Whether a case is named for the op enum_name (less prefix, in lower case): that name itself,
 * or it and a suffix after '_' ("add_broadcast"). */
static bool has_case_for(const char *enum_name, const char *prefix)
{
    char name[64];
    const char *op = enum_name + strlen(prefix);
    size_t n = 0;
    for (; op[n] && n + 1 < sizeof name; n++)
        name[n] = (char)tolower((unsigned char)op[n]);
    name[n] = '\0';
    for (int k = 0; k < em_n_op_cases; k++) {
        const char *c = em_op_cases[k].name;
        if (strncmp(c, name, n) == 0 && (c[n] == '\0' || c[n] == '_'))
            return true;
    }
    return false;
}

#define OP_NAME(op) #op,
Test(op_cases, every_unary_and_binary_op_has_a_case)
{
    static const char *const unary[] = {EM_UNARY_OPS(OP_NAME)};
    static const char *const binary[] = {EM_BINARY_OPS(OP_NAME)};
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
        cr_expect(has_case_for(unary[i], "EM_UNARY_"), "no op case for %s", unary[i]);
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++)
        cr_expect(has_case_for(binary[i], "EM_BINARY_"), "no op case for %s", binary[i]);
    cr_assert(!has_case_for("EM_BINARY_ATAN2", "EM_BINARY_")); /* the check can fail */
}
