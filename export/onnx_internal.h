/* What the ONNX exporter's files share beyond export/onnx.h: the mappings of the activation
 * layers, the group and instance norms, sequence and attention layers (export/onnx_activations.c,
 * export/onnx_norm.c, export/onnx_sequence.c, export/onnx_attention.c) that
 * export/onnx_export.c looks up, and the GELU they write. Not installed. */
#ifndef EMBER_EXPORT_ONNX_INTERNAL_H
#define EMBER_EXPORT_ONNX_INTERNAL_H

#include "export/onnx.h"

/* op(a) or op(a, second) (second NULL: one input) with attr (NULL: none); its output becomes the
 * current value. a may be em_onnx_value(b). */
em_status em_onnx_op(em_onnx_builder *b, const char *op, const char *a, const char *second,
                     const em_onnx_attr *attr);
/* Initializers "<layer>.<local>": i64 values v of shape s, or one f32; the name (valid until
 * the export ends) or NULL with an error. */
const char *em_onnx_i64(em_onnx_builder *b, const char *local, em_shape s, const int64_t *v);
const char *em_onnx_f32(em_onnx_builder *b, const char *local, float v);
/* GELU of the current value: exact (erf) or with the tanh approximation */
em_status em_onnx_gelu(em_onnx_builder *b, bool tanh_approximation);

/* A module type and the function that writes its layers */
typedef struct {
    const em_module_type *type;
    em_onnx_exporter fn;
} em_onnx_mapping;

/* The activation layers' exporters, one per module type (export/onnx_activations.c): type's,
 * or NULL when type is no activation layer. */
em_onnx_exporter em_onnx_activation_exporter(const em_module_type *type);

em_status em_onnx_export_group_norm(em_onnx_builder *b, const em_module *m, const char *layer);
em_status em_onnx_export_instance_norm(em_onnx_builder *b, const em_module *m,
                                       const char *layer);
em_status em_onnx_export_rnn(em_onnx_builder *b, const em_module *m, const char *layer);
em_status em_onnx_export_mha(em_onnx_builder *b, const em_module *m, const char *layer);
/* Upsample as Resize, Pad as Pad (export/onnx_resample.c) */
em_status em_onnx_export_upsample(em_onnx_builder *b, const em_module *m, const char *layer);
em_status em_onnx_export_pad(em_onnx_builder *b, const em_module *m, const char *layer);
em_status em_onnx_export_transformer(em_onnx_builder *b, const em_module *m, const char *layer);

#endif
