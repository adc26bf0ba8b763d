/* `ember bench train`'s output: the samples/s table next to PyTorch, the table of FLOPs, GEMM
 * bound and ember train's rate, the report's bars and the JSON object of the same figures. */
#include <jansson.h>
#include <stdio.h>

#include "bench/bench_train.h"

void bench_train_row(const char *name, double e, double t, double goal, double team)
{
    char torch[32] = "-", ratio[16] = "-", aim[16] = "-";
    if (t > 0) {
        snprintf(torch, sizeof torch, "%.0f", t);
        snprintf(ratio, sizeof ratio, "%.2fx", e / t);
    }
    if (goal > 0)
        snprintf(aim, sizeof aim, "%.1fx", goal);
    printf("%-12s %16.0f %16s %8s %6s %5.1f\n", name, e, torch, ratio, aim, team);
}

static double gflops(const bench_case_result *c)
{
    return c->flops * c->step * 1e-9;
}

/* "-" for a figure that was not measured (0) */
static const char *figure(char *buf, size_t n, const char *fmt, double v)
{
    if (v > 0)
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "-");
    return buf;
}

/* part / whole as a whole percentage, or "-" */
static const char *percent(char *buf, size_t n, double part, double whole)
{
    return figure(buf, n, "%.0f%%", whole > 0 ? 100 * part / whole : 0);
}

void bench_train_print(const bench_run_info *info, const bench_case_result *c, int n)
{
    printf("\nember bench train on %s (%s), autocast %s: %d threads; per round the median step "
           "after warm-up, then the median of %d rounds\n", info->device, info->about,
           info->amp, info->threads, info->rounds);
    printf("beside %s\n", info->torch ? info->torch : "no PyTorch (its half did not run)");
    if (info->cuda_graph)
        printf("ember's steps replayed from a CUDA graph (ember train's with --cuda-graph), "
               "PyTorch's under torch.compile(mode=\"reduce-overhead\")\n");
    if (n == 0)
        return;
    printf("%-12s %16s %16s %8s %6s %5s\n", "case", "ember samples/s", "torch samples/s",
           "ratio", "goal", "team");
    for (int i = 0; i < n; i++)
        bench_train_row(c[i].name, c[i].step, c[i].torch, c[i].goal, c[i].team);
    printf("\nFLOPs: the Linear and Conv products of a step exactly (2 per multiply-add forward, "
           "weight gradient,\ninput gradient but the first layer's); bound: the same products "
           "over the whole batch on %d threads,\neach the faster of OpenBLAS's threads and "
           "ember's gemm (Winograd convolutions multiply less than\ncounted, so the CNN may pass "
           "it), and all through OpenBLAS's threads alone; train: ember train's\nloop (loader, "
           "%d workers, same SGD), the median of as many iterations as steps timed, after the\n"
           "same warm-up\n", info->threads, info->train_workers);
    printf("%-10s %12s %13s %13s %10s %16s %13s %15s %10s\n", "case", "MFLOP/sample",
           "ember GFLOP/s", "bound GFLOP/s", "% of bound", "OpenBLAS GFLOP/s", "% of OpenBLAS",
           "train samples/s", "train/step");
    for (int i = 0; i < n; i++) {
        char bound[32], pct[32], openblas[32], openblas_pct[32], train[32], ratio[32];
        printf("%-10s %12.2f %13.1f %13s %10s %16s %13s %15s %10s\n", c[i].name,
               c[i].flops * 1e-6, gflops(&c[i]),
               figure(bound, sizeof bound, "%.1f", c[i].bound_gflops),
               percent(pct, sizeof pct, gflops(&c[i]), c[i].bound_gflops),
               figure(openblas, sizeof openblas, "%.1f", c[i].openblas_gflops),
               percent(openblas_pct, sizeof openblas_pct, gflops(&c[i]), c[i].openblas_gflops),
               figure(train, sizeof train, "%.0f", c[i].train),
               figure(ratio, sizeof ratio, "%.2f", c[i].step > 0 ? c[i].train / c[i].step : 0));
    }
}

void bench_train_chart(cmd_report *r, const char *title, const char *unit, const char **names,
                          int n, const double *ember, const double *torch)
{
    const char *libs[] = {"ember", "PyTorch"};
    double values[2 * BENCH_MAX_CASES], ratio[2 * BENCH_MAX_CASES];
    for (int i = 0; i < n; i++) {
        values[2 * i] = ember[i];
        values[2 * i + 1] = torch[i];
        ratio[2 * i] = torch[i] > 0 ? ember[i] / torch[i] : 0;
        ratio[2 * i + 1] = 0;
    }
    cmd_report_bar_chart(r, &(cmd_report_bars){
        .title = title, .unit = unit, .ratio_of = "PyTorch", .groups = names, .n_groups = n,
        .series = libs, .n_series = 2, .values = values, .ratio = ratio});
}

/* obj[key] = num / den rounded, or null when either was not measured */
static void set_ratio(json_t *obj, const char *key, double num, double den, int decimals)
{
    if (num > 0 && den > 0)
        em_json_set_real(obj, key, num / den, decimals);
    else
        json_object_set_new(obj, key, json_null());
}

static json_t *case_json(const bench_case_result *c)
{
    json_t *j = json_pack("{s:s}", "case", c->name);
    em_json_set_real(j, "samples_per_s", c->step, 0);
    set_ratio(j, "torch_samples_per_s", c->torch, 1, 0);
    set_ratio(j, "ratio", c->step, c->torch, 3);
    em_json_set_real(j, "team", c->team, 2);
    em_json_set_real(j, "flops_per_sample", c->flops, 0);
    em_json_set_real(j, "gflops", gflops(c), 2);
    set_ratio(j, "gemm_bound_gflops", c->bound_gflops, 1, 2);
    set_ratio(j, "gemm_bound_pct", 100 * gflops(c), c->bound_gflops, 1);
    set_ratio(j, "openblas_bound_gflops", c->openblas_gflops, 1, 2);
    set_ratio(j, "openblas_bound_pct", 100 * gflops(c), c->openblas_gflops, 1);
    set_ratio(j, "train_samples_per_s", c->train, 1, 0);
    set_ratio(j, "train_vs_step", c->train, c->step, 3);
    return j;
}

em_status bench_train_json(const char *path, const bench_run_info *info,
                              const bench_case_result *c, int n, const bench_gpt_result *gpt,
                              int n_gpt)
{
    json_t *cases = json_array();
    for (int i = 0; cases && i < n; i++)
        json_array_append_new(cases, case_json(&c[i]));
    json_t *j = json_pack("{s:s, s:s, s:s?, s:s, s:i, s:i, s:i, s:b, s:o}", "device",
                          info->device, "about", info->about, "torch", info->torch, "amp",
                          info->amp, "threads", info->threads, "rounds", info->rounds,
                          "train_workers", info->train_workers, "cuda_graph", info->cuda_graph,
                          "cases", cases);
    for (int g = 0; j && g < n_gpt; g++) {
        json_t *o = json_object();
        em_json_set_real(o, "tokens_per_s", gpt[g].tokens, 0);
        set_ratio(o, "torch_tokens_per_s", gpt[g].torch, 1, 0);
        set_ratio(o, "ratio", gpt[g].tokens, gpt[g].torch, 3);
        em_json_set_real(o, "team", gpt[g].team, 2);
        json_object_set_new(j, gpt[g].name, o);
    }
    if (!j)
        return em_set_error(EM_ERR_MEMORY, "ember bench train: --json: out of memory");
    em_status st = em_json_save(path, j);
    json_decref(j);
    return st;
}
