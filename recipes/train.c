/* The one training driver of every recipe: the recipe's data (its hook) through a threaded
 * loader into em_trainer (train/), its model, optimizer, schedule and loss, a checkpoint after
 * each epoch (a whole-model file with the recipe's metadata), then its test score. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recipes/run.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int recipe_default_workers(em_device device)
{
    return device == EM_CPU ? 0 : 2;
}

/* Everything one run holds; released by run_free whatever state it stopped in. */
typedef struct {
    recipe_data data;
    em_module *model;
    em_optim *optim;
    em_scheduler *sched; /* NULL for a constant learning rate */
    em_trainer *trainer;
    em_observer *observer;
    em_sampler *sampler; /* with ddp: this rank's shard of the shuffled epoch */
    em_loader *loader;
    em_ddp *ddp;
    recipe_meta meta;    /* written into every checkpoint */
} run;

static void run_free(run *r)
{
    em_trainer_free(r->trainer);
    em_ddp_free(r->ddp);
    em_loader_free(r->loader);
    em_sampler_free(r->sampler);
    em_scheduler_free(r->sched);
    em_optim_free(r->optim);
    em_module_free(r->model);
    recipe_data_free(&r->data);
}

/* The batch-size finder's trial: a few training steps of a fresh copy of the recipe's model on
 * random data of the recipe's shape, with the run's techniques. */
static em_status try_batch(void *ctx, int64_t batch, double *samples_per_s)
{
    const recipe_train_opts *o = ctx;
    const recipe_spec *rc = o->recipe;
    em_module *model = rc->build(NULL);
    if (model && em_module_to(model, o->device) != EM_OK) {
        em_module_free(model);
        return em_error_status();
    }
    em_optim *optim = model ? em_sgd(model, (em_sgd_opts){.lr = 1e-3, .momentum = 0.9}) : NULL;
    em_trainer *t = optim ? em_trainer_new(model, optim, NULL, (em_trainer_opts){.tech = o->tech})
                          : NULL;
    em_status st = t ? EM_OK : em_error_status();
    em_shape xs = {.ndim = rc->sample.ndim + 1, .d = {batch}};
    for (int i = 0; i < rc->sample.ndim; i++)
        xs.d[i + 1] = rc->sample.d[i];
    double t0 = 0;
    const int warmup = 1, timed = 3;
    for (int i = 0; st == EM_OK && i < warmup + timed; i++) {
        if (i == warmup)
            t0 = now_s();
        em_scope_begin();
        em_tensor *x = em_rand(xs, EM_F32, NULL);
        em_tensor *y = em_randint(EM_SHAPE(batch), EM_I64, 0, 10, NULL);
        st = x && y ? em_trainer_step(t, x, y, NULL) : em_error_status();
        em_scope_end();
    }
    if (st == EM_OK)
        st = em_trainer_flush(t);
    *samples_per_s = st == EM_OK ? (double)(timed * batch) / (now_s() - t0) : 0;
    em_trainer_free(t);
    em_optim_free(optim);
    em_module_free(model);
    return st;
}

static em_status find_batch(const recipe_train_opts *o, recipe_result *res)
{
    em_batch_search found;
    em_status st = em_find_batch_size(try_batch, (void *)o, o->device, 8, 8192, o->mem_budget,
                                      &found);
    if (st != EM_OK)
        return st;
    res->largest_batch = found.largest;
    res->batch = (int)found.fastest;
    return EM_OK;
}

/* The model of the run's data, checkpointed per the recipe when asked, on the run's device, and
 * its optimizer. */
static em_status make_model(const recipe_train_opts *o, run *r)
{
    const recipe_spec *rc = o->recipe;
    em_manual_seed(o->seed);
    r->model = rc->build(&r->data);
    if (r->model && o->tech.checkpoint_activations && rc->checkpoint_activations &&
        rc->checkpoint_activations(r->model) != EM_OK)
        return em_error_status();
    if (r->model && em_module_to(r->model, o->device) != EM_OK)
        return em_error_status();
    r->optim = r->model ? recipe_optimizer(rc, o->optim ? o->optim : rc->optim, r->model,
                                           o->lr > 0 ? o->lr : rc->lr,
                                           o->momentum > 0 ? o->momentum : rc->momentum)
                        : NULL;
    return r->optim ? EM_OK : em_error_status();
}

/* The loader over the training data: the recipe's sampler, or shuffled epochs (with ddp, this
 * rank's shard of them). */
static em_status make_loader(const recipe_train_opts *o, const recipe_result *res, run *r)
{
    if (o->ddp) {
        r->ddp = em_ddp_new(r->model, (em_ddp_opts){0});
        em_sampler *shuffled = em_random_sampler(em_dataset_len(r->data.train),
                                                 (em_random_sampler_opts){0});
        r->sampler = r->ddp ? em_distributed_sampler(shuffled, (em_distributed_sampler_opts){0})
                            : NULL;
        if (!r->sampler) {
            em_sampler_free(shuffled);
            return em_error_status();
        }
    }
    em_sampler *order = r->sampler ? r->sampler : r->data.sampler;
    em_loader_opts lo = {.batch_size = res->batch, .shuffle = !order, .sampler = order,
                         .seed = o->seed, .num_workers = o->workers, .persistent_workers = true,
                         .device = o->device, .pin_memory = o->device != EM_CPU};
    r->loader = em_loader_new(r->data.train, lo);
    return r->loader ? EM_OK : em_error_status();
}

/* Model, optimizer, data, loader, schedule and trainer of a run, resumed when asked. */
static em_status start_run(const recipe_train_opts *o, const recipe_result *res, run *r)
{
    const recipe_spec *rc = o->recipe;
    em_status st = rc->train_data(o, res->batch, &r->data);
    if (st == EM_OK)
        st = make_model(o, r);
    if (st == EM_OK)
        st = make_loader(o, res, r);
    if (st != EM_OK)
        return st;
    int accum = o->tech.grad_accum > 1 ? o->tech.grad_accum : 1;
    int64_t updates = res->epochs * ((em_loader_num_batches(r->loader) + accum - 1) / accum);
    st = recipe_schedule(rc, o->schedule ? o->schedule : rc->schedule, r->optim, updates,
                         &r->sched);
    if (st != EM_OK)
        return st;
    recipe_meta_put(&r->meta, "recipe", "%s", rc->name);
    rc->meta(rc, r->model, &r->data.vocab, &r->meta);
    bool lead = em_dist_rank() == 0; /* with ddp, rank 0 validates and shows progress */
    em_trainer_opts to = {.tech = o->tech, .scheduler = r->sched, .loss = rc->loss,
                          .val = o->validate && lead ? r->data.val : NULL,
                          .val_batch = rc->val_batch, .checkpoint = o->save_path,
                          .checkpoint_every = o->save_every,
                          /* a one-pass recipe's sampler holds the run's micro-batches */
                          .max_steps = rc->one_pass ? 0 : o->max_steps,
                          .meta = r->meta.entries, .n_meta = r->meta.n,
                          .progress = o->progress && lead};
    to.tech.clip = o->tech.clip > 0 ? o->tech.clip : rc->clip;
    if (rc->checkpoint_activations) /* the recipe checkpointed the model its own way */
        to.tech.checkpoint_activations = false;
    if (o->ddp) {
        to.save_checkpoint = em_dist_checkpoint_save;
        to.load_checkpoint = em_dist_checkpoint_load;
    }
    r->trainer = em_trainer_new(r->model, r->optim, r->loader, to);
    if (!r->trainer || (r->ddp && em_ddp_attach(r->ddp, r->trainer) != EM_OK))
        return em_error_status();
    const em_trainer_callbacks *cb = &o->callbacks;
    st = cb->on_step || cb->on_epoch || cb->before_update
             ? em_trainer_add_callbacks(r->trainer, *cb) : EM_OK;
    if (st == EM_OK && o->resume_path)
        st = em_trainer_resume(r->trainer, o->resume_path);
    if (st == EM_OK && !(r->observer = em_observer_new(r->trainer, r->model, o->observe)))
        st = em_error_status();
    return st;
}

/* The test score: the last epoch's validation when it ran on the finished model. */
static em_status test(const recipe_train_opts *o, run *r, recipe_result *res)
{
    const recipe_spec *rc = o->recipe;
    em_trainer_stats s = em_trainer_get_stats(r->trainer);
    em_eval_result e = {0};
    em_status st = EM_OK;
    if (o->validate && s.last_epoch.epochs && s.last_epoch.epoch == res->epochs - 1)
        e = (em_eval_result){.loss = s.last_epoch.val_loss, .accuracy = s.last_epoch.val_acc};
    else
        st = em_evaluate(r->model, r->data.val, (em_eval_opts){.batch = rc->val_batch,
                                                               .loss = rc->loss}, &e);
    res->test_loss = e.loss;
    res->test_acc = rc->language_model ? NAN : e.accuracy;
    return st;
}

/* With ddp: every rank's samples over the slowest rank's training time. */
static double samples_per_s(const recipe_train_opts *o, const em_trainer_stats *s)
{
    if (!o->ddp)
        return s->samples_per_s;
    em_tensor *samples = em_scalar((double)s->samples, EM_F64);
    em_tensor *seconds = em_scalar(s->train_seconds, EM_F64);
    double v = samples && seconds && em_dist_allreduce(samples, EM_DIST_SUM) == EM_OK &&
                       em_dist_allreduce(seconds, EM_DIST_MAX) == EM_OK && em_item(seconds) > 0
                   ? em_item(samples) / em_item(seconds)
                   : 0;
    em_release(samples);
    em_release(seconds);
    return v;
}

static void fill_result(const recipe_train_opts *o, const run *r, recipe_result *res)
{
    em_trainer_stats s = em_trainer_get_stats(r->trainer);
    res->train_loss = s.recent_loss;
    res->train_samples_per_s = samples_per_s(o, &s);
    res->steps = s.steps;
    res->updates = s.updates;
    res->skipped_steps = s.skipped;
    res->graph_replays = s.graph_replays;
    res->activation_bytes = s.activation_bytes;
    res->scale = s.scale;
    res->lr = em_optim_get_lr(r->optim, 0);
    res->tokens_per_sample = r->data.tokens_per_sample;
}

/* What a run's options ask that the recipe cannot do; EM_OK when none. */
static em_status check_opts(const recipe_train_opts *o)
{
    const recipe_spec *rc = o->recipe;
    if (o->batch < 0 || o->batch > INT_MAX) /* the result's batch is an int */
        return em_set_error(EM_ERR_ARG, "recipe_train: batch %lld is outside [1, %d] (0: the "
                            "recipe's)", (long long)o->batch, INT_MAX);
    if (rc->one_pass && (o->resume_path || o->find_batch || o->epochs > 1 || o->ddp))
        return em_set_error(EM_ERR_ARG, "%s: --resume, --find-batch, --epochs and --ddp are not "
                            "supported; a run is one pass of --max-steps random windows",
                            rc->name);
    if (o->ddp && o->find_batch)
        return em_set_error(EM_ERR_ARG, "recipe_train: the batch finder does not run "
                            "data-parallel (pick --batch per process)");
    return EM_OK;
}

em_status recipe_train(const recipe_train_opts *o, recipe_result *res)
{
    const recipe_spec *rc = o->recipe;
    double t_start = now_s();
    *res = (recipe_result){.epochs = o->epochs ? o->epochs : rc->epochs,
                           .batch = (int)(o->batch ? o->batch : rc->batch), .scale = 1,
                           .test_acc = rc->language_model ? NAN : 0,
                           .test_loss = rc->language_model ? NAN : 0};
    em_status st = check_opts(o);
    if (st == EM_OK && o->mem_budget)
        st = em_memory_set_budget(o->device, o->mem_budget);
    if (st == EM_OK && o->find_batch)
        st = find_batch(o, res);
    run r = {0};
    if (st == EM_OK)
        st = start_run(o, res, &r);
    size_t held_before = em_memory_get_stats(o->device).live_bytes;
    em_memory_reset_peak(o->device);
    if (st == EM_OK)
        st = em_trainer_fit(r.trainer, res->epochs);
    res->peak_bytes = em_memory_get_stats(o->device).peak_bytes;
    res->peak_step_bytes = res->peak_bytes > held_before ? res->peak_bytes - held_before : 0;
    if (st == EM_OK && r.ddp)
        st = em_dist_barrier(); /* every rank's training ends before the samples/s are summed */
    if (r.trainer && (st == EM_OK || !r.ddp))
        fill_result(o, &r, res);
    if (st == EM_OK && !o->skip_eval && em_dist_rank() == 0)
        st = test(o, &r, res);
    em_status logged = em_observer_free(r.observer);
    if (st == EM_OK)
        st = logged;
    if (st != EM_OK && o->ddp)
        em_dist_fail(em_error());
    res->wall_s = now_s() - t_start;
    run_free(&r);
    if (o->mem_budget)
        em_memory_set_budget(o->device, 0);
    return st;
}

em_status recipe_lr_find(const recipe_train_opts *o, em_lr_find_opts f, em_lr_find_result *out)
{
    *out = (em_lr_find_result){.suggestion = NAN};
    if (o->save_path || o->resume_path || o->ddp || o->find_batch)
        return em_set_error(EM_ERR_ARG, "recipe_lr_find: a range test saves, resumes, searches "
                            "batches and runs data-parallel nothing");
    recipe_train_opts mine = *o;
    mine.validate = false;
    mine.progress = false;
    recipe_result res = {.epochs = 1, .batch = (int)(o->batch ? o->batch : o->recipe->batch)};
    run r = {0};
    em_status st = check_opts(&mine);
    if (st == EM_OK)
        st = start_run(&mine, &res, &r);
    if (st == EM_OK)
        st = em_lr_find(r.trainer, f, out);
    em_status logged = em_observer_free(r.observer);
    run_free(&r);
    return st == EM_OK ? logged : st;
}
