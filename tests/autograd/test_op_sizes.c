/* Output sizes the ops derive from their arguments (interpolation sizes and scale factors, pads,
 * convolution and pooling options, class and sample counts, concatenation): checked against
 * overflow and against what the device can hold before anything is allocated, so an argument
 * small enough to send never makes an op take memory it then fails on, or compute a bogus
 * shape. A memory budget stands in for a small machine: an op refused under it must not have
 * allocated a byte. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "ember.h"

#define BUDGET ((size_t)16 << 20)

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

TestSuite(op_sizes, .init = fresh, .fini = done);

static uint64_t allocations(void)
{
    return em_memory_get_stats(EM_CPU).n_allocs;
}

/* y is NULL with status st and a message holding part, and nothing was allocated since before */
static void expect_refused(const em_tensor *y, em_status st, const char *part, uint64_t before)
{
    char b[128];
    cr_assert_null(y, "a tensor %s where an error with '%s' was expected",
                   y ? em_shape_str(y, b, sizeof b) : "", part);
    cr_assert_eq(em_error_status(), st, "status %d: %s", em_error_status(), em_error());
    cr_assert_not_null(strstr(em_error(), part), "'%s' lacks '%s'", em_error(), part);
    cr_assert_eq(allocations(), before, "%llu allocations before the refusal: %s",
                 (unsigned long long)(allocations() - before), em_error());
    em_error_clear();
}

/* The 4x4 input and the budget: the first pass of a resize fits, the whole output does not. */
static em_tensor *small_input(void)
{
    em_tensor *x = em_ones(EM_SHAPE(1, 1, 4, 4), EM_F32);
    cr_assert_eq(em_memory_set_budget(EM_CPU, BUDGET), EM_OK);
    return x;
}

Test(op_sizes, interpolate_checks_the_whole_output_before_its_first_pass)
{
    em_tensor *x = small_input();
    const char *want = "em_interpolate: shape [1,1,4096,4096] of f32 needs 67108864 bytes, more "
                       "than cpu holds (its memory budget: 16777216 bytes)";
    em_interp_mode modes[2] = {EM_INTERP_NEAREST, EM_INTERP_BILINEAR};
    for (int m = 0; m < 2; m++) {
        uint64_t before = allocations();
        expect_refused(em_interpolate(x, (em_interpolate_opts){.mode = modes[m],
                                                               .size = {4096, 4096}}),
                       EM_ERR_MEMORY, want, before);
        expect_refused(em_interpolate(x, (em_interpolate_opts){.mode = modes[m],
                                                               .scale_factor = {1024, 1024}}),
                       EM_ERR_MEMORY, want, before);
    }
    /* a pass that shrinks one dim does not hide a larger one before it: (1,1,4096,4096) first */
    em_tensor *tall = em_ones(EM_SHAPE(1, 1, 4096, 1), EM_F32);
    uint64_t before = allocations();
    expect_refused(em_interpolate(tall, (em_interpolate_opts){.size = {1, 4096}}), EM_ERR_MEMORY,
                   "shape [1,1,4096,4096] of f32 needs", before);
    /* one size under the budget still resizes */
    em_tensor *y = em_interpolate(x, (em_interpolate_opts){.size = {512, 512}});
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[2] == 512 && y->shape[3] == 512);
}

Test(op_sizes, interpolate_to_sizes_no_machine_holds_fails_at_once)
{
    em_tensor *x = em_ones(EM_SHAPE(1, 1, 4, 4), EM_F32);
    uint64_t before = allocations();
    expect_refused(em_interpolate(x, (em_interpolate_opts){.size = {(int64_t)1 << 28,
                                                                    (int64_t)1 << 28}}),
                   EM_ERR_MEMORY, "em_interpolate: shape [1,1,268435456,268435456] of f32 needs "
                   "288230376151711744 bytes, more than cpu holds (its physical memory", before);
    expect_refused(em_interpolate(x, (em_interpolate_opts){.size = {(int64_t)1 << 40, 4}}),
                   EM_ERR_MEMORY, "more than cpu holds", before);
}

Test(op_sizes, pad_checks_every_pass_before_the_first)
{
    em_tensor *x = small_input();
    em_pad_mode modes[2] = {EM_PAD_CONSTANT, EM_PAD_REPLICATE};
    for (int m = 0; m < 2; m++) {
        uint64_t before = allocations();
        expect_refused(em_pad(x, (int64_t[]){4092, 0, 4092, 0}, 4, modes[m], 0), EM_ERR_MEMORY,
                       "em_pad: shape [1,1,4096,4096] of f32 needs 67108864 bytes", before);
    }
    /* cropping the second dim after growing the last: the first pass is the larger one */
    uint64_t before = allocations();
    expect_refused(em_pad(x, (int64_t[]){0, 1 << 20, -3, 0}, 4, EM_PAD_CONSTANT, 0), EM_ERR_MEMORY,
                   "em_pad: shape [1,1,4,1048580] of f32 needs", before);
}

Test(op_sizes, pad_refuses_a_size_that_overflows)
{
    em_tensor *one = em_zeros(EM_SHAPE(1), EM_U8);
    em_tensor *wide = em_expand(one, EM_SHAPE(INT64_MAX - 8)); /* a view: no bytes behind it */
    cr_assert_not_null(wide, "%s", em_error());
    int64_t pads[2] = {(int64_t)1 << 61, (int64_t)1 << 61};
    uint64_t before = allocations();
    expect_refused(em_pad(wide, pads, 2, EM_PAD_CONSTANT, 0), EM_ERR_ARG,
                   "em_pad: constant padding (2305843009213693952, 2305843009213693952) of dim 0 "
                   "of [9223372036854775799] overflows the size", before);
}

Test(op_sizes, conv_transpose2d_options_cannot_overflow_its_output_size)
{
    em_tensor *x = em_ones(EM_SHAPE(1, 1, 4, 4), EM_F32), *w = em_ones(EM_SHAPE(1, 3, 3, 3), EM_F32);
    em_conv_transpose2d_opts bad[] = {
        {.padding = {INT64_MAX, 0}},
        {.padding = {0, INT64_MAX / 2 + 1}},
        {.stride = {INT64_MAX, 1}},
        {.stride = {(int64_t)1 << 62, 1}},
        {.dilation = {1, INT64_MAX}},
        {.dilation = {INT64_MAX / 2, 1}, .output_padding = {INT64_MAX / 2 - 1, 0}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t before = allocations();
        expect_refused(em_conv_transpose2d(x, w, NULL, bad[i]), EM_ERR_ARG,
                       "em_conv_transpose2d: bad shapes or options", before);
    }
    /* an output size that fits int64 but no memory: refused before its output is made */
    uint64_t before = allocations();
    expect_refused(em_conv_transpose2d(x, w, NULL, (em_conv_transpose2d_opts){
                                                       .stride = {(int64_t)1 << 40, 1}}),
                   EM_ERR_MEMORY, "em_conv_transpose2d: shape [1,3,3298534883331,6] of f32 needs",
                   before);
    em_tensor *y = em_conv_transpose2d(x, w, NULL, (em_conv_transpose2d_opts){.stride = {2, 1}});
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[1] == 3 && y->shape[2] == 9 && y->shape[3] == 6);
}

Test(op_sizes, conv2d_and_pooling_options_cannot_overflow_their_windows)
{
    em_tensor *x = em_ones(EM_SHAPE(1, 1, 4, 4), EM_F32), *w = em_ones(EM_SHAPE(1, 1, 5, 3), EM_F32);
    /* dilation 2^62 spans (5 - 1) 2^62 = 2^64 rows: no window fits (it wrapped to 0) */
    em_conv2d_opts conv_bad[] = {
        {.dilation = {(int64_t)1 << 62, 1}},
        {.padding = {(int64_t)1 << 62, 0}},
        {.padding = {INT64_MAX, 0}},
        {.groups = (int64_t)1 << 62},
    };
    for (size_t i = 0; i < sizeof conv_bad / sizeof conv_bad[0]; i++) {
        uint64_t before = allocations();
        expect_refused(em_conv2d(x, w, NULL, conv_bad[i]), EM_ERR_ARG, "em_conv2d: bad shapes",
                       before);
    }
    uint64_t before = allocations();
    expect_refused(em_conv2d(x, w, NULL, (em_conv2d_opts){.padding = {EM_PADDING_SAME, 0},
                                                          .dilation = {INT64_MAX, 1}}),
                   EM_ERR_ARG, "em_conv2d: padding EM_PADDING_SAME of w [1,1,5,3] with dilation "
                   "9223372036854775807 overflows a size", before);
    em_pool2d_opts pool_bad[] = {
        {.kernel = {(int64_t)1 << 32, (int64_t)1 << 32}},
        {.kernel = {INT64_MAX, 1}, .padding = {INT64_MAX / 2, 0}},
        {.kernel = {3, 3}, .dilation = {(int64_t)1 << 62, 1}}, /* max pooling's only */
    };
    for (size_t i = 0; i < sizeof pool_bad / sizeof pool_bad[0]; i++) {
        before = allocations();
        expect_refused(em_max_pool2d(x, pool_bad[i]), EM_ERR_ARG, "em_max_pool2d: ", before);
        if (i < 2)
            expect_refused(em_avg_pool2d(x, pool_bad[i]), EM_ERR_ARG, "em_avg_pool2d: kernel",
                           before);
    }
}

Test(op_sizes, one_hot_checks_its_output_before_the_classes)
{
    em_tensor *index = em_zeros(EM_SHAPE(1000), EM_I64);
    cr_assert_eq(em_memory_set_budget(EM_CPU, BUDGET), EM_OK);
    uint64_t before = allocations();
    expect_refused(em_one_hot(index, 1 << 16), EM_ERR_MEMORY,
                   "em_one_hot: shape [1000,65536] of i64 needs 524288000 bytes", before);
    em_tensor *y = em_one_hot(index, 10);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[0] == 1000 && y->shape[1] == 10);
}

Test(op_sizes, counts_and_concatenations_that_overflow_are_refused)
{
    uint64_t before = allocations();
    em_tensor *p = em_full(EM_SHAPE(4, 3), EM_F32, 1);
    before = allocations();
    expect_refused(em_multinomial(p, INT64_MAX / 2, true, NULL), EM_ERR_ARG,
                   "em_multinomial: shape too large: [4,4611686018427387903]", before);
    expect_refused(em_arange(0, 0x1p40, 1, EM_F32), EM_ERR_MEMORY,
                   "em_arange: shape [1099511627776] of f64 needs 8796093022208 bytes", before);
    em_tensor *one = em_zeros(EM_SHAPE(1), EM_U8);
    em_tensor *half = em_expand(one, EM_SHAPE((int64_t)1 << 62));
    before = allocations();
    expect_refused(em_cat((em_tensor *[]){half, half}, 2, 0), EM_ERR_ARG,
                   "em_cat: the 2 tensors' sizes along dim 0 add up beyond int64", before);
    expect_refused(em_cat((em_tensor *[]){half, one}, 2, 0), EM_ERR_MEMORY,
                   "em_cat: shape [4611686018427387905] of u8 needs", before);
}
