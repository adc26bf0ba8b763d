/* Training checkpoints: model, optimizer, scheduler, random generator and loader position in one
 * safetensors file, written atomically, from which a resumed run continues bit for bit. The file
 * is a whole-model file too (models/model_file_meta.h): em_model_load opens it as the model. */
#ifndef EMBER_TRAIN_CHECKPOINT_H
#define EMBER_TRAIN_CHECKPOINT_H

#include "ember/data/data.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/optim.h"
#include "ember/io/safetensors.h"
#include "ember/train/averaged_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A trainer's own counters, kept in its checkpoints so that a resumed run counts on. */
typedef struct {
    int64_t step;          /* micro-batches trained in the whole run (TensorBoard's step) */
    int64_t epoch_steps;   /* of them in the loader's current epoch */
    double epoch_loss_sum; /* the sum of those micro-batches' losses */
} em_train_counters;

typedef struct {
    em_module *model;
    em_optim *optim;         /* or NULL */
    em_scheduler *scheduler; /* or NULL */
    em_generator *rng;       /* or NULL for the global generator */
    em_loader *loader;       /* or NULL; its position is saved, and restored on load */
    em_grad_scaler *scaler;  /* or NULL; a file without scaler state leaves it as it is */
    em_train_counters *counters; /* or NULL; a file without them leaves them as they are */
    em_averaged_model *average;  /* or NULL; a file without its tensors leaves it as it is */
} em_train_state;

/* The model's tensors are stored by their own dotted names, with its module tree in the
 * metadata entry "ember.model" (left out, so that em_model_load refuses the file, when a module
 * is of a type whole-model files do not know: em_model_register_type adds one); the optimizer's
 * as "ember.optim.<name>", the grad scaler's as "ember.scaler.<name>", a plateau scheduler's as
 * "ember.sched.<name>" and the averaged model's copy as "ember.average.<name>" (its count of
 * updates as metadata); the scheduler's step, the generator, the loader's position and its
 * batches per epoch and the counters as metadata ("ember.checkpoint_version" 2), next to the
 * caller's own (keys must not start with "ember."). */
em_status em_train_checkpoint_save(const char *path, const em_train_state *s,
                                   const em_st_meta *meta, int n_meta);
/* Restores everything s points at, from a file of version 2 or of version 1 (every part's
 * tensors prefixed: "model.", "optim.", "scaler.", "sched."). The whole file is checked against
 * the model, optimizer, scaler and loader (the same batches per epoch) first: on any mismatch or
 * a damaged file nothing is changed. */
em_status em_train_checkpoint_load(const char *path, em_train_state *s);

#ifdef __cplusplus
}
#endif

#endif
