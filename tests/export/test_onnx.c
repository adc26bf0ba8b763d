/* ONNX export: the protobuf encoder's bytes against hand-encoded golden values, and exported
 * models (the MLP and CNN recipes' shapes, a CNN with folded BatchNorm, every other supported
 * layer, a user's module type with a registered exporter) checked by the real consumers in the
 * setup venv: onnx.checker and onnxruntime, whose output on a batch of a different size than the
 * export example must match ember's within 1e-5. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
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

static void write_f32(const char *path, const em_tensor *t)
{
    float *v = malloc(sizeof *v * (size_t)em_numel(t));
    cr_assert_eq(em_copy_to_host(t, EM_F32, v), EM_OK, "%s", em_error());
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(v, sizeof *v, (size_t)em_numel(t), f), (size_t)em_numel(t));
    fclose(f);
    free(v);
}

/* Exports m with an example of batch 2 and checks it with onnx_check.py on a batch of 5. */
static void check_export(em_module *m, em_shape sample, const char *absent_op)
{
    cr_assert_not_null(m, "%s", em_error());
    if (em_test_venv_skip())
        return;
    em_generator gen = em_generator_new(7);
    em_shape s2 = sample, s5 = sample;
    s2.d[0] = 2;
    s5.d[0] = 5;
    em_tensor *example = em_randn(s2, EM_F32, &gen), *x = em_randn(s5, EM_F32, &gen);
    char dir[] = "/tmp/ember_onnx_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char model[256], in[256], out[256], args[1024], shape[64] = "";
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(in, sizeof in, "%s/x.bin", dir);
    snprintf(out, sizeof out, "%s/y.bin", dir);
    cr_assert_eq(em_onnx_export(m, example, model, (em_onnx_opts){0}), EM_OK, "%s", em_error());
    cr_assert(m->training, "export restores train mode");
    em_module_eval(m);
    bool grad = em_set_grad_enabled(false);
    em_tensor *y = em_forward(m, x);
    em_set_grad_enabled(grad);
    cr_assert_not_null(y, "%s", em_error());
    write_f32(in, x);
    write_f32(out, y);
    for (int i = 0; i < s5.ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? "x" : "",
                 (long long)s5.d[i]);
    snprintf(args, sizeof args, "%s %s %s %s 1e-5 %s", model, in, shape, out,
             absent_op ? absent_op : "");
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
    check_export(em_sequential(10, em_conv2d_layer(1, 32, 3, pad1), em_relu_layer(),
                               em_max_pool2d_layer(2, 0, 0), em_conv2d_layer(32, 64, 3, pad1),
                               em_relu_layer(), em_max_pool2d_layer(2, 0, 0), em_flatten_layer(),
                               em_linear_layer(3136, 128, true), em_relu_layer(),
                               em_linear_layer(128, 10, true)),
                 EM_SHAPE(1, 1, 28, 28), NULL);
}

/* Running statistics and affine parameters far from their initial values. */
static em_module *trained_bn(int64_t c, uint64_t seed)
{
    em_module *bn = em_batch_norm2d_layer(c, 1e-3, 0);
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
        em_avg_pool2d_layer(2, 0, 0), em_gelu_layer(false), em_max_pool2d_layer(3, 1, 1),
        em_adaptive_avg_pool2d_layer(2, 2), em_adaptive_avg_pool2d_layer(1, 1));
    em_module *bn1 = em_batch_norm1d_layer(16, 0, 0);
    em_copy_(bn1->buffers[1].value, em_full(EM_SHAPE(16), EM_F32, 2.5));
    em_module *m = em_sequential(17, features, em_flatten_layer(), em_linear_layer(6, 16, true),
                                 bn1, em_leaky_relu_layer(0.1), em_dropout_layer(0.3),
                                 em_layer_norm_layer(16, 0), em_gelu_layer(true), em_silu_layer(),
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

static const em_module_type scaled_act_type = {"ScaledAct", scaled_act_forward, NULL, NULL};

static em_module *scaled_act_new(int64_t features)
{
    em_module *m = calloc(1, sizeof *m);
    em_module_init(m, &scaled_act_type);
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
    em_module *m = em_sequential(2, em_linear_layer(4, 4, true), em_embedding_layer(4, 2));
    em_tensor *x = em_zeros(EM_SHAPE(2, 4), EM_F32);
    const char *path = "/tmp/ember_onnx_unsupported.onnx";
    unlink(path);
    cr_assert_eq(em_onnx_export(m, x, path, (em_onnx_opts){0}), EM_ERR_UNSUPPORTED);
    cr_assert(strstr(em_error(), "layer '1' (Embedding) has no ONNX mapping"), "%s", em_error());
    cr_assert_neq(access(path, F_OK), 0, "no file may be written");
    em_error_clear();
    cr_assert_eq(em_onnx_export(m, x, path, (em_onnx_opts){.opset = 13}), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "opset >= 17"), "%s", em_error());
    em_error_clear();
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
                                 em_batch_norm2d_layer(3, 0, 0));
    expect_refused(m, EM_SHAPE(2, 1, 5, 5), "/tmp/ember_onnx_bad_fold.onnx", EM_ERR_ARG,
                   "em_onnx_export: layer '0': the BatchNorm2d after it has 3 channels, its "
                   "Conv2d 4 outputs");
    em_module_free(m);
}
