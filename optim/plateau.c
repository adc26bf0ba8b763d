/* ReduceLROnPlateau: the lr falls by a factor when a metric stops improving, as PyTorch's does.
 * Its state (best, bad steps in a row, cooldown) lives in 0-d tensors so that a training
 * checkpoint saves it like an optimizer's. */
#include <math.h>
#include <string.h>

#include "optim/scheduler_internal.h"

#define N_PLATEAU_STATE 3

static em_status check_opts(em_plateau_opts *p)
{
    if (p->factor == 0)
        p->factor = 0.1;
    if (p->patience == 0)
        p->patience = 10;
    else if (p->patience < 0)
        p->patience = 0;
    if (p->threshold == 0)
        p->threshold = 1e-4;
    if (p->eps == 0)
        p->eps = 1e-8;
    if (!(p->factor > 0 && p->factor < 1) || !(p->threshold >= 0) || p->cooldown < 0
        || !(p->min_lr >= 0) || !(p->eps >= 0))
        return em_set_error(EM_ERR_ARG, "em_reduce_lr_on_plateau: needs 0 < factor < 1 (%g), "
                            "threshold >= 0 (%g), cooldown >= 0 (%lld), min_lr >= 0 (%g) and "
                            "eps >= 0 (%g)", p->factor, p->threshold, (long long)p->cooldown,
                            p->min_lr, p->eps);
    return EM_OK;
}

em_scheduler *em_reduce_lr_on_plateau(em_optim *o, em_plateau_opts p)
{
    if (check_opts(&p) != EM_OK)
        return NULL;
    em_scheduler *s = em_scheduler_new_kind(o, SCHED_PLATEAU, "em_reduce_lr_on_plateau");
    if (!s)
        return NULL;
    sched_plateau *pl = &s->plateau;
    pl->opts = p;
    pl->best = em_optim_own(em_scalar(p.maximize ? -INFINITY : INFINITY, EM_F64));
    pl->num_bad = em_optim_own(em_zeros(EM_SCALAR_SHAPE, EM_I64));
    pl->cooldown = em_optim_own(em_zeros(EM_SCALAR_SHAPE, EM_I64));
    if (!pl->best || !pl->num_bad || !pl->cooldown) {
        em_scheduler_free(s);
        return NULL;
    }
    return s;
}

bool em_scheduler_wants_metric(const em_scheduler *s)
{
    return s && s->kind == SCHED_PLATEAU;
}

static bool is_better(const em_plateau_opts *p, double metric, double best)
{
    if (p->maximize)
        return metric > (p->threshold_abs ? best + p->threshold : best * (1 + p->threshold));
    return metric < (p->threshold_abs ? best - p->threshold : best * (1 - p->threshold));
}

static void reduce_lrs(em_scheduler *s)
{
    for (int g = 0; g < s->n_groups; g++) {
        double old = em_optim_get_lr(s->o, g);
        double lr = fmax(old * s->plateau.opts.factor, s->plateau.opts.min_lr);
        if (old - lr > s->plateau.opts.eps)
            em_optim_set_lr(s->o, g, lr);
    }
}

em_status em_scheduler_step_metric(em_scheduler *s, double metric)
{
    if (!em_scheduler_wants_metric(s))
        return em_set_error(EM_ERR_STATE, "em_scheduler_step_metric: %s", s ? "only a plateau "
                            "scheduler steps with a metric" : "scheduler is NULL");
    sched_plateau *pl = &s->plateau;
    double *best = em_data_ptr(pl->best);
    int64_t *bad = em_data_ptr(pl->num_bad), *cooldown = em_data_ptr(pl->cooldown);
    s->last_step++;
    if (is_better(&pl->opts, metric, *best)) {
        *best = metric;
        *bad = 0;
    } else {
        ++*bad;
    }
    if (*cooldown > 0) {
        --*cooldown;
        *bad = 0;
    }
    if (*bad > pl->opts.patience) {
        reduce_lrs(s);
        *cooldown = pl->opts.cooldown;
        *bad = 0;
    }
    return EM_OK;
}

int em_scheduler_state(const em_scheduler *s, em_param_ref *out, int max)
{
    if (!em_scheduler_wants_metric(s))
        return 0;
    if (!em_array_present(out, max, "em_scheduler_state", "out", "max"))
        return -1;
    em_param_ref refs[N_PLATEAU_STATE] = {
        {"best", s->plateau.best},
        {"num_bad_epochs", s->plateau.num_bad},
        {"cooldown_counter", s->plateau.cooldown}};
    for (int i = 0; i < N_PLATEAU_STATE && i < max; i++)
        out[i] = refs[i];
    return N_PLATEAU_STATE;
}

em_status em_scheduler_load_state(em_scheduler *s, const em_param_ref *in, int n)
{
    if (!s || (n > 0 && !in))
        return em_set_error(EM_ERR_ARG, "em_scheduler_load_state: NULL scheduler or entries");
    em_param_ref own[N_PLATEAU_STATE];
    int n_own = em_scheduler_state(s, own, N_PLATEAU_STATE);
    const em_tensor *found[N_PLATEAU_STATE] = {0};
    if (n != n_own)
        return em_set_error(EM_ERR_ARG, "em_scheduler_load_state: %d entries for a scheduler "
                            "with %d", n, n_own);
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < n_own && (!in[i].name || strcmp(in[i].name, own[k].name)))
            k++;
        if (k == n_own || found[k] || !in[i].value || in[i].value->ndim != 0)
            return em_set_error(EM_ERR_ARG, "em_scheduler_load_state: entry '%s' is unknown, "
                                "repeated or not 0-d", in[i].name ? in[i].name : "(null)");
        found[k] = in[i].value;
    }
    if (n_own && isnan(em_item(found[0])))
        return em_set_error(EM_ERR_ARG, "em_scheduler_load_state: 'best' is NaN");
    for (int k = 1; k < n_own; k++)
        if (em_optim_check_count("em_scheduler_load_state", own[k].name, em_item(found[k])) !=
            EM_OK)
            return EM_ERR_ARG;
    for (int k = 0; k < n_own; k++)
        em_copy_(own[k].value, found[k]);
    return EM_OK;
}
