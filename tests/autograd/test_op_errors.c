/* Error reporting of the ops: exact messages naming the function and shapes, sticky NULL that
 * keeps the first error, and the backward pass's state errors. */
#include <criterion/criterion.h>

#include "ember.h"

static void fresh(void)
{
    em_scope_begin();
    em_error_clear();
}

static void done(void)
{
    em_scope_end();
    em_error_clear();
}

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(op_errors, .init = fresh, .fini = done);

Test(op_errors, matmul_inner_dimensions)
{
    em_tensor *a = em_zeros(EM_SHAPE(64, 784), EM_F32), *b = em_zeros(EM_SHAPE(512, 256), EM_F32);
    cr_expect_null(em_matmul(a, b));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_matmul: inner dimensions differ: [64,784] x [512,256]");
}

Test(op_errors, dtype_mismatch_names_both)
{
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32), *b = em_zeros(EM_SHAPE(2, 3), EM_F64);
    cr_expect_null(em_add(a, b));
    cr_expect_str_eq(em_error(), "em_add: dtypes differ: f32 [2,3] and f64 [2,3]");
    em_error_clear();
    cr_expect_null(em_matmul(a, em_zeros(EM_SHAPE(3, 2), EM_F64)));
    cr_expect_str_eq(em_error(), "em_matmul: dtypes differ: f32 [2,3] and f64 [3,2]");
}

Test(op_errors, broadcast_and_shape_messages)
{
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32);
    cr_expect_null(em_mul(a, em_zeros(EM_SHAPE(4), EM_F32)));
    cr_expect_str_eq(em_error(), "em_mul: shapes do not broadcast: [2,3] and [4]");
    em_error_clear();
    cr_expect_null(em_reshape(a, EM_SHAPE(4, 2)));
    cr_expect_str_eq(em_error(), "em_reshape: cannot reshape [2,3] to [4,2]");
    em_error_clear();
    em_tensor *empty = em_zeros(EM_SHAPE(0), EM_F32);
    const int64_t big = (int64_t)1 << 62;
    cr_expect_null(em_reshape(empty, EM_SHAPE(0, big, big)));
    cr_expect_str_eq(em_error(), "em_reshape: cannot reshape [0] to [0,4611686018427387904,"
                                 "4611686018427387904]");
    em_error_clear();
    cr_expect_null(em_reshape(empty, EM_SHAPE(big, big, -1)));
    cr_expect_str_eq(em_error(), "em_reshape: cannot reshape [0] to [4611686018427387904,"
                                 "4611686018427387904,-1]");
    em_error_clear();
    em_tensor *ok = em_reshape(empty, EM_SHAPE(big, 0));
    cr_expect_not_null(ok, "%s", em_error());
    em_error_clear();
    em_release(ok);
    em_release(empty);
    cr_expect_null(em_view(em_transpose(a, 0, 1), EM_SHAPE(6)));
    cr_expect_str_eq(em_error(),
                     "em_view: [3,2] cannot be viewed as [6] without a copy (use em_reshape)");
    em_error_clear();
    cr_expect_null(em_sum(a, (int[]){2}, 1, false));
    cr_expect_str_eq(em_error(), "em_sum: dim 2 out of range or repeated for [2,3]");
    em_error_clear();
    cr_expect_null(em_linear(a, em_zeros(EM_SHAPE(4, 2), EM_F32), NULL));
    cr_expect_str_eq(em_error(),
                     "em_linear: expected x (*, in), w (out, in), b (out): [2,3], [4,2], none");
}

Test(op_errors, null_input_keeps_the_first_error)
{
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32), *b = em_zeros(EM_SHAPE(2, 3), EM_F32);
    em_tensor *h = em_matmul(a, b);
    h = em_relu(h);
    h = em_add(h, a);
    h = em_sum_all(em_softmax(em_linear(h, b, NULL), -1));
    cr_expect_null(h);
    cr_expect_str_eq(em_error(), "em_matmul: inner dimensions differ: [2,3] x [2,3]");
    cr_expect_neq(em_backward(h), EM_OK);
    cr_expect_str_eq(em_error(), "em_matmul: inner dimensions differ: [2,3] x [2,3]");
}

Test(op_errors, backward_twice_says_graph_freed)
{
    em_tensor *a = em_requires_grad_(em_ones(EM_SHAPE(1, 3), EM_F32), true);
    em_tensor *b = em_ones(EM_SHAPE(3, 1), EM_F32);
    em_tensor *y = em_matmul(a, b);
    cr_assert_eq(em_backward(y), EM_OK, "%s", em_error());
    cr_expect_eq(em_backward(y), EM_ERR_STATE);
    cr_expect_str_eq(em_error(), "em_backward: graph already freed (op matmul)");
}

Test(op_errors, backward_needs_one_element_and_grad)
{
    em_tensor *a = em_requires_grad_(em_ones(EM_SHAPE(2, 3), EM_F32), true);
    em_tensor *y = em_mul_scalar(a, 2);
    cr_expect_eq(em_backward(y), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_backward: the loss must hold one element, not [2,3] "
                                 "(use em_backward_grad)");
    em_error_clear();
    cr_expect_eq(em_backward(em_zeros(EM_SHAPE(1), EM_F32)), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_backward: the tensor does not require grad");
    em_error_clear();
    cr_expect_eq(em_backward_grad(y, em_ones(EM_SHAPE(3), EM_F32)), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_backward: grad shape [3] differs from tensor [2,3]");
}

Test(op_errors, conv_pool_index_arguments)
{
    em_tensor *x = em_zeros(EM_SHAPE(1, 3, 4, 4), EM_F32);
    em_tensor *w = em_zeros(EM_SHAPE(2, 3, 3, 3), EM_F32);
    cr_expect_null(em_conv2d(x, w, NULL, (em_conv2d_opts){.groups = 2}));
    cr_expect_str_eq(em_error(),
                     "em_conv2d: bad shapes x [1,3,4,4], w [2,3,3,3], b none (stride 1x1, "
                     "padding 0x0, dilation 1x1, groups 2)");
    em_error_clear();
    cr_expect_null(em_max_pool2d(x, (em_pool2d_opts){.kernel = {5, 5}}));
    cr_expect_str_eq(em_error(), "em_max_pool2d: kernel 5x5 stride 5x5 padding 0x0 dilation 1x1 "
                                 "does not fit x [1,3,4,4] (padding at most half the kernel)");
    em_error_clear();
    /* max pooling keeps each maximum's tap in its window in 2 bytes; average pooling has none */
    em_tensor *big = em_zeros(EM_SHAPE(1, 1, 182, 182), EM_F32);
    cr_expect_null(em_relu_max_pool2d(big, (em_pool2d_opts){.kernel = {182, 182}}));
    cr_expect_str_eq(em_error(), "em_relu_max_pool2d: a 182x182 window has more than 32767 taps");
    em_error_clear();
    cr_expect_not_null(em_max_pool2d(big, (em_pool2d_opts){.kernel = {181, 181}}));
    cr_expect_not_null(em_avg_pool2d(big, (em_pool2d_opts){.kernel = {182, 182}}));
    em_tensor *idx = em_from_data(EM_SHAPE(2), EM_I64, (int64_t[]){0, 7});
    cr_expect_null(em_index_select(x, 1, idx));
    cr_expect_str_eq(em_error(), "em_index_select: index 7 out of range [0, 3)");
    em_error_clear();
    cr_expect_null(em_embedding(em_zeros(EM_SHAPE(5, 2), EM_F32), idx));
    cr_expect_str_eq(em_error(), "em_embedding: index 7 out of range [0, 5)");
    em_error_clear();
    cr_expect_null(em_cat((em_tensor *[]){x, w}, 2, 0));
    cr_expect_str_eq(em_error(), "em_cat: tensor 1 [2,3,3,3] does not match tensor 0 [1,3,4,4] "
                                 "outside dim 0");
}

Test(op_errors, requires_grad_on_integers)
{
    cr_expect_null(em_requires_grad_(em_zeros(EM_SHAPE(2), EM_I32), true));
    cr_expect_str_eq(em_error(),
                     "em_requires_grad_: only floating-point tensors can require grad, not i32");
}

Test(op_errors, conv_window_larger_than_padded_input)
{
    em_tensor *x = em_zeros(EM_SHAPE(1, 1, 2, 2), EM_F32);
    em_tensor *w = em_zeros(EM_SHAPE(1, 1, 3, 3), EM_F32);
    cr_expect_null(em_conv2d(x, w, NULL, (em_conv2d_opts){.groups = 1}));
    cr_expect_str_eq(em_error(),
                     "em_conv2d: bad shapes x [1,1,2,2], w [1,1,3,3], b none (stride 1x1, "
                     "padding 0x0, dilation 1x1, groups 1)");
    em_error_clear();
    cr_expect_not_null(em_conv2d(x, w, NULL, (em_conv2d_opts){.padding = {1, 1}}));
}

/* A NULL handed in by the caller (no error pending) is itself the error, named by function and
 * argument; a NULL passed on from a failed op keeps that op's message (above). */
#define EXPECT_NULL_NAMED(call, message)                                                  \
    do {                                                                                  \
        em_error_clear();                                                                 \
        cr_expect_null(call, #call);                                                      \
        cr_expect_eq(em_error_status(), EM_ERR_ARG, #call);                               \
        cr_expect_str_eq(em_error(), message);                                            \
    } while (0)

Test(op_errors, null_argument_with_no_error_pending_is_named)
{
    em_tensor *a = em_zeros(EM_SHAPE(2, 2), EM_F32);
    em_module *m = em_linear_layer(2, 2, true);
    EXPECT_NULL_NAMED(em_add(NULL, a), "em_add: a is NULL");
    EXPECT_NULL_NAMED(em_mul(a, NULL), "em_mul: b is NULL");
    EXPECT_NULL_NAMED(em_exp(NULL), "em_exp: t is NULL");
    EXPECT_NULL_NAMED(em_matmul(a, NULL), "em_matmul: b is NULL");
    EXPECT_NULL_NAMED(em_sum_all(NULL), "em_sum_all: t is NULL");
    EXPECT_NULL_NAMED(em_reshape(NULL, EM_SHAPE(4)), "em_reshape: t is NULL");
    EXPECT_NULL_NAMED(em_softmax(NULL, 0), "em_softmax: t is NULL");
    EXPECT_NULL_NAMED(em_where(NULL, a, a), "em_where: cond is NULL");
    EXPECT_NULL_NAMED(em_linear(a, NULL, NULL), "em_linear: w is NULL");
    EXPECT_NULL_NAMED(em_conv2d(NULL, a, NULL, (em_conv2d_opts){0}), "em_conv2d: x is NULL");
    EXPECT_NULL_NAMED(em_max_pool2d(NULL, (em_pool2d_opts){.kernel = {2, 2}}),
                      "em_max_pool2d: x is NULL");
    EXPECT_NULL_NAMED(em_cross_entropy(a, NULL, (em_cross_entropy_opts){0}),
                      "em_cross_entropy: target is NULL");
    EXPECT_NULL_NAMED(em_mse_loss(NULL, a, EM_REDUCTION_MEAN), "em_mse_loss: input is NULL");
    EXPECT_NULL_NAMED(em_forward(m, NULL), "em_forward: x is NULL");
    em_module_free(m);
}
