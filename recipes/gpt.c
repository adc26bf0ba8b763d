/* The gpt recipe: a character-level GPT on the fortunes' text. Random windows of the train split
 * (the loader's sampler with replacement) train it with AdamW (weight decay on matrices only),
 * warm-up and cosine decay, gradient clipping at 1 and the usual techniques, checkpointing per
 * block; the val split's windows give the val loss. The vocabulary and the model's size are
 * saved with it, so `ember sample` can rebuild it. bench/gpt_torch.py is the same run in
 * PyTorch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recipes/recipes.h"

/* 4 pre-LN blocks of 4 heads, width 128, over 128 characters: 0.8M parameters that train to
 * English-like text (val loss 1.80 nats/char) in RECIPE_GPT_STEPS steps of 32 windows at lr 3e-3:
 * 4.1M characters, a few minutes on 2 cores. At 2000 steps of lr 1e-3 the run took three
 * times as long; 1000 steps at 1e-3 reach only 2.02. */
em_gpt_config recipe_gpt_config(int64_t vocab_size)
{
    return (em_gpt_config){.vocab_size = vocab_size, .block_size = 128, .n_layer = 4,
                           .n_head = 4, .n_embd = 128};
}

em_optim *recipe_gpt_optimizer(em_module *model, double lr)
{
    em_optim *o = em_adamw(NULL, (em_adam_opts){.lr = lr, .beta2 = RECIPE_GPT_BETA2,
                                                .weight_decay = RECIPE_GPT_WEIGHT_DECAY});
    if (o && em_optim_add_module_no_decay_1d(o, model) != EM_OK) {
        em_optim_free(o);
        return NULL;
    }
    return o;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mean cross-entropy of logits (B, T, V) against y (B, T), in nats per character */
static em_tensor *sequence_loss(void *ctx, const em_tensor *logits, const em_tensor *y)
{
    (void)ctx;
    if (!logits || !y)
        return NULL;
    int64_t v = logits->shape[logits->ndim - 1];
    return em_cross_entropy(em_reshape(logits, EM_SHAPE(-1, v)), em_reshape(y, EM_SHAPE(-1)),
                            (em_cross_entropy_opts){0});
}

/* The val loss's samples: every fourth non-overlapping window of the val split (a quarter of
 * it, spread over all of it, so that evaluating costs little next to training). */
static em_dataset *val_windows(const recipe_gpt_text *t, int64_t block)
{
    return em_char_windows_dataset(t->ids + t->n_train, t->n_val, block, RECIPE_GPT_VAL_STRIDE * block);
}

/* The metadata saved with a model: the recipe, the vocabulary's characters and the size. */
typedef struct {
    char vocab[257];
    char n_layer[24], n_head[24], n_embd[24], block_size[24];
    em_st_meta meta[6];
} gpt_meta;

static void make_meta(gpt_meta *m, const em_char_vocab *v, const em_gpt_config *c)
{
    memcpy(m->vocab, v->chars, (size_t)v->size);
    m->vocab[v->size] = '\0';
    snprintf(m->n_layer, sizeof m->n_layer, "%d", c->n_layer);
    snprintf(m->n_head, sizeof m->n_head, "%lld", (long long)c->n_head);
    snprintf(m->n_embd, sizeof m->n_embd, "%lld", (long long)c->n_embd);
    snprintf(m->block_size, sizeof m->block_size, "%lld", (long long)c->block_size);
    m->meta[0] = (em_st_meta){"recipe", "gpt"};
    m->meta[1] = (em_st_meta){"gpt.vocab", m->vocab};
    m->meta[2] = (em_st_meta){"gpt.n_layer", m->n_layer};
    m->meta[3] = (em_st_meta){"gpt.n_head", m->n_head};
    m->meta[4] = (em_st_meta){"gpt.n_embd", m->n_embd};
    m->meta[5] = (em_st_meta){"gpt.block_size", m->block_size};
}

/* Everything one run holds; released by run_free whatever state it stopped in. */
typedef struct {
    recipe_gpt_text text;
    em_module *model;
    em_optim *optim;
    em_scheduler *sched;
    em_dataset *train, *val;
    em_sampler *sampler;
    em_loader *loader;
    em_trainer *trainer;
    em_observer *observer; /* TensorBoard, the profiler, memory warnings */
    gpt_meta meta;
} run;

static void run_free(run *r)
{
    em_trainer_free(r->trainer);
    em_loader_free(r->loader);
    em_sampler_free(r->sampler);
    em_dataset_free(r->train);
    em_dataset_free(r->val);
    em_scheduler_free(r->sched);
    em_optim_free(r->optim);
    em_module_free(r->model);
    recipe_gpt_text_free(&r->text);
}

static em_status make_schedule(const char *name, run *r, double lr, int64_t updates)
{
    if (!strcmp(name, "constant"))
        return EM_OK;
    if (!strcmp(name, "cosine"))
        r->sched = em_cosine_annealing_lr(r->optim, updates, 0.0);
    else if (!strcmp(name, "warmup-cosine"))
        r->sched = em_warmup_cosine_lr(r->optim, updates > RECIPE_GPT_WARMUP ? RECIPE_GPT_WARMUP : 1,
                                       updates, lr / 10);
    else
        return em_set_error(EM_ERR_ARG, "gpt: unknown schedule '%s' (warmup-cosine, cosine, "
                            "constant)", name);
    return r->sched ? EM_OK : em_error_status();
}

/* Model, optimizer, data, loader, schedule and trainer of a run. */
static em_status start_run(const recipe_train_opts *o, recipe_result *res, run *r, int64_t steps)
{
    const recipe_spec *rc = o->recipe;
    em_status st = recipe_gpt_text_load(o->data_dir, &r->text);
    if (st != EM_OK)
        return st;
    em_gpt_config c = recipe_gpt_config(r->text.vocab.size);
    em_manual_seed(o->seed);
    double lr = o->lr > 0 ? o->lr : rc->lr;
    r->model = em_gpt(c);
    if (r->model && o->tech.checkpoint_activations && em_gpt_checkpoint_blocks(r->model) != EM_OK)
        return em_error_status();
    if (r->model && em_module_to(r->model, o->device) != EM_OK)
        return em_error_status();
    const char *optim = o->optim ? o->optim : rc->optim;
    r->optim = !r->model ? NULL : !strcmp(optim, "adamw")
                                      ? recipe_gpt_optimizer(r->model, lr)
                                      : recipe_optimizer(optim, r->model, lr, rc->momentum);
    r->train = em_char_windows_dataset(r->text.ids, r->text.n_train, c.block_size, 1);
    r->val = val_windows(&r->text, c.block_size);
    int accum = o->tech.grad_accum > 1 ? o->tech.grad_accum : 1;
    int64_t samples;
    if (!em_size_mul(steps, accum, &samples) || !em_size_mul(samples, res->batch, &samples))
        return em_set_error(EM_ERR_ARG, "gpt: %lld steps of %d micro-batches of %d samples is "
                            "more samples than fit 64 bits", (long long)steps, accum, res->batch);
    r->sampler = r->train ? em_random_sampler(em_dataset_len(r->train),
                                              (em_random_sampler_opts){
                                                  .replacement = true,
                                                  .num_samples = samples})
                          : NULL;
    r->loader = r->sampler ? em_loader_new(r->train, (em_loader_opts){
                                 .batch_size = res->batch, .sampler = r->sampler,
                                 .seed = o->seed, .num_workers = o->workers,
                                 .persistent_workers = true, .device = o->device,
                                 .pin_memory = o->device != EM_CPU})
                           : NULL;
    if (!r->optim || !r->val || !r->loader)
        return em_error_status();
    st = make_schedule(o->schedule ? o->schedule : rc->schedule, r, lr, steps);
    if (st != EM_OK)
        return st;
    make_meta(&r->meta, &r->text.vocab, &c);
    em_techniques tech = o->tech;
    tech.checkpoint_activations = false; /* per block, above */
    tech.clip = tech.clip > 0 ? tech.clip : rc->clip;
    r->trainer = em_trainer_new(r->model, r->optim, r->loader,
                                (em_trainer_opts){.tech = tech, .scheduler = r->sched,
                                                  .loss = sequence_loss,
                                                  .val = o->skip_eval ? NULL : r->val,
                                                  .val_batch = 64, .checkpoint = o->save_path,
                                                  .checkpoint_every = o->save_every,
                                                  .meta = r->meta.meta, .n_meta = 6,
                                                  .progress = o->progress});
    res->tokens_per_sample = c.block_size;
    return r->trainer ? EM_OK : em_error_status();
}

em_status recipe_gpt_train(const recipe_train_opts *o, recipe_result *res)
{
    double t_start = now_s();
    int64_t steps = o->max_steps ? o->max_steps : RECIPE_GPT_STEPS;
    *res = (recipe_result){.epochs = 1, .batch = (int)(o->batch ? o->batch : o->recipe->batch),
                             .scale = 1, .test_acc = NAN, .test_loss = NAN};
    if (o->resume_path || o->find_batch || o->epochs > 1)
        return em_set_error(EM_ERR_ARG, "gpt: --resume, --find-batch and --epochs are not "
                            "supported; a run is one pass of --max-steps random windows");
    em_status st = o->mem_budget ? em_memory_set_budget(o->device, o->mem_budget) : EM_OK;
    run r = {0};
    if (st == EM_OK)
        st = start_run(o, res, &r, steps);
    if (st == EM_OK && !(r.observer = em_observer_new(r.trainer, r.model, o->observe)))
        st = em_error_status();
    size_t held_before = em_memory_get_stats(o->device).live_bytes;
    em_memory_reset_peak(o->device);
    if (st == EM_OK)
        st = em_trainer_fit(r.trainer, 1);
    res->peak_bytes = em_memory_get_stats(o->device).peak_bytes;
    res->peak_step_bytes = res->peak_bytes > held_before ? res->peak_bytes - held_before : 0;
    if (r.trainer) {
        em_trainer_stats s = em_trainer_get_stats(r.trainer);
        res->train_loss = s.recent_loss;
        res->train_samples_per_s = s.samples_per_s;
        res->steps = s.steps;
        res->updates = s.updates;
        res->skipped_steps = s.skipped;
        res->activation_bytes = s.activation_bytes;
        res->scale = s.scale;
        res->lr = em_optim_get_lr(r.optim, 0);
        res->test_loss = s.last_epoch.val_loss;
    }
    em_status logged = em_observer_free(r.observer);
    if (st == EM_OK)
        st = logged;
    res->wall_s = now_s() - t_start;
    run_free(&r);
    if (o->mem_budget)
        em_memory_set_budget(o->device, 0);
    return st;
}

em_status recipe_gpt_eval(const char *data_dir, const char *load_path, recipe_result *res)
{
    double t0 = now_s();
    *res = (recipe_result){.scale = 1, .test_acc = NAN, .test_loss = NAN};
    em_module *model = NULL;
    em_char_vocab vocab;
    recipe_gpt_text text = {0};
    em_dataset *val = NULL;
    em_status st = recipe_gpt_load(load_path, &model, &vocab);
    if (st == EM_OK)
        st = recipe_gpt_text_load(data_dir, &text);
    em_gpt_config c;
    if (st == EM_OK && (vocab.size != text.vocab.size ||
                        memcmp(vocab.chars, text.vocab.chars, (size_t)vocab.size)))
        st = em_set_error(EM_ERR_ARG, "%s was trained on another text (its vocabulary differs)",
                          load_path);
    if (st == EM_OK && em_gpt_config_of(model, &c))
        val = val_windows(&text, c.block_size);
    em_eval_result e = {0};
    if (st == EM_OK)
        st = val ? em_evaluate(model, val, (em_eval_opts){.batch = 64, .loss = sequence_loss},
                               &e)
                 : em_error_status();
    if (st == EM_OK) {
        res->test_loss = e.loss;
        res->tokens_per_sample = c.block_size;
    }
    res->peak_bytes = em_memory_get_stats(EM_CPU).peak_bytes;
    res->wall_s = now_s() - t0;
    em_dataset_free(val);
    recipe_gpt_text_free(&text);
    em_module_free(model);
    return st;
}
