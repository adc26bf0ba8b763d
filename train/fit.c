/* The epochs of a training run: batches from the loader through em_trainer_step, then after
 * each epoch validation, a training checkpoint and the callbacks; saving and resuming a run. */
#include <math.h>

#include "train/train_checkpoint.h"
#include "train/train_internal.h"

static em_train_state train_state(em_trainer *t)
{
    return (em_train_state){.model = t->model, .optim = t->optim, .scheduler = t->o.scheduler,
                            .loader = t->loader, .scaler = t->scaler, .counters = &t->run,
                            .average = t->o.average};
}

em_status em_trainer_save(const em_trainer *t, const char *path)
{
    if (!t)
        return em_set_error(EM_ERR_ARG, "em_trainer_save: trainer is NULL");
    if (t->pending)
        return em_set_error(EM_ERR_STATE, "em_trainer_save: the gradients of %d micro-batches "
                            "are not applied yet (save between optimizer updates)", t->pending);
    em_train_state s = train_state((em_trainer *)t); /* saving only reads the counters */
    return (t->o.save_checkpoint ? t->o.save_checkpoint : em_train_checkpoint_save)(
        path, &s, t->o.meta, t->o.n_meta);
}

em_status em_trainer_resume(em_trainer *t, const char *path)
{
    if (!t)
        return em_set_error(EM_ERR_ARG, "em_trainer_resume: trainer is NULL");
    em_train_state s = train_state(t);
    em_status st = (t->o.load_checkpoint ? t->o.load_checkpoint : em_train_checkpoint_load)(
        path, &s);
    if (st == EM_OK)
        t->saved_at = t->run.step;
    return st;
}

static void notify_step(const em_trainer *t, const em_progress *p)
{
    for (int i = 0; i < t->n_callbacks; i++)
        if (t->callbacks[i].on_step)
            t->callbacks[i].on_step(t->callbacks[i].ctx, p);
}

static void notify_epoch(const em_trainer *t, const em_epoch_stats *e)
{
    for (int i = 0; i < t->n_callbacks; i++)
        if (t->callbacks[i].on_epoch)
            t->callbacks[i].on_epoch(t->callbacks[i].ctx, e);
}

static em_status validate(em_trainer *t, em_epoch_stats *e)
{
    e->val_loss = e->val_acc = NAN;
    if (!t->o.val)
        return EM_OK;
    em_eval_result r;
    em_status st = em_evaluate(t->model, t->o.val, (em_eval_opts){.batch = t->o.val_batch,
                                                                  .loss = t->o.loss,
                                                                  .loss_ctx = t->o.loss_ctx,
                                                                  .transforms = t->val_tfs,
                                                                  .n_transforms = t->n_val_tfs},
                               &r);
    if (st == EM_OK) {
        e->val_loss = r.loss;
        e->val_acc = r.accuracy;
    }
    return st;
}

/* The checkpoint, when checkpoint_every micro-batches passed since the last one and no
 * accumulation is pending. */
static em_status save_periodically(em_trainer *t)
{
    if (!t->o.checkpoint_every || t->pending || t->run.step - t->saved_at < t->o.checkpoint_every)
        return EM_OK;
    t->saved_at = t->run.step;
    return em_trainer_save(t, t->o.checkpoint);
}

/* After a micro-batch: the progress the callbacks hear. */
static void report_step(em_trainer *t, em_progress *p, double t0)
{
    p->mean_loss = t->run.epoch_loss_sum / (double)t->run.epoch_steps;
    p->batch++;
    p->step = t->stats.steps;
    p->global_step = t->run.step;
    double elapsed = em_train_clock_s() - t0;
    p->samples_per_s = elapsed > 0 ? (double)p->samples / elapsed : 0;
    p->lr = em_trainer_lr(t);
    p->scale = t->scaler ? em_grad_scaler_get_scale(t->scaler) : 1.0;
    p->skipped = t->stats.skipped;
    notify_step(t, p);
}

/* The rest of the loader's current epoch, or until max_steps (then *stopped); the epoch's mean
 * loss into e. */
static em_status train_batches(em_trainer *t, em_progress *p, em_epoch_stats *e, bool *stopped)
{
    double t0 = em_train_clock_s();
    em_status st;
    for (;;) {
        if (t->o.max_steps && t->stats.steps >= t->o.max_steps && !t->pending) {
            *stopped = true;
            st = EM_OK;
            break;
        }
        em_scope_begin();
        em_batch b;
        st = em_loader_next(t->loader, &b);
        if (st == EM_OK)
            st = em_trainer_step(t, b.x, b.y, &p->loss);
        if (st == EM_OK)
            p->samples += em_size(b.x, 0);
        em_scope_end();
        if (st != EM_OK)
            break;
        t->run.epoch_loss_sum += p->loss;
        t->run.epoch_steps++;
        report_step(t, p, t0);
        if ((st = save_periodically(t)) != EM_OK)
            break;
    }
    if (st == EM_END)
        st = em_trainer_flush(t);
    e->seconds = em_train_clock_s() - t0;
    e->samples = p->samples;
    e->train_loss = t->run.epoch_steps ? t->run.epoch_loss_sum / (double)t->run.epoch_steps : NAN;
    e->global_step = t->run.step;
    t->stats.train_seconds += e->seconds;
    return st;
}

/* One epoch from where the loader stands, then its validation, checkpoint and callbacks. */
static em_status run_epoch(em_trainer *t, int epochs, bool *stopped)
{
    em_loader_pos at = em_loader_position(t->loader);
    em_progress p = {.epoch = (int)at.epoch, .epochs = epochs, .batch = at.batch,
                     .batches = em_loader_num_batches(t->loader)};
    em_epoch_stats e = {.epoch = p.epoch, .epochs = epochs};
    em_status st = train_batches(t, &p, &e, stopped);
    if (st == EM_OK && !*stopped) { /* the next epoch counts from 0 */
        t->run.epoch_steps = 0;
        t->run.epoch_loss_sum = 0;
    }
    if (st != EM_OK || *stopped)
        return st == EM_OK && t->o.checkpoint ? em_trainer_save(t, t->o.checkpoint) : st;
    st = validate(t, &e);
    if (st == EM_OK && em_scheduler_wants_metric(t->o.scheduler))
        st = em_scheduler_step_metric(t->o.scheduler, isnan(e.val_loss) ? e.train_loss
                                                                         : e.val_loss);
    e.lr = em_trainer_lr(t);
    if (st == EM_OK && t->o.checkpoint)
        st = em_trainer_save(t, t->o.checkpoint);
    t->saved_at = t->run.step;
    if (st != EM_OK)
        return st;
    t->stats.last_epoch = e;
    notify_epoch(t, &e);
    return EM_OK;
}

em_status em_trainer_fit(em_trainer *t, int epochs)
{
    if (!t || !t->loader || epochs < 0)
        return em_set_error(EM_ERR_ARG, "em_trainer_fit: need a trainer with a loader and "
                            "epochs >= 0, not %d", epochs);
    em_status st = EM_OK;
    bool stopped = false;
    while (st == EM_OK && !stopped && em_loader_position(t->loader).epoch < epochs)
        st = run_epoch(t, epochs, &stopped);
    return st;
}
