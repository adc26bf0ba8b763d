/* Gradient checking (PyTorch's torch.autograd.gradcheck): em_backward's gradients of a function
 * against central finite differences, in f64. For a custom autograd function (function.h), a
 * layer of one's own, or a new op. */
#ifndef EMBER_AUTOGRAD_GRADCHECK_H
#define EMBER_AUTOGRAD_GRADCHECK_H

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The function under check: builds its output from the inputs (ctx carries anything else). */
typedef em_tensor *(*em_gradcheck_fn)(em_tensor *const *inputs, void *ctx);

typedef struct {
    double eps; /* the finite-difference step; 0: 1e-6 */
    double tol; /* 0: 1e-6 */
} em_gradcheck_opts;

/* Checks the gradient of L = sum(fn(inputs) * W), W a fixed pseudo-random weight of the output's
 * shape, with respect to every element of every input that requires grad: contiguous f64 CPU
 * leaves (the other inputs, of any dtype, are held fixed). Each element is compared with the
 * central difference (L(x + eps) - L(x - eps)) / 2 eps; they agree when
 * |analytic - numeric| <= tol * max(1, |analytic|, |numeric|). EM_OK when all agree; otherwise
 * EM_ERR_NUMERIC naming the first element that does not ("em_gradcheck: input 1 element 4:
 * analytic 0.5, numeric 0.25"), or the error of a forward or backward that failed. The inputs
 * are restored and left with the analytic gradients. */
em_status em_gradcheck(em_gradcheck_fn fn, void *ctx, em_tensor *const *inputs, int n,
                       em_gradcheck_opts o);

#ifdef __cplusplus
}
#endif

#endif
