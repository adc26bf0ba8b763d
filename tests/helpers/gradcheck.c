/* Central-difference gradient checking in f64 for the test suites (see gradcheck.h). */
#include "helpers/gradcheck.h"

#include <stdio.h>

bool em_test_gradcheck(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n,
                       double eps, double tol)
{
    em_status st = em_gradcheck(fn, ctx, inputs, n, (em_gradcheck_opts){.eps = eps, .tol = tol});
    if (st != EM_OK)
        fprintf(stderr, "%s\n", em_error());
    return st == EM_OK;
}

bool em_test_gradcheck_default(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n)
{
    return em_test_gradcheck(fn, ctx, inputs, n, 1e-6, 1e-6);
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
