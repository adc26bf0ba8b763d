/* Optimizers with parameter groups, and learning-rate schedulers; both can save and restore
 * their state. Updates run as fused kernels of the parameters' backend. */
#ifndef EMBER_OPTIM_H
#define EMBER_OPTIM_H

#include "ember/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_optim em_optim;

typedef struct {
    double lr;           /* default 0.01 */
    double momentum;
    double dampening;
    double weight_decay;
    bool nesterov;
} em_sgd_opts;

typedef struct {
    double lr;           /* default 1e-3 */
    double beta1, beta2; /* default 0.9, 0.999 */
    double eps;          /* default 1e-8 */
    double weight_decay; /* Adam: L2 added to the gradient; AdamW: decoupled (default 0.01) */
    bool no_weight_decay; /* AdamW with no decay at all (weight_decay 0 takes the default) */
    bool amsgrad;
} em_adam_opts;

typedef struct {
    double lr;     /* default 0.01 */
    double alpha;  /* default 0.99 */
    double eps;    /* default 1e-8 */
    double weight_decay;
    double momentum;
    bool centered;
} em_rmsprop_opts;

/* Each constructor puts all of m's parameters in group 0; m may be NULL (add groups later). */
em_optim *em_sgd(em_module *m, em_sgd_opts o);
em_optim *em_adam(em_module *m, em_adam_opts o);
em_optim *em_adamw(em_module *m, em_adam_opts o);
em_optim *em_rmsprop(em_module *m, em_rmsprop_opts o);
void em_optim_free(em_optim *o);

/* A group's own settings; unset fields take the optimizer's. */
typedef struct {
    double lr;
    double weight_decay;
    bool lr_set, weight_decay_set;
} em_group_opts;
/* Adds a group over n parameters (borrowed: they must outlive the optimizer); returns its index
 * or -1 on error. A parameter may be in only one group. */
int em_optim_add_group(em_optim *o, em_tensor *const *params, int n, em_group_opts g);
/* Splits m's parameters: 1-D (and 0-d) ones (biases, norm weights) into a group without weight
 * decay, the rest into a group with the optimizer's; the decay group is added first. Use on an
 * optimizer made with m = NULL. */
em_status em_optim_add_module_no_decay_1d(em_optim *o, em_module *m);

/* Parameters without grad are skipped; every grad is checked before any parameter changes.
 * Parameters are f32 or f64 and contiguous; state has each parameter's dtype and device. */
em_status em_optim_step(em_optim *o);
void em_optim_zero_grad(em_optim *o); /* drops every parameter's grad (PyTorch's set_to_none) */
int em_optim_num_groups(const em_optim *o);
double em_optim_get_lr(const em_optim *o, int group);
void em_optim_set_lr(em_optim *o, int group, double lr);

/* The optimizer's kind ("sgd", "adam", "adamw" or "rmsprop") and its settings, defaults filled
 * in, as one line of JSON: {"kind":"sgd","lr":0.05,"momentum":0.9,...,"group_weight_decay":[0]}
 * (reals to 15 significant digits). A new string (free it), or NULL out of memory. A training
 * checkpoint records it, and resuming with other settings is an error that shows both. */
char *em_optim_settings(const em_optim *o);

/* State as named tensors ("param.3.exp_avg", "group.0.lr", "step"), live references for a
 * checkpoint writer; em_optim_load_state copies values in by name and checks every shape,
 * changing nothing on a mismatch. The names: "step" (i64 0-d, em_optim_step calls),
 * "group.<g>.lr" (f64 0-d), "param.<i>.step" (i64 0-d, updates of parameter i, counted over
 * all groups in order) and "param.<i>.<buffer>": SGD momentum_buffer (when momentum != 0);
 * Adam/AdamW exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad); RMSprop square_avg,
 * momentum_buffer (momentum != 0), grad_avg (centered). Every buffer is zero before the first
 * step. em_optim_state returns the count and writes up to max entries (-1 with an error when out is
 * NULL with max > 0, or max < 0); names live as long as o.
 * Loading needs every name exactly once, no unknown ones, and equal shapes. */
int em_optim_state(const em_optim *o, em_param_ref *out, int max);
em_status em_optim_load_state(em_optim *o, const em_param_ref *in, int n);

/* The largest step or event count that loading state (an optimizer's, a scheduler's, a grad
 * scaler's) or em_scheduler_set_last_step accepts: 2^53, where f64 still counts in ones and an
 * int64 can still be incremented. Counts must be whole numbers in [0, EM_MAX_STEP_COUNT]. */
#define EM_MAX_STEP_COUNT ((int64_t)1 << 53)

/* ---- learning-rate schedulers: em_scheduler_step once per step (or epoch, as the user
 * chooses); they set every group's lr from its base lr ----
 * A scheduler borrows o (o must outlive it). The base lr of a group is its lr when the
 * scheduler is made; groups added later are left alone. Making a scheduler sets the lr of
 * step 0; the lr of step t (t = em_scheduler_last_step):
 *   step_lr:          base * gamma^floor(t / step_size)
 *   multistep_lr:     base * gamma^(number of milestones <= t)
 *   exponential_lr:   base * gamma^t
 *   cosine_annealing: eta_min + (base - eta_min) * (1 + cos(pi * t / t_max)) / 2
 *   warmup_cosine:    t < warmup: base * (t + 1) / warmup;
 *                     warmup <= t < total: eta_min + (base - eta_min) *
 *                                          (1 + cos(pi * (t - warmup) / (total - warmup))) / 2;
 *                     t >= total: eta_min
 *   one_cycle:        PyTorch's two-phase cos schedule for every group (the lr only; momentum
 *                     is not cycled): initial = max_lr / div_factor rises to max_lr at step
 *                     pct_start * total_steps - 1, then falls to initial / final_div_factor at
 *                     step total_steps - 1; stepping past total_steps is an error. */
typedef struct em_scheduler em_scheduler;
em_scheduler *em_step_lr(em_optim *o, int64_t step_size, double gamma);
em_scheduler *em_multistep_lr(em_optim *o, const int64_t *milestones, int n, double gamma);
em_scheduler *em_exponential_lr(em_optim *o, double gamma);
em_scheduler *em_cosine_annealing_lr(em_optim *o, int64_t t_max, double eta_min);
em_scheduler *em_warmup_cosine_lr(em_optim *o, int64_t warmup_steps, int64_t total_steps,
                                  double eta_min);
typedef struct {
    double max_lr;
    int64_t total_steps;
    double pct_start;        /* default 0.3 */
    double div_factor;       /* default 25 */
    double final_div_factor; /* default 1e4 */
} em_one_cycle_opts;
em_scheduler *em_one_cycle_lr(em_optim *o, em_one_cycle_opts c);
/* ReduceLROnPlateau, with PyTorch's semantics: stepped with a metric (em_scheduler_step_metric),
 * usually once per epoch with the validation loss. After more than `patience` steps in a row
 * without improvement every group's lr is multiplied by factor (not below min_lr; changes
 * smaller than eps are skipped), then `cooldown` steps pass before bad steps count again. An
 * improvement is metric < best * (1 - threshold) (> best * (1 + threshold) when maximizing), or
 * by threshold itself with threshold_abs. */
typedef struct {
    bool maximize;      /* the metric should rise (an accuracy); default: fall (a loss) */
    double factor;      /* default 0.1; in (0, 1) */
    int64_t patience;   /* default 10; negative: cut after every step without improvement */
    double threshold;   /* default 1e-4 */
    bool threshold_abs;
    int64_t cooldown;
    double min_lr;
    double eps;         /* default 1e-8 */
} em_plateau_opts;
em_scheduler *em_reduce_lr_on_plateau(em_optim *o, em_plateau_opts p);

/* Steps a closed-form schedule; on a plateau scheduler it records an EM_ERR_STATE error and
 * changes nothing (it needs a metric). */
void em_scheduler_step(em_scheduler *s);
/* Steps a plateau scheduler with this step's metric; EM_ERR_STATE for the other kinds. */
em_status em_scheduler_step_metric(em_scheduler *s, double metric);
bool em_scheduler_wants_metric(const em_scheduler *s); /* true for a plateau scheduler */
int64_t em_scheduler_last_step(const em_scheduler *s);
/* For resume: step in [0, EM_MAX_STEP_COUNT] (one-cycle: at most total_steps). */
em_status em_scheduler_set_last_step(em_scheduler *s, int64_t step);
/* State beyond the step, as named live tensors for a checkpoint: a plateau scheduler's "best"
 * (f64 0-d), "num_bad_epochs" and "cooldown_counter" (i64 0-d); none for the closed-form kinds.
 * Returns the count and writes up to max entries. Loading copies them in by name, needing each
 * once with a 0-d shape, the counters whole numbers in [0, EM_MAX_STEP_COUNT] and best not NaN,
 * and changes nothing on a mismatch. */
int em_scheduler_state(const em_scheduler *s, em_param_ref *out, int max);
em_status em_scheduler_load_state(em_scheduler *s, const em_param_ref *in, int n);
void em_scheduler_free(em_scheduler *s);

#ifdef __cplusplus
}
#endif

#endif
