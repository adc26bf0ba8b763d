/* The reference recipes: Fashion-MNIST models whose definitions match ../bench/torch_ref.py's,
 * each with the defaults that reach its accuracy target, and the loop that trains them. */
#ifndef EMBER_RECIPES_H
#define EMBER_RECIPES_H

#include "ember.h"

typedef struct {
    const char *name;   /* "mlp" */
    const char *about;  /* one line for --help */
    em_module *(*build)(void);
    bool flat_input;    /* samples as (784) rather than (1, 28, 28) */
    /* defaults of `ember train` */
    int epochs;
    int64_t batch;
    double lr;
    double momentum;
    const char *optim;  /* "sgd", "adam", "adamw" or "rmsprop" */
    const char *schedule; /* "cosine" (per-step cosine decay to 0) or "constant" */
} em_recipe;

const em_recipe *em_recipe_find(const char *name); /* NULL when unknown */
const em_recipe *em_recipe_at(int i);               /* the i-th recipe, NULL past the end */

em_module *em_recipe_mlp_build(void);
em_module *em_recipe_cnn_build(void);
em_module *em_recipe_deepmlp_build(void);

#define EM_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    const em_recipe *recipe;
    const char *data_dir;   /* NULL: EM_FASHION_MNIST_DIR */
    int epochs;             /* 0: the recipe's */
    int64_t batch;          /* 0: the recipe's */
    double lr;              /* 0: the recipe's */
    const char *optim;      /* NULL: the recipe's */
    const char *schedule;   /* NULL: the recipe's */
    int workers;            /* loader threads */
    uint64_t seed;
    const char *save_path;  /* training checkpoint written after every epoch and at the end */
    const char *resume_path;
    int64_t max_steps;      /* stop after this many optimizer steps; 0: run every epoch */
} em_train_opts;

typedef struct {
    double test_acc, test_loss;
    double train_loss;            /* mean loss over the last epoch's batches */
    double train_samples_per_s;   /* training steps only, evaluation excluded */
    double wall_s;
    size_t peak_bytes;
    int64_t steps;
    int epochs, batch;
} em_train_result;

/* Progress callback: called after every step; done/total count samples of this epoch. */
typedef void (*em_progress_fn)(void *ctx, int epoch, int epochs, int64_t done, int64_t total,
                               double loss, double samples_per_s);

em_status em_recipe_train(const em_train_opts *o, em_progress_fn progress, void *ctx,
                          em_train_result *r);
/* Test accuracy and mean loss of a recipe's model loaded from a model file or a checkpoint. */
em_status em_recipe_eval(const em_recipe *rc, const char *data_dir, const char *load_path,
                         em_train_result *r);

/* The recipe's datasets (train or test split) from a Fashion-MNIST directory. */
em_dataset *em_fashion_mnist(const char *data_dir, bool train, bool flat);
/* Accuracy and mean cross-entropy of model over ds, in eval mode and without grad. */
em_status em_evaluate(em_module *model, const em_dataset *ds, double *acc, double *loss);
/* Loads a model file (em_module_save) or the model part of a training checkpoint. */
em_status em_load_model_any(em_module *model, const char *path);

#endif
