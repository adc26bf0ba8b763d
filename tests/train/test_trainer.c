/* The library's trainer (train/): a run stopped by max_steps and resumed from its checkpoint
 * ends bit for bit where an uninterrupted one does; callbacks, accumulation and the scheduler
 * see the counts the loop promises, and so do the hooks a data-parallel run uses (which
 * backward an update follows, agreed skip decisions, the checkpoint writer); validation equals
 * em_evaluate; the accuracy helper and em_evaluate against hand-computed values; a NaN loss is
 * refused without touching the model; the progress display writes its lines to stderr, on a
 * terminal one line that fits its width, redrawn at most 10 times a second. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "train/train_internal.h"

#define N_SAMPLES 112 /* 7 batches of 16 */

typedef struct {
    em_dataset *ds;
    em_module *model;
    em_optim *optim;
    em_scheduler *sched;
    em_loader *loader;
} run;

static run start(uint64_t init_seed, int64_t batch)
{
    em_generator g = em_generator_new(7);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(N_SAMPLES, 6), EM_F32, &g);      // (112, 6)
    em_tensor *y = em_randint(EM_SHAPE(N_SAMPLES), EM_I64, 0, 3, &g); // (112)
    run r = {.ds = em_tensor_dataset(x, y)};
    em_scope_end();
    em_manual_seed(init_seed);
    r.model = em_sequential(4, em_linear_layer(6, 16, true), em_relu_layer(),
                            em_dropout_layer(0.25), em_linear_layer(16, 3, true));
    r.optim = em_sgd(r.model, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    r.sched = em_exponential_lr(r.optim, 0.5);
    r.loader = em_loader_new(r.ds, (em_loader_opts){.batch_size = batch, .shuffle = true,
                                                    .seed = 3, .num_workers = 2});
    cr_assert(r.ds && r.model && r.optim && r.sched && r.loader, "%s", em_error());
    return r;
}

static void finish(run *r)
{
    em_loader_free(r->loader);
    em_scheduler_free(r->sched);
    em_optim_free(r->optim);
    em_module_free(r->model);
    em_dataset_free(r->ds);
}

static size_t param_bytes(em_module *m, unsigned char *out)
{
    em_param_ref refs[8];
    int n = em_module_parameters(m, refs, 8);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        em_copy_to_host(refs[i].value, EM_F32, out + off);
        off += (size_t)em_numel(refs[i].value) * sizeof(float);
    }
    return off;
}

static em_trainer *trainer(run *r, em_trainer_opts o)
{
    o.scheduler = r->sched;
    em_trainer *t = em_trainer_new(r->model, r->optim, r->loader, o);
    cr_assert(t, "%s", em_error());
    return t;
}

Test(trainer, resumed_fit_is_bit_identical)
{
    static unsigned char whole[1 << 14], resumed[1 << 14];
    char path[] = "/tmp/ember_trainer_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    em_techniques tech = {.grad_accum = 2, .clip = 0.5};

    run a = start(1, 16);
    em_trainer *ta = trainer(&a, (em_trainer_opts){.tech = tech});
    cr_assert_eq(em_trainer_fit(ta, 3), EM_OK, "%s", em_error());
    cr_assert_eq(em_trainer_get_stats(ta).steps, 21);
    size_t n = param_bytes(a.model, whole);
    em_trainer_free(ta);
    finish(&a);

    run b = start(1, 16);
    em_trainer *tb = trainer(&b, (em_trainer_opts){.tech = tech, .checkpoint = path,
                                                   .max_steps = 9});
    cr_assert_eq(em_trainer_fit(tb, 3), EM_OK, "%s", em_error());
    /* steps 8 and 9 make an update; a stop at 9 saves none pending (10 would run to 11) */
    cr_assert_eq(em_trainer_get_stats(tb).steps, 9);
    em_trainer_free(tb);
    finish(&b);
    em_manual_seed(999); /* the resumed run must not depend on the generator's state before */

    run c = start(2, 16); /* other initial weights: all must come from the checkpoint */
    em_trainer *tc = trainer(&c, (em_trainer_opts){.tech = tech});
    cr_assert_eq(em_trainer_resume(tc, path), EM_OK, "%s", em_error());
    cr_assert_eq(em_loader_position(c.loader).epoch, 1); /* 9 = 7 + 2 */
    cr_assert_eq(em_loader_position(c.loader).batch, 2);
    cr_assert_eq(em_trainer_fit(tc, 3), EM_OK, "%s", em_error());
    cr_assert_eq(param_bytes(c.model, resumed), n);
    cr_assert_eq(memcmp(whole, resumed, n), 0, "resumed run differs from the uninterrupted one");
    em_trainer_free(tc);
    finish(&c);
    unlink(path);
}

typedef struct {
    int steps, epochs, updates;
    double loss_sum;         /* this epoch's micro-batch losses */
    double last_mean;        /* the last step's running mean */
    em_epoch_stats last;
} counts;

static void on_step(void *ctx, const em_progress *p)
{
    counts *c = ctx;
    c->steps++;
    c->loss_sum += p->loss;
    c->last_mean = p->mean_loss;
    cr_assert_eq(p->batches, 7);
    cr_assert_eq(p->epochs, 2);
}

static void on_epoch(void *ctx, const em_epoch_stats *e)
{
    counts *c = ctx;
    c->epochs++;
    cr_assert_float_eq(c->last_mean, c->loss_sum / 7, 1e-12, "running mean of epoch %d",
                       e->epoch);
    cr_assert_float_eq(e->train_loss, c->loss_sum / 7, 1e-12);
    c->loss_sum = 0;
    c->last = *e;
}

static em_status before_update(void *ctx, em_optim *o)
{
    (void)o;
    ((counts *)ctx)->updates++;
    return EM_OK;
}

Test(trainer, callbacks_accumulation_schedule_and_validation)
{
    run r = start(1, 16);
    em_trainer *t = trainer(&r, (em_trainer_opts){.tech = {.grad_accum = 3}, .val = r.ds,
                                                  .val_batch = 50});
    counts c = {0};
    cr_assert_eq(em_trainer_add_callbacks(t, (em_trainer_callbacks){
                                                 .ctx = &c, .on_step = on_step,
                                                 .on_epoch = on_epoch,
                                                 .before_update = before_update}),
                 EM_OK);
    cr_assert_eq(em_trainer_fit(t, 2), EM_OK, "%s", em_error());
    /* 7 batches an epoch in updates of 3: 3, 3 and a flushed 1 */
    em_trainer_stats s = em_trainer_get_stats(t);
    cr_assert_eq(c.steps, 14);
    cr_assert_eq(c.epochs, 2);
    cr_assert_eq(c.updates, 6);
    cr_assert_eq(s.updates, 6);
    cr_assert_eq(s.samples, 2 * N_SAMPLES);
    /* the scheduler stepped once per update: 0.1 * 0.5^6 */
    cr_assert_float_eq(em_optim_get_lr(r.optim, 0), 0.1 / 64, 1e-15);
    cr_assert_float_eq(c.last.lr, 0.1 / 64, 1e-15);
    em_eval_result e;
    cr_assert_eq(em_evaluate(r.model, r.ds, (em_eval_opts){0}, &e), EM_OK, "%s", em_error());
    cr_assert_eq(e.samples, N_SAMPLES);
    cr_assert_float_eq(c.last.val_loss, e.loss, 1e-6);
    cr_assert_eq(c.last.val_acc, e.accuracy);
    cr_assert(r.model->training, "evaluation must give the model back in training mode");
    em_trainer_free(t);
    finish(&r);
}

/* What a data-parallel run hooks: which backward passes an update follows, the skip decisions
 * it agrees on (here: it makes every other update skip), and the checkpoint writer. */
typedef struct {
    int follows, alone; /* backward passes an update follows, and the others */
    int decisions, saves;
} dp_counts;

static dp_counts *dp_seen; /* for the checkpoint writer, which gets no context */

static void dp_before_backward(void *ctx, bool update_follows)
{
    dp_counts *c = ctx;
    c->follows += update_follows;
    c->alone += !update_follows;
}

static em_status dp_agree(void *ctx, bool *skip)
{
    dp_counts *c = ctx;
    *skip = c->decisions++ % 2 == 1;
    return EM_OK;
}

static em_status dp_save(const char *path, const em_train_state *s, const em_st_meta *meta,
                         int n_meta)
{
    dp_seen->saves++;
    return em_train_checkpoint_save(path, s, meta, n_meta);
}

Test(trainer, data_parallel_callbacks_and_checkpoint_writer)
{
    run r = start(1, 16);
    char path[] = "/tmp/ember_dp_ckpt_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    dp_counts c = {0};
    dp_seen = &c;
    em_trainer *t = trainer(&r, (em_trainer_opts){.tech = {.grad_accum = 3, .guard = true},
                                                  .checkpoint = path,
                                                  .save_checkpoint = dp_save});
    cr_assert_eq(em_trainer_add_callbacks(t, (em_trainer_callbacks){
                                                 .ctx = &c,
                                                 .before_backward = dp_before_backward,
                                                 .agree = dp_agree}),
                 EM_OK);
    cr_assert_eq(em_trainer_fit(t, 2), EM_OK, "%s", em_error());
    /* 7 batches an epoch: updates follow the 3rd and 6th; the 7th is flushed at the end */
    cr_assert_eq(c.follows, 4);
    cr_assert_eq(c.alone, 10);
    cr_assert_eq(c.decisions, 6, "one guard decision per update");
    em_trainer_stats s = em_trainer_get_stats(t);
    cr_assert_eq(s.updates, 3);
    cr_assert_eq(s.skipped, 3);
    cr_assert_eq(c.saves, 2, "one checkpoint per epoch through the given writer");
    em_trainer_free(t);
    finish(&r);
    unlink(path);
}

Test(trainer, accuracy_is_the_fraction_of_argmax_hits)
{
    em_scope_begin();
    float logits[] = {1, 2, 0, /* argmax 1 */ 3, 0, 1, /* 0 */ 0, 0, 5, /* 2 */ 1, 4, 2 /* 1 */};
    int64_t target[] = {1, 0, 1, 1};
    em_tensor *l = em_from_data(EM_SHAPE(4, 3), EM_F32, logits);
    em_tensor *acc = em_accuracy(l, em_from_data(EM_SHAPE(4), EM_I64, target));
    cr_assert(acc, "%s", em_error());
    cr_assert_eq(em_item(acc), 0.75);
    cr_assert_null(em_accuracy(l, em_full(EM_SHAPE(4), EM_F32, 1)));
    cr_assert(strstr(em_error(), "em_accuracy: need logits (N, C) and integer class indices"),
              "%s", em_error());
    em_error_clear();
    em_scope_end();
}

static em_tensor *mse(void *ctx, const em_tensor *out, const em_tensor *y)
{
    (void)ctx;
    em_tensor *d = em_sub(em_reshape(out, EM_SHAPE(em_size(out, 0))), y); // (B)
    return em_mean_all(em_mul(d, d));
}

Test(trainer, evaluate_regression_with_a_custom_loss)
{
    em_scope_begin();
    /* y = 2 x exactly for three samples and off by 1 and 3 for two: mse = (1 + 9) / 5 */
    float x[] = {1, 2, 3, 4, 5}, y[] = {2, 4, 6, 9, 13};
    em_dataset *ds = em_tensor_dataset(em_from_data(EM_SHAPE(5, 1), EM_F32, x),
                                       em_from_data(EM_SHAPE(5), EM_F32, y));
    em_scope_end();
    em_module *m = em_linear_layer(1, 1, false);
    em_fill_(em_module_find(m, "weight"), 2.0);
    em_eval_result r;
    cr_assert_eq(em_evaluate(m, ds, (em_eval_opts){.batch = 2, .loss = mse}, &r), EM_OK, "%s",
                 em_error());
    cr_assert_float_eq(r.loss, 2.0, 1e-6);
    cr_assert(isnan(r.accuracy));
    cr_assert_eq(r.samples, 5);
    em_module_free(m);
    em_dataset_free(ds);
}

Test(trainer, nan_loss_is_refused_and_the_model_kept)
{
    static unsigned char before[1 << 14], after[1 << 14];
    run r = start(1, 16);
    em_trainer *t = trainer(&r, (em_trainer_opts){0});
    size_t n = param_bytes(r.model, before);
    em_scope_begin();
    em_tensor *x = em_full(EM_SHAPE(4, 6), EM_F32, NAN);
    em_tensor *y = em_zeros(EM_SHAPE(4), EM_I64);
    cr_assert_eq(em_trainer_step(t, x, y, NULL), EM_ERR_NUMERIC);
    cr_assert(strstr(em_error(), "the update was not taken"), "%s", em_error());
    em_scope_end();
    em_error_clear();
    param_bytes(r.model, after);
    cr_assert_eq(memcmp(before, after, n), 0);
    cr_assert_eq(em_trainer_get_stats(t).updates, 0);
    em_trainer_free(t);
    finish(&r);
}

Test(trainer, bad_options_and_missing_loader)
{
    run r = start(1, 16);
    cr_assert_null(em_trainer_new(r.model, r.optim, r.loader,
                                  (em_trainer_opts){.tech = {.amp = EM_I32}}));
    cr_assert(strstr(em_error(), "amp must be f16, bf16 or f32, not i32"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_trainer_new(r.model, r.optim, r.loader, (em_trainer_opts){.max_steps = -1}));
    em_error_clear();
    cr_assert_null(em_trainer_new(r.model, r.optim, r.loader,
                                  (em_trainer_opts){.checkpoint_every = 5}));
    cr_assert(strstr(em_error(), "checkpoint_every (5) must be >= 0, and needs a checkpoint "
                     "path"), "%s", em_error());
    em_error_clear();
    em_trainer *t = em_trainer_new(r.model, r.optim, NULL, (em_trainer_opts){0});
    cr_assert_eq(em_trainer_fit(t, 1), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "a trainer with a loader"), "%s", em_error());
    em_error_clear();
    em_trainer_free(t);
    finish(&r);
}

Test(trainer, progress_lines_go_to_stderr)
{
    char path[] = "/tmp/ember_progress_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    run r = start(1, 16);
    em_trainer *t = trainer(&r, (em_trainer_opts){.val = r.ds, .progress = true});
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    em_status st = em_trainer_fit(t, 2);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    cr_assert_eq(st, EM_OK, "%s", em_error());
    char text[4096] = "";
    FILE *f = fdopen(fd, "r");
    rewind(f);
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = 0;
    fclose(f);
    /* no terminal: plain lines at each fifth of an epoch, then the epoch's own line */
    cr_assert(strstr(text, "epoch 1/2 2/7 loss "), "%s", text);
    cr_assert(strstr(text, "epoch 1/2 loss "), "%s", text);
    cr_assert(strstr(text, "epoch 2/2 loss "), "%s", text);
    cr_assert(strstr(text, " val_loss "), "%s", text);
    cr_assert(strstr(text, " val_acc "), "%s", text);
    cr_assert_null(strchr(text, '\r'), "no carriage returns off a terminal: %s", text);
    em_trainer_free(t);
    finish(&r);
    unlink(path);
}

/* On a terminal the line is redrawn in place ("\r" line "\033[K"), each drawing within the
 * terminal's width less one column (COLUMNS: the width query fails on a file), and at most once
 * per 0.1 s however often the loop reports (500 reports over half a second here), the epoch's
 * last batch always; the epoch's own line follows. */
Test(trainer, terminal_line_fits_the_width_and_redraws_at_most_ten_times_a_second)
{
    char path[] = "/tmp/ember_progress_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    setenv("COLUMNS", "80", 1);
    em_progress_printer pp;
    em_progress_printer_init(&pp);
    pp.tty = true;
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    const int64_t batches = 500;
    double t0 = em_train_clock_s();
    for (int64_t b = 1; b <= batches; b++) {
        while (em_train_clock_s() < t0 + 0.001 * (double)b)
            ;
        em_progress p = {.epoch = 0, .epochs = 3, .batch = b, .batches = batches,
                         .samples = 16 * b, .step = b, .loss = 1, .mean_loss = (double)b / 100,
                         .samples_per_s = 16000, .lr = 0.1, .scale = 1};
        em_progress_printer_step(&pp, &p);
    }
    double elapsed = em_train_clock_s() - t0;
    em_progress_printer_epoch(&pp, &(em_epoch_stats){.epoch = 0, .epochs = 3, .train_loss = 2.5,
                                                    .val_loss = NAN, .val_acc = NAN, .lr = 0.1,
                                                    .seconds = elapsed, .samples = 8000});
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    unsetenv("COLUMNS");
    char text[65536] = "";
    FILE *f = fdopen(fd, "r");
    rewind(f);
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = 0;
    fclose(f);
    unlink(path);
    cr_assert(strstr(text, "\r\033[Kepoch 1/3 loss 2.5000 lr 0.1 "), "%s", text);

    int draws = 0;
    const char *last = NULL;
    for (char *seg = strtok(text, "\r"); seg; seg = strtok(NULL, "\r")) {
        char *end = strstr(seg, "\033[K");
        cr_assert_not_null(end, "a drawing not ended by erase-to-end-of-line: '%s'", seg);
        if (end == seg) /* the epoch line's own "\r\033[K" */
            break;
        *end = 0;
        cr_assert_leq(strlen(seg), 79, "wider than the terminal: '%s'", seg);
        draws++;
        last = seg;
    }
    int most = 2 + (int)(elapsed / 0.1);
    cr_assert(draws >= 3 && draws <= most, "%d drawings in %.2f s", draws, elapsed);
    /* the bar takes up what the text leaves: the last drawing fills the line */
    cr_assert(strstr(last, "epoch 1/3 [") && strstr(last, "] 100% loss 5.0000 "), "'%s'", last);
    cr_assert_eq(strlen(last), 79, "'%s'", last);
}

Test(trainer, max_steps_finishes_the_accumulation)
{
    run r = start(1, 16);
    em_trainer *t = trainer(&r, (em_trainer_opts){.tech = {.grad_accum = 2}, .max_steps = 10});
    cr_assert_eq(em_trainer_fit(t, 3), EM_OK, "%s", em_error());
    /* updates at steps 2, 4, 6, 7 (end of epoch) and 9: step 10 starts one that 11 completes */
    cr_assert_eq(em_trainer_get_stats(t).steps, 11);
    cr_assert_eq(em_trainer_get_stats(t).updates, 6);
    em_trainer_free(t);
    finish(&r);
}

static void record_val_loss(void *ctx, const em_epoch_stats *e)
{
    ((double *)ctx)[e->epoch] = e->val_loss;
}

Test(trainer, plateau_steps_per_epoch_with_the_validation_loss_and_resumes)
{
    char path[] = "/tmp/ember_plateau_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    run r = start(1, 16);
    em_scheduler *plateau = em_reduce_lr_on_plateau(r.optim, (em_plateau_opts){.factor = 0.5,
                                                                              .patience = -1,
                                                                              .threshold = 0.5});
    em_trainer *t = em_trainer_new(r.model, r.optim, r.loader,
                                   (em_trainer_opts){.scheduler = plateau, .val = r.ds,
                                                     .checkpoint = path});
    double val[4];
    em_trainer_add_callbacks(t, (em_trainer_callbacks){.ctx = val, .on_epoch = record_val_loss});
    cr_assert_eq(em_trainer_fit(t, 4), EM_OK, "%s", em_error());
    cr_assert_eq(em_scheduler_last_step(plateau), 4);
    /* no epoch halves the loss: epochs 2, 3 and 4 each cut the lr */
    cr_assert_float_eq(em_optim_get_lr(r.optim, 0), 0.1 / 8, 1e-15);
    /* the same losses through a fresh scheduler give the same lr */
    run q = start(1, 16);
    em_scheduler *replay = em_reduce_lr_on_plateau(q.optim, (em_plateau_opts){.factor = 0.5,
                                                                             .patience = -1,
                                                                             .threshold = 0.5});
    for (int e = 0; e < 4; e++)
        em_scheduler_step_metric(replay, val[e]);
    cr_assert_eq(em_optim_get_lr(q.optim, 0), em_optim_get_lr(r.optim, 0));
    /* the checkpoint carries the scheduler's state */
    em_scheduler *fresh = em_reduce_lr_on_plateau(q.optim, (em_plateau_opts){.factor = 0.5,
                                                                            .patience = -1,
                                                                            .threshold = 0.5});
    em_trainer *tq = em_trainer_new(q.model, q.optim, q.loader,
                                    (em_trainer_opts){.scheduler = fresh});
    cr_assert_eq(em_trainer_resume(tq, path), EM_OK, "%s", em_error());
    em_param_ref want[3], got[3];
    em_scheduler_state(plateau, want, 3);
    em_scheduler_state(fresh, got, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(em_item(got[i].value), em_item(want[i].value), "%s", want[i].name);
    cr_assert_eq(em_scheduler_last_step(fresh), 4);
    cr_assert_eq(em_optim_get_lr(q.optim, 0), em_optim_get_lr(r.optim, 0));
    em_trainer_free(tq);
    em_trainer_free(t);
    em_scheduler_free(fresh);
    em_scheduler_free(replay);
    em_scheduler_free(plateau);
    finish(&q);
    finish(&r);
    unlink(path);
}

/* A run that dies after step 12 (an error from a callback here; a kill leaves the same file,
 * written atomically) resumes from its last checkpoint, written every 4 micro-batches: at step
 * 11, mid-way through epoch 1. The resumed run counts on from step 12, and ends with the same
 * parameters and the same per-epoch losses, bit for bit, as one never interrupted. */
typedef struct {
    int64_t updates, fail_at; /* the update that fails; 0: none */
    int64_t first_global_step;
    double epoch_loss[3];
} periodic_run;

static em_status fail_at(void *ctx, em_optim *o)
{
    (void)o;
    periodic_run *p = ctx;
    return ++p->updates == p->fail_at ? em_set_error(EM_ERR_STATE, "killed") : EM_OK;
}

static void first_step(void *ctx, const em_progress *p)
{
    periodic_run *r = ctx;
    if (!r->first_global_step)
        r->first_global_step = p->global_step;
}

static void epoch_loss(void *ctx, const em_epoch_stats *e)
{
    ((periodic_run *)ctx)->epoch_loss[e->epoch] = e->train_loss;
}

static em_trainer *periodic_trainer(run *r, em_trainer_opts o, periodic_run *p)
{
    em_trainer *t = trainer(r, o);
    cr_assert_eq(em_trainer_add_callbacks(t, (em_trainer_callbacks){
                     .ctx = p, .on_step = first_step, .on_epoch = epoch_loss,
                     .before_update = fail_at}), EM_OK);
    return t;
}

Test(trainer, a_killed_run_resumes_from_its_last_periodic_checkpoint)
{
    static unsigned char whole[1 << 14], resumed[1 << 14];
    char path[] = "/tmp/ember_periodic_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);

    run a = start(1, 16);
    periodic_run pa = {0};
    em_trainer *ta = periodic_trainer(&a, (em_trainer_opts){0}, &pa);
    cr_assert_eq(em_trainer_fit(ta, 3), EM_OK, "%s", em_error());
    size_t n = param_bytes(a.model, whole);
    em_trainer_free(ta);
    finish(&a);

    run b = start(1, 16);
    periodic_run pb = {.fail_at = 13};
    em_trainer *tb = periodic_trainer(&b, (em_trainer_opts){.checkpoint = path,
                                                            .checkpoint_every = 4}, &pb);
    cr_assert_eq(em_trainer_fit(tb, 3), EM_ERR_STATE);
    em_error_clear();
    em_trainer_free(tb);
    finish(&b);

    run c = start(2, 16);
    periodic_run pc = {0};
    em_trainer *tc = periodic_trainer(&c, (em_trainer_opts){0}, &pc);
    cr_assert_eq(em_trainer_resume(tc, path), EM_OK, "%s", em_error());
    /* saved at 4, at the end of epoch 0 (7), then 4 later at 11 = 7 + 4 */
    cr_assert_eq(em_trainer_get_stats(tc).global_step, 11);
    cr_assert_eq(em_loader_position(c.loader).epoch, 1);
    cr_assert_eq(em_loader_position(c.loader).batch, 4);
    cr_assert_eq(em_trainer_fit(tc, 3), EM_OK, "%s", em_error());
    cr_expect_eq(pc.first_global_step, 12);
    cr_expect_eq(em_trainer_get_stats(tc).global_step, 21);
    cr_expect_eq(em_trainer_get_stats(tc).steps, 10);
    cr_assert_eq(param_bytes(c.model, resumed), n);
    cr_expect_eq(memcmp(whole, resumed, n), 0, "resumed run differs from the uninterrupted one");
    cr_expect_eq(pc.epoch_loss[1], pa.epoch_loss[1], "epoch 1's loss counts its first 4 steps");
    cr_expect_eq(pc.epoch_loss[2], pa.epoch_loss[2]);
    em_trainer_free(tc);
    finish(&c);
    unlink(path);
}
