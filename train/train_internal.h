/* The trainer's state, shared by train/trainer.c (one step) and train/fit.c (the epochs). */
#ifndef EMBER_TRAIN_INTERNAL_H
#define EMBER_TRAIN_INTERNAL_H

#include "train/train.h"

#define EM_RECENT_UPDATES 20 /* updates whose micro-batches the recent loss averages over */

/* The progress display's state (train/progress.c). */
typedef struct {
    bool tty;            /* stderr is a terminal: one line redrawn in place */
    int epoch;           /* the epoch being shown; -1 between epochs */
    int64_t first_batch; /* the epoch's batch before the first this run trained */
    double last_draw_s;  /* when the line was last drawn */
    int64_t next_plain;  /* no terminal: the batch of the next plain line */
} em_progress_printer;

void em_progress_printer_init(em_progress_printer *pp);
/* The line, at most ~10 times a second and at the end of an epoch; callbacks' on_step. */
void em_progress_printer_step(void *pp, const em_progress *p);
void em_progress_printer_epoch(void *pp, const em_epoch_stats *e); /* one line per epoch */

struct em_trainer {
    em_module *model;        /* borrowed */
    em_optim *optim;         /* borrowed */
    em_loader *loader;       /* borrowed, or NULL */
    em_trainer_opts o;
    em_grad_scaler *scaler;  /* owned; with amp f16 */
    em_guard *guard;         /* owned; with tech.guard */
    em_trainer_callbacks callbacks[EM_TRAINER_MAX_CALLBACKS];
    int n_callbacks;
    int accum;               /* micro-batches per update */
    int pending;             /* micro-batches accumulated since the last update */
    double *recent;          /* (EM_RECENT_UPDATES * accum): a ring of the last losses */
    em_transform *val_tfs;   /* (n_val_tfs), owned: validation's transforms */
    int n_val_tfs;
    em_trainer_stats stats;
    em_train_counters run;   /* the whole run's, kept in its checkpoints */
    int64_t saved_at;        /* run.step at em_trainer_fit's last checkpoint, or the resume */
    em_progress_printer printer; /* with o.progress */
    em_step_graph *graph;    /* owned; with tech.cuda_graph where the run can be captured */
    bool graph_decided;      /* whether it can was decided (at the first step) */
};

double em_trainer_lr(const em_trainer *t); /* group 0's learning rate */
/* The updates an averaged model counts, as a checkpoint restores them (train/averaged_model.c) */
void em_averaged_model_set_count(em_averaged_model *a, int64_t count);
double em_train_clock_s(void);              /* monotonic seconds */

#endif
