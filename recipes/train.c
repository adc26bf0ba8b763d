/* A recipe's run: Fashion-MNIST through a threaded loader into em_trainer (train/), with the
 * recipe's optimizer and schedule, a checkpoint after each epoch, then test accuracy. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recipes/recipes.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

em_dataset *recipe_fashion_mnist(const char *data_dir, bool train, bool flat)
{
    char images[1024], labels[1024];
    const char *split = train ? "train" : "t10k";
    const char *dir = data_dir ? data_dir : RECIPE_FASHION_MNIST_DIR;
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    return em_idx_dataset(images, labels, (em_idx_opts){.flat = flat});
}

int recipe_default_workers(em_device device)
{
    return device == EM_CPU ? 0 : 2;
}

em_optim *recipe_optimizer(const char *name, em_module *model, double lr, double momentum)
{
    if (!strcmp(name, "sgd"))
        return em_sgd(model, (em_sgd_opts){.lr = lr, .momentum = momentum});
    if (!strcmp(name, "adam"))
        return em_adam(model, (em_adam_opts){.lr = lr});
    if (!strcmp(name, "adamw"))
        return em_adamw(model, (em_adam_opts){.lr = lr});
    if (!strcmp(name, "rmsprop"))
        return em_rmsprop(model, (em_rmsprop_opts){.lr = lr});
    em_set_error(EM_ERR_ARG, "recipe_optimizer: unknown optimizer '%s' (sgd, adam, adamw, "
                 "rmsprop)", name);
    return NULL;
}

em_status recipe_load_model_any(em_module *model, const recipe_spec *rc, const char *path)
{
    em_safetensors *f = NULL;
    em_status st = em_safetensors_load(path, &f);
    if (st != EM_OK)
        return st;
    const char *recipe = em_safetensors_meta(f, "recipe");
    if (rc && recipe && strcmp(recipe, rc->name)) {
        st = em_set_error(EM_ERR_ARG, "'%s' holds a model of the %s recipe, not of %s", path,
                          recipe, rc->name);
        em_safetensors_free(f);
        return st;
    }
    const char *kind = em_safetensors_meta(f, "ember.kind");
    bool checkpoint = kind && !strcmp(kind, "train_checkpoint");
    /* a pruned, shrunk or quantized model file says so: rebuild that structure first */
    if (!checkpoint)
        st = em_prune_prepare_load(model, f);
    if (!checkpoint && st == EM_OK)
        st = em_quantize_prepare_load(model, f);
    em_safetensors_free(f);
    if (!checkpoint)
        return st == EM_OK && (st = em_module_load(model, path)) == EM_OK
                   ? em_quantize_repack(model) : st;
    em_generator saved = *em_default_generator();
    em_train_state s = {.model = model};
    st = em_train_checkpoint_load(path, &s);
    *em_default_generator() = saved;
    return st;
}

/* Everything one run holds; released by run_free whatever state it stopped in. */
typedef struct {
    em_module *model;
    em_optim *optim;
    em_scheduler *sched; /* NULL for a constant learning rate */
    em_trainer *trainer;
    em_observer *observer;
    em_dataset *train, *test;
    em_sampler *sampler; /* with ddp: this rank's shard of the shuffled epoch */
    em_loader *loader;
    em_ddp *ddp;
    em_st_meta meta[1]; /* written into every checkpoint */
} run;

static void run_free(run *r)
{
    em_trainer_free(r->trainer);
    em_ddp_free(r->ddp);
    em_loader_free(r->loader);
    em_sampler_free(r->sampler);
    em_dataset_free(r->train);
    em_dataset_free(r->test);
    em_scheduler_free(r->sched);
    em_optim_free(r->optim);
    em_module_free(r->model);
}

em_status recipe_schedule(const char *name, em_optim *o, int64_t total_updates,
                             em_scheduler **out)
{
    int64_t total = total_updates > 0 ? total_updates : 1;
    *out = NULL;
    if (!strcmp(name, "constant"))
        return EM_OK;
    if (!strcmp(name, "cosine"))
        *out = em_cosine_annealing_lr(o, total, 0.0);
    else if (!strcmp(name, "warmup-cosine"))
        *out = em_warmup_cosine_lr(o, total / 20 > 1 ? total / 20 : 1, total, 0.0);
    else if (!strcmp(name, "onecycle"))
        *out = em_one_cycle_lr(o, (em_one_cycle_opts){.max_lr = em_optim_get_lr(o, 0),
                                                      .total_steps = total});
    else if (!strcmp(name, "step"))
        *out = em_step_lr(o, total / 3 > 1 ? total / 3 : 1, 0.1);
    else if (!strcmp(name, "plateau"))
        *out = em_reduce_lr_on_plateau(o, (em_plateau_opts){.patience = 1});
    else
        return em_set_error(EM_ERR_ARG, "recipe_schedule: unknown schedule '%s' (%s)", name,
                            RECIPE_SCHEDULES);
    return *out ? EM_OK : em_error_status();
}

/* The batch-size finder's trial: a few training steps of a fresh copy of the recipe's model on
 * random data of the recipe's shape, with the run's techniques. */
static em_status try_batch(void *ctx, int64_t batch, double *samples_per_s)
{
    const recipe_train_opts *o = ctx;
    const recipe_spec *rc = o->recipe;
    em_module *model = rc->build();
    if (model && em_module_to(model, o->device) != EM_OK) {
        em_module_free(model);
        return em_error_status();
    }
    em_optim *optim = model ? em_sgd(model, (em_sgd_opts){.lr = 1e-3, .momentum = 0.9}) : NULL;
    em_trainer *t = optim ? em_trainer_new(model, optim, NULL, (em_trainer_opts){.tech = o->tech})
                          : NULL;
    em_status st = t ? EM_OK : em_error_status();
    em_shape xs = rc->flat_input ? EM_SHAPE(batch, 784) : EM_SHAPE(batch, 1, 28, 28);
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

/* Model, optimizer, data, loader, schedule and trainer of a run, resumed when asked. */
static em_status start_run(const recipe_train_opts *o, const recipe_result *res, run *r)
{
    const recipe_spec *rc = o->recipe;
    em_manual_seed(o->seed);
    r->model = rc->build();
    if (r->model && em_module_to(r->model, o->device) != EM_OK)
        return em_error_status();
    r->optim = r->model ? recipe_optimizer(o->optim ? o->optim : rc->optim, r->model,
                                              o->lr > 0 ? o->lr : rc->lr,
                                              o->momentum > 0 ? o->momentum : rc->momentum)
                        : NULL;
    r->train = recipe_fashion_mnist(o->data_dir, true, rc->flat_input);
    r->test = r->train ? recipe_fashion_mnist(o->data_dir, false, rc->flat_input) : NULL;
    if (r->test && o->ddp) {
        r->ddp = r->optim ? em_ddp_new(r->model, (em_ddp_opts){0}) : NULL;
        em_sampler *shuffled = em_random_sampler(em_dataset_len(r->train),
                                                 (em_random_sampler_opts){0});
        r->sampler = r->ddp ? em_distributed_sampler(shuffled, (em_distributed_sampler_opts){0})
                            : NULL;
        if (!r->sampler) {
            em_sampler_free(shuffled);
            return em_error_status();
        }
    }
    em_loader_opts lo = {.batch_size = res->batch, .shuffle = !o->ddp, .sampler = r->sampler,
                         .seed = o->seed, .num_workers = o->workers, .persistent_workers = true,
                         .device = o->device, .pin_memory = o->device != EM_CPU};
    r->loader = r->test ? em_loader_new(r->train, lo) : NULL;
    if (!r->loader || !r->optim)
        return em_error_status();
    int accum = o->tech.grad_accum > 1 ? o->tech.grad_accum : 1;
    int64_t updates = res->epochs * ((em_loader_num_batches(r->loader) + accum - 1) / accum);
    em_status st = recipe_schedule(o->schedule ? o->schedule : rc->schedule, r->optim,
                                      updates, &r->sched);
    if (st != EM_OK)
        return st;
    r->meta[0] = (em_st_meta){"recipe", rc->name};
    bool lead = em_dist_rank() == 0; /* with ddp, rank 0 validates and shows progress */
    em_trainer_opts to = {.tech = o->tech, .scheduler = r->sched,
                          .val = o->validate && lead ? r->test : NULL,
                          .checkpoint = o->save_path, .checkpoint_every = o->save_every,
                          .max_steps = o->max_steps,
                          .meta = r->meta, .n_meta = 1, .progress = o->progress && lead};
    to.tech.clip = o->tech.clip > 0 ? o->tech.clip : rc->clip;
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

/* Test accuracy and loss: the last epoch's validation when it ran on the finished model. */
static em_status test(const recipe_train_opts *o, run *r, recipe_result *res)
{
    em_trainer_stats s = em_trainer_get_stats(r->trainer);
    if (o->validate && s.last_epoch.epochs && s.last_epoch.epoch == res->epochs - 1) {
        res->test_acc = s.last_epoch.val_acc;
        res->test_loss = s.last_epoch.val_loss;
        return EM_OK;
    }
    em_eval_result e = {0};
    em_status st = em_evaluate(r->model, r->test, (em_eval_opts){0}, &e);
    res->test_acc = e.accuracy;
    res->test_loss = e.loss;
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
    res->activation_bytes = s.activation_bytes;
    res->scale = s.scale;
    res->lr = em_optim_get_lr(r->optim, 0);
}

em_status recipe_train(const recipe_train_opts *o, recipe_result *res)
{
    const recipe_spec *rc = o->recipe;
    if (o->batch < 0 || o->batch > INT_MAX) /* the result's batch is an int */
        return em_set_error(EM_ERR_ARG, "recipe_train: batch %lld is outside [1, %d] (0: the "
                            "recipe's)", (long long)o->batch, INT_MAX);
    if (rc->train)
        return rc->train(o, res);
    double t_start = now_s();
    *res = (recipe_result){.epochs = o->epochs ? o->epochs : rc->epochs,
                             .batch = (int)(o->batch ? o->batch : rc->batch), .scale = 1};
    em_status st = o->mem_budget ? em_memory_set_budget(o->device, o->mem_budget) : EM_OK;
    if (o->ddp && o->find_batch)
        st = em_set_error(EM_ERR_ARG, "recipe_train: the batch finder does not run "
                          "data-parallel (pick --batch per process)");
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

em_status recipe_eval(const recipe_spec *rc, const char *data_dir, const char *load_path,
                         recipe_result *res)
{
    if (rc->eval)
        return rc->eval(data_dir, load_path, res);
    double t0 = now_s();
    *res = (recipe_result){.scale = 1};
    em_module *model = rc->build();
    em_dataset *test = recipe_fashion_mnist(data_dir, false, rc->flat_input);
    em_status st = model && test ? recipe_load_model_any(model, rc, load_path) : em_error_status();
    em_eval_result e = {0};
    if (st == EM_OK)
        st = em_evaluate(model, test, (em_eval_opts){0}, &e);
    if (st == EM_OK) {
        res->test_acc = e.accuracy;
        res->test_loss = e.loss;
    }
    res->peak_bytes = em_memory_get_stats(EM_CPU).peak_bytes;
    res->wall_s = now_s() - t0;
    em_dataset_free(test);
    em_module_free(model);
    return st;
}
