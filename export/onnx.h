/* ONNX export: a module tree written as an ONNX model (opset 17 or later) that onnxruntime runs,
 * with a dynamic batch axis (and sequence axis, when asked) and every Conv2d followed by a
 * BatchNorm2d folded into one Conv. */
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
    bool allow_nonfinite;    /* write NaN or Inf weights; by default they are an EM_ERR_NUMERIC
                                error naming the tensor, and no file is written */
    bool dynamic_sequence;   /* dim 1 of the input and output as the symbol "sequence" (for
                                sequence models: x (B, T, ...), or (T, B, ...) for an LSTM or GRU
                                that is not batch_first) */
} em_onnx_opts;

/* Writes model as an ONNX file at path (atomically). example_input (B, ...) f32, or i64 token
 * ids (B, T) for a model that starts with an Embedding (GPT), is run through the layers in eval
 * mode to fix every shape but the batch (and the sequence); model's train/eval mode is restored.
 * Supported: Sequential, Residual, Concat, Linear, Conv2d, Conv1d, ConvTranspose2d,
 * BatchNorm1d/2d, LayerNorm, GroupNorm, InstanceNorm1d/2d, MaxPool2d, AvgPool2d,
 * AdaptiveAvgPool2d, Flatten, Identity, Dropout, the activations (Softplus with a threshold of
 * 20 or more: ONNX's has none), Upsample (Resize), Pad, Embedding, LSTM and GRU (ONNX LSTM/GRU, gates reordered), MultiheadAttention,
 * TransformerEncoderLayer, GPT (once em_gpt has made one: models/ registers it) and the types
 * given an exporter with em_onnx_register (below); any other module is an error that names it,
 * and no file is written. */
em_status em_onnx_export(em_module *model, const em_tensor *example_input, const char *path,
                         em_onnx_opts o);

/* ---- mappings for other module types ----
 * An exporter writes one layer of its module type: nodes that start from the current value
 * (em_onnx_value: the layer's input) and leave the layer's output as the current value. It gets
 * the module and its dotted name ("features.0"; "" for the root) and returns EM_OK, or an error
 * status with the message set; em_onnx_export then runs the layer's forward on the example. */
typedef struct em_onnx_builder em_onnx_builder;
typedef em_status (*em_onnx_exporter)(em_onnx_builder *b, const em_module *m, const char *layer);
/* Makes em_onnx_export write modules of type with fn (in place of an earlier registration or a
 * built-in mapping); for the whole process, any thread. */
em_status em_onnx_register(const em_module_type *type, em_onnx_exporter fn);

const char *em_onnx_value(const em_onnx_builder *b); /* the current value's name */
/* Writes child (a module inside the one being written) through its own mapping as layer
 * "<layer>.<local>", from the current value and example; the child's output becomes both.
 * For a mapping of a module made of others (a GPT writes its blocks so). */
em_status em_onnx_child(em_onnx_builder *b, em_module *child, const char *local);
/* the example input as it reaches the layer (B, ...), for shapes; dim 0 is the batch. After
 * em_onnx_child, the example as it leaves that child. */
const em_tensor *em_onnx_example(const em_onnx_builder *b);
/* An initializer holding t (i64 as i64, any other dtype as f32) under "<layer>.<local>";
 * returns that name (valid until the export ends), or NULL with an error. A name already
 * written is not written again: a tied weight is held once. */
const char *em_onnx_initializer(em_onnx_builder *b, const char *local, const em_tensor *t);

typedef enum {
    EM_ONNX_ATTR_INT,
    EM_ONNX_ATTR_FLOAT,
    EM_ONNX_ATTR_INTS,
    EM_ONNX_ATTR_STRING,
} em_onnx_attr_kind;
typedef struct {
    const char *name;    /* "axis" */
    em_onnx_attr_kind kind;
    int64_t i;           /* EM_ONNX_ATTR_INT */
    double f;            /* EM_ONNX_ATTR_FLOAT (written as a float) */
    const int64_t *ints; /* (n_ints) EM_ONNX_ATTR_INTS */
    int n_ints;
    const char *s;       /* EM_ONNX_ATTR_STRING */
} em_onnx_attr;
/* A node op (an ONNX operator of the default domain) on the named inputs with n_attrs
 * attributes; its output becomes the current value. */
em_status em_onnx_node(em_onnx_builder *b, const char *op, const char *const *inputs,
                       int n_inputs, const em_onnx_attr *attrs, int n_attrs);

#ifdef __cplusplus
}
#endif

#endif
