/* The optimizer object that optimizer.c, optim_state.c and the update rules (sgd.c, adam.c,
 * rmsprop.c) share. Not installed. */
#ifndef EMBER_OPTIM_INTERNAL_H
#define EMBER_OPTIM_INTERNAL_H

#include "optim/optim.h"
#include "tensor/tensor_internal.h"

#define EM_OPTIM_MAX_STATE 3

/* One parameter and its state. */
typedef struct {
    em_tensor *param;  /* borrowed */
    int group;
    em_tensor *step;   /* i64 0-d on the CPU: updates applied to this parameter */
    int n_state;
    em_tensor *state[EM_OPTIM_MAX_STATE]; /* param's shape, dtype and device; zero at first */
    char *names[1 + EM_OPTIM_MAX_STATE];  /* "param.3.step", then "param.3.<state name>" */
} em_optim_param;

typedef struct {
    em_tensor *lr;       /* f64 0-d on the CPU */
    double weight_decay;
    char *lr_name;       /* "group.0.lr" */
} em_optim_group;

/* What an update rule provides. */
typedef struct {
    const char *name; /* "sgd", "adam" (AdamW is adam with decoupled decay), "rmsprop" */
    /* the names of the per-parameter state tensors o keeps (at most EM_OPTIM_MAX_STATE) */
    int (*state_names)(const em_optim *o, const char **names);
    /* o's backend entry for this rule is present */
    bool (*supported)(const em_backend *be);
    /* one fused update of the parameters in l (one group, dtype and device; l->state[k] lists
     * their state tensor k in state_names' order); step counts it, from 1; at says where the
     * launch takes its constants (inside a captured graph, device memory) */
    int (*update)(const em_optim *o, const em_backend *be, em_dtype dt, double lr,
                  double weight_decay, int64_t step, const em_array_list *l,
                  em_update_consts at);
} em_optim_rule;

typedef struct em_optim_capture em_optim_capture; /* optimizer.c: updates in a captured graph */

struct em_optim {
    const em_optim_rule *rule;
    union {
        em_sgd_opts sgd;
        em_adam_opts adam;
        em_rmsprop_opts rmsprop;
    } opts;
    bool decoupled;      /* AdamW */
    double lr, weight_decay; /* what a group takes unless it sets its own */
    em_tensor *step;     /* i64 0-d on the CPU: em_optim_step calls */
    int n_groups, n_params;
    em_optim_group *groups;
    em_optim_param *params;
    em_optim_capture *captures; /* the graphs its updates were captured in (a list) */
};

/* A new optimizer with no groups, or NULL on allocation failure. */
em_optim *em_optim_new(const em_optim_rule *rule, double lr, double weight_decay);
/* Puts m's parameters in group 0 (nothing when m is NULL); returns o, or frees o and returns
 * NULL on error. For the constructors. */
em_optim *em_optim_init_module(em_optim *o, em_module *m, const char *fn);
/* EM_OK when v, the count `name` in state that fn loads, is a whole number in
 * [0, EM_MAX_STEP_COUNT]; otherwise an EM_ERR_ARG error naming both. */
em_status em_optim_check_count(const char *fn, const char *name, double v);
/* A tensor owned by the optimizer even when made inside a scope. */
em_tensor *em_optim_own(em_tensor *t);

#endif
