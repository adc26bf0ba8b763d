/* The scheduler object that scheduler.c (closed-form schedules) and plateau.c
 * (ReduceLROnPlateau) share. Not installed. */
#ifndef EMBER_SCHEDULER_INTERNAL_H
#define EMBER_SCHEDULER_INTERNAL_H

#include "optim/optim_internal.h"

typedef enum {
    SCHED_STEP,
    SCHED_MULTISTEP,
    SCHED_EXPONENTIAL,
    SCHED_COSINE,
    SCHED_WARMUP_COSINE,
    SCHED_ONE_CYCLE,
    SCHED_PLATEAU
} sched_kind;

struct em_scheduler {
    em_optim *o;          /* borrowed */
    sched_kind kind;
    int64_t last_step;
    int n_groups;         /* the groups that existed when the scheduler was made */
    double *base_lrs;     /* (n_groups) */
    double gamma;         /* step, multistep, exponential */
    int64_t step_size;    /* step */
    int64_t *milestones;  /* (n_milestones): multistep */
    int n_milestones;
    int64_t t_max;        /* cosine: the half period; warmup cosine and one-cycle: total steps */
    int64_t warmup;       /* warmup cosine */
    double eta_min;       /* cosine, warmup cosine */
    double initial_lr, max_lr, min_lr; /* one-cycle */
    double warmup_end;    /* one-cycle: the step where the lr peaks */
    em_plateau_opts plateau;
    em_tensor *best;      /* plateau, f64 0-d: the best metric so far */
    em_tensor *num_bad;   /* plateau, i64 0-d: epochs in a row without improvement */
    em_tensor *cooldown;  /* plateau, i64 0-d: epochs left before bad ones count again */
};

/* A scheduler of kind over o's groups (their lrs now are the base lrs), not yet applied; NULL
 * with an error naming fn. */
em_scheduler *em_scheduler_new_kind(em_optim *o, sched_kind kind, const char *fn);

#endif
