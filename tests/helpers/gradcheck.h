/* Gradient checks for tests, over the library's em_gradcheck: a bool with the message on stderr,
 * leaves, and a module's parameters as leaves. Shared by the autograd suites and the layer tests. */
#ifndef EMBER_TEST_GRADCHECK_H
#define EMBER_TEST_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "ember.h"

/* em_gradcheck (autograd/gradcheck.h) with eps and tol; on a disagreement or a failure the
 * message goes to stderr. True when all agree. */
bool em_test_gradcheck(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n,
                       double eps, double tol);

/* em_test_gradcheck with eps 1e-6 and tol 1e-6. */
bool em_test_gradcheck_default(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n);

/* A contiguous f64 CPU leaf, uniform in [lo, hi) from seed, that requires grad; the caller (or
 * the enclosing scope) owns it. */
em_tensor *em_gradcheck_leaf(em_shape shape, double lo, double hi, uint64_t seed);

/* Replaces every parameter of m's tree (depth-first, a module's own before its children's, the
 * order of em_module_parameters) by an f64 leaf uniform in [-1, 1) and writes the leaves to
 * leaves (max entries; the caller releases them). Returns how many there are, or -1 when more
 * than max. Then em_gradcheck over (x, leaves...) checks the module's gradients in f64. */
int em_gradcheck_module_params(em_module *m, em_tensor **leaves, int max, uint64_t seed);

#endif
