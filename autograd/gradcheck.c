/* Gradient checking: em_backward's gradients against central finite differences, in f64. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"
#include "autograd/gradcheck.h"

/* A deterministic weight in [-1, 1) for element i (an LCG step; no global state). */
static double weight(int64_t i)
{
    uint64_t z = (uint64_t)i * 6364136223846793005ull + 1442695040888963407ull;
    z ^= z >> 29;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 32;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* L = sum(fn(inputs) * W) with grad mode off; NAN when fn fails. */
static double loss_value(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs)
{
    bool prev = em_set_grad_enabled(false);
    em_scope_begin();
    double loss = NAN;
    em_tensor *out = fn(inputs, ctx);
    int64_t m = out ? em_numel(out) : 0;
    double *v = out ? malloc((size_t)(m > 0 ? m : 1) * sizeof *v) : NULL;
    if (v && em_copy_to_host(out, EM_F64, v) == EM_OK) {
        loss = 0;
        for (int64_t i = 0; i < m; i++)
            loss += v[i] * weight(i);
    }
    free(v);
    em_scope_end();
    em_set_grad_enabled(prev);
    return loss;
}

/* The analytic gradients: backward of fn's output seeded with W. */
static bool analytic(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n)
{
    for (int i = 0; i < n; i++)
        em_zero_grad(inputs[i]);
    em_scope_begin();
    em_tensor *out = fn(inputs, ctx);
    bool ok = false;
    if (out) {
        int64_t m = em_numel(out);
        double *w = malloc((size_t)(m > 0 ? m : 1) * sizeof *w);
        for (int64_t i = 0; w && i < m; i++)
            w[i] = weight(i);
        em_tensor *wt = w ? em_from_data(em_shape_of(out), EM_F64, w) : NULL;
        ok = wt && em_backward_grad(out, wt) == EM_OK;
        free(w);
    }
    if (!ok && !em_has_error())
        em_set_error(EM_ERR_MEMORY, "em_gradcheck: out of memory");
    em_scope_end();
    return ok;
}

/* The first element of input i whose gradient disagrees with its central difference; EM_OK
 * when none does. */
static em_status check_input(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int i,
                             em_gradcheck_opts o)
{
    int64_t m = em_numel(inputs[i]);
    double *g = calloc((size_t)(m > 0 ? m : 1), sizeof *g);
    if (!g)
        return em_set_error(EM_ERR_MEMORY, "em_gradcheck: out of memory");
    em_status st = inputs[i]->grad ? em_copy_to_host(inputs[i]->grad, EM_F64, g) : EM_OK;
    double *x = em_data_ptr(inputs[i]);
    for (int64_t j = 0; j < m && st == EM_OK; j++) {
        double keep = x[j];
        x[j] = keep + o.eps;
        double lp = loss_value(fn, ctx, inputs);
        x[j] = keep - o.eps;
        double lm = loss_value(fn, ctx, inputs);
        x[j] = keep;
        double num = (lp - lm) / (2 * o.eps);
        double scale = fmax(1.0, fmax(fabs(g[j]), fabs(num)));
        if (!(fabs(g[j] - num) <= o.tol * scale))
            st = em_set_error(EM_ERR_NUMERIC, "em_gradcheck: input %d element %lld: analytic "
                              "%.12g, numeric %.12g", i, (long long)j, g[j], num);
    }
    free(g);
    return st;
}

em_status em_gradcheck(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n,
                       em_gradcheck_opts o)
{
    if (!fn || n < 0 || (n > 0 && !inputs))
        return em_set_error(EM_ERR_ARG, "em_gradcheck: need a function and %d inputs", n);
    for (int i = 0; i < n; i++)
        if (!inputs[i] || (inputs[i]->requires_grad &&
                           (inputs[i]->dtype != EM_F64 || inputs[i]->device != EM_CPU ||
                            !em_is_contiguous(inputs[i]))))
            return em_set_error(EM_ERR_ARG, "em_gradcheck: input %d must be a contiguous f64 "
                                "CPU leaf", i);
    o.eps = o.eps > 0 ? o.eps : 1e-6;
    o.tol = o.tol > 0 ? o.tol : 1e-6;
    if (!analytic(fn, ctx, inputs, n))
        return em_error_status();
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++)
        if (inputs[i]->requires_grad)
            st = check_input(fn, ctx, inputs, i, o);
    return st;
}
