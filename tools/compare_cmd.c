/* `ember compare RECIPE`: the same recipe trained for a fixed number of steps with each technique
 * off and on, in one table of what each really costs and buys, measured side by side. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/recipes.h"
#include "tools/args.h"
#include "tools/tools_internal.h"

typedef struct {
    const char *name;
    em_techniques tech;
    int micro_split; /* the batch is split into this many micro-batches (gradient accumulation) */
} variant;

static const variant variants[] = {
    {"f32", {0}, 1},
    {"bf16 autocast", {.amp = EM_BF16}, 1},
    {"f16 autocast+scaler", {.amp = EM_F16}, 1},
    {"checkpointing", {.checkpoint_activations = true}, 1},
    {"bf16+checkpointing", {.amp = EM_BF16, .checkpoint_activations = true}, 1},
    {"grad accum 4", {.grad_accum = 4}, 4},
};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

static double ratio(double x, double base)
{
    return base > 0 ? x / base : 0;
}

int em_cmd_compare(int argc, char **argv)
{
    const char *recipe = NULL, *data_dir = NULL;
    int64_t steps = 200, batch = 0;
    int threads = 0;
    const em_opt opts[] = {
        {"steps", EM_OPT_INT64, &steps, "N", "optimizer steps per technique (default 200)",
         .range = EM_AT_LEAST(1)},
        {"batch", EM_OPT_INT64, &batch, "N", "samples per optimizer step (default: the recipe's)",
         .range = EM_AT_LEAST(4)},
        {"threads", EM_OPT_INT, &threads, "N", "OpenMP threads", .range = EM_RANGE(1, 4096)},
        {"data", EM_OPT_STRING, &data_dir, "DIR", .help = "Fashion-MNIST directory"},
        {0}};
    const em_cmd_spec spec = {
        .command = "ember compare", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "Trains the recipe with each technique off and on from the same seed and prints "
                 "step memory,\nactivation memory, samples/s, final loss and test accuracy.",
        .more_help = em_list_recipes, .opts = opts};
    int parsed = em_args_parse(&spec, argc, argv);
    if (parsed != EM_ARGS_RUN)
        return parsed;
    const em_recipe *rc = em_find_recipe(spec.command, recipe);
    if (!rc)
        return 2;
    if (!batch)
        batch = rc->batch;
    if (threads)
        omp_set_num_threads(threads);
    em_train_result res[N_VARIANTS];
    for (int v = 0; v < N_VARIANTS; v++) {
        const variant *va = &variants[v];
        em_train_opts o = {.recipe = rc, .data_dir = data_dir, .epochs = 1,
                           .batch = batch / va->micro_split, .max_steps = steps * va->micro_split,
                           .workers = 2, .tech = va->tech};
        fprintf(stderr, "ember compare: %s ...\n", va->name);
        if (em_recipe_train(&o, &res[v]) != EM_OK) {
            fprintf(stderr, "ember compare: %s: %s\n", va->name, em_error());
            return 1;
        }
    }
    printf("ember compare %s: %lld optimizer steps of batch %lld, %d threads, from the same seed\n",
           rc->name, (long long)steps, (long long)batch, omp_get_max_threads());
    printf("%-20s %10s %6s %11s %6s %10s %6s %10s %8s\n", "technique", "step MB", "x f32",
           "activ. MB", "x f32", "samples/s", "x f32", "final loss", "test acc");
    const em_train_result *b = &res[0];
    for (int v = 0; v < N_VARIANTS; v++) {
        const em_train_result *r = &res[v];
        printf("%-20s %10.1f %6.2f %11.1f %6.2f %10.0f %6.2f %10.4f %8.4f\n", variants[v].name,
               r->peak_step_bytes / 1e6, ratio(r->peak_step_bytes, b->peak_step_bytes),
               r->activation_bytes / 1e6, ratio(r->activation_bytes, b->activation_bytes),
               r->train_samples_per_s, ratio(r->train_samples_per_s, b->train_samples_per_s),
               r->train_loss, r->test_acc);
    }
    printf("step MB: peak memory above what was held before training (parameters, optimizer state\n"
           "and data are excluded); activ. MB: bytes a forward holds for its backward.\n");
    return 0;
}
