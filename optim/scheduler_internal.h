/* The scheduler object that scheduler.c (closed-form schedules) and plateau.c
 * (ReduceLROnPlateau) share: what every kind has, and each kind's own settings. Not installed. */
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

typedef struct {
    int64_t step_size;
    double gamma;
} sched_step;

typedef struct {
    int64_t *milestones; /* (n_milestones), owned */
    int n_milestones;
    double gamma;
} sched_multistep;

typedef struct {
    double gamma;
} sched_exponential;

typedef struct {
    int64_t t_max; /* the half period */
    double eta_min;
} sched_cosine;

typedef struct {
    int64_t warmup_steps, total_steps;
    double eta_min;
} sched_warmup_cosine;

typedef struct {
    int64_t total_steps;
    double initial_lr, max_lr, min_lr;
    double warmup_end; /* the step where the lr peaks */
} sched_one_cycle;

typedef struct {
    em_plateau_opts opts;
    em_tensor *best;     /* f64 0-d: the best metric so far */
    em_tensor *num_bad;  /* i64 0-d: epochs in a row without improvement */
    em_tensor *cooldown; /* i64 0-d: epochs left before bad ones count again */
} sched_plateau;

struct em_scheduler {
    em_optim *o;      /* borrowed */
    sched_kind kind;  /* which member of the union below holds the settings */
    int64_t last_step;
    int n_groups;     /* the groups that existed when the scheduler was made */
    double *base_lrs; /* (n_groups) */
    union {
        sched_step step;
        sched_multistep multistep;
        sched_exponential exponential;
        sched_cosine cosine;
        sched_warmup_cosine warmup_cosine;
        sched_one_cycle one_cycle;
        sched_plateau plateau;
    };
};

/* A scheduler of kind over o's groups (their lrs now are the base lrs), not yet applied; NULL
 * with an error naming fn. */
em_scheduler *em_scheduler_new_kind(em_optim *o, sched_kind kind, const char *fn);

#endif
