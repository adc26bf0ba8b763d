/* The training loop as a library: em_trainer runs a loader's batches through a model with the
 * techniques a user switches on (autocast with a grad scaler, gradient accumulation, clipping,
 * the non-finite/outlier guard, activation checkpointing), steps a scheduler, validates after
 * every epoch, writes training checkpoints a run resumes from bit for bit, and reports progress.
 *
 *   em_loader *dl = em_loader_new(train, (em_loader_opts){.batch_size = 64, .shuffle = true});
 *   em_trainer *t = em_trainer_new(net, opt, dl, (em_trainer_opts){.val = test,
 *                                  .checkpoint = "run.ckpt", .progress = true});
 *   em_status st = t ? em_trainer_fit(t, 10) : em_error_status();
 *   em_trainer_free(t);
 */
#ifndef EMBER_TRAIN_H
#define EMBER_TRAIN_H

#include "ember/data/data.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/guards.h"
#include "ember/optim/optim.h"
#include "ember/io/safetensors.h"
#include "ember/train/averaged_model.h"
#include "ember/train/train_checkpoint.h"
#include "ember/train/step_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The loss of one micro-batch: the model's output and the batch's targets give a 0-d f32 mean
 * over the batch, or NULL with an error. */
typedef em_tensor *(*em_loss_fn)(void *ctx, const em_tensor *output, const em_tensor *target);

/* The techniques a run can switch on; zero is plain f32 training. */
typedef struct {
    em_dtype amp;                /* EM_F32: off; EM_F16 (with a grad scaler) or EM_BF16 */
    int grad_accum;              /* micro-batches per optimizer step; 0 or 1: every batch */
    double clip;                 /* clip the total grad 2-norm to this; 0: no clipping */
    bool guard;                  /* skip updates with a non-finite loss/grad or an outlier loss */
    bool checkpoint_activations; /* recompute a Sequential's activations in backward, in
                                    sqrt(children) segments */
    bool cuda_graph;             /* capture the step once as a device graph and replay it
                                    (train/step_graph.h): forward, backward, clipping and the
                                    update queued by one call; where the run cannot be captured
                                    (the grad scaler, the guard, accumulation, a device without
                                    graphs) it says why once and runs eagerly */
} em_techniques;

/* What the callbacks hear after every micro-batch. */
typedef struct {
    int epoch, epochs;     /* epoch counts from 0 */
    int64_t batch, batches; /* batches of this epoch done (counting those before a resume), and
                               in the whole epoch */
    int64_t samples;       /* samples trained in this epoch by this trainer */
    int64_t step;          /* micro-batches trained by this trainer */
    int64_t global_step;   /* micro-batches trained in the whole run, those before a resume
                              included (TensorBoard's step) */
    double loss;           /* this micro-batch's loss */
    double mean_loss;      /* the mean over this epoch's micro-batches so far (those before a
                              resume included) */
    double samples_per_s;  /* this epoch so far */
    double lr;             /* group 0's learning rate */
    double scale;          /* the grad scaler's scale; 1 without one */
    int64_t skipped;       /* optimizer updates skipped so far (scaler or guard) */
} em_progress;

/* What the callbacks hear after every epoch. */
typedef struct {
    int epoch, epochs;
    double train_loss;     /* the mean over the epoch's micro-batches (those before a resume
                              included) */
    double val_loss;       /* NAN without validation data */
    double val_acc;        /* NAN without validation data or class-index targets */
    double lr;             /* group 0's learning rate after the epoch */
    double seconds;        /* training time of the epoch, validation excluded */
    int64_t samples;       /* trained in this epoch by this trainer */
    int64_t global_step;   /* the run's micro-batches at the epoch's end (the step its
                              validation belongs to) */
} em_epoch_stats;

/* Hooks into the loop; any may be NULL. A trainer holds up to EM_TRAINER_MAX_CALLBACKS sets. */
typedef struct {
    void *ctx;
    void (*on_step)(void *ctx, const em_progress *p);
    void (*on_epoch)(void *ctx, const em_epoch_stats *e);
    /* The gradients of an optimizer step are complete (still scaled under f16): averaging them
     * across processes goes here. Runs before unscaling, the guard, clipping and the update;
     * an error status ends the step with that error. */
    em_status (*before_update)(void *ctx, em_optim *optim);
    /* Before each micro-batch's backward: whether the optimizer update follows it (the last
     * micro-batch of an accumulation). Data-parallel training communicates only then. */
    void (*before_backward)(void *ctx, bool update_follows);
    /* Each decision to skip an update (inf/NaN gradients under the grad scaler, then the
     * guard's verdict) passes through *skip here: a data-parallel run makes every process take
     * the same one. An error status ends the step with that error. */
    em_status (*agree)(void *ctx, bool *skip);
} em_trainer_callbacks;
#define EM_TRAINER_MAX_CALLBACKS 8

typedef struct {
    em_techniques tech;
    em_scheduler *scheduler; /* borrowed or NULL; stepped after every optimizer update, or a
                                plateau scheduler after every epoch with the validation loss
                                (the training loss without validation data) */
    em_loss_fn loss;         /* NULL: cross-entropy against class indices */
    void *loss_ctx;
    const em_dataset *val;   /* borrowed or NULL: evaluated after every epoch */
    /* validation's transforms. NULL: the training loader's less random augmentation
     * (em_transform_is_random), so the normalisation training sees applies to validation too;
     * else exactly these n_val_transforms (0 of them: none). Copied. */
    const em_transform *val_transforms;
    int n_val_transforms;
    int64_t val_batch;       /* batch size of validation; 0: 1000 */
    const char *checkpoint;  /* or NULL: a training checkpoint written after every epoch, and
                                when max_steps stops em_trainer_fit */
    int64_t checkpoint_every; /* also write it every this many micro-batches of the run (under
                                accumulation at the update that completes them), so a killed
                                run loses at most that many; 0: per epoch only */
    int64_t max_steps;       /* em_trainer_fit stops after this many micro-batches (more to
                                finish an accumulation); 0: no limit */
    const em_st_meta *meta;  /* the caller's metadata, written into every checkpoint */
    int n_meta;
    /* how checkpoints are written and read; NULL: em_train_checkpoint_save and _load (a
     * data-parallel run passes em_dist_checkpoint_save and _load) */
    em_status (*save_checkpoint)(const char *path, const em_train_state *s,
                                 const em_st_meta *meta, int n_meta);
    em_status (*load_checkpoint)(const char *path, em_train_state *s);
    bool progress;           /* a progress line on stderr and one line per epoch */
    em_averaged_model *average; /* borrowed or NULL: updated from the model after every
                                   optimizer update (not a skipped one), and kept in the
                                   trainer's checkpoints (train/averaged_model.h) */
} em_trainer_opts;

typedef struct em_trainer em_trainer;

/* model, optim and loader are borrowed and must outlive the trainer; loader may be NULL when
 * only em_trainer_step is used. NULL with an error on bad options. */
em_trainer *em_trainer_new(em_module *model, em_optim *optim, em_loader *loader,
                           em_trainer_opts opts);
void em_trainer_free(em_trainer *t); /* NULL is fine */
em_status em_trainer_add_callbacks(em_trainer *t, em_trainer_callbacks cb);

/* Trains until the loader's epoch reaches epochs (from wherever it stands, e.g. after a
 * resume) or max_steps micro-batches were trained; after each epoch: a partial accumulation is
 * applied, the validation data evaluated, the checkpoint written and on_epoch called. A NaN
 * loss without a grad scaler or guard is an EM_ERR_NUMERIC error, the update not taken. */
em_status em_trainer_fit(em_trainer *t, int epochs);
/* One micro-batch (x, y): forward under autocast, loss, scaled backward; after grad_accum of
 * them, the update (callbacks' before_update, unscale, guard, clip, step, scale update,
 * scheduler step). *loss (may be NULL) gets the micro-batch's loss. With tech.cuda_graph the
 * step is replayed from its graph and its loss read afterwards: a loss that is not finite is
 * reported after its update was taken. */
em_status em_trainer_step(em_trainer *t, const em_tensor *x, const em_tensor *y, double *loss);
em_status em_trainer_flush(em_trainer *t); /* the update of a partial accumulation, if any */

/* A training checkpoint of everything the run needs to continue: model, optimizer, scheduler,
 * grad scaler, generator and the loader's position (see train/train_checkpoint.h). Between
 * optimizer updates only: EM_ERR_STATE while an accumulation is pending. */
em_status em_trainer_save(const em_trainer *t, const char *path);
/* Restores all of it (and the loader's position); on any mismatch nothing changes. */
em_status em_trainer_resume(em_trainer *t, const char *path);

typedef struct {
    int64_t steps;           /* micro-batches trained */
    int64_t global_step;     /* micro-batches of the whole run, those before a resume included */
    int64_t updates;         /* optimizer steps taken */
    int64_t skipped;         /* optimizer steps skipped (grad scaler or guard) */
    int64_t samples;         /* trained */
    double recent_loss;      /* the mean over the micro-batches of the last 20 updates */
    double samples_per_s;    /* training time only */
    double train_seconds;
    double scale;            /* the grad scaler's scale; 1 without one */
    size_t activation_bytes; /* the most bytes one forward held for its backward (not counted
                                while the steps replay a graph) */
    int64_t graph_replays;   /* steps replayed from the step's graph (tech.cuda_graph) */
    em_epoch_stats last_epoch; /* the last finished epoch (epochs 0 before the first) */
} em_trainer_stats;
em_trainer_stats em_trainer_get_stats(const em_trainer *t);
em_grad_scaler *em_trainer_grad_scaler(const em_trainer *t); /* NULL without amp f16 */

/* ---- metrics ---- */

/* The fraction of rows of logits (N, C) whose largest entry is at the class index in
 * target (N): a 0-d f32 tensor (without grad). */
em_tensor *em_accuracy(const em_tensor *logits, const em_tensor *target);

typedef struct {
    int64_t batch;     /* 0: 1000 */
    em_loss_fn loss;   /* NULL: cross-entropy against class indices */
    void *loss_ctx;
    const em_transform *transforms; /* applied to every sample, as a loader does; NULL: none */
    int n_transforms;
} em_eval_opts;

typedef struct {
    double loss;       /* the mean over samples */
    double accuracy;   /* NAN when the targets are not class indices */
    int64_t samples;
} em_eval_result;

/* The model over ds in eval mode and without grad (both restored afterwards). */
em_status em_evaluate(em_module *model, const em_dataset *ds, em_eval_opts opts,
                      em_eval_result *out);

#ifdef __cplusplus
}
#endif

#endif
