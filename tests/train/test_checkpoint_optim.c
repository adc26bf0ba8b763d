/* A training checkpoint records its optimizer's kind and settings: resuming with another kind
 * (SGD, AdamW or RMSprop from an Adam run) or other settings is an error that shows both, and
 * changes nothing; the same optimizer resumes. A file from before the record (no "ember.optim")
 * is still checked entry by entry. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

static char path[64];

static void setup(void)
{
    snprintf(path, sizeof path, "/tmp/ember_ckpt_optim_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    em_error_clear();
}

static void teardown(void)
{
    unlink(path);
}

TestSuite(checkpoint_optim, .init = setup, .fini = teardown);

static em_module *model(void)
{
    em_manual_seed(1);
    return em_sequential(2, em_linear_layer(3, 4, true), em_linear_layer(4, 2, true));
}

/* One Adam step on a fixed batch, saved to path. */
static void save_adam_run(void)
{
    em_module *m = model();
    em_optim *o = em_adam(m, (em_adam_opts){.lr = 0.01});
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(5, 3), EM_F32);
    cr_assert_eq(em_backward(em_sum_all(em_forward(m, x))), EM_OK, "%s", em_error());
    cr_assert_eq(em_optim_step(o), EM_OK, "%s", em_error());
    em_scope_end();
    em_train_state s = {.model = m, .optim = o};
    cr_assert_eq(em_train_checkpoint_save(path, &s, NULL, 0), EM_OK, "%s", em_error());
    em_optim_free(o);
    em_module_free(m);
}

/* Loads path into a fresh model with optimizer o; the model must stay as it was on failure. */
static em_status resume_with(em_optim *(*make)(em_module *m), em_module **m_out)
{
    em_module *m = model();
    em_optim *o = make(m);
    em_tensor *w = m->children[0].module->params[0].value;
    float before = ((float *)em_data_ptr(w))[0];
    em_train_state s = {.model = m, .optim = o};
    em_status st = em_train_checkpoint_load(path, &s);
    if (st != EM_OK)
        cr_assert_eq(((float *)em_data_ptr(w))[0], before, "a failed resume changed the model");
    em_optim_free(o);
    if (m_out)
        *m_out = m;
    else
        em_module_free(m);
    return st;
}

static em_optim *adam_same(em_module *m) { return em_adam(m, (em_adam_opts){.lr = 0.01}); }
static em_optim *adam_lr(em_module *m) { return em_adam(m, (em_adam_opts){.lr = 0.02}); }
static em_optim *adamw(em_module *m) { return em_adamw(m, (em_adam_opts){.lr = 0.01}); }
static em_optim *sgd(em_module *m) { return em_sgd(m, (em_sgd_opts){.lr = 0.01, .momentum = 0.9}); }
static em_optim *rmsprop(em_module *m) { return em_rmsprop(m, (em_rmsprop_opts){.lr = 0.01}); }

#define ADAM "{\"kind\":\"adam\",\"lr\":0.01,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-8," \
             "\"weight_decay\":0.0,\"amsgrad\":false,\"group_weight_decay\":[0.0]}"

Test(checkpoint_optim, settings_name_kind_and_defaults)
{
    em_module *m = model();
    em_optim *o = adam_same(m);
    char *s = em_optim_settings(o);
    cr_assert_str_eq(s, ADAM);
    free(s);
    em_optim_free(o);
    o = adamw(m);
    s = em_optim_settings(o);
    cr_assert_str_eq(s, "{\"kind\":\"adamw\",\"lr\":0.01,\"beta1\":0.9,\"beta2\":0.999,"
                        "\"eps\":1e-8,\"weight_decay\":0.01,\"amsgrad\":false,"
                        "\"group_weight_decay\":[0.01]}");
    free(s);
    em_optim_free(o);
    em_module_free(m);
}

Test(checkpoint_optim, another_optimizer_is_an_error_naming_both)
{
    save_adam_run();
    struct {
        em_optim *(*make)(em_module *m);
        const char *mine;
    } cases[] = {
        {sgd, "{\"kind\":\"sgd\",\"lr\":0.01,\"momentum\":0.9,\"dampening\":0.0,"
              "\"weight_decay\":0.0,\"nesterov\":false,\"group_weight_decay\":[0.0]}"},
        {adamw, "{\"kind\":\"adamw\","},
        {rmsprop, "{\"kind\":\"rmsprop\","},
        {adam_lr, "{\"kind\":\"adam\",\"lr\":0.02,"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        em_error_clear();
        cr_assert_eq(resume_with(cases[i].make, NULL), EM_ERR_ARG, "case %zu", i);
        char want[512];
        snprintf(want, sizeof want, "em_train_checkpoint_load: %s was saved by the optimizer "
                 ADAM "; this run's is %s", path, cases[i].mine);
        cr_assert(strncmp(em_error(), want, strlen(want)) == 0, "%s", em_error());
    }
    em_error_clear();
    em_module *m = NULL;
    cr_assert_eq(resume_with(adam_same, &m), EM_OK, "%s", em_error());
    em_module_free(m);
}

/* The file rewritten without its "ember.optim" record, as files from before it look. */
static void drop_optim_record(void)
{
    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK, "%s", em_error());
    em_st_entry e[64];
    em_st_meta meta[16];
    int n_meta = 0;
    for (int i = 0; i < f->n_tensors; i++)
        e[i] = (em_st_entry){f->names[i], f->tensors[i]};
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], "ember.optim"))
            meta[n_meta++] = (em_st_meta){f->meta_keys[i], f->meta_values[i]};
    cr_assert_eq(em_safetensors_save(path, e, f->n_tensors, meta, n_meta), EM_OK);
    em_safetensors_free(f);
}

Test(checkpoint_optim, unrecorded_files_are_checked_entry_by_entry)
{
    save_adam_run();
    drop_optim_record();
    cr_assert_eq(resume_with(sgd, NULL), EM_ERR_ARG);
    char want[256];
    snprintf(want, sizeof want, "em_train_checkpoint_load: %s: "
             "'ember.optim.param.0.momentum_buffer' is missing", path);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
    cr_assert_eq(resume_with(rmsprop, NULL), EM_ERR_ARG);
    snprintf(want, sizeof want, "em_train_checkpoint_load: %s: 'ember.optim.param.0.square_avg' "
             "is missing", path);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
    em_module *m = NULL;
    cr_assert_eq(resume_with(adam_same, &m), EM_OK, "%s", em_error());
    em_module_free(m);
}
