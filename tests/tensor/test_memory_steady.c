/* A training loop runs at constant memory: 1,000 steps of forward + backward + update of a small
 * MLP inside a scope leave the same live bytes after step 1,000 as after step 10. */
#include <criterion/criterion.h>

#include "ember.h"

/* p -= lr * p->grad, straight on the f32 data (the optimizers live above autograd) */
static void sgd_update(em_tensor *p, float lr)
{
    float *w = em_data_ptr(p);
    const float *g = em_data_ptr(p->grad);
    for (int64_t i = 0; i < em_numel(p); i++)
        w[i] -= lr * g[i];
    em_zero_grad(p);
}

Test(memory_steady, mlp_training_loop_constant_live_bytes)
{
    em_generator gen = em_generator_new(42);
    em_tensor *x = em_randn(EM_SHAPE(16, 8), EM_F32, &gen);
    em_tensor *params[4] = {
        em_requires_grad_(em_uniform(EM_SHAPE(16, 8), EM_F32, -0.3, 0.3, &gen), true),
        em_requires_grad_(em_zeros(EM_SHAPE(16), EM_F32), true),
        em_requires_grad_(em_uniform(EM_SHAPE(4, 16), EM_F32, -0.3, 0.3, &gen), true),
        em_requires_grad_(em_zeros(EM_SHAPE(4), EM_F32), true),
    };
    size_t live_at_10 = 0;
    double first_loss = 0, loss_value = 0;
    for (int step = 1; step <= 1000; step++) {
        em_scope_begin();
        em_tensor *h = em_relu(em_linear(x, params[0], params[1]));
        em_tensor *logp = em_log_softmax(em_linear(h, params[2], params[3]), -1);
        em_tensor *loss = em_neg(em_mean_all(em_select(logp, 1, 0))); /* class 0 for every row */
        cr_assert_not_null(loss, "%s", em_error());
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        loss_value = em_item(loss);
        if (step == 1)
            first_loss = loss_value;
        for (int i = 0; i < 4; i++)
            sgd_update(params[i], 0.05f);
        em_scope_end();
        if (step == 10)
            live_at_10 = em_memory_get_stats(EM_CPU).live_bytes;
    }
    cr_expect_eq(em_memory_get_stats(EM_CPU).live_bytes, live_at_10);
    cr_expect_lt(loss_value, first_loss * 0.1, "the loop learns: %g -> %g", first_loss,
                 loss_value);
    for (int i = 0; i < 4; i++)
        em_release(params[i]);
    em_release(x);
}
