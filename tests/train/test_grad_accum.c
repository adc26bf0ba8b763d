/* Gradient accumulation: N micro-batches, each loss scaled by 1/N, per optimizer step match one
 * N-times-larger batch within float tolerance (an MLP, SGD with momentum, several steps), with
 * and without the grad scaler. */
#include <criterion/criterion.h>
#include <math.h>

#include "ember.h"

#define BATCH 32
#define MICRO 4
#define STEPS 5

static em_module *make_mlp(void)
{
    em_manual_seed(5);
    em_module *m = em_sequential(3, em_linear_layer(6, 16, true), em_relu_layer(),
                                 em_linear_layer(16, 4, true));
    cr_assert_not_null(m, "%s", em_error());
    return m;
}

static em_tensor *ce(em_module *m, const em_tensor *x, const em_tensor *y)
{
    return em_cross_entropy(em_forward(m, x), y, (em_cross_entropy_opts){0});
}

/* Trains two copies of the MLP for STEPS steps on the same batches: one whole batch per step,
 * and MICRO micro-batches per step (through a scaler when scaled); checks the parameters agree. */
static void compare(bool scaled)
{
    em_module *whole = make_mlp(), *accum = make_mlp();
    em_optim *ow = em_sgd(whole, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    em_optim *oa = em_sgd(accum, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    em_grad_scaler *s = scaled ? em_grad_scaler_new((em_grad_scaler_opts){0}) : NULL;
    em_generator gen = em_generator_new(9);
    const int64_t mb = BATCH / MICRO;
    for (int step = 0; step < STEPS; step++) {
        em_scope_begin();
        em_tensor *x = em_randn(EM_SHAPE(BATCH, 6), EM_F32, &gen);          // (32, 6)
        em_tensor *y = em_randint(EM_SHAPE(BATCH), EM_I64, 0, 4, &gen);     // (32)
        cr_assert_eq(em_backward(ce(whole, x, y)), EM_OK, "%s", em_error());
        cr_assert_eq(em_optim_step(ow), EM_OK);
        em_optim_zero_grad(ow);
        for (int k = 0; k < MICRO; k++) {
            em_tensor *loss = em_mul_scalar(ce(accum, em_narrow(x, 0, k * mb, mb),
                                               em_narrow(y, 0, k * mb, mb)), 1.0 / MICRO);
            if (s)
                loss = em_grad_scaler_scale(s, loss);
            cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        }
        if (s) {
            bool stepped;
            cr_assert_eq(em_grad_scaler_step(s, oa, &stepped), EM_OK, "%s", em_error());
            cr_assert(stepped);
            cr_assert_eq(em_grad_scaler_update(s), EM_OK);
        } else {
            cr_assert_eq(em_optim_step(oa), EM_OK);
        }
        em_optim_zero_grad(oa);
        em_scope_end();
    }
    em_module *init = make_mlp();
    em_param_ref pw[4], pa[4], p0[4];
    cr_assert_eq(em_module_parameters(whole, pw, 4), 4);
    em_module_parameters(accum, pa, 4);
    em_module_parameters(init, p0, 4);
    double moved = 0;
    for (int i = 0; i < 4; i++) {
        int64_t n = em_numel(pw[i].value);
        float a[96], b[96], c[96];
        cr_assert_leq(n, 96);
        em_copy_to_host(pw[i].value, EM_F32, a);
        em_copy_to_host(pa[i].value, EM_F32, b);
        em_copy_to_host(p0[i].value, EM_F32, c);
        for (int64_t j = 0; j < n; j++) {
            double d = fabs((double)a[j] - b[j]) / fmax(1.0, fabs(a[j]));
            moved = fmax(moved, fabs((double)a[j] - c[j]));
            cr_assert(d <= 1e-5, "%s[%ld]: whole batch %.9g, accumulated %.9g", pw[i].name,
                      (long)j, a[j], b[j]);
        }
    }
    cr_assert_gt(moved, 1e-2, "the parameters trained: they moved at most %g", moved);
    em_module_free(init);
    em_grad_scaler_free(s);
    em_optim_free(ow);
    em_optim_free(oa);
    em_module_free(whole);
    em_module_free(accum);
}

Test(grad_accum, micro_batches_match_one_large_batch)
{
    compare(false);
}

Test(grad_accum, micro_batches_match_one_large_batch_with_the_scaler)
{
    compare(true);
}
