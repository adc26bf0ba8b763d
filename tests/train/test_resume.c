/* A training run stopped mid-epoch, saved as a training checkpoint and resumed in a fresh model,
 * optimizer, scheduler and loader ends with the same parameters, bit for bit, as a run that was
 * never interrupted, also from a file in the layout of version 1; a damaged checkpoint changes
 * nothing. A checkpoint opens with em_model_load as the model it holds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

#define N_SAMPLES 256
#define EPOCHS 3
#define STOP_AT 12 /* steps before the interruption: mid-way through epoch 2 */

typedef struct {
    em_dataset *ds;
    em_module *model;
    em_optim *optim;
    em_scheduler *sched;
    em_loader *loader;
} run;

static em_dataset *make_dataset(void)
{
    em_generator g = em_generator_new(7);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(N_SAMPLES, 8), EM_F32, &g);           // (256, 8)
    em_tensor *y = em_randint(EM_SHAPE(N_SAMPLES), EM_I64, 0, 4, &g);      // (256)
    em_dataset *ds = em_tensor_dataset(x, y);
    em_scope_end();
    return ds;
}

static run start(uint64_t init_seed)
{
    run r = {.ds = make_dataset()};
    em_manual_seed(init_seed);
    r.model = em_sequential(4, em_linear_layer(8, 16, true), em_relu_layer(), em_dropout_layer(0.2),
                            em_linear_layer(16, 4, true));
    r.optim = em_adam(r.model, (em_adam_opts){.lr = 0.01});
    r.sched = em_step_lr(r.optim, 5, 0.5);
    r.loader = em_loader_new(r.ds, (em_loader_opts){.batch_size = 32, .shuffle = true, .seed = 3,
                                                    .num_workers = 2});
    cr_assert(r.model && r.optim && r.sched && r.loader, "%s", em_error());
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

/* Trains until EPOCHS are done or max_steps steps were taken; returns the steps taken. */
static int train(run *r, int max_steps)
{
    int steps = 0;
    while (em_loader_position(r->loader).epoch < EPOCHS && steps < max_steps) {
        em_batch b;
        em_scope_begin();
        em_status st = em_loader_next(r->loader, &b);
        if (st == EM_OK) {
            em_tensor *loss = em_cross_entropy(em_forward(r->model, b.x), b.y,
                                               (em_cross_entropy_opts){0});
            cr_assert(loss && em_backward(loss) == EM_OK, "%s", em_error());
            cr_assert_eq(em_optim_step(r->optim), EM_OK, "%s", em_error());
            em_optim_zero_grad(r->optim);
            em_scheduler_step(r->sched);
            steps++;
        }
        em_scope_end();
        cr_assert(st == EM_OK || st == EM_END, "%s", em_error());
    }
    return steps;
}

/* All parameters as raw bytes, in traversal order. */
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

/* The file at path, each tensor named rename(its name) and each metadata entry's value
 * meta_value(key, value) (NULL: the entry left out). */
static void rewrite(const char *path, void (*rename)(const char *name, char *out, size_t n),
                    const char *(*meta_value)(const char *key, const char *value))
{
    em_safetensors *f;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK, "%s", em_error());
    em_st_entry e[64];
    em_st_meta m[32];
    char names[64][96];
    int n_meta = 0;
    cr_assert(f->n_tensors <= 64 && f->n_meta <= 32);
    for (int i = 0; i < f->n_tensors; i++) {
        rename(f->names[i], names[i], sizeof names[i]);
        e[i] = (em_st_entry){names[i], f->tensors[i]};
    }
    for (int i = 0; i < f->n_meta; i++)
        if (meta_value(f->meta_keys[i], f->meta_values[i]))
            m[n_meta++] = (em_st_meta){f->meta_keys[i],
                                       meta_value(f->meta_keys[i], f->meta_values[i])};
    cr_assert_eq(em_safetensors_save(path, e, f->n_tensors, m, n_meta), EM_OK, "%s",
                 em_error());
    em_safetensors_free(f);
}

/* Version 1's names: the model's under "model.", the others under their part's word. */
static void version_1_name(const char *name, char *out, size_t n)
{
    const char *parts[] = {"ember.optim.", "ember.scaler.", "ember.sched."};
    for (int p = 0; p < 3; p++)
        if (!strncmp(name, parts[p], strlen(parts[p]))) {
            snprintf(out, n, "%s", name + strlen("ember."));
            return;
        }
    snprintf(out, n, "model.%s", name);
}

static const char *version_1_meta(const char *key, const char *value)
{
    return strcmp(key, "ember.checkpoint_version") && strcmp(key, "ember.model") ? value : NULL;
}

static void to_version_1(const char *path)
{
    rewrite(path, version_1_name, version_1_meta);
}

/* Runs the checkpoint at path is rewritten by (NULL: as saved) must resume bit for bit. */
static void resume_bit_for_bit(void (*rewrite_file)(const char *path))
{
    static unsigned char whole[1 << 16], resumed[1 << 16];
    char path[] = "/tmp/ember_resume_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);

    run a = start(1);
    train(&a, 1 << 30);
    size_t n = param_bytes(a.model, whole);
    finish(&a);

    run b = start(1);
    cr_assert_eq(train(&b, STOP_AT), STOP_AT);
    em_loader_pos pos = em_loader_position(b.loader);
    em_train_state s = {.model = b.model, .optim = b.optim, .scheduler = b.sched,
                        .loader = b.loader};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());
    finish(&b);
    if (rewrite_file)
        rewrite_file(path);
    em_manual_seed(999); /* the resumed run must not depend on the generator's state before */

    run c = start(2); /* different initial weights: all must come from the checkpoint */
    em_train_state t = {.model = c.model, .optim = c.optim, .scheduler = c.sched,
                        .loader = c.loader};
    cr_assert_eq(em_train_checkpoint_load(path, &t), EM_OK, "%s", em_error());
    cr_assert_eq(em_loader_position(c.loader).epoch, pos.epoch); /* the file moved the loader */
    cr_assert_eq(em_loader_position(c.loader).batch, pos.batch);
    train(&c, 1 << 30);
    cr_assert_eq(param_bytes(c.model, resumed), n);
    cr_assert_eq(memcmp(whole, resumed, n), 0, "resumed run differs from the uninterrupted one");
    finish(&c);
    unlink(path);
}

Test(resume, continues_bit_for_bit)
{
    resume_bit_for_bit(NULL);
}

/* A checkpoint as ember wrote them before they held the module tree: every part's tensors
 * prefixed ("model.0.weight", "optim.param.0.exp_avg"), no version. */
Test(resume, a_version_1_checkpoint_continues_bit_for_bit)
{
    resume_bit_for_bit(to_version_1);
}

/* The checkpoint is the model's whole-model file: em_model_load builds the same model (in the
 * training mode it was saved in) with the same weights, passing the optimizer's tensors by; the
 * caller's metadata is kept beside. */
Test(resume, a_checkpoint_opens_as_the_whole_model)
{
    static unsigned char trained[1 << 16], loaded[1 << 16];
    char path[] = "/tmp/ember_resume_XXXXXX";
    close(mkstemp(path));
    run a = start(1);
    train(&a, 5);
    em_train_state s = {.model = a.model, .optim = a.optim, .scheduler = a.sched,
                        .loader = a.loader};
    em_st_meta mine = {"recipe", "test"};
    cr_assert_eq(em_train_checkpoint_save(path, &s, &mine, 1), EM_OK, "%s", em_error());
    em_module *m = em_model_load(path);
    cr_assert_not_null(m, "%s", em_error());
    cr_expect(m->training);
    size_t n = param_bytes(a.model, trained);
    cr_assert_eq(param_bytes(m, loaded), n);
    cr_expect_eq(memcmp(trained, loaded, n), 0, "the loaded weights differ");
    em_module_eval(a.model);
    em_module_eval(m);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(3, 8), EM_F32, NULL); // (3, 8)
    float ya[12], yb[12];
    cr_assert_eq(em_copy_to_host(em_forward(a.model, x), EM_F32, ya), EM_OK, "%s", em_error());
    cr_assert_eq(em_copy_to_host(em_forward(m, x), EM_F32, yb), EM_OK, "%s", em_error());
    em_scope_end();
    cr_expect_eq(memcmp(ya, yb, sizeof ya), 0);
    em_safetensors *f;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK, "%s", em_error());
    cr_expect_str_eq(em_safetensors_meta(f, "recipe"), "test");
    cr_expect_str_eq(em_safetensors_meta(f, "ember.checkpoint_version"), "2");
    cr_expect_not_null(em_safetensors_get(f, "0.weight"));
    cr_expect_not_null(em_safetensors_get(f, "ember.optim.param.0.exp_avg"));
    em_safetensors_free(f);
    em_module_free(m);
    finish(&a);
    unlink(path);
}

/* y = x * scale: a type whole-model files do not know */
static em_tensor *scale_forward(em_module *m, const em_tensor *x)
{
    return em_mul(x, m->params[0].value);
}

static const em_module_type scale_type = {.type_name = "TestScale", .forward = scale_forward};

/* A model with a module of an unknown type still checkpoints and resumes; only its tree is left
 * out, so em_model_load says the file is no whole-model file. */
Test(resume, a_model_whole_model_files_cannot_describe_still_checkpoints)
{
    char path[] = "/tmp/ember_resume_XXXXXX";
    close(mkstemp(path));
    em_module *scale = em_module_alloc(sizeof *scale, &scale_type);
    em_module_add_param(scale, "scale", em_full(EM_SHAPE(4), EM_F32, 3.0));
    em_module *m = em_sequential(2, em_linear_layer(2, 4, true), scale);
    cr_assert_not_null(m, "%s", em_error());
    cr_expect(!em_model_describable(m));
    em_train_state s = {.model = m};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());
    cr_expect_null(em_model_load(path));
    cr_expect(strstr(em_error(), "no 'ember.model' metadata: not a whole-model file"), "%s",
              em_error());
    em_error_clear();
    cr_assert_eq(em_fill_(m->children[1].module->params[0].value, 1.0), EM_OK);
    cr_assert_eq(em_train_checkpoint_load(path, &s), EM_OK, "%s", em_error());
    float v[4];
    em_copy_to_host(m->children[1].module->params[0].value, EM_F32, v);
    cr_expect_eq(v[3], 3.0f);
    em_module_free(m);
    unlink(path);
}

static void same_name(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s", name);
}

static const char *version_3(const char *key, const char *value)
{
    return strcmp(key, "ember.checkpoint_version") ? value : "3";
}

/* A version ember does not know yet is refused, naming it. */
Test(resume, a_newer_checkpoint_version_is_refused)
{
    char path[] = "/tmp/ember_resume_XXXXXX";
    close(mkstemp(path));
    run a = start(1);
    em_train_state s = {.model = a.model};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());
    rewrite(path, same_name, version_3);
    cr_assert_eq(em_train_checkpoint_load(path, &s), EM_ERR_IO);
    cr_expect(strstr(em_error(), "checkpoint version '3' (this ember reads 1 to 2)"), "%s",
              em_error());
    em_error_clear();
    finish(&a);
    unlink(path);
}

Test(resume, damaged_checkpoint_changes_nothing)
{
    char path[] = "/tmp/ember_resume_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    static unsigned char before[1 << 16], after[1 << 16];

    run a = start(1);
    train(&a, 3);
    em_train_state s = {.model = a.model, .optim = a.optim, .scheduler = a.sched};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());
    finish(&a);
    FILE *f = fopen(path, "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    cr_assert_eq(truncate(path, size - 10), 0);

    run b = start(5);
    size_t n = param_bytes(b.model, before);
    em_error_clear();
    em_train_state t = {.model = b.model, .optim = b.optim, .scheduler = b.sched};
    cr_assert_eq(em_train_checkpoint_load(path, &t), EM_ERR_IO);
    cr_assert(strstr(em_error(), path), "error should name the file: %s", em_error());
    param_bytes(b.model, after);
    cr_assert_eq(memcmp(before, after, n), 0);
    em_error_clear();
    finish(&b);
    unlink(path);
}

Test(resume, loader_position_must_fit_the_loader)
{
    char path[] = "/tmp/ember_resume_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    static unsigned char before[1 << 16], after[1 << 16];
    run a = start(1);
    train(&a, 3);
    em_train_state s = {.model = a.model, .optim = a.optim, .loader = a.loader};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());

    run b = start(5);
    em_loader *wide = em_loader_new(b.ds, (em_loader_opts){.batch_size = 64}); /* 4 batches */
    size_t n = param_bytes(b.model, before);
    em_train_state t = {.model = b.model, .optim = b.optim, .loader = wide};
    cr_assert_eq(em_train_checkpoint_load(path, &t), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "had 8 batches per epoch"), "%s", em_error());
    cr_assert_eq(em_loader_position(wide).batch, 0);
    param_bytes(b.model, after);
    cr_assert_eq(memcmp(before, after, n), 0, "a refused checkpoint changed the model");
    em_error_clear();

    /* a file saved without a loader cannot put one anywhere: an error, not a silent 0/0 */
    em_train_state no_loader = {.model = a.model, .optim = a.optim};
    cr_assert_eq(em_train_checkpoint_save(path, &no_loader, NULL, 0), EM_OK, "%s", em_error());
    t.loader = b.loader;
    cr_assert_eq(em_train_checkpoint_load(path, &t), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "holds no loader position"), "%s", em_error());
    em_error_clear();
    em_loader_free(wide);
    finish(&a);
    finish(&b);
    unlink(path);
}

/* A checkpoint whose scheduler step is INT64_MAX (damaged, or written by hand) is refused before
 * anything changes: the next em_scheduler_step overflowed. */
Test(resume, a_scheduler_step_past_2_53_is_refused)
{
    char path[] = "/tmp/ember_resume_XXXXXX";
    close(mkstemp(path));
    run a = start(1);
    train(&a, 3);
    em_train_state s = {.model = a.model, .optim = a.optim, .scheduler = a.sched};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());
    finish(&a);
    em_safetensors *f;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK, "%s", em_error());
    em_st_entry e[64];
    em_st_meta m[32];
    cr_assert(f->n_tensors <= 64 && f->n_meta <= 32);
    for (int i = 0; i < f->n_tensors; i++)
        e[i] = (em_st_entry){f->names[i], f->tensors[i]};
    for (int i = 0; i < f->n_meta; i++)
        m[i] = (em_st_meta){f->meta_keys[i], strcmp(f->meta_keys[i], "ember.scheduler_step")
                                                 ? f->meta_values[i] : "9223372036854775807"};
    cr_assert_eq(em_safetensors_save(path, e, f->n_tensors, m, f->n_meta), EM_OK, "%s",
                 em_error());
    em_safetensors_free(f);

    run b = start(5);
    em_train_state t = {.model = b.model, .optim = b.optim, .scheduler = b.sched};
    cr_assert_eq(em_train_checkpoint_load(path, &t), EM_ERR_IO);
    cr_expect(strstr(em_error(), "scheduler step 9223372036854775807 is past 2^53"), "%s",
              em_error());
    cr_expect_eq(em_scheduler_last_step(b.sched), 0);
    em_error_clear();
    finish(&b);
    unlink(path);
}
