/* The MLP recipe: 784-512-256-10 with ReLU on flattened Fashion-MNIST images. */
#include "recipes/recipes.h"

em_module *recipe_mlp_build(const recipe_data *d)
{
    (void)d; /* the same model whatever the data */
    return em_sequential(5,
                         em_linear_layer(784, 512, true), // (B, 784) -> (B, 512)
                         em_relu_layer(),
                         em_linear_layer(512, 256, true), // (B, 512) -> (B, 256)
                         em_relu_layer(),
                         em_linear_layer(256, 10, true)); // (B, 256) -> (B, 10) logits
}
