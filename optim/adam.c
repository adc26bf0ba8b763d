/* Adam (L2 weight decay added to the gradient) and AdamW (decoupled decay), with bias
 * correction and the amsgrad variant, as PyTorch's torch.optim.Adam and AdamW. */
#include "optim/optim_internal.h"

static int adam_state_names(const em_optim *o, const char **names)
{
    names[0] = "exp_avg";
    names[1] = "exp_avg_sq";
    if (!o->opts.adam.amsgrad)
        return 2;
    names[2] = "max_exp_avg_sq";
    return 3;
}

static bool adam_supported(const em_backend *be)
{
    return be->adam_update != NULL;
}

static int adam_update(const em_optim *o, const em_backend *be, em_dtype dt, double lr,
                       double weight_decay, int64_t step, const em_array_list *l,
                       em_update_consts at)
{
    const em_adam_opts *a = &o->opts.adam;
    em_adam_hparams h = {
        .lr = lr,
        .at = at,
        .beta1 = a->beta1,
        .beta2 = a->beta2,
        .eps = a->eps,
        .weight_decay = weight_decay,
        .decoupled = o->decoupled,
        .amsgrad = a->amsgrad,
        .step = step,
    };
    return be->adam_update(dt, &h, l);
}

static const em_optim_rule adam_rule = {
    .name = "adam",
    .state_names = adam_state_names,
    .supported = adam_supported,
    .update = adam_update,
};

static em_optim *adam_new(em_module *m, em_adam_opts o, bool decoupled, const char *fn)
{
    if (o.lr == 0)
        o.lr = 1e-3;
    if (o.beta1 == 0)
        o.beta1 = 0.9;
    if (o.beta2 == 0)
        o.beta2 = 0.999;
    if (o.eps == 0)
        o.eps = 1e-8;
    if (o.no_weight_decay)
        o.weight_decay = 0;
    else if (decoupled && o.weight_decay == 0)
        o.weight_decay = 0.01;
    if (!(o.lr >= 0) || !(o.eps >= 0) || !(o.weight_decay >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: lr (%g), eps (%g) and weight_decay (%g) must be >= 0", fn,
                     o.lr, o.eps, o.weight_decay);
        return NULL;
    }
    if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
        em_set_error(EM_ERR_ARG, "%s: betas (%g, %g) must be in [0, 1)", fn, o.beta1, o.beta2);
        return NULL;
    }
    em_optim *opt = em_optim_new(&adam_rule, o.lr, o.weight_decay);
    if (opt) {
        opt->opts.adam = o;
        opt->decoupled = decoupled;
    }
    return em_optim_init_module(opt, m, fn);
}

em_optim *em_adam(em_module *m, em_adam_opts o)
{
    return adam_new(m, o, false, "em_adam");
}

em_optim *em_adamw(em_module *m, em_adam_opts o)
{
    return adam_new(m, o, true, "em_adamw");
}
