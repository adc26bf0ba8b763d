/* A training step captured once as a device graph and replayed (CUDA Graphs): every launch of
 * the step (forward, backward, clipping, the optimizer's update) queued again by one call, so
 * the host spends microseconds a step instead of a few per op.
 *
 *   em_step_graph *g = em_step_graph_new(EM_CUDA, my_step, &my_ctx, (em_step_graph_opts){0});
 *   for (...) {
 *       em_tensor *loss;                                // the step's output, the graph's
 *       if (em_step_graph_run(g, (em_tensor *[]){x, y}, 2, &loss) != EM_OK) break;
 *   }
 *   em_step_graph_free(g);                              // before the optimizer and the model
 *
 * The step must queue its work without the host waiting for the device: no value read on the
 * host inside it (a loss's em_item, the grad scaler's inf check, em_clip_grad_norm_optim's norm:
 * em_clip_grad_norm_optim_device clips on the device), no random numbers drawn on the host's
 * counters (dropout), and no data from the host but small values the same every step (the
 * inputs come in through em_step_graph_run). The first call runs it eagerly, the next two run it
 * eagerly in the graph's own memory pool and check all that (em_device_counts), the fourth
 * captures it (in that pool: no allocation from the device) and replays it, and later calls
 * replay it: their inputs copied into the graph's own first, the optimizer's learning rate and
 * step counts written for each replay as em_optim_step would use them. Numbers the step passes
 * to ops from the host are those of the capture. Where the step cannot be captured, the device
 * has no graphs, or a call's inputs differ in shape or dtype from the first call's, it runs
 * eagerly, said once on stderr unless quiet ("ember: cuda graph: <why>; running eagerly"). */
#ifndef EMBER_STEP_GRAPH_H
#define EMBER_STEP_GRAPH_H

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One training step on inputs (as given to em_step_graph_run, or the graph's copies of them);
 * *output (may stay NULL) is what the caller reads afterwards, e.g. the loss. */
typedef em_status (*em_step_fn)(void *ctx, em_tensor *const *inputs, em_tensor **output);

#define EM_STEP_GRAPH_MAX_INPUTS 8

typedef struct {
    bool quiet; /* no line on stderr when the steps run eagerly */
} em_step_graph_opts;

typedef struct em_step_graph em_step_graph;

typedef struct {
    int64_t eager_steps;       /* calls that ran the step eagerly (the warm-up's included) */
    int64_t replays;           /* calls that replayed the graph */
    int64_t captured_launches; /* the device launches the graph holds */
    int64_t pool_bytes;        /* the graph's own memory */
    int64_t capture_device_allocs; /* blocks the capture took from the device (0 when the
                                      warm-up grew the pool) */
} em_step_graph_stats;

/* NULL + error on bad arguments or out of memory. step and ctx must outlive the graph. */
em_step_graph *em_step_graph_new(em_device device, em_step_fn step, void *ctx,
                                 em_step_graph_opts opts);
/* One step on inputs (n, at most EM_STEP_GRAPH_MAX_INPUTS; any device: copied to the graph's
 * device where it replays). *output (may be NULL) gets the step's output, the graph's: valid
 * until the next call. */
em_status em_step_graph_run(em_step_graph *g, em_tensor *const *inputs, int n,
                            em_tensor **output);
/* Whether the last call replayed the graph; why the steps run eagerly, or "" */
bool em_step_graph_replayed(const em_step_graph *g);
const char *em_step_graph_why_eager(const em_step_graph *g);
em_step_graph_stats em_step_graph_get_stats(const em_step_graph *g);
void em_step_graph_free(em_step_graph *g); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
