/* ONNX export: a module tree written as an ONNX model (opset 17 or later) that onnxruntime runs,
 * with a dynamic batch axis and every Conv2d followed by a BatchNorm2d folded into one Conv. */
#ifndef EMBER_EXPORT_ONNX_H
#define EMBER_EXPORT_ONNX_H

#include "ember/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int opset;               /* 0: 17, the lowest accepted */
    const char *input_name;  /* NULL: "input" */
    const char *output_name; /* NULL: "output" */
    bool fixed_batch;        /* dim 0 as the example's size rather than the symbol "batch" */
} em_onnx_opts;

/* Writes model as an ONNX file at path (atomically). example_input (B, ...) f32 is run through
 * the layers in eval mode to fix every shape but the batch; model's train/eval mode is restored.
 * Supported: Sequential, Linear, Conv2d, BatchNorm1d/2d, LayerNorm, MaxPool2d, AvgPool2d,
 * AdaptiveAvgPool2d, Flatten, Dropout and the activations; any other module is an error that
 * names it, and no file is written. */
em_status em_onnx_export(em_module *model, const em_tensor *example_input, const char *path,
                         em_onnx_opts o);

#ifdef __cplusplus
}
#endif

#endif
