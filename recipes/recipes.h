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
    int64_t max_steps;      /* stop after this many micro-batch steps; 0: run every epoch */
    em_techniques tech;
    size_t mem_budget;      /* hold CPU memory to this many bytes; 0: no budget */
    bool find_batch;        /* first find the batch with the best samples/s that fits */
    bool skip_eval;         /* leave test_acc/test_loss at 0 */
    bool validate;          /* evaluate the test split after every epoch */
    bool progress;          /* the trainer's progress display on stderr */
} em_train_opts;

typedef struct {
    double test_acc, test_loss;
    double train_loss;            /* mean loss over the last 20 micro-batches */
    double train_samples_per_s;   /* training steps only, evaluation excluded */
    double wall_s;
    size_t peak_bytes;      /* the most CPU memory held at once while training */
    size_t peak_step_bytes; /* the peak above what was held before the first step: activations,
                               gradients, optimizer state and temporaries */
    size_t activation_bytes; /* the most bytes one forward held for its backward */
    int64_t steps;          /* micro-batches trained */
    int64_t updates;        /* optimizer updates taken */
    int64_t skipped_steps;  /* optimizer updates skipped (grad scaler or guard) */
    double scale;           /* the grad scaler's final scale; 1 without one */
    int64_t largest_batch;  /* with find_batch: the largest batch that fit */
    int epochs, batch;
} em_train_result;

em_status em_recipe_train(const em_train_opts *o, em_train_result *r);
/* Test accuracy and mean loss of a recipe's model loaded from a model file or a checkpoint. */
em_status em_recipe_eval(const em_recipe *rc, const char *data_dir, const char *load_path,
                         em_train_result *r);

/* An optimizer by name ("sgd", "adam", "adamw", "rmsprop") over all of model's parameters. */
em_optim *em_recipe_optimizer(const char *name, em_module *model, double lr, double momentum);
/* The recipe's datasets (train or test split) from a Fashion-MNIST directory. */
em_dataset *em_fashion_mnist(const char *data_dir, bool train, bool flat);
/* Loads a model file (em_module_save) or the model part of a training checkpoint; a file that
 * names another recipe than rc (when rc is given) is an error saying which it holds. */
em_status em_load_model_any(em_module *model, const em_recipe *rc, const char *path);

#endif
