/* The list of recipes and their training defaults. */
#include <string.h>

#include "recipes/recipes.h"

static const em_recipe recipes[] = {
    {.name = "mlp", .about = "MLP 784-512-256-10 on Fashion-MNIST", .build = em_recipe_mlp_build,
     .flat_input = true, .epochs = 5, .batch = 64, .lr = 1e-3, .optim = "adamw",
     .schedule = "cosine"},
    {.name = "cnn", .about = "CNN conv32-conv64-fc128 on Fashion-MNIST",
     .build = em_recipe_cnn_build, .flat_input = false, .epochs = 5, .batch = 64, .lr = 0.05,
     .momentum = 0.9, .optim = "sgd", .schedule = "cosine"},
    {.name = "deepmlp", .about = "MLP with 16 hidden layers of 1024 on Fashion-MNIST",
     .build = em_recipe_deepmlp_build, .flat_input = true, .epochs = 5, .batch = 256,
     .lr = 0.02, .momentum = 0.9, .optim = "sgd", .schedule = "cosine"},
    {.name = "gpt", .about = "character-level GPT on the English text of the fortunes package",
     .train = em_recipe_gpt_train, .eval = em_recipe_gpt_eval, .epochs = 1, .batch = 32,
     .lr = 3e-3, .optim = "adamw", .schedule = "warmup-cosine", .clip = EM_GPT_CLIP},
};

const em_recipe *em_recipe_at(int i)
{
    return i >= 0 && i < (int)(sizeof recipes / sizeof recipes[0]) ? &recipes[i] : NULL;
}

const em_recipe *em_recipe_find(const char *name)
{
    for (int i = 0; name && em_recipe_at(i); i++)
        if (!strcmp(em_recipe_at(i)->name, name))
            return em_recipe_at(i);
    return NULL;
}
