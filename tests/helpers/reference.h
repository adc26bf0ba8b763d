/* Helpers for tests against PyTorch reference values: the deterministic inputs the references
 * were computed on, and an element-by-element comparison that names the first mismatch. */
#ifndef EMBER_TEST_REFERENCE_H
#define EMBER_TEST_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "ember.h"

/* f64 tensor with element i = scale * sin(i a + b) (the inputs fed to PyTorch); at most 512. */
em_tensor *em_ref_wave(em_shape shape, double a, double b, double scale);

/* Every parameter of m (traversal order, k from 0), element i: 0.3 sin(0.7 i + 1.3 k + 0.1),
 * the formula tests/torch_ref's scripts fill PyTorch's models with; the count, or -1 with an
 * error. */
int em_ref_fill_params(em_module *m);
/* sum(t * cos(0.3 i)) over t's elements in row-major order (the scripts' checksum), in f64 */
double em_ref_checksum(const em_tensor *t);

/* True when t has n elements, each within tol of want; else prints the first mismatch to stderr
 * and returns false. */
bool em_ref_close(const em_tensor *t, const double *want, int64_t n, double tol);

#endif
