/* The deep MLP recipe: 16 hidden layers of width 1024 with ReLU, where activation memory
 * dominates — the model the memory techniques (checkpointing, mixed precision) are measured on.
 * Its weights take He (Kaiming normal, fan-in) initialisation and zero biases: with PyTorch's
 * default Linear init the signal fades through 16 ReLU layers and the model does not learn. */
#include "recipes/recipes.h"

#define DEEPMLP_HIDDEN_LAYERS 16
#define DEEPMLP_WIDTH 1024

static em_module *he_linear(int64_t in, int64_t out)
{
    em_module *fc = em_linear_layer(in, out, true);
    if (fc && (em_init_kaiming_normal_(fc->params[0].value, 0, EM_FAN_IN, NULL) != EM_OK
               || em_zero_(fc->params[1].value) != EM_OK)) {
        em_module_free(fc);
        return NULL;
    }
    return fc;
}

em_module *recipe_deepmlp_build(const recipe_data *d)
{
    (void)d; /* the same model whatever the data */
    em_module *net = em_sequential(0);
    for (int i = 0; i < DEEPMLP_HIDDEN_LAYERS && net; i++) {
        int64_t in = i == 0 ? 784 : DEEPMLP_WIDTH;
        net = em_sequential_append(net, he_linear(in, DEEPMLP_WIDTH)); // (B, 1024)
        net = em_sequential_append(net, em_relu_layer());
    }
    return em_sequential_append(net, he_linear(DEEPMLP_WIDTH, 10)); // (B, 10) logits
}
