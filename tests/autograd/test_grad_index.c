/* Gradient checks for views (reshape, permute, slicing, expand, ...), contiguous/clone and the
 * joining and indexing ops (cat, stack, split, index_select, gather, embedding). */
#include <criterion/criterion.h>

#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(grad_index, .init = em_scope_begin, .fini = em_scope_end);

/* Each view case multiplies by a fixed pattern afterwards so that position errors show. */
static em_tensor *apply_view(em_tensor *const *x, void *ctx)
{
    const em_tensor *t = x[0]; /* (2, 3, 4) */
    em_tensor *y = NULL;
    switch (*(int *)ctx) {
    case 0: y = em_reshape(t, EM_SHAPE(4, -1)); break;
    case 1: y = em_reshape(em_transpose(t, 0, 2), EM_SHAPE(-1)); break; /* needs a copy */
    case 2: y = em_view(t, EM_SHAPE(6, 4)); break;
    case 3: y = em_flatten(t, 1, 2); break;
    case 4: y = em_permute(t, (int[]){2, 0, 1}); break;
    case 5: y = em_transpose(t, -1, 0); break;
    case 6: y = em_narrow(t, 2, 1, 2); break;
    case 7: y = em_slice(t, 2, -3, 4, 2); break;
    case 8: y = em_select(t, 1, -1); break;
    case 9: y = em_expand(em_select(t, 0, 1), EM_SHAPE(5, 3, 4)); break;
    case 10: y = em_expand(em_narrow(t, 1, 0, 1), EM_SHAPE(2, 3, -1)); break;
    case 11: y = em_squeeze(em_unsqueeze(em_unsqueeze(t, 1), -1), 1); break;
    case 12: y = em_contiguous(em_permute(t, (int[]){1, 2, 0})); break;
    case 13: y = em_clone(t); break;
    default: y = em_contiguous(t); break;
    }
    em_tensor *pattern = em_arange(1, (double)em_numel(y) + 1, 1, EM_F64);
    return em_mul(y, em_reshape(pattern, em_shape_of(y)));
}

Test(grad_index, views)
{
    for (int k = 0; k < 15; k++) {
        em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3, 4), -1, 1, k);
        cr_expect(em_gradcheck_default(apply_view, &k, &x, 1), "view case %d", k);
        em_release(x);
    }
}

static em_tensor *apply_join(em_tensor *const *x, void *ctx)
{
    int which = *(int *)ctx;
    if (which == 0)
        return em_cat((em_tensor *[]){x[0], x[1], x[0]}, 3, 1); /* (2,3)+(2,4)+(2,3) */
    if (which == 1)
        return em_cat((em_tensor *[]){em_transpose(x[1], 0, 1), x[2]}, 2, 0);
    if (which == 2)
        return em_stack((em_tensor *[]){x[0], em_narrow(x[1], 1, 1, 3)}, 2, -1);
    em_tensor *parts[3];
    int n = em_split(x[1], 3, 1, parts, 3); /* (2,3), (2,1) */
    if (n != 2)
        return NULL;
    return em_mul(em_sum(parts[0], (int[]){1}, 1, false), em_squeeze(parts[1], 1));
}

Test(grad_index, cat_stack_split)
{
    for (int k = 0; k < 4; k++) {
        em_tensor *x[3] = {em_gradcheck_leaf(EM_SHAPE(2, 3), -1, 1, 10 + k),
                           em_gradcheck_leaf(EM_SHAPE(2, 4), -1, 1, 20 + k),
                           em_gradcheck_leaf(EM_SHAPE(3, 2), -1, 1, 30 + k)};
        cr_expect(em_gradcheck_default(apply_join, &k, x, 3), "case %d", k);
        for (int i = 0; i < 3; i++)
            em_release(x[i]);
    }
}

Test(grad_index, split_pieces)
{
    em_tensor *t = em_arange(0, 10, 1, EM_F32);
    em_tensor *parts[4];
    cr_assert_eq(em_split(t, 4, 0, parts, 4), 3);
    cr_expect_eq(parts[2]->shape[0], 2);
    cr_expect_eq(em_get(parts[1], (int64_t[]){0}), 4.0);
    cr_expect_eq(em_get(parts[2], (int64_t[]){1}), 9.0);
    cr_expect_eq(em_split(t, 4, 0, parts, 1), 3);
}

typedef struct {
    em_tensor *idx;
    int dim, which;
} index_case;

static em_tensor *apply_index(em_tensor *const *x, void *ctx)
{
    const index_case *c = ctx;
    if (c->which == 0)
        return em_index_select(x[0], c->dim, c->idx);
    if (c->which == 1)
        return em_gather(em_transpose(x[0], 0, 1), c->dim, c->idx);
    return em_embedding(x[0], c->idx);
}

Test(grad_index, index_select_gather_embedding)
{
    em_tensor *x = em_gradcheck_leaf(EM_SHAPE(4, 3), -1, 1, 50);
    index_case c = {em_from_data(EM_SHAPE(5), EM_I64, (int64_t[]){3, 0, 3, 1, 3}), 0, 0};
    cr_expect(em_gradcheck_default(apply_index, &c, &x, 1), "index_select dim 0");
    c = (index_case){em_from_data(EM_SHAPE(3), EM_I64, (int64_t[]){2, 2, 0}), 1, 0};
    cr_expect(em_gradcheck_default(apply_index, &c, &x, 1), "index_select dim 1");
    /* gather from the (3, 4) transpose along dim 1 with a (2, 3) index */
    c = (index_case){em_from_data(EM_SHAPE(2, 3), EM_I64, (int64_t[]){0, 3, 3, 1, 1, 2}), 1, 1};
    cr_expect(em_gradcheck_default(apply_index, &c, &x, 1), "gather dim 1");
    c = (index_case){em_from_data(EM_SHAPE(3, 2), EM_I64, (int64_t[]){2, 1, 0, 2, 0, 0}), 0, 1};
    cr_expect(em_gradcheck_default(apply_index, &c, &x, 1), "gather dim 0");
    c = (index_case){em_from_data(EM_SHAPE(2, 3), EM_I64, (int64_t[]){1, 1, 3, 0, 2, 1}), 0, 2};
    cr_expect(em_gradcheck_default(apply_index, &c, &x, 1), "embedding");
    em_release(x);
}

Test(grad_index, one_hot_values)
{
    em_tensor *i = em_from_data(EM_SHAPE(3), EM_I64, (int64_t[]){2, 0, 1});
    em_tensor *h = em_one_hot(i, 4);
    cr_assert_not_null(h, "%s", em_error());
    cr_expect_eq(h->dtype, EM_I64);
    cr_assert_eq(h->ndim, 2);
    cr_expect_eq(h->shape[1], 4);
    int64_t v[12], want[12] = {0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0};
    em_copy_to_host(h, EM_I64, v);
    for (int k = 0; k < 12; k++)
        cr_expect_eq(v[k], want[k]);
    cr_expect_null(em_one_hot(i, 2));
    cr_expect_str_eq(em_error(), "em_one_hot: index 2 out of range [0, 2)");
    em_error_clear();
}
