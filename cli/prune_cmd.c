/* `ember prune [RECIPE] --load FILE ...`: prune a saved model's weights (L1, random or L-n
 * structured, per layer or global), in N rounds with fine-tuning between them, optionally shrink
 * it, report sparsity, accuracy, size and latency, save it as a whole-model file, and end with a
 * JSON summary line. */
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/cmd.h"
#include "bench/bench.h"
#include "cli/cli_internal.h"


typedef struct {
    const char *recipe, *load, *save, *data_dir, *method, *input_shape;
    double amount, n, lr;
    int dim, iterations, finetune_epochs, threads;
    bool global, shrink, structured;
    uint64_t seed;
} prune_opts;

/* One round of pruning by `amount` of what remains. */
static em_status prune_round(em_module *m, const prune_opts *o, double amount, em_generator *g)
{
    em_prune_target t[64];
    int n = em_prune_collect_targets(m, t, 64);
    if (n > 64 || n == 0)
        return em_set_error(EM_ERR_ARG, "ember prune: %d prunable layers (1..64 supported)", n);
    bool random = !strcmp(o->method, "random");
    if (o->global)
        return em_prune_global_unstructured(t, n, random ? EM_PRUNE_RANDOM : EM_PRUNE_L1,
                                            amount, g);
    /* structured along the output dim leaves the last layer (the classes) whole */
    int last = o->structured && (o->dim == 0 || o->dim == -t[n - 1].module->params[0].value->ndim)
                   ? n - 1 : n;
    for (int i = 0; i < last; i++) {
        em_module *l = t[i].module;
        em_status st = !o->structured ? random ? em_prune_random_unstructured(l, "weight",
                                                                              amount, g)
                                               : em_prune_l1_unstructured(l, "weight", amount)
                       : random ? em_prune_random_structured(l, "weight", amount, o->dim, g)
                                : em_prune_ln_structured(l, "weight", amount, o->n, o->dim);
        if (st != EM_OK)
            return st;
    }
    return EM_OK;
}

/* The training settings of a model that names no recipe: AdamW in batches of 64. */
static const recipe_spec no_recipe = {.optim = "adamw", .batch = 64, .lr = 1e-3};

/* epochs of the recipe's optimizer (one without: AdamW), at o->lr, over the training split. */
static em_status finetune(const recipe_model *rm, const prune_opts *o, int round)
{
    const recipe_spec *rc = rm->recipe ? rm->recipe : &no_recipe;
    em_module *m = rm->model;
    em_dataset *train = recipe_model_images(rm, o->data_dir, true);
    em_loader *dl = train ? em_loader_new(train, (em_loader_opts){.batch_size = rc->batch,
                                                                  .shuffle = true,
                                                                  .seed = o->seed + round,
                                                                  .num_workers = 2,
                                                                  .persistent_workers = true})
                          : NULL;
    em_optim *opt = dl ? recipe_optimizer(rc, rc->optim, m, o->lr, rc->momentum) : NULL;
    em_trainer *t = opt ? em_trainer_new(m, opt, NULL, (em_trainer_opts){0}) : NULL;
    em_status st = t ? EM_OK : em_error_status();
    em_module_train(m, true);
    for (int e = 0; e < o->finetune_epochs && st == EM_OK; e++) {
        for (;;) {
            em_batch b;
            em_scope_begin();
            st = em_loader_next(dl, &b);
            if (st == EM_OK)
                st = em_trainer_step(t, b.x, b.y, NULL);
            em_scope_end();
            if (st != EM_OK)
                break;
        }
        if (st == EM_END)
            st = EM_OK;
    }
    em_trainer_free(t);
    em_optim_free(opt);
    em_loader_free(dl);
    em_dataset_free(train);
    return st;
}

static em_status test_accuracy(em_module *m, const em_dataset *test, double *acc)
{
    em_eval_result r = {0};
    em_status st = em_evaluate(m, test, (em_eval_opts){0}, &r);
    *acc = r.accuracy;
    return st;
}

static long long file_bytes(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

/* Reads argv into o and *rc; CMD_ARGS_RUN to go on, else the exit status. */
static int parse_prune_args(int argc, char **argv, prune_opts *o, const recipe_spec **rc)
{
    const char **recipe = &o->recipe;
    bool dim_given = false;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &o->load, "FILE", "the model file or checkpoint",
         .required = true},
        {"save", CMD_OPT_STRING, &o->save, "FILE", "where the pruned model goes",
         .required = true},
        {"method", CMD_OPT_CHOICE, &o->method, NULL, "how weights are chosen", .required = true,
         .choices = "l1|random|ln"},
        {"amount", CMD_OPT_REAL, &o->amount, "A", "final sparsity after all rounds",
         .range = {.min = 0, .max = 1, .open_max = true}, .required = true},
        {"global", CMD_OPT_FLAG, &o->global, NULL,
         .help = "rank weights across layers (unstructured)"},
        {"dim", CMD_OPT_INT, &o->dim, "D", "prune whole slices along D (structured)",
         .range = CMD_RANGE(-8, 7), .given = &dim_given},
        {"n", CMD_OPT_REAL, &o->n, "N", "the norm of ln (default 2; inf allowed)",
         .range = {.min = 0, .max = INFINITY, .open_min = true}},
        {"iterations", CMD_OPT_INT, &o->iterations, "N", "rounds of pruning (default 1)",
         .range = CMD_RANGE(1, 1000)},
        {"finetune-epochs", CMD_OPT_INT, &o->finetune_epochs, "E",
         "epochs of fine-tuning per round", .range = CMD_RANGE(0, 1000)},
        {"lr", CMD_OPT_REAL, &o->lr, "X", "fine-tuning learning rate (default: the recipe's / 5)",
         .range = CMD_ABOVE(0)},
        {"shrink", CMD_OPT_FLAG, &o->shrink, NULL, .help = "remove pruned rows and channels"},
        {"seed", CMD_OPT_UINT64, &o->seed, "S", .help = "random seed (default 0)"},
        {"threads", CMD_OPT_INT, &o->threads, "N", "OpenMP threads (default 2)",
         .range = CMD_RANGE(1, 4096)},
        {"data", CMD_OPT_STRING, &o->data_dir, "DIR", .help = CMD_DATA_HELP},
        CMD_INPUT_SHAPE_OPT(o->input_shape),
        {0}};
    const cmd_spec spec = {
        .command = "ember prune", .operands = "RECIPE", .n_operands = 1, .operand = recipe,
        .operands_optional = true,
        .about = "l1: L1 unstructured; random: random unstructured, or structured along --dim "
                 "when given;\nln: L-n structured along --dim (default 0) with --n (default 2). "
                 "Structured pruning\nleaves the output layer's rows alone. --amount is the final "
                 "sparsity after all rounds. The images\nand the fine-tuning's optimizer are the "
                 "recipe's; a model that names none takes the IDX files\nin --data and AdamW "
                 "(lr 2e-4) in batches of 64. RECIPE: only for a file of weights alone.",
        .more_help = cmd_list_image_recipes, .opts = opts};
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, recipe, true, rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    o->structured = !strcmp(o->method, "ln") || dim_given;
    if (o->global && o->structured) {
        fprintf(stderr, "ember prune: --global works only with unstructured pruning (l1, or "
                        "random without --dim)\n");
        return 2;
    }
    return CMD_ARGS_RUN;
}

/* What a pruning run measures before and after. */
typedef struct {
    double base_acc, acc, sparsity;
    bench_latency base1, base64, l1, l64; /* batch 1 and 64 */
    int64_t base_params, removed;      /* neurons removed by shrinking */
} prune_figures;

/* Prunes m in o->iterations rounds (fine-tuning between them), shrinks or makes the pruning
 * permanent, measures and saves; f gets the figures. */
static em_status prune_model(const recipe_model *rm, const prune_opts *o,
                             const em_dataset *test, const em_tensor *x1, const em_tensor *x64,
                             prune_figures *f)
{
    em_module *m = rm->model;
    em_generator gen = em_generator_new(o->seed);
    f->base_params = em_module_num_params(m);
    em_status st = test_accuracy(m, test, &f->base_acc);
    f->base1 = bench_measure_latency(m, x1, 50, 300);
    f->base64 = bench_measure_latency(m, x64, 5, 40);
    /* each round prunes a of what remains: (1 - a)^N = 1 - amount */
    double a = 1 - pow(1 - o->amount, 1.0 / o->iterations);
    for (int r = 0; r < o->iterations && st == EM_OK; r++) {
        st = prune_round(m, o, a, &gen);
        if (st == EM_OK && o->finetune_epochs)
            st = finetune(rm, o, r);
        if (st == EM_OK)
            st = test_accuracy(m, test, &f->acc);
        if (st == EM_OK)
            printf("round %d/%d: pruned %.4f of the remaining weights, test_acc %.4f\n", r + 1,
                   o->iterations, a, f->acc);
    }
    if (st == EM_OK && o->shrink)
        st = (f->removed = em_prune_shrink(m)) < 0 ? em_error_status() : EM_OK;
    else if (st == EM_OK)
        st = em_prune_remove_all(m);
    f->sparsity = st == EM_OK ? em_prune_report(m, stdout) : 0;
    if (st == EM_OK && o->shrink)
        st = test_accuracy(m, test, &f->acc);
    if (st != EM_OK)
        return st;
    f->l1 = bench_measure_latency(m, x1, 50, 300);
    f->l64 = bench_measure_latency(m, x64, 5, 40);
    return cmd_save_model(rm, o->save);
}

/* The run's one-line JSON summary on stdout. */
static em_status print_prune_summary(const recipe_spec *rc, const prune_opts *o,
                                     const em_module *m, const prune_figures *f)
{
    json_t *j = json_pack("{s:o, s:s, s:b, s:b}", "recipe",
                          rc ? json_string(rc->name) : json_null(), "method", o->method,
                          "structured", o->structured, "global", o->global);
    em_json_set_real(j, "amount", o->amount, 4);
    json_object_set_new(j, "iterations", json_integer(o->iterations));
    json_object_set_new(j, "finetune_epochs", json_integer(o->finetune_epochs));
    em_json_set_real(j, "base_test_acc", f->base_acc, 4);
    em_json_set_real(j, "test_acc", f->acc, 4);
    em_json_set_real(j, "sparsity", f->sparsity, 4);
    json_object_set_new(j, "base_params", json_integer(f->base_params));
    json_object_set_new(j, "params", json_integer(em_module_num_params(m)));
    json_object_set_new(j, "neurons_removed", json_integer(f->removed));
    json_object_set_new(j, "size_bytes", json_integer(em_module_nbytes(m)));
    json_object_set_new(j, "file_bytes", json_integer(file_bytes(o->save)));
    em_json_set_real(j, "base_latency_b1_p50_us", f->base1.p50_us, 1);
    em_json_set_real(j, "latency_b1_p50_us", f->l1.p50_us, 1);
    em_json_set_real(j, "base_b64_samples_per_s_p50", 64e6 / f->base64.p50_us, 0);
    em_json_set_real(j, "b64_samples_per_s_p50", 64e6 / f->l64.p50_us, 0);
    em_json_set_real(j, "b64_speedup", f->l64.p50_us > 0 ? f->base64.p50_us / f->l64.p50_us : 0,
                     2);
    em_status st = j ? em_json_print_line(stdout, j) : EM_ERR_MEMORY;
    json_decref(j);
    return st;
}

/* Prunes the loaded model m as o says, prints the summary; the exit status. */
static int prune(recipe_model *m, prune_opts *o)
{
    if (o->lr <= 0)
        o->lr = (m->recipe ? m->recipe->lr : no_recipe.lr) / 5;
    em_dataset *test = recipe_model_images(m, o->data_dir, false);
    em_tensor *x64 = test ? bench_test_batch(test, 64) : NULL;
    em_tensor *x1 = x64 ? em_narrow(x64, 0, 0, 1) : NULL;
    prune_figures f = {0};
    em_status st = x1 ? prune_model(m, o, test, x1, x64, &f) : em_error_status();
    if (st == EM_OK)
        st = print_prune_summary(m->recipe, o, m->model, &f);
    else
        fprintf(stderr, "ember prune: %s\n", em_error());
    em_release(x1);
    em_release(x64);
    em_dataset_free(test);
    return st == EM_OK ? 0 : 1;
}

int cli_cmd_prune(int argc, char **argv)
{
    prune_opts o = {.n = 2, .iterations = 1, .threads = 2};
    const recipe_spec *rc;
    int parsed = parse_prune_args(argc, argv, &o, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    omp_set_num_threads(o.threads);
    recipe_model m;
    int status = cmd_load_model("ember prune", o.load, rc, o.input_shape, true, &m);
    if (!status)
        status = prune(&m, &o);
    recipe_model_free(&m);
    return status;
}
