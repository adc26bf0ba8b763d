/* A recipe's run: the one training driver every recipe goes through (recipes/train.c), its
 * options and result, and the evaluation of a saved model (recipes/eval.c). */
#ifndef EMBER_RECIPES_RUN_H
#define EMBER_RECIPES_RUN_H

#include "recipes/model_file.h"
#include "recipes/recipes.h"

struct recipe_train_opts {
    const recipe_spec *recipe;
    const char *data_dir;   /* NULL: the recipe's */
    int epochs;             /* 0: the recipe's */
    int64_t batch;          /* 0: the recipe's */
    double lr;              /* 0: the recipe's */
    double momentum;        /* 0: the recipe's (sgd's) */
    const char *optim;      /* NULL: the recipe's */
    const char *schedule;   /* NULL: the recipe's */
    int workers;            /* loader threads (recipe_default_workers: the usual choice) */
    uint64_t seed;
    const char *save_path;  /* training checkpoint written after every epoch and at the end: a
                               whole-model file with the recipe's metadata */
    int64_t save_every;     /* and every this many micro-batches; 0: not between epochs */
    const char *resume_path;
    int64_t max_steps;      /* stop after this many micro-batch steps (a one-pass recipe: this
                               many optimizer updates); 0: every epoch (the recipe's steps) */
    em_techniques tech;
    const char *preset;     /* the preset the options came from (recipe_preset), or NULL */
    em_device device;       /* where the model trains (the CPU by default): the model moves
                               there before its optimizer is built, batches arrive there */
    size_t mem_budget;      /* hold the device's memory to this many bytes; 0: no budget */
    bool find_batch;        /* first find the batch with the best samples/s that fits */
    bool skip_eval;         /* leave test_acc/test_loss at 0 */
    bool validate;          /* evaluate the test split after every epoch */
    bool progress;          /* the trainer's progress display on stderr */
    em_observe_opts observe; /* TensorBoard, the profiler, memory warnings (train/observer.h) */
    em_trainer_callbacks callbacks; /* more hooks into the loop (ember compare's loss curves) */
    bool ddp;               /* data-parallel over the process group (em_dist_init first): batch
                               is per process; rank 0 validates, evaluates and shows progress */
};

typedef struct {
    double test_acc, test_loss;   /* a language model: NaN and the val loss in nats per token */
    double train_loss;            /* mean loss over the last 20 micro-batches */
    double train_samples_per_s;   /* training steps only, evaluation excluded; with ddp, of all
                                     processes together */
    double wall_s;
    size_t peak_bytes;      /* the most device memory held at once while training */
    size_t peak_step_bytes; /* the peak above what was held before the first step: activations,
                               gradients, optimizer state and temporaries */
    size_t activation_bytes; /* the most bytes one forward held for its backward */
    int64_t steps;          /* micro-batches trained */
    int64_t updates;        /* optimizer updates taken */
    int64_t skipped_steps;  /* optimizer updates skipped (grad scaler or guard) */
    int64_t graph_replays;  /* with tech.cuda_graph: steps replayed from the step's graph */
    double scale;           /* the grad scaler's final scale; 1 without one */
    double lr;              /* group 0's learning rate at the end */
    int64_t largest_batch;  /* with find_batch: the largest batch that fit */
    int epochs, batch;
    int64_t tokens_per_sample; /* positions trained per sample: gpt's block size; 0 otherwise */
} recipe_result;

em_status recipe_train(const recipe_train_opts *o, recipe_result *r);
/* The learning-rate range test (em_lr_find) on the run o describes (its model, optimizer,
 * data, batch and techniques; no checkpoint, schedule or validation applies), the curve into
 * *out (free it with em_lr_find_result_free, also after an error). */
em_status recipe_lr_find(const recipe_train_opts *o, em_lr_find_opts f, em_lr_find_result *out);
/* The test accuracy and mean loss (a language model: its val loss per token) of a loaded model
 * on the data its recipe scores it on, from dir (NULL: the recipe's). A model that names no
 * recipe is an image classifier scored on the test split of the IDX files in dir (Fashion-MNIST's
 * names: then required) in samples of its input shape; an error says which is missing. */
em_status recipe_eval(const recipe_model *m, const char *dir, recipe_result *r);
/* The split (train or test) of the images a classifier m is scored on, as recipe_eval finds
 * them; NULL with an error naming what is missing. A language model has none. */
em_dataset *recipe_model_images(const recipe_model *m, const char *dir, bool train);

#endif
