/* The tape: grad mode, detach, retain_grad, accumulation across backward calls, shared
 * subexpressions, deep graphs, graph freeing and the gradient checker itself. */
#include <criterion/criterion.h>

#include "autograd/autograd_internal.h"
#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(autograd, .init = em_scope_begin, .fini = em_scope_end);

static double grad_at(const em_tensor *t, int64_t i)
{
    double v[64];
    cr_assert_not_null(t->grad);
    cr_assert(em_numel(t) <= 64);
    em_copy_to_host(t->grad, EM_F64, v);
    return v[i];
}

Test(autograd, no_grad_records_no_nodes)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 2), -1, 1, 1);
    cr_expect(em_grad_enabled());
    bool prev = em_set_grad_enabled(false);
    cr_expect(prev);
    em_tensor *y = em_mul(x, x);
    cr_expect_null(y->node);
    cr_expect_not(y->requires_grad);
    em_set_grad_enabled(true);
    em_tensor *z = em_mul(x, x);
    cr_expect_not_null(z->node);
    cr_expect(z->requires_grad);
    cr_expect_str_eq(z->node->op, "mul");
    em_release(y);
    em_release(z);
    em_release(x);
}

Test(autograd, grad_mode_is_per_thread_default_on)
{
    cr_expect(em_grad_enabled());
    em_set_grad_enabled(false);
    cr_expect_not(em_grad_enabled());
    em_set_grad_enabled(true);
}

Test(autograd, detach_shares_storage_outside_graph)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3), -1, 1, 2);
    em_tensor *y = em_mul_scalar(x, 2);
    em_tensor *d = em_detach(y);
    cr_expect_null(d->node);
    cr_expect_not(d->requires_grad);
    cr_expect_eq(d->storage, y->storage);
    em_tensor *loss = em_sum_all(em_mul(y, d)); /* d/dx = 2 * d = 4x */
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    for (int i = 0; i < 3; i++)
        cr_expect_float_eq(grad_at(x, i), 4 * em_get(x, (int64_t[]){i}), 1e-12);
    em_release(loss);
    em_release(d);
    em_release(y);
    em_release(x);
}

Test(autograd, retain_grad_keeps_non_leaf_grad)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2), -1, 1, 3);
    em_tensor *h = em_retain_grad(em_mul_scalar(x, 3));
    em_tensor *k = em_mul_scalar(x, 5); /* not retained */
    em_tensor *loss = em_sum_all(em_add(em_square(h), k));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_assert_not_null(h->grad);
    cr_expect_null(k->grad);
    for (int i = 0; i < 2; i++) {
        double hv = em_get(h, (int64_t[]){i});
        cr_expect_float_eq(grad_at(h, i), 2 * hv, 1e-12);
        cr_expect_float_eq(grad_at(x, i), 6 * hv + 5, 1e-12);
    }
    em_release(loss);
    em_release(k);
    em_release(h);
    em_release(x);
}

Test(autograd, gradients_accumulate_across_backward_calls)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3), -1, 1, 4);
    for (int round = 0; round < 2; round++) {
        em_tensor *loss = em_sum_all(em_mul_scalar(x, 2.5));
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        em_release(loss);
    }
    for (int i = 0; i < 3; i++)
        cr_expect_float_eq(grad_at(x, i), 5.0, 1e-12);
    cr_expect_eq(x->grad->dtype, EM_F64);
    em_zero_grad(x);
    cr_expect_null(x->grad);
    em_release(x);
}

Test(autograd, shared_subexpression_sums_both_paths)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2), 0.5, 1, 5);
    em_tensor *a = em_exp(x);
    em_tensor *loss = em_sum_all(em_add(em_mul(a, a), a)); /* d/dx = 2e^2x + e^x */
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    for (int i = 0; i < 2; i++) {
        double e = em_get(a, (int64_t[]){i});
        cr_expect_float_eq(grad_at(x, i), 2 * e * e + e, 1e-12);
    }
    em_release(loss);
    em_release(a);
    em_release(x);
}

Test(autograd, deep_chain_of_many_layers)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(4), -1, 1, 6);
    em_scope_begin();
    em_tensor *h = x;
    for (int i = 0; i < 5000; i++)
        h = em_add_scalar(h, 0.001);
    em_tensor *loss = em_sum_all(em_mul_scalar(h, 2.0));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    em_scope_end();
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(grad_at(x, i), 2.0, 1e-12);
    em_release(x);
}

Test(autograd, backward_on_a_leaf_and_with_a_seed)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2), -1, 1, 7);
    em_tensor *g = em_from_data(EM_SHAPE(2), EM_F64, (double[]){3, -1});
    cr_assert_eq(em_backward_grad(x, g), EM_OK, "%s", em_error());
    cr_expect_eq(grad_at(x, 0), 3.0);
    cr_expect_eq(grad_at(x, 1), -1.0);
    em_tensor *y = em_mul_scalar(x, 2);
    cr_assert_eq(em_backward_grad(y, g), EM_OK, "%s", em_error());
    cr_expect_eq(grad_at(x, 0), 9.0);
    cr_expect_eq(grad_at(x, 1), -3.0);
    em_release(y);
    em_release(g);
    em_release(x);
}

Test(autograd, graph_is_freed_with_its_output)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(64, 64), -1, 1, 8);
    em_memory_stats before = em_memory_get_stats(EM_CPU);
    em_scope_begin();
    em_tensor *y = em_keep(em_sum_all(em_tanh(em_matmul(x, em_exp(x)))));
    em_scope_end(); /* the intermediates live on only through y's graph */
    cr_expect_gt(em_memory_get_stats(EM_CPU).live_bytes, before.live_bytes);
    em_release(y); /* never backpropagated: releasing the output frees the whole graph */
    cr_expect_eq(em_memory_get_stats(EM_CPU).live_bytes, before.live_bytes);
    em_scope_begin();
    em_tensor *z = em_keep(em_sum_all(em_tanh(em_matmul(x, em_exp(x)))));
    em_scope_end();
    cr_assert_eq(em_backward(z), EM_OK, "%s", em_error());
    em_release(z);
    em_zero_grad(x);
    cr_expect_eq(em_memory_get_stats(EM_CPU).live_bytes, before.live_bytes);
    em_release(x);
}

Test(autograd, requires_grad_only_on_float_leaves)
{
    em_tensor *i = em_zeros(EM_SHAPE(2), EM_I64);
    cr_expect_null(em_requires_grad_(i, true));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2), -1, 1, 9);
    em_tensor *y = em_neg(x);
    cr_expect_null(em_requires_grad_(y, false));
    em_error_clear();
    em_release(y);
    em_release(x);
    em_release(i);
}

static em_tensor *wrong_rule(em_tensor *const *x, void *ctx)
{
    (void)ctx;
    em_scope_begin();
    em_tensor *y = em_keep(em_mul(x[0], em_detach(x[0])));
    em_scope_end();
    return y;
}

Test(autograd, gradcheck_catches_a_wrong_gradient)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3), 0.5, 1, 10);
    cr_expect_not(em_test_gradcheck_default(wrong_rule, NULL, &x, 1));
    em_release(x);
}
