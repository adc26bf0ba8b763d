/* Training on CUDA against the same training on the CPU: an MLP (784-512-256-10, ReLU) on fixed
 * random data from the same initial weights, step for step. f32 SGD with momentum for 200 steps:
 * the two losses agree within 2e-3 relative at every step. The GEMMs sum in different orders, so
 * the runs drift apart by rounding alone; on the CPU, scaling every weight by a random 1 +- 1e-7
 * after each step moves the losses of this run by at most 7e-4 relative in 200 steps at lr 0.01
 * (loss 2.30 -> 1.79). At lr 0.05 the run spikes near step 100 and the same 1e-7 grows to 1e-2 by
 * step 120, so no tolerance could tell a bug from rounding there. AdamW and f16 autocast with
 * the grad scaler for 50 steps within 1e-2 (f16 activations round at 2^-11). A model saved from
 * CUDA loads on the CPU bit for bit. Skipped where no GPU is present. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "ember.h"

TestSuite(cuda_training, .init = em_scope_begin, .fini = em_scope_end);

#define BATCH 64
#define N_BATCHES 8

static void skip_without_cuda(void)
{
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, EM_CUDA);
    if (!probe)
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    em_release(probe);
}

static em_module *mlp(void)
{
    em_manual_seed(42);
    return em_sequential(5, em_linear_layer(784, 512, true), em_relu_layer(),
                         em_linear_layer(512, 256, true), em_relu_layer(),
                         em_linear_layer(256, 10, true));
}

typedef enum { RUN_SGD, RUN_ADAMW, RUN_AMP_F16 } run_kind;

/* The loss of each of `steps` steps on dev into losses[]. */
static void train(em_device dev, run_kind kind, int steps, double *losses)
{
    em_module *net = mlp();
    cr_assert_eq(em_module_to(net, dev), EM_OK, "%s", em_error());
    em_optim *opt = kind == RUN_SGD ? em_sgd(net, (em_sgd_opts){.lr = 0.01, .momentum = 0.9})
                                    : em_adamw(net, (em_adam_opts){.lr = 1e-3});
    em_grad_scaler *scaler = kind == RUN_AMP_F16 ? em_grad_scaler_new((em_grad_scaler_opts){0}) : NULL;
    em_generator gen = em_generator_new(7);
    em_tensor *xs = em_keep(em_to_device(em_rand(EM_SHAPE(N_BATCHES, BATCH, 784), EM_F32, &gen),
                                         dev));
    em_tensor *ys = em_keep(em_to_device(em_randint(EM_SHAPE(N_BATCHES, BATCH), EM_I64, 0, 10,
                                                    &gen), dev));
    for (int s = 0; s < steps; s++) {
        em_scope_begin();
        em_tensor *x = em_select(xs, 0, s % N_BATCHES), *y = em_select(ys, 0, s % N_BATCHES);
        if (kind == RUN_AMP_F16)
            em_autocast_begin(EM_F16);
        em_tensor *logits = em_forward(net, x);
        if (kind == RUN_AMP_F16)
            em_autocast_end();
        em_tensor *loss = em_cross_entropy(logits, y, (em_cross_entropy_opts){0});
        cr_assert(loss, "step %d on %s: %s", s, em_device_name(dev), em_error());
        losses[s] = em_item(loss);
        if (scaler) {
            cr_assert_eq(em_backward(em_grad_scaler_scale(scaler, loss)), EM_OK, "%s", em_error());
            cr_assert_eq(em_grad_scaler_step(scaler, opt, NULL), EM_OK, "%s", em_error());
            cr_assert_eq(em_grad_scaler_update(scaler), EM_OK, "%s", em_error());
        } else {
            cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
            cr_assert_eq(em_optim_step(opt), EM_OK, "%s", em_error());
        }
        em_optim_zero_grad(opt);
        em_scope_end();
    }
    em_release(xs);
    em_release(ys);
    em_grad_scaler_free(scaler);
    em_optim_free(opt);
    em_module_free(net);
}

static void compare_runs(run_kind kind, int steps, double tol, const char *what)
{
    double cpu[200], gpu[200];
    train(EM_CPU, kind, steps, cpu);
    train(EM_CUDA, kind, steps, gpu);
    double worst = 0;
    for (int s = 0; s < steps; s++) {
        double rel = fabs(gpu[s] - cpu[s]) / fabs(cpu[s]);
        worst = rel > worst ? rel : worst;
        cr_assert(rel <= tol, "%s step %d: cuda loss %.7g, cpu %.7g", what, s, gpu[s], cpu[s]);
    }
    printf("%s: %d steps, losses %.5f -> %.5f on the cpu, worst relative gap %.2e (limit %.0e)\n",
           what, steps, cpu[0], cpu[steps - 1], worst, tol);
}

Test(cuda_training, mlp_sgd_tracks_the_cpu_for_200_steps)
{
    skip_without_cuda();
    compare_runs(RUN_SGD, 200, 2e-3, "f32 SGD momentum");
}

Test(cuda_training, mlp_adamw_and_f16_autocast_track_the_cpu)
{
    skip_without_cuda();
    compare_runs(RUN_ADAMW, 50, 1e-2, "f32 AdamW");
    compare_runs(RUN_AMP_F16, 50, 1e-2, "f16 autocast + grad scaler, AdamW");
}

Test(cuda_training, a_model_saved_on_cuda_loads_on_the_cpu)
{
    skip_without_cuda();
    em_module *net = mlp();
    cr_assert_eq(em_module_to(net, EM_CUDA), EM_OK, "%s", em_error());
    char path[] = "/tmp/ember_cuda_model_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(em_module_save(net, path, NULL, 0), EM_OK, "%s", em_error());
    em_module *back = mlp();
    em_fill_(em_module_find(back, "0.weight"), 0.0);
    cr_assert_eq(em_module_load(back, path), EM_OK, "%s", em_error());
    unlink(path);
    em_tensor *a = em_to_device(em_module_find(net, "0.weight"), EM_CPU);
    em_tensor *b = em_module_find(back, "0.weight");
    cr_assert_eq(em_item(em_sum_all(em_ne(a, b))), 0.0, "the weights differ after the round trip");
    em_module_free(back);
    em_module_free(net);
}
