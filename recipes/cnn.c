/* The CNN recipe: two 3x3 conv-ReLU-maxpool stages and two linear layers on (1, 28, 28) images. */
#include "recipes/recipes.h"

em_module *recipe_cnn_build(const recipe_data *d)
{
    (void)d; /* the same model whatever the data */
    em_pool2d_layer_opts halve = {0}; /* stride: the kernel's 2 */
    return em_sequential(10,
                         em_conv2d_layer(1, 32, 3, (em_conv2d_layer_opts){.padding = 1}),
                         em_relu_layer(),
                         em_max_pool2d_layer(2, halve), // (B, 32, 28, 28) -> (B, 32, 14, 14)
                         em_conv2d_layer(32, 64, 3, (em_conv2d_layer_opts){.padding = 1}),
                         em_relu_layer(),
                         em_max_pool2d_layer(2, halve), // (B, 64, 14, 14) -> (B, 64, 7, 7)
                         em_flatten_layer(),           // (B, 3136)
                         em_linear_layer(3136, 128, true),
                         em_relu_layer(),
                         em_linear_layer(128, 10, true)); // (B, 10) logits
}
