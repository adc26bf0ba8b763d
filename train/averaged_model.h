/* Averages of a model's weights over training, PyTorch's torch.optim.swa_utils.AveragedModel:
 * an exponential moving average (EMA) or the equal average of every update (SWA), kept in a
 * copy of the model that evaluates, saves and exports as any model, and that the trainer
 * updates after each optimizer step and keeps in its checkpoints.
 *
 *   em_averaged_model *ema = em_averaged_model_new(net, (em_average_opts){.decay = 0.999});
 *   ... em_optim_step(opt); em_averaged_model_update(ema, net); ...
 *   em_averaged_model_swap(ema, net);   // net holds the averaged weights: evaluate it
 *   em_averaged_model_swap(ema, net);   // and its own again: train on
 */
#ifndef EMBER_TRAIN_AVERAGED_MODEL_H
#define EMBER_TRAIN_AVERAGED_MODEL_H

#include "ember/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double decay;     /* in (0, 1): EMA, avg = decay avg + (1 - decay) p (get_ema_multi_avg_fn's
                         lerp by 1 - decay); 0: SWA, avg += (p - avg) / (updates + 1) */
    bool use_buffers; /* average the floating buffers (BatchNorm's running statistics) with the
                         parameters, PyTorch's use_buffers=True; else copy them from the model
                         at each update. Integer buffers are copied either way. */
} em_average_opts;

typedef struct em_averaged_model em_averaged_model;

/* A copy of model (em_module_clone: its type needs a build) that averages nothing yet: the
 * first update copies model's weights into it. NULL with an error. */
em_averaged_model *em_averaged_model_new(const em_module *model, em_average_opts o);
void em_averaged_model_free(em_averaged_model *a); /* NULL is fine */
/* PyTorch's update_parameters(model): the first call copies model's parameters (and buffers),
 * later ones average them in as o says. model must have the copy's tensors (names, shapes);
 * its tensors may be of another dtype or device than the copy's. */
em_status em_averaged_model_update(em_averaged_model *a, const em_module *model);
/* The averaged copy (a's): evaluate it, em_model_save it, export it. */
em_module *em_averaged_model_module(const em_averaged_model *a);
/* The updates averaged so far (PyTorch's n_averaged) */
int64_t em_averaged_model_count(const em_averaged_model *a);
/* Exchanges the values of model's parameters and buffers with the copy's (in place: the
 * optimizer's and the caller's tensors stay model's): model then runs with the averaged
 * weights; a second swap restores both. */
em_status em_averaged_model_swap(em_averaged_model *a, em_module *model);

#ifdef __cplusplus
}
#endif

#endif
