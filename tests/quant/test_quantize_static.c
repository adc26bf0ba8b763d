/* Static INT8: observers (min/max exactly, the percentile one clipping an outlier across a
 * range that grows between batches), static QuantizedLinear and QuantizedConv2d against the
 * f32 product of their own dequantized operands (so the int8 kernels are checked to float
 * rounding), the ReLU fusion, and a saved model loaded back to the same outputs bit for bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "ember.h"

Test(quantize_static, minmax_observer)
{
    em_calib_observer *ob = em_calib_observer_new((em_calib_observer_opts){0});
    em_tensor *a = em_from_data(EM_SHAPE(3), EM_F32, (float[]){-0.5f, 0.25f, 2.0f});
    em_tensor *b = em_from_data(EM_SHAPE(2), EM_F32, (float[]){3.0f, -1.0f});
    cr_assert_eq(em_calib_observer_update(ob, a), EM_OK);
    cr_assert_eq(em_calib_observer_update(ob, b), EM_OK);
    float lo, hi;
    em_calib_observer_range(ob, &lo, &hi);
    cr_assert_eq(lo, -1.0f);
    cr_assert_eq(hi, 3.0f);
    em_qparams qp = em_calib_observer_qparams(ob), want = em_qparams_u7(-1, 3);
    cr_assert_eq(qp.scale, want.scale);
    cr_assert_eq(qp.zero_point, want.zero_point); /* round(1 / (4 / 127)) = 32 */
    cr_assert_eq(qp.zero_point, 32);
    em_tensor *bad = em_from_data(EM_SHAPE(2), EM_F32, (float[]){1.0f, NAN});
    cr_assert_eq(em_calib_observer_update(ob, bad), EM_ERR_NUMERIC);
    em_error_clear();
    em_release(a), em_release(b), em_release(bad);
    em_calib_observer_free(ob);
    cr_assert_null(em_calib_observer_new((em_calib_observer_opts){.kind = EM_CALIB_PERCENTILE,
                                                                  .percentile = 20}));
    em_error_clear();
}

Test(quantize_static, percentile_observer_clips_an_outlier)
{
    em_calib_observer *ob = em_calib_observer_new(
        (em_calib_observer_opts){.kind = EM_CALIB_PERCENTILE, .percentile = 99.9});
    float v[10000];
    for (int i = 0; i < 10000; i++)
        v[i] = (float)i / 10000.0f; /* 0 .. 0.9999 */
    em_tensor *a = em_from_data(EM_SHAPE(10000), EM_F32, v);
    em_tensor *out = em_from_data(EM_SHAPE(1), EM_F32, (float[]){1000.0f});
    cr_assert_eq(em_calib_observer_update(ob, a), EM_OK);
    cr_assert_eq(em_calib_observer_update(ob, out), EM_OK); /* the range grows 1000-fold */
    float lo, hi;
    em_calib_observer_range(ob, &lo, &hi);
    /* 2048 bins over [0, 1000]: 0.49 wide; 99.9% of the 10001 values lie below 1 */
    cr_assert(lo == 0.0f, "lo %g", lo);
    cr_assert(hi > 0.9f && hi < 1.0f + 1000.0f / 2048 + 1e-3f, "hi %g", hi);
    em_calib_observer *mm = em_calib_observer_new((em_calib_observer_opts){0});
    em_calib_observer_update(mm, a);
    em_calib_observer_update(mm, out);
    em_calib_observer_range(mm, &lo, &hi);
    cr_assert_eq(hi, 1000.0f, "min/max keeps the outlier");
    em_release(a), em_release(out);
    em_calib_observer_free(ob), em_calib_observer_free(mm);
}

/* f32 values of a quantized activation: (clamp(round(x / s) + z, 0, 127) - z) * s */
static em_tensor *fake_quant(const em_tensor *x, float s, int z)
{
    return em_dequantize_u7(em_quantize_u7(x, (em_qparams){s, z}), (em_qparams){s, z});
}

static void expect_close(const em_tensor *y, const em_tensor *want, double tol)
{
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(em_same_shape(y, want));
    int64_t n = em_numel(y);
    float *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n);
    em_copy_to_host(y, EM_F32, a);
    em_copy_to_host(want, EM_F32, b);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabsf(a[i] - b[i]) <= tol * fmaxf(1.0f, fabsf(b[i])), "element %lld: %g vs %g",
                  (long long)i, a[i], b[i]);
    free(a);
    free(b);
}

Test(quantize_static, linear_and_conv_match_their_dequantized_operands)
{
    em_manual_seed(5);
    em_scope_begin();
    em_module *m = em_sequential(6, em_conv2d_layer(3, 8, 3, (em_conv2d_layer_opts){
                                                           .stride = 2, .padding = 1}),
                                 em_relu_layer(), em_conv2d_layer(8, 4, 3, (em_conv2d_layer_opts){0}),
                                 em_flatten_layer(), em_linear_layer(4 * 3 * 3, 5, true),
                                 em_relu_layer());
    em_tensor *calib[3];
    for (int i = 0; i < 3; i++)
        calib[i] = em_randn(EM_SHAPE(4, 3, 9, 9), EM_F32, NULL);
    em_tensor *x = em_randn(EM_SHAPE(2, 3, 9, 9), EM_F32, NULL);
    /* the f32 layers' tensors, kept for the reference */
    em_tensor *w1 = em_clone(m->children[0].module->params[0].value);
    em_tensor *w2 = em_clone(m->children[2].module->params[0].value);
    em_tensor *b2 = em_clone(m->children[2].module->params[1].value);
    em_tensor *w3 = em_clone(m->children[4].module->params[0].value);
    em_tensor *b3 = em_clone(m->children[4].module->params[1].value);
    cr_assert_eq(em_quantize_static_(m, calib, 3, (em_static_quant_opts){0}), EM_OK, "%s",
                 em_error());
    cr_assert_str_eq(m->children[0].module->type->type_name, "QuantizedConv2d");
    cr_assert_str_eq(m->children[1].module->type->type_name, "Identity", "ReLU fused");
    cr_assert_str_eq(m->children[2].module->type->type_name, "QuantizedConv2d");
    cr_assert_str_eq(m->children[4].module->type->type_name, "StaticQuantizedLinear");
    cr_assert_str_eq(m->children[5].module->type->type_name, "Identity");
    em_module_eval(m);
    bool g = em_set_grad_enabled(false);
    /* each layer against conv/linear of its dequantized input and weight, in f32 */
    em_tensor *h = x;
    em_tensor *w[3] = {w1, w2, w3}, *b[3] = {m->children[0].module->buffers[4].value, b2, b3};
    int layer[3] = {0, 2, 4};
    for (int i = 0; i < 3; i++) {
        em_module *q = m->children[layer[i]].module;
        float s = (float)em_item(q->buffers[2].value);
        int z = (int)em_item(q->buffers[3].value);
        em_tensor *wq = em_dequantize_weight_s8(q->buffers[0].value, q->buffers[1].value);
        em_tensor *hq = fake_quant(i == 2 ? em_flatten(h, 1, -1) : h, s, z), *want;
        if (i < 2)
            want = em_conv2d(hq, em_reshape(wq, em_shape_of(w[i])), b[i],
                             (em_conv2d_opts){.stride = {i ? 1 : 2, i ? 1 : 2},
                                              .padding = {i ? 0 : 1, i ? 0 : 1}});
        else
            want = em_linear(hq, wq, b[i]);
        if (i != 1)
            want = em_relu(want);
        em_tensor *got = em_forward(q, i == 2 ? em_flatten(h, 1, -1) : h);
        expect_close(got, want, 1e-4);
        h = got;
    }
    em_set_grad_enabled(g);
    char desc[256];
    em_module_describe(m->children[0].module, desc, sizeof desc);
    char want[256];
    snprintf(want, sizeof want, "in_channels=3, out_channels=8, kernel_size=3, stride=2, "
             "padding=1, dilation=1, bias=true, per_tensor=false, relu=true, dtype=int8, "
             "input_scale=%g, input_zero_point=%d",
             em_item(m->children[0].module->buffers[2].value),
             (int)em_item(m->children[0].module->buffers[3].value));
    cr_assert_str_eq(desc, want);
    em_scope_end();
    em_module_free(m);
}

Test(quantize_static, saved_model_loads_back_bit_for_bit)
{
    em_manual_seed(6);
    em_scope_begin();
    em_module *m = em_sequential(4, em_conv2d_layer(1, 4, 3, (em_conv2d_layer_opts){.padding = 1}),
                                 em_relu_layer(), em_flatten_layer(),
                                 em_linear_layer(4 * 6 * 6, 3, true));
    em_tensor *calib = em_randn(EM_SHAPE(8, 1, 6, 6), EM_F32, NULL);
    cr_assert_eq(em_quantize_static_(m, &calib, 1, (em_static_quant_opts){
                                                       .observer = {.kind = EM_CALIB_PERCENTILE}}),
                 EM_OK, "%s", em_error());
    em_st_meta meta[2];
    int n_meta = em_quantize_meta(m, meta);
    cr_assert_eq(n_meta, 1);
    cr_assert_str_eq(meta[0].value, "static_int8");
    const char *path = "/tmp/ember_static_int8_test.safetensors";
    cr_assert_eq(em_module_save(m, path, meta, n_meta), EM_OK, "%s", em_error());
    em_module *back = em_sequential(4, em_conv2d_layer(1, 4, 3, (em_conv2d_layer_opts){
                                                                 .padding = 1}),
                                    em_relu_layer(), em_flatten_layer(),
                                    em_linear_layer(4 * 6 * 6, 3, true));
    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK);
    cr_assert_eq(em_quantize_prepare_load(back, f), EM_OK, "%s", em_error());
    em_safetensors_free(f);
    cr_assert_eq(em_module_load(back, path), EM_OK, "%s", em_error());
    cr_assert_eq(em_quantize_repack(back), EM_OK, "%s", em_error());
    em_module_eval(m);
    em_module_eval(back);
    em_tensor *x = em_randn(EM_SHAPE(3, 1, 6, 6), EM_F32, NULL);
    em_tensor *y1 = em_forward(m, x), *y2 = em_forward(back, x);
    cr_assert_not_null(y2, "%s", em_error());
    for (int64_t i = 0; i < em_numel(y1); i++)
        cr_assert_eq(((float *)em_data_ptr(y1))[i], ((float *)em_data_ptr(y2))[i]);
    cr_assert(em_is_quantized(back));
    em_scope_end();
    unlink(path);
    em_module_free(m);
    em_module_free(back);
}

/* Saves a static model whose buffer `buffer` of layer "2" (the Linear) has value v at index i,
 * loads it as a recipe loader does, and returns the loader's status. */
static em_status load_with_bad_value(const char *buffer, int64_t i, double v)
{
    em_manual_seed(7);
    em_module *m = em_sequential(3, em_linear_layer(4, 4, true), em_relu_layer(),
                                 em_linear_layer(4, 3, true));
    em_tensor *calib = em_randn(EM_SHAPE(8, 4), EM_F32, NULL);
    cr_assert_eq(em_quantize_static_(m, &calib, 1, (em_static_quant_opts){0}), EM_OK, "%s",
                 em_error());
    em_release(calib);
    char name[64];
    snprintf(name, sizeof name, "2.%s", buffer);
    em_tensor *t = em_module_find(m, name);
    cr_assert_not_null(t, "%s", name);
    if (t->dtype == EM_I32)
        ((int32_t *)em_data_ptr(t))[i] = (int32_t)v;
    else
        ((float *)em_data_ptr(t))[i] = (float)v;
    em_st_meta meta[2];
    int n_meta = em_quantize_meta(m, meta);
    const char *path = "/tmp/ember_static_int8_bad.safetensors";
    cr_assert_eq(em_module_save(m, path, meta, n_meta), EM_OK, "%s", em_error());
    em_module_free(m);
    em_module *back = em_sequential(3, em_linear_layer(4, 4, true), em_relu_layer(),
                                    em_linear_layer(4, 3, true));
    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load(path, &f), EM_OK);
    cr_assert_eq(em_quantize_prepare_load(back, f), EM_OK, "%s", em_error());
    em_safetensors_free(f);
    cr_assert_eq(em_module_load(back, path), EM_OK, "%s", em_error());
    em_status st = em_quantize_repack(back);
    em_module_free(back);
    unlink(path);
    return st;
}

static void expect_refused(const char *buffer, int64_t i, double v, const char *message)
{
    em_error_clear();
    cr_assert_eq(load_with_bad_value(buffer, i, v), EM_ERR_ARG, "%s[%lld] = %g loaded", buffer,
                 (long long)i, v);
    cr_assert_str_eq(em_error(), message);
}

Test(quantize_static, bad_quantization_parameters_are_refused_at_load)
{
    cr_assert_eq(load_with_bad_value("input_scale", 0, 0.5), EM_OK, "%s", em_error());
    expect_refused("input_scale", 0, 0.0, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "input_scale[0] is 0; a scale must be finite and > 0");
    expect_refused("input_scale", 0, NAN, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "input_scale[0] is nan; a scale must be finite and > 0");
    expect_refused("input_scale", 0, -1.0, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "input_scale[0] is -1; a scale must be finite and > 0");
    expect_refused("weight_scale", 2, NAN, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "weight_scale[2] is nan; a scale must be finite and > 0");
    expect_refused("weight_scale", 1, INFINITY, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "weight_scale[1] is inf; a scale must be finite and > 0");
    expect_refused("input_zero_point", 0, 128, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "input_zero_point is 128; it must be in 0..127");
    expect_refused("input_zero_point", 0, -1, "em_quantize_repack: StaticQuantizedLinear '2': "
                   "input_zero_point is -1; it must be in 0..127");
}

/* A pruned layer is quantized with the weight its forward uses: its pruned entries are 0. */
Test(quantize_static, a_pruned_layer_is_quantized_with_its_masked_weight)
{
    em_manual_seed(8);
    em_module *m = em_sequential(1, em_linear_layer(6, 4, true));
    cr_assert_eq(em_prune_l1_unstructured(m->children[0].module, "weight", 0.5), EM_OK, "%s",
                 em_error());
    float mask[24];
    cr_assert_eq(em_copy_to_host(em_prune_mask(m->children[0].module, "weight"), EM_F32, mask),
                 EM_OK);
    em_tensor *calib = em_randn(EM_SHAPE(8, 6), EM_F32, NULL);
    cr_assert_eq(em_quantize_static_(m, &calib, 1, (em_static_quant_opts){0}), EM_OK, "%s",
                 em_error());
    const em_tensor *q = em_module_find(m, "0.weight");
    cr_assert(q && q->dtype == EM_I8 && em_numel(q) == 24);
    const int8_t *v = em_data_ptr(q);
    int kept = 0;
    for (int i = 0; i < 24; i++) {
        cr_expect(mask[i] != 0 || v[i] == 0, "pruned weight %d quantized to %d", i, v[i]);
        kept += v[i] != 0;
    }
    /* the larger half is kept: far above a row's largest / 254, so none rounds to 0 */
    cr_expect_eq(kept, 12, "%d weights kept, not half", kept);
    em_release(calib);
    em_module_free(m);
}
