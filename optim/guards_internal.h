/* What the clipping, the step guard and the grad scaler share: the grads of one device and
 * dtype as one launch's lists, and per-parameter sums of |grad|^p through the backend's norm
 * kernel. Not installed. */
#ifndef EMBER_GUARDS_INTERNAL_H
#define EMBER_GUARDS_INTERNAL_H

#include "optim/guards.h"
#include "tensor/tensor_internal.h"

/* The grads of params (n) on dev in dtype dt: entry k is params[which[k]]'s grad, or a
 * contiguous copy of it (copies[k]) where it is not contiguous. */
typedef struct {
    int n;
    int64_t *numel;
    void **data;
    int *which;
    em_tensor **copies; /* NULL where the grad itself is listed */
} em_grad_list;

em_status em_grad_list_make(const char *fn, em_tensor *const *params, int n, em_device dev,
                            em_dtype dt, em_grad_list *l);
em_array_list em_grad_list_arrays(const em_grad_list *l); /* for a backend entry */
/* The copies back into their grads (after a kernel changed them in place). */
em_status em_grad_list_write_back(const em_grad_list *l, em_tensor *const *params);
void em_grad_list_free(em_grad_list *l); /* after a failed make too */

/* out[i] = sum of |grad|^p of params[i] (max |grad| for p = inf; 0 without grad); fn names the
 * caller in errors. */
em_status em_grad_pow_sums(const char *fn, em_tensor *const *params, int n, double p,
                           double *out);
/* The total norm of order p from those sums (max for p = inf, NaN passed on). */
double em_grad_norm_from_sums(const double *sums, int n, double p);

#endif
