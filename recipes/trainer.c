/* One optimizer step of a recipe with the techniques a user switched on: mixed precision with a
 * grad scaler, gradient accumulation, clipping and the non-finite/outlier guard. */
#include <math.h>

#include "recipes/recipes.h"

em_status em_trainer_init(em_trainer *t, em_module *model, em_optim *optim, em_scheduler *sched,
                          em_techniques tech)
{
    *t = (em_trainer){.model = model, .optim = optim, .sched = sched, .tech = tech};
    if (tech.amp != EM_F32 && tech.amp != EM_F16 && tech.amp != EM_BF16)
        return em_set_error(EM_ERR_ARG, "em_trainer_init: amp must be f16, bf16 or f32, not %s",
                            em_dtype_name(tech.amp));
    if (tech.grad_accum < 0 || tech.clip < 0)
        return em_set_error(EM_ERR_ARG, "em_trainer_init: negative grad_accum (%d) or clip (%g)",
                            tech.grad_accum, tech.clip);
    if (tech.amp == EM_F16 && !(t->scaler = em_scaler_new((em_scaler_opts){0})))
        return em_error_status();
    if (tech.guard && !(t->guard = em_guard_new(model, (em_guard_opts){.loss_outliers = true})))
        return em_error_status();
    if (tech.checkpoint_activations) {
        int segments = (int)lround(sqrt((double)model->n_children));
        if (!em_checkpoint_sequential(model, segments > 1 ? segments : 2))
            return em_error_status();
    }
    return EM_OK;
}

void em_trainer_free(em_trainer *t)
{
    em_scaler_free(t->scaler);
    em_guard_free(t->guard);
    t->scaler = NULL;
    t->guard = NULL;
}

double em_trainer_scale(const em_trainer *t)
{
    return t->scaler ? em_scaler_get_scale(t->scaler) : 1.0;
}

/* Whether this update must be skipped: inf/NaN grads under the scaler, or the guard's verdict. */
static em_status check_update(em_trainer *t, const em_tensor *loss, bool *skip)
{
    *skip = false;
    if (t->scaler) {
        em_status st = em_scaler_unscale(t->scaler, t->optim);
        if (st != EM_OK || em_scaler_found_inf(t->scaler))
            return st; /* the scaler skips it and backs off: early f16 steps expect this */
    }
    return t->guard ? em_guard_check(t->guard, loss, -1, skip) : EM_OK;
}

static em_status update(em_trainer *t, const em_tensor *loss)
{
    bool skip, stepped = true;
    em_status st = check_update(t, loss, &skip);
    if (st == EM_OK && !skip && t->tech.clip > 0) {
        em_clip_grad_norm_optim(t->optim, t->tech.clip, 2.0, false);
        st = em_error_status();
    }
    if (st == EM_OK && !skip)
        st = t->scaler ? em_scaler_step(t->scaler, t->optim, &stepped) : em_optim_step(t->optim);
    if (st == EM_OK && t->scaler)
        st = em_scaler_update(t->scaler);
    em_optim_zero_grad(t->optim);
    t->pending = 0;
    if (st != EM_OK)
        return st;
    if (skip || !stepped)
        t->skipped++;
    else
        t->updates++;
    if (t->sched)
        em_scheduler_step(t->sched);
    return EM_OK;
}

em_status em_trainer_micro_batch(em_trainer *t, const em_tensor *x, const em_tensor *y,
                                 double *loss_value)
{
    int accum = t->tech.grad_accum > 1 ? t->tech.grad_accum : 1;
    if (t->tech.amp != EM_F32 && em_autocast_begin(t->tech.amp) != EM_OK)
        return em_error_status();
    size_t live_before = em_memory_get_stats(EM_CPU).live_bytes;
    em_tensor *logits = em_forward(t->model, x);                               // (B, classes)
    em_tensor *loss = em_cross_entropy(logits, y, (em_cross_entropy_opts){0}); // () f32
    size_t held = em_memory_get_stats(EM_CPU).live_bytes - live_before;
    if (held > t->activation_bytes)
        t->activation_bytes = held;
    if (t->tech.amp != EM_F32)
        em_autocast_end();
    em_tensor *scaled = accum > 1 ? em_mul_scalar(loss, 1.0 / accum) : loss;
    if (t->scaler)
        scaled = em_scaler_scale(t->scaler, scaled);
    if (!scaled || em_backward(scaled) != EM_OK)
        return em_error_status();
    *loss_value = em_item(loss);
    if (++t->pending < accum)
        return EM_OK;
    return update(t, loss);
}

em_status em_trainer_flush(em_trainer *t)
{
    return t->pending ? update(t, NULL) : EM_OK;
}
