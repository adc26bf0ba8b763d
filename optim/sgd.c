/* Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay,
 * as PyTorch's torch.optim.SGD. */
#include "optim/optim_internal.h"

static int sgd_state_names(const em_optim *o, const char **names)
{
    if (o->opts.sgd.momentum == 0)
        return 0;
    names[0] = "momentum_buffer";
    return 1;
}

static bool sgd_supported(const em_backend *be)
{
    return be->sgd_update != NULL;
}

static int sgd_update(const em_optim *o, const em_backend *be, em_dtype dt, double lr,
                      double weight_decay, int64_t step, const em_array_list *l,
                      em_update_consts at)
{
    const em_sgd_opts *s = &o->opts.sgd;
    em_sgd_hparams h = {
        .lr = lr,
        .at = at,
        .momentum = s->momentum,
        .dampening = s->dampening,
        .weight_decay = weight_decay,
        .nesterov = s->nesterov,
        .first_step = step == 1,
    };
    return be->sgd_update(dt, &h, l);
}

static const em_optim_rule sgd_rule = {
    .name = "sgd",
    .state_names = sgd_state_names,
    .supported = sgd_supported,
    .update = sgd_update,
};

em_optim *em_sgd(em_module *m, em_sgd_opts o)
{
    if (o.lr == 0)
        o.lr = 0.01;
    if (!(o.lr >= 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0) || !(o.dampening >= 0)) {
        em_set_error(EM_ERR_ARG, "em_sgd: lr (%g), momentum (%g), dampening (%g) and "
                     "weight_decay (%g) must be >= 0", o.lr, o.momentum, o.dampening,
                     o.weight_decay);
        return NULL;
    }
    if (o.nesterov && (o.momentum == 0 || o.dampening != 0)) {
        em_set_error(EM_ERR_ARG, "em_sgd: nesterov needs a momentum (%g) and zero dampening "
                     "(%g)", o.momentum, o.dampening);
        return NULL;
    }
    em_optim *opt = em_optim_new(&sgd_rule, o.lr, o.weight_decay);
    if (opt)
        opt->opts.sgd = o;
    return em_optim_init_module(opt, m, "em_sgd");
}
