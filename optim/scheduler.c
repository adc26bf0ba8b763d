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
        return base * pow(s->step.gamma, (double)(t / s->step.step_size));
    case SCHED_MULTISTEP: {
        const sched_multistep *m = &s->multistep;
        int k = 0;
        for (int i = 0; i < m->n_milestones; i++)
            k += m->milestones[i] <= t;
        return base * pow(m->gamma, k);
    }
    case SCHED_EXPONENTIAL:
        return base * pow(s->exponential.gamma, (double)t);
    case SCHED_COSINE: {
        const sched_cosine *c = &s->cosine;
        return c->eta_min + (base - c->eta_min) * (1 + cos(M_PI * t / c->t_max)) / 2;
    }
    case SCHED_WARMUP_COSINE: {
        const sched_warmup_cosine *w = &s->warmup_cosine;
        if (t < w->warmup_steps)
            return base * (t + 1) / w->warmup_steps;
        if (t >= w->total_steps)
            return w->eta_min;
        return w->eta_min + (base - w->eta_min) *
                                (1 + cos(M_PI * (t - w->warmup_steps) /
                                         (w->total_steps - w->warmup_steps))) / 2;
    }
    case SCHED_PLATEAU:
        return base; /* never asked: plateau.c sets its lrs itself */
    case SCHED_ONE_CYCLE: {
        const sched_one_cycle *c = &s->one_cycle;
        if (t <= c->warmup_end)
            return anneal_cos(c->initial_lr, c->max_lr, t / c->warmup_end);
        return anneal_cos(c->max_lr, c->min_lr,
                          (t - c->warmup_end) / (c->total_steps - 1 - c->warmup_end));
    }
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
    if (s)
        s->step = (sched_step){.step_size = step_size, .gamma = gamma};
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
    sched_multistep *m = &s->multistep;
    m->milestones = malloc((n > 0 ? n : 1) * sizeof *m->milestones);
    if (!m->milestones) {
        em_scheduler_free(s);
        em_set_error(EM_ERR_MEMORY, "em_multistep_lr: out of memory");
        return NULL;
    }
    if (n > 0)
        memcpy(m->milestones, milestones, n * sizeof *milestones);
    m->n_milestones = n;
    m->gamma = gamma;
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
        s->exponential.gamma = gamma;
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
    if (s)
        s->cosine = (sched_cosine){.t_max = t_max, .eta_min = eta_min};
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
    if (s)
        s->warmup_cosine = (sched_warmup_cosine){
            .warmup_steps = warmup_steps, .total_steps = total_steps, .eta_min = eta_min};
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
        double initial_lr = c.max_lr / c.div_factor;
        s->one_cycle = (sched_one_cycle){.total_steps = c.total_steps,
                                         .initial_lr = initial_lr,
                                         .max_lr = c.max_lr,
                                         .min_lr = initial_lr / c.final_div_factor,
                                         .warmup_end = warmup_end};
    }
    return start(s);
}

em_status em_scheduler_set_last_step(em_scheduler *s, int64_t step)
{
    if (!s || step < 0 || step > EM_MAX_STEP_COUNT)
        return em_set_error(EM_ERR_ARG, "em_scheduler_set_last_step: NULL scheduler or step "
                            "(%lld) outside [0, 2^53]", (long long)step);
    if (s->kind == SCHED_ONE_CYCLE && step > s->one_cycle.total_steps)
        return em_set_error(EM_ERR_STATE, "em_scheduler_set_last_step: step %lld is past the "
                            "one-cycle schedule's total_steps (%lld)", (long long)step,
                            (long long)s->one_cycle.total_steps);
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
    if (s->kind == SCHED_MULTISTEP)
        free(s->multistep.milestones);
    if (s->kind == SCHED_PLATEAU) {
        em_release(s->plateau.best);
        em_release(s->plateau.num_bad);
        em_release(s->plateau.cooldown);
    }
    free(s);
}
