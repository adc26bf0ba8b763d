/* Tensors: creation, views over shared storage, contiguous and cast copies, broadcasting,
 * in-place writes, inspection, printing, devices and memory accounting. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_internal.h"

static void expect_values(const em_tensor *t, const double *want, int64_t n)
{
    cr_assert_eq(em_numel(t), n);
    double *got = malloc((size_t)n * sizeof *got);
    cr_assert_eq(em_copy_to_host(t, EM_F64, got), EM_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "element %lld: %g != %g", (long long)i, got[i], want[i]);
    free(got);
}

/* The text em_print writes for t. */
static char *print_text(const em_tensor *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    em_print(t, f);
    fclose(f);
    return buf;
}

Test(tensor, creation_values)
{
    em_tensor *z = em_zeros(EM_SHAPE(2, 3), EM_F32);
    expect_values(z, (double[]){0, 0, 0, 0, 0, 0}, 6);
    em_tensor *o = em_ones(EM_SHAPE(4), EM_I8);
    expect_values(o, (double[]){1, 1, 1, 1}, 4);
    em_tensor *f = em_full(EM_SHAPE(3), EM_BF16, -2.5);
    expect_values(f, (double[]){-2.5, -2.5, -2.5}, 3);
    em_tensor *s = em_scalar(7.25, EM_F64);
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(em_item(s), 7.25);
    em_tensor *a = em_arange(0, 5, 1, EM_I64);
    expect_values(a, (double[]){0, 1, 2, 3, 4}, 5);
    em_tensor *b = em_arange(1, 0, -0.25, EM_F32);
    expect_values(b, (double[]){1, 0.75, 0.5, 0.25}, 4);
    em_tensor *e = em_arange(3, 3, 1, EM_F32);
    cr_assert_eq(em_numel(e), 0);
    float data[6] = {1, 2, 3, 4, 5, 6};
    em_tensor *d = em_from_data(EM_SHAPE(3, 2), EM_F32, data);
    data[0] = 100; /* copied, not borrowed */
    expect_values(d, (double[]){1, 2, 3, 4, 5, 6}, 6);
    cr_assert_eq(em_size(d, -1), 2);
    cr_assert_eq(em_size(d, 0), 3);
    em_tensor *like = em_full_like(d, 9);
    cr_assert(em_same_shape(like, d));
    cr_assert_eq(like->dtype, EM_F32);
    expect_values(like, (double[]){9, 9, 9, 9, 9, 9}, 6);
    em_tensor *zl = em_zeros_like(o), *ol = em_ones_like(z), *el = em_empty_like(f);
    expect_values(zl, (double[]){0, 0, 0, 0}, 4);
    expect_values(ol, (double[]){1, 1, 1, 1, 1, 1}, 6);
    cr_assert(em_same_shape(el, f) && el->dtype == EM_BF16);
    em_tensor *all[] = {z, o, f, s, a, b, e, d, like, zl, ol, el};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_release(all[i]);
    cr_assert(!em_has_error(), "%s", em_error());
}

Test(tensor, alias_shares_storage)
{
    em_tensor *t = em_arange(0, 6, 1, EM_F32);
    em_tensor *m = em_tensor_alias(t, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1}, 0);
    em_tensor *row1 = em_tensor_alias(t, 1, (int64_t[]){3}, (int64_t[]){1}, 3);
    cr_assert_eq(m->storage, t->storage);
    cr_assert_eq(em_get(m, (int64_t[]){1, 2}), 5);
    cr_assert_eq(em_fill_(row1, -1), EM_OK); /* write through one alias ... */
    expect_values(t, (double[]){0, 1, 2, -1, -1, -1}, 6); /* ... read through the others */
    cr_assert_eq(em_get(m, (int64_t[]){1, 0}), -1);
    cr_assert_eq(em_data_ptr(row1), (float *)em_data_ptr(t) + 3);
    /* a view past the end of the storage is refused */
    cr_assert_null(em_tensor_alias(t, 1, (int64_t[]){4}, (int64_t[]){1}, 3));
    cr_assert_str_eq(em_error(), "em_tensor_alias: view [4] at offset 3 exceeds storage of 6 "
                                 "elements");
    em_error_clear();
    em_release(t); /* the views keep the storage alive */
    expect_values(m, (double[]){0, 1, 2, -1, -1, -1}, 6);
    em_release(m);
    em_release(row1);
}

Test(tensor, contiguous_raw_of_permuted_alias)
{
    em_tensor *t = em_arange(0, 6, 1, EM_F32);                                   /* (2, 3) */
    em_tensor *tt = em_tensor_alias(t, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 0); /* (3, 2) */
    cr_assert(!em_is_contiguous(tt));
    cr_assert(em_is_contiguous(t));
    em_tensor *c = em_tensor_contiguous_raw(tt);
    cr_assert_neq(c->storage, t->storage);
    cr_assert(em_is_contiguous(c));
    cr_assert_eq(c->shape[0], 3);
    cr_assert_eq(c->strides[0], 2);
    expect_values(c, (double[]){0, 3, 1, 4, 2, 5}, 6);
    expect_values(tt, (double[]){0, 3, 1, 4, 2, 5}, 6);
    /* already contiguous: the same tensor, one more reference */
    em_tensor *same = em_tensor_contiguous_raw(c);
    cr_assert_eq(same, c);
    cr_assert_eq(em_tensor_refcount(c), 2);
    em_release(same);
    em_tensor *h = em_tensor_cast_raw(tt, EM_F16);
    cr_assert_eq(h->dtype, EM_F16);
    expect_values(h, (double[]){0, 3, 1, 4, 2, 5}, 6);
    em_tensor *neg = em_full(EM_SHAPE(2), EM_F32, -2.75);
    em_tensor *i = em_tensor_cast_raw(neg, EM_I32);
    expect_values(i, (double[]){-2, -2}, 2);
    em_release(neg);
    em_release(h);
    em_release(i);
    em_release(c);
    em_release(tt);
    em_release(t);
}

static void expect_broadcast(em_shape a, em_shape b, bool ok, em_shape want)
{
    em_shape out;
    cr_assert_eq(em_broadcast_shapes(&a, &b, &out), ok);
    if (!ok)
        return;
    cr_assert_eq(out.ndim, want.ndim);
    for (int i = 0; i < want.ndim; i++)
        cr_assert_eq(out.d[i], want.d[i]);
}

Test(tensor, broadcast_shapes)
{
    expect_broadcast(EM_SHAPE(3, 1), EM_SHAPE(1, 4), true, EM_SHAPE(3, 4));
    expect_broadcast(EM_SHAPE(5, 3, 4), EM_SHAPE(4), true, EM_SHAPE(5, 3, 4));
    expect_broadcast(EM_SCALAR_SHAPE, EM_SHAPE(2, 3), true, EM_SHAPE(2, 3));
    expect_broadcast(EM_SHAPE(2, 1, 3), EM_SHAPE(7, 1), true, EM_SHAPE(2, 7, 3));
    expect_broadcast(EM_SHAPE(0, 1), EM_SHAPE(1, 5), true, EM_SHAPE(0, 5));
    expect_broadcast(EM_SHAPE(3), EM_SHAPE(4), false, EM_SCALAR_SHAPE);
    expect_broadcast(EM_SHAPE(2, 3), EM_SHAPE(3, 2), false, EM_SCALAR_SHAPE);

    em_tensor *t = em_zeros(EM_SHAPE(3, 1), EM_F32);
    em_shape to = EM_SHAPE(2, 3, 4);
    em_arr a = em_tensor_arr_broadcast(t, &to);
    cr_assert_eq(a.ndim, 3);
    cr_assert_eq(a.strides[0], 0);
    cr_assert_eq(a.strides[1], 1);
    cr_assert_eq(a.strides[2], 0);
    cr_assert_eq(a.shape[2], 4);
    em_release(t);
}

Test(tensor, shape_helpers)
{
    em_shape s = EM_SHAPE(2, 3, 4);
    int64_t strides[3];
    em_contiguous_strides(&s, strides);
    cr_assert(strides[0] == 12 && strides[1] == 4 && strides[2] == 1);
    cr_assert_eq(em_shape_numel(&s), 24);
    char buf[64];
    cr_assert_str_eq(em_shape_fmt(&s, buf, sizeof buf), "[2,3,4]");
    cr_assert_str_eq(em_shape_fmt(&EM_SCALAR_SHAPE, buf, sizeof buf), "[]");
    em_tensor *t = em_empty(EM_SHAPE(64, 784), EM_F32);
    cr_assert_str_eq(em_shape_str(t, buf, sizeof buf), "[64,784]");
    em_release(t);
}

/* em_checked_elements, the one check of sizes an op derives from its arguments: negative and
 * overflowing sizes, and bytes beyond what the device holds (a budget, else the CPU's physical
 * memory), refused with the caller's name and the sizes; em_empty goes through it and refuses
 * before allocating; a view, which allocates nothing, does not. */
Test(tensor, checked_elements_refuse_what_no_device_holds)
{
    int64_t n = -1;
    cr_assert(em_checked_elements("op", (int64_t[]){2, 3, 4}, 3, EM_F32, EM_CPU, &n));
    cr_assert_eq(n, 24);
    cr_assert(em_checked_elements("op", NULL, 0, EM_F32, EM_CPU, &n) && n == 1);
    cr_assert(!em_checked_elements("op", (int64_t[]){2, -3}, 2, EM_F32, EM_CPU, &n));
    cr_assert_str_eq(em_error(), "op: negative dimension: [2,-3]");
    em_error_clear();
    cr_assert(!em_checked_elements("op", (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 30}, 2,
                                   EM_U8, EM_CPU, &n));
    cr_assert_str_eq(em_error(), "op: shape too large: [1099511627776,1073741824]");
    em_error_clear();
    cr_assert(!em_checked_elements("op", (int64_t[]){(int64_t)1 << 61}, 1, EM_F64, EM_CPU, &n));
    cr_assert_str_eq(em_error(), "op: shape too large: [2305843009213693952]");
    em_error_clear();
    cr_assert(!em_checked_elements("op", (int64_t[]){(int64_t)1 << 40}, 1, EM_F32, EM_CPU, &n));
    cr_assert_eq(em_error_status(), EM_ERR_MEMORY);
    cr_assert(strstr(em_error(), "op: shape [1099511627776] of f32 needs 4398046511104 bytes, more "
                                 "than cpu holds (its physical memory: "), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_memory_set_budget(EM_CPU, (size_t)1 << 20), EM_OK);
    cr_assert(em_checked_elements("op", (int64_t[]){512, 512}, 2, EM_F32, EM_CPU, &n));
    cr_assert(!em_checked_elements("op", (int64_t[]){512, 513}, 2, EM_F32, EM_CPU, &n));
    cr_assert_str_eq(em_error(), "op: shape [512,513] of f32 needs 1050624 bytes, more than cpu "
                                 "holds (its memory budget: 1048576 bytes)");
    em_error_clear();
    uint64_t before = em_memory_get_stats(EM_CPU).n_allocs;
    cr_assert_null(em_empty(EM_SHAPE(512, 513), EM_F32));
    cr_assert_str_eq(em_error(), "em_empty: shape [512,513] of f32 needs 1050624 bytes, more than "
                                 "cpu holds (its memory budget: 1048576 bytes)");
    cr_assert_eq(em_memory_get_stats(EM_CPU).n_allocs, before);
    em_error_clear();
    em_tensor *one = em_zeros(EM_SHAPE(1), EM_F32);
    em_tensor *wide = em_tensor_alias(one, 2, (int64_t[]){1 << 20, 1 << 20}, (int64_t[]){0, 0},
                                      0); /* a broadcast view */
    cr_assert_not_null(wide, "a view allocates nothing: %s", em_error());
    em_release(wide);
    em_release(one);
    cr_assert_eq(em_memory_set_budget(EM_CPU, 0), EM_OK);
}

/* An empty tensor still has strides: the product of its nonzero dims must fit, or the outer
 * stride of [0, 2^62, 2^62] would overflow. */
Test(tensor, sizes_overflow_even_with_a_zero_dim)
{
    const int64_t big = (int64_t)1 << 62;
    em_shape s = EM_SHAPE(0, big, big);
    cr_expect_eq(em_shape_numel(&s), -1);
    cr_expect_null(em_empty(s, EM_F32));
    cr_expect_str_eq(em_error(), "em_empty: shape too large: [0,4611686018427387904,"
                                 "4611686018427387904]");
    em_error_clear();
    em_shape fits = EM_SHAPE(0, big / 2, 2);
    cr_expect_eq(em_shape_numel(&fits), 0);
    em_tensor *t = em_empty(fits, EM_U8);
    cr_assert_not_null(t, "%s", em_error());
    int64_t strides[3];
    em_contiguous_strides(&fits, strides);
    cr_expect(strides[0] == big && strides[1] == 2 && strides[2] == 1);
    em_release(t);
}

Test(tensor, copy_broadcast_convert_and_overlap)
{
    em_tensor *dst = em_zeros(EM_SHAPE(2, 3), EM_F32);
    double row[3] = {1.5, -2, 3};
    em_tensor *src = em_from_data(EM_SHAPE(3), EM_F64, row);
    cr_assert_eq(em_copy_(dst, src), EM_OK);
    expect_values(dst, (double[]){1.5, -2, 3, 1.5, -2, 3}, 6);
    em_tensor *bad = em_zeros(EM_SHAPE(2), EM_F32);
    cr_assert_eq(em_copy_(dst, bad), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_copy_: source [2] does not broadcast to destination [2,3]");
    em_error_clear();

    /* in-place transpose: the source is a view of the destination's storage */
    em_tensor *sq = em_arange(0, 9, 1, EM_I32);
    em_tensor *m = em_tensor_alias(sq, 2, (int64_t[]){3, 3}, (int64_t[]){3, 1}, 0);
    em_tensor *mt = em_tensor_alias(sq, 2, (int64_t[]){3, 3}, (int64_t[]){1, 3}, 0);
    cr_assert_eq(em_copy_(m, mt), EM_OK);
    expect_values(m, (double[]){0, 3, 6, 1, 4, 7, 2, 5, 8}, 9);

    /* fill and zero on a strided view touch only the view */
    em_tensor *col = em_tensor_alias(sq, 1, (int64_t[]){3}, (int64_t[]){3}, 1);
    cr_assert_eq(em_zero_(col), EM_OK);
    expect_values(sq, (double[]){0, 0, 6, 1, 0, 7, 2, 0, 8}, 9);
    int64_t host[9], want[9] = {0, 1, 2, 0, 0, 0, 6, 7, 8}; /* the transpose, row-major */
    cr_assert_eq(em_copy_to_host(mt, EM_I64, host), EM_OK);
    for (int k = 0; k < 9; k++)
        cr_assert_eq(host[k], want[k]);
    em_tensor *all[] = {dst, src, bad, sq, m, mt, col};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_release(all[i]);
}

Test(tensor, item_get_and_errors)
{
    em_tensor *t = em_arange(0, 6, 1, EM_F32);
    cr_assert(isnan(em_item(t)));
    cr_assert_str_eq(em_error(), "em_item: need exactly one element: [6]");
    em_error_clear();
    cr_assert(isnan(em_get(t, (int64_t[]){6})));
    cr_assert_str_eq(em_error(), "em_get: index 6 out of range for dim 0 of [6]");
    em_error_clear();
    cr_assert_eq(em_size(t, 1), -1);
    cr_assert_str_eq(em_error(), "em_size: dim 1 out of range for [6]");
    em_error_clear();
    cr_assert_eq(em_get(t, (int64_t[]){4}), 4);
    em_release(t);
}

Test(tensor, print_small)
{
    em_tensor *t = em_from_data(EM_SHAPE(2, 2), EM_F32, (float[]){1, 2, 3, 4});
    char *s = print_text(t);
    cr_assert_str_eq(s, "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], dtype=f32)\n");
    free(s);
    em_tensor *i = em_from_data(EM_SHAPE(2, 3), EM_I64, (int64_t[]){1, -2, 3, 4, 5, 600});
    s = print_text(i);
    cr_assert_str_eq(s, "tensor([[  1,  -2,   3],\n        [  4,   5, 600]], dtype=i64)\n");
    free(s);
    em_tensor *sc = em_scalar(3.5, EM_F64);
    s = print_text(sc);
    cr_assert_str_eq(s, "tensor(3.5000, dtype=f64)\n");
    free(s);
    em_tensor *b = em_from_data(EM_SHAPE(3), EM_BOOL, (uint8_t[]){0, 1, 0});
    s = print_text(b);
    cr_assert_str_eq(s, "tensor([False,  True, False], dtype=bool)\n");
    free(s);
    em_tensor *tiny = em_full(EM_SHAPE(2), EM_F32, -1e-6);
    s = print_text(tiny);
    cr_assert_str_eq(s, "tensor([-1.0000e-06, -1.0000e-06], dtype=f32)\n");
    free(s);
    em_tensor *odd = em_from_data(EM_SHAPE(3), EM_F32, (float[]){NAN, -INFINITY, 1});
    s = print_text(odd);
    cr_assert_str_eq(s, "tensor([   nan,   -inf, 1.0000], dtype=f32)\n");
    free(s);
    em_tensor *all[] = {t, i, sc, b, tiny, odd};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        em_release(all[k]);
}

Test(tensor, print_summarised)
{
    em_tensor *t = em_arange(0, 2000, 1, EM_F32);
    char *s = print_text(t);
    cr_assert_str_eq(s, "tensor([   0.0000,    1.0000,    2.0000, ..., 1997.0000, 1998.0000, "
                        "1999.0000], dtype=f32)\n");
    free(s);
    em_tensor *m = em_tensor_alias(t, 2, (int64_t[]){100, 20}, (int64_t[]){20, 1}, 0);
    s = print_text(m);
    cr_assert_str_eq(s, "tensor([[   0.0000,    1.0000,    2.0000, ...,   17.0000,   18.0000,"
                        "   19.0000],\n"
                        "        [  20.0000,   21.0000,   22.0000, ...,   37.0000,   38.0000,"
                        "   39.0000],\n"
                        "        [  40.0000,   41.0000,   42.0000, ...,   57.0000,   58.0000,"
                        "   59.0000],\n"
                        "        ...,\n"
                        "        [1940.0000, 1941.0000, 1942.0000, ..., 1957.0000, 1958.0000,"
                        " 1959.0000],\n"
                        "        [1960.0000, 1961.0000, 1962.0000, ..., 1977.0000, 1978.0000,"
                        " 1979.0000],\n"
                        "        [1980.0000, 1981.0000, 1982.0000, ..., 1997.0000, 1998.0000,"
                        " 1999.0000]], dtype=f32)\n");
    free(s);
    em_release(m);
    em_release(t);
}

Test(tensor, to_device)
{
    em_tensor *t = em_arange(0, 4, 1, EM_F32);
    if (em_backend_get(EM_CUDA) == NULL) {
        cr_assert_null(em_to_device(t, EM_CUDA));
        cr_assert_str_eq(em_error(), "em_to_device: cuda backend not available");
        em_error_clear();
    } else {
        em_tensor *g = em_to_device(t, EM_CUDA);
        cr_assert_eq(g->device, EM_CUDA);
        em_tensor *back = em_to_device(g, EM_CPU);
        expect_values(back, (double[]){0, 1, 2, 3}, 4);
        em_release(back);
        em_release(g);
    }
    em_tensor *copy = em_to_device(t, EM_CPU); /* a copy, even on the same device */
    cr_assert_neq(copy->storage, t->storage);
    expect_values(copy, (double[]){0, 1, 2, 3}, 4);
    em_release(copy);
    em_release(t);
}

Test(tensor, memory_accounting)
{
    em_memory_stats before = em_memory_get_stats(EM_CPU);
    em_tensor *a = em_empty(EM_SHAPE(10, 10), EM_F32);
    em_memory_stats s1 = em_memory_get_stats(EM_CPU);
    cr_assert_eq(s1.live_bytes, before.live_bytes + 400);
    cr_assert_eq(s1.n_allocs, before.n_allocs + 1);
    cr_assert_eq(s1.live_storages, before.live_storages + 1);
    em_tensor *v = em_tensor_alias(a, 1, (int64_t[]){100}, (int64_t[]){1}, 0);
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_bytes, s1.live_bytes); /* views are free */
    em_tensor *b = em_empty(EM_SHAPE(3), EM_F64);
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_bytes, before.live_bytes + 424);
    em_release(a);
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_bytes, before.live_bytes + 424);
    em_release(v);
    em_memory_stats s2 = em_memory_get_stats(EM_CPU);
    cr_assert_eq(s2.live_bytes, before.live_bytes + 24);
    cr_assert_eq(s2.n_frees, before.n_frees + 1);
    em_release(b);
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_bytes, before.live_bytes);

    em_memory_reset_peak(EM_CPU);
    cr_assert_eq(em_memory_get_stats(EM_CPU).peak_bytes, before.live_bytes);
    em_tensor *big = em_empty(EM_SHAPE(1000), EM_I8);
    em_release(big);
    em_memory_stats s3 = em_memory_get_stats(EM_CPU);
    cr_assert_eq(s3.peak_bytes, before.live_bytes + 1000);
    cr_assert_eq(s3.live_bytes, before.live_bytes);
    cr_assert_eq(s3.live_storages, before.live_storages);
}

static struct em_node *released_node;

static void record_node_release(struct em_node *node)
{
    released_node = node;
}

Test(tensor, release_frees_grad_and_node)
{
    size_t base = em_memory_get_stats(EM_CPU).live_bytes;
    em_tensor *t = em_zeros(EM_SHAPE(8), EM_F32);
    t->grad = em_ones(EM_SHAPE(8), EM_F32);
    static int fake_node;
    t->node = (struct em_node *)&fake_node;
    void (*saved)(struct em_node *) = em_tensor_node_release_hook;
    em_tensor_node_release_hook = record_node_release;
    em_retain(t);
    em_release(t);
    cr_assert_null(released_node);
    em_release(t);
    em_tensor_node_release_hook = saved;
    cr_assert_eq(released_node, (struct em_node *)&fake_node);
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_bytes, base);
}

Test(tensor, hash_of_dtype_shape_and_values)
{
    em_tensor *x = em_from_data(EM_SHAPE(2), EM_F32, (float[]){1, 2});
    em_tensor *x2 = em_from_data(EM_SHAPE(1, 2), EM_F32, (float[]){1, 2});
    em_tensor *x64 = em_from_data(EM_SHAPE(2), EM_F64, (double[]){1, 2});
    em_tensor *near = em_from_data(EM_SHAPE(2), EM_F32, (float[]){1, 2.0000002f});
    cr_assert_neq(em_tensor_hash(x), em_tensor_hash(x2), "another shape");
    cr_assert_neq(em_tensor_hash(x), em_tensor_hash(x64), "another dtype");
    cr_assert_neq(em_tensor_hash(x), em_tensor_hash(near), "one differing byte");
    em_tensor *m = em_from_data(EM_SHAPE(2, 2), EM_F32, (float[]){1, 9, 2, 9});
    em_tensor *col = em_tensor_alias(m, 1, (int64_t[]){2}, (int64_t[]){2}, 0); /* m[:, 0] */
    cr_assert(!em_is_contiguous(col));
    cr_assert_eq(em_tensor_hash(col), em_tensor_hash(x), "a strided view hashes its values");
    em_release(x), em_release(x2), em_release(x64), em_release(near), em_release(col);
    em_release(m);
}

/* em_copy_to_host_new: a strided view's elements in row-major order, converted, in a new buffer;
 * a bad dtype or a NULL tensor is an error naming it */
Test(tensor, copy_to_host_new_converts_a_view)
{
    em_tensor *t = em_from_data(EM_SHAPE(2, 3), EM_F32, (float[]){1.5f, -2, 3, 4, 5, 6.75f});
    em_tensor *tt = em_tensor_alias(t, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 0); /* t^T */
    int64_t *v = em_copy_to_host_new(tt, EM_I64);
    cr_assert_not_null(v, "%s", em_error());
    int64_t want[6] = {1, 4, -2, 5, 3, 6};
    cr_assert_arr_eq(v, want, sizeof want);
    free(v);
    cr_assert_null(em_copy_to_host_new(t, (em_dtype)99));
    cr_assert_str_eq(em_error(), "em_copy_to_host_new: dtype 99 is not one of ember's");
    em_error_clear();
    cr_assert_null(em_copy_to_host_new(NULL, EM_F32));
    cr_assert_str_eq(em_error(), "em_copy_to_host_new: t is NULL");
    em_error_clear();
}
