/* The list of recipes and their training defaults. */
#include <string.h>

#include "recipes/recipes.h"

#define FASHION_MNIST .train_data = recipe_fashion_train_data, \
                      .eval_data = recipe_fashion_eval_data, .meta = recipe_fashion_meta

static const recipe_spec mlp = {
    .name = "mlp", .about = "MLP 784-512-256-10 on Fashion-MNIST", FASHION_MNIST,
    .build = recipe_mlp_build, .sample = {1, {784}}, .epochs = 5, .batch = 64, .lr = 1e-3,
    .optim = "adamw", .schedule = "cosine"};
static const recipe_spec cnn = {
    .name = "cnn", .about = "CNN conv32-conv64-fc128 on Fashion-MNIST", FASHION_MNIST,
    .build = recipe_cnn_build, .sample = {3, {1, 28, 28}}, .epochs = 5, .batch = 64,
    .lr = 0.05, .momentum = 0.9, .optim = "sgd", .schedule = "cosine"};
static const recipe_spec deepmlp = {
    .name = "deepmlp", .about = "MLP with 16 hidden layers of 1024 on Fashion-MNIST",
    FASHION_MNIST, .build = recipe_deepmlp_build, .sample = {1, {784}}, .epochs = 5,
    .batch = 256, .lr = 0.02, .momentum = 0.9, .optim = "sgd", .schedule = "cosine"};

static const recipe_spec *const recipes[] = {&mlp, &cnn, &deepmlp, &recipe_gpt};

const recipe_spec *recipe_at(int i)
{
    return i >= 0 && i < (int)(sizeof recipes / sizeof recipes[0]) ? recipes[i] : NULL;
}

const recipe_spec *recipe_find(const char *name)
{
    for (int i = 0; name && recipe_at(i); i++)
        if (!strcmp(recipe_at(i)->name, name))
            return recipe_at(i);
    return NULL;
}
