/* The grad scaler: a planted inf skips exactly that step and halves the scale, the scale grows
 * after growth_interval clean steps, misuse is an error, an f16 run whose gradients underflow
 * without scaling trains with it, and its state goes through a training checkpoint. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

typedef struct {
    em_module *model;
    em_optim *optim;
} net;

static net make_net(void)
{
    em_manual_seed(3);
    net n = {.model = em_linear_layer(4, 3, true)};
    n.optim = em_sgd(n.model, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    cr_assert(n.model && n.optim, "%s", em_error());
    return n;
}

static void free_net(net n)
{
    em_optim_free(n.optim);
    em_module_free(n.model);
}

/* All parameters' f32 values, concatenated into out (at most 64). */
static int snapshot(em_module *m, float *out)
{
    em_param_ref refs[4];
    int n = em_module_parameters(m, refs, 4), k = 0;
    for (int i = 0; i < n; i++) {
        em_copy_to_host(refs[i].value, EM_F32, out + k);
        k += (int)em_numel(refs[i].value);
    }
    return k;
}

/* Backward of the mean squared error of the net on (x, y), times loss_factor; returns the loss. */
static double backward(net n, const em_tensor *x, const em_tensor *y, em_grad_scaler *s)
{
    em_tensor *loss = em_mse_loss(em_forward(n.model, x), y, EM_REDUCTION_MEAN);
    em_tensor *scaled = s ? em_grad_scaler_scale(s, loss) : loss;
    cr_assert(scaled && em_backward(scaled) == EM_OK, "%s", em_error());
    return em_item(loss);
}

Test(grad_scaler, planted_inf_skips_that_step_and_halves_the_scale)
{
    net a = make_net(), b = make_net(); /* a with the scaler, b plain, skipping step 3 itself */
    em_grad_scaler *s = em_grad_scaler_new((em_grad_scaler_opts){0});
    cr_assert_not_null(s);
    cr_assert_eq(em_grad_scaler_get_scale(s), 65536.0);
    em_generator gen = em_generator_new(11);
    float pa[64], pb[64], before[64];
    for (int step = 1; step <= 6; step++) {
        em_scope_begin();
        em_tensor *x = em_randn(EM_SHAPE(8, 4), EM_F32, &gen);
        em_tensor *y = em_randn(EM_SHAPE(8, 3), EM_F32, &gen);
        backward(a, x, y, s);
        if (step == 3) /* an inf in one gradient element */
            ((float *)em_data_ptr(em_module_find(a.model, "weight")->grad))[5] = INFINITY;
        int n = snapshot(a.model, before);
        bool stepped;
        cr_assert_eq(em_grad_scaler_step(s, a.optim, &stepped), EM_OK, "%s", em_error());
        cr_assert_eq(stepped, step != 3);
        cr_assert_eq(em_grad_scaler_found_inf(s), step == 3);
        cr_assert_eq(em_grad_scaler_update(s), EM_OK, "%s", em_error());
        em_optim_zero_grad(a.optim);
        if (step != 3) {
            backward(b, x, y, NULL);
            cr_assert_eq(em_optim_step(b.optim), EM_OK);
            em_optim_zero_grad(b.optim);
        }
        snapshot(a.model, pa);
        snapshot(b.model, pb);
        if (step == 3)
            cr_assert(!memcmp(pa, before, (size_t)n * sizeof *pa), "the skipped step changed "
                      "the parameters");
        /* a power-of-two scale and its inverse are exact: the scaled run is the plain one */
        cr_assert(!memcmp(pa, pb, (size_t)n * sizeof *pa), "step %d differs from the unscaled "
                  "run", step);
        cr_assert_eq(em_grad_scaler_get_scale(s), step < 3 ? 65536.0 : 32768.0);
        cr_assert_eq(em_grad_scaler_growth_tracker(s), step < 3 ? step : step - 3);
        em_scope_end();
    }
    cr_assert_eq(em_grad_scaler_skipped_steps(s), 1);
    em_grad_scaler_free(s);
    free_net(a);
    free_net(b);
}

/* One step whose grads get a NaN when bad; returns whether it stepped. */
static bool one_step(net n, em_grad_scaler *s, bool bad)
{
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(2, 4), EM_F32), *y = em_zeros(EM_SHAPE(2, 3), EM_F32);
    backward(n, x, y, s);
    if (bad)
        ((float *)em_data_ptr(em_module_find(n.model, "bias")->grad))[0] = NAN;
    bool stepped;
    cr_assert_eq(em_grad_scaler_step(s, n.optim, &stepped), EM_OK, "%s", em_error());
    cr_assert_eq(em_grad_scaler_update(s), EM_OK, "%s", em_error());
    em_optim_zero_grad(n.optim);
    em_scope_end();
    return stepped;
}

Test(grad_scaler, grows_after_growth_interval_clean_steps)
{
    net n = make_net();
    em_grad_scaler *s = em_grad_scaler_new((em_grad_scaler_opts){.init_scale = 1024, .growth_interval = 3});
    double want[] = {1024, 1024, 2048, 2048, 2048, 1024, 1024, 1024, 2048, 2048};
    int64_t tracker[] = {1, 2, 0, 1, 2, 0, 1, 2, 0, 1};
    for (int i = 0; i < 10; i++) {
        bool bad = i == 5;
        cr_assert_eq(one_step(n, s, bad), !bad);
        cr_assert_eq(em_grad_scaler_get_scale(s), want[i], "step %d: scale %g", i + 1,
                     em_grad_scaler_get_scale(s));
        cr_assert_eq(em_grad_scaler_growth_tracker(s), tracker[i], "step %d", i + 1);
    }
    em_grad_scaler_free(s);

    /* growth that would overflow f32 keeps the scale */
    s = em_grad_scaler_new((em_grad_scaler_opts){.init_scale = 0x1p120, .growth_factor = 1024,
                                       .growth_interval = 1});
    cr_assert(one_step(n, s, false));
    cr_assert_eq(em_grad_scaler_get_scale(s), 0x1p120);
    cr_assert_eq(em_grad_scaler_growth_tracker(s), 0);
    em_grad_scaler_free(s);
    free_net(n);
}

Test(grad_scaler, misuse_is_a_state_error)
{
    net n = make_net();
    em_grad_scaler *s = em_grad_scaler_new((em_grad_scaler_opts){0});
    em_error_clear();
    cr_assert_eq(em_grad_scaler_update(s), EM_ERR_STATE);
    cr_assert(strstr(em_error(), "no inf checks were recorded") != NULL, "%s", em_error());
    em_error_clear();
    em_scope_begin();
    backward(n, em_ones(EM_SHAPE(2, 4), EM_F32), em_zeros(EM_SHAPE(2, 3), EM_F32), s);
    cr_assert_eq(em_grad_scaler_unscale(s, n.optim), EM_OK);
    cr_assert_eq(em_grad_scaler_unscale(s, n.optim), EM_ERR_STATE);
    em_error_clear();
    cr_assert_eq(em_grad_scaler_step(s, n.optim, NULL), EM_OK);
    cr_assert_eq(em_grad_scaler_step(s, n.optim, NULL), EM_ERR_STATE);
    em_error_clear();
    cr_assert_eq(em_grad_scaler_unscale(s, n.optim), EM_ERR_STATE);
    em_error_clear();
    cr_assert_eq(em_grad_scaler_update(s), EM_OK);
    em_scope_end();
    cr_assert_eq(em_grad_scaler_state(s, NULL, 0), 2);
    cr_assert_eq(em_grad_scaler_state(s, NULL, 2), -1);
    cr_assert_str_eq(em_error(), "em_grad_scaler_state: out is NULL with max 2");
    em_error_clear();
    em_grad_scaler_free(s);
    cr_assert_null(em_grad_scaler_new((em_grad_scaler_opts){.growth_factor = 0.5}));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_assert_null(em_grad_scaler_new((em_grad_scaler_opts){.backoff_factor = 1.5}));
    em_error_clear();

    /* disabled: a pass-through */
    s = em_grad_scaler_new((em_grad_scaler_opts){.disabled = true});
    cr_assert_eq(em_grad_scaler_get_scale(s), 1.0);
    bool stepped = false;
    em_scope_begin();
    backward(n, em_ones(EM_SHAPE(2, 4), EM_F32), em_zeros(EM_SHAPE(2, 3), EM_F32), s);
    cr_assert_eq(em_grad_scaler_step(s, n.optim, &stepped), EM_OK);
    cr_assert(stepped);
    cr_assert_eq(em_grad_scaler_update(s), EM_OK);
    em_scope_end();
    em_grad_scaler_free(s);
    free_net(n);
}

/* The f16 problem: w (8) f32 master weights; forward y = f16(w) * x16 in f16, the loss in f32:
 * loss = 1e-9 * sum((y - t)^2), so d loss / d y = 2e-9 (y - t), at most 5e-9 here, which f16
 * (smallest subnormal 6e-8) flushes to zero on the way back through the f16 cast. */
#define N 8
static const float X[N] = {0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 0.625f, 0.875f, 1.125f};
static const float T[N] = {1.0f, -0.5f, 2.0f, 0.25f, -1.0f, 1.5f, 0.0f, 0.75f};

/* One SGD step (lr 3e8) of the f16 problem; the scaler may be NULL. Returns the f32 loss. */
static double f16_step(em_tensor *w, em_optim *o, em_grad_scaler *s, em_tensor *x16,
                       em_tensor *t)
{
    em_scope_begin();
    em_tensor *y = em_to_dtype(em_mul(em_to_dtype(w, EM_F16), x16), EM_F32); // (8)
    em_tensor *loss = em_mul_scalar(em_sum_all(em_square(em_sub(y, t))), 1e-9);
    em_tensor *scaled = s ? em_grad_scaler_scale(s, loss) : loss;
    cr_assert(scaled && em_backward(scaled) == EM_OK, "%s", em_error());
    cr_assert_eq(w->grad->dtype, EM_F32);
    if (s) {
        bool stepped;
        cr_assert_eq(em_grad_scaler_step(s, o, &stepped), EM_OK, "%s", em_error());
        cr_assert(stepped);
        cr_assert_eq(em_grad_scaler_update(s), EM_OK);
    } else {
        cr_assert_eq(em_optim_step(o), EM_OK, "%s", em_error());
    }
    double value = em_item(loss);
    em_optim_zero_grad(o);
    em_scope_end();
    return value;
}

Test(grad_scaler, f16_gradients_that_underflow_train_with_scaling)
{
    em_tensor *x32 = em_from_data(EM_SHAPE(N), EM_F32, X);
    em_tensor *x16 = em_to_dtype(x32, EM_F16);
    em_release(x32);
    em_tensor *t = em_from_data(EM_SHAPE(N), EM_F32, T);
    for (int scaled = 0; scaled < 2; scaled++) {
        em_tensor *w = em_requires_grad_(em_ones(EM_SHAPE(N), EM_F32), true);
        em_optim *o = em_sgd(NULL, (em_sgd_opts){.lr = 3e8});
        cr_assert_geq(em_optim_add_group(o, &w, 1, (em_group_opts){0}), 0);
        em_grad_scaler *s = scaled ? em_grad_scaler_new((em_grad_scaler_opts){0}) : NULL;
        double first = f16_step(w, o, s, x16, t), last = first;
        float w1[N];
        em_copy_to_host(w, EM_F32, w1);
        for (int i = 0; i < N; i++) {
            /* the f32 update of step 1: w -= lr * 2e-9 * (w * x - t) * x, from w = 1 */
            double want = 1.0 - 3e8 * 2e-9 * (X[i] - T[i]) * X[i];
            if (scaled) /* within f16's rounding of the two grads on the way */
                cr_assert(fabs(w1[i] - want) <= 4e-3 * fmax(1.0, fabs(want)),
                          "w[%d] = %g, want %g", i, w1[i], want);
            else
                cr_assert_eq(w1[i], 1.0f, "without scaling the f16 grads are zero: w[%d] = %g",
                             i, w1[i]);
        }
        for (int step = 0; step < 40; step++)
            last = f16_step(w, o, s, x16, t);
        if (scaled) {
            cr_assert_lt(last, first * 0.01, "loss %g -> %g", first, last);
            cr_assert_eq(em_grad_scaler_get_scale(s), 65536.0);
            cr_assert_eq(em_grad_scaler_skipped_steps(s), 0);
        } else {
            cr_assert_eq(last, first, "nothing trains: %g -> %g", first, last);
        }
        em_grad_scaler_free(s);
        em_optim_free(o);
        em_release(w);
    }
    em_release(x16);
    em_release(t);
}

Test(grad_scaler, unscale_before_clipping_divides_once)
{
    net a = make_net(), b = make_net();
    em_grad_scaler *s = em_grad_scaler_new((em_grad_scaler_opts){.init_scale = 256});
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(2, 4), EM_F32), *y = em_zeros(EM_SHAPE(2, 3), EM_F32);
    backward(a, x, y, s);
    backward(b, x, y, NULL);
    cr_assert_eq(em_grad_scaler_unscale(s, a.optim), EM_OK);
    double na = em_clip_grad_norm_module(a.model, 0.1, 2.0, true);
    double nb = em_clip_grad_norm_module(b.model, 0.1, 2.0, true);
    cr_assert_eq(na, nb); /* the true grads' norm */
    cr_assert_eq(em_grad_scaler_step(s, a.optim, NULL), EM_OK);
    cr_assert_eq(em_optim_step(b.optim), EM_OK);
    cr_assert_eq(em_grad_scaler_update(s), EM_OK);
    float pa[64], pb[64];
    int n = snapshot(a.model, pa);
    snapshot(b.model, pb);
    cr_assert(!memcmp(pa, pb, (size_t)n * sizeof *pa));
    em_scope_end();
    em_grad_scaler_free(s);
    free_net(a);
    free_net(b);
}

Test(grad_scaler, state_goes_through_a_training_checkpoint)
{
    char path[] = "/tmp/ember_scaler_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    net n = make_net();
    em_grad_scaler *s = em_grad_scaler_new((em_grad_scaler_opts){.growth_interval = 100});
    for (int i = 0; i < 7; i++)
        one_step(n, s, i == 2); /* one backoff, then 4 clean steps */
    cr_assert_eq(em_grad_scaler_get_scale(s), 32768.0);
    cr_assert_eq(em_grad_scaler_growth_tracker(s), 4);
    em_train_state st = {.model = n.model, .optim = n.optim, .scaler = s};
    cr_assert_eq(em_train_checkpoint_save(path, &st, NULL, 0), EM_OK, "%s", em_error());

    em_grad_scaler *fresh = em_grad_scaler_new((em_grad_scaler_opts){.growth_interval = 100});
    em_train_state back = {.model = n.model, .optim = n.optim, .scaler = fresh};
    cr_assert_eq(em_train_checkpoint_load(path, &back), EM_OK, "%s", em_error());
    cr_assert_eq(em_grad_scaler_get_scale(fresh), 32768.0);
    cr_assert_eq(em_grad_scaler_growth_tracker(fresh), 4);
    /* without a scaler the same file loads, and a file without scaler state leaves one alone */
    em_train_state plain = {.model = n.model, .optim = n.optim};
    cr_assert_eq(em_train_checkpoint_load(path, &plain), EM_OK, "%s", em_error());
    cr_assert_eq(em_train_checkpoint_save(path, &plain, NULL, 0), EM_OK, "%s", em_error());
    em_grad_scaler *other = em_grad_scaler_new((em_grad_scaler_opts){.init_scale = 8});
    em_train_state with = {.model = n.model, .optim = n.optim, .scaler = other};
    cr_assert_eq(em_train_checkpoint_load(path, &with), EM_OK, "%s", em_error());
    cr_assert_eq(em_grad_scaler_get_scale(other), 8.0);
    em_grad_scaler_free(other);
    em_grad_scaler_free(fresh);
    em_grad_scaler_free(s);
    free_net(n);
    unlink(path);
}

/* A growth tracker from a file is a count that can still be incremented: INT64_MAX (a damaged
 * checkpoint) is refused and the scaler left as it was, where the update would overflow. */
Test(grad_scaler, a_growth_tracker_past_2_53_is_refused)
{
    em_grad_scaler *s = em_grad_scaler_new((em_grad_scaler_opts){.growth_interval = 100});
    em_tensor *scale = em_scalar(1024, EM_F32);
    em_tensor *tracker = em_full(EM_SCALAR_SHAPE, EM_I64, 0);
    *(int64_t *)em_data_ptr(tracker) = INT64_MAX;
    em_param_ref in[2] = {{"scale", scale}, {"growth_tracker", tracker}};
    cr_assert_eq(em_grad_scaler_load_state(s, in, 2), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "em_grad_scaler_load_state: 'growth_tracker' is 9.22337e+18; a step "
                                 "count is a whole number in [0, 2^53]"), "%s", em_error());
    em_error_clear();
    cr_expect_eq(em_grad_scaler_get_scale(s), 65536.0);
    cr_expect_eq(em_grad_scaler_growth_tracker(s), 0);
    *(int64_t *)em_data_ptr(tracker) = 7;
    cr_assert_eq(em_grad_scaler_load_state(s, in, 2), EM_OK, "%s", em_error());
    cr_expect_eq(em_grad_scaler_growth_tracker(s), 7);
    em_release(scale);
    em_release(tracker);
    em_grad_scaler_free(s);
}
