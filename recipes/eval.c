/* The evaluation of a saved model (recipes/run.h: recipe_eval), and the images a classifier is
 * scored on, which quantize and prune measure and fine-tune with too. */
#include <math.h>
#include <time.h>

#include "recipes/run.h"

em_dataset *recipe_model_images(const recipe_model *m, const char *dir, bool train)
{
    if (m->recipe && m->recipe->language_model) {
        em_set_error(EM_ERR_ARG, "a model of the %s recipe is a language model, not an image "
                     "classifier", m->recipe->name);
        return NULL;
    }
    if (!m->recipe && !dir) {
        em_set_error(EM_ERR_ARG, "the model names no recipe, so its data is not known: give "
                     "--data DIR, a folder of IDX files in Fashion-MNIST's names");
        return NULL;
    }
    if (!m->input.ndim) {
        em_set_error(EM_ERR_ARG, "the model's file does not say its input shape: give "
                     "--input-shape");
        return NULL;
    }
    return recipe_fashion_mnist(dir, train, m->input);
}

/* The split m is scored on, with the loss and batch it is scored with. */
static em_status eval_data(const recipe_model *m, const char *dir, recipe_data *d)
{
    const recipe_spec *rc = m->recipe;
    if (rc)
        return rc->eval_data(rc, dir, m->model, &m->vocab, d);
    d->val = recipe_model_images(m, dir, false);
    return d->val ? EM_OK : em_error_status();
}

em_status recipe_eval(const recipe_model *m, const char *dir, recipe_result *res)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const recipe_spec *rc = m->recipe;
    bool lm = rc && rc->language_model;
    *res = (recipe_result){.scale = 1, .test_acc = lm ? NAN : 0, .test_loss = lm ? NAN : 0};
    recipe_data d = {0};
    em_eval_result e = {0};
    em_status st = eval_data(m, dir, &d);
    if (st == EM_OK)
        st = em_evaluate(m->model, d.val, (em_eval_opts){.batch = rc ? rc->val_batch : 0,
                                                         .loss = rc ? rc->loss : NULL}, &e);
    if (st == EM_OK) {
        res->test_loss = e.loss;
        res->test_acc = lm ? NAN : e.accuracy;
        res->tokens_per_sample = d.tokens_per_sample;
    }
    res->peak_bytes = em_memory_get_stats(EM_CPU).peak_bytes;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->wall_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    recipe_data_free(&d);
    return st;
}
