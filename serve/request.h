/* The JSON bodies of the inference server: a predict request parsed strictly (network input:
 * every malformed byte is an error with a message, never a crash), and responses written. */
#ifndef EMBER_SERVE_REQUEST_H
#define EMBER_SERVE_REQUEST_H

#include <stddef.h>

#include "ember/serve/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One request's limits: its numbers (all its samples' together), and the bytes of its body. A
 * body beyond either is refused as too large (EM_ERR_MEMORY, HTTP 413). */
#define EM_REQUEST_MAX_VALUES (1 << 20)
#define EM_REQUEST_MAX_BYTES ((int64_t)32 << 20)

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

/* Parses body (n bytes, not NUL-terminated) against sample_shape, token by token: nothing is
 * built but the samples' numbers, and every limit is checked as the body is read. EM_OK; or, with
 * a message in err (n_err bytes), EM_ERR_ARG for a malformed body ("input: shape [3] does not
 * match the model's sample [2,2]"), EM_ERR_MEMORY for one over a request's limits, EM_ERR_BUSY
 * when the server's budget for requests being parsed is spent (em_request_budget). */
em_status em_predict_request_parse(const char *body, size_t n, em_shape sample_shape,
                                   em_predict_request *out, char *err, size_t n_err);
/* The HTTP status that answers a parse's result: 200 for EM_OK, 400 for a malformed body, 413
 * for one over a request's limits, 503 when the server's budget is spent, 500 otherwise. */
unsigned em_predict_http_status(em_status parsed);

/* The server's budget for the requests being parsed, all of a process's parses together: the
 * bytes of their bodies and of the numbers read from them, and the JSON values read. A parse
 * that would take more fails at once with EM_ERR_BUSY (HTTP 503: try again) rather than grow the
 * process; it gives back what it held when it returns. */
#define EM_REQUEST_BUDGET_BYTES ((int64_t)64 << 20)
#define EM_REQUEST_BUDGET_VALUES ((int64_t)1 << 24)
typedef struct {
    int64_t bytes, values;
} em_request_budget;
/* Sets the budget (a field <= 0: its default) and returns the one it replaces. */
em_request_budget em_request_budget_set(em_request_budget budget);
/* What the parses under way hold now. */
em_request_budget em_request_budget_in_flight(void);

/* {"output":[...],"argmax":k} for y (any shape, flattened) into a new string (malloc'd), or
 * NULL when out of memory. */
char *em_predict_response(const em_tensor *y);
/* {"predictions":[{"output":[...],"argmax":k}, ...]} for ys[0..n), likewise. */
char *em_predict_batch_response(em_tensor *const *ys, int64_t n); /* NULL too for bad ys, n */
/* The engine's statistics as one JSON object (malloc'd), or NULL when out of memory. */
char *em_engine_stats_json(const em_engine_stats *s);

#ifdef __cplusplus
}
#endif

#endif
