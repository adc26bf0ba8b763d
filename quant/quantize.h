/* Dynamic INT8 quantization (PyTorch's quantize_dynamic): Linear layers become QuantizedLinear
 * with symmetric s8 weights and f32 scales, LSTM and GRU layers their quantized forms built on
 * it; activations are quantized per call from their range. Inference only: a quantized layer's
 * output carries no grad. */
#ifndef EMBER_QUANT_QUANTIZE_H
#define EMBER_QUANT_QUANTIZE_H

#include "ember/nn/nn.h"
#include "ember/io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EM_QUANT_PER_CHANNEL = 0, /* one weight scale per output row */
    EM_QUANT_PER_TENSOR
} em_quant_granularity;

typedef struct {
    em_quant_granularity granularity;
} em_quantize_opts;

/* Activations: asymmetric unsigned 7-bit (0..127), the range the int8 kernel multiplies exactly
 * without VNNI (fbgemm's reduce_range). The range [min, max] is widened to hold 0; then
 * scale = (max - min) / 127 (1 when that is 0), zero_point = round(-min / scale) and
 * q = clamp(round(x / scale) + zero_point, 0, 127), rounding half to even. */
typedef struct {
    float scale;
    int32_t zero_point;
} em_qparams;
em_qparams em_qparams_u7(float min, float max);
em_tensor *em_quantize_u7(const em_tensor *x, em_qparams qp);   /* f32 -> u8 */
em_tensor *em_dequantize_u7(const em_tensor *q, em_qparams qp); /* u8 -> f32 */

/* Weights: symmetric s8 in [-127, 127], scale = max|w| / 127 over a row (per channel) or the
 * whole tensor (1 when that is 0); q = round(w / scale). w (out, in) f32; *scale gets (out) or
 * (1). */
em_tensor *em_quantize_weight_s8(const em_tensor *w, em_quant_granularity g, em_tensor **scale);
em_tensor *em_dequantize_weight_s8(const em_tensor *q, const em_tensor *scale);

/* A QuantizedLinear from f32 w (out, in) and b (out) or NULL. Buffers: weight s8 (out, in),
 * weight_scale f32 (out) or (1), bias f32 (out) when given. x (*, in) -> y (*, out). */
em_module *em_quantized_linear(const em_tensor *w, const em_tensor *b, em_quant_granularity g);
/* A QuantizedLSTM or QuantizedGRU from an LSTM or GRU: each layer's input and hidden projections
 * become QuantizedLinear children ih_l{k} and hh_l{k} (with the biases); the recurrence runs in
 * f32. em_lstm / em_gru and em_forward run it as the f32 module. */
em_module *em_quantized_rnn(const em_module *rnn, em_quant_granularity g);
bool em_is_float_rnn(const em_module *m); /* an LSTM or GRU (not quantized) */
/* Replaces every Linear, LSTM and GRU below model (not model itself) by its quantized form, in
 * place (PyTorch's quantize_dynamic defaults); a pruned layer is quantized with its masked
 * weights. */
em_status em_quantize_dynamic_(em_module *model, em_quantize_opts o);
/* A QuantizedLinear packs its weight for the kernel when made; after its buffers are written
 * (em_module_load) call this to pack them again. It checks what a file may hold wrong first: a
 * weight or input scale that is not finite and > 0, an input zero point outside 0..127, an
 * EM_ERR_ARG naming the layer ("fc.0"), the buffer and the value. */
em_status em_quantize_repack(em_module *model);
bool em_is_quantized(const em_module *model); /* any QuantizedLinear in the tree */

/* Saving: these metadata entries mark a quantized file, so a loader can rebuild the structure.
 * em_quantize_meta fills up to 2 entries (static strings) and returns the count. */
int em_quantize_meta(const em_module *model, em_st_meta *out);
/* Before em_module_load of a file: quantizes model's structure when st's metadata says the file
 * holds a quantized model (no-op otherwise). */
em_status em_quantize_prepare_load(em_module *model, const em_safetensors *st);

/* Bytes of every parameter and buffer of the tree (what a saved file holds, headers aside). */
int64_t em_module_nbytes(const em_module *model);

#ifdef __cplusplus
}
#endif

#endif
