/* What the ONNX exporter's files share beyond export/onnx.h: the builder's helpers, the GELU
 * they write, and the mappings of module types to the functions that write them. Not
 * installed. */
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

/* A module type and the function that writes its layers. A built-in mapping is declared in
 * its exporter's file, `EM_ONNX_MAPPING(em_conv2d_type, export_conv);`, and the build collects
 * every such line into em_onnx_builtin_mappings (CMakeLists.txt: onnx_mappings.c). A layer that
 * is one ONNX operator needs none: its type's description names the operator
 * (em_module_type.onnx). */
typedef struct {
    const em_module_type *type;
    em_onnx_exporter fn;
} em_onnx_mapping;
#define EM_ONNX_MAPPING(type, exporter)                                                       \
    extern const em_module_type type;                                                         \
    const em_onnx_mapping em_onnx_mapping_##type = {&type, exporter}
extern const em_onnx_mapping *const em_onnx_builtin_mappings[]; /* NULL-terminated */

#endif
