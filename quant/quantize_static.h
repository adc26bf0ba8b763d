/* Static INT8 quantization with calibration: observers record the range of every Linear and
 * Conv2d input over calibration batches; the layers then become StaticQuantizedLinear and
 * QuantizedConv2d with per-channel s8 weights, a fixed per-tensor 7-bit activation scale and zero
 * point from their observer, and the ReLU that follows fused into them (it becomes an Identity).
 * Inference only. Whole-model files (em_model_save) hold these layers: their settings are the
 * float layer's sizes, bias, per_tensor and relu; buffers weight i8 (out, k: in_features, or
 * in_channels x kernel_size^2), weight_scale f32 (out) or (1), input_scale f32 (1),
 * input_zero_point i32 (1) and bias f32 (out). */
#ifndef EMBER_QUANT_QUANTIZE_STATIC_H
#define EMBER_QUANT_QUANTIZE_STATIC_H

#include "ember/quant/quantize.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EM_CALIB_MINMAX = 0, /* the smallest and largest value seen */
    EM_CALIB_PERCENTILE  /* a histogram's lower and upper percentile: clips outliers */
} em_calib_observer_kind;

typedef struct {
    em_calib_observer_kind kind;
    double percentile; /* EM_CALIB_PERCENTILE: 0 takes 99.99 (and 0.01 at the bottom) */
    int bins;          /* EM_CALIB_PERCENTILE: histogram bins; 0 takes 2048 */
} em_calib_observer_opts;

typedef struct em_calib_observer em_calib_observer;
/* NULL with an error on bad options */
em_calib_observer *em_calib_observer_new(em_calib_observer_opts o);
void em_calib_observer_free(em_calib_observer *ob);
/* Adds x's values (any float dtype); NaN and infinities are an EM_ERR_NUMERIC error. */
em_status em_calib_observer_update(em_calib_observer *ob, const em_tensor *x);
/* The range to quantize to ([0, 0] before any update) and its 7-bit parameters. */
void em_calib_observer_range(const em_calib_observer *ob, float *lo, float *hi);
em_qparams em_calib_observer_qparams(const em_calib_observer *ob);

typedef struct {
    em_calib_observer_opts observer;
    em_quant_granularity granularity; /* weights; per channel by default */
} em_static_quant_opts;

/* Calibrates model on the batches (run in eval mode without grad), then converts every Linear
 * and Conv2d (groups 1, padding not 'same') below model in place, a pruned one with its masked
 * weight; a ReLU right after one in a Sequential is fused into it (and becomes an Identity). On
 * error model is unchanged. */
em_status em_quantize_static_(em_module *model, em_tensor *const *calib, int n_batches,
                              em_static_quant_opts o);
/* The structure of a statically quantized model without calibration (parameters to be loaded):
 * what em_quantize_prepare_load uses for a file of the older kind marked static_int8. */
em_status em_quantize_static_structure_(em_module *model, em_static_quant_opts o);

#ifdef __cplusplus
}
#endif

#endif
