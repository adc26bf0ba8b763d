/* Central-difference gradient checking in f64 for the test suites (see gradcheck.h). */
#include "helpers/gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
    if (!ok)
        fprintf(stderr, "gradcheck: forward/backward failed: %s\n", em_error());
    em_scope_end();
    return ok;
}

bool em_gradcheck(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n, double eps,
                  double tol)
{
    for (int i = 0; i < n; i++) {
        if (!inputs[i] || (inputs[i]->requires_grad && (inputs[i]->dtype != EM_F64 ||
                                                        inputs[i]->device != EM_CPU ||
                                                        !em_is_contiguous(inputs[i])))) {
            fprintf(stderr, "gradcheck: input %d must be a contiguous f64 CPU tensor\n", i);
            return false;
        }
    }
    if (!analytic(fn, ctx, inputs, n))
        return false;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        if (!inputs[i]->requires_grad)
            continue;
        int64_t m = em_numel(inputs[i]);
        double *g = calloc((size_t)(m > 0 ? m : 1), sizeof *g);
        if (!g)
            return false;
        if (inputs[i]->grad && em_copy_to_host(inputs[i]->grad, EM_F64, g) != EM_OK)
            ok = false;
        double *x = em_data_ptr(inputs[i]);
        for (int64_t j = 0; j < m && ok; j++) {
            double keep = x[j];
            x[j] = keep + eps;
            double lp = loss_value(fn, ctx, inputs);
            x[j] = keep - eps;
            double lm = loss_value(fn, ctx, inputs);
            x[j] = keep;
            double num = (lp - lm) / (2 * eps);
            double scale = fmax(1.0, fmax(fabs(g[j]), fabs(num)));
            if (!(fabs(g[j] - num) <= tol * scale)) {
                fprintf(stderr, "gradcheck: input %d element %lld: analytic %.12g numeric %.12g\n",
                        i, (long long)j, g[j], num);
                ok = false;
            }
        }
        free(g);
    }
    return ok;
}

bool em_gradcheck_default(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n)
{
    return em_gradcheck(fn, ctx, inputs, n, 1e-6, 1e-6);
}

em_tensor *em_gradcheck_leaf(em_shape shape, double lo, double hi, uint64_t seed)
{
    em_generator gen = em_generator_new(seed);
    em_tensor *t = em_uniform(shape, EM_F64, lo, hi, &gen);
    return em_requires_grad_(t, true);
}

static int replace_params(em_module *m, em_tensor **leaves, int max, int at, uint64_t seed)
{
    for (int i = 0; i < m->n_params; i++, at++) {
        if (at >= max)
            return -1;
        em_tensor *p = m->params[i].value;
        leaves[at] = em_gradcheck_leaf(em_shape_of(p), -1, 1, seed + (uint64_t)at);
        m->params[i].value = em_retain(leaves[at]);
        em_release(p);
    }
    for (int i = 0; i < m->n_children && at >= 0; i++)
        at = replace_params(m->children[i].module, leaves, max, at, seed);
    return at;
}

int em_gradcheck_module_params(em_module *m, em_tensor **leaves, int max, uint64_t seed)
{
    return replace_params(m, leaves, max, 0, seed);
}
