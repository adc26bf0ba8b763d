/* `ember train RECIPE` and `ember eval RECIPE`: run a reference recipe with a live progress bar
 * (plain lines when stdout is not a terminal) and end with a one-line JSON summary. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recipes/recipes.h"
#include "tools/tools_internal.h"


typedef struct {
    bool tty;
    int64_t next_line; /* plain mode: the sample count of the next printed line */
} progress_state;

static void show_progress(void *ctx, const em_progress *pr)
{
    progress_state *p = ctx;
    double eta = pr->samples_per_s > 0 ? (double)(pr->total - pr->done) / pr->samples_per_s : 0;
    char extra[64] = "";
    if (pr->scale != 1 || pr->skipped)
        snprintf(extra, sizeof extra, " scale %g skipped %lld", pr->scale, (long long)pr->skipped);
    if (p->tty) {
        char bar[31];
        int filled = pr->total ? (int)(30 * pr->done / pr->total) : 30;
        for (int i = 0; i < 30; i++)
            bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
        bar[30] = 0;
        printf("\repoch %d/%d [%s] %3d%% loss %.4f %6.0f samples/s ETA %3.0fs%s ", pr->epoch + 1,
               pr->epochs, bar, pr->total ? (int)(100 * pr->done / pr->total) : 100, pr->loss,
               pr->samples_per_s, eta, extra);
        if (pr->done >= pr->total)
            printf("\n");
        fflush(stdout);
    } else if (pr->done >= p->next_line || pr->done >= pr->total) {
        printf("epoch %d/%d %lld/%lld loss %.4f samples/s %.0f eta_s %.0f%s\n", pr->epoch + 1,
               pr->epochs, (long long)pr->done, (long long)pr->total, pr->loss,
               pr->samples_per_s, eta, extra);
        fflush(stdout);
        p->next_line = pr->done >= pr->total ? pr->total / 5 : pr->done + pr->total / 5;
    }
}

static const char *amp_name(em_dtype amp)
{
    return amp == EM_F32 ? "off" : em_dtype_name(amp);
}

static void print_summary(const em_train_opts *o, const em_train_result *r)
{
    printf("{\"recipe\":\"%s\",\"epochs\":%d,\"batch\":%d,\"test_acc\":%.4f,\"test_loss\":%.4f,"
           "\"train_samples_per_s\":%.0f,\"peak_bytes\":%zu,\"wall_s\":%.1f,\"amp\":\"%s\","
           "\"scale\":%g,\"skipped_steps\":%lld", o->recipe->name, r->epochs, r->batch,
           r->test_acc, r->test_loss, r->train_samples_per_s, r->peak_bytes, r->wall_s,
           amp_name(o->tech.amp), r->scale, (long long)r->skipped_steps);
    if (o->find_batch)
        printf(",\"largest_batch\":%lld", (long long)r->largest_batch);
    printf("}\n");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ember train RECIPE [--epochs N] [--batch N] [--lr X] [--optim NAME]\n"
               "                          [--schedule cosine|constant]\n"
               "                          [--threads N] [--workers N] [--seed N] [--data DIR]\n"
               "                          [--save FILE] [--resume FILE] [--max-steps N]\n"
               "                          [--amp f16|bf16] [--grad-accum N] [--clip X] [--guard]\n"
               "                          [--checkpoint-activations] [--mem-budget BYTES]\n"
               "                          [--find-batch]\n"
               "       ember eval RECIPE --load FILE [--data DIR] [--threads N]\n\nrecipes:\n");
    for (int i = 0; em_recipe_at(i); i++)
        fprintf(f, "  %-5s %s\n", em_recipe_at(i)->name, em_recipe_at(i)->about);
}

/* Parses the options after the recipe name into o (and *threads, *load); false on a bad one. */
static bool parse_amp(const char *v, em_dtype *amp)
{
    if (!strcmp(v, "f16") || !strcmp(v, "bf16") || !strcmp(v, "off")) {
        *amp = !strcmp(v, "f16") ? EM_F16 : !strcmp(v, "bf16") ? EM_BF16 : EM_F32;
        return true;
    }
    fprintf(stderr, "ember: --amp takes f16, bf16 or off, not '%s'\n", v);
    return false;
}

/* Parses the options after the recipe name into o (and *threads, *load); false on a bad one. */
static bool parse(int argc, char **argv, em_train_opts *o, int *threads, const char **load)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--guard") || !strcmp(a, "--checkpoint-activations")
            || !strcmp(a, "--find-batch")) {
            o->tech.guard |= !strcmp(a, "--guard");
            o->tech.checkpoint_activations |= !strcmp(a, "--checkpoint-activations");
            o->find_batch |= !strcmp(a, "--find-batch");
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "ember: option %s needs a value\n", a);
            return false;
        }
        if (!strcmp(a, "--epochs"))
            o->epochs = atoi(v);
        else if (!strcmp(a, "--batch"))
            o->batch = atoll(v);
        else if (!strcmp(a, "--lr"))
            o->lr = atof(v);
        else if (!strcmp(a, "--optim"))
            o->optim = v;
        else if (!strcmp(a, "--schedule"))
            o->schedule = v;
        else if (!strcmp(a, "--threads"))
            *threads = atoi(v);
        else if (!strcmp(a, "--workers"))
            o->workers = atoi(v);
        else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--data"))
            o->data_dir = v;
        else if (!strcmp(a, "--save"))
            o->save_path = v;
        else if (!strcmp(a, "--resume"))
            o->resume_path = v;
        else if (!strcmp(a, "--max-steps"))
            o->max_steps = atoll(v);
        else if (!strcmp(a, "--load"))
            *load = v;
        else if (!strcmp(a, "--amp")) {
            if (!parse_amp(v, &o->tech.amp))
                return false;
        } else if (!strcmp(a, "--grad-accum"))
            o->tech.grad_accum = atoi(v);
        else if (!strcmp(a, "--clip"))
            o->tech.clip = atof(v);
        else if (!strcmp(a, "--mem-budget"))
            o->mem_budget = (size_t)strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "ember: unknown option %s\n", a);
            return false;
        }
    }
    if (o->epochs < 0 || o->batch < 0 || o->lr < 0 || *threads < 0 || o->workers < 0
        || o->tech.grad_accum < 0 || o->tech.clip < 0) {
        fprintf(stderr, "ember: negative --epochs, --batch, --lr, --threads, --workers, "
                        "--grad-accum or --clip\n");
        return false;
    }
    return true;
}

static int run_command(int argc, char **argv, bool train)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    em_train_opts o = {.recipe = em_recipe_find(argv[1]), .workers = 2};
    int threads = 0;
    const char *load = NULL;
    if (!o.recipe) {
        fprintf(stderr, "ember: unknown recipe '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    if (!parse(argc, argv, &o, &threads, &load))
        return 2;
    if (!train && !load) {
        fprintf(stderr, "ember eval: --load FILE is required\n");
        return 2;
    }
    if (threads)
        omp_set_num_threads(threads);
    em_train_result r;
    progress_state p = {.tty = isatty(STDOUT_FILENO)};
    em_status st = train ? em_recipe_train(&o, show_progress, &p, &r)
                         : em_recipe_eval(o.recipe, o.data_dir, load, &r);
    if (st != EM_OK) {
        fprintf(stderr, "ember %s: %s\n", train ? "train" : "eval", em_error());
        return 1;
    }
    if (!train)
        r.epochs = 0;
    print_summary(&o, &r);
    return 0;
}

int em_cmd_train(int argc, char **argv)
{
    return run_command(argc, argv, true);
}

int em_cmd_eval(int argc, char **argv)
{
    return run_command(argc, argv, false);
}
