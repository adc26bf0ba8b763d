/* The learning-rate range test: Lightning's suggestion on a known curve (torch.gradient's
 * values), the sweep's learning rates, smoothing and stop on divergence over a regression, and
 * the run put back as it was: training after the test ends bit for bit where it ends without. */
#include <criterion/criterion.h>
#include <math.h>

#include "ember.h"

TestSuite(lr_finder, .init = em_scope_begin, .fini = em_scope_end);

/* losses 2.0 .. 9.0 below; torch.gradient(torch.tensor(losses[10:-1]))[0] (PyTorch 2.15) is
 * [-0.2, -0.25, -0.25, -0.15, -0.075, -0.03, 0.025, 0.23, 1.1, 1.8]: its first minimum at 1, so
 * Lightning suggests the lr of update 11 */
Test(lr_finder, suggestion_is_lightnings)
{
    const double losses[21] = {2.0, 1.99, 1.98, 1.97, 1.96, 1.95, 1.94, 1.9, 1.8, 1.7, 1.6,
                               1.4, 1.1, 0.9, 0.8, 0.75, 0.74, 0.8, 1.2, 3.0, 9.0};
    double lr[21];
    for (int i = 0; i < 21; i++)
        lr[i] = 1e-6 * pow(10, i / 4.0);
    cr_expect_eq(em_lr_suggestion(lr, losses, 21), lr[11]);
    cr_expect(isnan(em_lr_suggestion(lr, losses, 12)), "one loss left after skipping");
    double with_nan[21];
    for (int i = 0; i < 21; i++)
        with_nan[i] = i == 12 ? NAN : losses[i];
    /* without update 12: [1.6, 1.4, 0.9, ...], gradients -0.2, -0.35, ...: update 11 still */
    cr_expect_eq(em_lr_suggestion(lr, with_nan, 21), lr[11]);
    cr_expect(isnan(em_lr_suggestion(lr, NULL, 21)));
    cr_expect_str_eq(em_error(), "em_lr_suggestion: smoothed is NULL with n 21");
    em_error_clear();
    cr_expect(isnan(em_lr_suggestion(NULL, losses, 21)));
    cr_expect_str_eq(em_error(), "em_lr_suggestion: lr is NULL with n 21");
    em_error_clear();
}

typedef struct {
    em_dataset *ds;
    em_module *model;
    em_optim *optim;
    em_loader *loader;
    em_trainer *trainer;
} run;

static em_tensor *mse(void *ctx, const em_tensor *out, const em_tensor *y)
{
    (void)ctx;
    return em_mse_loss(out, y, EM_REDUCTION_MEAN);
}

/* y = x . (1, -2, 0.5, 3) + 0.1 noise, a Linear(4, 1) from seed 2, SGD with momentum */
static run start(void)
{
    em_generator g = em_generator_new(11);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(128, 4), EM_F32, &g);
    em_tensor *w = em_from_data(EM_SHAPE(4, 1), EM_F32, (float[]){1, -2, 0.5f, 3});
    em_tensor *y = em_add(em_matmul(x, w), em_mul_scalar(em_randn(EM_SHAPE(128, 1), EM_F32, &g),
                                                         0.1));
    run r = {.ds = em_tensor_dataset(x, y)};
    em_scope_end();
    em_manual_seed(2);
    r.model = em_linear_layer(4, 1, true);
    r.optim = em_sgd(r.model, (em_sgd_opts){.lr = 0.05, .momentum = 0.9});
    r.loader = em_loader_new(r.ds, (em_loader_opts){.batch_size = 16, .shuffle = true, .seed = 3});
    r.trainer = em_trainer_new(r.model, r.optim, r.loader, (em_trainer_opts){.loss = mse});
    cr_assert(r.ds && r.model && r.optim && r.loader && r.trainer, "%s", em_error());
    return r;
}

static void finish(run *r)
{
    em_trainer_free(r->trainer);
    em_loader_free(r->loader);
    em_optim_free(r->optim);
    em_module_free(r->model);
    em_dataset_free(r->ds);
}

Test(lr_finder, sweeps_smooths_stops_and_puts_the_run_back)
{
    run plain = start();
    cr_assert_eq(em_trainer_fit(plain.trainer, 2), EM_OK, "%s", em_error());

    run r = start();
    em_lr_find_result res;
    em_lr_find_opts o = {.start_lr = 1e-4, .end_lr = 10, .num_iter = 60};
    cr_assert_eq(em_lr_find(r.trainer, o, &res), EM_OK, "%s", em_error());
    cr_assert(res.n > 20 && res.n < 60, "%d updates: the loss diverges before lr 10", res.n);
    double avg = 0, best = INFINITY;
    for (int i = 0; i < res.n; i++) {
        cr_expect_eq(res.lr[i], 1e-4 * pow(1e5, i / 60.0), "lr %d", i);
        avg = 0.98 * avg + (1 - 0.98) * res.loss[i];
        cr_expect_eq(res.smoothed[i], avg / (1 - pow(0.98, i + 1)), "smoothed %d", i);
        if (i < res.n - 1) {
            cr_expect_leq(res.smoothed[i], 4 * best, "no stop before the last");
            best = fmin(best, res.smoothed[i]);
        }
    }
    cr_expect_gt(res.smoothed[res.n - 1], 4 * best, "it stopped where the loss diverged");
    cr_expect_eq(res.suggestion, em_lr_suggestion(res.lr, res.smoothed, res.n));
    cr_expect(res.suggestion > 1e-3 && res.suggestion < 1, "suggestion %g", res.suggestion);
    cr_expect_eq(em_optim_get_lr(r.optim, 0), 0.05, "the optimizer's lr is back");
    cr_expect_eq(em_trainer_get_stats(r.trainer).steps, 0);
    em_lr_find_result_free(&res);
    cr_assert_eq(em_trainer_fit(r.trainer, 2), EM_OK, "%s", em_error());
    cr_expect_eq(em_module_hash(r.model), em_module_hash(plain.model),
                 "training after the test ends where it ends without");
    cr_expect_eq(em_trainer_get_stats(r.trainer).steps, em_trainer_get_stats(plain.trainer).steps);

    cr_expect_eq(em_lr_find(r.trainer, (em_lr_find_opts){.start_lr = 1, .end_lr = 0.5}, &res),
                 EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_lr_find: needs a trainer with a loader, 0 < start_lr (1) < "
                                 "end_lr (0.5), num_iter (100) >= 1 and beta (0.98) in (0, 1)");
    em_error_clear();
    em_lr_find_result_free(&res);
    finish(&r);
    finish(&plain);
}
