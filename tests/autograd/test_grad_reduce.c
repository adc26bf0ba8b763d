/* Gradient checks for reductions (dims lists, keepdim, non-contiguous inputs) and the softmax
 * family along every dim, plus amax/amin's even split among ties. */
#include <criterion/criterion.h>

#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(grad_reduce, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    int op; /* 0 sum, 1 mean, 2 amax, 3 amin, 4 var(1), 5 var(0) */
    int dims[3], n;
    bool keepdim, permute;
} red_case;

static em_tensor *apply_reduce(em_tensor *const *x, void *ctx)
{
    const red_case *c = ctx;
    const em_tensor *t = c->permute ? em_permute(x[0], (int[]){1, 2, 0}) : x[0];
    switch (c->op) {
    case 0: return em_sum(t, c->dims, c->n, c->keepdim);
    case 1: return em_mean(t, c->dims, c->n, c->keepdim);
    case 2: return em_amax(t, c->dims, c->n, c->keepdim);
    case 3: return em_amin(t, c->dims, c->n, c->keepdim);
    case 4: return em_var(t, c->dims, c->n, 1, c->keepdim);
    default: return em_var(t, c->dims, c->n, 0, c->keepdim);
    }
}

Test(grad_reduce, all_reductions_dims_keepdim_views)
{
    const red_case shapes[] = {
        {0, {1}, 1, false, false},     {0, {0, 2}, 2, true, false}, {0, {-1}, 1, false, true},
        {0, {0}, 0, false, false},     {0, {2, 0}, 2, false, true}, {0, {0, 1, 2}, 3, true, false},
    };
    for (int op = 0; op < 6; op++) {
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            red_case c = shapes[k];
            c.op = op;
            em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3, 4, 2), -1, 1, 100 * op + k);
            cr_expect(em_gradcheck_default(apply_reduce, &c, &x, 1), "op %d case %zu", op, k);
            em_release(x);
        }
    }
}

static em_tensor *apply_sum_all(em_tensor *const *x, void *ctx)
{
    return *(int *)ctx ? em_mean_all(em_transpose(x[0], 0, 1)) : em_sum_all(x[0]);
}

Test(grad_reduce, sum_all_mean_all)
{
    for (int k = 0; k < 2; k++) {
        em_tensor *x = em_gradcheck_leaf(EM_SHAPE(3, 5), -1, 1, 7 + k);
        cr_expect(em_gradcheck_default(apply_sum_all, &k, &x, 1), "case %d", k);
        em_release(x);
    }
}

Test(grad_reduce, amax_ties_share_evenly)
{
    double v[6] = {1, 3, 3, 2, 2, 2};
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(2, 3), EM_F64, v), true);
    em_tensor *y = em_sum_all(em_amax(x, (int[]){1}, 1, false));
    cr_assert_eq(em_backward(y), EM_OK, "%s", em_error());
    double g[6];
    em_copy_to_host(x->grad, EM_F64, g);
    double want[6] = {0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(g[i], want[i], 1e-15, "element %d", i);
    em_zero_grad(x);
    em_tensor *z = em_amin(x, NULL, 0, false);
    cr_expect_eq(em_item(z), 1.0);
    cr_assert_eq(em_backward(z), EM_OK, "%s", em_error());
    em_copy_to_host(x->grad, EM_F64, g);
    cr_expect_eq(g[0], 1.0);
    cr_expect_eq(g[1], 0.0);
}

typedef struct {
    int dim;
    bool log, permute;
} sm_case;

static em_tensor *apply_softmax(em_tensor *const *x, void *ctx)
{
    const sm_case *c = ctx;
    const em_tensor *t = c->permute ? em_transpose(x[0], 0, 2) : x[0];
    return c->log ? em_log_softmax(t, c->dim) : em_softmax(t, c->dim);
}

Test(grad_reduce, softmax_log_softmax_every_dim)
{
    for (int log = 0; log < 2; log++)
        for (int dim = -1; dim < 3; dim++)
            for (int perm = 0; perm < 2; perm++) {
                sm_case c = {dim, log, perm};
                em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3, 4), -2, 2, 10 * dim + perm);
                cr_expect(em_gradcheck_default(apply_softmax, &c, &x, 1), "log %d dim %d perm %d",
                          log, dim, perm);
                em_release(x);
            }
}

Test(grad_reduce, argmax_argmin_shapes)
{
    double v[6] = {1, 7, 3, 9, 2, 2};
    em_tensor *x = em_from_data(EM_SHAPE(2, 3), EM_F64, v);
    em_tensor *a = em_argmax(x, 1, false);
    cr_assert_eq(a->ndim, 1);
    cr_expect_eq(a->dtype, EM_I64);
    cr_expect_eq(em_get(a, (int64_t[]){0}), 1);
    cr_expect_eq(em_get(a, (int64_t[]){1}), 0);
    em_tensor *b = em_argmin(x, 0, true);
    cr_assert_eq(b->ndim, 2);
    cr_expect_eq(b->shape[0], 1);
    cr_expect_eq(em_get(b, (int64_t[]){0, 0}), 0);
    cr_expect_eq(em_get(b, (int64_t[]){0, 1}), 1);
    cr_expect_eq(em_get(b, (int64_t[]){0, 2}), 1);
}
