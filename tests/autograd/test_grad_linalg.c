/* Gradient checks for matmul (every PyTorch case, broadcast batches, transposed views), bmm and
 * linear (with and without bias, batched input, transposed weight), linear with ReLU as one op. */
#include <criterion/criterion.h>

#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(grad_linalg, .init = em_scope_begin, .fini = em_scope_end);

static em_tensor *apply_matmul(em_tensor *const *x, void *ctx)
{
    (void)ctx;
    return em_matmul(x[0], x[1]);
}

static void check_matmul(em_shape sa, em_shape sb, uint64_t seed)
{
    em_tensor *x[2] = {em_gradcheck_leaf(sa, -1, 1, seed), em_gradcheck_leaf(sb, -1, 1, seed + 1)};
    char ba[64], bb[64];
    cr_expect(em_gradcheck_default(apply_matmul, NULL, x, 2), "%s x %s",
              em_shape_str(x[0], ba, sizeof ba), em_shape_str(x[1], bb, sizeof bb));
    em_release(x[0]);
    em_release(x[1]);
}

Test(grad_linalg, matmul_every_case)
{
    check_matmul(EM_SHAPE(4), EM_SHAPE(4), 1);             /* dot */
    check_matmul(EM_SHAPE(3), EM_SHAPE(3, 5), 3);          /* vector-matrix */
    check_matmul(EM_SHAPE(2, 3), EM_SHAPE(3), 5);          /* matrix-vector */
    check_matmul(EM_SHAPE(2, 3), EM_SHAPE(3, 4), 7);       /* matrix-matrix */
    check_matmul(EM_SHAPE(2, 1, 3, 4), EM_SHAPE(5, 4, 2), 9); /* broadcast batches */
    check_matmul(EM_SHAPE(3, 4), EM_SHAPE(2, 4, 2), 11);   /* 2-D times batch */
    check_matmul(EM_SHAPE(2, 2, 3), EM_SHAPE(3), 13);      /* batch times vector */
    check_matmul(EM_SHAPE(3), EM_SHAPE(2, 3, 2), 15);      /* vector times batch */
}

static em_tensor *apply_matmul_views(em_tensor *const *x, void *ctx)
{
    int which = *(int *)ctx;
    if (which == 0) /* both transposed 2-D views: no copies, trans flags */
        return em_matmul(em_transpose(x[0], 0, 1), em_transpose(x[1], 0, 1));
    if (which == 1) /* sliced rows with a gap, batched permute */
        return em_matmul(em_slice(x[0], 0, 0, 4, 2), em_permute(x[1], (int[]){1, 0}));
    return em_matmul(em_permute(x[0], (int[]){1, 0}), em_expand(em_slice(x[1], 1, 0, 2, 1),
                                                                EM_SHAPE(3, 4, 2)));
}

Test(grad_linalg, matmul_non_contiguous_inputs)
{
    em_shape sa[3] = {EM_SHAPE(3, 2), EM_SHAPE(4, 3), EM_SHAPE(4, 3)};
    em_shape sb[3] = {EM_SHAPE(4, 3), EM_SHAPE(5, 3), EM_SHAPE(4, 3)};
    for (int k = 0; k < 3; k++) {
        em_tensor *x[2] = {em_gradcheck_leaf(sa[k], -1, 1, 20 + k),
                           em_gradcheck_leaf(sb[k], -1, 1, 30 + k)};
        cr_expect(em_gradcheck_default(apply_matmul_views, &k, x, 2), "case %d", k);
        em_release(x[0]);
        em_release(x[1]);
    }
}

static em_tensor *apply_bmm(em_tensor *const *x, void *ctx)
{
    (void)ctx;
    return em_bmm(x[0], em_transpose(x[1], 1, 2));
}

Test(grad_linalg, bmm)
{
    em_tensor *x[2] = {em_gradcheck_leaf(EM_SHAPE(3, 2, 4), -1, 1, 40),
                       em_gradcheck_leaf(EM_SHAPE(3, 5, 4), -1, 1, 41)};
    cr_expect(em_gradcheck_default(apply_bmm, NULL, x, 2));
    em_release(x[0]);
    em_release(x[1]);
}

static em_tensor *apply_linear(em_tensor *const *x, void *ctx)
{
    int which = *(int *)ctx;
    if (which == 0)
        return em_linear(x[0], x[1], x[2]);
    if (which == 1)
        return em_linear(x[0], x[1], NULL);
    if (which == 2) /* weight given as a transposed view, input permuted */
        return em_linear(em_transpose(x[0], 0, 1), em_transpose(x[1], 0, 1), x[2]);
    return em_linear(x[0], x[1], x[2]);
}

Test(grad_linalg, linear)
{
    em_shape xs[4] = {EM_SHAPE(5, 3), EM_SHAPE(5, 3), EM_SHAPE(3, 5), EM_SHAPE(2, 4, 3)};
    em_shape ws[4] = {EM_SHAPE(4, 3), EM_SHAPE(4, 3), EM_SHAPE(3, 4), EM_SHAPE(4, 3)};
    for (int k = 0; k < 4; k++) {
        em_tensor *x[3] = {em_gradcheck_leaf(xs[k], -1, 1, 50 + k),
                           em_gradcheck_leaf(ws[k], -1, 1, 60 + k),
                           em_gradcheck_leaf(EM_SHAPE(4), -1, 1, 70 + k)};
        cr_expect(em_gradcheck_default(apply_linear, &k, x, 3), "case %d", k);
        em_release(x[0]);
        em_release(x[1]);
        em_release(x[2]);
    }
}

Test(grad_linalg, linear_one_dim_input)
{
    int k = 0;
    em_tensor *x[3] = {em_gradcheck_leaf(EM_SHAPE(3), -1, 1, 80),
                       em_gradcheck_leaf(EM_SHAPE(2, 3), -1, 1, 81),
                       em_gradcheck_leaf(EM_SHAPE(2), -1, 1, 82)};
    cr_expect(em_gradcheck_default(apply_linear, &k, x, 3));
    em_release(x[0]);
    em_release(x[1]);
    em_release(x[2]);
}

static em_tensor *apply_linear_relu(em_tensor *const *x, void *ctx)
{
    return em_linear_relu(x[0], x[1], *(int *)ctx == 1 ? NULL : x[2]);
}

/* Against f64 finite differences: with a bias, without one, and over a batched input. */
Test(grad_linalg, linear_relu)
{
    em_shape xs[3] = {EM_SHAPE(6, 3), EM_SHAPE(6, 3), EM_SHAPE(2, 5, 3)};
    for (int k = 0; k < 3; k++) {
        em_tensor *x[3] = {em_gradcheck_leaf(xs[k], -1, 1, 90 + k),
                           em_gradcheck_leaf(EM_SHAPE(4, 3), -1, 1, 93 + k),
                           em_gradcheck_leaf(EM_SHAPE(4), -1, 1, 96 + k)};
        cr_expect(em_gradcheck_default(apply_linear_relu, &k, x, 3), "case %d", k);
        em_release(x[0]);
        em_release(x[1]);
        em_release(x[2]);
    }
}

/* In f32 the one op gives the bytes of em_relu(em_linear(...)), forward and every gradient. */
Test(grad_linalg, linear_relu_equals_the_two_ops)
{
    em_tensor *p[2][3];
    const em_tensor *out[2], *grads[2][3];
    for (int fused = 0; fused < 2; fused++) {
        em_manual_seed(5); /* the same values both times */
        em_shape shapes[3] = {EM_SHAPE(33, 20), EM_SHAPE(17, 20), EM_SHAPE(17)};
        for (int i = 0; i < 3; i++)
            p[fused][i] = em_requires_grad_(em_randn(shapes[i], EM_F32, NULL), true);
        em_tensor *y = fused ? em_linear_relu(p[fused][0], p[fused][1], p[fused][2])
                             : em_relu(em_linear(p[fused][0], p[fused][1], p[fused][2]));
        cr_assert_eq(em_backward(em_sum_all(em_mul(y, y))), EM_OK, "%s", em_error());
        out[fused] = y;
        for (int i = 0; i < 3; i++)
            grads[fused][i] = p[fused][i]->grad;
    }
    int64_t zeros = 0;
    for (int64_t i = 0; i < em_numel(out[0]); i++)
        zeros += ((const float *)em_data_ptr(out[0]))[i] == 0;
    cr_assert(zeros > 100 && zeros < 461, "%lld of 561 outputs are 0", (long long)zeros);
    cr_assert_arr_eq(em_data_ptr(out[0]), em_data_ptr(out[1]), 561 * sizeof(float));
    for (int i = 0; i < 3; i++)
        cr_assert_arr_eq(em_data_ptr(grads[0][i]), em_data_ptr(grads[1][i]),
                         (size_t)em_numel(grads[0][i]) * sizeof(float), "gradient %d", i);
}
