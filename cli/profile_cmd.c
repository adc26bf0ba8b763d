/* `ember profile RECIPE`: a short training run of a recipe with the profiler on for its last
 * micro-batches; the key-averages and layer-wise tables on stdout, the Chrome trace in a file.
 * Also the A:B step ranges of `ember train --profile-steps`. */
#include <errno.h>
#include <omp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/run.h"
#include "cmd/cmd.h"
#include "cli/cli_internal.h"

bool cli_parse_step_range(const char *command, const char *option, const char *text,
                         int64_t *first, int64_t *last)
{
    char *end;
    errno = 0;
    long long a = strtoll(text, &end, 10), b = 0;
    bool ok = end != text && *end == ':';
    if (ok) {
        const char *second = end + 1;
        b = strtoll(second, &end, 10);
        ok = end != second && *end == '\0' && errno == 0 && a >= 1 && b >= a;
    }
    if (!ok) {
        fprintf(stderr, "%s: %s: '%s' is not FIRST:LAST (micro-batches counting from 1, FIRST "
                "<= LAST)\n", command, option, text);
        return false;
    }
    *first = a;
    *last = b;
    return true;
}

int cli_cmd_profile(int argc, char **argv)
{
    const char *recipe = NULL, *trace = NULL, *data_dir = NULL, *amp = "off", *device = "cpu";
    int64_t steps = 20, warmup = 5, batch = 0;
    int threads = 0, workers = -1;
    const cmd_opt opts[] = {
        {"steps", CMD_OPT_INT64, &steps, "N", "micro-batches profiled (default 20)",
         .range = CMD_RANGE(1, 100000)},
        {"warmup", CMD_OPT_INT64, &warmup, "N", "micro-batches trained first (default 5)",
         .range = CMD_RANGE(0, 100000)},
        {"trace", CMD_OPT_STRING, &trace, "FILE.json",
         .help = "the Chrome trace (default ember-profile-RECIPE.json)"},
        {"batch", CMD_OPT_INT64, &batch, "N", "samples per batch (default: the recipe's)",
         .range = CMD_RANGE(1, INT_MAX)},
        {"amp", CMD_OPT_CHOICE, &amp, NULL, "mixed precision (f16 adds a grad scaler)",
         .choices = "f16|bf16|off"},
        {"device", CMD_OPT_CHOICE, &device, NULL,
         "where to train (default cpu; on cuda each op's kernels are timed with CUDA events)",
         .choices = "cpu|cuda"},
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)},
        {"workers", CMD_OPT_INT, &workers, "N",
         "data loader threads (default: the device's; 0 on the CPU, where the steps' threads "
         "hold the cores)",
         .range = CMD_RANGE(0, 256)},
        {"data", CMD_OPT_STRING, &data_dir, "DIR", .help = CMD_DATA_HELP},
        {0}};
    const cmd_spec spec = {
        .command = "ember profile", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "Trains the recipe for --warmup then --steps micro-batches with the profiler on "
                 "for the latter;\nprints where the time went (ops forward and backward, the "
                 "optimizer, the loader, each layer)\nand writes a Chrome trace for Perfetto or "
                 "chrome://tracing.",
        .more_help = cmd_list_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, false, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    char default_trace[128];
    snprintf(default_trace, sizeof default_trace, "ember-profile-%s.json", rc->name);
    if (em_atomic_file_check(trace ? trace : default_trace) != EM_OK) { /* before any data loads */
        fprintf(stderr, "ember profile: --trace: %s\n", em_error());
        return 2;
    }
    em_device dev;
    int bad_device = cmd_device("ember profile", device, false, &dev);
    if (bad_device)
        return bad_device;
    if (workers < 0)
        workers = recipe_default_workers(dev);
    if (threads)
        omp_set_num_threads(threads);
    recipe_train_opts o = {
        .recipe = rc, .data_dir = data_dir, .device = dev, .epochs = 1, .batch = batch,
        .workers = workers,
        .max_steps = warmup + steps, .skip_eval = true,
        .tech.amp = cmd_amp_dtype(amp),
        .observe = {.profile = trace ? trace : default_trace, .profile_first = warmup + 1,
                    .profile_last = warmup + steps, .log = stdout}};
    printf("ember profile %s on %s: micro-batches %lld to %lld of batch %lld (amp %s), %d "
           "threads, %d loader workers\n", rc->name, device, (long long)warmup + 1,
           (long long)(warmup + steps), (long long)(batch ? batch : rc->batch), amp,
           omp_get_max_threads(), workers);
    fflush(stdout);
    recipe_result r;
    if (recipe_train(&o, &r) != EM_OK) {
        fprintf(stderr, "ember profile: %s\n", em_error());
        return 1;
    }
    return 0;
}
