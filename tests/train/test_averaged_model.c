/* Averaged weights (EMA and SWA, PyTorch's AveragedModel): three updates against PyTorch 2.15's
 * values, buffers copied or averaged; swapping the averaged weights into the model for eval and
 * back; the trainer updating it after each optimizer step and keeping it in its checkpoints, a
 * resumed run ending with the same averaged weights, bit for bit, as one never stopped. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/reference.h"

TestSuite(averaged_model, .init = em_scope_begin, .fini = em_scope_end);

/* Reference: PyTorch 2.15 in f64, model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)),
 * avg = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9)) (ema), AveragedModel(model)
 * (swa), or the ema with use_buffers=True; for step in 0, 1, 2: parameter k, element i set to
 * 0.3 sin(0.7 i + 1.3 k + 0.1 + step), model(x) in training mode on x (4, 3), element i =
 * cos(0.45 i + step) (moving the running statistics), avg.update_parameters(model). The values:
 * the averaged module's parameters then buffers, flattened (num_batches_tracked last). */
static const double want_ema[17] = {
    0.0742183999663042, 0.21066106062697243, 0.24802653280490347, 0.16874125108320817,
    0.010094322322300474, -0.15330012395492232, 0.25003555720127196, 0.18633424064944284,
    0.059550037365368305, -0.11097267841421651, -0.21817642672169907, -0.2457043636197148,
    0.014060470067484065, 0.006947523781876991, 0.7691047488415103, 0.7841915057172429, 3};
static const double want_swa[17] = {
    0.18542501433571373, 0.2026191871933623, 0.12451839030183913, -0.012145351202157706,
    -0.14309694425943237, -0.20674780848006383, 0.14053718085127792, 0.008651291801775401,
    -0.11023795182387643, -0.19799076634723342, -0.19951422681699924, -0.11457588795451401,
    0.014060470067484065, 0.006947523781876991, 0.7691047488415103, 0.7841915057172429, 3};
/* use_buffers: the running statistics averaged too. PyTorch's EMA of the integer
 * num_batches_tracked truncates (it gives 1); ember copies integer buffers (3), so the test
 * reads the float ones only */
static const double want_ema_buffers[16] = {
    0.0742183999663042, 0.21066106062697243, 0.24802653280490347, 0.16874125108320817,
    0.010094322322300474, -0.15330012395492232, 0.25003555720127196, 0.18633424064944284,
    0.059550037365368305, -0.11097267841421651, -0.21817642672169907, -0.2457043636197148,
    0.021312450388828622, 0.02402703630742594, 0.894594074781453, 0.8856052166789942};

static em_module *small_model(void)
{
    em_module *m = em_sequential(2, em_linear_layer(3, 2, true),
                                 em_batch_norm1d_layer(2, (em_batch_norm_opts){0}));
    cr_assert_not_null(m, "%s", em_error());
    cr_assert_eq(em_module_to_dtype(m, EM_F64), EM_OK, "%s", em_error());
    return m;
}

/* The reference's three steps, then the averaged copy's tensors against want (n values) */
static void check_average(em_average_opts o, const double *want, int n)
{
    em_module *model = small_model();
    em_averaged_model *a = em_averaged_model_new(model, o);
    cr_assert_not_null(a, "%s", em_error());
    cr_expect_eq(em_averaged_model_count(a), 0);
    for (int step = 0; step < 3; step++) {
        em_param_ref ps[4];
        em_module_parameters(model, ps, 4);
        for (int k = 0; k < 4; k++)
            em_copy_(ps[k].value, em_ref_wave(em_shape_of(ps[k].value), 0.7,
                                               1.3 * k + 0.1 + step, 0.3));
        cr_assert_not_null(em_forward(model, em_ref_wave(EM_SHAPE(4, 3), 0.45, M_PI / 2 + step,
                                                         1)), "%s", em_error());
        cr_assert_eq(em_averaged_model_update(a, model), EM_OK, "%s", em_error());
    }
    cr_expect_eq(em_averaged_model_count(a), 3);
    em_param_ref all[7];
    em_module *avg = em_averaged_model_module(a);
    int np = em_module_parameters(avg, all, 4);
    em_module_buffers(avg, all + np, 3);
    int at = 0;
    for (int k = 0; k < 7 && at < n; k++) {
        double v[6];
        em_copy_to_host(all[k].value, EM_F64, v);
        for (int i = 0; i < em_numel(all[k].value) && at < n; i++, at++)
            cr_expect(fabs(v[i] - want[at]) <= 1e-15, "%s[%d]: %.17g, PyTorch %.17g",
                      all[k].name, i, v[i], want[at]);
    }
    cr_expect_eq(at, n);
    em_averaged_model_free(a);
    em_module_free(model);
}

Test(averaged_model, ema_swa_and_buffers_match_pytorch)
{
    check_average((em_average_opts){.decay = 0.9}, want_ema, 17);
    check_average((em_average_opts){0}, want_swa, 17);
    check_average((em_average_opts){.decay = 0.9, .use_buffers = true}, want_ema_buffers, 16);
}

/* swap: the model runs with the averaged weights, its own come back on the second swap; the
 * tensors the caller holds stay the model's */
Test(averaged_model, swap_in_for_eval_and_back)
{
    em_module *model = small_model();
    em_averaged_model *a = em_averaged_model_new(model, (em_average_opts){.decay = 0.5});
    cr_assert_eq(em_averaged_model_update(a, model), EM_OK, "%s", em_error());
    em_tensor *w = em_module_find(model, "0.weight");
    double first = em_get(w, (int64_t[]){0, 0});
    cr_assert_eq(em_fill_(w, 2.0), EM_OK);
    cr_assert_eq(em_averaged_model_update(a, model), EM_OK, "%s", em_error());
    uint64_t own = em_module_hash(model), averaged = em_module_hash(em_averaged_model_module(a));
    cr_assert_eq(em_averaged_model_swap(a, model), EM_OK, "%s", em_error());
    cr_expect(w == em_module_find(model, "0.weight"));
    cr_expect_eq(em_module_hash(model), averaged);
    cr_expect_eq(em_get(w, (int64_t[]){0, 0}), (first + 2.0) / 2, "halfway with decay 0.5");
    cr_assert_eq(em_averaged_model_swap(a, model), EM_OK, "%s", em_error());
    cr_expect_eq(em_module_hash(model), own);
    cr_expect_eq(em_module_hash(em_averaged_model_module(a)), averaged);
    em_module *other = em_linear_layer(3, 2, true);
    cr_expect_eq(em_averaged_model_update(a, other), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_averaged_model_update: the model has 2 parameters, the "
                                 "averaged copy 4");
    em_error_clear();
    cr_expect_null(em_averaged_model_new(model, (em_average_opts){.decay = 1}));
    em_error_clear();
    em_module_free(other);
    em_averaged_model_free(a);
    em_module_free(model);
}

/* ---- in the trainer: updated after each optimizer step, kept in its checkpoints ---- */
typedef struct {
    em_dataset *ds;
    em_module *model;
    em_optim *optim;
    em_loader *loader;
    em_averaged_model *ema;
    em_trainer *trainer;
} run;

static run start(void)
{
    em_generator g = em_generator_new(7);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(64, 6), EM_F32, &g);
    em_tensor *y = em_randint(EM_SHAPE(64), EM_I64, 0, 3, &g);
    run r = {.ds = em_tensor_dataset(x, y)};
    em_scope_end();
    em_manual_seed(4);
    r.model = em_sequential(3, em_linear_layer(6, 8, true), em_relu_layer(),
                            em_linear_layer(8, 3, true));
    r.optim = em_sgd(r.model, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    r.loader = em_loader_new(r.ds, (em_loader_opts){.batch_size = 8, .shuffle = true, .seed = 5});
    r.ema = em_averaged_model_new(r.model, (em_average_opts){.decay = 0.8});
    r.trainer = em_trainer_new(r.model, r.optim, r.loader, (em_trainer_opts){.average = r.ema});
    cr_assert(r.ds && r.model && r.optim && r.loader && r.ema && r.trainer, "%s", em_error());
    return r;
}

static void finish(run *r)
{
    em_trainer_free(r->trainer);
    em_averaged_model_free(r->ema);
    em_loader_free(r->loader);
    em_optim_free(r->optim);
    em_module_free(r->model);
    em_dataset_free(r->ds);
}

Test(averaged_model, the_trainer_updates_it_and_a_resumed_run_matches)
{
    run whole = start();
    cr_assert_eq(em_trainer_fit(whole.trainer, 2), EM_OK, "%s", em_error());
    cr_expect_eq(em_averaged_model_count(whole.ema), 16, "one update per optimizer step");
    cr_expect_neq(em_module_hash(em_averaged_model_module(whole.ema)),
                  em_module_hash(whole.model));

    char path[] = "/tmp/ember_ema_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    run first = start();
    em_trainer_free(first.trainer);
    first.trainer = em_trainer_new(first.model, first.optim, first.loader, (em_trainer_opts){
        .average = first.ema, .max_steps = 11});
    cr_assert_eq(em_trainer_fit(first.trainer, 2), EM_OK, "%s", em_error());
    cr_assert_eq(em_trainer_save(first.trainer, path), EM_OK, "%s", em_error());
    em_module *alone = em_model_load(path); /* the checkpoint is a whole-model file too */
    cr_assert_not_null(alone, "%s", em_error());
    cr_expect_eq(em_module_hash(alone), em_module_hash(first.model),
                 "the model alone, its average's tensors passed by");
    em_module_free(alone);
    finish(&first);
    run resumed = start();
    cr_assert_eq(em_trainer_resume(resumed.trainer, path), EM_OK, "%s", em_error());
    cr_expect_eq(em_averaged_model_count(resumed.ema), 11);
    cr_assert_eq(em_trainer_fit(resumed.trainer, 2), EM_OK, "%s", em_error());
    cr_expect_eq(em_averaged_model_count(resumed.ema), 16);
    cr_expect_eq(em_module_hash(em_averaged_model_module(resumed.ema)),
                 em_module_hash(em_averaged_model_module(whole.ema)),
                 "the averaged weights came back with the run");
    cr_expect_eq(em_module_hash(resumed.model), em_module_hash(whole.model));
    unlink(path);
    finish(&resumed);
    finish(&whole);
}
