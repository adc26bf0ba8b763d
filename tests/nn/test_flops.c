/* The matrix-product layers of a model and the FLOPs of a training step, checked against counts
 * worked out by hand for the mlp and cnn recipes (recipes/mlp.c, recipes/cnn.c) and a Conv1d. */
#include <criterion/criterion.h>
#include <string.h>

#include "recipes/recipes.h"

typedef struct {
    int64_t rows, k, positions;
    bool input_grad;
} want_layer;

static void check_layers(em_module *m, em_shape sample, const want_layer *want, int n,
                         double flops)
{
    cr_assert_not_null(m, "%s", em_error());
    em_matmul_layer got[8];
    cr_assert_eq(em_module_matmul_layers(m, sample, got, 8), n, "%s", em_error());
    for (int i = 0; i < n; i++) {
        cr_expect_eq(got[i].rows, want[i].rows, "layer %d rows", i);
        cr_expect_eq(got[i].k, want[i].k, "layer %d k", i);
        cr_expect_eq(got[i].positions, want[i].positions, "layer %d positions", i);
        cr_expect_eq(got[i].input_grad, want[i].input_grad, "layer %d input_grad", i);
    }
    cr_expect_eq(em_matmul_train_flops(got, n), flops, "%.0f FLOPs, not %.0f",
                 em_matmul_train_flops(got, n), flops);
    em_module_free(m);
}

/* 784x512 + 512x256 + 256x10 = 535,040 MACs forward; the first layer's input is the data, so
 * its backward makes only the weight gradient: 2 x (2 x 401,408 + 3 x (131,072 + 2,560)) */
Test(flops, mlp_recipe)
{
    const want_layer want[] = {{512, 784, 1, false}, {256, 512, 1, true}, {10, 256, 1, true}};
    check_layers(recipe_mlp_build(NULL), EM_SHAPE(784), want, 3, 2407424);
}

/* conv1 32 x (1x3x3) x 28x28 = 225,792 MACs; conv2 64 x (32x3x3) x 14x14 = 3,612,672;
 * fc1 128 x 3136 = 401,408; fc2 10 x 128 = 1,280:
 * 2 x (2 x 225,792 + 3 x (3,612,672 + 401,408 + 1,280)) = 24,995,328 */
Test(flops, cnn_recipe)
{
    const want_layer want[] = {{32, 9, 784, false}, {64, 288, 196, true},
                               {128, 3136, 1, true}, {10, 128, 1, true}};
    check_layers(recipe_cnn_build(NULL), EM_SHAPE(1, 28, 28), want, 4, 24995328);
}

/* A LayerNorm's parameters come first, so the Conv1d computes its input's gradient: 6 channels
 * x (4 x 3) x 8 positions = 576 MACs, x 6 = 3,456 FLOPs */
Test(flops, conv1d_after_a_parameter_layer)
{
    const want_layer want[] = {{6, 12, 8, true}};
    check_layers(em_sequential(2, em_layer_norm_layer(10, 0),
                               em_conv1d_layer(4, 6, 3, (em_conv1d_layer_opts){0})),
                 EM_SHAPE(4, 10), want, 1, 3456);
}

Test(flops, counts_beyond_max_and_keeps_the_mode)
{
    em_module *m = recipe_mlp_build(NULL);
    cr_assert_not_null(m);
    em_module_train(m, true);
    cr_expect_eq(em_module_matmul_layers(m, EM_SHAPE(784), NULL, 0), 3, "%s", em_error());
    cr_expect(m->training && m->children[1].module->training, "the trace restores train mode");
    em_module_free(m);
}

Test(flops, bad_input_is_an_error)
{
    em_module *m = recipe_mlp_build(NULL);
    cr_assert_not_null(m);
    cr_expect_eq(em_module_matmul_layers(NULL, EM_SHAPE(784), NULL, 0), -1);
    cr_expect(strstr(em_error(), "em_module_matmul_layers"), "%s", em_error());
    em_error_clear();
    cr_expect_eq(em_module_matmul_layers(m, EM_SHAPE(100), NULL, 0), -1, "wrong sample shape");
    cr_expect(strstr(em_error(), "em_linear") || strstr(em_error(), "em_matmul"), "%s",
              em_error());
    em_error_clear();
    em_module_free(m);
}
