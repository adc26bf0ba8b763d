/* Cross-backend parity: every op case (helpers/op_cases.c), in each of its input layouts, on
 * every available device other than the CPU against the CPU, forward in f32, f16 and bf16 and
 * gradients in f32. f32 agrees within
 * 1e-5 relative (TF32 off), f16/bf16 within two units of their rounding, integer, bool, index
 * and RNG outputs exactly; a case without a CUDA kernel yet must fail there with the clear "not
 * supported on cuda". Prints one line per case; where no GPU is present the test reports
 * itself skipped. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/op_cases.h"

TestSuite(cuda_parity, .init = em_scope_begin, .fini = em_scope_end);

static void skip_without_cuda(void)
{
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, EM_CUDA);
    if (!probe)
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    em_release(probe);
}

static double tolerance(em_dtype dt, unsigned flags)
{
    if (flags & EM_CASE_EXACT)
        return 0;
    return dt == EM_F32 ? 1e-5 : dt == EM_F16 ? 2.0 / 1024 : 2.0 / 128;
}

/* t's elements as f64 on the host (t on any device); NULL for NULL. */
static double *host_values(const em_tensor *t, int64_t *n)
{
    if (!t)
        return NULL;
    *n = em_numel(t);
    double *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    cr_assert_eq(em_copy_to_host(t, EM_F64, v), EM_OK, "%s", em_error());
    return v;
}

/* Where got and want differ most: the first differing element, the worst one and their values,
 * printed under a failing case so that one GPU run says enough to fix it offline. */
typedef struct {
    int64_t first, at;
    double got, want;
} difference;

static void print_difference(const char *what, const em_tensor *want_t, difference d)
{
    char shape[128];
    int len = snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < want_t->ndim && len < (int)sizeof shape - 24; i++)
        len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%lld", i ? ", " : "",
                        (long long)want_t->shape[i]);
    snprintf(shape + len, sizeof shape - (size_t)len, ")");
    printf("      %s %s %s: first difference at flat index %lld, worst at %lld: cuda %.9g, "
           "cpu %.9g\n", what, em_dtype_name(want_t->dtype), shape, (long long)d.first,
           (long long)d.at, d.got, d.want);
}

/* The largest error of got against want in units of tol * (|want| + mean |want|); 0 when equal.
 * An element count mismatch or NaN where want is finite counts as infinite. Prints where they
 * differ when the error fails (> 1). */
static double worst(const char *what, const em_tensor *got_t, const em_tensor *want_t, double tol)
{
    int64_t n = 0, m = 0;
    double *got = host_values(got_t, &n), *want = host_values(want_t, &m);
    double scale = 0, err = n == m ? 0 : INFINITY;
    difference d = {-1, -1, NAN, NAN};
    for (int64_t i = 0; i < m; i++)
        scale += fabs(want[i]) / (double)m;
    for (int64_t i = 0; n == m && i < n; i++) {
        double diff = fabs(got[i] - want[i]);
        if (got[i] == want[i] || (isnan(got[i]) && isnan(want[i])))
            continue;
        double e = tol > 0 ? diff / (tol * (fabs(want[i]) + scale)) : INFINITY;
        e = isnan(e) ? INFINITY : e;
        if (e > 1 && d.first < 0)
            d.first = i;
        if (e > err || d.at < 0)
            d = (difference){d.first, i, got[i], want[i]};
        err = fmax(err, e);
    }
    if (n != m)
        printf("      %s: cuda has %lld elements, cpu %lld\n", what, (long long)n, (long long)m);
    else if (err > 1)
        print_difference(what, want_t, d);
    free(got);
    free(want);
    return err;
}

/* One case in one layout and dtype on dev against the CPU; gradients too when asked. Returns the
 * worst error in tolerance units (> 1 fails) and prints it. */
static double run_case(int k, unsigned layout, em_dtype dt, em_device dev, bool grads)
{
    const em_op_case *c = &em_op_cases[k];
    const char *lname = em_case_layout_name(layout);
    em_scope_begin();
    em_tensor *in_cpu[EM_CASE_MAX_INPUTS], *in_dev[EM_CASE_MAX_INPUTS];
    cr_assert(em_op_case_inputs(k, layout, dt, EM_CPU, grads, in_cpu), "%s", em_error());
    if (!em_op_case_inputs(k, layout, dt, dev, grads, in_dev)) {
        printf("  %-28s %-10s %-4s inputs on %s: %s FAIL\n", c->name, lname, em_dtype_name(dt),
               em_device_name(dev), em_error());
        em_scope_end();
        return INFINITY;
    }
    em_tensor *want = em_op_case_apply(k, layout, in_cpu, EM_CPU);
    cr_assert(want, "%s %s on cpu: %s", c->name, lname, em_error());
    em_tensor *got = em_op_case_apply(k, layout, in_dev, dev);
    double tol = tolerance(dt, c->flags);
    char what[96];
    snprintf(what, sizeof what, "%s %s %s output", c->name, lname, em_dtype_name(dt));
    double err = got ? worst(what, got, want, tol) : INFINITY;
    if (!got)
        printf("  %-28s %-10s %-4s error: %s\n", c->name, lname, em_dtype_name(dt), em_error());
    double gerr = 0;
    if (got && grads) {
        em_generator gen = em_generator_new(99);
        em_tensor *w = em_uniform(em_shape_of(want), want->dtype, -1, 1, &gen);
        em_tensor *w_dev = em_to_device(w, dev);
        cr_assert_eq(em_backward_grad(want, w), EM_OK, "%s", em_error());
        if (em_backward_grad(got, w_dev) != EM_OK) {
            printf("  %-28s %-10s backward error: %s\n", c->name, lname, em_error());
            gerr = INFINITY;
        }
        for (int i = 0; i < c->n_inputs && gerr < INFINITY; i++)
            if (in_cpu[i]->grad) {
                snprintf(what, sizeof what, "%s %s grad of input %d", c->name, lname, i);
                gerr = fmax(gerr, worst(what, in_dev[i]->grad, in_cpu[i]->grad, tol));
            }
    }
    em_scope_end();
    printf("  %-28s %-10s %-4s forward %8.3f%s", c->name, lname, em_dtype_name(dt), err,
           err > 1 ? " FAIL" : "");
    if (grads)
        printf("   grad %8.3f%s", gerr, gerr > 1 ? " FAIL" : "");
    printf("\n");
    return fmax(err, gerr);
}

Test(cuda_parity, every_op_case_matches_the_cpu)
{
    skip_without_cuda();
    const em_dtype dts[3] = {EM_F32, EM_F16, EM_BF16};
    int failed = 0;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each case's line reaches the log before a crash */
    printf("parity against the cpu (errors in units of the tolerance; > 1 fails):\n");
    for (int k = 0; k < em_n_op_cases; k++) {
        const em_op_case *c = &em_op_cases[k];
        for (int v = 0; v < EM_CASE_N_LAYOUTS; v++)
            for (int t = 0; t < 3; t++) {
                if (!em_op_case_has_layout(k, em_case_layouts[v]) ||
                    (dts[t] != EM_F32 && (c->flags & EM_CASE_NO_HALF)))
                    continue;
                bool grads = dts[t] == EM_F32 && !(c->flags & EM_CASE_NO_GRAD);
                failed += run_case(k, em_case_layouts[v], dts[t], EM_CUDA, grads) > 1;
            }
    }
    cr_assert_eq(failed, 0, "%d op case/layout/dtype triples differ between cuda and cpu",
                 failed);
}
