/* Gradient-ready hooks: each fires once per backward pass, right after the last contribution to
 * its leaf's gradient (which then holds its final value), in the order backward completes the
 * leaves; backward_done runs once per outermost backward and its error becomes em_backward's;
 * checkpointed segments fire their leaves' hooks in their recomputation's pass. */
#include <criterion/criterion.h>
#include <string.h>

#include "ember.h"

TestSuite(grad_hooks, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    em_tensor *leaves[4];
    int order[8], n;      /* which leaf, in firing order */
    double grad_sum[8];   /* the sum of the leaf's grad when its hook fired */
    int done_calls;
    em_status done_status, done_returns;
} log_t;

static double sum_of(const em_tensor *t)
{
    return t ? em_item(em_sum_all(t)) : 0;
}

static void on_ready(void *ctx, em_tensor *leaf)
{
    log_t *l = ctx;
    for (int i = 0; i < 4; i++)
        if (l->leaves[i] == leaf && l->n < 8) {
            l->grad_sum[l->n] = sum_of(leaf->grad);
            l->order[l->n++] = i;
        }
}

static em_status on_done(void *ctx, em_status st)
{
    log_t *l = ctx;
    l->done_calls++;
    l->done_status = st;
    if (l->done_returns != EM_OK)
        return em_set_error(l->done_returns, "hook: reduction failed");
    return EM_OK;
}

static em_tensor *leaf(em_shape s, double v)
{
    return em_requires_grad_(em_full(s, EM_F32, v), true);
}

/* loss = sum(relu(x w1) w2): w2's gradient completes first */
Test(grad_hooks, fire_in_completion_order_with_final_grads)
{
    log_t l = {0};
    em_tensor *x = em_full(EM_SHAPE(2, 3), EM_F32, 1);
    l.leaves[0] = leaf(EM_SHAPE(3, 4), 0.5);
    l.leaves[1] = leaf(EM_SHAPE(4, 1), 2);
    cr_assert_eq(em_grad_hooks_add(l.leaves, 2, (em_grad_hooks){on_ready, on_done, &l}), EM_OK);
    em_tensor *loss = em_sum_all(em_matmul(em_relu(em_matmul(x, l.leaves[0])), l.leaves[1]));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_expect_eq(l.n, 2);
    cr_expect_eq(l.order[0], 1);
    cr_expect_eq(l.order[1], 0);
    /* d/dw2 = column sums of relu(x w1) = 2 rows of 1.5 each: 3 per entry, 4 entries */
    cr_expect_float_eq(l.grad_sum[0], 12.0, 1e-6);
    /* d/dw1[i][j] = sum over rows of x * w2[j] = 2 * 2 = 4, 12 entries */
    cr_expect_float_eq(l.grad_sum[1], 48.0, 1e-6);
    cr_expect_eq(l.done_calls, 1);
    cr_expect_eq(l.done_status, EM_OK);
    em_grad_hooks_remove(&l);
}

/* A leaf used twice fires once, after both contributions; a second backward accumulates. */
Test(grad_hooks, shared_leaf_fires_after_its_last_use)
{
    log_t l = {0};
    l.leaves[0] = leaf(EM_SHAPE(2), 3);
    cr_assert_eq(em_grad_hooks_add(l.leaves, 1, (em_grad_hooks){on_ready, NULL, &l}), EM_OK);
    em_tensor *w = l.leaves[0];
    /* loss = sum(w * w + 5 w): grad = 2 w + 5 = 11 per entry */
    em_tensor *loss = em_sum_all(em_add(em_mul(w, w), em_mul_scalar(w, 5)));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_expect_eq(l.n, 1);
    cr_expect_float_eq(l.grad_sum[0], 22.0, 1e-6);
    loss = em_sum_all(em_mul_scalar(w, 4));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_expect_eq(l.n, 2);
    cr_expect_float_eq(l.grad_sum[1], 30.0, 1e-6); /* 22 + 2 * 4 */
    em_grad_hooks_remove(&l);
    loss = em_sum_all(em_mul_scalar(w, 4));
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    cr_expect_eq(l.n, 2, "a removed hook must not fire");
}

Test(grad_hooks, done_error_becomes_the_backward_status)
{
    log_t l = {.done_returns = EM_ERR_PEER};
    l.leaves[0] = leaf(EM_SHAPE(2), 1);
    cr_assert_eq(em_grad_hooks_add(l.leaves, 1, (em_grad_hooks){on_ready, on_done, &l}), EM_OK);
    em_tensor *loss = em_sum_all(em_mul_scalar(l.leaves[0], 2));
    cr_expect_eq(em_backward(loss), EM_ERR_PEER);
    cr_expect_str_eq(em_error(), "hook: reduction failed");
    em_error_clear();
    /* a backward that reaches none of the leaves does not call it */
    em_tensor *other = leaf(EM_SHAPE(2), 1);
    cr_expect_eq(em_backward(em_sum_all(other)), EM_OK);
    cr_expect_eq(l.done_calls, 1);
    em_grad_hooks_remove(&l);
}

static em_tensor *scaled_by_w(void *ctx, em_tensor *const *inputs, int n)
{
    (void)n;
    return em_mul(inputs[0], (em_tensor *)ctx);
}

/* A leaf inside a checkpointed segment fires during the recomputation's backward; done runs
 * once, for the outermost backward. */
Test(grad_hooks, checkpointed_segment_fires_inside_the_outer_backward)
{
    log_t l = {0};
    em_tensor *x = leaf(EM_SHAPE(3), 2);
    l.leaves[0] = leaf(EM_SHAPE(3), 5);
    l.leaves[1] = x;
    cr_assert_eq(em_grad_hooks_add(l.leaves, 2, (em_grad_hooks){on_ready, on_done, &l}), EM_OK);
    em_tensor *y = em_checkpoint(scaled_by_w, l.leaves[0], &x, 1);
    cr_assert_eq(em_backward(em_sum_all(em_mul_scalar(y, 3))), EM_OK, "%s", em_error());
    cr_expect_eq(l.n, 2);
    cr_expect_eq(l.order[0], 0); /* w, inside the segment's pass */
    cr_expect_float_eq(l.grad_sum[0], 18.0, 1e-6); /* 3 * x = 6 per entry */
    cr_expect_eq(l.order[1], 1);
    cr_expect_float_eq(l.grad_sum[1], 45.0, 1e-6); /* 3 * w = 15 per entry */
    cr_expect_eq(l.done_calls, 1);
    em_grad_hooks_remove(&l);
}

Test(grad_hooks, only_leaves_that_require_grad)
{
    em_tensor *a = leaf(EM_SHAPE(2), 1), *b = em_mul_scalar(a, 2), *c = em_zeros(EM_SHAPE(2),
                                                                                  EM_F32);
    log_t l = {0};
    cr_expect_eq(em_grad_hooks_add(&b, 1, (em_grad_hooks){on_ready, NULL, &l}), EM_ERR_ARG);
    cr_expect_eq(em_grad_hooks_add(&c, 1, (em_grad_hooks){on_ready, NULL, &l}), EM_ERR_ARG);
    cr_expect_eq(em_grad_hooks_add(&a, 1, (em_grad_hooks){NULL, NULL, &l}), EM_ERR_ARG);
    cr_expect_not_null(strstr(em_error(), "em_grad_hooks_add"), "%s", em_error());
    em_error_clear();
}
