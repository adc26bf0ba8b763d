/* Models that more than one suite builds (model files, ONNX export). */
#include "helpers/models.h"

em_module *em_test_concat_unet(void)
{
    em_conv2d_layer_opts pad = {.padding = 1};
    em_module *inner = em_sequential(
        4, em_max_pool2d_layer(2, (em_pool2d_layer_opts){0}), em_conv2d_layer(4, 8, 3, pad),
        em_group_norm_layer(2, 8, (em_group_norm_opts){0}),
        em_conv_transpose2d_layer(8, 4, 2, (em_conv_transpose2d_layer_opts){.stride = 2}));
    return em_sequential(
        4, em_conv2d_layer(3, 4, 3, pad), em_concat_skip(inner, 1),
        em_concat(-3, 3, em_conv2d_layer(8, 2, 1, (em_conv2d_layer_opts){0}),
                  em_sequential(2, em_conv2d_layer(8, 3, 3, pad), em_relu_layer()),
                  em_identity_layer()),
        em_conv2d_layer(13, 2, 1, (em_conv2d_layer_opts){0}));
}
