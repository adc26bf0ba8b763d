/* DDP in the trainer: its callbacks set DDP's sync on the micro-batch an update follows, average
 * the gradients before an update that follows unsynchronised micro-batches, and agree every skip
 * decision across ranks, so every rank takes the same updates. */
#include "distributed/dist.h"

static void before_backward(void *ctx, bool update_follows)
{
    em_ddp_set_sync(ctx, update_follows);
}

static em_status before_update(void *ctx, em_optim *optim)
{
    (void)optim;
    return em_ddp_sync_grads(ctx);
}

static em_status agree(void *ctx, bool *skip)
{
    (void)ctx;
    return em_dist_any(*skip, skip);
}

em_status em_ddp_attach(em_ddp *d, em_trainer *t)
{
    if (!d || !t)
        return em_set_error(EM_ERR_ARG, "em_ddp_attach: NULL DDP or trainer");
    return em_trainer_add_callbacks(t, (em_trainer_callbacks){.ctx = d,
                                                              .before_backward = before_backward,
                                                              .before_update = before_update,
                                                              .agree = agree});
}
