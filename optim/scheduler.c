/* Learning-rate schedulers: each sets every group's lr as a closed-form function of the step
 * and the group's base lr (its lr when the scheduler was made), as PyTorch's do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/scheduler_internal.h"

/* cos annealing from start (pct 0) to end (pct 1) */
static double anneal_cos(double start, double end, double pct)
{
    return end + (start - end) / 2 * (cos(M_PI * pct) + 1);
}

static double lr_at(const em_scheduler *s, double base, int64_t t)
{
    switch (s->kind) {
    case SCHED_STEP:
        return base * pow(s->gamma, (double)(t / s->step_size));
    case SCHED_MULTISTEP: {
        int k = 0;
        for (int i = 0; i < s->n_milestones; i++)
            k += s->milestones[i] <= t;
        return base * pow(s->gamma, k);
    }
    case SCHED_EXPONENTIAL:
        return base * pow(s->gamma, (double)t);
    case SCHED_COSINE:
        return s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * t / s->t_max)) / 2;
    case SCHED_WARMUP_COSINE:
        if (t < s->warmup)
            return base * (t + 1) / s->warmup;
        if (t >= s->t_max)
            return s->eta_min;
        return s->eta_min + (base - s->eta_min) *
                                (1 + cos(M_PI * (t - s->warmup) / (s->t_max - s->warmup))) / 2;
    case SCHED_PLATEAU:
        return base; /* never asked: plateau.c sets its lrs itself */
    case SCHED_ONE_CYCLE:
        if (t <= s->warmup_end)
            return anneal_cos(s->initial_lr, s->max_lr, t / s->warmup_end);
        return anneal_cos(s->max_lr, s->min_lr,
                          (t - s->warmup_end) / (s->t_max - 1 - s->warmup_end));
    }
    return base;
}

static void apply(em_scheduler *s)
{
    for (int g = 0; g < s->n_groups; g++)
        em_optim_set_lr(s->o, g, lr_at(s, s->base_lrs[g], s->last_step));
}

em_scheduler *em_scheduler_new_kind(em_optim *o, sched_kind kind, const char *fn)
{
    if (!o) {
        em_set_error(EM_ERR_ARG, "%s: NULL optimizer", fn);
        return NULL;
    }
    em_scheduler *s = calloc(1, sizeof *s);
    int n = em_optim_num_groups(o);
    double *base = calloc(n > 0 ? n : 1, sizeof *base);
    if (!s || !base) {
        free(s);
        free(base);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    for (int g = 0; g < n; g++)
        base[g] = em_optim_get_lr(o, g);
    *s = (em_scheduler){.o = o, .kind = kind, .n_groups = n, .base_lrs = base};
    return s;
}

/* Sets the lr of step 0, as PyTorch's constructors do. */
static em_scheduler *start(em_scheduler *s)
{
    if (s)
        apply(s);
    return s;
}

em_scheduler *em_step_lr(em_optim *o, int64_t step_size, double gamma)
{
    if (step_size <= 0 || !(gamma >= 0)) {
        em_set_error(EM_ERR_ARG, "em_step_lr: step_size (%lld) must be > 0 and gamma (%g) >= 0",
                     (long long)step_size, gamma);
        return NULL;
    }
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_STEP, "em_step_lr");
    if (s) {
        s->step_size = step_size;
        s->gamma = gamma;
    }
    return start(s);
}

em_scheduler *em_multistep_lr(em_optim *o, const int64_t *milestones, int n, double gamma)
{
    if (n < 0 || (n > 0 && !milestones) || !(gamma >= 0)) {
        em_set_error(EM_ERR_ARG, "em_multistep_lr: needs n >= 0 (%d) milestones and gamma >= 0 "
                     "(%g)", n, gamma);
        return NULL;
    }
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_MULTISTEP, "em_multistep_lr");
    if (!s)
        return NULL;
    s->milestones = malloc((n > 0 ? n : 1) * sizeof *s->milestones);
    if (!s->milestones) {
        em_scheduler_free(s);
        em_set_error(EM_ERR_MEMORY, "em_multistep_lr: out of memory");
        return NULL;
    }
    if (n > 0)
        memcpy(s->milestones, milestones, n * sizeof *milestones);
    s->n_milestones = n;
    s->gamma = gamma;
    return start(s);
}

em_scheduler *em_exponential_lr(em_optim *o, double gamma)
{
    if (!(gamma >= 0)) {
        em_set_error(EM_ERR_ARG, "em_exponential_lr: gamma (%g) must be >= 0", gamma);
        return NULL;
    }
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_EXPONENTIAL, "em_exponential_lr");
    if (s)
        s->gamma = gamma;
    return start(s);
}

em_scheduler *em_cosine_annealing_lr(em_optim *o, int64_t t_max, double eta_min)
{
    if (t_max <= 0 || !(eta_min >= 0)) {
        em_set_error(EM_ERR_ARG, "em_cosine_annealing_lr: t_max (%lld) must be > 0 and eta_min "
                     "(%g) >= 0", (long long)t_max, eta_min);
        return NULL;
    }
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_COSINE, "em_cosine_annealing_lr");
    if (s) {
        s->t_max = t_max;
        s->eta_min = eta_min;
    }
    return start(s);
}

em_scheduler *em_warmup_cosine_lr(em_optim *o, int64_t warmup_steps, int64_t total_steps,
                                  double eta_min)
{
    if (warmup_steps < 0 || total_steps <= warmup_steps || !(eta_min >= 0)) {
        em_set_error(EM_ERR_ARG, "em_warmup_cosine_lr: needs 0 <= warmup_steps (%lld) < "
                     "total_steps (%lld) and eta_min (%g) >= 0", (long long)warmup_steps,
                     (long long)total_steps, eta_min);
        return NULL;
    }
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_WARMUP_COSINE, "em_warmup_cosine_lr");
    if (s) {
        s->warmup = warmup_steps;
        s->t_max = total_steps;
        s->eta_min = eta_min;
    }
    return start(s);
}

em_scheduler *em_one_cycle_lr(em_optim *o, em_one_cycle_opts c)
{
    static const char *fn = "em_one_cycle_lr";
    if (c.pct_start == 0)
        c.pct_start = 0.3;
    if (c.div_factor == 0)
        c.div_factor = 25;
    if (c.final_div_factor == 0)
        c.final_div_factor = 1e4;
    if (!(c.max_lr > 0) || !(c.div_factor > 0) || !(c.final_div_factor > 0)) {
        em_set_error(EM_ERR_ARG, "%s: max_lr (%g), div_factor (%g) and final_div_factor (%g) "
                     "must be > 0", fn, c.max_lr, c.div_factor, c.final_div_factor);
        return NULL;
    }
    double warmup_end = c.pct_start * (double)c.total_steps - 1;
    if (!(c.pct_start > 0 && c.pct_start < 1) || !(warmup_end > 0) ||
        !(warmup_end < (double)c.total_steps - 1)) {
        em_set_error(EM_ERR_ARG, "%s: pct_start (%g) of total_steps (%lld) leaves a phase "
                     "without steps", fn, c.pct_start, (long long)c.total_steps);
        return NULL;
    }
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_ONE_CYCLE, fn);
    if (s) {
        s->t_max = c.total_steps;
        s->max_lr = c.max_lr;
        s->initial_lr = c.max_lr / c.div_factor;
        s->min_lr = s->initial_lr / c.final_div_factor;
        s->warmup_end = warmup_end;
    }
    return start(s);
}

em_status em_scheduler_set_last_step(em_scheduler *s, int64_t step)
{
    if (!s || step < 0)
        return em_set_error(EM_ERR_ARG, "em_scheduler_set_last_step: NULL scheduler or step "
                            "< 0 (%lld)", (long long)step);
    if (s->kind == SCHED_ONE_CYCLE && step > s->t_max)
        return em_set_error(EM_ERR_STATE, "em_scheduler_set_last_step: step %lld is past the "
                            "one-cycle schedule's total_steps (%lld)", (long long)step,
                            (long long)s->t_max);
    s->last_step = step;
    if (s->kind != SCHED_PLATEAU)
        apply(s);
    return EM_OK;
}

void em_scheduler_step(em_scheduler *s)
{
    if (s && s->kind == SCHED_PLATEAU)
        em_set_error(EM_ERR_STATE, "em_scheduler_step: a plateau scheduler steps with a metric "
                     "(em_scheduler_step_metric)");
    else if (s)
        em_scheduler_set_last_step(s, s->last_step + 1);
}

int64_t em_scheduler_last_step(const em_scheduler *s)
{
    return s ? s->last_step : -1;
}

void em_scheduler_free(em_scheduler *s)
{
    if (!s)
        return;
    free(s->base_lrs);
    free(s->milestones);
    em_release(s->best);
    em_release(s->num_bad);
    em_release(s->cooldown);
    free(s);
}
