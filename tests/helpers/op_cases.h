/* One table of op cases that three checks share: the f64 finite-difference gradient check, the
 * forward values of every float dtype against f64, and cross-backend parity (every case on every
 * available device against the CPU, forward and gradients). Each runs every case on contiguous
 * inputs and in each input layout its flags name. Adding an op adds one entry. */
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
    /* input layouts the case also runs in; each float input of shape s is then a view of shape
     * s over a contiguous leaf (index inputs stay as they are): */
    EM_CASE_PERMUTED = 1 << 4,  /* the leaf holds s's dims reversed, the view permutes them back */
    EM_CASE_SLICED = 1 << 5,    /* every second row from row 1 of a leaf with 2 s[0] rows: an
                                 * offset and a stride */
    EM_CASE_BROADCAST = 1 << 6, /* a leaf with one row expanded to s[0] rows (stride 0) */
};

/* The layouts in the order the checks run them: contiguous (0), then each flag above. */
#define EM_CASE_N_LAYOUTS 4
extern const unsigned em_case_layouts[EM_CASE_N_LAYOUTS];

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

/* Whether case k runs in layout (one of em_case_layouts): contiguous always, the others where
 * its flags name them. */
bool em_op_case_has_layout(int k, unsigned layout);

/* "contiguous", "permuted", "sliced" or "broadcast". */
const char *em_case_layout_name(unsigned layout);

/* The leaves of case k's inputs in layout, as dtype (float inputs; index inputs stay i64) on
 * dev, in out[]: contiguous tensors that em_op_case_apply turns into the case's input views.
 * Float inputs that are not fixed require grad when requires_grad. The values do not depend on
 * dtype or device beyond rounding: f64 draws converted. False with em_error() set on failure. */
bool em_op_case_inputs(int k, unsigned layout, em_dtype dtype, em_device dev, bool requires_grad,
                       em_tensor **out);

/* Case k's output on the leaves from em_op_case_inputs (same layout), with the global generator
 * seeded the same way before every run; NULL with em_error() set on failure. */
em_tensor *em_op_case_apply(int k, unsigned layout, em_tensor *const *leaves, em_device dev);

#endif
