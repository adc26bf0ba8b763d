/* The optimizer and the learning-rate schedule a run names, with the recipe's settings of them
 * (recipes.h: recipe_optimizer, recipe_schedule). */
#include <string.h>

#include "recipes/recipes.h"

em_optim *recipe_optimizer(const recipe_spec *rc, const char *name, em_module *model, double lr,
                           double momentum)
{
    if (!strcmp(name, "sgd"))
        return em_sgd(model, (em_sgd_opts){.lr = lr, .momentum = momentum});
    if (!strcmp(name, "adam"))
        return em_adam(model, (em_adam_opts){.lr = lr});
    if (!strcmp(name, "rmsprop"))
        return em_rmsprop(model, (em_rmsprop_opts){.lr = lr});
    if (strcmp(name, "adamw")) {
        em_set_error(EM_ERR_ARG, "recipe_optimizer: unknown optimizer '%s' (sgd, adam, adamw, "
                     "rmsprop)", name);
        return NULL;
    }
    em_adam_opts opts = rc->adamw;
    opts.lr = lr;
    em_optim *o = em_adamw(rc->decay_matrices_only ? NULL : model, opts);
    if (o && rc->decay_matrices_only && em_optim_add_module_no_decay_1d(o, model) != EM_OK) {
        em_optim_free(o);
        return NULL;
    }
    return o;
}

/* warmup-cosine's warm-up updates in a run of total */
static int64_t warmup_updates(const recipe_spec *rc, int64_t total)
{
    if (rc->warmup_updates)
        return total > rc->warmup_updates ? rc->warmup_updates : 1;
    return total / 20 > 1 ? total / 20 : 1;
}

em_status recipe_schedule(const recipe_spec *rc, const char *name, em_optim *o,
                          int64_t total_updates, em_scheduler **out)
{
    int64_t total = total_updates > 0 ? total_updates : 1;
    double lr = em_optim_get_lr(o, 0);
    *out = NULL;
    if (!strcmp(name, "constant"))
        return EM_OK;
    if (!strcmp(name, "cosine"))
        *out = em_cosine_annealing_lr(o, total, 0.0);
    else if (!strcmp(name, "warmup-cosine"))
        *out = em_warmup_cosine_lr(o, warmup_updates(rc, total), total,
                                   rc->final_lr_divisor ? lr / rc->final_lr_divisor : 0.0);
    else if (!strcmp(name, "onecycle"))
        *out = em_one_cycle_lr(o, (em_one_cycle_opts){.max_lr = lr, .total_steps = total});
    else if (!strcmp(name, "step"))
        *out = em_step_lr(o, total / 3 > 1 ? total / 3 : 1, 0.1);
    else if (!strcmp(name, "plateau"))
        *out = em_reduce_lr_on_plateau(o, (em_plateau_opts){.patience = 1});
    else
        return em_set_error(EM_ERR_ARG, "recipe_schedule: unknown schedule '%s' (%s)", name,
                            RECIPE_SCHEDULES);
    return *out ? EM_OK : em_error_status();
}
