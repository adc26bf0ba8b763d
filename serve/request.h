/* The JSON bodies of the inference server: a predict request parsed strictly (network input:
 * every malformed byte is an error with a message, never a crash), and responses written. */
#ifndef EMBER_SERVE_REQUEST_H
#define EMBER_SERVE_REQUEST_H

#include <stddef.h>

#include "ember/serve/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_REQUEST_MAX_VALUES (1 << 20)

/* {"input": [...numbers, nested to the sample's rank...], "priority": "low"|"normal"|"high"|
 *  "critical", "timeout_ms": N}; or a batch, {"instances": [input, input, ...], ...} (TF
 * Serving's and KServe v1's key), answered in order; "input" or "instances" is required, other
 * keys are errors. */
typedef struct {
    em_tensor *input;     /* f32 with the sample's shape, or (n_instances, sample...); the
                           * caller releases it */
    int64_t n_instances;  /* 0: one sample, from "input" */
    em_priority priority; /* default normal */
    double timeout_ms;    /* default 0: the server's */
} em_predict_request;

/* Parses body (n bytes, not NUL-terminated) against sample_shape. EM_OK, or EM_ERR_ARG with a
 * message such as "input: expected 784 numbers at depth 1, got 3" in err (n_err bytes). */
em_status em_predict_request_parse(const char *body, size_t n, em_shape sample_shape,
                                   em_predict_request *out, char *err, size_t n_err);

/* {"output":[...],"argmax":k} for y (any shape, flattened) into a new string (malloc'd), or
 * NULL when out of memory. */
char *em_predict_response(const em_tensor *y);
/* {"predictions":[{"output":[...],"argmax":k}, ...]} for ys[0..n), likewise. */
char *em_predict_batch_response(em_tensor *const *ys, int64_t n);
/* The engine's statistics as one JSON object (malloc'd), or NULL when out of memory. */
char *em_engine_stats_json(const em_engine_stats *s);

#ifdef __cplusplus
}
#endif

#endif
