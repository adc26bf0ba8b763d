/* `ember lr-find RECIPE`: the learning-rate range test on a recipe's model, optimizer and data,
 * the suggested rate on stderr and the curve as a one-line JSON on stdout. */
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "recipes/run.h"
#include "cmd/cmd.h"
#include "cli/cli_internal.h"

/* {"recipe", "suggestion", "updates", "lr": [...], "loss": [...], "smoothed": [...]}, values
 * that are not finite as null */
static void print_curve(const char *recipe, const em_lr_find_result *r)
{
    json_t *j = json_pack("{s:s}", "recipe", recipe);
    json_t *lr = json_array(), *loss = json_array(), *smoothed = json_array();
    if (!j || !lr || !loss || !smoothed) {
        json_decref(j);
        json_decref(lr);
        json_decref(loss);
        json_decref(smoothed);
        return;
    }
    em_json_set_real(j, "suggestion", r->suggestion, -1);
    json_object_set_new(j, "updates", json_integer(r->n));
    for (int i = 0; i < r->n; i++) {
        json_array_append_new(lr, isfinite(r->lr[i]) ? json_real(r->lr[i]) : json_null());
        json_array_append_new(loss, isfinite(r->loss[i]) ? json_real(r->loss[i]) : json_null());
        json_array_append_new(smoothed, isfinite(r->smoothed[i]) ? json_real(r->smoothed[i])
                                                                 : json_null());
    }
    json_object_set_new(j, "lr", lr);
    json_object_set_new(j, "loss", loss);
    json_object_set_new(j, "smoothed", smoothed);
    em_json_print_line(stdout, j);
    json_decref(j);
}

int cli_cmd_lr_find(int argc, char **argv)
{
    recipe_train_opts o = {0};
    em_lr_find_opts f = {.start_lr = 1e-8, .end_lr = 1, .num_iter = 100};
    const char *recipe = NULL, *amp = "off", *device = "cpu";
    int threads = 0;
    const cmd_opt opts[] = {
        {"start-lr", CMD_OPT_REAL, &f.start_lr, "X", "the first update's rate (default 1e-8)",
         .range = CMD_ABOVE(0)},
        {"end-lr", CMD_OPT_REAL, &f.end_lr, "X", "the rate the sweep rises to (default 1)",
         .range = CMD_ABOVE(0)},
        {"num-iter", CMD_OPT_INT, &f.num_iter, "N", "optimizer updates at most (default 100)",
         .range = CMD_RANGE(2, 100000)},
        {"batch", CMD_OPT_INT64, &o.batch, "N", "samples per batch (default: the recipe's)",
         .range = CMD_RANGE(1, 1 << 30)},
        {"optim", CMD_OPT_CHOICE, &o.optim, NULL, "optimizer (default: the recipe's)",
         .choices = "sgd|adam|adamw|rmsprop"},
        {"amp", CMD_OPT_CHOICE, &amp, NULL, "mixed precision (f16 adds a grad scaler)",
         .choices = "f16|bf16|off"},
        {"grad-accum", CMD_OPT_INT, &o.tech.grad_accum, "N", "micro-batches per optimizer step",
         .range = CMD_AT_LEAST(1)},
        {"clip", CMD_OPT_REAL, &o.tech.clip, "X", "clip the total gradient 2-norm to X",
         .range = CMD_ABOVE(0)},
        {"device", CMD_OPT_CHOICE, &device, NULL, "where to train (default cpu)",
         .choices = "cpu|cuda"},
        {"seed", CMD_OPT_UINT64, &o.seed, "N", .help = "random seed (default 0)"},
        {"data", CMD_OPT_STRING, &o.data_dir, "DIR", .help = CMD_DATA_HELP},
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)},
        {0}};
    const cmd_spec spec = {
        .command = "ember lr-find", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "The learning-rate range test: trains up to --num-iter updates with the rate "
                 "rising\nexponentially from --start-lr to --end-lr, stops once the smoothed "
                 "loss passes 4x its\nbest, and suggests the rate where it falls fastest "
                 "(stderr). stdout gets the curve as\none JSON line. Nothing is saved.",
        .more_help = cmd_list_recipes, .opts = opts};
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, false, &o.recipe);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (f.start_lr >= f.end_lr) {
        fprintf(stderr, "ember lr-find: --start-lr %g is not below --end-lr %g\n", f.start_lr,
                f.end_lr);
        return 2;
    }
    int bad_device = cmd_device(spec.command, device, false, &o.device);
    if (bad_device)
        return bad_device;
    o.workers = recipe_default_workers(o.device);
    o.tech.amp = cmd_amp_dtype(amp);
    if (threads)
        omp_set_num_threads(threads);
    em_lr_find_result r;
    em_status st = recipe_lr_find(&o, f, &r);
    if (st != EM_OK)
        fprintf(stderr, "ember lr-find: %s\n", em_error());
    else if (isfinite(r.suggestion))
        fprintf(stderr, "ember lr-find: suggested lr %.3g (steepest fall of the smoothed loss "
                        "over %d updates)\n", r.suggestion, r.n);
    else if (r.n < f.num_iter)
        fprintf(stderr, "ember lr-find: no suggestion: the loss diverged after %d updates (a "
                        "suggestion needs 13; try a lower --end-lr)\n", r.n);
    else
        fprintf(stderr, "ember lr-find: no suggestion: %d updates are too few (a suggestion "
                        "needs 13; try a larger --num-iter)\n", r.n);
    if (st == EM_OK)
        print_curve(o.recipe->name, &r);
    em_lr_find_result_free(&r);
    return st == EM_OK ? 0 : 1;
}
