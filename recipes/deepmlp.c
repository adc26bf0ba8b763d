/* The deep MLP recipe: 16 hidden layers of width 1024 with ReLU, where activation memory
 * dominates — the model the memory techniques (checkpointing, mixed precision) are measured on. */
#include "recipes/recipes.h"

#define DEEPMLP_HIDDEN_LAYERS 16
#define DEEPMLP_WIDTH 1024

em_module *em_recipe_deepmlp_build(void)
{
    em_module *net = em_sequential(0);
    for (int i = 0; i < DEEPMLP_HIDDEN_LAYERS && net; i++) {
        int64_t in = i == 0 ? 784 : DEEPMLP_WIDTH;
        net = em_sequential_append(net, em_linear_layer(in, DEEPMLP_WIDTH, true)); // (B, 1024)
        net = em_sequential_append(net, em_relu_layer());
    }
    return em_sequential_append(net, em_linear_layer(DEEPMLP_WIDTH, 10, true)); // (B, 10)
}
