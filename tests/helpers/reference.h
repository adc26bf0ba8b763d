/* Helpers for tests against PyTorch reference values: the deterministic inputs the references
 * were computed on, and an element-by-element comparison that names the first mismatch. */
#ifndef EMBER_TEST_REFERENCE_H
#define EMBER_TEST_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "ember.h"

/* f64 tensor with element i = scale * sin(i a + b) (the inputs fed to PyTorch); at most 512. */
em_tensor *em_ref_wave(em_shape shape, double a, double b, double scale);

/* True when t has n elements, each within tol of want; else prints the first mismatch to stderr
 * and returns false. */
bool em_ref_close(const em_tensor *t, const double *want, int64_t n, double tol);

#endif
