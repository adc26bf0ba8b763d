/* End to end: a small MLP learns a synthetic 4-class problem (the class is the quadrant of the
 * first two features) through the loader, cross-entropy, backward and SGD, to a low loss. */
#include <criterion/criterion.h>

#include "ember.h"

Test(train_e2e, quadrants_fall_below_loss_threshold)
{
    em_generator g = em_generator_new(11);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(512, 4), EM_F32, &g); // (512, 4)
    float *xs = em_data_ptr(x);
    int64_t labels[512];
    for (int i = 0; i < 512; i++)
        labels[i] = (xs[4 * i] > 0) + 2 * (xs[4 * i + 1] > 0);
    em_tensor *y = em_from_data(EM_SHAPE(512), EM_I64, labels); // (512)
    em_dataset *ds = em_tensor_dataset(x, y);
    em_scope_end();

    em_manual_seed(0);
    em_module *net = em_sequential(3, em_linear_layer(4, 32, true), em_relu_layer(),
                                   em_linear_layer(32, 4, true));
    em_optim *opt = em_sgd(net, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 32, .shuffle = true,
                                                       .num_workers = 2});
    cr_assert(net && opt && dl, "%s", em_error());
    double first_epoch_loss = 0, last_epoch_loss = 0;
    for (int epoch = 0; epoch < 30; epoch++) {
        double sum = 0;
        int n = 0;
        em_batch b;
        for (;;) {
            em_scope_begin();
            em_status st = em_loader_next(dl, &b);
            if (st == EM_OK) {
                em_tensor *loss = em_cross_entropy(em_forward(net, b.x), b.y,
                                                   (em_cross_entropy_opts){0});
                cr_assert(loss && em_backward(loss) == EM_OK, "%s", em_error());
                cr_assert_eq(em_optim_step(opt), EM_OK, "%s", em_error());
                em_optim_zero_grad(opt);
                sum += em_item(loss);
                n++;
            }
            em_scope_end();
            if (st != EM_OK) {
                cr_assert_eq(st, EM_END, "%s", em_error());
                break;
            }
        }
        if (epoch == 0)
            first_epoch_loss = sum / n;
        last_epoch_loss = sum / n;
    }
    cr_expect_gt(first_epoch_loss, 0.5, "the problem should not start solved");
    cr_expect_lt(last_epoch_loss, 0.1, "loss after 30 epochs: %f", last_epoch_loss);
    em_loader_free(dl);
    em_optim_free(opt);
    em_module_free(net);
    em_dataset_free(ds);
}
