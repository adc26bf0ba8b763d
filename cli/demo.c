/* `ember demo`: fit y = x @ [2, -3, 0.5] + 1 by gradient descent with autograd and show the loss
 * falling; the smallest complete training loop ember can run. */
#include <stdio.h>

#include "ember.h"
#include "cmd/args.h"
#include "cli/cli_internal.h"

static void sgd_update(em_tensor *param, double lr)
{
    bool was = em_set_grad_enabled(false);
    em_scope_begin();
    em_copy_(param, em_sub(param, em_mul_scalar(param->grad, lr)));
    em_scope_end();
    em_set_grad_enabled(was);
    em_zero_grad(param);
}

int cli_cmd_demo(int argc, char **argv)
{
    const cmd_spec spec = {.command = "ember demo",
                              .about = "Fits a small linear regression with autograd."};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    em_manual_seed(0);
    const double true_w[3] = {2.0, -3.0, 0.5};
    em_scope_begin();
    em_tensor *x = em_keep(em_randn(EM_SHAPE(256, 3), EM_F32, NULL));          // (256, 3)
    em_tensor *w_true = em_to_dtype(em_from_data(EM_SHAPE(1, 3), EM_F64, true_w), EM_F32);
    em_tensor *noise = em_normal(EM_SHAPE(256, 1), EM_F32, 0.0, 0.01, NULL);   // (256, 1)
    em_tensor *y = em_keep(em_add(em_add_scalar(em_linear(x, w_true, NULL), 1.0), noise));
    em_scope_end();

    em_tensor *w = em_requires_grad_(em_zeros(EM_SHAPE(1, 3), EM_F32), true);  // (1, 3)
    em_tensor *b = em_requires_grad_(em_zeros(EM_SHAPE(1), EM_F32), true);     // (1)
    int status = 0;
    for (int step = 0; step <= 100; step++) {
        em_scope_begin();
        em_tensor *pred = em_linear(x, w, b);                      // (256, 1)
        em_tensor *loss = em_mean_all(em_square(em_sub(pred, y))); // ()
        if (!loss || em_backward(loss) != EM_OK) {
            fprintf(stderr, "ember demo: %s\n", em_error());
            status = 1;
            em_scope_end();
            break;
        }
        if (step % 10 == 0)
            printf("step %3d  loss %.6f\n", step, em_item(loss));
        sgd_update(w, 0.1);
        sgd_update(b, 0.1);
        em_scope_end();
    }
    if (status == 0) {
        printf("learned w = [%.3f, %.3f, %.3f], b = %.3f (true: [2, -3, 0.5], 1)\n",
               em_get(w, (int64_t[]){0, 0}), em_get(w, (int64_t[]){0, 1}),
               em_get(w, (int64_t[]){0, 2}), em_get(b, (int64_t[]){0}));
    }
    em_release(w);
    em_release(b);
    em_release(y);
    em_release(x);
    return status;
}
