/* What the clipping and the step guard share: per-parameter sums of |grad|^p through the
 * backend's norm kernel. Not installed. */
#ifndef EMBER_GUARDS_INTERNAL_H
#define EMBER_GUARDS_INTERNAL_H

#include "optim/guards.h"

/* out[i] = sum of |grad|^p of params[i] (max |grad| for p = inf; 0 without grad); fn names the
 * caller in errors. */
em_status em_grad_pow_sums(const char *fn, em_tensor *const *params, int n, double p,
                           double *out);
/* The total norm of order p from those sums (max for p = inf, NaN passed on). */
double em_grad_norm_from_sums(const double *sums, int n, double p);

#endif
