/* The training loop every recipe runs: Fashion-MNIST through a threaded loader, cross-entropy,
 * an optimizer step per batch, a checkpoint after each epoch, then test accuracy. */
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

em_dataset *em_fashion_mnist(const char *data_dir, bool train, bool flat)
{
    char images[1024], labels[1024];
    const char *split = train ? "train" : "t10k";
    const char *dir = data_dir ? data_dir : EM_FASHION_MNIST_DIR;
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    return em_dataset_idx(images, labels, (em_idx_opts){.flat = flat});
}

em_optim *em_recipe_optimizer(const char *name, em_module *model, double lr, double momentum)
{
    if (!strcmp(name, "sgd"))
        return em_sgd(model, (em_sgd_opts){.lr = lr, .momentum = momentum});
    if (!strcmp(name, "adam"))
        return em_adam(model, (em_adam_opts){.lr = lr});
    if (!strcmp(name, "adamw"))
        return em_adamw(model, (em_adam_opts){.lr = lr});
    if (!strcmp(name, "rmsprop"))
        return em_rmsprop(model, (em_rmsprop_opts){.lr = lr});
    em_set_error(EM_ERR_ARG, "em_recipe_optimizer: unknown optimizer '%s' (sgd, adam, adamw, "
                 "rmsprop)", name);
    return NULL;
}

em_status em_evaluate(em_module *model, const em_dataset *ds, double *acc, double *loss)
{
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 1000});
    if (!dl)
        return em_error_status();
    bool was_training = model->training;
    bool grad = em_set_grad_enabled(false);
    em_module_eval(model);
    int64_t correct = 0, seen = 0;
    double loss_sum = 0;
    em_status st;
    em_batch b;
    for (;;) {
        em_scope_begin();
        st = em_loader_next(dl, &b);
        if (st == EM_OK) {
            em_tensor *logits = em_forward(model, b.x);                          // (B, 10)
            em_tensor *l = em_cross_entropy(logits, b.y,
                                            (em_cross_entropy_opts){.reduction = EM_REDUCTION_SUM});
            em_tensor *hits = em_sum_all(em_eq(em_argmax(logits, 1, false), b.y)); // ()
            if (!l || !hits)
                st = em_error_status();
            else {
                loss_sum += em_item(l);
                correct += (int64_t)em_item(hits);
                seen += em_size(b.x, 0);
            }
        }
        em_scope_end();
        if (st != EM_OK)
            break;
    }
    em_module_train(model, was_training);
    em_set_grad_enabled(grad);
    em_loader_free(dl);
    if (st != EM_END)
        return st;
    *acc = seen ? (double)correct / (double)seen : 0;
    *loss = seen ? loss_sum / (double)seen : 0;
    return EM_OK;
}

em_status em_load_model_any(em_module *model, const char *path)
{
    em_safetensors *f = NULL;
    em_status st = em_safetensors_load(path, &f);
    if (st != EM_OK)
        return st;
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
    em_trainer trainer;
    em_dataset *train, *test;
    em_loader *loader;
} run;

static void run_free(run *r)
{
    em_loader_free(r->loader);
    em_dataset_free(r->train);
    em_dataset_free(r->test);
    em_trainer_free(&r->trainer);
    em_scheduler_free(r->sched);
    em_optim_free(r->optim);
    em_module_free(r->model);
}

static em_status make_schedule(const char *name, run *r, int64_t total_steps)
{
    if (!strcmp(name, "constant"))
        return EM_OK;
    if (strcmp(name, "cosine"))
        return em_set_error(EM_ERR_ARG, "em_recipe_train: unknown schedule '%s' (cosine, "
                            "constant)", name);
    r->sched = em_cosine_annealing_lr(r->optim, total_steps > 0 ? total_steps : 1, 0.0);
    return r->sched ? EM_OK : em_error_status();
}

static em_status save_checkpoint(const em_train_opts *o, run *r)
{
    if (!o->save_path)
        return EM_OK;
    em_loader_pos pos = em_loader_position(r->loader);
    em_train_state s = {.model = r->model, .optim = r->optim, .scheduler = r->sched,
                        .scaler = r->trainer.scaler, .epoch = pos.epoch, .batch = pos.batch};
    em_st_meta meta[] = {{"recipe", o->recipe->name}};
    return em_train_checkpoint_save(o->save_path, &s, meta, 1);
}

#define N_RECENT 20 /* optimizer steps the reported train loss averages over */

/* recent: a ring of the last `window` micro-batch losses */
static em_status train_loop(const em_train_opts *o, run *r, int epochs, em_progress_fn progress,
                            void *ctx, em_train_result *res, double *train_s, int64_t *samples,
                            double *recent, int64_t window)
{
    em_progress p = {.epochs = epochs, .total = em_dataset_len(r->train)};
    em_status st = EM_OK;
    while (st == EM_OK && em_loader_position(r->loader).epoch < epochs) {
        p.epoch = (int)em_loader_position(r->loader).epoch;
        p.done = 0;
        double t0 = now_s();
        bool stop = false;
        for (;;) {
            stop = o->max_steps && res->steps >= o->max_steps;
            if (stop)
                break;
            em_scope_begin();
            em_batch b;
            st = em_loader_next(r->loader, &b);
            if (st == EM_OK) {
                st = em_trainer_micro_batch(&r->trainer, b.x, b.y, &p.loss);
                p.done += em_size(b.x, 0);
            }
            em_scope_end();
            if (st != EM_OK)
                break;
            if (isnan(p.loss) && !r->trainer.scaler && !r->trainer.guard)
                return em_set_error(EM_ERR_NUMERIC, "ember train: loss is NaN at epoch %d step "
                                    "%lld (try --clip, --guard or a lower --lr)", p.epoch + 1,
                                    (long long)res->steps);
            recent[res->steps % window] = p.loss;
            res->steps++;
            double elapsed = now_s() - t0;
            p.samples_per_s = elapsed > 0 ? (double)p.done / elapsed : 0;
            p.scale = em_trainer_scale(&r->trainer);
            p.skipped = r->trainer.skipped;
            if (progress)
                progress(ctx, &p);
        }
        if (st == EM_END)
            st = em_trainer_flush(&r->trainer);
        *train_s += now_s() - t0;
        *samples += p.done;
        res->train_loss = 0;
        int64_t n_recent = res->steps < window ? res->steps : window;
        for (int64_t i = 0; i < n_recent; i++)
            res->train_loss += recent[i] / (double)n_recent;
        res->train_samples_per_s = *train_s > 0 ? (double)*samples / *train_s : 0;
        if (stop)
            return save_checkpoint(o, r);
        if (st == EM_OK)
            st = save_checkpoint(o, r);
    }
    return st;
}

static em_status train_epochs(const em_train_opts *o, run *r, int epochs, em_progress_fn progress,
                              void *ctx, em_train_result *res, double *train_s, int64_t *samples)
{
    int accum = r->trainer.tech.grad_accum > 1 ? r->trainer.tech.grad_accum : 1;
    int64_t window = N_RECENT * accum;
    double *recent = calloc((size_t)window, sizeof *recent);
    if (!recent)
        return em_set_error(EM_ERR_MEMORY, "ember train: out of memory");
    em_status st = train_loop(o, r, epochs, progress, ctx, res, train_s, samples, recent, window);
    free(recent);
    return st;
}

/* The batch-size finder's trial: a few training steps of a fresh copy of the recipe's model on
 * random data of the recipe's shape, with the run's techniques. */
typedef struct {
    const em_train_opts *o;
} find_ctx;

static em_status try_batch(void *ctx, int64_t batch, double *samples_per_s)
{
    const em_train_opts *o = ((find_ctx *)ctx)->o;
    const em_recipe *rc = o->recipe;
    em_module *model = rc->build();
    em_optim *optim = model ? em_sgd(model, (em_sgd_opts){.lr = 1e-3, .momentum = 0.9}) : NULL;
    em_trainer t = {0};
    em_status st = optim ? em_trainer_init(&t, model, optim, NULL, o->tech) : em_error_status();
    em_shape xs = rc->flat_input ? EM_SHAPE(batch, 784) : EM_SHAPE(batch, 1, 28, 28);
    double t0 = 0;
    const int warmup = 1, timed = 3;
    for (int i = 0; st == EM_OK && i < warmup + timed; i++) {
        if (i == warmup)
            t0 = now_s();
        em_scope_begin();
        em_tensor *x = em_rand(xs, EM_F32, NULL);
        em_tensor *y = em_randint(EM_SHAPE(batch), EM_I64, 0, 10, NULL);
        double loss;
        st = x && y ? em_trainer_micro_batch(&t, x, y, &loss) : em_error_status();
        em_scope_end();
    }
    if (st == EM_OK)
        st = em_trainer_flush(&t);
    *samples_per_s = st == EM_OK ? (double)(timed * batch) / (now_s() - t0) : 0;
    em_trainer_free(&t);
    em_optim_free(optim);
    em_module_free(model);
    return st;
}

static em_status find_batch(const em_train_opts *o, em_train_result *res)
{
    find_ctx ctx = {o};
    em_batch_search found;
    em_status st = em_find_batch_size(try_batch, &ctx, EM_CPU, 8, 8192, o->mem_budget, &found);
    if (st != EM_OK)
        return st;
    res->largest_batch = found.largest;
    res->batch = (int)found.fastest;
    return EM_OK;
}

em_status em_recipe_train(const em_train_opts *o, em_progress_fn progress, void *ctx,
                          em_train_result *res)
{
    const em_recipe *rc = o->recipe;
    double t_start = now_s(), train_s = 0;
    int64_t samples = 0;
    *res = (em_train_result){.epochs = o->epochs ? o->epochs : rc->epochs,
                             .batch = (int)(o->batch ? o->batch : rc->batch), .scale = 1};
    em_status st = o->mem_budget ? em_memory_set_budget(EM_CPU, o->mem_budget) : EM_OK;
    if (st == EM_OK && o->find_batch)
        st = find_batch(o, res);
    if (st != EM_OK)
        return st;
    em_manual_seed(o->seed);
    run r = {0};
    r.model = rc->build();
    r.optim = r.model ? em_recipe_optimizer(o->optim ? o->optim : rc->optim, r.model,
                                       o->lr > 0 ? o->lr : rc->lr, rc->momentum)
                      : NULL;
    r.train = em_fashion_mnist(o->data_dir, true, rc->flat_input);
    r.test = r.train ? em_fashion_mnist(o->data_dir, false, rc->flat_input) : NULL;
    r.loader = r.test ? em_loader_new(r.train, (em_loader_opts){.batch_size = res->batch,
                                                                .shuffle = true,
                                                                .seed = o->seed,
                                                                .num_workers = o->workers,
                                                                .persistent_workers = true})
                      : NULL;
    st = r.loader && r.optim ? EM_OK : em_error_status();
    int accum = o->tech.grad_accum > 1 ? o->tech.grad_accum : 1;
    int64_t updates = res->epochs * ((em_loader_num_batches(r.loader) + accum - 1) / accum);
    if (st == EM_OK)
        st = make_schedule(o->schedule ? o->schedule : rc->schedule, &r, updates);
    if (st == EM_OK)
        st = em_trainer_init(&r.trainer, r.model, r.optim, r.sched, o->tech);
    if (st == EM_OK && o->resume_path) {
        em_train_state s = {.model = r.model, .optim = r.optim, .scheduler = r.sched,
                            .scaler = r.trainer.scaler};
        st = em_train_checkpoint_load(o->resume_path, &s);
        if (st == EM_OK)
            st = em_loader_set_position(r.loader, (em_loader_pos){s.epoch, s.batch});
    }
    size_t held_before = em_memory_get_stats(EM_CPU).live_bytes;
    em_memory_reset_peak(EM_CPU);
    if (st == EM_OK)
        st = train_epochs(o, &r, res->epochs, progress, ctx, res, &train_s, &samples);
    res->peak_bytes = em_memory_get_stats(EM_CPU).peak_bytes;
    res->peak_step_bytes = res->peak_bytes > held_before ? res->peak_bytes - held_before : 0;
    if (st == EM_OK && !o->skip_eval)
        st = em_evaluate(r.model, r.test, &res->test_acc, &res->test_loss);
    res->skipped_steps = r.trainer.skipped;
    res->activation_bytes = r.trainer.activation_bytes;
    res->scale = em_trainer_scale(&r.trainer);
    res->wall_s = now_s() - t_start;
    run_free(&r);
    if (o->mem_budget)
        em_memory_set_budget(EM_CPU, 0);
    return st;
}

em_status em_recipe_eval(const em_recipe *rc, const char *data_dir, const char *load_path,
                         em_train_result *res)
{
    double t0 = now_s();
    *res = (em_train_result){.scale = 1};
    em_module *model = rc->build();
    em_dataset *test = em_fashion_mnist(data_dir, false, rc->flat_input);
    em_status st = model && test ? em_load_model_any(model, load_path) : em_error_status();
    if (st == EM_OK)
        st = em_evaluate(model, test, &res->test_acc, &res->test_loss);
    res->peak_bytes = em_memory_get_stats(EM_CPU).peak_bytes;
    res->wall_s = now_s() - t0;
    em_dataset_free(test);
    em_module_free(model);
    return st;
}
