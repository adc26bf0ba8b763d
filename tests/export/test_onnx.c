/* ONNX export: the protobuf encoder's bytes against hand-encoded golden values, and exported
 * models (the MLP and CNN recipes' shapes, a CNN with folded BatchNorm, every other supported
 * layer, the group and instance norms, a user's module type with a registered exporter;
 * residual blocks, Concat branches and a U-Net skip, LSTM, GRU, attention, transformer layers
 * and GPT with dynamic batch and sequence axes) checked by the real consumers in the setup venv: onnx.checker and onnxruntime,
 * whose output on a batch of a different size than the export example must match ember's
 * within 1e-5. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/models.h"
#include "helpers/venv.h"
#include "io/protobuf_internal.h"

static void expect_bytes(const em_pb *b, const uint8_t *want, size_t n)
{
    cr_assert(!b->failed);
    cr_assert_eq(b->len, n, "encoded %zu bytes, want %zu", b->len, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b->data[i], want[i], "byte %zu: 0x%02x, want 0x%02x", i, b->data[i], want[i]);
}

/* Golden bytes from the protobuf encoding rules (developers.google.com/protocol-buffers
 * "Encoding": 150 in field 1 is 08 96 01; a string in field 2 is 12 len bytes). */
Test(onnx, protobuf_encoding_golden_bytes)
{
    em_pb b = {0};
    em_pb_int(&b, 1, 150);
    em_pb_string(&b, 2, "testing");
    em_pb_float(&b, 4, 1.5f); /* 0x3fc00000 little-endian after tag 0x25 */
    em_pb_int(&b, 3, -1);     /* ten bytes: int64 -1 as an unsigned varint */
    const uint8_t want[] = {0x08, 0x96, 0x01, 0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g',
                            0x25, 0x00, 0x00, 0xc0, 0x3f, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0x01};
    expect_bytes(&b, want, sizeof want);
    em_pb outer = {0}, inner = {0};
    em_pb_int(&inner, 1, 150);
    em_pb_message(&outer, 3, &inner); /* 1a 03 08 96 01 */
    const uint8_t nested[] = {0x1a, 0x03, 0x08, 0x96, 0x01};
    expect_bytes(&outer, nested, sizeof nested);
    cr_assert_null(inner.data);
    em_pb_free(&b);
    em_pb_free(&outer);
}

/* t's elements as raw f32 (i64 for token ids) */
static void write_raw(const char *path, const em_tensor *t)
{
    size_t n = (size_t)em_numel(t), size = t->dtype == EM_I64 ? 8 : 4;
    void *v = malloc(size * n);
    cr_assert_eq(em_copy_to_host(t, t->dtype == EM_I64 ? EM_I64 : EM_F32, v), EM_OK, "%s",
                 em_error());
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(v, size, n, f), n);
    fclose(f);
    free(v);
}

/* Inputs of shape s: N(0, 1), or token ids in [0, vocab) when vocab > 0 */
static em_tensor *input(em_shape s, int64_t vocab, em_generator *gen)
{
    return vocab ? em_randint(s, EM_I64, 0, vocab, gen) : em_randn(s, EM_F32, gen);
}

typedef struct {
    em_shape example, run; /* the export's example and the input onnxruntime runs */
    int64_t vocab;         /* > 0: token ids in [0, vocab) rather than f32 inputs */
    em_onnx_opts opts;
    const char *op_check;  /* "--absent OP" or "--present OP" for onnx_check.py, or NULL */
} export_check;

/* Exports m with an input of shape c.example and checks it with onnx_check.py on c.run. */
static void check_export_with(em_module *m, export_check c)
{
    cr_assert_not_null(m, "%s", em_error());
    if (em_test_venv_skip())
        return;
    em_generator gen = em_generator_new(7);
    em_shape s5 = c.run;
    em_tensor *example = input(c.example, c.vocab, &gen), *x = input(s5, c.vocab, &gen);
    char dir[] = "/tmp/ember_onnx_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char model[256], in[256], out[256], args[1024], shape[64] = "";
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(in, sizeof in, "%s/x.bin", dir);
    snprintf(out, sizeof out, "%s/y.bin", dir);
    cr_assert_eq(em_onnx_export(m, example, model, c.opts), EM_OK, "%s", em_error());
    cr_assert(m->training, "export restores train mode");
    em_module_eval(m);
    bool grad = em_set_grad_enabled(false);
    em_tensor *y = em_forward(m, x);
    em_set_grad_enabled(grad);
    cr_assert_not_null(y, "%s", em_error());
    write_raw(in, x);
    write_raw(out, y);
    for (int i = 0; i < s5.ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? "x" : "",
                 (long long)s5.d[i]);
    snprintf(args, sizeof args, "%s %s %s %s 1e-5 %s", model, in, shape, out,
             c.op_check ? c.op_check : "");
    cr_assert_eq(em_test_venv_run("onnx_check.py", args), 0, "onnx_check.py failed");
    unlink(model);
    unlink(in);
    unlink(out);
    rmdir(dir);
    em_release(example);
    em_release(x);
    em_release(y);
    em_module_free(m);
}

/* Exports m with an example of batch 2 and checks it with onnx_check.py on a batch of 5. */
static void check_export(em_module *m, em_shape sample, const char *op_check)
{
    em_shape s2 = sample, s5 = sample;
    s2.d[0] = 2;
    s5.d[0] = 5;
    check_export_with(m, (export_check){.example = s2, .run = s5, .op_check = op_check});
}

Test(onnx, mlp_recipe_matches_onnxruntime)
{
    em_manual_seed(1);
    check_export(em_sequential(5, em_linear_layer(784, 512, true), em_relu_layer(),
                               em_linear_layer(512, 256, true), em_relu_layer(),
                               em_linear_layer(256, 10, true)),
                 EM_SHAPE(1, 784), NULL);
}

Test(onnx, cnn_recipe_matches_onnxruntime)
{
    em_manual_seed(2);
    em_conv2d_layer_opts pad1 = {.padding = 1};
    em_pool2d_layer_opts halve = {0};
    check_export(em_sequential(10, em_conv2d_layer(1, 32, 3, pad1), em_relu_layer(),
                               em_max_pool2d_layer(2, halve), em_conv2d_layer(32, 64, 3, pad1),
                               em_relu_layer(), em_max_pool2d_layer(2, halve), em_flatten_layer(),
                               em_linear_layer(3136, 128, true), em_relu_layer(),
                               em_linear_layer(128, 10, true)),
                 EM_SHAPE(1, 1, 28, 28), NULL);
}

/* Running statistics and affine parameters far from their initial values. */
static em_module *trained_bn(int64_t c, uint64_t seed)
{
    em_module *bn = em_batch_norm2d_layer(c, (em_batch_norm_opts){.eps = 1e-3});
    em_generator gen = em_generator_new(seed);
    em_copy_(bn->params[0].value, em_uniform(EM_SHAPE(c), EM_F32, 0.5, 2.0, &gen));
    em_copy_(bn->params[1].value, em_normal(EM_SHAPE(c), EM_F32, 0, 1, &gen));
    em_copy_(bn->buffers[0].value, em_normal(EM_SHAPE(c), EM_F32, 0, 0.5, &gen));
    em_copy_(bn->buffers[1].value, em_uniform(EM_SHAPE(c), EM_F32, 0.2, 3.0, &gen));
    return bn;
}

Test(onnx, conv_batchnorm_folded)
{
    em_manual_seed(3);
    em_scope_begin();
    em_module *m = em_sequential(8, em_conv2d_layer(3, 8, 3, (em_conv2d_layer_opts){.stride = 2,
                                                                                 .padding = 1}),
                                 trained_bn(8, 11), em_relu_layer(),
                                 em_conv2d_layer(8, 8, 3, (em_conv2d_layer_opts){.groups = 2,
                                                                                  .no_bias = true}),
                                 trained_bn(8, 12), em_relu_layer(), em_flatten_layer(),
                                 em_linear_layer(8 * 4 * 4, 4, true));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 3, 12, 12), "--absent BatchNormalization");
}

Test(onnx, every_other_layer_matches_onnxruntime)
{
    em_manual_seed(4);
    em_scope_begin();
    em_module *features = em_sequential(
        6, em_conv2d_layer(2, 6, 3, (em_conv2d_layer_opts){.padding = 1, .dilation = 1}),
        em_avg_pool2d_layer(2, (em_pool2d_layer_opts){0}), em_gelu_layer(false),
        em_max_pool2d_layer(3, (em_pool2d_layer_opts){.stride = 1, .padding = 1}),
        em_adaptive_avg_pool2d_layer(2, 2), em_adaptive_avg_pool2d_layer(1, 1));
    em_module *bn1 = em_batch_norm1d_layer(16, (em_batch_norm_opts){0});
    em_copy_(bn1->buffers[1].value, em_full(EM_SHAPE(16), EM_F32, 2.5));
    em_module *m = em_sequential(17, features, em_flatten_layer(), em_linear_layer(6, 16, true),
                                 bn1, em_leaky_relu_layer(0.1), em_dropout_layer(0.3),
                                 em_layer_norm_layer(16, (em_layer_norm_opts){0}),
                                 em_gelu_layer(true), em_silu_layer(),
                                 em_softsign_layer(), em_linear_layer(16, 8, false),
                                 em_tanh_layer(), em_sigmoid_layer(), em_linear_layer(8, 5, true),
                                 em_softmax_layer(1), em_sequential(0),
                                 em_linear_layer(5, 3, true));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 2, 8, 8), NULL);
}

/* The activations with arguments or composed mappings; linear layers in between spread the
 * values over every branch (scaled by 3 so hardswish's and softplus's kinks are reached). */
Test(onnx, more_activations_match_onnxruntime)
{
    em_manual_seed(5);
    em_scope_begin();
    em_module *wide = em_linear_layer(12, 12, true);
    em_copy_(wide->params[0].value, em_mul_scalar(wide->params[0].value, 3.0));
    em_module *m = em_sequential(
        12, em_linear_layer(4, 12, true), em_mish_layer(), wide, em_softplus_layer(2, 20),
        em_hardswish_layer(), em_linear_layer(12, 12, true), em_hardtanh_layer(-0.5, 0.8),
        em_elu_layer(0.7), em_linear_layer(12, 12, true), em_selu_layer(),
        em_logsigmoid_layer(), em_linear_layer(12, 3, true));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 4), NULL);
}

/* Pad (constant with a crop, reflect, edge) and Resize (nearest by size and by scale, linear
 * with align_corners and half_pixel, sizes recomputed from a scale) on odd sizes. */
Test(onnx, upsample_and_pad_match_onnxruntime)
{
    em_module *m = em_sequential(
        7, em_pad_layer((int64_t[]){1, 2, -1, 1}, 4, EM_PAD_CONSTANT, 0.5),
        em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_BILINEAR, .size = {8, 3}}),
        em_pad_layer((int64_t[]){2, 1, 1, 2}, 4, EM_PAD_REFLECT, 0),
        em_upsample_layer((em_interpolate_opts){.scale_factor = {1.7}}),
        em_pad_layer((int64_t[]){0, 3, 2, 0}, 4, EM_PAD_REPLICATE, 0),
        em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_BILINEAR, .size = {9, 5},
                                                .align_corners = true}),
        em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_BILINEAR,
                                                .scale_factor = {1.3, 0.7},
                                                .recompute_scale_factor = true}));
    check_export(m, EM_SHAPE(1, 3, 5, 7), "--present Resize");
    em_module *n = em_sequential(
        3, em_upsample_layer((em_interpolate_opts){.size = {11}}),
        em_pad_layer((int64_t[]){3, 2}, 2, EM_PAD_REFLECT, 0),
        em_upsample_layer((em_interpolate_opts){.mode = EM_INTERP_LINEAR,
                                                .scale_factor = {1.7}}));
    check_export(n, EM_SHAPE(1, 2, 7), "--present Pad");
}

/* CELU as ONNX's Celu, its alpha from the layer's setting, on values of both signs */
Test(onnx, celu_matches_onnxruntime)
{
    em_manual_seed(15);
    em_scope_begin();
    em_module *wide = em_linear_layer(4, 8, true);
    em_copy_(wide->params[0].value, em_mul_scalar(wide->params[0].value, 3.0));
    em_scope_end();
    check_export(em_sequential(3, wide, em_celu_layer(0.6), em_linear_layer(8, 3, true)),
                 EM_SHAPE(1, 4), "--present Celu");
}

Test(onnx, softplus_below_threshold_20_is_refused)
{
    em_module *m = em_sequential(2, em_linear_layer(4, 3, true), em_softplus_layer(1, 5));
    em_tensor *x = em_zeros(EM_SHAPE(2, 4), EM_F32);
    cr_assert_eq(em_onnx_export(m, x, "/tmp/ember_never_written.onnx", (em_onnx_opts){0}),
                 EM_ERR_UNSUPPORTED);
    cr_assert(strstr(em_error(), "Softplus with threshold 5 has no ONNX mapping"), "%s",
              em_error());
    cr_assert_eq(access("/tmp/ember_never_written.onnx", F_OK), -1);
    em_error_clear();
    em_release(x);
    em_module_free(m);
}

/* A user's module type: softmax(leaky_relu(x * weight, 0.2), dim -1), weight (F). */
static em_tensor *scaled_act_forward(em_module *m, const em_tensor *x)
{
    em_scope_begin();
    em_tensor *y = em_softmax(em_leaky_relu(em_mul(x, m->params[0].value), 0.2), -1);
    em_keep(y);
    em_scope_end();
    return y;
}

static const em_module_type scaled_act_type = {.type_name = "ScaledAct",
                                               .forward = scaled_act_forward};

static em_module *scaled_act_new(int64_t features)
{
    em_module *m = em_module_alloc(sizeof *m, &scaled_act_type);
    em_generator gen = em_generator_new(21);
    em_module_add_param(m, "weight", em_uniform(EM_SHAPE(features), EM_F32, 0.5, 2.0, &gen));
    return m;
}

/* Its mapping through the builder: Mul by an initializer, LeakyRelu, Softmax. */
static em_status scaled_act_export(em_onnx_builder *b, const em_module *m, const char *layer)
{
    cr_assert_str_eq(layer, "1");
    cr_assert_eq(em_onnx_example(b)->shape[1], m->params[0].value->shape[0]);
    const char *w = em_onnx_initializer(b, "weight", m->params[0].value);
    cr_assert_str_eq(w, "1.weight");
    const char *mul_in[] = {em_onnx_value(b), w};
    if (em_onnx_node(b, "Mul", mul_in, 2, NULL, 0) != EM_OK)
        return em_error_status();
    const char *in[] = {em_onnx_value(b)};
    em_onnx_attr alpha = {.name = "alpha", .kind = EM_ONNX_ATTR_FLOAT, .f = 0.2};
    em_onnx_attr axis = {.name = "axis", .kind = EM_ONNX_ATTR_INT, .i = -1};
    if (em_onnx_node(b, "LeakyRelu", in, 1, &alpha, 1) != EM_OK)
        return em_error_status();
    in[0] = em_onnx_value(b);
    return em_onnx_node(b, "Softmax", in, 1, &axis, 1);
}

Test(onnx, registered_custom_type_matches_onnxruntime)
{
    em_manual_seed(5);
    em_module *unmapped = em_sequential(1, scaled_act_new(6));
    em_tensor *x = em_zeros(EM_SHAPE(2, 6), EM_F32);
    cr_assert_eq(em_onnx_export(unmapped, x, "/tmp/ember_onnx_unmapped.onnx", (em_onnx_opts){0}),
                 EM_ERR_UNSUPPORTED);
    cr_assert(strstr(em_error(), "layer '0' (ScaledAct) has no ONNX mapping"), "%s", em_error());
    em_error_clear();
    em_release(x);
    em_module_free(unmapped);
    cr_assert_eq(em_onnx_register(&scaled_act_type, scaled_act_export), EM_OK, "%s", em_error());
    cr_assert_eq(em_onnx_register(NULL, scaled_act_export), EM_ERR_ARG);
    em_error_clear();
    em_scope_begin();
    em_module *m = em_sequential(3, em_linear_layer(4, 6, true), scaled_act_new(6),
                                 em_linear_layer(6, 3, true));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 4), NULL);
}

Test(onnx, unsupported_layer_is_an_error_and_writes_nothing)
{
    em_module *q = em_sequential(1, em_linear_layer(4, 4, true));
    cr_assert_eq(em_quantize_dynamic_(q, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    em_module *m = em_sequential(2, em_linear_layer(4, 4, true), q);
    em_tensor *x = em_zeros(EM_SHAPE(2, 4), EM_F32);
    const char *path = "/tmp/ember_onnx_unsupported.onnx";
    unlink(path);
    cr_assert_eq(em_onnx_export(m, x, path, (em_onnx_opts){0}), EM_ERR_UNSUPPORTED);
    cr_assert(strstr(em_error(), "layer '1.0' (QuantizedLinear) has no ONNX mapping: ember's int8 kernels have no "
                 "ONNX form; export the f32 model and quantize the file with onnxruntime's "
                 "quantize_dynamic"), "%s", em_error());
    cr_assert_neq(access(path, F_OK), 0, "no file may be written");
    em_error_clear();
    cr_assert_eq(em_onnx_export(m, x, path, (em_onnx_opts){.opset = 13}), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "opset >= 17"), "%s", em_error());
    em_error_clear();
    em_tensor *flat = em_zeros(EM_SHAPE(4), EM_F32);
    cr_assert_eq(em_onnx_export(em_module_child(m, "0"), flat, path,
                                (em_onnx_opts){.dynamic_sequence = true}), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "with a dim 1 for a dynamic sequence; got f32 with 1 dims"),
              "%s", em_error());
    cr_assert_neq(access(path, F_OK), 0, "no file may be written");
    em_error_clear();
    em_release(flat);
    em_release(x);
    em_module_free(m);
}

/* Exporting m on a zero example of that shape to path fails with status and a message holding
 * says, and no file is left at path. */
static void expect_refused(em_module *m, em_shape example, const char *path, em_status status,
                           const char *says)
{
    em_tensor *x = em_zeros(example, EM_F32);
    unlink(path);
    cr_assert_eq(em_onnx_export(m, x, path, (em_onnx_opts){0}), status, "%s", em_error());
    cr_expect(strstr(em_error(), says), "%s", em_error());
    cr_expect_neq(access(path, F_OK), 0, "no file may be written");
    em_error_clear();
    em_release(x);
}

/* NaN or Inf weights are refused unless asked for, naming the tensor; no file is written. */
Test(onnx, nonfinite_weights_are_refused_unless_allowed)
{
    em_module *m = em_sequential(2, em_linear_layer(4, 2, true), em_relu_layer());
    float *w = em_data_ptr(m->children[0].module->params[0].value);
    w[3] = NAN;
    w[5] = INFINITY;
    const char *path = "/tmp/ember_onnx_nonfinite.onnx";
    expect_refused(m, EM_SHAPE(2, 4), path, EM_ERR_NUMERIC, "em_onnx_export: '0.weight' holds 2 "
                   "NaN or Inf values of 8 (em_onnx_opts.allow_nonfinite writes them)");
    em_tensor *x = em_zeros(EM_SHAPE(2, 4), EM_F32);
    cr_assert_eq(em_onnx_export(m, x, path, (em_onnx_opts){.allow_nonfinite = true}), EM_OK,
                 "%s", em_error());
    cr_expect_eq(access(path, F_OK), 0);
    unlink(path);
    em_release(x);
    em_module_free(m);
}

/* A Linear nested in Sequentials: em_sequential(1, ...) depth - 1 times around it. */
static em_module *nested_linear(int depth)
{
    em_module *m = em_linear_layer(3, 2, true);
    for (int d = 1; d < depth; d++)
        m = em_sequential(1, m);
    cr_assert_not_null(m, "%s", em_error());
    return m;
}

/* The deepest tree ember builds saves and loads; its layer names ("0.0.0...", 1,997 bytes) are
 * too long for ONNX's, a clear error, while a tree whose names fit exports and runs. */
Test(onnx, trees_at_the_depth_limit)
{
    em_module *m = nested_linear(EM_MODULE_MAX_DEPTH);
    const char *st_path = "/tmp/ember_deep_tree.safetensors", *onnx_path = "/tmp/ember_deep.onnx";
    cr_assert_eq(em_module_save(m, st_path, NULL, 0), EM_OK, "%s", em_error());
    em_module *back = nested_linear(EM_MODULE_MAX_DEPTH);
    cr_assert_eq(em_module_load(back, st_path), EM_OK, "%s", em_error());
    em_param_ref a[2], b[2];
    cr_assert_eq(em_module_parameters(m, a, 2), 2);
    cr_assert_eq(em_module_parameters(back, b, 2), 2);
    for (int i = 0; i < 2; i++)
        cr_expect_eq(em_tensor_hash(a[i].value), em_tensor_hash(b[i].value), "%s", a[i].name);
    unlink(st_path);
    expect_refused(m, EM_SHAPE(2, 3), onnx_path, EM_ERR_ARG, "is longer than 191 bytes");
    em_module_free(back);
    em_module_free(m);
    check_export(nested_linear(90), EM_SHAPE(1, 3), NULL); /* names of 179 bytes */
}

/* A BatchNorm2d after a Conv2d with another channel count is not folded into it (the fold read
 * past the norm's statistics; found by fuzz_onnx_export): an error naming the layer. */
Test(onnx, batchnorm_of_other_channels_is_not_folded)
{
    em_module *m = em_sequential(2, em_conv2d_layer(1, 4, 3, (em_conv2d_layer_opts){0}),
                                 em_batch_norm2d_layer(3, (em_batch_norm_opts){0}));
    expect_refused(m, EM_SHAPE(2, 1, 5, 5), "/tmp/ember_onnx_bad_fold.onnx", EM_ERR_ARG,
                   "em_onnx_export: layer '0': the BatchNorm2d after it has 3 channels, its "
                   "Conv2d 4 outputs");
    em_module_free(m);
}

/* Sequence models: exported from (2, 6, ...) and run on (5, 9, ...) (both dims dynamic). */
static void check_sequence(em_module *m, int64_t features, int64_t vocab, const char *op_check)
{
    em_shape ex = vocab ? EM_SHAPE(2, 6) : EM_SHAPE(2, 6, features);
    em_shape run = vocab ? EM_SHAPE(5, 9) : EM_SHAPE(5, 9, features);
    check_export_with(m, (export_check){.example = ex, .run = run, .vocab = vocab,
                                        .opts = {.dynamic_sequence = true},
                                        .op_check = op_check});
}

/* Every parameter of m drawn again from N(0, std): biases and norms far from their initial
 * zeros and ones, GPT's 0.02-scale weights large enough that a wrong mapping shows. */
static em_module *redrawn(em_module *m, double std)
{
    cr_assert_not_null(m, "%s", em_error());
    em_param_ref refs[64];
    int n = em_module_parameters(m, refs, 64);
    cr_assert(n > 0 && n <= 64);
    em_generator gen = em_generator_new(31);
    for (int i = 0; i < n; i++)
        cr_assert_eq(em_normal_(refs[i].value, 0, std, &gen), EM_OK, "%s", em_error());
    return m;
}

/* padding_idx changes only training: the export is the plain Gather, zero padding row and all */
Test(onnx, padded_embedding_matches_onnxruntime)
{
    em_manual_seed(12);
    em_module *emb = em_embedding_layer(11, 4, (em_embedding_opts){.padding_idx = 0,
                                                                        .has_padding_idx = true});
    check_sequence(em_sequential(2, emb, em_linear_layer(4, 3, true)), 0, 11, "--present Gather");
}

Test(onnx, conv1d_matches_onnxruntime)
{
    em_manual_seed(13);
    em_scope_begin();
    em_module *m = em_sequential(
        5, em_conv1d_layer(2, 4, 3, (em_conv1d_layer_opts){.stride = 2, .padding = 1,
                                                           .groups = 2}),
        em_relu_layer(), em_conv1d_layer(4, 3, 3, (em_conv1d_layer_opts){.dilation = 2,
                                                                        .no_bias = true}),
        em_flatten_layer(), em_linear_layer(3 * 4, 2, true));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 2, 16), NULL);
}

/* padding "same" with an odd total (explicit, asymmetric pads), a dilated max pool after a ReLU
 * (ember runs the two as one op) and a ConvTranspose2d with output_padding and groups */
Test(onnx, same_padding_dilated_pool_and_conv_transpose_match_onnxruntime)
{
    em_manual_seed(14);
    em_scope_begin();
    em_module *m = em_sequential(
        6, em_conv2d_layer(2, 4, 4, (em_conv2d_layer_opts){.padding = EM_PADDING_SAME}),
        em_relu_layer(),
        em_max_pool2d_layer(3, (em_pool2d_layer_opts){.stride = 1, .padding = 1, .dilation = 2}),
        em_conv_transpose2d_layer(4, 6, 3, (em_conv_transpose2d_layer_opts){
            .stride = 2, .padding = 1, .output_padding = 1, .dilation = 2, .groups = 2}),
        em_flatten_layer(), em_linear_layer(6 * 12 * 10, 3, true));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 2, 7, 6), "--present ConvTranspose");
    em_scope_begin();
    em_module *seq = em_sequential(
        3, em_conv1d_layer(2, 3, 4, (em_conv1d_layer_opts){.padding = EM_PADDING_SAME,
                                                           .dilation = 3}),
        em_flatten_layer(), em_linear_layer(3 * 9, 2, true));
    em_scope_end();
    check_export(seq, EM_SHAPE(1, 2, 9), NULL);
}

/* m's weights and biases N(0.5, 1) and running variances in [0.2, 3), away from their defaults */
static em_module *trained_norm(em_module *m, uint64_t seed)
{
    cr_assert_not_null(m, "%s", em_error());
    em_generator gen = em_generator_new(seed);
    for (int i = 0; i < m->n_params; i++)
        em_copy_(m->params[i].value, em_normal(em_shape_of(m->params[i].value), EM_F32, 0.5, 1,
                                               &gen));
    em_tensor *mean = em_module_find(m, "running_mean"), *var = em_module_find(m, "running_var");
    if (mean && var) {
        em_copy_(mean, em_normal(em_shape_of(mean), EM_F32, 0, 0.5, &gen));
        em_copy_(var, em_uniform(em_shape_of(var), EM_F32, 0.2, 3.0, &gen));
    }
    return m;
}

/* GroupNorm as Reshape, InstanceNormalization, Reshape, Mul, Add; InstanceNorm as
 * InstanceNormalization, or BatchNormalization by the running statistics it tracks. */
Test(onnx, group_and_instance_norms_match_onnxruntime)
{
    em_manual_seed(14);
    em_scope_begin();
    em_instance_norm_opts tracked = {.affine = true, .track_running_stats = true};
    em_module *m = em_sequential(
        9, em_conv2d_layer(2, 6, 3, (em_conv2d_layer_opts){.padding = 1}),
        trained_norm(em_group_norm_layer(3, 6, (em_group_norm_opts){0}), 21), em_relu_layer(),
        trained_norm(em_instance_norm2d_layer(6, tracked), 22),
        em_group_norm_layer(2, 6, (em_group_norm_opts){.eps = 1e-3, .no_affine = true}),
        trained_norm(em_instance_norm2d_layer(6, (em_instance_norm_opts){.affine = true}), 23),
        em_instance_norm2d_layer(6, (em_instance_norm_opts){0}), em_flatten_layer(),
        em_linear_layer(6 * 5 * 5, 3, true));
    em_module *m1 = em_sequential(
        3, em_conv1d_layer(2, 4, 3, (em_conv1d_layer_opts){0}),
        trained_norm(em_instance_norm1d_layer(4, (em_instance_norm_opts){.affine = true}), 24),
        trained_norm(em_group_norm_layer(2, 4, (em_group_norm_opts){0}), 25));
    em_module *unbatched = trained_norm(em_instance_norm1d_layer(3, tracked), 26);
    em_module *unbatched_plain = em_instance_norm1d_layer(3, (em_instance_norm_opts){0});
    em_scope_end();
    check_export(m, EM_SHAPE(1, 2, 5, 5), "--present InstanceNormalization");
    check_export(m1, EM_SHAPE(1, 2, 9), "--present InstanceNormalization");
    /* (C, L): dim 0 is the channels, fixed */
    export_check fixed = {.example = EM_SHAPE(3, 6), .run = EM_SHAPE(3, 6),
                          .opts = {.fixed_batch = true}};
    check_export_with(unbatched, fixed);
    check_export_with(unbatched_plain, fixed);
}

Test(onnx, residual_blocks_match_onnxruntime)
{
    em_manual_seed(6);
    em_scope_begin();
    em_conv2d_layer_opts pad1 = {.padding = 1}, down = {.stride = 2, .no_bias = true};
    em_module *identity = em_residual(
        em_sequential(4, em_conv2d_layer(4, 4, 3, pad1), trained_bn(4, 13), em_relu_layer(),
                      em_conv2d_layer(4, 4, 3, pad1)), NULL);
    em_module *projected = em_residual(
        em_sequential(2, em_conv2d_layer(4, 6, 3, (em_conv2d_layer_opts){.stride = 2,
                                                                         .padding = 1}),
                      trained_bn(6, 14)),
        em_sequential(2, em_conv2d_layer(4, 6, 1, down), trained_bn(6, 15)));
    em_module *m = em_sequential(6, identity, em_relu_layer(), projected, em_relu_layer(),
                                 em_flatten_layer(),
                                 em_residual(em_linear_layer(6 * 4 * 4, 96, true), NULL));
    em_scope_end();
    check_export(m, EM_SHAPE(1, 4, 8, 8), "--absent BatchNormalization");
}

/* A U-Net level (Concat with an Identity: the skip) and an Inception-like Concat of three
 * branches, a negative axis among them: ONNX's Concat, matched in onnxruntime */
Test(onnx, concat_unet_skip_and_branches_match_onnxruntime)
{
    em_manual_seed(9);
    em_scope_begin();
    em_module *m = em_test_concat_unet();
    em_scope_end();
    check_export(m, EM_SHAPE(1, 3, 8, 8), "--present Concat");
}

Test(onnx, lstm_matches_onnxruntime)
{
    em_manual_seed(7);
    em_scope_begin();
    em_module *m = em_sequential(2, em_lstm_layer(3, 5, (em_rnn_opts){.num_layers = 2,
                                                                     .batch_first = true,
                                                                     .dropout = 0.3}),
                                 em_linear_layer(5, 2, true));
    em_scope_end();
    check_sequence(m, 3, 0, "--present LSTM");
    /* (T, B, in), no biases */
    check_sequence(em_lstm_layer(3, 4, (em_rnn_opts){.no_bias = true}), 3, 0, "--present LSTM");
}

Test(onnx, gru_matches_onnxruntime)
{
    em_manual_seed(8);
    check_sequence(em_gru_layer(3, 5, (em_rnn_opts){.num_layers = 3, .batch_first = true}), 3,
                   0, "--present GRU");
    check_sequence(em_gru_layer(4, 3, (em_rnn_opts){.no_bias = true}), 4, 0, "--present GRU");
}

/* An unbatched sequence (T, in): dim 0 is the sequence, left dynamic as "batch". */
Test(onnx, unbatched_gru_matches_onnxruntime)
{
    em_manual_seed(9);
    check_export(em_gru_layer(3, 4, (em_rnn_opts){.num_layers = 2}), EM_SHAPE(1, 3), NULL);
}

Test(onnx, multihead_attention_matches_onnxruntime)
{
    em_manual_seed(10);
    check_sequence(redrawn(em_multihead_attention_layer(8, 2, (em_mha_opts){0}), 0.5), 8, 0,
                   NULL);
    check_sequence(redrawn(em_multihead_attention_layer(8, 4, (em_mha_opts){.causal = true}),
                           0.5),
                   8, 0, "--present Trilu");
    check_sequence(em_multihead_attention_layer(6, 3, (em_mha_opts){.no_bias = true}), 6, 0,
                   NULL);
}

Test(onnx, transformer_layers_match_onnxruntime)
{
    em_manual_seed(11);
    check_sequence(redrawn(em_transformer_encoder_layer(8, 2, (em_transformer_opts){
                               .dim_feedforward = 16, .dropout = 0.1}), 0.3),
                   8, 0, NULL);
    check_sequence(redrawn(em_transformer_encoder_layer(8, 4, (em_transformer_opts){
                               .dim_feedforward = 32, .activation = EM_ACTIVATION_GELU,
                               .norm_first = true, .causal = true}), 0.3),
                   8, 0, "--present Erf");
}

Test(onnx, gpt_matches_onnxruntime)
{
    em_manual_seed(12);
    em_module *gpt = em_gpt((em_gpt_settings){.vocab_size = 11, .block_size = 12, .n_layer = 2,
                                            .n_head = 2, .n_embd = 8, .dropout = 0.1});
    check_sequence(redrawn(gpt, 0.3), 0, 11, "--present Gather");
}
