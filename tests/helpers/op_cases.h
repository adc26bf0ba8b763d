/* One table of op cases that three checks share: the f64 finite-difference gradient check, the
 * forward values of every float dtype against f64, and cross-backend parity (every case on every
 * available device against the CPU, forward and gradients). Adding an op adds one entry. */
#ifndef EMBER_TEST_OP_CASES_H
#define EMBER_TEST_OP_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "ember.h"

#define EM_CASE_MAX_INPUTS 4

/* How one input is drawn (deterministically, from the case and input numbers). */
typedef struct {
    em_shape shape;
    double lo, hi;       /* float values uniform in [lo, hi) */
    int64_t index_bound; /* > 0: i64 indices uniform in [0, index_bound), never differentiated */
    bool fixed;          /* a float input held fixed: no gradient is taken or checked */
} em_case_input;

enum {
    EM_CASE_NO_GRAD = 1 << 0, /* not differentiable (comparisons, arg*, indices, RNG) */
    EM_CASE_NO_HALF = 1 << 1, /* no f16/bf16 form */
    EM_CASE_EXACT = 1 << 2,   /* integer, bool or index output: equal on every backend */
    EM_CASE_RNG = 1 << 3,     /* draws from the global generator: bit-identical across devices,
                               * not compared across dtypes */
};

typedef struct {
    const char *name;
    /* the op on inputs in[0..n_inputs); dev is where a case makes tensors of its own */
    em_tensor *(*apply)(em_tensor *const *in, em_device dev);
    int n_inputs;
    em_case_input in[EM_CASE_MAX_INPUTS];
    unsigned flags;
} em_op_case;

extern const em_op_case em_op_cases[];
extern const int em_n_op_cases;

/* The inputs of case number k as dtype (float inputs; index inputs stay i64) on dev, in out[];
 * float inputs that are not fixed require grad when requires_grad. The values do not depend on
 * dtype or device beyond rounding: f64 draws converted. False with em_error() set on failure. */
bool em_op_case_inputs(int k, em_dtype dtype, em_device dev, bool requires_grad, em_tensor **out);

/* Seeds the global generator the same way before every run of a case. */
void em_op_case_seed(int k);

#endif
