/* The step graph on the CPU, which has no device graphs: every step runs eagerly, the same bits
 * as the step called directly, with the reason kept; its arguments are checked; the trainer's
 * cuda_graph option on the CPU trains bit for bit as without it. The graphs themselves run on a
 * GPU (tests/backend_cuda/test_cuda_graph.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "ember.h"

TestSuite(step_graph, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    em_module *net;
    em_optim *opt;
} mlp_run;

static mlp_run mlp_new(void)
{
    em_manual_seed(11);
    mlp_run r = {.net = em_sequential(3, em_linear_layer(6, 16, true), em_relu_layer(),
                                      em_linear_layer(16, 3, true))};
    r.opt = em_sgd(r.net, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    cr_assert(r.net && r.opt, "%s", em_error());
    return r;
}

static void mlp_free(mlp_run *r)
{
    em_optim_free(r->opt);
    em_module_free(r->net);
}

/* One SGD step of r on (x, y); the loss out. */
static em_status mlp_step(void *ctx, em_tensor *const *in, em_tensor **out)
{
    mlp_run *r = ctx;
    em_tensor *loss = em_cross_entropy(em_forward(r->net, in[0]), in[1],
                                       (em_cross_entropy_opts){0});
    em_status st = loss ? em_backward(loss) : em_error_status();
    if (st == EM_OK)
        st = em_optim_step(r->opt);
    em_optim_zero_grad(r->opt);
    *out = loss;
    return st;
}

static void batch(int s, em_tensor **x, em_tensor **y)
{
    em_generator g = em_generator_new(100 + (uint64_t)s);
    *x = em_randn(EM_SHAPE(8, 6), EM_F32, &g);
    *y = em_randint(EM_SHAPE(8), EM_I64, 0, 3, &g);
}

static void assert_same_params(em_module *a, em_module *b)
{
    em_param_ref pa[8], pb[8];
    int n = em_module_parameters(a, pa, 8);
    cr_assert_eq(em_module_parameters(b, pb, 8), n);
    for (int i = 0; i < n; i++)
        cr_assert(!memcmp(em_data_ptr(pa[i].value), em_data_ptr(pb[i].value),
                          (size_t)em_numel(pa[i].value) * sizeof(float)),
                  "parameter %s differs", pa[i].name);
}

Test(step_graph, on_the_cpu_every_step_runs_eagerly_as_the_step_itself)
{
    mlp_run direct = mlp_new(), graphed = mlp_new();
    em_step_graph *g = em_step_graph_new(EM_CPU, mlp_step, &graphed,
                                         (em_step_graph_opts){.quiet = true});
    cr_assert(g, "%s", em_error());
    cr_assert(strstr(em_step_graph_why_eager(g), "cpu has no device graphs"), "%s",
              em_step_graph_why_eager(g));
    for (int s = 0; s < 6; s++) {
        em_scope_begin();
        em_tensor *x, *y, *want, *got;
        batch(s, &x, &y);
        cr_assert_eq(mlp_step(&direct, (em_tensor *[]){x, y}, &want), EM_OK, "%s", em_error());
        cr_assert_eq(em_step_graph_run(g, (em_tensor *[]){x, y}, 2, &got), EM_OK, "%s",
                     em_error());
        cr_assert(!em_step_graph_replayed(g));
        cr_assert_eq(em_item(got), em_item(want), "step %d's loss", s);
        em_scope_end();
    }
    assert_same_params(direct.net, graphed.net);
    em_step_graph_stats st = em_step_graph_get_stats(g);
    cr_assert_eq(st.eager_steps, 6);
    cr_assert_eq(st.replays, 0);
    em_step_graph_free(g);
    mlp_free(&direct);
    mlp_free(&graphed);
}

Test(step_graph, arguments_are_checked)
{
    cr_assert_null(em_step_graph_new(EM_CPU, NULL, NULL, (em_step_graph_opts){0}));
    cr_assert(strstr(em_error(), "em_step_graph_new: a step and a device are required"), "%s",
              em_error());
    em_error_clear();
    mlp_run r = mlp_new();
    em_step_graph *g = em_step_graph_new(EM_CPU, mlp_step, &r, (em_step_graph_opts){.quiet = true});
    em_tensor *x, *y;
    batch(0, &x, &y);
    cr_assert_eq(em_step_graph_run(g, (em_tensor *[]){x, y}, 2, NULL), EM_OK, "%s", em_error());
    cr_assert_eq(em_step_graph_run(g, (em_tensor *[]){x, y, x}, 3, NULL), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "3 inputs where the graph takes 2"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_step_graph_run(g, (em_tensor *[]){x, NULL}, 2, NULL), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "input 1 is NULL"), "%s", em_error());
    em_error_clear();
    em_step_graph_free(g);
    mlp_free(&r);
}

/* The trainer with cuda_graph on the CPU: the steps of the graph's path, eagerly, give the bits
 * of the usual path, with clipping and a scheduler. */
Test(step_graph, trainer_option_on_the_cpu_trains_as_without_it)
{
    mlp_run plain = mlp_new(), graphed = mlp_new();
    em_scheduler *s1 = em_exponential_lr(plain.opt, 0.9), *s2 = em_exponential_lr(graphed.opt, 0.9);
    em_trainer *a = em_trainer_new(plain.net, plain.opt, NULL,
                                   (em_trainer_opts){.tech = {.clip = 0.5}, .scheduler = s1});
    em_trainer *b = em_trainer_new(graphed.net, graphed.opt, NULL,
                                   (em_trainer_opts){.tech = {.clip = 0.5, .cuda_graph = true},
                                                     .scheduler = s2});
    cr_assert(a && b, "%s", em_error());
    for (int s = 0; s < 5; s++) {
        em_scope_begin();
        em_tensor *x, *y;
        batch(s, &x, &y);
        double la, lb;
        cr_assert_eq(em_trainer_step(a, x, y, &la), EM_OK, "%s", em_error());
        cr_assert_eq(em_trainer_step(b, x, y, &lb), EM_OK, "%s", em_error());
        cr_assert_eq(la, lb, "step %d: %.17g vs %.17g", s, la, lb);
        em_scope_end();
    }
    assert_same_params(plain.net, graphed.net);
    cr_assert_eq(em_trainer_get_stats(b).updates, 5);
    cr_assert_eq(em_optim_get_lr(graphed.opt, 0), em_optim_get_lr(plain.opt, 0));
    em_trainer_free(a);
    em_trainer_free(b);
    em_scheduler_free(s1);
    em_scheduler_free(s2);
    mlp_free(&plain);
    mlp_free(&graphed);
}
