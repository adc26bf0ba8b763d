/* The reference recipes: Fashion-MNIST models whose definitions match bench/bench_torch.py's,
 * each with the defaults that reach its accuracy target, and a character-level GPT on the
 * fortunes' text. A recipe is data and hooks (its data, model, loss, metadata, defaults); one
 * driver trains every recipe (recipes/run.h). */
#ifndef EMBER_RECIPES_H
#define EMBER_RECIPES_H

#include "ember.h"

#define RECIPE_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define RECIPE_FORTUNES_DIR "/usr/share/games/fortunes"

typedef struct recipe_spec recipe_spec;
typedef struct recipe_train_opts recipe_train_opts;

/* What a recipe trains on and is scored on, loaded by its hooks and freed by recipe_data_free. */
typedef struct {
    em_dataset *train;     /* NULL when only evaluating */
    em_sampler *sampler;   /* train's order for the whole run, or NULL: shuffled each epoch
                              (split over the processes with ddp) */
    em_dataset *val;       /* Fashion-MNIST's test split; gpt's val windows */
    em_char_vocab vocab;   /* a language model's characters (size 0 for the others) */
    int64_t tokens_per_sample; /* a language model's positions per sample; 0 for the others */
} recipe_data;
void recipe_data_free(recipe_data *d);

/* The metadata saved with a model (keys never "ember.", which are the library's). */
#define RECIPE_MAX_META 8
typedef struct {
    em_st_meta entries[RECIPE_MAX_META];
    char text[RECIPE_MAX_META][272]; /* the values: the longest is a vocabulary of 256 */
    int n;
} recipe_meta;
/* Adds key (a static string) with the value fmt makes; a full list takes no more. */
void recipe_meta_put(recipe_meta *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "784", "1,28,28": a shape as the metadata "input_shape" holds it, into buf (n bytes). */
void recipe_shape_text(em_shape s, char *buf, size_t n);

struct recipe_spec {
    const char *name;      /* "mlp" */
    const char *about;     /* one line for --help */
    /* the data of run o (the loader's batch given) */
    em_status (*train_data)(const recipe_train_opts *o, int64_t batch, recipe_data *d);
    /* the split model (loaded from a file that names this recipe, with the file's vocabulary
     * for a language model) is scored on, from dir (NULL: the recipe's) */
    em_status (*eval_data)(const recipe_spec *rc, const char *dir, const em_module *model,
                           const em_char_vocab *vocab, recipe_data *d);
    /* a new model for the data (d NULL: for a recipe whose model needs none, a fresh one) */
    em_module *(*build)(const recipe_data *d);
    em_shape sample;       /* one input sample (mlp (784), cnn (1, 28, 28)); ndim 0 for gpt,
                              whose input is token ids of its block size */
    /* activation checkpointing of a built model; NULL: the trainer's (em_checkpoint_sequential) */
    em_status (*checkpoint_activations)(em_module *model);
    em_loss_fn loss;       /* NULL: cross-entropy against class indices */
    int64_t val_batch;     /* samples per evaluation batch; 0: em_evaluate's */
    /* what its model files say beside "recipe": the input shape, a vocabulary (vocab: the
     * model's, size 0 for the others) */
    void (*meta)(const recipe_spec *rc, const em_module *model, const em_char_vocab *vocab,
                 recipe_meta *out);
    bool language_model;   /* scored by its loss per token (gpt) rather than accuracy */
    bool one_pass;         /* a run is one pass of --max-steps random windows (gpt): no --resume,
                              --find-batch, --epochs or --ddp */
    /* defaults of `ember train` */
    int epochs;
    int64_t batch;
    double lr;
    double momentum;
    const char *optim;      /* "sgd", "adam", "adamw" or "rmsprop" */
    em_adam_opts adamw;     /* AdamW's settings besides the lr */
    bool decay_matrices_only; /* AdamW's weight decay on 2-D parameters only */
    const char *schedule;   /* one of RECIPE_SCHEDULES */
    int64_t warmup_updates; /* warmup-cosine's warm-up; 0: 5% of the run (see recipe_schedule) */
    double final_lr_divisor; /* warmup-cosine decays to lr / this; 0: to 0 */
    double clip;            /* gradient 2-norm clipped to this unless --clip says; 0: none */
    int64_t steps;          /* optimizer updates of a one-pass run unless --max-steps says */
};

const recipe_spec *recipe_find(const char *name); /* NULL when unknown */
const recipe_spec *recipe_at(int i);               /* the i-th recipe, NULL past the end */

/* The models of the Fashion-MNIST recipes (d may be NULL: they need no data). */
em_module *recipe_mlp_build(const recipe_data *d);
em_module *recipe_cnn_build(const recipe_data *d);
em_module *recipe_deepmlp_build(const recipe_data *d);

/* ---- Fashion-MNIST (recipes/fashion.c) ---- */
/* The train or test split of a folder of IDX files in Fashion-MNIST's names (NULL:
 * RECIPE_FASHION_MNIST_DIR), each sample of shape sample: (784) flat, or (1, 28, 28). */
em_dataset *recipe_fashion_mnist(const char *dir, bool train, em_shape sample);
/* The Fashion-MNIST recipes' hooks: the training and test splits, the test split, and the
 * input shape of their model files ("input_shape"). */
em_status recipe_fashion_train_data(const recipe_train_opts *o, int64_t batch, recipe_data *d);
em_status recipe_fashion_eval_data(const recipe_spec *rc, const char *dir,
                                   const em_module *model, const em_char_vocab *vocab,
                                   recipe_data *d);
void recipe_fashion_meta(const recipe_spec *rc, const em_module *model,
                         const em_char_vocab *vocab, recipe_meta *out);

/* ---- the gpt recipe (recipes/gpt.c, recipes/gpt_data.c) ---- */
/* The recipe's text: every fortune file of dir but the ASCII art, in name order, backspace
 * overstrikes undone, only printable ASCII, tabs and newlines kept, each file ending in a '%'
 * line; encoded with the vocabulary of its characters; the last tenth is val. */
typedef struct {
    em_char_vocab vocab;
    uint8_t *ids;              /* (n) the encoded text */
    int64_t n, n_train, n_val; /* train: ids[0, n_train); val: ids[n_train, n) */
} recipe_gpt_text;
em_status recipe_gpt_text_load(const char *dir /* NULL: RECIPE_FORTUNES_DIR */,
                               recipe_gpt_text *t);
void recipe_gpt_text_free(recipe_gpt_text *t);
/* The recipe's model for a vocabulary of vocab_size. */
em_gpt_settings recipe_gpt_settings(int64_t vocab_size);
/* Whether m is a GPT (its settings into *c), asked without an error being left behind. */
bool recipe_is_gpt(const em_module *m, em_gpt_settings *c);
extern const recipe_spec recipe_gpt; /* its entry of the list, for bench/'s gpt cases */

/* ---- choices a run makes ---- */
/* An optimizer by name ("sgd", "adam", "adamw": rc's AdamW settings, "rmsprop") over all of
 * model's parameters. */
em_optim *recipe_optimizer(const recipe_spec *rc, const char *name, em_module *model, double lr,
                           double momentum);

/* The learning-rate schedules of a run of total_updates optimizer updates from the lr o has;
 * *out gets the scheduler (NULL for constant), which the trainer steps:
 *   constant       the lr stays
 *   cosine         cosine decay to 0 over the run, every update (CosineAnnealingLR)
 *   warmup-cosine  linear warm-up, then cosine decay to lr / rc->final_lr_divisor (to 0 when
 *                  0); the warm-up takes rc->warmup_updates when the run is longer than that,
 *                  else one update, and, for a recipe that names none, 5% of the run (at least
 *                  one)
 *   onecycle       OneCycleLR with max_lr the lr: up from lr / 25 over 30% of the run, then
 *                  down to lr / 25e4
 *   step           the lr times 0.1 after every third of the run (StepLR)
 *   plateau        the lr times 0.1 once two epochs in a row did not improve the validation
 *                  loss (ReduceLROnPlateau with patience 1; the training loss with --no-val) */
#define RECIPE_SCHEDULES "constant|cosine|warmup-cosine|onecycle|step|plateau"
em_status recipe_schedule(const recipe_spec *rc, const char *name, em_optim *o,
                          int64_t total_updates, em_scheduler **out);

/* Bundles of techniques (`ember train --preset`), each adding to the one before:
 *   basic     the guard (updates with a non-finite or outlier loss or gradient are skipped) and
 *             clipping of the total gradient norm at 1
 *   advanced  basic + bf16 autocast + the warmup-cosine schedule
 *   ultra     advanced + gradient accumulation over 2 micro-batches + activation checkpointing
 * Sets those fields of o, and o->preset. */
#define RECIPE_PRESETS "basic|advanced|ultra"
em_status recipe_preset(const char *name, recipe_train_opts *o);

/* Loader threads a recipe trains with unless told (ember train, profile, compare, bench train):
 * none when the steps run on the CPU, whose cores the steps' OpenMP threads already hold (a
 * worker's batch only takes time from them: on 2 cores the MLP's ember train ran at 0.95 of its
 * step rate with none, 0.88 with two), two when they run on a GPU. */
int recipe_default_workers(em_device device);

#endif
