/* Forward values of the ops against hand-computed results: matmul, linear, softmax, conv2d,
 * pooling, reductions, joining, splitting, where, one_hot, argmax/argmin; and that views share
 * storage and BLAS gets no copies. */
#include <criterion/criterion.h>
#include <math.h>

#include "ember.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(ops_forward, .init = em_scope_begin, .fini = em_scope_end);

static void expect_values(const em_tensor *t, const double *want, int64_t n, double tol)
{
    cr_assert_not_null(t, "%s", em_error());
    cr_assert_eq(em_numel(t), n);
    double v[64];
    cr_assert_eq(em_copy_to_host(t, EM_F64, v), EM_OK);
    for (int64_t i = 0; i < n; i++)
        cr_expect(fabs(v[i] - want[i]) <= tol, "element %lld: %.9g, want %.9g", (long long)i,
                  v[i], want[i]);
}

static em_tensor *mat(em_shape s, const double *v)
{
    return em_from_data(s, EM_F64, v);
}

Test(ops_forward, matmul_known_values)
{
    em_tensor *a = mat(EM_SHAPE(2, 2), (double[]){1, 2, 3, 4});
    em_tensor *b = mat(EM_SHAPE(2, 2), (double[]){5, 6, 7, 8});
    expect_values(em_matmul(a, b), (double[]){19, 22, 43, 50}, 4, 0);
    expect_values(em_matmul(em_transpose(a, 0, 1), b), (double[]){26, 30, 38, 44}, 4, 0);
    expect_values(em_matmul(a, em_transpose(b, 0, 1)), (double[]){17, 23, 39, 53}, 4, 0);
    em_tensor *u = mat(EM_SHAPE(3), (double[]){1, 2, 3});
    em_tensor *v = mat(EM_SHAPE(3), (double[]){4, 5, 6});
    em_tensor *dot = em_matmul(u, v);
    cr_expect_eq(dot->ndim, 0);
    cr_expect_eq(em_item(dot), 32.0);
    expect_values(em_matmul(a, mat(EM_SHAPE(2), (double[]){1, -1})), (double[]){-1, -1}, 2, 0);
    em_tensor *f = em_to_dtype(a, EM_F32);
    em_tensor *ff = em_matmul(f, f);
    cr_expect_eq(ff->dtype, EM_F32);
    expect_values(ff, (double[]){7, 10, 15, 22}, 4, 0);
    em_tensor *batch = em_matmul(em_stack((em_tensor *[]){a, b}, 2, 0), a); /* (2,2,2) */
    expect_values(batch, (double[]){7, 10, 15, 22, 23, 34, 31, 46}, 8, 0);
}

Test(ops_forward, transposed_views_reach_gemm_without_copies)
{
    em_tensor *a = em_randn(EM_SHAPE(32, 16), EM_F32, NULL);
    em_tensor *b = em_randn(EM_SHAPE(8, 32), EM_F32, NULL);
    em_tensor *at = em_transpose(a, 0, 1), *bt = em_transpose(b, 0, 1);
    uint64_t before = em_memory_get_stats(EM_CPU).n_allocs;
    em_tensor *y = em_matmul(at, bt); /* (16, 8): only the output is allocated */
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(em_memory_get_stats(EM_CPU).n_allocs - before, 1);
    em_tensor *w = em_randn(EM_SHAPE(4, 8), EM_F32, NULL), *bias = em_zeros(EM_SHAPE(4), EM_F32);
    before = em_memory_get_stats(EM_CPU).n_allocs;
    em_tensor *z = em_linear(y, w, bias);
    cr_assert_not_null(z, "%s", em_error());
    cr_expect_eq(em_memory_get_stats(EM_CPU).n_allocs - before, 1);
    em_tensor *ref = em_matmul(y, em_transpose(w, 0, 1));
    float zv[64], rv[64];
    em_copy_to_host(z, EM_F32, zv);
    em_copy_to_host(ref, EM_F32, rv);
    for (int i = 0; i < 64; i++)
        cr_expect_float_eq(zv[i], rv[i], 1e-5f);
}

Test(ops_forward, linear_with_bias_and_batch)
{
    em_tensor *x = mat(EM_SHAPE(2, 1, 2), (double[]){1, 2, -1, 0});
    em_tensor *w = mat(EM_SHAPE(3, 2), (double[]){1, 0, 0, 1, 1, 1});
    em_tensor *b = mat(EM_SHAPE(3), (double[]){10, 20, 30});
    em_tensor *y = em_linear(x, w, b);
    cr_assert_eq(y->ndim, 3);
    cr_expect_eq(y->shape[2], 3);
    expect_values(y, (double[]){11, 22, 33, 9, 20, 29}, 6, 0);
    expect_values(em_linear(x, w, NULL), (double[]){1, 2, 3, -1, 0, -1}, 6, 0);
}

Test(ops_forward, softmax_of_1_2_3)
{
    em_tensor *x = mat(EM_SHAPE(3), (double[]){1, 2, 3});
    double want[3] = {0.0900305731703805, 0.2447284710547976, 0.6652409557748219};
    expect_values(em_softmax(x, 0), want, 3, 1e-12);
    double lw[3] = {log(want[0]), log(want[1]), log(want[2])};
    expect_values(em_log_softmax(x, -1), lw, 3, 1e-12);
    em_tensor *m = mat(EM_SHAPE(3, 2), (double[]){1, 0, 2, 0, 3, 0}); /* softmax down columns */
    double third = 1.0 / 3;
    expect_values(em_softmax(m, 0), (double[]){want[0], third, want[1], third, want[2], third}, 6,
                  1e-12);
}

Test(ops_forward, conv2d_small_known)
{
    em_tensor *x = em_reshape(em_arange(1, 10, 1, EM_F64), EM_SHAPE(1, 1, 3, 3));
    em_tensor *w = mat(EM_SHAPE(1, 1, 2, 2), (double[]){1, 0, 0, -1});
    em_tensor *b = mat(EM_SHAPE(1), (double[]){1});
    expect_values(em_conv2d(x, w, b, (em_conv2d_opts){.groups = 1}), (double[]){-3, -3, -3, -3},
                  4, 0);
    /* padding 1, stride 3: each window sees one corner of x */
    em_tensor *y = em_conv2d(x, w, NULL, (em_conv2d_opts){.padding = {1, 1}, .stride = {3, 3}});
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->shape[2], 2);
    expect_values(y, (double[]){-1, 0, 0, 9}, 4, 0);
}

Test(ops_forward, pooling_known)
{
    em_tensor *x = em_reshape(em_arange(0, 16, 1, EM_F64), EM_SHAPE(1, 1, 4, 4));
    expect_values(em_max_pool2d(x, (em_pool2d_opts){.kernel = {2, 2}}), (double[]){5, 7, 13, 15},
                  4, 0);
    expect_values(em_avg_pool2d(x, (em_pool2d_opts){.kernel = {2, 2}}),
                  (double[]){2.5, 4.5, 10.5, 12.5}, 4, 0);
    /* 3x3 windows with padding 1, stride 2: top-left window holds 0,1,4,5 */
    em_pool2d_opts o = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    em_tensor *inc = em_avg_pool2d(x, o);
    o.exclude_pad = true;
    em_tensor *exc = em_avg_pool2d(x, o);
    cr_expect_float_eq(em_get(inc, (int64_t[]){0, 0, 0, 0}), 10.0 / 9, 1e-12);
    cr_expect_float_eq(em_get(exc, (int64_t[]){0, 0, 0, 0}), 10.0 / 4, 1e-12);
}

Test(ops_forward, reductions_known)
{
    em_tensor *x = mat(EM_SHAPE(2, 2), (double[]){1, 2, 3, 4});
    expect_values(em_sum(x, (int[]){0}, 1, false), (double[]){4, 6}, 2, 0);
    em_tensor *k = em_mean(x, (int[]){1}, 1, true);
    cr_expect_eq(k->ndim, 2);
    expect_values(k, (double[]){1.5, 3.5}, 2, 0);
    cr_expect_float_eq(em_item(em_var(x, NULL, 0, 1, false)), 5.0 / 3, 1e-12);
    cr_expect_float_eq(em_item(em_var(x, NULL, 0, 0, false)), 1.25, 1e-12);
    cr_expect_eq(em_item(em_amax(x, NULL, 0, false)), 4.0);
    expect_values(em_amin(x, (int[]){-1}, 1, false), (double[]){1, 3}, 2, 0);
    cr_expect_eq(em_item(em_sum_all(x)), 10.0);
    cr_expect_eq(em_item(em_mean_all(x)), 2.5);
    cr_expect_eq(em_sum_all(x)->ndim, 0);
}

/* Expected values: numpy (f64) on PyTorch's definitions: log(exp(x).sum(d)), x.std(d, ddof),
 * x.prod(d), (abs(x) ** p).sum(d) ** (1 / p), abs(x).max / min for +-inf, count of non-zeros
 * for 0. */
Test(ops_forward, logsumexp_std_prod_and_norms_match_pytorch)
{
    em_tensor *x = mat(EM_SHAPE(2, 3), (double[]){1, -2, 3, 0.5, 4, -1});
    expect_values(em_logsumexp(x, (int[]){1}, 1, false), (double[]){3.13284523, 4.03626957}, 2,
                  1e-8);
    em_tensor *all = em_logsumexp(x, NULL, 0, true);
    cr_expect(all->ndim == 2 && all->shape[0] == 1 && all->shape[1] == 1);
    expect_values(all, (double[]){4.37643484}, 1, 1e-8);
    /* no overflow at 1000, and a row of -inf gives -inf, not NaN */
    em_tensor *big = mat(EM_SHAPE(2, 2), (double[]){1000, 1000, -INFINITY, -INFINITY});
    double lse[2];
    cr_assert_eq(em_copy_to_host(em_logsumexp(big, (int[]){1}, 1, false), EM_F64, lse), EM_OK);
    cr_expect(fabs(lse[0] - 1000.69314718) < 1e-8 && lse[1] == -INFINITY, "%g %g", lse[0],
              lse[1]);
    expect_values(em_std(x, (int[]){0}, 1, 1, false),
                  (double[]){0.35355339, 4.24264069, 2.82842712}, 3, 1e-8);
    cr_expect_float_eq(em_item(em_std(x, NULL, 0, 0, false)), 2.08998937, 1e-8);
    expect_values(em_prod(x, (int[]){1}, 1, false), (double[]){-6, -2}, 2, 0);
    em_tensor *ints = em_from_data(EM_SHAPE(3), EM_I32, (int32_t[]){3, -4, 100000});
    em_tensor *ip = em_prod(ints, NULL, 0, false);
    cr_expect_eq(ip->dtype, EM_I64); /* as PyTorch: no i32 overflow */
    cr_expect_eq(em_item(ip), -1200000.0);
    struct { double ord; double want[2]; } norms[] = {
        {2, {3.74165739, 4.15331193}},   {1, {6, 5.5}},
        {INFINITY, {3, 4}},              {-INFINITY, {1, 0.5}},
        {3, {3.30192725, 4.02330150}},   {0.5, {17.19150823, 13.74264069}},
        {0, {3, 3}},
    };
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
        expect_values(em_vector_norm(x, norms[i].ord, (int[]){1}, 1, false), norms[i].want, 2,
                      1e-8);
    /* np.cumsum / np.cumprod along each dim, and back from the end (cumsum's gradient) */
    expect_values(em_cumsum(x, 1), (double[]){1, -1, 2, 0.5, 4.5, 3.5}, 6, 0);
    expect_values(em_cumsum(x, 0), (double[]){1, -2, 3, 1.5, 2, 2}, 6, 0);
    expect_values(em_cumprod(x, -1), (double[]){1, -2, -6, 0.5, 2, -2}, 6, 0);
    em_tensor *xt = em_transpose(x, 0, 1); /* a strided view: (3, 2) */
    expect_values(em_cumprod(xt, 0), (double[]){1, 0.5, -2, 2, -6, -2}, 6, 0);
    cr_assert_null(em_cumsum(ints, 0));
    cr_expect_str_eq(em_error(), "em_cumsum: t must be floating point with dim 0, not i32 [3]");
    em_error_clear();
    cr_assert_null(em_vector_norm(x, -1, NULL, 0, false));
    cr_expect_str_eq(em_error(), "em_vector_norm: t must be floating point and ord >= 0, inf or "
                                 "-inf, not f64 and ord -1");
    em_error_clear();
    cr_assert_null(em_logsumexp(ints, NULL, 0, false));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
}

/* A dims list given as NULL with a count, or a negative count, is an error naming the function
 * (not a crash, not the input unreduced). */
Test(ops_forward, reductions_refuse_null_dims_with_a_count_and_negative_counts)
{
    em_tensor *x = mat(EM_SHAPE(2, 3), (double[]){1, -2, 3, 0.5, 4, -1});
    cr_assert_null(em_sum(x, NULL, 1, false));
    cr_expect_str_eq(em_error(), "em_sum: dims is NULL with n_dims 1");
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_assert_null(em_mean(x, NULL, 2, true));
    cr_expect_str_eq(em_error(), "em_mean: dims is NULL with n_dims 2");
    em_error_clear();
    cr_assert_null(em_logsumexp(x, NULL, 1, false));
    cr_expect_str_eq(em_error(), "em_logsumexp: dims is NULL with n_dims 1");
    em_error_clear();
    cr_assert_null(em_vector_norm(x, 2, NULL, 1, false));
    cr_expect_str_eq(em_error(), "em_vector_norm: dims is NULL with n_dims 1");
    em_error_clear();
    cr_assert_null(em_sum(x, (int[]){0}, -1, false));
    cr_expect_str_eq(em_error(), "em_sum: n_dims is -1, negative");
    em_error_clear();
    cr_assert_null(em_logsumexp(x, (int[]){0}, -1, false));
    cr_expect_str_eq(em_error(), "em_logsumexp: n_dims is -1, negative");
    em_error_clear();
}

/* torch.logsumexp over an empty dim is log(0) = -inf, as sum is 0 there: (2, 0) over dim 1 gives
 * [-inf, -inf], keepdim [2, 1]; over dim 0 an empty (0,); (0, 3) over dim 0 three -inf; over
 * every dim -inf. Its gradient has the input's (empty) shape. */
Test(ops_forward, logsumexp_over_an_empty_set_is_minus_infinity)
{
    em_tensor *e = em_requires_grad_(em_zeros(EM_SHAPE(2, 0), EM_F32), true);
    double v[3];
    em_tensor *y = em_logsumexp(e, (int[]){1}, 1, false);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->ndim == 1 && y->shape[0] == 2);
    cr_assert_eq(em_copy_to_host(y, EM_F64, v), EM_OK);
    cr_expect(v[0] == -INFINITY && v[1] == -INFINITY, "%g %g", v[0], v[1]);
    em_tensor *k = em_logsumexp(e, (int[]){-1}, 1, true);
    cr_assert(k && k->ndim == 2 && k->shape[0] == 2 && k->shape[1] == 1);
    em_tensor *over0 = em_logsumexp(e, (int[]){0}, 1, false);
    cr_assert(over0 && over0->ndim == 1 && over0->shape[0] == 0);
    cr_expect_eq(em_item(em_logsumexp(e, NULL, 0, false)), -INFINITY);
    cr_assert_eq(em_copy_to_host(em_logsumexp(em_zeros(EM_SHAPE(0, 3), EM_F64), (int[]){0}, 1,
                                              false), EM_F64, v), EM_OK);
    cr_expect(v[0] == -INFINITY && v[1] == -INFINITY && v[2] == -INFINITY);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    cr_assert(e->grad && e->grad->ndim == 2 && e->grad->shape[0] == 2 && e->grad->shape[1] == 0);
    /* torch.amax: "Expected reduction dim 1 to have non-zero size" */
    cr_assert_null(em_amax(e, (int[]){1}, 1, false));
    cr_expect_str_eq(em_error(), "em_amax: dim 1 of [2,0] is empty: it has no max");
    em_error_clear();
    cr_assert_null(em_amin(e, NULL, 0, true));
    cr_expect_str_eq(em_error(), "em_amin: dim 1 of [2,0] is empty: it has no min");
    em_error_clear();
}

Test(ops_forward, elementwise_and_where)
{
    em_tensor *a = mat(EM_SHAPE(2, 1), (double[]){1, -2});
    em_tensor *b = mat(EM_SHAPE(3), (double[]){0.5, 1, 2});
    expect_values(em_add(a, b), (double[]){1.5, 2, 3, -1.5, -1, 0}, 6, 0);
    expect_values(em_pow(em_abs(a), b), (double[]){1, 1, 1, sqrt(2), 2, 4}, 6, 1e-12);
    em_tensor *c = em_gt(a, em_scalar(0, EM_F64));
    cr_expect_eq(c->dtype, EM_BOOL);
    expect_values(em_where(c, a, b), (double[]){1, 1, 1, 0.5, 1, 2}, 6, 0);
    expect_values(em_clamp(b, 0.75, INFINITY), (double[]){0.75, 1, 2}, 3, 0);
    expect_values(em_relu(a), (double[]){1, 0}, 2, 0);
}

Test(ops_forward, views_share_storage_and_reshape_copies_when_needed)
{
    em_tensor *x = em_reshape(em_arange(0, 6, 1, EM_F64), EM_SHAPE(2, 3));
    em_tensor *v = em_reshape(x, EM_SHAPE(3, 2));
    cr_expect_eq(v->storage, x->storage);
    em_tensor *t = em_transpose(x, 0, 1);
    cr_expect_eq(t->storage, x->storage);
    cr_expect_not(em_is_contiguous(t));
    em_tensor *r = em_reshape(t, EM_SHAPE(6));
    cr_expect_neq(r->storage, x->storage);
    expect_values(r, (double[]){0, 3, 1, 4, 2, 5}, 6, 0);
    expect_values(em_slice(x, 1, 0, 3, 2), (double[]){0, 2, 3, 5}, 4, 0);
    expect_values(em_select(x, 0, 1), (double[]){3, 4, 5}, 3, 0);
    em_tensor *e = em_expand(em_select(x, 0, 0), EM_SHAPE(2, 3));
    expect_values(e, (double[]){0, 1, 2, 0, 1, 2}, 6, 0);
    expect_values(em_cat((em_tensor *[]){x, em_narrow(x, 0, 1, 1)}, 2, 0),
                  (double[]){0, 1, 2, 3, 4, 5, 3, 4, 5}, 9, 0);
    expect_values(em_index_select(x, 1, em_from_data(EM_SHAPE(2), EM_I64, (int64_t[]){2, 0})),
                  (double[]){2, 0, 5, 3}, 4, 0);
    expect_values(em_gather(x, 1, em_from_data(EM_SHAPE(2, 1), EM_I64, (int64_t[]){1, 2})),
                  (double[]){1, 5}, 2, 0);
}

Test(ops_forward, sum_of_bool_and_int_counts_in_i64)
{
    int64_t v[5] = {1, 2, 3, 2, 2};
    em_tensor *a = em_from_data(EM_SHAPE(5), EM_I64, v);
    em_tensor *hits = em_sum_all(em_eq(a, em_full(EM_SHAPE(1), EM_I64, 2)));
    cr_assert(hits, "%s", em_error());
    cr_assert_eq(hits->dtype, EM_I64);
    cr_assert_eq(em_item(hits), 3.0);
    em_tensor *total = em_sum_all(a);
    cr_assert_eq(total->dtype, EM_I64);
    cr_assert_eq(em_item(total), 10.0);
}

Test(ops_forward, split_pieces)
{
    em_tensor *t = em_arange(0, 10, 1, EM_F32);
    em_tensor *parts[4];
    cr_assert_eq(em_split(t, 4, 0, parts, 4), 3);
    cr_expect_eq(parts[2]->shape[0], 2);
    cr_expect_eq(em_get(parts[1], (int64_t[]){0}), 4.0);
    cr_expect_eq(em_get(parts[2], (int64_t[]){1}), 9.0);
    cr_expect_eq(em_split(t, 4, 0, parts, 1), 3);
}

Test(ops_forward, one_hot_values)
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

Test(ops_forward, argmax_argmin_shapes)
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

/* em_lerp_ against PyTorch 2.15's Tensor.lerp_: a = tensor([0.1, -2.5, 3.75, 1e-3, 7.0, -0.3]),
 * e = tensor([1.3, 0.7, -1.25, 2.5, 7.0, -0.3001]); a.clone().lerp_(e, w) for each w (f32, and
 * on a.double() and e.double()); weight 1 gives end exactly; end broadcasts; in place (a tensor
 * that requires grad keeps being the same leaf). */
Test(ops_forward, lerp_in_place_matches_pytorch)
{
    const float a[6] = {0.1f, -2.5f, 3.75f, 1e-3f, 7.0f, -0.3f};
    const float e[6] = {1.3f, 0.7f, -1.25f, 2.5f, 7.0f, -0.3001f};
    const double weights[5] = {0.001, 0.3, 0.5, 0.999, 1.0};
    const double want[5][6] = {
        {0.10119999945163727, -2.496799945831299, 3.744999885559082, 0.003499000333249569, 7.0,
         -0.3000001013278961},
        {0.46000000834465027, -1.5399999618530273, 2.25, 0.750700056552887, 7.0,
         -0.30003002285957336},
        {0.699999988079071, -0.9000000357627869, 1.25, 1.250499963760376, 7.0,
         -0.3000500202178955},
        {1.298799991607666, 0.6968000531196594, -1.2450001239776611, 2.4975011348724365, 7.0,
         -0.3000999093055725},
        {1.2999999523162842, 0.699999988079071, -1.25, 2.5, 7.0, -0.3000999987125397}};
    em_tensor *end = em_from_data(EM_SHAPE(6), EM_F32, e);
    for (int k = 0; k < 5; k++) {
        em_tensor *t = em_requires_grad_(em_from_data(EM_SHAPE(6), EM_F32, a), true);
        cr_assert_eq(em_lerp_(t, end, weights[k]), EM_OK, "%s", em_error());
        cr_assert(t->requires_grad && !t->node, "still the same leaf");
        for (int i = 0; i < 6; i++) { /* PyTorch's vector kernel fuses the multiply-add */
            double got = em_get(t, (int64_t[]){i});
            cr_expect(fabs(got - want[k][i]) <= 0x1p-23 * fmax(1, fabs(want[k][i])),
                      "w %g, element %d: %.9g, PyTorch %.9g", weights[k], i, got, want[k][i]);
        }
        if (weights[k] == 1.0)
            cr_expect_arr_eq(em_data_ptr(t), e, sizeof e, "weight 1 gives end exactly");
    }
    em_tensor *t64 = em_to_dtype(em_from_data(EM_SHAPE(6), EM_F32, a), EM_F64);
    cr_assert_eq(em_lerp_(t64, em_to_dtype(end, EM_F64), 0.75), EM_OK, "%s", em_error());
    const double want64[6] = {0.9999999646097422, -0.10000000894069672, 0.0, 1.8752500000118744,
                              7.0, -0.300075002014637};
    for (int i = 0; i < 6; i++)
        cr_expect(fabs(em_get(t64, (int64_t[]){i}) - want64[i]) <= 1e-15, "f64 element %d", i);
    /* t = [[1, 2], [3, 4]] towards [0, 10] by 0.25: [[0.75, 4], [2.25, 5.5]] */
    em_tensor *m = em_from_data(EM_SHAPE(2, 2), EM_F32, (float[]){1, 2, 3, 4});
    cr_assert_eq(em_lerp_(m, em_from_data(EM_SHAPE(2), EM_F32, (float[]){0, 10}), 0.25), EM_OK);
    cr_expect_arr_eq(em_data_ptr(m), ((float[]){0.75f, 4, 2.25f, 5.5f}), 4 * sizeof(float));
    cr_assert_eq(em_lerp_(em_zeros(EM_SHAPE(2), EM_F32), m, 0.5), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_lerp_: end f32 [2,2] must broadcast to self f32 [2], of its "
                                 "floating dtype and device, with a finite weight (0.5)");
    em_error_clear();
}
