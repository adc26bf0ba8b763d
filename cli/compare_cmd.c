/* `ember compare RECIPE`: the same recipe trained for a fixed number of steps with each technique
 * off and on, in one table of what each really costs and buys, measured side by side; with
 * --report, the same as a page of charts (loss curves, memory and speed against f32). */
#include <omp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/run.h"
#include "cmd/cmd.h"
#include "cmd/report.h"
#include "cli/cli_internal.h"

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

#define SMOOTH 10 /* optimizer steps the report's loss curves average over */

/* The micro-batch losses of one technique's run, by step. */
typedef struct {
    double *loss; /* (cap) */
    int64_t cap;
} loss_log;

static void record_loss(void *ctx, const em_progress *p)
{
    loss_log *l = ctx;
    if (p->step >= 1 && p->step <= l->cap)
        l->loss[p->step - 1] = p->loss;
}

/* y[s]: the mean loss of optimizer step s (its micro-batches), averaged over the SMOOTH steps
 * up to s; x[s] = s + 1. */
static void loss_curve(const loss_log *l, int micro, int64_t steps, double *x, double *y)
{
    double window[SMOOTH] = {0}, sum = 0;
    for (int64_t s = 0; s < steps; s++) {
        double step_loss = 0;
        for (int k = 0; k < micro; k++)
            step_loss += l->loss[s * micro + k] / micro;
        sum += step_loss - window[s % SMOOTH];
        window[s % SMOOTH] = step_loss;
        x[s] = (double)(s + 1);
        y[s] = sum / (double)(s + 1 < SMOOTH ? s + 1 : SMOOTH);
    }
}

/* The page of ember compare --report, into r (opened before the runs, so a bad path fails
 * first); closes r. */
static em_status write_report(cmd_report *r, const recipe_spec *rc, int64_t steps, int64_t batch,
                              const recipe_result *res, const loss_log *logs)
{
    char chart[96], note[512];
    double *xy = calloc((size_t)(2 * N_VARIANTS * steps), sizeof *xy);
    if (!xy) {
        cmd_report_abort(r);
        return em_set_error(EM_ERR_MEMORY, "out of memory for the report");
    }
    snprintf(note, sizeof note, "Each technique trained the %s recipe for %lld optimizer steps "
             "of batch %lld from the same seed, one after another on %d threads. Ratios are to "
             "plain f32 training.", rc->name, (long long)steps, (long long)batch,
             omp_get_max_threads());
    cmd_report_note(r, note);
    cmd_report_series series[N_VARIANTS];
    const char *names[N_VARIANTS];
    double step_mb[N_VARIANTS], act_mb[N_VARIANTS], sps[N_VARIANTS];
    double step_x[N_VARIANTS], act_x[N_VARIANTS], sps_x[N_VARIANTS];
    for (int v = 0; v < N_VARIANTS; v++) {
        double *x = xy + 2 * v * steps, *y = x + steps;
        loss_curve(&logs[v], variants[v].micro_split, steps, x, y);
        series[v] = (cmd_report_series){variants[v].name, x, y, (int)steps};
        names[v] = variants[v].name;
        step_mb[v] = (double)res[v].peak_step_bytes / 1e6;
        act_mb[v] = (double)res[v].activation_bytes / 1e6;
        sps[v] = res[v].train_samples_per_s;
        step_x[v] = ratio(step_mb[v], step_mb[0]);
        act_x[v] = ratio(act_mb[v], act_mb[0]);
        sps_x[v] = ratio(sps[v], sps[0]);
    }
    cmd_report_heading(r, "Training loss");
    snprintf(chart, sizeof chart, "loss (mean of the last %d optimizer steps)", SMOOTH);
    cmd_report_line_chart(r, chart, "optimizer step", "loss", series, N_VARIANTS);
    cmd_report_heading(r, "Memory");
    cmd_report_bar_chart(r, &(cmd_report_bars){
        .title = "peak memory of a step (above parameters, optimizer state and data)",
        .unit = "MB", .ratio_of = "f32", .groups = names, .n_groups = N_VARIANTS,
        .n_series = 1, .values = step_mb, .ratio = step_x});
    cmd_report_bar_chart(r, &(cmd_report_bars){
        .title = "activation memory (what a forward holds for its backward)", .unit = "MB",
        .ratio_of = "f32", .groups = names, .n_groups = N_VARIANTS, .n_series = 1,
        .values = act_mb, .ratio = act_x});
    cmd_report_heading(r, "Speed");
    cmd_report_bar_chart(r, &(cmd_report_bars){
        .title = "training samples/s", .unit = "samples/s", .ratio_of = "f32", .groups = names,
        .n_groups = N_VARIANTS, .n_series = 1, .values = sps, .ratio = sps_x});
    cmd_report_heading(r, "Where each run ended");
    const char *header[] = {"technique", "final loss", "test accuracy", "skipped steps"};
    char cells[N_VARIANTS][3][32];
    const char *cell_ptrs[N_VARIANTS * 4];
    for (int v = 0; v < N_VARIANTS; v++) {
        snprintf(cells[v][0], 32, "%.4f", res[v].train_loss);
        snprintf(cells[v][1], 32, "%.4f", res[v].test_acc);
        snprintf(cells[v][2], 32, "%lld", (long long)res[v].skipped_steps);
        cell_ptrs[4 * v] = names[v];
        for (int c = 0; c < 3; c++)
            cell_ptrs[4 * v + 1 + c] = cells[v][c];
    }
    cmd_report_table(r, header, 4, cell_ptrs, N_VARIANTS);
    free(xy);
    return cmd_report_close(r);
}

/* Trains rc once per technique (steps optimizer steps of batch samples); res and logs get each
 * run's result and losses. A few untimed f32 steps go first, so that the first technique does
 * not pay alone for what any first run pays (a GPU's libraries starting, the allocator's first
 * blocks, the data's first reads); every run starts from the recipe's seed, so they change no
 * result. */
static em_status train_variants(const recipe_spec *rc, const char *data_dir, em_device device,
                                int64_t steps, int64_t batch, recipe_result *res,
                                loss_log *logs)
{
    recipe_train_opts warm_up = {.recipe = rc, .data_dir = data_dir, .epochs = 1, .batch = batch,
                             .max_steps = steps < 10 ? steps : 10, .skip_eval = true,
                             .workers = recipe_default_workers(device), .device = device};
    recipe_result ignored;
    fprintf(stderr, "ember compare: warm-up ...\n");
    if (recipe_train(&warm_up, &ignored) != EM_OK)
        return em_error_prefix("warm-up");
    for (int v = 0; v < N_VARIANTS; v++) {
        const variant *va = &variants[v];
        logs[v].cap = steps * va->micro_split;
        if (!(logs[v].loss = calloc((size_t)logs[v].cap, sizeof *logs[v].loss)))
            return em_set_error(EM_ERR_MEMORY, "%s: out of memory", va->name);
        recipe_train_opts o = {.recipe = rc, .data_dir = data_dir, .epochs = 1,
                           .batch = batch / va->micro_split, .max_steps = steps * va->micro_split,
                           .workers = recipe_default_workers(device), .tech = va->tech,
                           .device = device,
                           .callbacks = {.ctx = &logs[v], .on_step = record_loss}};
        fprintf(stderr, "ember compare: %s ...\n", va->name);
        em_status st = recipe_train(&o, &res[v]);
        if (st != EM_OK) {
            em_error_prefix(va->name);
            return st;
        }
    }
    return EM_OK;
}

/* The table of what each technique costs and buys, against plain f32. */
static void print_table(const recipe_spec *rc, em_device device, int64_t steps, int64_t batch,
                        const recipe_result *res)
{
    char about[256];
    printf("ember compare %s: %lld optimizer steps of batch %lld on %s, %d threads, from the "
           "same seed\n", rc->name, (long long)steps, (long long)batch,
           em_device_describe(device, about, sizeof about), omp_get_max_threads());
    printf("%-20s %10s %6s %11s %6s %10s %6s %10s %8s\n", "technique", "step MB", "x f32",
           "activ. MB", "x f32", "samples/s", "x f32", "final loss", "test acc");
    const recipe_result *b = &res[0];
    for (int v = 0; v < N_VARIANTS; v++) {
        const recipe_result *r = &res[v];
        printf("%-20s %10.1f %6.2f %11.1f %6.2f %10.0f %6.2f %10.4f %8.4f\n", variants[v].name,
               r->peak_step_bytes / 1e6, ratio(r->peak_step_bytes, b->peak_step_bytes),
               r->activation_bytes / 1e6, ratio(r->activation_bytes, b->activation_bytes),
               r->train_samples_per_s, ratio(r->train_samples_per_s, b->train_samples_per_s),
               r->train_loss, r->test_acc);
    }
    printf("step MB: peak memory above what was held before training (parameters, optimizer state\n"
           "and data are excluded); activ. MB: bytes a forward holds for its backward.\n");
}

int cli_cmd_compare(int argc, char **argv)
{
    const char *recipe = NULL, *data_dir = NULL, *report = NULL, *device_name = "cpu";
    int64_t steps = 200, batch = 0;
    int threads = 0;
    bool tf32 = false;
    const cmd_opt opts[] = {
        {"steps", CMD_OPT_INT64, &steps, "N", "optimizer steps per technique (default 200)",
         .range = CMD_RANGE(1, INT_MAX)},
        {"batch", CMD_OPT_INT64, &batch, "N", "samples per optimizer step (default: the recipe's)",
         .range = CMD_RANGE(4, INT_MAX)},
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads", .range = CMD_RANGE(1, 4096)},
        {"data", CMD_OPT_STRING, &data_dir, "DIR", .help = CMD_DATA_HELP},
        {"report", CMD_OPT_STRING, &report, "FILE.html",
         .help = "also write the results as a page of charts"},
        {"device", CMD_OPT_CHOICE, &device_name, NULL, "where to train (default cpu)",
         .choices = "cpu|cuda"},
        {"tf32", CMD_OPT_FLAG, &tf32, NULL,
         .help = "f32 matrix products on TF32 tensor cores (cuda; off by default)"},
        {0}};
    const cmd_spec spec = {
        .command = "ember compare", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "Trains the recipe with each technique off and on from the same seed and prints "
                 "step memory,\nactivation memory, samples/s, final loss and test accuracy.",
        .more_help = cmd_list_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, false, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    em_device device;
    int bad_device = cmd_device(spec.command, device_name, tf32, &device);
    if (bad_device)
        return bad_device;
    if (!batch)
        batch = rc->batch;
    if (threads)
        omp_set_num_threads(threads);
    char title[128];
    snprintf(title, sizeof title, "ember compare %s", rc->name);
    cmd_report *page = report ? cmd_report_open(report, title) : NULL;
    if (report && !page) { /* before any work */
        fprintf(stderr, "ember compare: --report: %s\n", em_error());
        return 2;
    }
    recipe_result res[N_VARIANTS];
    loss_log logs[N_VARIANTS] = {0};
    em_status st = train_variants(rc, data_dir, device, steps, batch, res, logs);
    if (page && st == EM_OK)
        st = write_report(page, rc, steps, batch, res, logs);
    else if (page)
        cmd_report_abort(page);
    for (int v = 0; v < N_VARIANTS; v++)
        free(logs[v].loss);
    if (st != EM_OK) {
        fprintf(stderr, "ember compare: %s\n", em_error());
        return 1;
    }
    print_table(rc, device, steps, batch, res);
    return 0;
}
