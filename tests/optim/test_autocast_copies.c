/* Autocast's kept copies of an optimizer's parameters: after each update the bf16 copy holds the
 * new parameter rounded (written in the update's pass, for every rule), the next region takes it
 * without a cast, a parameter written another way is cast afresh, and copies go when a step
 * finds autocast unused since the last one, or with their optimizer. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "autograd/autocast_copies_internal.h"
#include "ember.h"

static em_module *mlp(void)
{
    em_manual_seed(3);
    em_module *net = em_sequential(3, em_linear_layer(40, 30, true), em_relu_layer(),
                                   em_linear_layer(30, 5, true));
    cr_assert_not_null(net, "%s", em_error());
    return net;
}

/* One training step, its forward under bf16 autocast when low. */
static void step(em_module *net, em_optim *opt, bool low)
{
    em_scope_begin();
    em_generator gen = em_generator_new(11);
    em_tensor *x = em_randn(EM_SHAPE(16, 40), EM_F32, &gen);
    em_tensor *y = em_randint(EM_SHAPE(16), EM_I64, 0, 5, &gen);
    if (low)
        em_autocast_begin(EM_BF16);
    em_tensor *logits = em_forward(net, x);
    if (low)
        em_autocast_end();
    em_tensor *loss = em_cross_entropy(logits, y, (em_cross_entropy_opts){0});
    cr_assert(loss && em_backward(loss) == EM_OK && em_optim_step(opt) == EM_OK, "%s",
              em_error());
    em_optim_zero_grad(opt);
    em_scope_end();
}

/* Every parameter's kept copy is the parameter rounded to bf16, bit for bit. */
static void expect_copies_current(em_module *net, const char *rule)
{
    em_param_ref p[4];
    cr_assert_eq(em_module_parameters(net, p, 4), 4);
    for (int i = 0; i < 4; i++) {
        const em_tensor *c = em_autocast_weight(p[i].value, EM_BF16);
        cr_assert(c && c->dtype == EM_BF16, "%s", em_error());
        float *v = em_copy_to_host_new(p[i].value, EM_F32);
        const uint16_t *bits = em_data_ptr(c);
        for (int64_t j = 0; j < em_numel(p[i].value); j++)
            cr_assert_eq(bits[j], em_f32_to_bf16(v[j]), "%s: %s[%lld] copy %#x, the parameter "
                         "%g", rule, p[i].name, (long long)j, bits[j], v[j]);
        free(v);
    }
}

static void check_rule(em_optim *(*make)(em_module *), const char *rule)
{
    em_module *net = mlp();
    em_optim *opt = make(net);
    cr_assert_not_null(opt, "%s", em_error());
    for (int i = 0; i < 3; i++) {
        step(net, opt, true);
        em_autocast_copy_stats s = em_autocast_copy_get_stats();
        cr_expect_eq(s.copies, 4, "%s: the two weights and two biases", rule);
        cr_expect_eq(s.bytes, 2 * (size_t)(40 * 30 + 30 + 30 * 5 + 5), "%s", rule);
        expect_copies_current(net, rule);
    }
    step(net, opt, false); /* the regions' copies were taken by the check: kept once more */
    step(net, opt, false);
    cr_expect_eq(em_autocast_copy_get_stats().copies, 0, "%s: freed once autocast ended", rule);
    step(net, opt, true);
    cr_expect_eq(em_autocast_copy_get_stats().copies, 4, "%s", rule);
    em_optim_free(opt);
    cr_expect_eq(em_autocast_copy_get_stats().copies, 0, "%s: freed with the optimizer", rule);
    em_module_free(net);
}

static em_optim *sgd(em_module *m)
{
    return em_sgd(m, (em_sgd_opts){.lr = 0.05, .momentum = 0.9});
}

static em_optim *adamw(em_module *m)
{
    return em_adamw(m, (em_adam_opts){.lr = 1e-3, .weight_decay = 0.01});
}

static em_optim *amsgrad(em_module *m)
{
    return em_adam(m, (em_adam_opts){.lr = 1e-3, .amsgrad = true});
}

static em_optim *rmsprop(em_module *m)
{
    return em_rmsprop(m, (em_rmsprop_opts){.lr = 1e-3, .momentum = 0.5, .centered = true});
}

Test(autocast_copies, each_update_writes_the_rounded_parameter)
{
    check_rule(sgd, "sgd");
    check_rule(adamw, "adamw");
    check_rule(amsgrad, "adam amsgrad");
    check_rule(rmsprop, "rmsprop");
}

Test(autocast_copies, a_parameter_written_otherwise_is_cast_again)
{
    em_module *net = mlp();
    em_optim *opt = sgd(net);
    step(net, opt, true);
    em_param_ref p[4];
    em_module_parameters(net, p, 4);
    cr_assert_eq(em_fill_(p[0].value, 0.25), EM_OK);
    const em_tensor *c = em_autocast_weight(p[0].value, EM_BF16);
    cr_assert_not_null(c);
    const uint16_t *bits = em_data_ptr(c);
    for (int64_t j = 0; j < em_numel(c); j++)
        cr_assert_eq(bits[j], em_f32_to_bf16(0.25f), "[%lld] %#x", (long long)j, bits[j]);
    cr_expect_eq(em_autocast_weight(p[0].value, EM_BF16), c, "then kept");
    em_optim_free(opt);
    em_module_free(net);
}

Test(autocast_copies, tensors_no_optimizer_holds_are_cast_each_time)
{
    em_tensor *w = em_ones(EM_SHAPE(3, 4), EM_F32);
    em_scope_begin();
    const em_tensor *a = em_autocast_weight(w, EM_BF16), *b = em_autocast_weight(w, EM_BF16);
    cr_expect_neq(a, b, "plain casts, temporaries of the scope");
    cr_expect_eq(em_autocast_copy_get_stats().copies, 0);
    em_scope_end();
    em_release(w);
}
