/* One training step with the techniques a user switched on: forward under autocast, the loss,
 * a scaled backward per micro-batch, then the update: callbacks, unscale, guard, clip, step,
 * scale update, scheduler; or the whole step replayed from a device graph (tech.cuda_graph). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "io/atomic_file.h"
#include "train/train_internal.h"

double em_train_clock_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static em_status check_opts(const em_module *model, const em_optim *optim, em_trainer_opts o)
{
    if (!model || !optim)
        return em_set_error(EM_ERR_ARG, "em_trainer_new: model and optimizer are required");
    em_techniques tech = o.tech;
    if (tech.amp != EM_F32 && tech.amp != EM_F16 && tech.amp != EM_BF16)
        return em_set_error(EM_ERR_ARG, "em_trainer_new: amp must be f16, bf16 or f32, not %s",
                            em_dtype_name(tech.amp));
    if (tech.grad_accum < 0 || !(tech.clip >= 0) || o.max_steps < 0 || o.val_batch < 0)
        return em_set_error(EM_ERR_ARG, "em_trainer_new: negative grad_accum (%d), clip (%g), "
                            "max_steps (%lld) or val_batch (%lld)", tech.grad_accum, tech.clip,
                            (long long)o.max_steps, (long long)o.val_batch);
    if (o.n_val_transforms < 0 || (o.n_val_transforms && !o.val_transforms))
        return em_set_error(EM_ERR_ARG, "em_trainer_new: n_val_transforms (%d) must be >= 0, "
                            "and val_transforms given when it is not 0", o.n_val_transforms);
    if (o.checkpoint_every < 0 || (o.checkpoint_every && !o.checkpoint))
        return em_set_error(EM_ERR_ARG, "em_trainer_new: checkpoint_every (%lld) must be >= 0, "
                            "and needs a checkpoint path", (long long)o.checkpoint_every);
    if (o.checkpoint && em_atomic_file_check(o.checkpoint) != EM_OK) /* before the run, not after */
        return em_error_status();
    return EM_OK;
}

/* Validation's transforms: the caller's, or the training loader's less random augmentation. */
static em_status copy_val_transforms(em_trainer *t)
{
    int n = t->o.n_val_transforms;
    const em_transform *from = t->o.val_transforms;
    if (!from)
        from = em_loader_transforms(t->loader, &n);
    t->val_tfs = calloc((size_t)n + 1, sizeof *t->val_tfs);
    if (!t->val_tfs)
        return em_set_error(EM_ERR_MEMORY, "em_trainer_new: out of memory");
    for (int i = 0; i < n; i++)
        if (t->o.val_transforms || !em_transform_is_random(&from[i]))
            t->val_tfs[t->n_val_tfs++] = from[i];
    return EM_OK;
}

em_trainer *em_trainer_new(em_module *model, em_optim *optim, em_loader *loader,
                           em_trainer_opts opts)
{
    if (check_opts(model, optim, opts) != EM_OK)
        return NULL;
    em_trainer *t = calloc(1, sizeof *t);
    int accum = opts.tech.grad_accum > 1 ? opts.tech.grad_accum : 1;
    double *recent = calloc((size_t)EM_RECENT_UPDATES * (size_t)accum, sizeof *recent);
    if (!t || !recent) {
        free(t);
        free(recent);
        em_set_error(EM_ERR_MEMORY, "em_trainer_new: out of memory");
        return NULL;
    }
    *t = (em_trainer){.model = model, .optim = optim, .loader = loader, .o = opts,
                      .accum = accum, .recent = recent, .stats = {.scale = 1}};
    em_status st = copy_val_transforms(t);
    if (st == EM_OK && opts.tech.amp == EM_F16 && !(t->scaler = em_grad_scaler_new((em_grad_scaler_opts){0})))
        st = em_error_status();
    if (st == EM_OK && opts.tech.guard
        && !(t->guard = em_guard_new(model, (em_guard_opts){.loss_outliers = true})))
        st = em_error_status();
    if (st == EM_OK && opts.tech.checkpoint_activations) {
        int segments = (int)lround(sqrt((double)model->n_children));
        if (!em_checkpoint_sequential(model, segments > 1 ? segments : 2))
            st = em_error_status();
    }
    if (st == EM_OK && opts.progress) {
        em_progress_printer_init(&t->printer);
        st = em_trainer_add_callbacks(t, (em_trainer_callbacks){
                                             .ctx = &t->printer,
                                             .on_step = em_progress_printer_step,
                                             .on_epoch = em_progress_printer_epoch});
    }
    if (st != EM_OK) {
        em_trainer_free(t);
        return NULL;
    }
    return t;
}

void em_trainer_free(em_trainer *t)
{
    if (!t)
        return;
    em_step_graph_free(t->graph);
    em_grad_scaler_free(t->scaler);
    em_guard_free(t->guard);
    free(t->val_tfs);
    free(t->recent);
    free(t);
}

em_status em_trainer_add_callbacks(em_trainer *t, em_trainer_callbacks cb)
{
    if (!t)
        return em_set_error(EM_ERR_ARG, "em_trainer_add_callbacks: trainer is NULL");
    if (t->n_callbacks == EM_TRAINER_MAX_CALLBACKS)
        return em_set_error(EM_ERR_ARG, "em_trainer_add_callbacks: already %d sets of callbacks",
                            EM_TRAINER_MAX_CALLBACKS);
    t->callbacks[t->n_callbacks++] = cb;
    return EM_OK;
}

double em_trainer_lr(const em_trainer *t)
{
    return em_optim_num_groups(t->optim) > 0 ? em_optim_get_lr(t->optim, 0) : 0;
}

em_grad_scaler *em_trainer_grad_scaler(const em_trainer *t)
{
    return t ? t->scaler : NULL;
}

em_trainer_stats em_trainer_get_stats(const em_trainer *t)
{
    em_trainer_stats s = t->stats;
    s.global_step = t->run.step;
    int64_t window = (int64_t)EM_RECENT_UPDATES * t->accum;
    int64_t n = s.steps < window ? s.steps : window;
    s.recent_loss = 0;
    for (int64_t i = 0; i < n; i++)
        s.recent_loss += t->recent[i] / (double)n;
    s.scale = t->scaler ? em_grad_scaler_get_scale(t->scaler) : 1.0;
    s.graph_replays = em_step_graph_get_stats(t->graph).replays;
    s.samples_per_s = s.train_seconds > 0 ? (double)s.samples / s.train_seconds : 0;
    return s;
}

/* A skip decision through the callbacks' agree (every process of a data-parallel run alike). */
static em_status agree(em_trainer *t, bool *skip)
{
    em_status st = EM_OK;
    for (int i = 0; i < t->n_callbacks && st == EM_OK; i++)
        if (t->callbacks[i].agree)
            st = t->callbacks[i].agree(t->callbacks[i].ctx, skip);
    return st;
}

/* Whether this update must be skipped: inf/NaN grads under the scaler, or the guard's verdict. */
static em_status check_update(em_trainer *t, const em_tensor *loss, bool *skip)
{
    *skip = false;
    for (int i = 0; i < t->n_callbacks; i++) {
        const em_trainer_callbacks *cb = &t->callbacks[i];
        em_status st = cb->before_update ? cb->before_update(cb->ctx, t->optim) : EM_OK;
        if (st != EM_OK)
            return st;
    }
    if (t->scaler) {
        em_status st = em_grad_scaler_unscale(t->scaler, t->optim);
        bool found = st == EM_OK && em_grad_scaler_found_inf(t->scaler), any = found;
        if (st == EM_OK)
            st = agree(t, &any);
        if (st == EM_OK && any && !found)
            st = em_grad_scaler_mark_inf(t->scaler, t->optim);
        if (st != EM_OK || any)
            return st; /* the scaler skips it and backs off: early f16 steps expect this */
    }
    em_status st = t->guard ? em_guard_check(t->guard, loss, -1, skip) : EM_OK;
    return st == EM_OK && t->guard ? agree(t, skip) : st;
}

static em_status update(em_trainer *t, const em_tensor *loss)
{
    bool skip, stepped = true;
    em_status st = check_update(t, loss, &skip);
    if (st == EM_OK && !skip && t->o.tech.clip > 0)
        st = em_clip_grad_norm_optim_device(t->optim, t->o.tech.clip, 2.0, NULL);
    if (st == EM_OK && !skip)
        st = t->scaler ? em_grad_scaler_step(t->scaler, t->optim, &stepped) : em_optim_step(t->optim);
    if (st == EM_OK && t->scaler)
        st = em_grad_scaler_update(t->scaler);
    em_optim_zero_grad(t->optim);
    t->pending = 0;
    if (st != EM_OK)
        return st;
    if (skip || !stepped)
        t->stats.skipped++;
    else
        t->stats.updates++;
    if (!skip && stepped && t->o.average &&
        (st = em_averaged_model_update(t->o.average, t->model)) != EM_OK)
        return st;
    if (t->o.scheduler && !em_scheduler_wants_metric(t->o.scheduler))
        em_scheduler_step(t->o.scheduler);
    return EM_OK;
}

static em_tensor *micro_batch_loss(em_trainer *t, const em_tensor *output, const em_tensor *y)
{
    if (t->o.loss)
        return t->o.loss(t->o.loss_ctx, output, y);
    return em_cross_entropy(output, y, (em_cross_entropy_opts){0});
}

/* ---- the step as one device graph ---- */

/* Why the run's update cannot be captured, or NULL. */
static const char *graph_blocker(const em_trainer *t)
{
    if (t->scaler)
        return "the grad scaler decides on the host whether to skip each update (f16 autocast)";
    if (t->guard)
        return "the guard checks each step's loss and grads on the host";
    if (t->accum > 1)
        return "gradient accumulation updates once every few micro-batches";
    for (int i = 0; i < t->n_callbacks; i++)
        if (t->callbacks[i].before_update || t->callbacks[i].agree ||
            t->callbacks[i].before_backward)
            return "callbacks run inside the update (data-parallel training)";
    return NULL;
}

/* The whole step, as the step graph runs it: forward and loss under autocast, backward,
 * clipping on the device, the update, the grads dropped. */
static em_status graph_step(void *ctx, em_tensor *const *in, em_tensor **loss_out)
{
    em_trainer *t = ctx;
    em_dtype amp = t->o.tech.amp;
    if (amp != EM_F32 && em_autocast_begin(amp) != EM_OK)
        return em_error_status();
    em_tensor *loss = micro_batch_loss(t, em_forward(t->model, in[0]), in[1]); // ()
    if (amp != EM_F32)
        em_autocast_end();
    em_status st = loss ? em_backward(loss) : em_error_status();
    if (st == EM_OK && t->o.tech.clip > 0)
        st = em_clip_grad_norm_optim_device(t->optim, t->o.tech.clip, 2.0, NULL);
    if (st == EM_OK)
        st = em_optim_step(t->optim);
    em_optim_zero_grad(t->optim);
    *loss_out = loss;
    return st;
}

/* A micro-batch x trained with this loss: the recent losses, the counts and *loss_value. */
static void count_micro_batch(em_trainer *t, const em_tensor *x, double value,
                              double *loss_value)
{
    if (loss_value)
        *loss_value = value;
    t->recent[t->stats.steps % ((int64_t)EM_RECENT_UPDATES * t->accum)] = value;
    t->stats.steps++;
    t->run.step++;
    t->stats.samples += em_size(x, 0);
}

/* One step through the graph; its loss read once it ran. */
static em_status graph_train_step(em_trainer *t, const em_tensor *x, const em_tensor *y,
                                  double *loss_value)
{
    em_tensor *loss = NULL;
    em_status st = em_step_graph_run(t->graph, (em_tensor *[]){(em_tensor *)x, (em_tensor *)y},
                                     2, &loss);
    if (st != EM_OK) {
        em_optim_zero_grad(t->optim);
        return st;
    }
    double value = loss ? em_item(loss) : NAN;
    if (!isfinite(value))
        return em_set_error(EM_ERR_NUMERIC, "em_trainer_step: the loss is %g at step %lld, and "
                            "the step's graph took its update (clipping or a lower learning rate "
                            "may help)", value, (long long)t->stats.steps);
    count_micro_batch(t, x, value, loss_value);
    t->stats.updates++;
    if (t->o.scheduler && !em_scheduler_wants_metric(t->o.scheduler))
        em_scheduler_step(t->o.scheduler);
    return EM_OK;
}

/* At the first step with tech.cuda_graph: the graph, or the line saying why not. */
static em_status decide_graph(em_trainer *t)
{
    t->graph_decided = true;
    const char *why = graph_blocker(t);
    if (why) {
        fprintf(stderr, "ember: cuda graph: %s; running eagerly\n", why);
        return EM_OK;
    }
    t->graph = em_step_graph_new(em_module_device(t->model), graph_step, t,
                                 (em_step_graph_opts){0});
    return t->graph ? EM_OK : em_error_status();
}

em_status em_trainer_step(em_trainer *t, const em_tensor *x, const em_tensor *y,
                          double *loss_value)
{
    if (!t || !x || !y)
        return em_set_error(EM_ERR_ARG, "em_trainer_step: NULL trainer or batch");
    if (t->o.tech.cuda_graph && !t->graph_decided && decide_graph(t) != EM_OK)
        return em_error_status();
    em_device device = em_module_device(t->model);
    if (x->device != device) /* a batch from elsewhere: copied to the model (a temporary) */
        x = em_to_device(x, device);
    if (y->device != device)
        y = em_to_device(y, device);
    if (t->graph)
        return x && y ? graph_train_step(t, x, y, loss_value) : em_error_status();
    em_dtype amp = t->o.tech.amp;
    if (amp != EM_F32 && em_autocast_begin(amp) != EM_OK)
        return em_error_status();
    size_t live_before = em_memory_get_stats(device).live_bytes;
    em_tensor *output = em_forward(t->model, x);       // (B, ...)
    em_tensor *loss = micro_batch_loss(t, output, y);  // ()
    size_t held = em_memory_get_stats(device).live_bytes - live_before;
    if (held > t->stats.activation_bytes)
        t->stats.activation_bytes = held;
    if (amp != EM_F32)
        em_autocast_end();
    em_tensor *scaled = t->accum > 1 ? em_mul_scalar(loss, 1.0 / t->accum) : loss;
    if (t->scaler)
        scaled = em_grad_scaler_scale(t->scaler, scaled);
    for (int i = 0; i < t->n_callbacks; i++)
        if (t->callbacks[i].before_backward)
            t->callbacks[i].before_backward(t->callbacks[i].ctx, t->pending + 1 >= t->accum);
    if (!scaled || em_backward(scaled) != EM_OK)
        return em_error_status();
    double value = em_item(loss);
    if (!isfinite(value) && !t->scaler && !t->guard) {
        em_optim_zero_grad(t->optim);
        t->pending = 0;
        return em_set_error(EM_ERR_NUMERIC, "em_trainer_step: the loss is %g at step %lld; the "
                            "update was not taken (clipping, the guard or a lower learning rate "
                            "may help)", value, (long long)t->stats.steps);
    }
    count_micro_batch(t, x, value, loss_value);
    if (++t->pending < t->accum)
        return EM_OK;
    return update(t, loss);
}

em_status em_trainer_flush(em_trainer *t)
{
    if (!t)
        return em_set_error(EM_ERR_ARG, "em_trainer_flush: trainer is NULL");
    return t->pending ? update(t, NULL) : EM_OK;
}
