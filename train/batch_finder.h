/* The batch-size finder: the largest batch whose training step fits a device's memory budget,
 * and the fastest batch among those tried. */
#ifndef EMBER_TRAIN_BATCH_FINDER_H
#define EMBER_TRAIN_BATCH_FINDER_H

#include "ember/tensor/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* try_fn runs one training step at batch size batch and sets *samples_per_s; it returns EM_OK,
 * EM_ERR_MEMORY when the step did not fit (an allocation failed), or another error, which ends
 * the search. It must give back what it allocated, whether it fits or not. */
typedef em_status (*em_batch_try_fn)(void *ctx, int64_t batch, double *samples_per_s);

typedef struct {
    int64_t largest;          /* the largest batch in [lo, hi] that fit */
    int64_t fastest;          /* among the batches that fit, the one with the most samples/s */
    double fastest_samples_per_s;
    int n_tries;              /* try_fn calls made */
} em_batch_search;

/* Doubles the batch from lo while it fits (trying hi itself last), then bisects between the
 * largest fit and the smallest failure. Before each try the cache is emptied and the error
 * cleared; during the search device is held to budget (0: its current budget), restored at the
 * end. EM_ERR_MEMORY when even lo does not fit. */
em_status em_find_batch_size(em_batch_try_fn try_fn, void *ctx, em_device device, int64_t lo,
                             int64_t hi, size_t budget, em_batch_search *out);

#ifdef __cplusplus
}
#endif

#endif
