/* nn module tree: names and traversal order, find, train/eval, parameter counts of the reference
 * models, a custom module end to end, error handling, scopes and the summary table. */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/nn.h"

static void set_values(em_tensor *t, const double *v)
{
    em_tensor *src = em_from_data(em_shape_of(t), EM_F64, v);
    cr_assert_eq(em_copy_(t, src), EM_OK, "%s", em_error());
    em_release(src);
}

static void get_values(const em_tensor *t, double *out)
{
    cr_assert_eq(em_copy_to_host(t, EM_F64, out), EM_OK, "%s", em_error());
}

/* y = fc(x) * scale: a parameter of its own and a child */
static em_tensor *scaled_forward(em_module *m, const em_tensor *x)
{
    em_scope_begin();
    em_tensor *y = em_mul(em_forward(m->children[0].module, x), m->params[0].value);
    em_keep(y);
    em_scope_end();
    return y;
}

static const em_module_type scaled_type = {.type_name = "Scaled", .forward = scaled_forward};

static em_module *scaled_new(void)
{
    em_module *m = em_module_alloc(sizeof *m, &scaled_type);
    em_module_add_param(m, "scale", em_ones(EM_SHAPE(2), EM_F32));
    em_module_add_child(m, "fc", em_linear_layer(3, 2, true));
    return m;
}

static em_module *reference_mlp(void)
{
    return em_sequential(5, em_linear_layer(784, 512, true), em_relu_layer(),
                         em_linear_layer(512, 256, true), em_relu_layer(),
                         em_linear_layer(256, 10, true));
}

static em_module *reference_cnn(void)
{
    em_conv2d_layer_opts pad1 = {.padding = 1};
    em_pool2d_layer_opts halve = {0};
    return em_sequential(10, em_conv2d_layer(1, 32, 3, pad1), em_relu_layer(),
                         em_max_pool2d_layer(2, halve), em_conv2d_layer(32, 64, 3, pad1),
                         em_relu_layer(), em_max_pool2d_layer(2, halve), em_flatten_layer(),
                         em_linear_layer(3136, 128, true), em_relu_layer(),
                         em_linear_layer(128, 10, true));
}

static void setup(void)
{
    em_error_clear();
    em_manual_seed(0);
}

TestSuite(nn_module, .init = setup);

Test(nn_module, hierarchical_names_in_depth_first_order)
{
    em_module *root = scaled_new();
    em_module_add_child(root, "features",
                        em_sequential(3, em_linear_layer(2, 4, true), em_relu_layer(),
                                      em_linear_layer(4, 1, false)));
    em_param_ref refs[8];
    int n = em_module_parameters(root, refs, 8);
    const char *want[] = {"scale", "fc.weight", "fc.bias", "features.0.weight", "features.0.bias",
                          "features.2.weight"};
    cr_assert_eq(n, 6);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(refs[i].name, want[i]);
        cr_assert(refs[i].value->requires_grad, "%s must require grad", want[i]);
        cr_assert_eq(em_module_find(root, want[i]), refs[i].value);
    }
    cr_assert_eq(em_size(em_module_find(root, "features.0.weight"), 0), 4);
    cr_assert_null(em_module_find(root, "features.1.weight"));
    cr_assert_null(em_module_find(root, "nothing"));

    /* the count is returned even when fewer entries fit, and names stay valid across calls */
    em_param_ref two[2];
    cr_assert_eq(em_module_parameters(root, two, 2), 6);
    cr_assert_eq(two[1].name, refs[1].name);
    cr_assert_eq(em_module_num_params(root), 2 + 6 + 2 + 8 + 4 + 4);

    /* a subtree names relative to itself */
    em_module *features = root->children[1].module;
    cr_assert_eq(em_module_parameters(features, refs, 8), 3);
    cr_assert_str_eq(refs[2].name, "2.weight");
    em_module_free(root);
}

Test(nn_module, buffers_traverse_like_parameters)
{
    em_module *net = em_sequential(2, em_linear_layer(3, 3, true),
                                   em_batch_norm1d_layer(3, (em_batch_norm_opts){0}));
    em_param_ref refs[4];
    cr_assert_eq(em_module_buffers(net, refs, 4), 3);
    cr_assert_str_eq(refs[0].name, "1.running_mean");
    cr_assert_str_eq(refs[1].name, "1.running_var");
    cr_assert_str_eq(refs[2].name, "1.num_batches_tracked");
    cr_assert_eq(refs[2].value->dtype, EM_I64);
    cr_assert_not(refs[0].value->requires_grad);
    cr_assert_eq(em_module_find(net, "1.running_var"), refs[1].value);
    cr_assert_eq(em_module_parameters(net, refs, 4), 4);
    cr_assert_str_eq(refs[3].name, "1.bias");
    em_module_free(net);
}

Test(nn_module, reference_models_parameter_counts)
{
    em_module *mlp = reference_mlp(), *cnn = reference_cnn();
    cr_assert_not_null(mlp, "%s", em_error());
    cr_assert_not_null(cnn, "%s", em_error());
    cr_assert_eq(em_module_num_params(mlp), 535818);
    cr_assert_eq(em_module_num_params(cnn), 421642);
    em_scope_begin();
    em_tensor *y = em_forward(cnn, em_zeros(EM_SHAPE(2, 1, 28, 28), EM_F32));
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 2);
    cr_assert_eq(y->shape[1], 10);
    em_scope_end();
    em_module_free(mlp);
    em_module_free(cnn);
}

Test(nn_module, train_and_eval_are_recursive)
{
    em_module *net = em_sequential(2, em_linear_layer(2, 2, true),
                                   em_sequential(1, em_dropout_layer(0.5)));
    cr_assert(net->training);
    em_module_eval(net);
    cr_assert_not(net->training);
    cr_assert_not(net->children[0].module->training);
    cr_assert_not(net->children[1].module->children[0].module->training);
    em_module_train(net, true);
    cr_assert(net->children[1].module->children[0].module->training);
    em_module_free(net);
}

Test(nn_module, custom_module_forward_and_backward)
{
    em_module *m = scaled_new();
    set_values(em_module_find(m, "scale"), (double[]){2, -1});
    set_values(em_module_find(m, "fc.weight"), (double[]){1, 0, 1, 0, 1, 0});
    set_values(em_module_find(m, "fc.bias"), (double[]){0.5, -0.5});
    em_tensor *x = em_from_data(EM_SHAPE(1, 3), EM_F64, (double[]){1, 2, 3});
    em_tensor *x32 = em_to_dtype(x, EM_F32);
    em_tensor *y = em_forward(m, x32);
    cr_assert_not_null(y, "%s", em_error());
    double yv[2];
    get_values(y, yv);
    /* fc(x) = (1 + 3 + 0.5, 2 - 0.5) = (4.5, 1.5); times scale */
    cr_assert_float_eq(yv[0], 9.0, 1e-6);
    cr_assert_float_eq(yv[1], -1.5, 1e-6);

    em_tensor *loss = em_sum_all(y);
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    double g_scale[2], g_w[6], g_b[2];
    get_values(em_module_find(m, "scale")->grad, g_scale);
    get_values(em_module_find(m, "fc.weight")->grad, g_w);
    get_values(em_module_find(m, "fc.bias")->grad, g_b);
    double want_w[6] = {2, 4, 6, -1, -2, -3};
    cr_assert_float_eq(g_scale[0], 4.5, 1e-6);
    cr_assert_float_eq(g_scale[1], 1.5, 1e-6);
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(g_w[i], want_w[i], 1e-6);
    cr_assert_float_eq(g_b[0], 2.0, 1e-6);
    cr_assert_float_eq(g_b[1], -1.0, 1e-6);

    em_module_zero_grad(m);
    cr_assert_null(em_module_find(m, "fc.weight")->grad);
    em_release(loss);
    em_release(y);
    em_release(x32);
    em_release(x);
    em_module_free(m);
}

Test(nn_module, forward_of_null_keeps_the_first_error)
{
    em_module *net = reference_mlp();
    em_set_error(EM_ERR_ARG, "first failure");
    cr_assert_null(em_forward(net, NULL));
    cr_assert_str_eq(em_error(), "first failure");
    em_error_clear();

    em_tensor *bad = em_zeros(EM_SHAPE(2, 783), EM_F32);
    cr_assert_null(em_forward(net, bad));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_release(bad);
    em_module_free(net);
}

Test(nn_module, construction_errors)
{
    em_module *m = scaled_new();
    cr_assert_null(em_module_add_param(m, "scale", em_ones(EM_SHAPE(1), EM_F32)));
    cr_assert(strstr(em_error(), "\"scale\" is already used"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_module_add_param(m, "a.b", em_ones(EM_SHAPE(1), EM_F32)));
    cr_assert(strstr(em_error(), "must not contain"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_module_add_param(m, "idx", em_zeros(EM_SHAPE(1), EM_I64)));
    cr_assert(strstr(em_error(), "floating point"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_linear_layer(0, 3, true));
    cr_assert(strstr(em_error(), "em_linear_layer"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_sequential(3, em_relu_layer(), em_conv2d_layer(3, 4, 3,
                                 (em_conv2d_layer_opts){.groups = 2}), em_relu_layer()));
    cr_assert(strstr(em_error(), "em_conv2d_layer"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_sequential_append(em_sequential(0), NULL));
    em_error_clear();
    cr_assert_null(em_sequential_append(m, em_relu_layer()));
    cr_assert(strstr(em_error(), "not a Sequential"), "%s", em_error());
    em_module_free(NULL);
}

/* A module with many names (params, buffers and children past the count where a hash table
 * checks them) still refuses each one again, whichever list holds it, and takes new ones. */
Test(nn_module, a_repeated_name_is_refused_among_many)
{
    em_module *m = scaled_new();
    char name[16];
    for (int i = 0; i < 12; i++) {
        snprintf(name, sizeof name, "p%d", i);
        cr_assert_not_null(em_module_add_param(m, name, em_ones(EM_SHAPE(1), EM_F32)));
        snprintf(name, sizeof name, "b%d", i);
        cr_assert_not_null(em_module_add_buffer(m, name, em_zeros(EM_SHAPE(1), EM_F32)));
        snprintf(name, sizeof name, "c%d", i);
        cr_assert_not_null(em_module_add_child(m, name, em_relu_layer()));
    }
    const char *taken[] = {"scale", "fc", "p0", "p11", "b0", "b11", "c0", "c11"};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        cr_assert_null(em_module_add_buffer(m, taken[i], em_zeros(EM_SHAPE(1), EM_F32)));
        cr_assert(strstr(em_error(), "is already used"), "%s: %s", taken[i], em_error());
        em_error_clear();
        cr_assert_null(em_module_add_child(m, taken[i], em_relu_layer()));
        em_error_clear();
    }
    cr_assert_not_null(em_module_add_child(m, "c12", em_relu_layer()), "%s", em_error());
    cr_assert_eq(em_module_parameters(m, NULL, 0), 1 + 12 + 2);
    em_module_free(m);
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 40,000 children appended and their 80,000 dotted names handed out take time in proportion
 * (0.3 s here; checking each new name against all before, and each dotted name against all
 * handed out, took 33 s) */
Test(nn_module, forty_thousand_children_are_named_in_linear_time, .timeout = 120)
{
    enum { N = 40000 };
    double t0 = seconds_now();
    em_module *list = em_module_list(0);
    for (int i = 0; i < N && list; i++)
        list = em_module_list_append(list, em_linear_layer(1, 1, true));
    cr_assert_not_null(list, "%s", em_error());
    em_param_ref *refs = malloc(2 * N * sizeof *refs);
    cr_assert_eq(em_module_parameters(list, refs, 2 * N), 2 * N, "%s", em_error());
    double took = seconds_now() - t0;
    cr_assert_str_eq(refs[2 * N - 1].name, "39999.bias");
    cr_assert_leq(took, 4.0, "%.2f s", took);
    free(refs);
    em_module_free(list);
}

Test(nn_module, model_built_inside_a_scope_outlives_it)
{
    em_scope_begin();
    em_module *net = em_sequential(2, em_linear_layer(4, 3, true),
                                   em_batch_norm1d_layer(3, (em_batch_norm_opts){0}));
    em_scope_end();
    em_scope_begin();
    em_tensor *y = em_forward(net, em_ones(EM_SHAPE(5, 4), EM_F32));
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    cr_assert_not_null(em_module_find(net, "0.weight")->grad);
    em_scope_end();
    cr_assert_eq(em_item(em_module_find(net, "1.num_batches_tracked")), 1.0);
    em_module_free(net);
}

/* nn.h's module-writing example, as written there */
typedef struct {
    em_module base;
    double scale;
} my_block;

static em_tensor *my_block_forward(em_module *m, const em_tensor *x) // x (B, 8)
{
    my_block *b = (my_block *)m;
    em_scope_begin();
    em_tensor *h = em_forward(m->children[0].module, x);               // (B, 8)
    em_tensor *y = em_mul_scalar(em_mul(em_relu(h), m->params[0].value), b->scale);
    y = em_keep(y);                                                     // (B, 8), kept
    em_scope_end();                                                     // h etc. released
    return y;
}

static const em_module_type my_block_type = {.type_name = "MyBlock",
                                             .forward = my_block_forward};

Test(nn_module, documented_forward_frees_its_temporaries_outside_a_scope)
{
    my_block *b = (my_block *)em_module_alloc(sizeof *b, &my_block_type);
    b->scale = 0.5;
    em_module_add_param(&b->base, "weight", em_full(EM_SHAPE(8), EM_F32, 2.0));
    em_module_add_child(&b->base, "fc", em_linear_layer(8, 8, true));
    em_tensor *x = em_ones(EM_SHAPE(3, 8), EM_F32);
    uint64_t before = em_memory_get_stats(EM_CPU).live_storages;
    em_tensor *y = em_forward(&b->base, x); /* no scope open: the caller owns y */
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(em_scope_depth(), 0);
    /* y holds its own storage and, through its graph, what backward needs; dropping it frees
     * everything the forward made */
    em_tensor *loss = em_sum_all(y);
    cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
    em_module_zero_grad(&b->base);
    em_release(loss);
    em_release(y);
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_storages, before);

    em_scope_begin(); /* in a scope: the result joins it, and nothing else does */
    em_tensor *z = em_forward(&b->base, x);
    cr_assert_not_null(z, "%s", em_error());
    em_scope_end();
    cr_assert_eq(em_memory_get_stats(EM_CPU).live_storages, before);
    em_release(x);
    em_module_free(&b->base);
}

/* em_module_alloc makes every module: the user's struct zeroed past its em_module, which has
 * its type and training mode, aligned for any member; a NULL type or a size smaller than
 * em_module is refused. */
Test(nn_module, alloc_makes_a_zeroed_module_of_the_given_size)
{
    typedef struct {
        em_module base;
        long double wide; /* needs max_align_t's alignment */
        char tail[40];
    } wide_block;
    wide_block *b = (wide_block *)em_module_alloc(sizeof *b, &my_block_type);
    cr_assert_not_null(b, "%s", em_error());
    cr_expect_eq(b->base.type, &my_block_type);
    cr_expect(b->base.training);
    cr_expect_eq(b->base.n_params + b->base.n_buffers + b->base.n_children, 0);
    cr_expect_eq((uintptr_t)&b->wide % _Alignof(max_align_t), 0);
    cr_expect_eq(b->wide, 0);
    for (size_t i = 0; i < sizeof b->tail; i++)
        cr_expect_eq(b->tail[i], 0);
    em_module_free(&b->base);

    cr_expect_null(em_module_alloc(sizeof(em_module), NULL));
    cr_expect_str_eq(em_error(), "em_module_alloc: NULL type");
    em_error_clear();
    cr_expect_null(em_module_alloc(sizeof(em_module) - 1, &my_block_type));
    cr_expect_str_eq(em_error(), "em_module_alloc: size is smaller than em_module");
    em_error_clear();
}

Test(nn_module, empty_sequential_is_the_identity)
{
    em_module *seq = em_sequential(0);
    em_tensor *x = em_arange(0, 4, 1, EM_F32);
    em_tensor *y = em_forward(seq, x);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_eq(em_get(y, (int64_t[]){3}), 3.0);
    em_release(y);
    em_release(x);
    em_module_free(seq);
}

static char *summary_of(em_module *m, em_shape input, em_status *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *st = em_module_summary(m, input, f);
    fclose(f);
    return text;
}

Test(nn_module, summary_of_the_reference_models)
{
    em_module *mlp = reference_mlp();
    em_status st;
    char *text = summary_of(mlp, EM_SHAPE(1, 784), &st);
    cr_assert_eq(st, EM_OK, "%s", em_error());
    cr_assert(strstr(text, "Sequential"), "%s", text);
    cr_assert(strstr(text, "0 (Linear)"), "%s", text);
    cr_assert(strstr(text, "[1,512]"), "%s", text);
    cr_assert(strstr(text, "401,920"), "%s", text);
    cr_assert(strstr(text, "[1,10]"), "%s", text);
    cr_assert(strstr(text, "Total params: 535,818"), "%s", text);
    cr_assert(strstr(text, "Trainable params: 535,818"), "%s", text);
    cr_assert(strstr(text, "Params size: 2,143,272 bytes"), "%s", text);
    free(text);

    /* a frozen parameter is counted as non-trainable; the mode is restored afterwards */
    em_requires_grad_(em_module_find(mlp, "4.bias"), false);
    em_module_eval(mlp->children[0].module);
    text = summary_of(mlp, EM_SHAPE(3, 784), &st);
    cr_assert(strstr(text, "Non-trainable params: 10"), "%s", text);
    cr_assert(strstr(text, "[3,256]"), "%s", text);
    cr_assert(mlp->training);
    cr_assert_not(mlp->children[0].module->training);
    free(text);
    em_module_free(mlp);

    em_module *cnn = reference_cnn();
    text = summary_of(cnn, EM_SHAPE(1, 1, 28, 28), &st);
    cr_assert_eq(st, EM_OK, "%s", em_error());
    cr_assert(strstr(text, "[1,32,28,28]"), "%s", text);
    cr_assert(strstr(text, "[1,64,7,7]"), "%s", text);
    cr_assert(strstr(text, "[1,3136]"), "%s", text);
    cr_assert(strstr(text, "Total params: 421,642"), "%s", text);
    cr_assert_null(em_module_find(cnn, "0.weight")->grad);
    free(text);

    text = summary_of(cnn, EM_SHAPE(1, 28, 28), &st);
    cr_assert_eq(st, EM_ERR_ARG);
    cr_assert_eq(strlen(text), 0);
    free(text);
    em_module_free(cnn);
}

Test(nn_module, summary_feeds_indices_to_an_embedding)
{
    em_module *net = em_sequential(2, em_embedding_layer(10, 4, (em_embedding_opts){0}),
                                   em_layer_norm_layer(4, (em_layer_norm_opts){0}));
    em_status st;
    char *text = summary_of(net, EM_SHAPE(2, 5), &st);
    cr_assert_eq(st, EM_OK, "%s", em_error());
    cr_assert(strstr(text, "[2,5,4]"), "%s", text);
    cr_assert(strstr(text, "Total params: 48"), "%s", text);
    free(text);
    em_module_free(net);
}

/* A Sequential nested 100,000 deep cannot be built: every walk of a tree recurses once per
 * level, so the tree stops at EM_MODULE_MAX_DEPTH with an error naming the limit, built bottom
 * up (each nest around the last) or top down (each appended into the deepest). */
Test(nn_module, nesting_stops_at_the_depth_limit)
{
    em_module *m = em_linear_layer(2, 2, true);
    int depth = 1;
    for (; depth < 100000; depth++) {
        em_module *outer = em_sequential(1, m);
        if (!outer)
            break;
        m = outer;
    }
    cr_assert_eq(depth, EM_MODULE_MAX_DEPTH, "stopped at %d", depth);
    cr_expect(strstr(em_error(), "em_module_add_child: \"0\" would make the tree 1001 modules "
                                 "deep; at most 1000 (EM_MODULE_MAX_DEPTH)"), "%s", em_error());
    em_error_clear();
    /* the failed nest freed the tree it was given: m is gone; build a chain top down */
    em_module *root = em_sequential(0), *deepest = root;
    for (depth = 1; depth < 100000; depth++) {
        em_module *next = em_sequential(0);
        if (!em_sequential_append(deepest, next))
            break;
        deepest = next;
    }
    cr_assert_eq(depth, EM_MODULE_MAX_DEPTH, "stopped at %d", depth);
    em_error_clear();
    em_module_free(root);
}

/* A module goes into one tree once: adding it a second time, under itself or under one of its
 * own descendants is an error that leaves every tree as it was. */
Test(nn_module, a_child_in_a_tree_or_a_cycle_is_refused)
{
    em_module *inner = em_sequential(1, em_relu_layer());
    em_module *outer = em_sequential(1, inner);
    cr_assert_not_null(outer, "%s", em_error());
    cr_expect_null(em_module_add_child(inner, "self", inner));
    cr_expect(strstr(em_error(), "\"self\" is the module itself or its ancestor"), "%s",
              em_error());
    em_error_clear();
    cr_expect_null(em_module_add_child(inner, "loop", outer));
    cr_expect(strstr(em_error(), "\"loop\" is the module itself or its ancestor"), "%s",
              em_error());
    em_error_clear();
    em_module *other = em_sequential(0);
    cr_expect_null(em_module_add_child(other, "again", inner));
    cr_expect(strstr(em_error(), "\"again\" is already a child of a module"), "%s", em_error());
    em_error_clear();
    cr_expect_eq(outer->n_children, 1);
    cr_expect_eq(inner->n_children, 1);
    cr_expect_eq(other->n_children, 0);
    em_tensor *x = em_full(EM_SHAPE(1, 2), EM_F32, -1);
    em_tensor *y = em_forward(outer, x);
    cr_assert_not_null(y, "%s", em_error());
    em_tensor *total = em_sum(y, NULL, 0, false);
    cr_expect_eq(em_item(total), 0);
    em_release(total);
    em_release(y);
    em_release(x);
    em_module_free(other);
    em_module_free(outer);
}

/* A name that is not UTF-8 would reach state dicts, traces and ONNX files: refused. */
Test(nn_module, a_name_that_is_not_utf8_is_refused)
{
    em_module *m = em_sequential(0);
    cr_expect_null(em_module_add_child(m, "fc\xc0", em_relu_layer()));
    cr_expect(strstr(em_error(), "em_module_add_child: name \"fc\" is followed by byte 0xc0"),
              "%s", em_error());
    em_error_clear();
    em_module_free(m);
}

/* A tree at the limit works: forward, named parameters and the summary walk all of it. */
Test(nn_module, a_tree_at_the_depth_limit_walks)
{
    em_module *m = em_linear_layer(2, 3, true);
    for (int depth = 1; depth < EM_MODULE_MAX_DEPTH; depth++)
        m = em_sequential(1, m);
    cr_assert_not_null(m, "%s", em_error());
    em_tensor *x = em_ones(EM_SHAPE(4, 2), EM_F32);
    em_tensor *y = em_forward(m, x);
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->shape[1], 3);
    em_param_ref p[2];
    cr_assert_eq(em_module_parameters(m, p, 2), 2);
    cr_expect_eq(strlen(p[0].name), 2 * (EM_MODULE_MAX_DEPTH - 1) + strlen("weight"));
    cr_expect_str_eq(p[1].name + 2 * (EM_MODULE_MAX_DEPTH - 1), "bias");
    cr_expect(em_module_find(m, p[1].name) == p[1].value);
    em_status st;
    char *text = summary_of(m, EM_SHAPE(4, 2), &st);
    cr_expect_eq(st, EM_OK, "%s", em_error());
    cr_expect(text && strstr(text, "Total params: 9"), "%s", text);
    free(text);
    em_release(y);
    em_release(x);
    em_module_free(m);
}

/* em_module_to_dtype, PyTorch's module.to(dtype): floating parameters and buffers convert in
 * place (the tensors a caller holds see it, values widened exactly, a gradient with them),
 * num_batches_tracked stays i64, and the forward runs in the new dtype; an integer dtype and a
 * tensor that is a view are refused. */
Test(nn_module, to_dtype_converts_floating_tensors_in_place)
{
    em_scope_begin();
    em_module *m = em_sequential(2, em_linear_layer(3, 2, true),
                                 em_batch_norm1d_layer(2, (em_batch_norm_opts){0}));
    cr_assert_not_null(m, "%s", em_error());
    em_tensor *w = em_module_find(m, "0.weight");
    em_tensor *nbt = em_module_find(m, "1.num_batches_tracked");
    set_values(w, (double[]){0.1, -0.2, 0.3, 0.25, 0.5, -0.75});
    float before[6];
    em_copy_to_host(w, EM_F32, before);
    em_tensor *x = em_from_data(EM_SHAPE(2, 3), EM_F32, (float[]){1, 2, 3, -1, 0.5f, 2});
    cr_assert_eq(em_backward(em_sum_all(em_forward(m, x))), EM_OK, "%s", em_error());
    cr_assert_eq(em_module_to_dtype(m, EM_F64), EM_OK, "%s", em_error());
    cr_expect(w == em_module_find(m, "0.weight"), "the same tensor, converted in place");
    cr_expect_eq(w->dtype, EM_F64);
    cr_expect_eq(w->grad->dtype, EM_F64, "its gradient converts with it");
    cr_expect(w->requires_grad);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(em_get(w, (int64_t[]){i / 3, i % 3}), (double)before[i]);
    cr_expect_eq(em_module_find(m, "1.running_var")->dtype, EM_F64);
    cr_expect_eq(nbt->dtype, EM_I64, "integer buffers stay");
    cr_expect_eq(em_item(nbt), 1);
    em_tensor *y = em_forward(m, em_to_dtype(x, EM_F64));
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->dtype, EM_F64);
    cr_assert_eq(em_module_to_dtype(m, EM_BF16), EM_OK, "%s", em_error());
    cr_expect_eq(em_get(w, (int64_t[]){0, 1}), -0.2001953125, "bf16's nearest to -0.2");
    cr_expect_eq(em_module_to_dtype(m, EM_I32), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_module_to_dtype: a module's floating tensors take a "
                                 "floating dtype, not i32");
    em_error_clear();
    em_tensor *view = em_narrow(em_zeros(EM_SHAPE(4), EM_F32), 0, 1, 2);
    cr_expect_eq(em_to_dtype_(view, EM_F64), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_to_dtype_: only a leaf that owns its whole storage changes "
                                 "in place (a parameter or buffer), not [2]");
    em_error_clear();
    em_module_free(m);
    em_scope_end();
}
