/* FLOP counts against counts worked out by hand: the matrix-product layers of a model and the
 * FLOPs of a training step for the mlp and cnn recipes (recipes/mlp.c, recipes/cnn.c) and a
 * Conv1d; every layer type's own FLOPs of a forward (each type that a model file can hold), and
 * the summary's FLOPs column. */
#include <criterion/criterion.h>
#include <math.h>
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
    check_layers(em_sequential(2, em_layer_norm_layer(10, (em_layer_norm_opts){0}),
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
    cr_expect_eq(em_module_flops(NULL, EM_SHAPE(1, 784)), -1);
    cr_expect(strstr(em_error(), "em_module_flops: need a module"), "%s", em_error());
    em_error_clear();
    cr_expect_eq(em_module_flops(m, EM_SHAPE(1, 100)), -1, "wrong input shape");
    em_error_clear();
    cr_expect(isnan(em_matmul_train_flops(NULL, 3)));
    cr_expect_str_eq(em_error(), "em_matmul_train_flops: l is NULL with n 3");
    em_error_clear();
    cr_expect_eq(em_matmul_train_flops(NULL, 0), 0);
    em_module_free(m);
}

/* ---- every layer type's own FLOPs, counted by hand (em_module_flops) ----
 * The rules: 2 per multiply-accumulate of a product, 1 per bias or residual add, 1 per element of
 * an elementwise activation, 3 per element of a softmax; a norm 2 per element to normalise, 2
 * for its affine, 4 more for statistics from the input; a pool's kernel taps per output; nothing
 * for lookups, copies, reshapes, pads and eval dropout. A container adds its children's. */
typedef struct {
    em_module *m;
    em_shape input;
    double flops;
} flops_case;

/* The names of m's type and every type below it, appended to seen (n so far) */
static int collect_types(const em_module *m, const char **seen, int n)
{
    seen[n++] = m->type->type_name;
    for (int i = 0; i < m->n_children; i++)
        n = collect_types(m->children[i].module, seen, n);
    return n;
}

static em_module *quantized(em_module *m)
{
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    return m;
}

static em_module *static_quantized(em_module *m)
{
    cr_assert_eq(em_quantize_static_structure_(m, (em_static_quant_opts){0}), EM_OK, "%s",
                 em_error());
    return m;
}

Test(flops, every_layer_type_counted_by_hand)
{
    em_manual_seed(1);
    em_pool2d_layer_opts halve = {0};
    flops_case cases[] = {
        /* y (2, 3): 6 x (2 x 4 + 1 bias); without the bias 6 x 8 */
        {em_linear_layer(4, 3, true), EM_SHAPE(2, 4), 54},
        {em_linear_layer(4, 3, false), EM_SHAPE(2, 4), 48},
        /* y (1, 4, 5, 5): 100 x (2 x 2 x 3 x 3 + 1); groups 2: 100 x 2 x (4 / 2) x 9 */
        {em_conv2d_layer(2, 4, 3, (em_conv2d_layer_opts){.padding = 1}), EM_SHAPE(1, 2, 5, 5),
         3700},
        {em_conv2d_layer(4, 4, 3, (em_conv2d_layer_opts){.padding = 1, .groups = 2,
                                                         .no_bias = true}),
         EM_SHAPE(1, 4, 5, 5), 3600},
        /* y (2, 3, 5): 30 x (2 x 2 x 3 + 1) */
        {em_conv1d_layer(2, 3, 3, (em_conv1d_layer_opts){0}), EM_SHAPE(2, 2, 7), 390},
        /* x (1, 2, 3, 3) 18 elements x 3 x 2 x 2 taps x 2, + y (1, 3, 6, 6) 108 bias adds */
        {em_conv_transpose2d_layer(2, 3, 2, (em_conv_transpose2d_layer_opts){.stride = 2}),
         EM_SHAPE(1, 2, 3, 3), 540},
        /* y (1, 1, 2, 2) x 4 taps; y (1, 1, 4, 4) x 9 taps; x's 48 elements */
        {em_max_pool2d_layer(2, halve), EM_SHAPE(1, 1, 4, 4), 16},
        {em_avg_pool2d_layer(3, (em_pool2d_layer_opts){.stride = 1, .padding = 1}),
         EM_SHAPE(1, 1, 4, 4), 144},
        {em_adaptive_avg_pool2d_layer(2, 2), EM_SHAPE(1, 3, 4, 4), 48},
        /* eval: running statistics, 2 + 2 affine per element */
        {em_batch_norm1d_layer(3, (em_batch_norm_opts){0}), EM_SHAPE(2, 3), 24},
        {em_batch_norm2d_layer(2, (em_batch_norm_opts){0}), EM_SHAPE(1, 2, 3, 3), 72},
        /* statistics from the input: 4 + 2 + 2 affine per element; without the affine 6 */
        {em_layer_norm_layer(4, (em_layer_norm_opts){0}), EM_SHAPE(2, 4), 64},
        {em_group_norm_layer(2, 4, (em_group_norm_opts){0}), EM_SHAPE(1, 4, 2, 2), 128},
        {em_group_norm_layer(2, 4, (em_group_norm_opts){.no_affine = true}), EM_SHAPE(1, 4, 2, 2),
         96},
        {em_instance_norm1d_layer(3, (em_instance_norm_opts){0}), EM_SHAPE(2, 3, 5), 180},
        /* tracking, in eval: the running statistics, 2 + 2 per element */
        {em_instance_norm2d_layer(2, (em_instance_norm_opts){.affine = true,
                                                             .track_running_stats = true}),
         EM_SHAPE(1, 2, 3, 3), 72},
        {em_dropout_layer(0.5), EM_SHAPE(2, 5), 0},
        {em_relu_layer(), EM_SHAPE(2, 5), 10},
        {em_leaky_relu_layer(0.1), EM_SHAPE(2, 5), 10},
        {em_gelu_layer(true), EM_SHAPE(2, 5), 10},
        {em_silu_layer(), EM_SHAPE(2, 5), 10},
        {em_softsign_layer(), EM_SHAPE(2, 5), 10},
        {em_mish_layer(), EM_SHAPE(2, 5), 10},
        {em_softplus_layer(1, 20), EM_SHAPE(2, 5), 10},
        {em_hardtanh_layer(-1, 1), EM_SHAPE(2, 5), 10},
        {em_elu_layer(1), EM_SHAPE(2, 5), 10},
        {em_celu_layer(2), EM_SHAPE(2, 5), 10},
        {em_selu_layer(), EM_SHAPE(2, 5), 10},
        {em_hardswish_layer(), EM_SHAPE(2, 5), 10},
        {em_logsigmoid_layer(), EM_SHAPE(2, 5), 10},
        {em_tanh_layer(), EM_SHAPE(2, 5), 10},
        {em_sigmoid_layer(), EM_SHAPE(2, 5), 10},
        {em_softmax_layer(1), EM_SHAPE(2, 5), 30},
        {em_flatten_layer(), EM_SHAPE(2, 3, 4), 0},
        {em_embedding_layer(10, 4, (em_embedding_opts){0}), EM_SHAPE(2, 3), 0},
        /* nearest copies; bilinear y (1, 1, 4, 4) 16 x 9; linear y (1, 2, 6) 12 x 3 */
        {em_upsample_layer((em_interpolate_opts){.scale_factor = {2}}), EM_SHAPE(1, 1, 2, 2), 0},
        {em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_BILINEAR, .size = {4, 4}}),
         EM_SHAPE(1, 1, 2, 2), 144},
        {em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_LINEAR, .size = {6}}),
         EM_SHAPE(1, 2, 3), 36},
        {em_pad_layer((int64_t[]){1, 1}, 2, EM_PAD_CONSTANT, 0), EM_SHAPE(1, 2, 3), 0},
        /* the sum 6, and the Linear 6 x 7 */
        {em_residual(em_linear_layer(3, 3, true), NULL), EM_SHAPE(2, 3), 48},
        /* the Linear 54 and the ReLU 6 */
        {em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer()), EM_SHAPE(2, 4), 60},
        /* the join copies: only the Linear's 6 x 7 (and the Identity's nothing) */
        {em_concat_skip(em_linear_layer(3, 3, true), 1), EM_SHAPE(2, 3), 42},
        /* 5 steps x 2 sequences, each: 2 x 16 x (3 + 4) projections + 2 x 16 biases + 13 x 4 */
        {em_lstm_layer(3, 4, (em_rnn_opts){0}), EM_SHAPE(5, 2, 3), 3080},
        /* 10 step-samples x (layer 0: 2 x 12 x (3 + 4) + 40; layer 1: 2 x 12 x (4 + 4) + 40) */
        {em_gru_layer(3, 4, (em_rnn_opts){.num_layers = 2, .batch_first = true,
                                          .no_bias = true}),
         EM_SHAPE(2, 5, 3), 4400},
        /* T 3, E 8, H 2: in-projection 6 T E E + 3 T E, scores and values 4 T T E, softmax
         * 3 H T T = 1,566; out_proj 24 x (2 x 8 + 1) = 408 */
        {em_multihead_attention_layer(8, 2, (em_mha_opts){0}), EM_SHAPE(1, 3, 8), 1974},
        /* the attention's 1,566 + out_proj 408, ReLU over (3, 16) 48, the residual sums 2 x 24,
         * linear1 48 x 17, linear2 24 x 33, two LayerNorms 2 x 24 x 8 */
        {em_transformer_encoder_layer(8, 2, (em_transformer_opts){.dim_feedforward = 16}),
         EM_SHAPE(1, 3, 8), 4062},
        /* T 3, E 4, vocab 7: positions' add 12 and the head 2 x 3 x 4 x 7; the block: attention
         * 522 + out_proj 108 + GELU 48 + sums 24 + linear1 432 + linear2 396 + norms 192;
         * ln_f 96 */
        {em_gpt((em_gpt_settings){.vocab_size = 7, .block_size = 5, .n_layer = 1, .n_head = 2,
                                .n_embd = 4}),
         EM_SHAPE(1, 3), 1998},
        /* as their float forms: the projections counted by the QuantizedLinear children */
        {quantized(em_sequential(1, em_linear_layer(4, 3, true))), EM_SHAPE(2, 4), 54},
        {quantized(em_sequential(1, em_lstm_layer(3, 4, (em_rnn_opts){0}))), EM_SHAPE(5, 2, 3),
         3080},
        {quantized(em_sequential(1, em_gru_layer(3, 4, (em_rnn_opts){0}))), EM_SHAPE(5, 2, 3),
         2320},
        /* static int8 Linear with its ReLU fused: 6 x (2 x 4 + 1 + 1); the fused ReLU's place
         * holder (an Identity) does nothing */
        {static_quantized(em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer())),
         EM_SHAPE(2, 4), 60},
        /* static int8 Conv2d without bias, y (1, 3, 3, 3): 27 x 2 x (2 x 3 x 3) */
        {static_quantized(em_sequential(1, em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){
                                                               .stride = 2, .padding = 1,
                                                               .no_bias = true}))),
         EM_SHAPE(1, 2, 5, 5), 972},
    };
    int n_cases = (int)(sizeof cases / sizeof *cases);
    const char *seen[256];
    int n_seen = 0;
    for (int i = 0; i < n_cases; i++) {
        cr_assert_not_null(cases[i].m, "case %d: %s", i, em_error());
        double got = em_module_flops(cases[i].m, cases[i].input);
        cr_expect_eq(got, cases[i].flops, "case %d (%s): %.0f FLOPs, not %.0f", i,
                     cases[i].m->type->type_name, got, cases[i].flops);
        n_seen = collect_types(cases[i].m, seen, n_seen);
        em_module_free(cases[i].m);
    }
    /* every type a file can hold ran in one of the cases */
    const em_module_type *types[128];
    int n_types = em_model_types(types, 128);
    for (int t = 0; t < n_types; t++) {
        bool found = false;
        for (int i = 0; i < n_seen && !found; i++)
            found = !strcmp(seen[i], types[t]->type_name);
        cr_expect(found, "no FLOP count checked for %s", types[t]->type_name);
        cr_expect(types[t]->flops || types[t]->traits & (EM_TRAIT_ELEMENTWISE |
                                                         EM_TRAIT_CONTAINER),
                  "%s counts no FLOPs of its own", types[t]->type_name);
    }
}

/* The summary's FLOPs column: each module's own (a container's none of its own: "--"), and the
 * forward's total. */
Test(flops, summary_column)
{
    em_module *m = em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer());
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    cr_assert_eq(em_module_summary(m, EM_SHAPE(2, 4), f), EM_OK, "%s", em_error());
    fclose(f);
    cr_expect(strstr(text, "FLOPs"), "%s", text);
    cr_expect(strstr(text, "  0 (Linear)                             [2,3]                  "
                           "          15              54  in_features=4, out_features=3, "
                           "bias=true\n"), "%s", text);
    cr_expect(strstr(text, "  1 (ReLU)                               [2,3]                  "
                           "           0               6  \n"), "%s", text);
    cr_expect(strstr(text, "Forward FLOPs: 60\n"), "%s", text);
    free(text);
    em_module_free(m);
}
