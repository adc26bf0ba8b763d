/* `ember bench infer [RECIPE] --load FILE`: inference latency (mean, p50, p95, p99) and
 * throughput at batch 1 and 64 of the f32, int8 and structured-pruned variants of a saved
 * model, side by side in one run, with PyTorch's f32 and quantize_dynamic on the same weights
 * and onnxruntime's f32 and dynamic int8 on the ONNX file ember exports of it; with --report, as
 * a page of charts too. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recipes/run.h"
#include "cmd/report.h"
#include "cmd/cmd.h"
#include "bench/bench.h"


bench_latency bench_measure_latency(em_module *model, const em_tensor *x, int warmup, int iters)
{
    bench_latency r = {0};
    double *t = calloc((size_t)iters, sizeof *t);
    bool grad = em_set_grad_enabled(false), was = model->training;
    em_module_eval(model);
    for (int i = 0; t && i < warmup + iters; i++) {
        em_scope_begin();
        double t0 = bench_now_s();
        em_tensor *y = em_forward(model, x);
        double dt = bench_now_s() - t0;
        em_scope_end();
        if (!y) {
            free(t);
            t = NULL;
            break;
        }
        if (i >= warmup)
            t[i - warmup] = dt;
    }
    em_module_train(model, was);
    em_set_grad_enabled(grad);
    if (!t)
        return r;
    double sum = 0;
    for (int i = 0; i < iters; i++)
        sum += t[i];
    bench_sort_doubles(t, iters);
    r.mean_us = 1e6 * sum / iters;
    r.p50_us = 1e6 * t[iters / 2];
    r.p95_us = 1e6 * t[(int)(0.95 * (iters - 1))];
    r.p99_us = 1e6 * t[(int)(0.99 * (iters - 1))];
    r.samples_per_s = (double)em_size(x, 0) / (sum / iters);
    free(t);
    return r;
}

em_tensor *bench_test_batch(const em_dataset *ds, int64_t n)
{
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = n});
    em_batch b = {0};
    em_status st = dl ? em_loader_next(dl, &b) : em_error_status();
    em_loader_free(dl);
    if (st != EM_OK)
        return NULL;
    em_release(b.y);
    return b.x;
}

enum { VAR_F32, VAR_INT8, VAR_PRUNED, VAR_TORCH_F32, VAR_TORCH_INT8, VAR_ORT_F32, VAR_ORT_INT8,
       N_VARS };
static const char *var_names[N_VARS] = {"ember_f32",  "ember_int8", "ember_pruned", "torch_f32",
                                        "torch_int8", "ort_f32",    "ort_int8"};

typedef struct {
    bench_latency b1, b64;
    bool have, have_b1, have_b64;
} variant;

/* *kept becomes l where nothing was kept yet (*have false) or l's mean is lower. */
static void keep_better(bench_latency *kept, bool *have, const bench_latency *l)
{
    if (!*have || l->mean_us < kept->mean_us)
        *kept = *l;
    *have = true;
}

/* What the Python halves' lines go to: the variants, and whether this is the first round (the
 * lines that are not rows, versions and accuracy, are shown once). */
typedef struct {
    variant *v;
    bool first_round;
} python_rows;

/* One line of bench/bench_torch_infer.py or bench_ort_infer.py: "NAME bBATCH mean_us .. p50_us
 * .. ..."; lines that are not one of their rows (versions, accuracy, one row per quantized
 * engine) are shown as they are, in the first round. */
static void python_line(void *ctx, const char *line)
{
    python_rows *rows = ctx;
    variant *v = rows->v;
    char name[64];
    int batch;
    bench_latency l;
    if (sscanf(line, "%63s b%d mean_us %lf p50_us %lf p95_us %lf p99_us %lf samples_per_s %lf",
               name, &batch, &l.mean_us, &l.p50_us, &l.p95_us, &l.p99_us,
               &l.samples_per_s) != 7) {
        if (rows->first_round)
            printf("%s", line);
        return;
    }
    bool known = false;
    for (int i = VAR_TORCH_F32; i < N_VARS; i++)
        if (!strcmp(name, var_names[i])) {
            bool *have = batch == 1 ? &v[i].have_b1 : &v[i].have_b64;
            keep_better(batch == 1 ? &v[i].b1 : &v[i].b64, have, &l);
            v[i].have = known = true;
        }
    if (!known && rows->first_round)
        printf("%s", line);
}

/* Runs bench/bench_torch_infer.py on an f32 model file; keeps the better torch rows. */
static bool torch_half(const char *model_path, const char *args, python_rows *rows)
{
    char all[4096];
    snprintf(all, sizeof all, "--model %s %s", model_path, args);
    return bench_run_torch_script("bench_torch_infer.py", all, python_line, rows);
}

/* Exports the f32 model to ONNX (example x1) and runs bench/bench_ort_infer.py on it; keeps the
 * better onnxruntime rows. */
static bool ort_half(em_module *f32, const em_tensor *x1, const char *args, python_rows *rows)
{
    char path[] = "/tmp/ember_bench_inferXXXXXX.onnx";
    int fd = mkstemps(path, 5);
    if (fd < 0) {
        printf("onnxruntime half skipped: cannot create %s\n", path);
        return false;
    }
    close(fd);
    bool ok = em_onnx_export(f32, x1, path, (em_onnx_opts){0}) == EM_OK;
    if (!ok) {
        printf("onnxruntime half skipped: %s\n", em_error());
    } else {
        char all[4096];
        snprintf(all, sizeof all, "--model %s %s", path, args);
        ok = bench_run_ort_script("bench_ort_infer.py", all, python_line, rows);
    }
    unlink(path);
    return ok;
}

/* Ln-structured (L2) pruning of half of every hidden layer's neurons, then shrinking. */
static em_status prune_half(em_module *m)
{
    if (!m)
        return em_error_status();
    em_prune_target t[64];
    int n = em_prune_collect_targets(m, t, 64);
    for (int i = 0; i + 1 < n; i++) {
        em_status st = em_prune_ln_structured(t[i].module, "weight", 0.5, 2, 0);
        if (st != EM_OK)
            return st;
    }
    return em_prune_shrink(m) < 0 ? em_error_status() : EM_OK;
}

/* What variant i is compared with: the same library's f32 when it ran, else ember's. */
static const variant *base_of(const variant *v, int i)
{
    int f32 = i >= VAR_ORT_F32 ? VAR_ORT_F32 : i >= VAR_TORCH_F32 ? VAR_TORCH_F32 : VAR_F32;
    return &v[v[f32].have ? f32 : VAR_F32];
}

/* The latency percentiles at both batch sizes and the throughput at 64 of every variant that
 * ran, into r (closed). */
static em_status write_report(cmd_report *r, const char *note, const variant *v)
{
    const char *names[N_VARS], *pcts[] = {"p50", "p95", "p99"};
    double lat[2][N_VARS * 3], sps[N_VARS], sps_x[N_VARS];
    int n = 0;
    for (int i = 0; i < N_VARS; i++) {
        if (!v[i].have)
            continue;
        const variant *base = base_of(v, i);
        for (int b = 0; b < 2; b++) {
            const bench_latency *l = b ? &v[i].b64 : &v[i].b1;
            lat[b][3 * n] = l->p50_us;
            lat[b][3 * n + 1] = l->p95_us;
            lat[b][3 * n + 2] = l->p99_us;
        }
        names[n] = var_names[i];
        sps[n] = v[i].b64.samples_per_s;
        sps_x[n] = base->b64.samples_per_s > 0 ? sps[n] / base->b64.samples_per_s : 0;
        n++;
    }
    cmd_report_note(r, note);
    cmd_report_heading(r, "Latency");
    for (int b = 0; b < 2; b++)
        cmd_report_bar_chart(r, &(cmd_report_bars){
            .title = b ? "latency of a batch of 64 (percentiles of the timed calls)"
                       : "latency of one sample (percentiles of the timed calls)",
            .unit = "us", .groups = names, .n_groups = n, .series = pcts, .n_series = 3,
            .values = lat[b]});
    cmd_report_heading(r, "Throughput");
    cmd_report_bar_chart(r, &(cmd_report_bars){
        .title = "samples/s at batch 64 (ratio to the same library's f32)", .unit = "samples/s",
        .ratio_of = "f32", .groups = names, .n_groups = n, .n_series = 1, .values = sps,
        .ratio = sps_x});
    return cmd_report_close(r);
}

static void print_row(const char *name, int batch, const bench_latency *l,
                      const bench_latency *base)
{
    printf("%-13s %5d %10.1f %10.1f %10.1f %10.1f %12.0f %7.2fx\n", name, batch, l->mean_us,
           l->p50_us, l->p95_us, l->p99_us, l->samples_per_s,
           l->p50_us > 0 ? base->p50_us / l->p50_us : 0);
}

/* The three ember variants of the model in load (the pruned one from pruned when given, else
 * pruned here; rc: the RECIPE operand, or NULL) and the f32 model written to f32_path for
 * PyTorch's half (*made: the file exists). */
static em_status prepare_models(const recipe_spec *rc, const char *load, const char *pruned,
                                recipe_model m[3], char *f32_path, bool *made)
{
    em_status st = EM_OK;
    for (int i = 0; i < 3 && st == EM_OK; i++)
        st = recipe_model_load(i == VAR_PRUNED && pruned ? pruned : load, rc, &m[i]);
    if (st == EM_OK)
        st = em_quantize_dynamic_(m[VAR_INT8].model, (em_quantize_opts){0});
    if (st == EM_OK && !pruned)
        st = prune_half(m[VAR_PRUNED].model);
    if (st != EM_OK)
        return st;
    int fd = mkstemp(f32_path);
    if (fd < 0)
        return em_set_error(EM_ERR_IO, "ember bench infer: cannot create %s", f32_path);
    close(fd);
    *made = true;
    return em_module_save(m[VAR_F32].model, f32_path, NULL, 0);
}

/* Latencies of the ember variants at batch 1 (x1) and 64 (x64): two runs, interleaved so that
 * a busy neighbour slows every variant alike; the better of these and what v holds is kept. */
static void measure(const recipe_model m[3], const em_tensor *x1, const em_tensor *x64,
                    int iters, variant *v)
{
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 3; i++) {
            bench_latency b1 = bench_measure_latency(m[i].model, x1, 100, iters / 2);
            bench_latency b64 = bench_measure_latency(m[i].model, x64, 10, iters / 20 + 10);
            keep_better(&v[i].b1, &v[i].have_b1, &b1);
            keep_better(&v[i].b64, &v[i].have_b64, &b64);
            v[i].have = true;
        }
}

/* "ember_int8 vs torch_int8, p50 speed-up: batch 1 1.55x, ..." where both ran. */
static void print_versus(const variant *v, int ember, int other)
{
    if (v[ember].have && v[other].have)
        printf("%s vs %s, p50 speed-up (above 1: ember is faster): batch 1 %.2fx, batch 64 "
               "%.2fx\n",
               var_names[ember], var_names[other], v[other].b1.p50_us / v[ember].b1.p50_us,
               v[other].b64.p50_us / v[ember].b64.p50_us);
}

/* How the figures were taken, for the table's heading and the report's note. */
typedef struct {
    int threads, iters, rounds;
} protocol;

static void describe(const protocol *p, char *out, size_t size)
{
    snprintf(out, size, "%d threads; %d rounds, each ember's variants, then PyTorch's and "
             "onnxruntime's in a process of their own; per variant the best of its rounds' two "
             "interleaved runs of %d (batch 1) / %d (batch 64) timed calls after warm-up",
             p->threads, p->rounds, p->iters / 2, p->iters / 20 + 10);
}

/* The products of a batch of 64 at ember's large-product rate, measured now: what no variant's
 * products can be expected to beat, beside the f32 and int8 rows (the int8 model's Linear
 * products at the int8 rate, the rest at f32's). */
static void print_ceiling(const recipe_model *f32, const variant *v)
{
    em_matmul_layer layers[64];
    em_shape sample = f32->input; /* one sample, no batch axis */
    int n = em_module_matmul_layers(f32->model, sample, layers, 64);
    if (n < 1 || n > 64) /* not counted, or more layers than kept */
        return;
    double macs = 0, linear_macs = 0; /* the int8 model quantizes the Linear layers */
    for (int i = 0; i < n; i++) {
        macs += em_matmul_macs(&layers[i]) * 64;
        if (!strcmp(layers[i].layer->type->type_name, "Linear"))
            linear_macs += em_matmul_macs(&layers[i]) * 64;
    }
    bench_product_rate rate = bench_measure_product_rate();
    if (rate.f32_gflops <= 0 || rate.int8_gops <= 0)
        return;
    const double f32_us = 2 * macs / rate.f32_gflops * 1e-3;
    const double int8_us = 2 * ((macs - linear_macs) / rate.f32_gflops +
                                linear_macs / rate.int8_gops) * 1e-3;
    printf("ceiling at batch 64: %.1fM multiply-adds; ember's 1024x1024x1024 products run now at "
           "f32 %.0f GFLOP/s, int8 %.0f GOP/s,\n  so a batch's products alone take f32 %.0f us, "
           "int8 %.0f us (ember's p50 runs at %.0f%% and %.0f%% of that rate)\n",
           macs * 1e-6, rate.f32_gflops, rate.int8_gops, f32_us, int8_us,
           100 * f32_us / v[VAR_F32].b64.p50_us, 100 * int8_us / v[VAR_INT8].b64.p50_us);
    if (linear_macs < macs)
        printf("  (convolutions may run as Winograd products, which multiply less than counted, "
               "and pass it)\n");
}

static void print_table(const protocol *p, const recipe_model m[3], const variant *v)
{
    char how[512];
    describe(p, how, sizeof how);
    printf("\nember bench infer %s: %s\n", cmd_model_name(&m[0]), how);
    printf("sizes: f32 %lld B, int8 %lld B, pruned %lld B (%lld params)\n",
           (long long)em_module_nbytes(m[VAR_F32].model),
           (long long)em_module_nbytes(m[VAR_INT8].model),
           (long long)em_module_nbytes(m[VAR_PRUNED].model),
           (long long)em_module_num_params(m[VAR_PRUNED].model));
    printf("%-13s %5s %10s %10s %10s %10s %12s %8s\n", "variant", "batch", "mean_us", "p50_us",
           "p95_us", "p99_us", "samples/s", "vs f32");
    printf("(samples/s = batch / mean; 'vs f32' = the same library's f32 p50 / this p50, "
           "the median being robust to a busy machine)\n");
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < N_VARS; i++) {
            if (!v[i].have)
                continue;
            const variant *base = base_of(v, i);
            print_row(var_names[i], b ? 64 : 1, b ? &v[i].b64 : &v[i].b1,
                      b ? &base->b64 : &base->b1);
        }
    print_ceiling(&m[VAR_F32], v);
    print_versus(v, VAR_INT8, VAR_TORCH_INT8);
    print_versus(v, VAR_F32, VAR_ORT_F32);
    print_versus(v, VAR_INT8, VAR_ORT_INT8);
    printf("beside %s\n", v[VAR_TORCH_F32].have ? bench_torch_about() : "no PyTorch");
}

/* Which halves run beside ember's. */
typedef struct {
    bool torch, ort;
} halves;

/* Measures, prints and writes the report; the exit status. */
static int run(const recipe_model m[3], const char *f32_path, const char *data_dir,
               const protocol *p, halves h, cmd_report *page)
{
    em_dataset *test = recipe_model_images(&m[0], data_dir, false);
    em_tensor *x64 = test ? bench_test_batch(test, 64) : NULL;
    em_tensor *x1 = x64 ? em_narrow(x64, 0, 0, 1) : NULL;
    em_dataset_free(test);
    if (!x1) {
        em_release(x64);
        fprintf(stderr, "ember bench infer: %s\n", em_error());
        if (page)
            cmd_report_abort(page);
        return 1;
    }
    variant v[N_VARS] = {0};
    char args[2048]; /* what both Python halves take after --model */
    snprintf(args, sizeof args, "--threads %d --iters %d%s%s", p->threads, p->iters,
             data_dir ? " --data " : "", data_dir ? data_dir : "");
    /* Rounds: a Python half's threads are placed as its process starts, and one process can be
     * slow throughout (onnxruntime on 2 cores: one run in four at about half speed, at both
     * batch sizes and in both variants); the best of the rounds keeps such a process from
     * deciding the comparison, for every library alike. */
    for (int round = 0; round < p->rounds; round++) {
        python_rows rows = {v, round == 0};
        measure(m, x1, x64, p->iters, v);
        if (h.torch && !torch_half(f32_path, args, &rows)) {
            printf("PyTorch half did not complete\n");
            h.torch = false;
        }
        if (h.ort && !ort_half(m[VAR_F32].model, x1, args, &rows)) {
            printf("onnxruntime half did not complete\n");
            h.ort = false;
        }
    }
    em_release(x1);
    em_release(x64);
    print_table(p, m, v);
    if (!page)
        return 0;
    char note[520];
    describe(p, note, sizeof note - 1);
    strcat(note, ".");
    if (write_report(page, note, v) != EM_OK) {
        fprintf(stderr, "ember bench infer: --report: %s\n", em_error());
        return 1;
    }
    return 0;
}

int bench_infer(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *pruned = NULL, *data_dir = NULL, *report = NULL;
    int threads = 2, iters = 1000, rounds = 2;
    bool no_torch = false, no_ort = false;
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &load, "FILE", "the f32 model file or checkpoint",
         .required = true},
        {"pruned", CMD_OPT_STRING, &pruned, "FILE",
         .help = "a pruned model (default: 50% L2 of --load)"},
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads (default 2)",
         .range = CMD_RANGE(1, 4096)},
        {"iters", CMD_OPT_INT, &iters, "N", "timed batch-1 calls (default 1000)",
         .range = CMD_RANGE(20, 100000000)},
        {"rounds", CMD_OPT_INT, &rounds, "N",
         "rounds of ember's runs and each Python half's process (default 2)",
         .range = CMD_RANGE(1, 100)},
        {"data", CMD_OPT_STRING, &data_dir, "DIR", .help = CMD_DATA_HELP},
        {"no-torch", CMD_OPT_FLAG, &no_torch, NULL, .help = "leave out the PyTorch half"},
        {"no-ort", CMD_OPT_FLAG, &no_ort, NULL, .help = "leave out the onnxruntime half"},
        {"report", CMD_OPT_STRING, &report, "FILE.html",
         .help = "also write the results as a page of charts"},
        {0}};
    const cmd_spec spec = {
        .command = "ember bench infer", .operands = "RECIPE", .n_operands = 1,
        .operand = &recipe, .operands_optional = true,
        .about = "Inference latency and throughput at batch 1 and 64 of the f32, int8 and pruned "
                 "models, next to\nPyTorch's and onnxruntime's. RECIPE: only for a file of "
                 "weights alone.",
        .more_help = cmd_list_image_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, true, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    char title[128];
    snprintf(title, sizeof title, "ember bench infer %s", rc ? rc->name : load);
    cmd_report *page = report ? cmd_report_open(report, title) : NULL;
    if (report && !page) { /* before any work */
        fprintf(stderr, "ember bench infer: --report: %s\n", em_error());
        return 2;
    }
    omp_set_num_threads(threads);
    recipe_model m[3] = {0};
    char f32_path[] = "/tmp/ember_bench_inferXXXXXX";
    bool made = false;
    int status;
    if (prepare_models(rc, load, pruned, m, f32_path, &made) == EM_OK) {
        status = run(m, f32_path, data_dir, &(protocol){threads, iters, rounds},
                     (halves){.torch = !no_torch, .ort = !no_ort}, page);
    } else {
        fprintf(stderr, "ember bench infer: %s\n", em_error());
        if (page)
            cmd_report_abort(page);
        status = 1;
    }
    if (made)
        unlink(f32_path);
    for (int i = 0; i < 3; i++)
        recipe_model_free(&m[i]);
    return status;
}
