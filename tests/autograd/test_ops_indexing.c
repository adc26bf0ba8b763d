/* Writing at indices: scatter, scatter_value, scatter_add, index_fill and index_put. Values and
 * gradients are PyTorch 2.15's (torch.Tensor.scatter / scatter_add / index_fill / index_put on
 * the f64 inputs below, the gradient of sum(y * w), printed to 10 digits); the duplicate-index
 * cases also check ember's rule (the last write in index order wins), which PyTorch 2.15 on the
 * CPU happens to give too. Gradients are checked by finite differences in tests/autograd/
 * test_op_cases.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers/reference.h"

TestSuite(ops_indexing, .init = em_scope_begin, .fini = em_scope_end);

/* sin(i a + b) for i = 0.., in f64: the inputs the PyTorch references were computed on */
static em_tensor *wave(em_shape s, double a, double b, bool requires_grad)
{
    em_tensor *t = em_ref_wave(s, a, b, 1);
    if (requires_grad)
        em_requires_grad_(t, true);
    return t;
}

static em_tensor *indices(em_shape s, const int64_t *v)
{
    return em_from_data(s, EM_I64, v);
}

static void expect_values(const em_tensor *t, const double *want, int64_t n)
{
    cr_assert(em_ref_close(t, want, n, 1e-9), "%s", em_error());
}

/* backward of sum(y * w) with w = sin(0.3 i + 0.2) of y's shape */
static void backward_weighted(em_tensor *y)
{
    cr_assert_not_null(y, "%s", em_error());
    em_tensor *w = wave(em_shape_of(y), 0.3, 0.2, false);
    cr_assert_eq(em_backward(em_sum(em_mul(y, w), NULL, 0, false)), EM_OK, "%s", em_error());
}

static void expect_error(const em_tensor *t, const char *want)
{
    cr_assert_null(t);
    cr_assert_str_eq(em_error(), want);
    em_error_clear();
}

/* ---- scatter ---- */

Test(ops_indexing, scatter_values_and_gradients_with_a_duplicate)
{
    const int64_t at[6] = {0, 4, 2, 3, 1, 3}; /* row 1 writes column 3 twice: the last wins */
    em_tensor *x = wave(EM_SHAPE(3, 5), 1, 0, true), *index = indices(EM_SHAPE(2, 3), at);
    em_tensor *wide = wave(EM_SHAPE(2, 4), 0.5, 1, false); /* larger than index: narrowed */
    double want_wide[15] = {0.8414709848, 0.8414709848, 0.9092974268, 0.1411200081,
                            0.9974949866, -0.9589242747, -0.3507832277, 0.6569865987,
                            -0.7568024953, 0.4121184852, -0.5440211109, -0.9999902066,
                            -0.536572918, 0.4201670368, 0.9906073557};
    expect_values(em_scatter(x, 1, index, wide), want_wide, 15);

    em_tensor *src = wave(EM_SHAPE(2, 3), 0.5, 1, true);
    em_tensor *y = em_scatter(x, 1, index, src);
    double want_y[15] = {0.8414709848, 0.8414709848, 0.9092974268, 0.1411200081, 0.9974949866,
                         -0.9589242747, 0.1411200081, 0.6569865987, -0.3507832277, 0.4121184852,
                         -0.5440211109, -0.9999902066, -0.536572918, 0.4201670368, 0.9906073557};
    expect_values(y, want_y, 15);
    backward_weighted(y);
    double want_gx[15] = {0, 0.4794255386, 0, 0.8912073601, 0, 0.9916648105, 0, 0.7457052122, 0,
                          0.2392493292, -0.05837414343, -0.3507832277, -0.6118578909,
                          -0.8182771111, -0.9516020739};
    double want_gs[6] = {0.1986693308, 0.98544973, 0.7173560909, 0.5155013718, 0.9092974268,
                         0.5155013718};
    expect_values(x->grad, want_gx, 15);
    expect_values(src->grad, want_gs, 6);
}

Test(ops_indexing, scatter_keeps_the_last_write_of_many)
{
    /* every one of 300 entries of one row writes column 1: src's last entry is what stays */
    int64_t at[300];
    for (int j = 0; j < 300; j++)
        at[j] = 1;
    em_tensor *src = em_arange(0, 300, 1, EM_F32);
    em_tensor *y = em_scatter(em_zeros(EM_SHAPE(1, 3), EM_F32), 1,
                              indices(EM_SHAPE(1, 300), at), em_reshape(src, EM_SHAPE(1, 300)));
    double want[3] = {0, 299, 0};
    expect_values(y, want, 3);
}

Test(ops_indexing, scatter_value_and_integer_dtype)
{
    const int64_t at[3] = {1, 0, 1};
    double want[6] = {0, -2.5, 0.9092974268, -2.5, -0.7568024953, -2.5};
    expect_values(em_scatter_value(wave(EM_SHAPE(2, 3), 1, 0, false), 0,
                                   indices(EM_SHAPE(1, 3), at), -2.5), want, 6);
    em_tensor *ints = em_zeros(EM_SHAPE(2, 3), EM_I32);
    double want_int[6] = {0, 7, 0, 7, 0, 7};
    expect_values(em_scatter_value(ints, 0, indices(EM_SHAPE(1, 3), at), 7), want_int, 6);
}

Test(ops_indexing, scatter_add_values_and_gradients)
{
    const int64_t at[8] = {0, 2, 0, 1, 2, 2, 0, 0};
    em_tensor *x = wave(EM_SHAPE(3, 4), 1, 0, true), *src = wave(EM_SHAPE(2, 4), 0.7, 0.1, true);
    em_tensor *y = em_scatter_add(x, 0, indices(EM_SHAPE(2, 4), at), src);
    double want_y[12] = {0.09983341665, 0.8414709848, 0.9906264767, -0.8178042666, -0.7568024953,
                         -0.9589242747, -0.2794154982, 1.465483003, 1.228607576, 0.6869541328,
                         -0.5440211109, -0.9999902066};
    expect_values(y, want_y, 12);
    backward_weighted(y);
    double want_gx[12] = {0.1986693308, 0.4794255386, 0.7173560909, 0.8912073601, 0.98544973,
                          0.9916648105, 0.9092974268, 0.7457052122, 0.5155013718, 0.2392493292,
                          -0.05837414343, -0.3507832277};
    double want_gs[8] = {0.1986693308, 0.2392493292, 0.7173560909, 0.7457052122, 0.5155013718,
                         0.2392493292, 0.7173560909, 0.8912073601};
    expect_values(x->grad, want_gx, 12);
    expect_values(src->grad, want_gs, 8);
}

Test(ops_indexing, scatter_errors_name_the_argument)
{
    em_tensor *x = em_zeros(EM_SHAPE(3, 4), EM_F32), *src = em_ones(EM_SHAPE(1, 1), EM_F32);
    const int64_t at[2] = {1, 4};
    expect_error(em_scatter_value(x, 1, indices(EM_SHAPE(1, 2), at), 5),
                 "em_scatter_value: index 4 out of range [0, 4)");
    expect_error(em_scatter(x, 1, indices(EM_SHAPE(1, 2), at), src),
                 "em_scatter: index [1,2] must have self's ndim and be no larger than self [3,4] "
                 "outside dim 1 and no larger than src [1,1]");
    expect_error(em_scatter_add(x, 1, indices(EM_SHAPE(2), at), em_ones(EM_SHAPE(2), EM_F32)),
                 "em_scatter_add: index [2] must have self's ndim and be no larger than self "
                 "[3,4] outside dim 1 and no larger than src [2]");
    expect_error(em_scatter(x, 2, indices(EM_SHAPE(1, 1), at), src),
                 "em_scatter: dim 2 out of range for [3,4]");
    expect_error(em_scatter(x, 1, em_zeros(EM_SHAPE(1, 1), EM_F32), src),
                 "em_scatter: index must be i64, not f32");
    expect_error(em_scatter(x, 1, indices(EM_SHAPE(1, 1), at), em_ones(EM_SHAPE(1, 1), EM_F64)),
                 "em_scatter: dtypes differ: self f32 [3,4] and src f64 [1,1]");
    expect_error(em_scatter(x, 1, indices(EM_SHAPE(1, 1), at), NULL),
                 "em_scatter: src is NULL");
}

/* ---- index_fill ---- */

Test(ops_indexing, index_fill_values_gradient_and_negative_indices)
{
    const int64_t at[3] = {-1, 0, 0};
    em_tensor *x = wave(EM_SHAPE(3, 4), 1, 0, true);
    em_tensor *y = em_index_fill(x, 1, indices(EM_SHAPE(3), at), 7);
    double want_y[12] = {7, 0.8414709848, 0.9092974268, 7, 7, -0.9589242747, -0.2794154982, 7,
                         7, 0.4121184852, -0.5440211109, 7};
    expect_values(y, want_y, 12);
    backward_weighted(y);
    double want_gx[12] = {0, 0.4794255386, 0.7173560909, 0, 0, 0.9916648105, 0.9092974268, 0,
                          0, 0.2392493292, -0.05837414343, 0};
    expect_values(x->grad, want_gx, 12);

    const int64_t one = 1; /* a 0-d index */
    double want_row[12] = {0, 0.8414709848, 0.9092974268, 0.1411200081, -2, -2, -2, -2,
                           0.9893582466, 0.4121184852, -0.5440211109, -0.9999902066};
    expect_values(em_index_fill(wave(EM_SHAPE(3, 4), 1, 0, false), 0,
                                indices(EM_SCALAR_SHAPE, &one), -2), want_row, 12);
}

Test(ops_indexing, index_fill_errors)
{
    em_tensor *x = em_zeros(EM_SHAPE(3, 4), EM_F32);
    const int64_t at[2] = {4, -5};
    expect_error(em_index_fill(x, 1, indices(EM_SHAPE(1), at), 1),
                 "em_index_fill: index 4 is out of bounds for dim 1 of size 4");
    expect_error(em_index_fill(x, 1, indices(EM_SHAPE(1), at + 1), 1),
                 "em_index_fill: index -5 is out of bounds for dim 1 of size 4");
    expect_error(em_index_fill(x, 1, indices(EM_SHAPE(1, 1), at), 1),
                 "em_index_fill: dim 1, index [1,1] (a vector or scalar on self's device) "
                 "invalid for self [3,4]");
    expect_error(em_index_fill(x, -3, indices(EM_SHAPE(1), at), 1),
                 "em_index_fill: dim -3, index [1] (a vector or scalar on self's device) "
                 "invalid for self [3,4]");
}

/* ---- index_put ---- */

/* self (4, 3) [i0 = (0, -1, 0), i1 = ((1), (2))] = v (3): (2, 3) positions, (0, 1) and (0, 2)
 * written twice each */
static void check_index_put(bool accumulate, const double *want_y, const double *want_gx)
{
    const int64_t rows[3] = {0, -1, 0}, cols[2] = {1, 2};
    em_tensor *x = wave(EM_SHAPE(4, 3), 1, 0, true), *v = wave(EM_SHAPE(3), 0.9, 0.4, true);
    em_tensor *at[2] = {indices(EM_SHAPE(3), rows), indices(EM_SHAPE(2, 1), cols)};
    em_tensor *y = em_index_put(x, at, 2, v, accumulate);
    expect_values(y, want_y, 12);
    backward_weighted(y);
    double want_gv[3] = {1.19678163, -0.4091573711, 1.19678163};
    expect_values(x->grad, want_gx, 12);
    expect_values(v->grad, want_gv, 3);
}

Test(ops_indexing, index_put_broadcast_indices_last_write_wins)
{
    double want_y[12] = {0, 0.8084964038, 0.8084964038, 0.1411200081, -0.7568024953,
                         -0.9589242747, -0.2794154982, 0.6569865987, 0.9893582466, 0.4121184852,
                         0.9635581854, 0.9635581854};
    double want_gx[12] = {0.1986693308, 0, 0, 0.8912073601, 0.98544973, 0.9916648105,
                          0.9092974268, 0.7457052122, 0.5155013718, 0.2392493292, 0, 0};
    check_index_put(false, want_y, want_gx);
}

Test(ops_indexing, index_put_accumulate_adds_duplicates)
{
    double want_y[12] = {0, 2.039385731, 2.107212173, 0.1411200081, -0.7568024953, -0.9589242747,
                         -0.2794154982, 0.6569865987, 0.9893582466, 0.4121184852, 0.4195370745,
                         -0.03643202113};
    double want_gx[12] = {0.1986693308, 0.4794255386, 0.7173560909, 0.8912073601, 0.98544973,
                          0.9916648105, 0.9092974268, 0.7457052122, 0.5155013718, 0.2392493292,
                          -0.05837414343, -0.3507832277};
    check_index_put(true, want_y, want_gx);
}

Test(ops_indexing, index_put_whole_rows)
{
    const int64_t rows[2] = {2, 0};
    em_tensor *x = wave(EM_SHAPE(3, 2, 2), 1, 0, true), *v = wave(EM_SHAPE(2, 1), 0.9, 0.4, true);
    em_tensor *at = indices(EM_SHAPE(2), rows);
    em_tensor *y = em_index_put(x, &at, 1, v, false);
    double want_y[12] = {0.3894183423, 0.3894183423, 0.9635581854, 0.9635581854, -0.7568024953,
                         -0.9589242747, -0.2794154982, 0.6569865987, 0.3894183423, 0.3894183423,
                         0.9635581854, 0.9635581854};
    expect_values(y, want_y, 12);
    backward_weighted(y);
    double want_gx[12] = {0, 0, 0, 0, 0.98544973, 0.9916648105, 0.9092974268, 0.7457052122, 0, 0,
                          0, 0};
    double want_gv[2] = {1.43284557, 1.19940608};
    expect_values(x->grad, want_gx, 12);
    expect_values(v->grad, want_gv, 2);
}

Test(ops_indexing, index_put_errors)
{
    em_tensor *x = em_zeros(EM_SHAPE(3, 4), EM_F32), *two = em_ones(EM_SCALAR_SHAPE, EM_F32);
    const int64_t at[3] = {0, 3, 1};
    em_tensor *i3[3] = {indices(EM_SHAPE(1), at), indices(EM_SHAPE(1), at),
                        indices(EM_SHAPE(1), at)};
    expect_error(em_index_put(x, i3, 3, two, false),
                 "em_index_put: 3 index tensors for a 2-d self (1 to 2)");
    em_tensor *bad[2] = {indices(EM_SHAPE(2), at), indices(EM_SHAPE(3), at)};
    expect_error(em_index_put(x, bad, 2, two, false),
                 "em_index_put: indices could not be broadcast together: [2] and [3]");
    em_tensor *row3 = indices(EM_SHAPE(1), at + 1);
    expect_error(em_index_put(x, &row3, 1, two, true),
                 "em_index_put: index 3 is out of bounds for dim 0 of size 3");
    em_tensor *rows = indices(EM_SHAPE(2), at);
    expect_error(em_index_put(x, &rows, 1, em_ones(EM_SHAPE(3), EM_F32), false),
                 "em_index_put: values [3] cannot be broadcast to the indexed shape [2,4]");
    expect_error(em_index_put(x, &rows, 1, em_ones(EM_SHAPE(4), EM_F64), false),
                 "em_index_put: dtypes differ: self f32 [3,4] and values f64 [4]");
    em_tensor *none[2] = {rows, NULL};
    expect_error(em_index_put(x, none, 2, two, false), "em_index_put: indices[1] is NULL");
    em_tensor *floats = em_zeros(EM_SHAPE(1), EM_F32);
    expect_error(em_index_put(x, &floats, 1, two, false),
                 "em_index_put: index must be i64, not f32");
}

/* ---- embedding's padding_idx ---- */

Test(ops_indexing, embedding_padding_row_gets_no_gradient)
{
    const int64_t at[6] = {1, 3, 0, 3, 3, 2};
    em_tensor *w = wave(EM_SHAPE(4, 3), 1, 0, true), *index = indices(EM_SHAPE(2, 3), at);
    em_tensor *y = em_embedding_padded(w, index, -1); /* row 3: looked up, never trained */
    double want_y[18] = {0.1411200081, -0.7568024953, -0.9589242747, 0.4121184852, -0.5440211109,
                         -0.9999902066, 0, 0.8414709848, 0.9092974268, 0.4121184852,
                         -0.5440211109, -0.9999902066, 0.4121184852, -0.5440211109,
                         -0.9999902066, -0.2794154982, 0.6569865987, 0.9893582466};
    expect_values(y, want_y, 18);
    backward_weighted(y);
    double want_gw[12] = {0.9092974268, 0.7457052122, 0.5155013718, 0.1986693308, 0.4794255386,
                          0.7173560909, -0.9999232576, -0.9589242747, -0.8322674422, 0, 0, 0};
    expect_values(w->grad, want_gw, 12);

    expect_error(em_embedding_padded(w, index, 4),
                 "em_embedding_padded: padding_idx 4 is outside [-4, 4) for weight [4,3]");
    expect_error(em_embedding_padded(w, index, -5),
                 "em_embedding_padded: padding_idx -5 is outside [-4, 4) for weight [4,3]");
}
