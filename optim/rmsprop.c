/* RMSprop with smoothing constant alpha, the centered variant, momentum and weight decay,
 * as PyTorch's torch.optim.RMSprop. */
#include "optim/optim_internal.h"

static int rmsprop_state_names(const em_optim *o, const char **names)
{
    int n = 0;
    names[n++] = "square_avg";
    if (o->opts.rmsprop.momentum != 0)
        names[n++] = "momentum_buffer";
    if (o->opts.rmsprop.centered)
        names[n++] = "grad_avg";
    return n;
}

static bool rmsprop_supported(const em_backend *be)
{
    return be->rmsprop_update != NULL;
}

static int rmsprop_update(const em_optim *o, const em_backend *be, em_dtype dt, double lr,
                          double weight_decay, int64_t step, const em_array_list *l,
                          em_update_consts at)
{
    (void)step;
    const em_rmsprop_opts *r = &o->opts.rmsprop;
    em_rmsprop_hparams h = {
        .lr = lr,
        .at = at,
        .alpha = r->alpha,
        .eps = r->eps,
        .weight_decay = weight_decay,
        .momentum = r->momentum,
        .centered = r->centered,
    };
    /* the backend's slots: square_avg, momentum buffers, grad_avg (absent ones NULL) */
    em_array_list slots = *l;
    int k = 1;
    slots.state[1] = r->momentum != 0 ? l->state[k++] : NULL;
    slots.state[2] = r->centered ? l->state[k] : NULL;
    return be->rmsprop_update(dt, &h, &slots);
}

static const em_optim_rule rmsprop_rule = {
    .name = "rmsprop",
    .state_names = rmsprop_state_names,
    .supported = rmsprop_supported,
    .update = rmsprop_update,
};

em_optim *em_rmsprop(em_module *m, em_rmsprop_opts o)
{
    if (o.lr == 0)
        o.lr = 0.01;
    if (o.alpha == 0)
        o.alpha = 0.99;
    if (o.eps == 0)
        o.eps = 1e-8;
    if (!(o.lr >= 0) || !(o.eps >= 0) || !(o.weight_decay >= 0) || !(o.momentum >= 0)) {
        em_set_error(EM_ERR_ARG, "em_rmsprop: lr (%g), eps (%g), weight_decay (%g) and "
                     "momentum (%g) must be >= 0", o.lr, o.eps, o.weight_decay, o.momentum);
        return NULL;
    }
    if (!(o.alpha > 0 && o.alpha <= 1)) {
        em_set_error(EM_ERR_ARG, "em_rmsprop: alpha (%g) must be in (0, 1]", o.alpha);
        return NULL;
    }
    em_optim *opt = em_optim_new(&rmsprop_rule, o.lr, o.weight_decay);
    if (opt)
        opt->opts.rmsprop = o;
    return em_optim_init_module(opt, m, "em_rmsprop");
}
