/* The reference recipes: Fashion-MNIST models whose definitions match ../bench/torch_ref.py's,
 * each with the defaults that reach its accuracy target, and the loop that trains them; and a
 * character-level GPT on the fortunes' text, which brings its own data and loop. */
#ifndef EMBER_RECIPES_H
#define EMBER_RECIPES_H

#include "ember.h"

struct recipe_train_opts;
struct recipe_result;

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
    const char *schedule; /* one of RECIPE_SCHEDULES */
    double clip;        /* gradient 2-norm clipped to this unless --clip says; 0: none */
    /* a recipe with data and a task of its own (gpt) trains and evaluates itself, taking the
     * same options and filling the same result; build is then NULL */
    em_status (*train)(const struct recipe_train_opts *o, struct recipe_result *r);
    em_status (*eval)(const char *data_dir, const char *load_path, struct recipe_result *r);
} recipe_spec;

const recipe_spec *recipe_find(const char *name); /* NULL when unknown */
const recipe_spec *recipe_at(int i);               /* the i-th recipe, NULL past the end */
/* A recipe's sample shape without the batch dim: (784) or (1, 28, 28). */
em_shape recipe_sample_shape(const recipe_spec *rc);

em_module *recipe_mlp_build(void);
em_module *recipe_cnn_build(void);
em_module *recipe_deepmlp_build(void);

#define RECIPE_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct recipe_train_opts {
    const recipe_spec *recipe;
    const char *data_dir;   /* NULL: the recipe's (RECIPE_FASHION_MNIST_DIR, RECIPE_FORTUNES_DIR) */
    int epochs;             /* 0: the recipe's */
    int64_t batch;          /* 0: the recipe's */
    double lr;              /* 0: the recipe's */
    double momentum;        /* 0: the recipe's (sgd's) */
    const char *optim;      /* NULL: the recipe's */
    const char *schedule;   /* NULL: the recipe's */
    int workers;            /* loader threads (recipe_default_workers: the usual choice) */
    uint64_t seed;
    const char *save_path;  /* training checkpoint written after every epoch and at the end */
    int64_t save_every;     /* and every this many micro-batches; 0: not between epochs */
    const char *resume_path;
    int64_t max_steps;      /* stop after this many micro-batch steps; 0: run every epoch */
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
} recipe_train_opts;

typedef struct recipe_result {
    double test_acc, test_loss;   /* gpt: NaN and the val loss in nats per character */
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
    double scale;           /* the grad scaler's final scale; 1 without one */
    double lr;              /* group 0's learning rate at the end */
    int64_t largest_batch;  /* with find_batch: the largest batch that fit */
    int epochs, batch;
    int64_t tokens_per_sample; /* positions trained per sample: gpt's block size; 0 otherwise */
} recipe_result;

/* The learning-rate schedules of a run of total_updates optimizer updates from the lr o has;
 * *out gets the scheduler (NULL for constant), which the trainer steps:
 *   constant       the lr stays
 *   cosine         cosine decay to 0 over the run, every update (CosineAnnealingLR)
 *   warmup-cosine  linear warmup over the first 5% of the updates (at least one), then cosine
 *                  decay to 0
 *   onecycle       OneCycleLR with max_lr the lr: up from lr / 25 over 30% of the run, then
 *                  down to lr / 25e4
 *   step           the lr times 0.1 after every third of the run (StepLR)
 *   plateau        the lr times 0.1 once two epochs in a row did not improve the validation
 *                  loss (ReduceLROnPlateau with patience 1; the training loss with --no-val) */
#define RECIPE_SCHEDULES "constant|cosine|warmup-cosine|onecycle|step|plateau"
em_status recipe_schedule(const char *name, em_optim *o, int64_t total_updates,
                             em_scheduler **out);

/* Bundles of techniques (`ember train --preset`), each adding to the one before:
 *   basic     the guard (updates with a non-finite or outlier loss or gradient are skipped) and
 *             clipping of the total gradient norm at 1
 *   advanced  basic + bf16 autocast + the warmup-cosine schedule
 *   ultra     advanced + gradient accumulation over 2 micro-batches + activation checkpointing
 * Sets those fields of o, and o->preset. */
#define RECIPE_PRESETS "basic|advanced|ultra"
em_status recipe_preset(const char *name, recipe_train_opts *o);

em_status recipe_train(const recipe_train_opts *o, recipe_result *r);
em_status recipe_gpt_train(const recipe_train_opts *o, recipe_result *r);
/* Test accuracy and mean loss of a recipe's model loaded from a model file or a checkpoint. */
em_status recipe_eval(const recipe_spec *rc, const char *data_dir, const char *load_path,
                         recipe_result *r);
em_status recipe_gpt_eval(const char *data_dir, const char *load_path, recipe_result *r);

/* An optimizer by name ("sgd", "adam", "adamw", "rmsprop") over all of model's parameters. */
em_optim *recipe_optimizer(const char *name, em_module *model, double lr, double momentum);
/* Loader threads a recipe trains with unless told (ember train, profile, compare, bench train):
 * none when the steps run on the CPU, whose cores the steps' OpenMP threads already hold (a
 * worker's batch only takes time from them: on 2 cores the MLP's ember train ran at 0.95 of its
 * step rate with none, 0.88 with two), two when they run on a GPU. */
int recipe_default_workers(em_device device);
/* The recipe's datasets (train or test split) from a Fashion-MNIST directory. */
em_dataset *recipe_fashion_mnist(const char *data_dir, bool train, bool flat);
/* Loads a model file (em_module_save) or the model part of a training checkpoint; a file that
 * names another recipe than rc (when rc is given) is an error saying which it holds. */
em_status recipe_load_model_any(em_module *model, const recipe_spec *rc, const char *path);

/* ---- the gpt recipe ---- */
#define RECIPE_FORTUNES_DIR "/usr/share/games/fortunes"

/* The recipe's text (recipes/gpt_data.c): every fortune file of dir but the ASCII art, in name
 * order, backspace overstrikes undone, only printable ASCII, tabs and newlines kept, each file
 * ending in a '%' line; encoded with the vocabulary of its characters; the last tenth is val. */
typedef struct {
    em_char_vocab vocab;
    uint8_t *ids;             /* (n) the encoded text */
    int64_t n, n_train, n_val; /* train: ids[0, n_train); val: ids[n_train, n) */
} recipe_gpt_text;
em_status recipe_gpt_text_load(const char *dir /* NULL: RECIPE_FORTUNES_DIR */, recipe_gpt_text *t);
void recipe_gpt_text_free(recipe_gpt_text *t);

/* The default model for a vocabulary of vocab_size, and its training defaults. */
em_gpt_config recipe_gpt_config(int64_t vocab_size);
#define RECIPE_GPT_STEPS 1000     /* optimizer steps of a default run */
#define RECIPE_GPT_WARMUP 100     /* of them, warm-up steps */
#define RECIPE_GPT_WEIGHT_DECAY 0.1
#define RECIPE_GPT_BETA2 0.99
#define RECIPE_GPT_CLIP 1.0
#define RECIPE_GPT_VAL_STRIDE 4   /* the val loss reads every 4th block-long window of val */
/* The recipe's AdamW: weight decay on matrices (2-D parameters) only. */
em_optim *recipe_gpt_optimizer(em_module *model, double lr);
/* A gpt model saved by `ember train gpt --save` (a model file or training checkpoint) with its
 * vocabulary; a file of another recipe, or without the gpt metadata, is an error naming it. */
em_status recipe_gpt_load(const char *path, em_module **model, em_char_vocab *vocab);

#endif
