/* Dynamic INT8 quantization: quantize/dequantize round trips against hand-computed scales and
 * zero points, QuantizedLinear against f32 within a stated tolerance, converting a model, its
 * size, and saving and loading it (I8 weights plus f32 scales). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

static void host(const em_tensor *t, float *out)
{
    cr_assert_not_null(t, "%s", em_error());
    cr_assert_eq(em_copy_to_host(t, EM_F32, out), EM_OK, "%s", em_error());
}

Test(quantize, activation_qparams_and_round_trip)
{
    em_qparams qp = em_qparams_u7(-1.0f, 2.81f);
    cr_assert_float_eq(qp.scale, 0.03f, 1e-7);
    cr_assert_eq(qp.zero_point, 33);
    float x[6] = {-1.0f, 2.81f, 0.0f, 0.3f, 1.0f, 5.0f};
    em_tensor *xt = em_from_data(EM_SHAPE(6), EM_F32, x);
    em_tensor *q = em_quantize_u7(xt, qp);
    cr_assert_not_null(q, "%s", em_error());
    cr_assert_eq(q->dtype, EM_U8);
    float qv[6], back[6];
    host(q, qv);
    /* round(x / 0.03) + 33: -33 + 33, 93.67 -> 94 + 33 clamps to 127, 33, 10 + 33, 33 + 33 */
    float want[6] = {0, 127, 33, 43, 66, 127};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(qv[i], want[i], "q[%d] = %g, want %g", i, qv[i], want[i]);
    em_tensor *d = em_dequantize_u7(q, qp);
    host(d, back);
    for (int i = 0; i < 5; i++) /* in range: within half a step */
        cr_assert(fabsf(back[i] - x[i]) <= qp.scale / 2 + 1e-6f, "x %g back %g", x[i], back[i]);
    cr_assert_float_eq(back[0], (0 - 33) * qp.scale, 1e-6);
    cr_assert_float_eq(back[5], (127 - 33) * qp.scale, 1e-6); /* clamped at the top */
    em_release(xt);
    em_release(q);
    em_release(d);
}

Test(quantize, activation_range_holds_zero)
{
    em_qparams qp = em_qparams_u7(0.5f, 2.54f);
    cr_assert_float_eq(qp.scale, 0.02f, 1e-7);
    cr_assert_eq(qp.zero_point, 0);
    qp = em_qparams_u7(-2.54f, -1.0f);
    cr_assert_float_eq(qp.scale, 0.02f, 1e-7);
    cr_assert_eq(qp.zero_point, 127);
    em_tensor *x = em_zeros(EM_SHAPE(3), EM_F32);
    cr_assert_null(em_quantize_u7(x, (em_qparams){.scale = 0, .zero_point = 0}));
    cr_assert(em_has_error());
    em_error_clear();
    em_release(x);
}

Test(quantize, weight_per_channel_and_per_tensor)
{
    float w[6] = {0.4f, -0.9f, 0.2f, 2.0f, 0.0f, -0.1f};
    em_tensor *wt = em_from_data(EM_SHAPE(2, 3), EM_F32, w);
    em_tensor *scale = NULL, *q = em_quantize_weight_s8(wt, EM_QUANT_PER_CHANNEL, &scale);
    cr_assert_not_null(q, "%s", em_error());
    cr_assert_eq(q->dtype, EM_I8);
    float qv[6], sv[2], back[6];
    host(q, qv);
    host(scale, sv);
    cr_assert_eq(em_numel(scale), 2);
    cr_assert_float_eq(sv[0], 0.9f / 127, 1e-9);
    cr_assert_float_eq(sv[1], 2.0f / 127, 1e-9);
    /* 0.4 / (0.9/127) = 56.4, 0.2 -> 28.2; row 1: 127, 0, -6.35 */
    float want_c[6] = {56, -127, 28, 127, 0, -6};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(qv[i], want_c[i], "per channel q[%d] = %g", i, qv[i]);
    em_tensor *d = em_dequantize_weight_s8(q, scale);
    host(d, back);
    for (int i = 0; i < 6; i++)
        cr_assert(fabsf(back[i] - w[i]) <= sv[i / 3] / 2 + 1e-7f);
    em_release(q);
    em_release(scale);
    em_release(d);

    q = em_quantize_weight_s8(wt, EM_QUANT_PER_TENSOR, &scale);
    host(q, qv);
    cr_assert_eq(em_numel(scale), 1);
    /* one scale 2 / 127: 25.4, -57.15, 12.7 | 127, 0, -6.35 */
    float want_t[6] = {25, -57, 13, 127, 0, -6};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(qv[i], want_t[i], "per tensor q[%d] = %g", i, qv[i]);
    em_release(q);
    em_release(scale);
    em_release(wt);
}

/* y of the f32 Linear and of its quantized copy for x (rows, in) */
static void compare_linear(em_quant_granularity g, double *max_err, double *max_y)
{
    em_manual_seed(7);
    em_module *lin = em_linear_layer(96, 40, true);
    em_tensor *x = em_randn(EM_SHAPE(9, 96), EM_F32, NULL);
    em_module *q = em_quantized_linear(lin->params[0].value, lin->params[1].value, g);
    cr_assert_not_null(q, "%s", em_error());
    cr_assert_str_eq(q->type->type_name, "QuantizedLinear");
    em_tensor *yf = em_forward(lin, x), *yq = em_forward(q, x);
    cr_assert_not_null(yq, "%s", em_error());
    cr_assert_eq(yq->shape[0], 9);
    cr_assert_eq(yq->shape[1], 40);
    float a[9 * 40], b[9 * 40];
    host(yf, a);
    host(yq, b);
    *max_err = *max_y = 0;
    for (int i = 0; i < 9 * 40; i++) {
        *max_err = fmax(*max_err, fabs(a[i] - b[i]));
        *max_y = fmax(*max_y, fabs(a[i]));
    }
    em_release(yf);
    em_release(yq);
    em_release(x);
    em_module_free(lin);
    em_module_free(q);
}

Test(quantize, quantized_linear_within_tolerance_of_f32)
{
    /* stated tolerance: 2% of the largest output (7-bit activations, 8-bit weights) */
    double err, ymax;
    compare_linear(EM_QUANT_PER_CHANNEL, &err, &ymax);
    cr_assert(err <= 0.02 * ymax, "per channel: max error %g of %g", err, ymax);
    compare_linear(EM_QUANT_PER_TENSOR, &err, &ymax);
    cr_assert(err <= 0.02 * ymax, "per tensor: max error %g of %g", err, ymax);
}

Test(quantize, quantized_linear_equals_dequantized_reference)
{
    /* y = s_x s_w (sum (q_x - z) q_w) + b exactly, from the module's own buffers */
    em_manual_seed(3);
    em_module *lin = em_linear_layer(13, 5, true);
    em_module *q = em_quantized_linear(lin->params[0].value, lin->params[1].value,
                                       EM_QUANT_PER_CHANNEL);
    em_tensor *x = em_randn(EM_SHAPE(3, 13), EM_F32, NULL);
    float xv[39], wq[65], ws[5], bias[5], y[15];
    host(x, xv);
    host(q->buffers[0].value, wq);
    host(q->buffers[1].value, ws);
    host(q->buffers[2].value, bias);
    em_tensor *yt = em_forward(q, x);
    host(yt, y);
    float mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < 39; i++) {
        mn = fminf(mn, xv[i]);
        mx = fmaxf(mx, xv[i]);
    }
    em_qparams qp = em_qparams_u7(mn, mx);
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 5; j++) {
            double s = 0;
            for (int k = 0; k < 13; k++) {
                float qx = fminf(fmaxf(nearbyintf(xv[r * 13 + k] * (1.0f / qp.scale)) +
                                       (float)qp.zero_point, 0), 127);
                s += (qx - qp.zero_point) * wq[j * 13 + k];
            }
            double want = s * qp.scale * ws[j] + bias[j];
            cr_assert(fabs(y[r * 5 + j] - want) <= 1e-5 * (1 + fabs(want)), "y %g want %g",
                      y[r * 5 + j], want);
        }
    em_release(yt);
    em_release(x);
    em_module_free(lin);
    em_module_free(q);
}

static em_module *small_mlp(void)
{
    return em_sequential(3, em_linear_layer(20, 16, true), em_relu_layer(),
                         em_linear_layer(16, 4, true));
}

Test(quantize, model_conversion_size_and_save_load)
{
    em_manual_seed(11);
    em_module *m = small_mlp();
    em_tensor *x = em_randn(EM_SHAPE(5, 20), EM_F32, NULL);
    int64_t f32_bytes = em_module_nbytes(m);
    cr_assert_eq(f32_bytes, 4 * (20 * 16 + 16 + 16 * 4 + 4));
    em_tensor *yf = em_forward(m, x);
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    cr_assert(em_is_quantized(m));
    cr_assert_str_eq(m->children[0].module->type->type_name, "QuantizedLinear");
    cr_assert_str_eq(m->children[1].module->type->type_name, "ReLU");
    cr_assert_eq(em_module_nbytes(m), 20 * 16 + 16 * 4 + 4 * (16 + 4) * 2);
    em_tensor *yq = em_forward(m, x);
    float a[20], b[20], c[20];
    host(yf, a);
    host(yq, b);
    for (int i = 0; i < 20; i++)
        cr_assert(fabsf(a[i] - b[i]) < 0.05f, "y %g vs f32 %g", b[i], a[i]);

    char path[] = "/tmp/ember_test_quantXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    em_st_meta meta[2];
    int n_meta = em_quantize_meta(m, meta);
    cr_assert_eq(n_meta, 2);
    cr_assert_eq(em_module_save(m, path, meta, n_meta), EM_OK, "%s", em_error());
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(path, &st), EM_OK, "%s", em_error());
    cr_assert_eq(em_safetensors_get(st, "0.weight")->dtype, EM_I8);
    cr_assert_eq(em_safetensors_get(st, "0.weight_scale")->dtype, EM_F32);
    cr_assert_eq(em_numel(em_safetensors_get(st, "0.weight_scale")), 16);
    cr_assert_eq(em_safetensors_get(st, "2.bias")->dtype, EM_F32);

    em_module *fresh = small_mlp(); /* f32, other weights: the file decides */
    cr_assert_eq(em_quantize_prepare_load(fresh, st), EM_OK, "%s", em_error());
    cr_assert_eq(em_module_load(fresh, path), EM_OK, "%s", em_error());
    cr_assert_eq(em_quantize_repack(fresh), EM_OK, "%s", em_error());
    em_tensor *yl = em_forward(fresh, x);
    host(yl, c);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(b[i], c[i], "loaded model differs at %d: %g vs %g", i, c[i], b[i]);
    em_safetensors_free(st);
    unlink(path);
    em_release(yf);
    em_release(yq);
    em_release(yl);
    em_release(x);
    em_module_free(m);
    em_module_free(fresh);
}

Test(quantize, per_tensor_model_round_trips_through_a_file)
{
    em_manual_seed(12);
    em_module *m = small_mlp();
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){.granularity = EM_QUANT_PER_TENSOR}),
                 EM_OK);
    cr_assert_eq(em_numel(m->children[0].module->buffers[1].value), 1);
    char path[] = "/tmp/ember_test_quantXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    em_st_meta meta[2];
    int n_meta = em_quantize_meta(m, meta);
    cr_assert_str_eq(meta[1].value, "per_tensor");
    cr_assert_eq(em_module_save(m, path, meta, n_meta), EM_OK, "%s", em_error());
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(path, &st), EM_OK);
    em_module *fresh = small_mlp();
    cr_assert_eq(em_quantize_prepare_load(fresh, st), EM_OK);
    cr_assert_eq(em_module_load(fresh, path), EM_OK, "%s", em_error());
    cr_assert_eq(em_numel(fresh->children[2].module->buffers[1].value), 1);
    em_safetensors_free(st);
    unlink(path);
    em_module_free(m);
    em_module_free(fresh);
}

Test(quantize, pruned_linear_quantizes_its_masked_weight)
{
    em_manual_seed(5);
    em_module *m = small_mlp();
    cr_assert_eq(em_prune_l1_unstructured(m->children[0].module, "weight", 0.5), EM_OK);
    em_tensor *mask = em_prune_mask(m->children[0].module, "weight");
    float mv[320], qv[320];
    host(mask, mv);
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    host(m->children[0].module->buffers[0].value, qv);
    int zeros = 0;
    for (int i = 0; i < 320; i++) {
        if (mv[i] == 0)
            cr_assert_eq(qv[i], 0, "pruned entry %d quantized to %g", i, qv[i]);
        zeros += mv[i] == 0;
    }
    cr_assert_eq(zeros, 160);
    em_module_free(m);
}

Test(quantize, bad_input_is_an_error)
{
    em_module *q = NULL;
    em_tensor *w = em_zeros(EM_SHAPE(3), EM_F32);
    cr_assert_null(q = em_quantized_linear(w, NULL, EM_QUANT_PER_CHANNEL));
    cr_assert(strstr(em_error(), "em_quantized_linear"));
    em_error_clear();
    em_release(w);
    w = em_zeros(EM_SHAPE(4, 3), EM_F32);
    q = em_quantized_linear(w, NULL, EM_QUANT_PER_CHANNEL);
    em_tensor *x = em_zeros(EM_SHAPE(2, 5), EM_F32);
    cr_assert_null(em_forward(q, x));
    cr_assert(strstr(em_error(), "QuantizedLinear"), "%s", em_error());
    em_error_clear();
    em_release(x);
    em_release(w);
    em_module_free(q);
}

Test(quantize, a_zero_or_nan_weight_scale_is_refused_when_repacked)
{
    em_module *m = small_mlp();
    cr_assert_eq(em_quantize_dynamic_(m, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    float *scale = em_data_ptr(em_module_find(m, "2.weight_scale")); /* (4) */
    scale[3] = 0;
    cr_assert_eq(em_quantize_repack(m), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_quantize_repack: QuantizedLinear '2': weight_scale[3] is 0; "
                     "a scale must be finite and > 0");
    em_error_clear();
    scale[3] = NAN;
    cr_assert_eq(em_quantize_repack(m), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "weight_scale[3] is nan"), "%s", em_error());
    em_error_clear();
    scale[3] = 0.25f;
    cr_assert_eq(em_quantize_repack(m), EM_OK, "%s", em_error());
    em_module_free(m);
}
