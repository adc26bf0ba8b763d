/* The list of recipes and their training defaults. */
#include <string.h>

#include "recipes/recipes.h"

static const recipe_spec recipes[] = {
    {.name = "mlp", .about = "MLP 784-512-256-10 on Fashion-MNIST", .build = recipe_mlp_build,
     .flat_input = true, .epochs = 5, .batch = 64, .lr = 1e-3, .optim = "adamw",
     .schedule = "cosine"},
    {.name = "cnn", .about = "CNN conv32-conv64-fc128 on Fashion-MNIST",
     .build = recipe_cnn_build, .flat_input = false, .epochs = 5, .batch = 64, .lr = 0.05,
     .momentum = 0.9, .optim = "sgd", .schedule = "cosine"},
    {.name = "deepmlp", .about = "MLP with 16 hidden layers of 1024 on Fashion-MNIST",
     .build = recipe_deepmlp_build, .flat_input = true, .epochs = 5, .batch = 256,
     .lr = 0.02, .momentum = 0.9, .optim = "sgd", .schedule = "cosine"},
    {.name = "gpt", .about = "character-level GPT on the English text of the fortunes package",
     .train = recipe_gpt_train, .eval = recipe_gpt_eval, .epochs = 1, .batch = 32,
     .lr = 3e-3, .optim = "adamw", .schedule = "warmup-cosine", .clip = RECIPE_GPT_CLIP},
};

const recipe_spec *recipe_at(int i)
{
    return i >= 0 && i < (int)(sizeof recipes / sizeof recipes[0]) ? &recipes[i] : NULL;
}

const recipe_spec *recipe_find(const char *name)
{
    for (int i = 0; name && recipe_at(i); i++)
        if (!strcmp(recipe_at(i)->name, name))
            return recipe_at(i);
    return NULL;
}

em_shape recipe_sample_shape(const recipe_spec *rc)
{
    return rc->flat_input ? EM_SHAPE(784) : EM_SHAPE(1, 28, 28);
}
