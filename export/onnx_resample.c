/* ONNX graphs of the resampling layers in opset-17 operators: Upsample as Resize (nearest:
 * asymmetric coordinates and floor, PyTorch's legacy nearest; linear: align_corners, or
 * half_pixel for align_corners false), Pad as Pad (mode constant, reflect or edge). */
#include <string.h>

#include "export/onnx_internal.h"
#include "nn/nn_internal.h"

/* The sizes input of Resize for x (N, C, spatial...): N and C from x's shape at run time (the
 * batch may vary), the spatial sizes of o's output; the name into out. */
static em_status resize_sizes(em_onnx_builder *b, const char *x, const int64_t *spatial, int k,
                              char *out, size_t out_size)
{
    int64_t zero = 0, two = 2;
    const char *starts = em_onnx_i64(b, "sizes_start", EM_SHAPE(1), &zero);
    const char *ends = em_onnx_i64(b, "sizes_end", EM_SHAPE(1), &two);
    const char *tail = em_onnx_i64(b, "sizes_spatial", EM_SHAPE(k), spatial);
    if (!starts || !ends || !tail)
        return em_error_status();
    em_onnx_attr axis = {.name = "axis", .kind = EM_ONNX_ATTR_INT, .i = 0};
    em_status st = em_onnx_node(b, "Shape", &x, 1, NULL, 0);
    const char *slice[3] = {em_onnx_value(b), starts, ends};
    st = st ? st : em_onnx_node(b, "Slice", slice, 3, NULL, 0);
    const char *join[2] = {em_onnx_value(b), tail};
    st = st ? st : em_onnx_node(b, "Concat", join, 2, &axis, 1);
    if (st == EM_OK)
        snprintf(out, out_size, "%s", em_onnx_value(b));
    return st;
}

static em_status export_upsample(em_onnx_builder *b, const em_module *m, const char *layer)
{
    em_interpolate_opts o = *(const em_interpolate_opts *)em_module_options(m);
    const em_tensor *x = em_onnx_example(b);
    int k = x->ndim - 2;
    if (k < 1 || k > 2) {
        char buf[128];
        return em_set_error(EM_ERR_ARG, "em_onnx_export: %s: Upsample needs (N, C, L) or "
                            "(N, C, H, W), not %s", layer, em_shape_str(x, buf, sizeof buf));
    }
    char in[256], sizes[256] = "";
    snprintf(in, sizeof in, "%s", em_onnx_value(b));
    const char *scales = "";
    float factors[4] = {1, 1, (float)o.scale_factor[0],
                               (float)(o.scale_factor[1] ? o.scale_factor[1] : o.scale_factor[0])};
    em_status st = EM_OK;
    if (o.scale_factor[0] && !o.recompute_scale_factor) {
        em_tensor *t = em_from_data(EM_SHAPE(k + 2), EM_F32, factors);
        scales = t ? em_onnx_initializer(b, "scales", t) : NULL;
        em_release(t);
        st = scales ? EM_OK : em_error_status();
    } else {
        int64_t spatial[2];
        for (int i = 0; i < k; i++) /* PyTorch's output size (the layer ran on x: valid) */
            spatial[i] = o.size[0] ? (o.size[i] ? o.size[i] : o.size[0])
                                   : (int64_t)((double)x->shape[2 + i] *
                                               (o.scale_factor[i] ? o.scale_factor[i]
                                                                  : o.scale_factor[0]));
        st = resize_sizes(b, in, spatial, k, sizes, sizeof sizes);
    }
    if (st != EM_OK)
        return st;
    bool nearest = o.mode == EM_INTERP_NEAREST;
    em_onnx_attr attrs[3] = {
        {.name = "mode", .kind = EM_ONNX_ATTR_STRING, .s = nearest ? "nearest" : "linear"},
        {.name = "coordinate_transformation_mode", .kind = EM_ONNX_ATTR_STRING,
         .s = nearest ? "asymmetric" : o.align_corners ? "align_corners" : "half_pixel"},
        {.name = "nearest_mode", .kind = EM_ONNX_ATTR_STRING, .s = "floor"},
    };
    const char *inputs[4] = {in, "", scales, sizes};
    return em_onnx_node(b, "Resize", inputs, *sizes ? 4 : 3, attrs, nearest ? 3 : 2);
}
EM_ONNX_MAPPING(em_upsample_type, export_upsample);

static em_status export_pad(em_onnx_builder *b, const em_module *m, const char *layer)
{
    (void)layer;
    const em_pad_options *o = em_module_options(m);
    int rank = em_onnx_example(b)->ndim;
    int64_t pads[2 * EM_MAX_DIMS] = {0}; /* ONNX's: every axis's begin, then every axis's end */
    for (int i = 0; i < o->n_pads; i++)
        pads[(i % 2) * rank + rank - 1 - i / 2] = o->pads[i];
    static const char *const modes[] = {"constant", "reflect", "edge"};
    bool constant = o->mode == EM_PAD_CONSTANT;
    const char *pads_name = em_onnx_i64(b, "pads", EM_SHAPE(2 * rank), pads);
    const char *value = pads_name && constant ? em_onnx_f32(b, "value", (float)o->value) : "";
    if (!pads_name || !value)
        return em_error_status();
    const char *inputs[3] = {em_onnx_value(b), pads_name, value};
    em_onnx_attr mode = {.name = "mode", .kind = EM_ONNX_ATTR_STRING, .s = modes[o->mode]};
    return em_onnx_node(b, "Pad", inputs, constant ? 3 : 2, &mode, 1);
}
EM_ONNX_MAPPING(em_pad_type, export_pad);
