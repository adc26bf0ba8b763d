/* `ember bench train`: training samples/s of the reference recipes, ember and PyTorch side by
 * side in one run (same models, SGD momentum 0.9, random batches, median step time after warm-up),
 * on the CPU or a GPU, in f32 or under f16/bf16 autocast; per recipe also its FLOPs per sample,
 * the share of the GEMM bound the steps reach and the samples/s of `ember train`'s whole loop;
 * and the gpt recipe's tokens/s on the CPU (its own step: AdamW, clipping, its windows);
 * with --cuda-graph, ember's steps replayed from a CUDA graph beside PyTorch's under
 * torch.compile(mode="reduce-overhead"); with --report, as charts too, with --json, as one JSON
 * object. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "bench/bench_train.h"


typedef struct {
    const char *name; /* "mlp_b64" */
    const char *recipe;
    int64_t batch;
    double goal; /* the ratio to PyTorch we aim for */
} bench_case;

static const bench_case cpu_cases[] = {
    {"mlp_b64", "mlp", 64, 1.7},
    {"mlp_b256", "mlp", 256, 1.5},
    {"cnn_b64", "cnn", 64, 2.0},
};
/* a GPU also at batches that fill it */
static const bench_case gpu_cases[] = {
    {"mlp_b64", "mlp", 64, 1.0},   {"mlp_b1024", "mlp", 1024, 1.0},
    {"cnn_b64", "cnn", 64, 1.0},   {"cnn_b512", "cnn", 512, 1.0},
};
#define BENCH_MAX_CASES 4

/* The gpt recipe's model trained on windows of `block` characters, `batch` at a time. */
typedef struct {
    const char *name;
    int batch, block;
    double goal; /* the ratio to PyTorch we aim for */
} gpt_case;
static const gpt_case gpt_cases[BENCH_GPT_CASES] = {
    {"gpt_b32", 32, 128, 1.5}, {"gpt_b8_t256", 8, 256, 1.3}, {"gpt_b64_t256", 64, 256, 1.3}};

/* What one run measures: the cases, where, in which precision, and how the steps run. */
typedef struct {
    bench_case cases[BENCH_MAX_CASES];
    int n_cases;
    gpt_case gpt[BENCH_GPT_CASES];
    int n_gpt;
    em_device device;
    em_dtype amp; /* EM_F32: autocast off */
    bool graph;   /* ember's steps replayed from a CUDA graph (em_step_graph) */
} bench_setup;
#define MAX_ROUNDS 9

/* The whole training split as one batch: x (60000, 784), y (60000). */
static em_status load_all(const char *data_dir, em_batch *all)
{
    em_dataset *ds = recipe_fashion_mnist(data_dir, true, EM_SHAPE(784));
    em_loader *dl = ds ? em_loader_new(ds, (em_loader_opts){.batch_size = em_dataset_len(ds)})
                       : NULL;
    em_status st = dl ? em_loader_next(dl, all) : em_error_status();
    em_loader_free(dl);
    em_dataset_free(ds);
    return st;
}

/* What one training step of the bench takes (bench_step). */
typedef struct {
    em_module *model;
    em_optim *opt;
    em_grad_scaler *scaler; /* under f16 autocast, else NULL */
    em_dtype amp;
    int64_t vocab; /* gpt: logits (B, T, V) are scored as (B * T, V); 0 for the classifiers */
    double clip;   /* clip the grads' 2-norm to this on the device; 0: no clipping */
} bench_step_ctx;

/* One training step on in = {x, y} (the step graph's step too): forward and loss under
 * autocast, backward (scaled with the scaler), clipping, the update; the loss out. */
static em_status bench_step(void *ctx, em_tensor *const *in, em_tensor **out)
{
    const bench_step_ctx *c = ctx;
    if (c->amp != EM_F32 && em_autocast_begin(c->amp) != EM_OK)
        return em_error_status();
    em_tensor *logits = em_forward(c->model, in[0]);
    if (c->vocab)
        logits = em_reshape(logits, EM_SHAPE(-1, c->vocab)); // (B * T, V)
    em_tensor *loss = em_cross_entropy(logits, in[1], (em_cross_entropy_opts){0});
    if (c->amp != EM_F32)
        em_autocast_end();
    em_status st = loss ? em_backward(c->scaler ? em_grad_scaler_scale(c->scaler, loss) : loss)
                        : em_error_status();
    if (st == EM_OK && c->clip > 0 && c->scaler)
        st = em_grad_scaler_unscale(c->scaler, c->opt);
    if (st == EM_OK && c->clip > 0)
        st = em_clip_grad_norm_optim_device(c->opt, c->clip, 2.0, NULL);
    if (st == EM_OK && c->scaler) {
        st = em_grad_scaler_step(c->scaler, c->opt, NULL);
        st = st == EM_OK ? em_grad_scaler_update(c->scaler) : st;
    } else if (st == EM_OK) {
        st = em_optim_step(c->opt);
    }
    em_optim_zero_grad(c->opt);
    *out = loss;
    return st;
}

/* One step of c on x and y (through g when given) and the device's queued work waited for;
 * false after printing why it failed. */
static bool step_done(const char *name, bench_step_ctx *c, em_step_graph *g, em_device dev,
                      em_tensor *x, em_tensor *y)
{
    em_tensor *loss = NULL;
    em_status st = !x || !y ? em_error_status()
                   : g      ? em_step_graph_run(g, (em_tensor *[]){x, y}, 2, &loss)
                            : bench_step(c, (em_tensor *[]){x, y}, &loss);
    if (st == EM_OK)
        st = em_device_synchronize(dev);
    if (st != EM_OK)
        fprintf(stderr, "ember bench train: %s: %s\n", name, em_error());
    return st == EM_OK;
}

/* Median samples/s of `steps` timed training steps after 10 warm-up steps; a device's queued
 * work is waited for inside each timed step. */
static double ember_samples_per_s(const bench_setup *b, const bench_case *c, const em_batch *all,
                                  int steps, double *team)
{
    const recipe_spec *rc = recipe_find(c->recipe);
    em_manual_seed(0);
    em_module *model = rc->build(NULL);
    if (model && em_module_to(model, b->device) != EM_OK) {
        em_module_free(model);
        model = NULL;
    }
    bench_step_ctx ctx = {
        .model = model, .amp = b->amp,
        .opt = model ? em_sgd(model, (em_sgd_opts){.lr = 0.05, .momentum = 0.9}) : NULL,
        .scaler = b->amp == EM_F16 ? em_grad_scaler_new((em_grad_scaler_opts){0}) : NULL};
    em_step_graph *g = b->graph && ctx.opt ? em_step_graph_new(b->device, bench_step, &ctx,
                                                               (em_step_graph_opts){0})
                                           : NULL;
    double *times = calloc((size_t)steps, sizeof *times);
    double result = -1;
    bool ok = ctx.opt && times && (!b->graph || g) && (b->amp != EM_F16 || ctx.scaler);
    for (int i = 0; ok && i < steps + 10; i++) {
        em_scope_begin();
        em_tensor *idx = em_randint(EM_SHAPE(c->batch), EM_I64, 0, em_size(all->x, 0), NULL);
        if (b->device != EM_CPU)
            idx = em_to_device(idx, b->device);
        em_tensor *x = em_index_select(all->x, 0, idx); // (B, 784)
        if (rc->sample.ndim != 1)
            x = em_reshape(x, EM_SHAPE(c->batch, 1, 28, 28));
        em_tensor *y = em_index_select(all->y, 0, idx); // (B)
        ok = em_device_synchronize(b->device) == EM_OK;
        if (i >= 10)
            *team += (double)em_get_active_threads() / steps;
        double t = bench_now_s();
        ok = ok && step_done(c->name, &ctx, g, b->device, x, y);
        if (i >= 10)
            times[i - 10] = bench_now_s() - t;
        em_scope_end();
    }
    if (ok) {
        bench_sort_doubles(times, steps);
        result = (double)c->batch / times[steps / 2];
    } else if (!ctx.opt || !times || (b->graph && !g)) {
        fprintf(stderr, "ember bench train: %s: %s\n", c->name, em_error());
    }
    free(times);
    em_step_graph_free(g);
    em_grad_scaler_free(ctx.scaler);
    em_optim_free(ctx.opt);
    em_module_free(model);
    return result;
}

#define GPT_WARMUP 3

/* Median tokens/s of `steps` gpt recipe training steps on dev (forward and loss under autocast
 * to amp unless it is f32, backward, the grad scaler's unscaling for f16, clipping at 1, AdamW)
 * of case g on the windows bench/gpt_torch.py's bench takes, after GPT_WARMUP steps (5 with a
 * graph: three warm it up, one captures it); a step's time includes copying its batch to dev
 * and waiting for dev's queued work. */
static double ember_gpt_tokens_per_s(const recipe_gpt_text *text, const gpt_case *g, int steps,
                                     const bench_setup *b, double *team)
{
    const int64_t batch = g->batch;
    const int warmup = b->graph ? 5 : GPT_WARMUP;
    em_gpt_settings c = recipe_gpt_settings(text->vocab.size);
    c.block_size = g->block;
    int64_t t = c.block_size, n = (int64_t)(steps + warmup) * batch;
    em_manual_seed(0);
    em_module *model = em_gpt(c);
    if (model && em_module_to(model, b->device) != EM_OK) {
        em_module_free(model);
        model = NULL;
    }
    bench_step_ctx ctx = {
        .model = model, .amp = b->amp, .vocab = c.vocab_size, .clip = recipe_gpt.clip,
        .opt = model ? recipe_optimizer(&recipe_gpt, "adamw", model, 1e-3, 0) : NULL,
        .scaler = b->amp == EM_F16 ? em_grad_scaler_new((em_grad_scaler_opts){0}) : NULL};
    em_step_graph *graph = b->graph && ctx.opt ? em_step_graph_new(b->device, bench_step, &ctx,
                                                                   (em_step_graph_opts){0})
                                               : NULL;
    em_sampler *s = em_random_sampler(text->n_train - t, (em_random_sampler_opts){
                                                             .replacement = true,
                                                             .num_samples = n});
    int64_t *starts = malloc((size_t)n * sizeof *starts), *xy = malloc(sizeof(int64_t) * 2 *
                                                                        batch * t);
    double *times = calloc((size_t)steps, sizeof *times), result = -1;
    bool ok = ctx.opt && s && starts && xy && times && (b->amp != EM_F16 || ctx.scaler) &&
              (!b->graph || graph) && em_sampler_indices(s, 0, 0, starts) == EM_OK;
    if (!ok)
        fprintf(stderr, "ember bench train: gpt: %s\n", em_error());
    for (int i = 0; ok && i < steps + warmup; i++) {
        for (int64_t k = 0; k < batch; k++)
            for (int64_t j = 0; j < t; j++) {
                xy[k * t + j] = text->ids[starts[i * batch + k] + j];
                xy[(batch + k) * t + j] = text->ids[starts[i * batch + k] + j + 1];
            }
        em_scope_begin();
        ok = em_device_synchronize(b->device) == EM_OK;
        if (i >= warmup)
            *team += (double)em_get_active_threads() / steps;
        double t0 = bench_now_s(); /* the batch's copies to the device are part of the step */
        em_tensor *x = em_from_data(EM_SHAPE(batch, t), EM_I64, xy);            // (B, T)
        em_tensor *y = em_from_data(EM_SHAPE(batch * t), EM_I64, xy + batch * t); // (B * T)
        if (b->device != EM_CPU) {
            x = em_to_device(x, b->device);
            y = em_to_device(y, b->device);
        }
        ok = ok && step_done(g->name, &ctx, graph, b->device, x, y);
        if (i >= warmup)
            times[i - warmup] = bench_now_s() - t0;
        em_scope_end();
    }
    if (ok) {
        bench_sort_doubles(times, steps);
        result = (double)(batch * t) / times[steps / 2];
    }
    free(times);
    free(xy);
    free(starts);
    em_sampler_free(s);
    em_step_graph_free(graph);
    em_grad_scaler_free(ctx.scaler);
    em_optim_free(ctx.opt);
    em_module_free(model);
    return result;
}

/* The clock at each of `ember train`'s steps (an on_step callback). */
typedef struct {
    double *at; /* (n) */
    int n, seen;
} step_clock;

static void clock_step(void *ctx, const em_progress *p)
{
    (void)p;
    step_clock *c = ctx;
    if (c->seen < c->n)
        c->at[c->seen++] = bench_now_s();
}

/* Samples/s of `ember train`'s loop (cli/train_cmd.c) on case c: the recipe's data through
 * the loader with `workers` threads into em_trainer, with the steps' SGD (lr 0.05, momentum
 * 0.9) and the recipe's schedule, no evaluation; like the step rate, the median of `steps`
 * whole iterations (taking the batch, the step, freeing its tensors) after 10 warm-up ones. */
static double train_samples_per_s(const bench_setup *b, const bench_case *c,
                                  const char *data_dir, int workers, int steps)
{
    step_clock clk = {.at = calloc((size_t)steps + 11, sizeof(double)), .n = steps + 11};
    /* epochs enough for the steps even on a dataset of one batch (max_steps stops the run) */
    recipe_train_opts o = {.recipe = recipe_find(c->recipe), .data_dir = data_dir, .epochs = clk.n,
                       .batch = c->batch, .lr = 0.05, .momentum = 0.9, .optim = "sgd",
                       .workers = workers, .max_steps = clk.n,
                       .tech = {.amp = b->amp, .cuda_graph = b->graph},
                       .device = b->device, .skip_eval = true,
                       .callbacks = {.ctx = &clk, .on_step = clock_step}};
    recipe_result r;
    if (!clk.at || recipe_train(&o, &r) != EM_OK || clk.seen != clk.n) {
        fprintf(stderr, "ember bench train: %s: ember train: %s\n", c->name,
                clk.at ? em_error() : "out of memory");
        free(clk.at);
        return -1;
    }
    for (int i = 0; i < steps; i++) /* iteration i + 11 ran between the clocks of i+10, i+11 */
        clk.at[i] = clk.at[i + 11] - clk.at[i + 10];
    bench_sort_doubles(clk.at, steps);
    double sps = (double)c->batch / clk.at[steps / 2];
    free(clk.at);
    return sps;
}

/* "gpt_b32_t128 tokens_per_s N" of bench/gpt_torch.py into ctx (one double). */
static void torch_gpt_line(void *ctx, const char *line)
{
    if (sscanf(line, "gpt_b%*d_t%*d tokens_per_s %lf", (double *)ctx) != 1)
        printf("%s", line);
}

/* What a line of bench/bench_torch.py is read into. */
typedef struct {
    const bench_setup *b;
    double sps[BENCH_MAX_CASES];
} torch_round;

/* One line of bench/bench_torch.py: "CASE samples_per_s N". */
static void torch_line(void *ctx, const char *line)
{
    torch_round *r = ctx;
    double sps;
    char name[64];
    if (sscanf(line, "%63s samples_per_s %lf", name, &sps) != 2) {
        printf("%s", line);
        return;
    }
    for (int i = 0; i < r->b->n_cases; i++)
        if (!strcmp(name, r->b->cases[i].name))
            r->sps[i] = sps;
}

static double median(double *v, int n)
{
    bench_sort_doubles(v, n);
    return v[n / 2];
}

#define MAX_LAYERS 16

/* What the rounds measure of one Fashion-MNIST case. */
typedef struct {
    double step[MAX_ROUNDS], torch[MAX_ROUNDS]; /* samples/s */
    double team;                                /* the threads the steps forked, on average */
    bench_gemm_bound bound[MAX_ROUNDS];         /* GEMM bounds in GFLOP/s (not on a GPU) */
    double train[MAX_ROUNDS];                   /* samples/s of ember train's loop */
    em_matmul_layer layers[MAX_LAYERS];         /* the model's products */
    int n_layers;
} case_rounds;

/* The products of case c's model, or false after saying why. */
static bool model_products(const bench_case *c, case_rounds *r)
{
    const recipe_spec *rc = recipe_find(c->recipe);
    em_module *model = rc->build(NULL);
    r->n_layers = model ? em_module_matmul_layers(model, rc->sample, r->layers, MAX_LAYERS) : -1;
    em_module_free(model);
    if (r->n_layers < 0 || r->n_layers > MAX_LAYERS) {
        fprintf(stderr, "ember bench train: %s: %s\n", c->name,
                r->n_layers < 0 ? em_error() : "more products than the bench holds");
        return false;
    }
    return true;
}

/* Timed steps of case c: a quarter of them for the CNN on the CPU, at least 10. */
static int case_steps(const bench_case *c, bool gpu, int steps)
{
    int n = !strcmp(c->recipe, "cnn") && !gpu ? steps / 4 : steps;
    return n < 10 ? 10 : n;
}

/* Each case's medians over the rounds into out. */
static void case_medians(const bench_setup *b, case_rounds *r, int rounds, bench_case_result *out)
{
    for (int i = 0; i < b->n_cases; i++) {
        double best[MAX_ROUNDS], openblas[MAX_ROUNDS];
        for (int k = 0; k < rounds; k++) {
            best[k] = r[i].bound[k].best;
            openblas[k] = r[i].bound[k].openblas;
        }
        out[i] = (bench_case_result){
            .name = b->cases[i].name, .goal = b->amp == EM_F32 ? b->cases[i].goal : 0,
            .team = r[i].team / rounds,
            .step = median(r[i].step, rounds), .torch = median(r[i].torch, rounds),
            .flops = em_matmul_train_flops(r[i].layers, r[i].n_layers),
            .bound_gflops = median(best, rounds), .openblas_gflops = median(openblas, rounds),
            .train = median(r[i].train, rounds)};
    }
}

/* The command line of `ember bench train`. */
typedef struct {
    int threads, steps, rounds, gpt_steps;
    const char *data_dir, *gpt_data_dir, *device, *amp, *only, *cases, *report, *json;
    bool cuda_graph;
} train_bench_args;

/* Fills a from argv; CMD_ARGS_RUN to go on, else the exit status. */
static int parse_args(int argc, char **argv, train_bench_args *a)
{
    *a = (train_bench_args){.threads = 2, .steps = 200, .rounds = 3, .gpt_steps = 10,
                            .data_dir = RECIPE_FASHION_MNIST_DIR,
                            .gpt_data_dir = RECIPE_FORTUNES_DIR, .device = "cpu", .amp = "off"};
    const cmd_opt opts[] = {
        {"threads", CMD_OPT_INT, &a->threads, "N", "OpenMP threads (default 2)",
         .range = CMD_RANGE(1, 4096)},
        {"steps", CMD_OPT_INT, &a->steps, "N", "timed steps per case (default 200)",
         .range = CMD_RANGE(10, 1000000)},
        {"gpt-steps", CMD_OPT_INT, &a->gpt_steps, "N", "timed steps of the gpt case (default 10)",
         .range = CMD_RANGE(1, 1000000)},
        {"rounds", CMD_OPT_INT, &a->rounds, "N", "rounds alternating ember and PyTorch (default 3)",
         .range = CMD_RANGE(1, MAX_ROUNDS)},
        {"data", CMD_OPT_STRING, &a->data_dir, "DIR",
         .help = "Fashion-MNIST's IDX files; by default in\n" RECIPE_FASHION_MNIST_DIR
                 " (Debian's fashion-mnist)"},
        {"gpt-data", CMD_OPT_STRING, &a->gpt_data_dir, "DIR",
         .help = "gpt's text, the fortunes; by default in\n" RECIPE_FORTUNES_DIR
                 " (Debian's fortunes)"},
        {"device", CMD_OPT_CHOICE, &a->device, .choices = "cpu|cuda",
         .help = "where both frameworks train (default cpu)"},
        {"amp", CMD_OPT_CHOICE, &a->amp, .choices = "off|f16|bf16",
         .help = "autocast dtype (f16 with a grad scaler; default off)"},
        {"only", CMD_OPT_CHOICE, &a->only, NULL, "run only the Fashion-MNIST cases or only gpt",
         .choices = "fashion|gpt"},
        {"cases", CMD_OPT_STRING, &a->cases, "LIST",
         .help = "run only these cases, comma-separated (mlp_b64,gpt_b32)"},
        {"cuda-graph", CMD_OPT_FLAG, &a->cuda_graph, NULL,
         .help = "ember's steps replayed from a CUDA graph, PyTorch's under\n"
                 "torch.compile(mode=\"reduce-overhead\") (cuda)"},
        {"report", CMD_OPT_STRING, &a->report, "FILE.html",
         .help = "also write the results as a chart"},
        {"json", CMD_OPT_STRING, &a->json, "FILE", .help = "also write the results as JSON"},
        {0}};
    const cmd_spec spec = {
        .command = "ember bench train", .opts = opts,
        .about = "Training samples/s of the recipes (tokens/s of gpt), ember and PyTorch side "
                 "by side; FLOPs per\nsample, the share of the GEMM bound and ember train's "
                 "samples/s beside them."};
    return cmd_args_parse(&spec, argc, argv);
}

/* What a run measures: per case and round, and the gpt case's tokens/s per round. */
typedef struct {
    case_rounds per_case[BENCH_MAX_CASES];
    double ember_gpt[BENCH_GPT_CASES][MAX_ROUNDS], torch_gpt[BENCH_GPT_CASES][MAX_ROUNDS];
    double gpt_team[BENCH_GPT_CASES]; /* the threads the gpt steps forked, summed over rounds */
    bool torch; /* every PyTorch script ran */
} train_bench_rounds;

/* The rounds, alternating ember and PyTorch so that both see the same machine. */
static void run_rounds(const train_bench_args *a, const bench_setup *b, bool fashion, bool gpt,
                       const em_batch *all, const recipe_gpt_text *text, train_bench_rounds *m)
{
    bool gpu = b->device == EM_CUDA;
    char args[1400], names[256] = "";
    for (int i = 0; i < b->n_cases; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "",
                 b->cases[i].name);
    snprintf(args, sizeof args, "--threads %d --steps %d --data %s --device %s --amp %s "
             "--cases %s%s", a->threads, a->steps, a->data_dir, a->device, a->amp, names,
             b->graph ? " --compile" : "");
    m->torch = true;
    for (int r = 0; r < a->rounds; r++) {
        for (int i = 0; fashion && i < b->n_cases; i++)
            m->per_case[i].step[r] = ember_samples_per_s(b, &b->cases[i], all,
                                                         case_steps(&b->cases[i], gpu, a->steps),
                                                         &m->per_case[i].team);
        torch_round round_torch = {.b = b};
        if (fashion)
            m->torch = m->torch &&
                       bench_run_torch_script("bench_torch.py", args, torch_line, &round_torch);
        for (int i = 0; fashion && i < b->n_cases; i++) {
            case_rounds *c = &m->per_case[i];
            c->torch[r] = round_torch.sps[i];
            if (!gpu)
                c->bound[r] = bench_gemm_bound_gflops(c->layers, c->n_layers, b->cases[i].batch,
                                                   a->threads, 20);
            c->train[r] = train_samples_per_s(b, &b->cases[i], a->data_dir,
                                              recipe_default_workers(b->device),
                                              case_steps(&b->cases[i], gpu, a->steps));
        }
        for (int g = 0; gpt && g < b->n_gpt; g++) {
            char gpt_args[1400];
            snprintf(gpt_args, sizeof gpt_args, "bench --threads %d --steps %d --batch %d "
                     "--block %d --amp %s --device %s --data %s%s", a->threads, a->gpt_steps,
                     b->gpt[g].batch, b->gpt[g].block, a->amp, a->device, a->gpt_data_dir,
                     b->graph ? " --compile" : "");
            m->ember_gpt[g][r] = ember_gpt_tokens_per_s(text, &b->gpt[g], a->gpt_steps, b,
                                                        &m->gpt_team[g]);
            m->torch = m->torch && bench_run_torch_script("gpt_torch.py", gpt_args, torch_gpt_line,
                                                       &m->torch_gpt[g][r]);
        }
    }
}

/* The report page's note and charts; false after saying why. */
static bool write_report(cmd_report *page, const train_bench_args *a, const char *about,
                         const bench_case_result *results, int n_cases,
                         const bench_gpt_result *gpt, int n_gpt)
{
    char note[512];
    snprintf(note, sizeof note, "%s (%s), autocast %s, %d threads; per round the median step "
             "after warm-up, then the median of %d rounds alternating ember and PyTorch.",
             a->device, about, a->amp, a->threads, a->rounds);
    cmd_report_note(page, note);
    const char *names[BENCH_MAX_CASES + BENCH_GPT_CASES];
    double ember_median[BENCH_MAX_CASES + BENCH_GPT_CASES];
    double torch_median[BENCH_MAX_CASES + BENCH_GPT_CASES];
    for (int i = 0; i < n_cases; i++) {
        names[i] = results[i].name;
        ember_median[i] = results[i].step;
        torch_median[i] = results[i].torch;
    }
    if (n_cases)
        bench_train_chart(page, "training samples/s (median of the rounds)", "samples/s",
                             names, n_cases, ember_median, torch_median);
    for (int g = 0; g < n_gpt; g++) {
        names[g] = gpt[g].name;
        ember_median[g] = gpt[g].tokens;
        torch_median[g] = gpt[g].torch;
    }
    if (n_gpt)
        bench_train_chart(page, "gpt training tokens/s (median of the rounds)", "tokens/s",
                             names, n_gpt, ember_median, torch_median);
    if (cmd_report_close(page) != EM_OK) {
        fprintf(stderr, "ember bench train: --report: %s\n", em_error());
        return false;
    }
    return true;
}

/* Prints the tables, writes the JSON and the report; the command's exit status. */
static int report_results(const train_bench_args *a, const bench_setup *b, bool fashion, bool gpt,
                          train_bench_rounds *m, cmd_report *page)
{
    char about[256];
    bench_run_info info = {.device = a->device, .amp = a->amp, .threads = a->threads,
                           .rounds = a->rounds,
                           .train_workers = recipe_default_workers(b->device),
                           .about = em_device_describe(b->device, about, sizeof about),
                           .torch = m->torch && *bench_torch_about() ? bench_torch_about() : NULL,
                           .cuda_graph = b->graph};
    bench_case_result results[BENCH_MAX_CASES] = {0};
    int n_cases = fashion ? b->n_cases : 0, n_gpt = gpt ? b->n_gpt : 0;
    case_medians(b, m->per_case, a->rounds, results);
    bench_train_print(&info, results, n_cases);
    bench_gpt_result gpt_results[BENCH_GPT_CASES];
    for (int g = 0; g < n_gpt; g++)
        gpt_results[g] = (bench_gpt_result){
            .name = b->gpt[g].name, .goal = b->amp == EM_F32 && !b->graph ? b->gpt[g].goal : 0,
            .tokens = median(m->ember_gpt[g], a->rounds),
            .torch = m->torch ? median(m->torch_gpt[g], a->rounds) : 0,
            .team = m->gpt_team[g] / a->rounds};
    if (n_gpt)
        printf("%-12s %16s %16s %8s %6s %5s\n", "", "ember tokens/s", "torch tokens/s", "", "",
               "team");
    for (int g = 0; g < n_gpt; g++)
        bench_train_row(gpt_results[g].name, gpt_results[g].tokens, gpt_results[g].torch,
                        gpt_results[g].goal, gpt_results[g].team);
    int status = 0;
    if (a->json &&
        bench_train_json(a->json, &info, results, n_cases, gpt_results, n_gpt) != EM_OK) {
        fprintf(stderr, "ember bench train: --json: %s\n", em_error());
        status = 1;
    }
    if (page && !write_report(page, a, about, results, n_cases, gpt_results, n_gpt))
        return 1;
    return status;
}

/* The Fashion-MNIST data (on the bench's device) and the gpt text the chosen cases need, and
 * each case's products; false after saying why. */
static bool load_inputs(const train_bench_args *a, const bench_setup *b, bool fashion, bool gpt,
                        train_bench_rounds *m, em_batch *all, recipe_gpt_text *text)
{
    for (int i = 0; fashion && i < b->n_cases; i++)
        if (!model_products(&b->cases[i], &m->per_case[i]))
            return false;
    bool gpu = b->device == EM_CUDA;
    if ((fashion && load_all(a->data_dir, all) != EM_OK) ||
        (fashion && gpu &&
         (em_to_device_(all->x, EM_CUDA) != EM_OK || em_to_device_(all->y, EM_CUDA) != EM_OK)) ||
        (gpt && recipe_gpt_text_load(a->gpt_data_dir, text) != EM_OK)) {
        fprintf(stderr, "ember bench train: %s\n", em_error());
        return false;
    }
    return true;
}

/* Whether name is one of list's comma-separated names (every name when list is NULL). */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
            return true;
    return !list;
}

/* b's cases: the device's, of the kind --only names and among --cases; false after saying why
 * when --cases names one there is not. */
static bool choose_cases(const train_bench_args *a, bench_setup *b)
{
    bool gpu = b->device == EM_CUDA;
    const bench_case *all = gpu ? gpu_cases : cpu_cases;
    int n_all = gpu ? (int)(sizeof gpu_cases / sizeof gpu_cases[0])
                    : (int)(sizeof cpu_cases / sizeof cpu_cases[0]);
    bool fashion = !a->only || !strcmp(a->only, "fashion");
    bool gpt = !a->only || !strcmp(a->only, "gpt");
    char known[256] = "";
    for (int i = 0; i < n_all; i++) {
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s ", all[i].name);
        if (fashion && listed(a->cases, all[i].name))
            b->cases[b->n_cases++] = all[i];
    }
    for (int g = 0; g < BENCH_GPT_CASES; g++) {
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s ", gpt_cases[g].name);
        if (gpt && listed(a->cases, gpt_cases[g].name))
            b->gpt[b->n_gpt++] = gpt_cases[g];
    }
    for (const char *p = a->cases; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t n = strcspn(p, ",");
        bool found = false;
        for (const char *k = known; *k; k += strcspn(k, " ") + 1)
            found |= strcspn(k, " ") == n && !strncmp(k, p, n);
        if (!found) {
            known[strlen(known) - 1] = '\0'; /* the last separator */
            fprintf(stderr, "ember bench train: --cases: no case '%.*s' on %s (the cases: %s)\n",
                    (int)n, p, a->device, known);
            return false;
        }
    }
    return true;
}

int bench_train(int argc, char **argv)
{
    train_bench_args a;
    int parsed = parse_args(argc, argv, &a);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    em_device device;
    int bad_device = cmd_device("ember bench train", a.device, false, &device);
    if (bad_device) /* before any work */
        return bad_device;
    omp_set_num_threads(a.threads);
    bench_setup b = {.device = device, .graph = a.cuda_graph,
                     .amp = cmd_amp_dtype(a.amp)};
    if (!choose_cases(&a, &b))
        return 2;
    bool fashion = b.n_cases > 0, gpt = b.n_gpt > 0;
    if (a.json && em_atomic_file_check(a.json) != EM_OK) { /* before any work */
        fprintf(stderr, "ember bench train: --json: %s\n", em_error());
        return 2;
    }
    cmd_report *page = a.report ? cmd_report_open(a.report, "ember bench train") : NULL;
    if (a.report && !page) {
        fprintf(stderr, "ember bench train: --report: %s\n", em_error());
        return 2;
    }
    train_bench_rounds m = {0};
    em_batch all = {0};
    recipe_gpt_text text = {0};
    int status = 1;
    if (load_inputs(&a, &b, fashion, gpt, &m, &all, &text)) {
        run_rounds(&a, &b, fashion, gpt, &all, &text, &m);
        status = report_results(&a, &b, fashion, gpt, &m, page);
        page = NULL; /* report_results closed it */
    }
    em_release(all.x);
    em_release(all.y);
    recipe_gpt_text_free(&text);
    if (page)
        cmd_report_abort(page);
    return status;
}
