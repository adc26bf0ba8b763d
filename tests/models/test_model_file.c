/* Whole-model files: every module type saved and rebuilt by em_model_load with the same
 * forward (bit for bit), parameter names, summary and hash; a user's own type registered; the
 * weights read by Python's safetensors; unknown types, bad, truncated or hostile metadata and
 * missing weights refused with errors that name them, before anything large is allocated; a
 * static INT8 CNN, and its files with a setting, a dtype or a quantization parameter wrong;
 * em_module_clone's deep copies made the same way. */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "helpers/files.h"
#include "helpers/models.h"
#include "helpers/venv.h"

static char dir[256], path[300];

static void finish(void)
{
    em_scope_end();
    if (*dir)
        em_test_remove_tree(dir);
}

TestSuite(model_file, .init = em_scope_begin, .fini = finish);

static const char *model_path(void)
{
    if (!*dir)
        cr_assert(em_test_make_dir(dir, sizeof dir, "model_file_"));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return path;
}

static char *summary_text(em_module *m, em_shape input)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    cr_assert(f);
    cr_assert_eq(em_module_summary(m, input, f), EM_OK, "%s", em_error());
    fclose(f);
    return text;
}

static void assert_same_names(const em_module *a, const em_module *b)
{
    int n = em_module_parameters(a, NULL, 0);
    cr_assert_eq(em_module_parameters(b, NULL, 0), n);
    em_param_ref ra[n + 1], rb[n + 1];
    em_module_parameters(a, ra, n);
    em_module_parameters(b, rb, n);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(ra[i].name, rb[i].name);
}

static void assert_same_values(const em_tensor *a, const em_tensor *b)
{
    cr_assert(a && b, "%s", em_error());
    cr_assert(em_same_shape(a, b));
    em_tensor *ca = em_contiguous(a), *cb = em_contiguous(b);
    size_t bytes = (size_t)em_numel(ca) * em_dtype_size(ca->dtype);
    cr_assert_eq(memcmp(em_data_ptr(ca), em_data_ptr(cb), bytes), 0, "outputs differ");
}

/* m (eval mode) saved and loaded: the same tree, weights, names, summary and forward on x. */
static void round_trip(em_module *m, const em_tensor *x, bool summary)
{
    cr_assert(m, "%s", em_error());
    em_module_eval(m);
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module *r = em_model_load(model_path());
    cr_assert(r, "%s", em_error());
    cr_assert_eq(r->training, false);
    cr_assert_eq(em_module_hash(r), em_module_hash(m));
    assert_same_names(m, r);
    if (x) {
        assert_same_values(em_forward(m, x), em_forward(r, x));
        if (summary) {
            em_shape s = {.ndim = x->ndim};
            memcpy(s.d, x->shape, sizeof x->shape[0] * (size_t)x->ndim);
            char *a = summary_text(m, s), *b = summary_text(r, s);
            cr_assert_str_eq(a, b);
            free(a);
            free(b);
        }
    }
    em_module_free(r);
    em_module_free(m);
}

Test(model_file, cnn_with_residual_pooling_norms_and_activations)
{
    em_manual_seed(1);
    em_module *block = em_sequential(2, em_conv2d_layer(4, 4, 3, (em_conv2d_layer_opts){
                                            .padding = 1, .no_bias = true}),
                                     em_batch_norm2d_layer(4, (em_batch_norm_opts){
                                         .eps = 1e-3, .momentum = 0.2}));
    em_module *m = em_sequential(
        13, em_conv2d_layer(3, 4, 3, (em_conv2d_layer_opts){.stride = 1, .padding = 1}),
        em_batch_norm2d_layer(4, (em_batch_norm_opts){0}), em_relu_layer(),
        em_max_pool2d_layer(2, (em_pool2d_layer_opts){0}), em_residual(block, NULL),
        em_avg_pool2d_layer(3, (em_pool2d_layer_opts){.stride = 1, .padding = 1}),
        em_adaptive_avg_pool2d_layer(2, 1), em_flatten_layer(), em_dropout_layer(0.25),
        em_linear_layer(8, 3, true), em_leaky_relu_layer(0.05), em_linear_layer(3, 2, false),
        em_softmax_layer(1));
    round_trip(m, em_randn(EM_SHAPE(2, 3, 8, 8), EM_F32, NULL), true);
}

/* A U-Net level (a skip that is Concat over an Identity) and an Inception-like Concat of three
 * branches: saved and loaded with no registration, as any built-in type. */
Test(model_file, concat_unet_skip_and_branches)
{
    em_manual_seed(3);
    round_trip(em_test_concat_unet(), em_randn(EM_SHAPE(2, 3, 8, 8), EM_F32, NULL), true);
}

Test(model_file, same_padding_conv_transpose_and_dilated_pool)
{
    em_manual_seed(10);
    em_module *m = em_sequential(
        4, em_conv2d_layer(2, 4, 4, (em_conv2d_layer_opts){.padding = EM_PADDING_SAME}),
        em_max_pool2d_layer(3, (em_pool2d_layer_opts){.stride = 1, .padding = 1, .dilation = 2}),
        em_conv_transpose2d_layer(4, 6, 3, (em_conv_transpose2d_layer_opts){
            .stride = 2, .padding = 1, .output_padding = 1, .dilation = 2, .groups = 2}),
        em_flatten_layer());
    round_trip(m, em_randn(EM_SHAPE(2, 2, 7, 6), EM_F32, NULL), true);
    round_trip(em_sequential(2, em_conv1d_layer(2, 3, 4, (em_conv1d_layer_opts){
                                    .padding = EM_PADDING_SAME, .dilation = 3}),
                             em_conv_transpose2d_layer(3, 2, 2, (em_conv_transpose2d_layer_opts){
                                    .no_bias = true})),
               NULL, false);
}

/* A MaxPool2d saved before pools had a dilation (no such setting) loads with dilation 1. */
Test(model_file, max_pool_without_dilation_setting_loads)
{
    em_module *saved = em_max_pool2d_layer(2, (em_pool2d_layer_opts){.stride = 1, .padding = 1});
    cr_assert_eq(em_model_save(saved, model_path()), EM_OK, "%s", em_error());
    em_module_free(saved);
    FILE *f = fopen(model_path(), "r+b");
    cr_assert_not_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    const char *key = ",\\\"dilation\\\":1"; /* inside the header's escaped JSON string */
    char *at = n > 8 ? strstr(buf + 8, key) : NULL; /* past the header's 8-byte size */
    cr_assert_not_null(at, "%s", buf + 8);
    memset(at, ' ', strlen(key)); /* the same length: the header's size is unchanged */
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    em_module *r = em_model_load(model_path());
    cr_assert_not_null(r, "%s", em_error());
    em_tensor *y = em_forward(r, em_ones(EM_SHAPE(1, 1, 3, 3), EM_F32));
    cr_assert(y && y->shape[2] == 4 && y->shape[3] == 4, "%s", em_error());
    em_module_free(r);
}

/* GroupNorm, InstanceNorm (tracking or not, affine or not) and BatchNorm's cumulative average
 * (momentum null in the file), after two training steps: the loaded model holds the same
 * running statistics and batch count, and its next training step moves them the same way. */
Test(model_file, group_instance_and_cumulative_batch_norms)
{
    em_manual_seed(10);
    em_module *m = em_sequential(
        7, em_conv2d_layer(3, 4, 3, (em_conv2d_layer_opts){.padding = 1}),
        em_group_norm_layer(2, 4, (em_group_norm_opts){.eps = 1e-4}),
        em_instance_norm2d_layer(4, (em_instance_norm_opts){
            .momentum = 0.3, .affine = true, .track_running_stats = true}),
        em_batch_norm2d_layer(4, (em_batch_norm_opts){.momentum = EM_BN_CUMULATIVE_AVERAGE}),
        em_group_norm_layer(4, 4, (em_group_norm_opts){.no_affine = true}),
        em_instance_norm2d_layer(4, (em_instance_norm_opts){.eps = 1e-3}), em_flatten_layer());
    cr_assert(m, "%s", em_error());
    for (int step = 0; step < 2; step++)
        cr_assert(em_forward(m, em_randn(EM_SHAPE(3, 3, 5, 5), EM_F32, NULL)), "%s", em_error());
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module *r = em_model_load(model_path());
    cr_assert(r, "%s", em_error());
    em_setting_value momentum;
    cr_assert_eq(em_module_setting(em_module_child(r, "3"), "momentum", &momentum), EM_OK);
    cr_assert(momentum.none && momentum.r == EM_BN_CUMULATIVE_AVERAGE, "momentum None");
    cr_assert_eq(em_item(em_module_find(r, "3.num_batches_tracked")), 2);
    em_tensor *x = em_randn(EM_SHAPE(2, 3, 5, 5), EM_F32, NULL);
    assert_same_values(em_forward(m, x), em_forward(r, x));
    const char *buffers[] = {"2.running_mean", "2.running_var", "3.running_mean",
                             "3.running_var", "3.num_batches_tracked"};
    for (int i = 0; i < 5; i++)
        assert_same_values(em_module_find(m, buffers[i]), em_module_find(r, buffers[i]));
    em_module_free(r);
    round_trip(m, x, true);
    round_trip(em_sequential(2, em_conv1d_layer(2, 3, 3, (em_conv1d_layer_opts){0}),
                             em_instance_norm1d_layer(3, (em_instance_norm_opts){.affine = true})),
               em_randn(EM_SHAPE(2, 2, 7), EM_F32, NULL), true);
}

Test(model_file, mlp_with_every_plain_activation_and_shortcut)
{
    em_manual_seed(2);
    em_module *m = em_sequential(
        11, em_linear_layer(5, 6, true), em_gelu_layer(true), em_silu_layer(),
        em_softsign_layer(), em_tanh_layer(), em_sigmoid_layer(),
        em_layer_norm_layer(6, (em_layer_norm_opts){.eps = 1e-6}),
        em_batch_norm1d_layer(6, (em_batch_norm_opts){.momentum = 0.3}), em_gelu_layer(false),
        em_residual(em_linear_layer(6, 2, true), em_linear_layer(6, 2, false)),
        em_module_list(1, em_relu_layer()));
    /* a ModuleList has no forward: the tree, names and weights are compared */
    round_trip(m, NULL, false);
}

Test(model_file, activations_with_and_without_settings)
{
    em_manual_seed(9);
    em_module *m = em_sequential(
        9, em_linear_layer(4, 6, true), em_mish_layer(), em_softplus_layer(2.5, 7.0),
        em_hardtanh_layer(-0.75, 1.25), em_elu_layer(0.3), em_selu_layer(), em_hardswish_layer(),
        em_logsigmoid_layer(), em_linear_layer(6, 2, true));
    round_trip(m, em_randn(EM_SHAPE(3, 4), EM_F32, NULL), true);
}

Test(model_file, upsample_and_pad_layers)
{
    em_manual_seed(6);
    em_module *m = em_sequential(
        6, em_pad_layer((int64_t[]){1, 2, -1, 0}, 4, EM_PAD_CONSTANT, 0.5),
        em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_BILINEAR, .size = {8, 3},
                                                .align_corners = true}),
        em_pad_layer((int64_t[]){2, 1, 1, 2}, 4, EM_PAD_REFLECT, 0),
        em_upsample_layer((em_interpolate_opts){.scale_factor = {1.7, 0.6}}),
        em_pad_layer((int64_t[]){0, 3, 1, 0}, 4, EM_PAD_REPLICATE, 0),
        em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_BILINEAR,
                                                .scale_factor = {1.3},
                                                .recompute_scale_factor = true}));
    round_trip(m, em_randn(EM_SHAPE(2, 3, 5, 7), EM_F32, NULL), true);
    round_trip(em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_LINEAR, .size = {4}}),
               em_randn(EM_SHAPE(1, 2, 7), EM_F32, NULL), true);
}

Test(model_file, conv1d_and_embedding)
{
    em_manual_seed(3);
    round_trip(em_sequential(3, em_conv1d_layer(2, 4, 3, (em_conv1d_layer_opts){
                                    .stride = 2, .padding = 1, .dilation = 2, .groups = 2}),
                             em_relu_layer(), em_flatten_layer()),
               em_randn(EM_SHAPE(2, 2, 9), EM_F32, NULL), true);
    em_tensor *ids = em_from_data(EM_SHAPE(2, 3), EM_I64, (int64_t[]){1, 4, 9, 0, 3, 3});
    round_trip(em_sequential(2, em_embedding_layer(10, 4, (em_embedding_opts){0}),
                             em_linear_layer(4, 3, true)), ids,
               false);
}

Test(model_file, lstm_and_gru)
{
    em_manual_seed(4);
    em_module *m = em_sequential(
        2, em_lstm_layer(3, 5, (em_rnn_opts){.num_layers = 2, .batch_first = true,
                                             .dropout = 0.1}),
        em_gru_layer(5, 4, (em_rnn_opts){.batch_first = true, .no_bias = true}));
    round_trip(m, em_randn(EM_SHAPE(2, 6, 3), EM_F32, NULL), false);
}

Test(model_file, attention_transformer_and_gpt)
{
    em_manual_seed(5);
    em_module *m = em_sequential(
        2, em_multihead_attention_layer(8, 2, (em_mha_opts){.causal = true, .dropout = 0.1}),
        em_transformer_encoder_layer(8, 2, (em_transformer_opts){
            .dim_feedforward = 16, .activation = EM_ACTIVATION_GELU, .norm_first = true,
            .causal = true, .layer_norm_eps = 1e-6, .dropout = 0.1}));
    round_trip(m, em_randn(EM_SHAPE(2, 4, 8), EM_F32, NULL), false);
    round_trip(em_multihead_attention_layer(4, 1, (em_mha_opts){.no_bias = true}),
               em_randn(EM_SHAPE(1, 3, 4), EM_F32, NULL), false);
    em_module *gpt = em_gpt((em_gpt_settings){.vocab_size = 11, .block_size = 6, .n_layer = 2,
                                            .n_head = 2, .n_embd = 8, .dropout = 0.1});
    em_tensor *ids = em_from_data(EM_SHAPE(2, 4), EM_I64, (int64_t[]){1, 4, 10, 0, 3, 3, 2, 7});
    round_trip(gpt, ids, false);
}

Test(model_file, dynamic_quantized_layers)
{
    em_manual_seed(6);
    em_module *m = em_sequential(4, em_linear_layer(6, 5, true), em_relu_layer(),
                                 em_linear_layer(5, 3, false),
                                 em_lstm_layer(3, 4, (em_rnn_opts){.batch_first = true}));
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){.granularity =
                                                                EM_QUANT_PER_TENSOR}), EM_OK);
    round_trip(m, em_randn(EM_SHAPE(2, 3, 6), EM_F32, NULL), false);
    em_module *g = em_sequential(2, em_gru_layer(3, 4, (em_rnn_opts){0}),
                                 em_linear_layer(4, 2, true));
    cr_assert_eq(em_quantize_dynamic_(g, (em_quantize_opts){0}), EM_OK);
    round_trip(g, em_randn(EM_SHAPE(5, 2, 3), EM_F32, NULL), false);
}

Test(model_file, training_mode_and_checkpointed_module_kept)
{
    em_module *m = em_sequential(2, em_checkpoint_module(em_linear_layer(3, 3, true)),
                                 em_relu_layer());
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module *r = em_model_load(model_path());
    cr_assert(r, "%s", em_error());
    cr_assert(r->training);
    cr_assert_eq(em_module_hash(r), em_module_hash(m));
    em_module_free(r);
    em_module_free(m);
}

/* A pruned layer keeps its original's description but cannot be rebuilt from a file (its masks
 * are not settings): refused, naming it; a SyncBatchNorm is saved as the BatchNorm it wraps. */
Test(model_file, pruned_refused_and_sync_batch_norm_saved_as_batch_norm)
{
    em_module *m = em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer());
    cr_assert_eq(em_prune_l1_unstructured(m->children[0].module, "weight", 0.5), EM_OK, "%s",
                 em_error());
    cr_assert_eq(em_model_save(m, model_path()), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "module '0' is a Linear, a type whole-model files cannot "
                                 "rebuild (a pruned layer: em_prune_remove it)"), "%s", em_error());
    em_error_clear();
    em_module_free(m);

    em_module *bn = em_sync_batch_norm_layer(3, (em_batch_norm_opts){.eps = 1e-3});
    cr_assert_not_null(bn, "%s", em_error());
    cr_assert_str_eq(bn->type->type_name, "SyncBatchNorm");
    em_module_eval(bn);
    cr_assert_eq(em_model_save(bn, model_path()), EM_OK, "%s", em_error());
    em_module *r = em_model_load(model_path());
    cr_assert_not_null(r, "%s", em_error());
    cr_assert_str_eq(r->type->type_name, "BatchNorm2d");
    em_tensor *x = em_randn(EM_SHAPE(2, 3, 2, 2), EM_F32, NULL);
    assert_same_values(em_forward(bn, x), em_forward(r, x));
    em_module_free(r);
    em_module_free(bn);
}

/* ---- a user's own module type, described by its settings ---- */
typedef struct {
    int64_t width;
    double scale;
} scaled_options;

typedef struct {
    em_module base;
    scaled_options o;
} scaled_block; /* params: weight (width) */

static em_tensor *scaled_forward(em_module *m, const em_tensor *x)
{
    return em_mul_scalar(em_mul(x, m->params[0].value), ((scaled_block *)m)->o.scale);
}

static em_module *scaled_build(const em_module_type *type, const void *options,
                               em_module **children, int n);

static const em_setting scaled_settings[] = {
    {.name = "width", .kind = EM_SETTING_INT, .offset = offsetof(scaled_options, width),
     .min = 1, .max = 4096},
    {.name = "scale", .kind = EM_SETTING_REAL, .offset = offsetof(scaled_options, scale),
     .min = -10, .max = 10, .def = 1},
};

static const em_module_type scaled_type = {
    .type_name = "ScaledBlock",
    .forward = scaled_forward,
    EM_SETTINGS(scaled_settings),
    .options_offset = offsetof(scaled_block, o),
    .options_size = sizeof(scaled_options),
    .build = scaled_build,
};

static em_module *scaled_new(int64_t width, double scale)
{
    scaled_block *b = (scaled_block *)em_module_alloc(sizeof *b, &scaled_type);
    b->o = (scaled_options){width, scale};
    em_module_add_param(&b->base, "weight", em_randn(EM_SHAPE(width), EM_F32, NULL));
    return &b->base;
}

static em_module *scaled_build(const em_module_type *type, const void *options,
                               em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const scaled_options *o = options;
    return scaled_new(o->width, o->scale);
}

Test(model_file, user_type_is_named_until_registered)
{
    em_module *m = em_sequential(2, em_linear_layer(3, 4, true), scaled_new(4, 0.375));
    cr_assert_eq(em_model_save(m, model_path()), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "module '1' is a ScaledBlock"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_model_save(m->children[1].module, model_path()), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "module '(root)' is a ScaledBlock"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_model_register_type(&scaled_type), EM_OK, "%s", em_error());
    cr_assert_eq(em_model_register_type(&scaled_type), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "'ScaledBlock' is already known"), "%s", em_error());
    em_error_clear();
    round_trip(m, em_randn(EM_SHAPE(2, 3), EM_F32, NULL), false);
}

Test(model_file, weights_read_by_python_safetensors)
{
    if (em_test_venv_skip())
        return;
    em_module *m = em_sequential(2, em_linear_layer(2, 3, true), em_relu_layer());
    cr_assert_eq(em_fill_(m->children[0].module->params[0].value, 0.25), EM_OK);
    cr_assert_eq(em_fill_(m->children[0].module->params[1].value, -0.5), EM_OK);
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    char *out = em_test_venv_output("safetensors_read.py", model_path());
    cr_assert(out);
    cr_assert_str_eq(out, "0.bias [3] -1.500000\n0.weight [3, 2] 1.500000\ntree\n");
    free(out);
    em_module_free(m);
}

/* ---- files that must be refused ---- */

/* Rewrites the saved file with its metadata's first `from` replaced by `to` (to NULL: the
 * text cut at from) and the tensor named drop (NULL: none) left out, or renamed to rename. */
static void rewrite_tensors(const char *from, const char *to, const char *drop,
                            const char *rename)
{
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(model_path(), &st), EM_OK, "%s", em_error());
    const char *text = em_safetensors_meta(st, "ember.model");
    cr_assert(text);
    const char *at = strstr(text, from);
    cr_assert(at, "'%s' not in %s", from, text);
    char edited[8192];
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - text), text, to ? to : "",
             to ? at + strlen(from) : "");
    em_st_entry e[64];
    int n = 0;
    for (int i = 0; i < st->n_tensors; i++)
        if (!drop || strcmp(st->names[i], drop))
            e[n++] = (em_st_entry){st->names[i], st->tensors[i]};
        else if (rename)
            e[n++] = (em_st_entry){rename, st->tensors[i]};
    em_st_meta meta = {"ember.model", edited};
    cr_assert_eq(em_safetensors_save(model_path(), e, n, &meta, 1), EM_OK, "%s", em_error());
    em_safetensors_free(st);
}

static void rewrite(const char *from, const char *to)
{
    rewrite_tensors(from, to, NULL, NULL);
}

static void save_small(void)
{
    em_module *m = em_sequential(3, em_linear_layer(4, 3, true), em_relu_layer(),
                                 em_linear_layer(3, 2, true));
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
}

static void assert_refused(const char *message)
{
    em_error_clear();
    cr_assert_null(em_model_load(model_path()));
    cr_assert(strstr(em_error(), message), "expected '%s' in: %s", message, em_error());
    em_error_clear();
}

Test(model_file, unknown_type_named)
{
    save_small();
    rewrite("\"ReLU\"", "\"Swish9\"");
    assert_refused("module '1' is a 'Swish9', a type ember does not know");
}

Test(model_file, truncated_and_edited_metadata)
{
    save_small();
    rewrite("{\"type\":\"ReLU\"", NULL);
    assert_refused("corrupt JSON");
    save_small();
    rewrite("\"out_features\":3", "\"out_features\":-3");
    assert_refused("Linear '0': setting 'out_features' is -3, outside [1, 2147483647]");
    save_small();
    rewrite("\"bias\":true", "\"bias\":1");
    assert_refused("Linear '0': setting 'bias' is not true or false");
    save_small();
    rewrite("\"in_features\":4,", "");
    assert_refused("Linear '0' has no setting 'in_features'");
    save_small();
    rewrite("\"version\":1", "\"version\":2");
    assert_refused("expected 'ember.model' {\"version\": 1");
}

/* padding_idx only changes training: the loaded layer keeps it and its padding row gets no
 * gradient; a layer without one saves no 'padding_idx' */
Test(model_file, embedding_padding_idx)
{
    em_manual_seed(3);
    em_embedding_opts o = {.padding_idx = -1, .has_padding_idx = true};
    em_module *m = em_embedding_layer(5, 2, o);
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
    em_module *r = em_model_load(model_path());
    cr_assert(r, "%s", em_error());
    em_setting_value padding;
    cr_assert_eq(em_module_setting(r, "padding_idx", &padding), EM_OK);
    cr_assert(!padding.none && padding.i == 4, "padding_idx %lld", (long long)padding.i);
    em_tensor *ids = em_from_data(EM_SHAPE(2), EM_I64, (int64_t[]){4, 1});
    cr_assert_eq(em_backward(em_sum_all(em_forward(r, ids))), EM_OK, "%s", em_error());
    double g[10];
    em_copy_to_host(em_module_find(r, "weight")->grad, EM_F64, g);
    cr_assert(g[2] == 1 && g[3] == 1 && g[8] == 0 && g[9] == 0, "row 1 trained, row 4 not");
    em_module_free(r);

    rewrite("\"padding_idx\":4", "\"padding_idx\":5");
    assert_refused("Embedding '(root)': setting 'padding_idx' is 5, outside [0, 4]");

    m = em_embedding_layer(5, 2, (em_embedding_opts){0});
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
    r = em_model_load(model_path());
    cr_assert(r, "%s", em_error());
    cr_assert_eq(em_module_setting(r, "padding_idx", &padding), EM_OK);
    cr_assert(padding.none);
    em_module_free(r);
}

Test(model_file, quantized_setting_missing)
{
    em_module *m = em_sequential(1, em_linear_layer(3, 2, true));
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){0}), EM_OK);
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
    rewrite("\"per_tensor\"", "\"per_tensOr\"");
    assert_refused("QuantizedLinear '0' has no setting 'per_tensor'");
}

Test(model_file, missing_or_resized_weights)
{
    save_small();
    rewrite_tensors("{", "{", "2.bias", NULL);
    assert_refused("the settings make 23 tensor elements, the file holds 21");
    save_small();
    rewrite_tensors("{", "{", "2.bias", "2.shift");
    assert_refused("the model's '2.bias' is not in the file");
    save_small();
    rewrite("\"out_features\":2", "\"out_features\":1");
    assert_refused("the model's '2.weight' is [1,3], the file's [2,3]");
}

/* m saved, then its metadata's first `from` replaced by `to`: refused with message */
static void assert_edit_refused(em_module *m, const char *from, const char *to,
                                const char *message)
{
    cr_assert(m, "%s", em_error());
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
    rewrite(from, to);
    assert_refused(message);
}

/* Settings no layer can run with are refused at load, naming the module and the setting,
 * before a forward meets them: what the settings' ranges cannot say is each type's check. */
Test(model_file, settings_that_cannot_run_refused)
{
    assert_edit_refused(em_sequential(2, em_linear_layer(2, 2, true), em_hardtanh_layer(-1, 1)),
                        "\"min_val\":-1.0", "\"min_val\":2.0",
                        "Hardtanh '1': setting 'min_val' is 2, above max_val 1");
    assert_edit_refused(em_softplus_layer(2, 20), "\"beta\":2.0", "\"beta\":0.0",
                        "Softplus '(root)': setting 'beta' is 0; it divides, so it must not be");
    assert_edit_refused(em_sequential(2, em_relu_layer(),
                                      em_group_norm_layer(2, 4, (em_group_norm_opts){0})),
                        "\"num_channels\":4", "\"num_channels\":5",
                        "GroupNorm '1': setting 'num_groups' is 2, which does not divide "
                        "num_channels 5");
    assert_edit_refused(em_conv2d_layer(4, 6, 3, (em_conv2d_layer_opts){.groups = 2}),
                        "\"groups\":2", "\"groups\":4",
                        "Conv2d '(root)': setting 'groups' is 4, which does not divide "
                        "out_channels 6");
    assert_edit_refused(em_conv2d_layer(4, 6, 3,
                                        (em_conv2d_layer_opts){.padding = EM_PADDING_SAME}),
                        "\"stride\":1", "\"stride\":2",
                        "Conv2d '(root)': setting 'padding' is 'same' (-1), which needs stride 1");
    assert_edit_refused(em_max_pool2d_layer(2, (em_pool2d_layer_opts){.padding = 1}),
                        "\"kernel_size\":2", "\"kernel_size\":1",
                        "MaxPool2d '(root)': setting 'padding' is 1, more than half kernel_size 1");
    assert_edit_refused(em_multihead_attention_layer(8, 2, (em_mha_opts){0}),
                        "\"num_heads\":2", "\"num_heads\":3",
                        "MultiheadAttention '(root)': setting 'num_heads' is 3, which does not "
                        "divide embed_dim 8");
    assert_edit_refused(em_pad_layer((int64_t[]){1, 1}, 2, EM_PAD_REFLECT, 0),
                        "\"value\":0.0", "\"value\":3.0",
                        "Pad '(root)': setting 'value' is 3; only constant padding has one");
    assert_edit_refused(em_upsample_layer((em_interpolate_opts){.scale_factor = {2}}),
                        "\"mode\":0", "\"mode\":7",
                        "Upsample '(root)': setting 'mode' is 7, not the index of one of its 3 "
                        "choices");
    assert_edit_refused(em_dropout_layer(0.5), "\"p\":0.5", "\"p\":1.5",
                        "Dropout '(root)': setting 'p' is 1.5, outside [0, 1]");
}

/* A key that is none of the type's settings (a misspelt or invented one) is refused, not
 * ignored. */
Test(model_file, unknown_setting_refused)
{
    save_small();
    rewrite("\"bias\":true", "\"bias\":true,\"biass\":false");
    assert_refused("Linear '0': setting 'biass' is not one of a Linear's (in_features, "
                   "out_features, bias)");
    assert_edit_refused(em_relu_layer(), "\"settings\":{}", "\"settings\":{\"inplace\":true}",
                        "ReLU '(root)': setting 'inplace' is not one of a ReLU's (none)");
    assert_edit_refused(em_pad_layer((int64_t[]){1, 1}, 2, EM_PAD_CONSTANT, 0),
                        "\"pad_1\":1", "\"pad_1\":1,\"pad_2\":1",
                        "Pad '(root)': setting 'pad_2' is not one of a Pad's (mode, n_pads, "
                        "pad_N, value)");
}

/* The file's tensor name cast to dtype, the rest of the file as it was. */
static void recast_tensor(const char *name, em_dtype dtype)
{
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(model_path(), &st), EM_OK, "%s", em_error());
    em_st_entry e[64];
    cr_assert_leq(st->n_tensors, 64);
    for (int i = 0; i < st->n_tensors; i++)
        e[i] = (em_st_entry){st->names[i], strcmp(st->names[i], name)
                                               ? st->tensors[i]
                                               : em_to_dtype(st->tensors[i], dtype)};
    em_st_meta meta = {"ember.model", em_safetensors_meta(st, "ember.model")};
    cr_assert_eq(em_safetensors_save(model_path(), e, st->n_tensors, &meta, 1), EM_OK, "%s",
                 em_error());
    em_safetensors_free(st);
}

/* Weights stored as bool, i64 or u8 where a layer wants floats are refused, not converted; an
 * f64 weight reads into the f32 one. */
Test(model_file, weights_of_another_kind_refused)
{
    const em_dtype kinds[] = {EM_BOOL, EM_I64, EM_U8};
    const char *messages[] = {"the model's '0.weight' is f32, the file's bool",
                              "the model's '0.weight' is f32, the file's i64",
                              "the model's '2.bias' is f32, the file's u8"};
    const char *names[] = {"0.weight", "0.weight", "2.bias"};
    for (int k = 0; k < 3; k++) {
        save_small();
        recast_tensor(names[k], kinds[k]);
        assert_refused(messages[k]);
    }
    save_small();
    recast_tensor("0.weight", EM_F64);
    em_module *m = em_model_load(model_path());
    cr_assert_not_null(m, "%s", em_error());
    cr_assert_eq(em_module_find(m, "0.weight")->dtype, EM_F32);
    em_module_free(m);
}

/* CELU, a layer added through its description alone: saved, loaded with its alpha, and refused
 * with alpha 0 */
Test(model_file, celu_layer)
{
    em_manual_seed(8);
    round_trip(em_sequential(3, em_linear_layer(3, 5, true), em_celu_layer(0.6),
                             em_linear_layer(5, 2, true)),
               em_randn(EM_SHAPE(4, 3), EM_F32, NULL), true);
    em_module *m = em_celu_layer(0.6);
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
    em_module *r = em_model_load(model_path());
    em_setting_value alpha;
    cr_assert(r && em_module_setting(r, "alpha", &alpha) == EM_OK, "%s", em_error());
    cr_assert_str_eq(r->type->type_name, "CELU");
    cr_assert_eq(alpha.r, 0.6);
    em_module_free(r);
    rewrite("\"alpha\":0.59999999999999998", "\"alpha\":0");
    assert_refused("CELU '(root)': setting 'alpha' is 0; it divides, so it must not be");
}

Test(model_file, hostile_sizes_refused_before_allocating)
{
    save_small();
    rewrite("\"in_features\":4", "\"in_features\":2000000000");
    em_memory_reset_peak(EM_CPU);
    size_t before = em_memory_get_stats(EM_CPU).live_bytes;
    assert_refused("the settings make 6000000011 tensor elements, the file holds 23");
    cr_assert_lt(em_memory_get_stats(EM_CPU).peak_bytes - before, 1 << 20);
    save_small();
    rewrite("\"type\":\"Sequential\"", "\"type\":\"ModuleList\"");
    em_module *m = em_model_load(model_path()); /* a list of the same layers loads */
    cr_assert(m, "%s", em_error());
    em_module_free(m);
}

Test(model_file, not_a_model_file)
{
    em_module *m = em_linear_layer(2, 2, true);
    cr_assert_eq(em_module_save(m, model_path(), NULL, 0), EM_OK);
    assert_refused("no 'ember.model' metadata: not a whole-model file");
    em_module_free(m);
    cr_assert_null(em_model_load("/nonexistent/model.safetensors"));
    em_error_clear();
}

Test(model_file, deep_trees_refused)
{
    char text[8192] = "{\"version\":1,\"training\":false,\"model\":";
    for (int i = 0; i < 70; i++)
        strcat(text, "{\"type\":\"Sequential\",\"settings\":{},\"children\":{\"0\":");
    strcat(text, "{\"type\":\"ReLU\",\"settings\":{}}");
    for (int i = 0; i < 70; i++)
        strcat(text, "}}");
    strcat(text, "}");
    em_st_meta meta = {"ember.model", text};
    cr_assert_eq(em_safetensors_save(model_path(), NULL, 0, &meta, 1), EM_OK, "%s", em_error());
    assert_refused("the tree is deeper or larger than ember loads");
}

/* A tree's text is read within limits before a tree of it is built (jansson's took ~77 times
 * the text: a 15 MB one 1.2 GB): 600 KB of empty objects beside a Linear's two tensors are
 * refused at the first value past the budget; 1,000 modules without tensors still load. */
Test(model_file, a_tree_larger_than_its_tensors_describe_is_refused_before_it_is_built)
{
    em_module *m = em_linear_layer(2, 2, true);
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_safetensors *st;
    cr_assert_eq(em_safetensors_load(model_path(), &st), EM_OK, "%s", em_error());
    const char *tree = em_safetensors_meta(st, "ember.model");
    size_t objects = 200000, k = 0;
    char *text = malloc(objects * 3 + strlen(tree) + 64);
    k += (size_t)sprintf(text, "{\"junk\":[");
    for (size_t i = 0; i < objects; i++, k += 3)
        memcpy(text + k, "{},", 3);
    sprintf(text + k, "{}],%s", tree + 1);
    em_st_entry e[2] = {{"weight", em_module_find(m, "weight")}, {"bias", em_module_find(m, "bias")}};
    em_st_meta meta = {"ember.model", text};
    cr_assert_eq(em_safetensors_save(model_path(), e, 2, &meta, 1), EM_OK, "%s", em_error());
    assert_refused("the tree is deeper or larger than ember loads for a file of 2 tensors (at "
                   "byte 99075: more than 33024 values)");
    free(text);
    em_safetensors_free(st);
    em_module_free(m);
    em_module *relus = em_sequential(0);
    for (int i = 0; i < 1000 && relus; i++)
        relus = em_sequential_append(relus, em_relu_layer());
    cr_assert_eq(em_model_save(relus, model_path()), EM_OK, "%s", em_error());
    em_module *back = em_model_load(model_path());
    cr_assert_not_null(back, "%s", em_error());
    cr_assert_eq(back->n_children, 1000);
    em_module_free(back);
    em_module_free(relus);
}

/* ---- static INT8 ---- */

/* A CNN calibrated on noise and converted to static INT8 as o says: x (N, 1, 8, 8) -> (N, 3).
 * 0: Conv2d + ReLU (1, fused: an Identity), 2: Conv2d with stride, dilation and no bias,
 * 3: MaxPool2d, 4: Flatten, 5: Linear + ReLU (6, fused), 7: Linear without bias. */
static em_module *static_cnn(em_static_quant_opts o)
{
    em_manual_seed(9);
    em_module *m = em_sequential(
        8, em_conv2d_layer(1, 4, 3, (em_conv2d_layer_opts){.padding = 1}), em_relu_layer(),
        em_conv2d_layer(4, 6, 3, (em_conv2d_layer_opts){.stride = 2, .padding = 2,
                                                        .dilation = 2, .no_bias = true}),
        em_max_pool2d_layer(2, (em_pool2d_layer_opts){0}), em_flatten_layer(),
        em_linear_layer(6 * 2 * 2, 8, true), em_relu_layer(), em_linear_layer(8, 3, false));
    em_tensor *calib = em_randn(EM_SHAPE(16, 1, 8, 8), EM_F32, NULL);
    cr_assert_eq(em_quantize_static_(m, &calib, 1, o), EM_OK, "%s", em_error());
    return m;
}

static void expect_setting(const em_module *m, const char *child, const char *name, int64_t want)
{
    em_setting_value v;
    cr_assert_eq(em_module_setting(em_module_child(m, child), name, &v), EM_OK, "%s",
                 em_error());
    cr_expect_eq(v.i, want, "%s's %s is %lld, not %lld", child, name, (long long)v.i,
                 (long long)want);
}

/* The static layers and the fused ReLUs' Identities saved and rebuilt: the same hash (every
 * int8 weight, scale, zero point and bias bit for bit), summary and outputs, per channel and
 * per tensor. */
Test(model_file, static_int8_cnn)
{
    const em_static_quant_opts opts[] = {
        {.granularity = EM_QUANT_PER_CHANNEL},
        {.granularity = EM_QUANT_PER_TENSOR, .observer = {.kind = EM_CALIB_PERCENTILE}}};
    for (int i = 0; i < 2; i++) {
        em_module *m = static_cnn(opts[i]);
        cr_assert_eq(em_quantize_meta(m, (em_st_meta[2]){0}), 1, "static INT8 layers made");
        round_trip(m, em_randn(EM_SHAPE(3, 1, 8, 8), EM_F32, NULL), true);
        em_module *r = em_model_load(model_path());
        cr_assert_not_null(r, "%s", em_error());
        const char *types[] = {"QuantizedConv2d", "Identity", "QuantizedConv2d", "MaxPool2d",
                               "Flatten", "StaticQuantizedLinear", "Identity",
                               "StaticQuantizedLinear"};
        for (int c = 0; c < 8; c++)
            cr_expect_str_eq(r->children[c].module->type->type_name, types[c]);
        expect_setting(r, "0", "relu", true);
        expect_setting(r, "0", "padding", 1);
        expect_setting(r, "2", "relu", false);
        expect_setting(r, "2", "bias", false);
        expect_setting(r, "2", "stride", 2);
        expect_setting(r, "2", "dilation", 2);
        expect_setting(r, "5", "in_features", 24);
        expect_setting(r, "5", "relu", true);
        expect_setting(r, "7", "per_tensor", i == 1);
        cr_expect_eq(em_module_find(r, "2.weight")->dtype, EM_I8);
        cr_expect_eq(em_module_find(r, "7.input_zero_point")->dtype, EM_I32);
        cr_expect_eq(em_numel(em_module_find(r, "2.weight_scale")), i == 1 ? 1 : 6);
        em_module_free(r);
    }
}

/* static_cnn saved with value v at index k of its tensor name */
static void save_static_cnn_with(const char *name, int64_t k, double v)
{
    em_module *m = static_cnn((em_static_quant_opts){0});
    em_tensor *t = em_module_find(m, name);
    cr_assert_not_null(t, "%s", name);
    if (t->dtype == EM_I32)
        ((int32_t *)em_data_ptr(t))[k] = (int32_t)v;
    else
        ((float *)em_data_ptr(t))[k] = (float)v;
    cr_assert_eq(em_model_save(m, model_path()), EM_OK, "%s", em_error());
    em_module_free(m);
}

static void save_static_cnn(void)
{
    save_static_cnn_with("0.input_scale", 0, 0.5);
}

/* A static layer's file is checked as any other's: every setting of its type, of its kind and
 * in range, the int8 weight s8 and the zero point i32 (not converted), the scales' shapes as
 * per_tensor says; then the quantization parameters, named with the layer and the value. */
Test(model_file, static_int8_bad_files_refused)
{
    save_static_cnn();
    em_module *m = em_model_load(model_path());
    cr_assert_not_null(m, "%s", em_error());
    em_module_free(m);

    save_static_cnn();
    rewrite("\"padding\":1", "\"padding\":-1");
    assert_refused("QuantizedConv2d '0': setting 'padding' is -1, outside [0, 2147483647]");
    save_static_cnn();
    rewrite("\"kernel_size\":3", "\"kernel_size\":0");
    assert_refused("QuantizedConv2d '0': setting 'kernel_size' is 0, outside [1, 2147483647]");
    save_static_cnn();
    rewrite("\"dilation\":2", "\"dilation\":0");
    assert_refused("QuantizedConv2d '2': setting 'dilation' is 0, outside [1, 2147483647]");
    save_static_cnn();
    rewrite("\"relu\":true", "\"relu\":1");
    assert_refused("QuantizedConv2d '0': setting 'relu' is not true or false");
    save_static_cnn();
    rewrite("\"dilation\":1,", "\"dilation\":1,\"groups\":2,");
    assert_refused("QuantizedConv2d '0': setting 'groups' is not one of a QuantizedConv2d's "
                   "(in_channels, out_channels, kernel_size, stride, padding, dilation, bias, "
                   "per_tensor, relu)");
    save_static_cnn();
    rewrite("\"in_features\":24,\"out_features\":8,\"bias\":true,\"per_tensor\":false",
            "\"in_features\":24,\"out_features\":8,\"bias\":true");
    assert_refused("StaticQuantizedLinear '5' has no setting 'per_tensor'");
    save_static_cnn();
    rewrite("\"per_tensor\":false", "\"per_tensor\":true");
    assert_refused("the model's '0.weight_scale' is [1], the file's [4]");
    save_static_cnn();
    rewrite("\"in_features\":24", "\"in_features\":2000000000");
    assert_refused("the settings make 16000000");

    const struct {
        const char *name;
        em_dtype dtype;
        const char *message;
    } recast[] = {
        {"2.weight", EM_U8, "the model's '2.weight' is i8, the file's u8"},
        {"5.weight", EM_F32, "the model's '5.weight' is i8, the file's f32"},
        {"0.input_zero_point", EM_I64, "the model's '0.input_zero_point' is i32, the file's i64"},
        {"7.weight_scale", EM_I32, "the model's '7.weight_scale' is f32, the file's i32"},
    };
    for (size_t i = 0; i < sizeof recast / sizeof *recast; i++) {
        save_static_cnn();
        recast_tensor(recast[i].name, recast[i].dtype);
        assert_refused(recast[i].message);
    }

    const struct {
        const char *name;
        int64_t k;
        double v;
        const char *message;
    } values[] = {
        {"2.weight_scale", 1, 0, "QuantizedConv2d '2': weight_scale[1] is 0; a scale must be "
                                 "finite and > 0"},
        {"7.weight_scale", 2, NAN, "StaticQuantizedLinear '7': weight_scale[2] is nan"},
        {"5.input_scale", 0, INFINITY, "StaticQuantizedLinear '5': input_scale[0] is inf"},
        {"0.input_scale", 0, -0.25, "QuantizedConv2d '0': input_scale[0] is -0.25"},
        {"0.input_zero_point", 0, 128, "QuantizedConv2d '0': input_zero_point is 128; it must "
                                       "be in 0..127"},
        {"7.input_zero_point", 0, -1, "StaticQuantizedLinear '7': input_zero_point is -1"},
    };
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        save_static_cnn_with(values[i].name, values[i].k, values[i].v);
        assert_refused(values[i].message);
    }
}

/* ---- em_module_clone: a deep copy through the types' descriptions ---- */

/* a BatchNorm with running statistics from a step, a Concat, a frozen parameter, one module in
 * eval mode: the copy hashes equal, runs equal, is independent, keeps modes and requires_grad */
Test(model_file, clone_is_a_deep_copy)
{
    em_manual_seed(8);
    em_module *m = em_sequential(
        4, em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){.padding = 1}),
        em_batch_norm2d_layer(3, (em_batch_norm_opts){0}),
        em_concat_skip(em_conv2d_layer(3, 2, 1, (em_conv2d_layer_opts){0}), 1),
        em_flatten_layer());
    cr_assert_not_null(m, "%s", em_error());
    em_tensor *x = em_randn(EM_SHAPE(2, 2, 4, 4), EM_F32, NULL);
    cr_assert_not_null(em_forward(m, x), "%s", em_error()); /* running statistics move */
    em_requires_grad_(em_module_find(m, "0.bias"), false);
    em_module_train(em_module_child(m, "2"), false);
    em_module *c = em_module_clone(m);
    cr_assert_not_null(c, "%s", em_error());
    cr_expect_eq(em_module_hash(c), em_module_hash(m));
    assert_same_names(m, c);
    cr_expect_eq(em_item(em_module_find(c, "1.num_batches_tracked")), 1);
    cr_expect(c->training && !em_module_child(c, "2")->training);
    cr_expect(!em_module_find(c, "0.bias")->requires_grad);
    cr_expect(em_module_find(c, "0.weight")->requires_grad);
    cr_expect_null(em_module_find(c, "0.weight")->grad);
    em_module_eval(m);
    em_module_eval(c);
    assert_same_values(em_forward(m, x), em_forward(c, x));
    cr_assert_eq(em_fill_(em_module_find(c, "0.weight"), 0.5), EM_OK);
    cr_expect_neq(em_module_hash(c), em_module_hash(m), "the copy holds its own tensors");
    em_module_free(m);
    /* f64 and quantized models copy as they are (the int8 weights packed again) */
    em_module *d = em_linear_layer(3, 2, true);
    cr_assert_eq(em_module_to_dtype(d, EM_F64), EM_OK);
    em_module *dc = em_module_clone(d);
    cr_assert_not_null(dc, "%s", em_error());
    cr_expect_eq(em_module_find(dc, "weight")->dtype, EM_F64);
    cr_expect_eq(em_module_hash(dc), em_module_hash(d));
    em_module *q = em_sequential(2, em_linear_layer(6, 5, true),
                                 em_lstm_layer(5, 4, (em_rnn_opts){.batch_first = true}));
    cr_assert_eq(em_quantize_dynamic_(q, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    em_module *qc = em_module_clone(q);
    cr_assert_not_null(qc, "%s", em_error());
    em_tensor *xq = em_randn(EM_SHAPE(2, 3, 6), EM_F32, NULL);
    assert_same_values(em_forward(q, xq), em_forward(qc, xq));
    /* a type whose build makes its own children (GPT's blocks, their attention's out_proj):
     * those are filled in where they stand */
    em_module *gpt = em_gpt((em_gpt_settings){.vocab_size = 11, .block_size = 6, .n_layer = 2,
                                            .n_head = 2, .n_embd = 8});
    em_module *gc = em_module_clone(gpt);
    cr_assert_not_null(gc, "%s", em_error());
    cr_expect_eq(em_module_hash(gc), em_module_hash(gpt));
    em_tensor *ids = em_from_data(EM_SHAPE(1, 4), EM_I64, (int64_t[]){1, 4, 10, 0});
    assert_same_values(em_forward(gpt, ids), em_forward(gc, ids));
    em_module_free(gpt);
    em_module_free(gc);
    em_module_free(c);
    em_module_free(d);
    em_module_free(dc);
    em_module_free(q);
    em_module_free(qc);
}

Test(model_file, clone_refuses_a_type_without_build)
{
    em_module *m = em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer());
    cr_assert_eq(em_prune_l1_unstructured(m->children[0].module, "weight", 0.5), EM_OK, "%s",
                 em_error());
    cr_assert_null(em_module_clone(m));
    cr_expect_str_eq(em_error(), "em_module_clone: module '0' is a Linear, whose type has no "
                                 "build to copy it through (its settings and build, as a model "
                                 "file needs; a pruned layer: em_prune_remove it)");
    em_error_clear();
    em_module_free(m);
}
