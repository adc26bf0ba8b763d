/* `ember train RECIPE` and `ember eval RECIPE`: run a reference recipe, its progress and
 * per-epoch lines on stderr, and print a one-line JSON summary on stdout. */
#include <jansson.h>
#include <omp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/run.h"
#include "observe/tensorboard.h"
#include "cmd/cmd.h"
#include "cli/cli_internal.h"


static const char *amp_name(em_dtype amp)
{
    return amp == EM_F32 ? "off" : em_dtype_name(amp);
}

/* The run's one-line JSON summary on stdout (non-finite values as null, named in
 * "non_finite"): the results, then the settings that made them. */
static void print_summary(const recipe_train_opts *o, const recipe_result *r)
{
    json_t *j = json_pack("{s:s, s:i, s:i}", "recipe", o->recipe->name, "epochs", r->epochs,
                          "batch", r->batch);
    if (!j)
        return;
    if (r->tokens_per_sample) { /* a language model: losses in nats per token */
        json_object_set_new(j, "block", json_integer(r->tokens_per_sample));
        em_json_set_real(j, "train_loss", r->train_loss, 4);
        em_json_set_real(j, "val_loss", r->test_loss, 4);
        em_json_set_real(j, "train_tokens_per_s",
                         r->train_samples_per_s * (double)r->tokens_per_sample, 0);
    } else {
        em_json_set_real(j, "test_acc", r->test_acc, 4);
        em_json_set_real(j, "test_loss", r->test_loss, 4);
        em_json_set_real(j, "train_samples_per_s", r->train_samples_per_s, 0);
    }
    json_object_set_new(j, "peak_bytes", json_integer((json_int_t)r->peak_bytes));
    em_json_set_real(j, "wall_s", r->wall_s, 1);
    json_object_set_new(j, "steps", json_integer(r->steps));
    json_object_set_new(j, "updates", json_integer(r->updates));
    json_object_set_new(j, "skipped_steps", json_integer(r->skipped_steps));
    if (o->ddp)
        json_object_set_new(j, "world_size", json_integer(em_dist_world_size()));
    em_json_set_real(j, "lr", r->lr, -1);
    em_json_set_real(j, "scale", r->scale, -1);
    if (o->find_batch)
        json_object_set_new(j, "largest_batch", json_integer(r->largest_batch));
    json_object_set_new(j, "preset", o->preset ? json_string(o->preset) : json_null());
    json_object_set_new(j, "schedule", json_string(o->schedule ? o->schedule
                                                                : o->recipe->schedule));
    json_object_set_new(j, "amp", json_string(amp_name(o->tech.amp)));
    json_object_set_new(j, "device", json_string(em_device_name(o->device)));
    json_object_set_new(j, "grad_accum", json_integer(o->tech.grad_accum > 1 ? o->tech.grad_accum
                                                                             : 1));
    em_json_set_real(j, "clip", o->tech.clip > 0 ? o->tech.clip : o->recipe->clip, -1);
    json_object_set_new(j, "guard", json_boolean(o->tech.guard));
    json_object_set_new(j, "checkpoint_activations", json_boolean(o->tech.checkpoint_activations));
    if (o->tech.cuda_graph)
        json_object_set_new(j, "cuda_graph_replays", json_integer(r->graph_replays));
    em_json_print_line(stdout, j);
    json_decref(j);
}

/* `ember eval`'s line: what the evaluation measured, nothing of training. */
static void print_eval(const recipe_spec *rc, const char *load, const recipe_result *r)
{
    json_t *j = json_pack("{s:o, s:s}", "recipe", rc ? json_string(rc->name) : json_null(),
                          "load", load);
    if (!j)
        return;
    if (r->tokens_per_sample) { /* a language model: the loss in nats per token */
        em_json_set_real(j, "val_loss", r->test_loss, 4);
    } else {
        em_json_set_real(j, "test_acc", r->test_acc, 4);
        em_json_set_real(j, "test_loss", r->test_loss, 4);
    }
    json_object_set_new(j, "peak_bytes", json_integer((json_int_t)r->peak_bytes));
    em_json_set_real(j, "wall_s", r->wall_s, 1);
    em_json_print_line(stdout, j);
    json_decref(j);
}

/* The preset's techniques, under those the command line set itself. */
static void apply_preset(const char *preset, recipe_train_opts *o, bool given_amp,
                         bool given_schedule)
{
    recipe_train_opts mine = *o;
    if (recipe_preset(preset, o) != EM_OK)
        return; /* the option's choices admit only known presets */
    if (given_amp)
        o->tech.amp = mine.tech.amp;
    if (given_schedule)
        o->schedule = mine.schedule;
    if (mine.tech.clip > 0)
        o->tech.clip = mine.tech.clip;
    if (mine.tech.grad_accum > 0)
        o->tech.grad_accum = mine.tech.grad_accum;
    o->tech.guard |= mine.tech.guard;
    o->tech.checkpoint_activations |= mine.tech.checkpoint_activations;
}

/* What `ember train`'s command line sets: the training options and the words and flags that
 * settle them. */
typedef struct {
    recipe_train_opts o;
    const char *recipe, *amp, *profile_steps, *preset, *device;
    int threads;
    bool no_val, given_amp, given_schedule, tf32;
    double dist_timeout;
} train_args;

/* Reads argv into a; CMD_ARGS_RUN to go on, else the exit status. */
static int parse_train_args(int argc, char **argv, train_args *a)
{
    const cmd_opt opts[] = {
        {"epochs", CMD_OPT_INT, &a->o.epochs, "N", "epochs to train (default: the recipe's)",
         .range = CMD_AT_LEAST(1)},
        {"batch", CMD_OPT_INT64, &a->o.batch, "N", "samples per batch (default: the recipe's)",
         .range = CMD_RANGE(1, INT_MAX)},
        {"lr", CMD_OPT_REAL, &a->o.lr, "X", "learning rate (default: the recipe's)",
         .range = CMD_ABOVE(0)},
        {"optim", CMD_OPT_CHOICE, &a->o.optim, NULL, "optimizer (default: the recipe's)",
         .choices = "sgd|adam|adamw|rmsprop"},
        {"schedule", CMD_OPT_CHOICE, &a->o.schedule, NULL, "learning-rate schedule (default: the "
         "recipe's)", .choices = RECIPE_SCHEDULES, .given = &a->given_schedule},
        {"preset", CMD_OPT_CHOICE, &a->preset, NULL, "a bundle of techniques; options given here "
         "win", .choices = RECIPE_PRESETS},
        {"threads", CMD_OPT_INT, &a->threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)},
        {"workers", CMD_OPT_INT, &a->o.workers, "N",
         "data loader threads (default: 0 on the CPU, 2 on a GPU)",
         .range = CMD_RANGE(0, 256)},
        {"seed", CMD_OPT_UINT64, &a->o.seed, "N", .help = "random seed (default 0)"},
        {"data", CMD_OPT_STRING, &a->o.data_dir, "DIR", .help = CMD_DATA_HELP},
        {"save", CMD_OPT_STRING, &a->o.save_path, "FILE",
         .help = "write a training checkpoint every epoch (a whole-model file)"},
        {"save-every", CMD_OPT_INT64, &a->o.save_every, "N",
         "with --save: also write it every N steps (a killed run loses at most N)",
         .range = CMD_AT_LEAST(1)},
        {"resume", CMD_OPT_STRING, &a->o.resume_path, "FILE",
         .help = "continue from a training checkpoint"},
        {"max-steps", CMD_OPT_INT64, &a->o.max_steps, "N", "stop after N steps",
         .range = CMD_AT_LEAST(1)},
        {"amp", CMD_OPT_CHOICE, &a->amp, NULL, "mixed precision (f16 adds a grad scaler)",
         .choices = "f16|bf16|off", .given = &a->given_amp},
        {"grad-accum", CMD_OPT_INT, &a->o.tech.grad_accum, "N", "micro-batches per optimizer step",
         .range = CMD_AT_LEAST(1)},
        {"clip", CMD_OPT_REAL, &a->o.tech.clip, "X", "clip the total gradient 2-norm to X",
         .range = CMD_ABOVE(0)},
        {"guard", CMD_OPT_FLAG, &a->o.tech.guard, NULL,
         .help = "skip non-finite or outlier updates"},
        {"checkpoint-activations", CMD_OPT_FLAG, &a->o.tech.checkpoint_activations, NULL,
         .help = "recompute activations in backward"},
        {"device", CMD_OPT_CHOICE, &a->device, NULL, "where to train (default cpu)",
         .choices = "cpu|cuda"},
        {"tf32", CMD_OPT_FLAG, &a->tf32, NULL,
         .help = "f32 matrix products on TF32 tensor cores (cuda; off by default)"},
        {"cuda-graph", CMD_OPT_FLAG, &a->o.tech.cuda_graph, NULL,
         .help = "capture each step as a CUDA graph and replay it (cuda)"},
        {"mem-budget", CMD_OPT_SIZE, &a->o.mem_budget, "BYTES", "hold the device's memory to BYTES",
         .range = CMD_AT_LEAST(1)},
        {"find-batch", CMD_OPT_FLAG, &a->o.find_batch, NULL,
         .help = "first find the batch with the best samples/s that fits"},
        {"no-val", CMD_OPT_FLAG, &a->no_val, NULL,
         .help = "evaluate the test split only at the end, not after every epoch"},
        {"profile", CMD_OPT_STRING, &a->o.observe.profile, "FILE.json",
         .help = "profile micro-batches into a Chrome trace; the table goes to stderr"},
        {"profile-steps", CMD_OPT_STRING, &a->profile_steps, "A:B",
         .help = "the micro-batches --profile records, counting from 1 (default 6:25)"},
        {"tensorboard", CMD_OPT_STRING, &a->o.observe.tensorboard, "DIR",
         .help = "write TensorBoard event files (scalars, histograms) into DIR"},
        {"histogram-every", CMD_OPT_INT, &a->o.observe.histogram_every, "N",
         "micro-batches between weight and gradient histograms (default 200)",
         .range = CMD_AT_LEAST(1)},
        {"ddp", CMD_OPT_FLAG, &a->o.ddp, NULL,
         .help = "data-parallel on every process of `mpirun -np N` (--batch per process)"},
        {"dist-timeout", CMD_OPT_REAL, &a->dist_timeout, "S",
         "with --ddp: a collective waits at most S seconds for a rank (default 300)",
         .range = CMD_ABOVE(0)},
        {0}};
    const cmd_spec spec = {
        .command = "ember train", .operands = "RECIPE", .n_operands = 1, .operand = &a->recipe,
        .about = "Trains a reference recipe (on Fashion-MNIST; gpt on the fortunes' text). "
                 "Progress and a line\nper epoch go to stderr; stdout gets only a one-line JSON "
                 "summary.\n\nSchedules: cosine "
                 "and constant; warmup-cosine (5% linear warmup, then cosine);\nonecycle (up "
                 "from lr/25 over 30% of the run, then down); step (x0.1 every third of\nthe "
                 "run); plateau (x0.1 after two epochs without a better validation loss).\n"
                 "Presets: basic (--guard --clip 1); advanced (basic, --amp bf16, --schedule "
                 "warmup-cosine);\nultra (advanced, --grad-accum 2, --checkpoint-activations).",
        .more_help = cmd_list_recipes, .opts = opts};
    return cmd_parse_recipe_command(&spec, argc, argv, &a->recipe, false, &a->o.recipe);
}

/* The options' consequences checked before any data loads (device, files, preset, profiled
 * steps); 0 to go on, else the exit status. */
static int settle_train_args(train_args *a)
{
    recipe_train_opts *o = &a->o;
    int bad_device = cmd_device("ember train", a->device, a->tf32, &o->device);
    if (bad_device)
        return bad_device;
    if (o->workers < 0)
        o->workers = recipe_default_workers(o->device);
    if (o->save_path && em_atomic_file_check(o->save_path) != EM_OK) { /* before any data loads */
        fprintf(stderr, "ember train: --save: %s\n", em_error());
        return 2;
    }
    if (o->save_every && !o->save_path) {
        fprintf(stderr, "ember train: --save-every needs --save FILE\n");
        return 2;
    }
    if (o->observe.tensorboard && em_tb_writer_check(o->observe.tensorboard) != EM_OK) {
        fprintf(stderr, "ember train: --tensorboard: %s\n", em_error());
        return 2;
    }
    if (o->observe.profile && em_atomic_file_check(o->observe.profile) != EM_OK) {
        fprintf(stderr, "ember train: --profile: %s\n", em_error());
        return 2;
    }
    o->tech.amp = cmd_amp_dtype(a->amp);
    if (a->preset)
        apply_preset(a->preset, o, a->given_amp, a->given_schedule);
    o->validate = !a->no_val;
    if (a->profile_steps && !o->observe.profile) {
        fprintf(stderr, "ember train: --profile-steps needs --profile FILE.json\n");
        return 2;
    }
    if (a->profile_steps &&
        !cli_parse_step_range("ember train", "--profile-steps", a->profile_steps,
                             &o->observe.profile_first, &o->observe.profile_last))
        return 2;
    return 0;
}

/* Trains (on every rank with --ddp) and prints the summary; the exit status. */
static int run_train(train_args *a)
{
    recipe_train_opts *o = &a->o;
    if (a->threads)
        omp_set_num_threads(a->threads);
    if (o->ddp && em_dist_init((em_dist_opts){.timeout_s = a->dist_timeout}) != EM_OK) {
        fprintf(stderr, "ember train: %s\n", em_error());
        return 1;
    }
    recipe_result r;
    em_status st = recipe_train(o, &r);
    if (st != EM_OK && o->ddp)
        fprintf(stderr, "ember train (rank %d of %d): %s\n", em_dist_rank(),
                em_dist_world_size(), em_error());
    else if (st != EM_OK)
        fprintf(stderr, "ember train: %s\n", em_error());
    else if (em_dist_rank() == 0)
        print_summary(o, &r);
    if (o->ddp)
        em_dist_finalize();
    return st == EM_OK ? 0 : 1;
}

int cli_cmd_train(int argc, char **argv)
{
    train_args a = {.o = {.workers = -1, .progress = true}, .amp = "off", .device = "cpu"};
    int status = parse_train_args(argc, argv, &a);
    if (status != CMD_ARGS_RUN)
        return status;
    status = settle_train_args(&a);
    return status ? status : run_train(&a);
}

int cli_cmd_eval(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *data_dir = NULL, *input_shape = NULL;
    int threads = 0;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &load, "FILE", "a model file or training checkpoint",
         .required = true},
        {"data", CMD_OPT_STRING, &data_dir, "DIR", .help = CMD_DATA_HELP},
        CMD_INPUT_SHAPE_OPT(input_shape),
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)},
        {0}};
    const cmd_spec spec = {
        .command = "ember eval", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .operands_optional = true,
        .about = "Test accuracy and loss (gpt: val loss) of a saved model, checkpoint, quantized "
                 "or pruned\nmodel, on the data of the recipe its file names. A model that names "
                 "none is an image\nclassifier, scored on the test split of the IDX files in "
                 "--data in samples of its input\nshape. RECIPE: only for a file of weights "
                 "alone.",
        .more_help = cmd_list_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, false, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (threads)
        omp_set_num_threads(threads);
    recipe_model m;
    int status = cmd_load_model(spec.command, load, rc, input_shape, false, &m);
    if (status)
        return status;
    recipe_result r;
    if (recipe_eval(&m, data_dir, &r) != EM_OK) {
        fprintf(stderr, "ember eval: %s\n", em_error());
        recipe_model_free(&m);
        return 1;
    }
    print_eval(m.recipe, load, &r);
    recipe_model_free(&m);
    return 0;
}
