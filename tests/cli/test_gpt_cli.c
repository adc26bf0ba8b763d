/* The gpt recipe through the `ember` command, on a small corpus written here: a few training
 * steps give a finite val loss in the JSON summary and a model file whose samples repeat for a
 * seed and that `ember export gpt` writes as ONNX; a prompt outside the vocabulary, a model file
 * of another recipe and a missing file are clear errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ember.h"

typedef struct {
    int status;
    char out[16384]; /* stdout, or stdout and stderr together */
} outcome;

static outcome run(const char *args, bool with_stderr)
{
    const char *bin = getenv("EMBER_BIN");
    cr_assert(bin, "EMBER_BIN is not set");
    char cmd[2048];
    /* one thread: two would wait on each other for seconds per step on a busy machine */
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s %s", bin, args,
             with_stderr ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    outcome o = {0};
    size_t n = fread(o.out, 1, sizeof o.out - 1, p);
    o.out[n] = 0;
    int st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return o;
}

static char dir[64], model[96];

/* Two "fortune files" of made-up sentences (and a .dat index and a link the corpus skips). */
static void write_corpus(void)
{
    snprintf(dir, sizeof dir, "/tmp/ember_gpt_cli_XXXXXX");
    cr_assert(mkdtemp(dir));
    const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat", ".\n", "%\n"};
    for (int f = 0; f < 2; f++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, f ? "wisdom" : "cookie");
        FILE *out = fopen(path, "w");
        cr_assert(out);
        for (int i = 0; i < 900; i++)
            fputs(words[(i * 7 + f) % 8], out);
        fclose(out);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/cookie.dat", dir);
    FILE *dat = fopen(path, "w");
    fputs("\xff\x01 binary index", dat);
    fclose(dat);
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
}

static void remove_corpus(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(gpt_cli, .init = write_corpus, .fini = remove_corpus);

Test(gpt_cli, train_sample_and_errors)
{
    char args[512];
    snprintf(args, sizeof args, "train gpt --data %s --max-steps 4 --batch 4 --save %s", dir,
             model);
    outcome o = run(args, false);
    cr_assert_eq(o.status, 0, "ember %s:\n%s", args, o.out);
    double val = NAN, tps = 0;
    char *at = strstr(o.out, "\"val_loss\":");
    cr_assert(at, "%s", o.out);
    val = strtod(at + strlen("\"val_loss\":"), NULL);
    cr_expect(val > 0.5 && val < 6, "val loss %g", val); /* ln(14 characters) = 2.6 at start */
    at = strstr(o.out, "\"train_tokens_per_s\":");
    cr_assert(at, "%s", o.out);
    tps = strtod(at + strlen("\"train_tokens_per_s\":"), NULL);
    cr_expect(tps > 0);
    cr_expect(strstr(o.out, "\"block\":128"), "%s", o.out);
    cr_expect(strstr(o.out, "\"clip\":1.0,"), "the recipe clips at 1: %s", o.out);

    snprintf(args, sizeof args, "sample gpt --load %s --prompt 'the ' --tokens 40 --seed 3",
             model);
    outcome a = run(args, false), b = run(args, false);
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_expect_str_eq(a.out, b.out);
    cr_expect_eq(strncmp(a.out, "the ", 4), 0);
    cr_expect_eq(strlen(a.out), 4 + 40 + 1);
    snprintf(args, sizeof args, "sample gpt --load %s --prompt 'the ' --tokens 40 --seed 3 "
             "--no-cache", model);
    outcome c = run(args, false);
    cr_expect_str_eq(a.out, c.out, "the cache changes nothing within the block");

    snprintf(args, sizeof args, "sample gpt --load %s --prompt 'the dog'", model);
    o = run(args, true);
    cr_expect_eq(o.status, 1);
    cr_expect(strstr(o.out, "--prompt: character 'd' (at 4) is not in the vocabulary"), "%s",
              o.out);

    snprintf(args, sizeof args, "eval gpt --data %s --load %s", dir, model);
    o = run(args, false);
    cr_expect_eq(o.status, 0, "%s", o.out);
    cr_expect(strstr(o.out, "\"val_loss\":"), "%s", o.out);

    /* the model as ONNX: token ids in, logits out (its values are checked in test_onnx) */
    snprintf(args, sizeof args, "export gpt --load %s --onnx %s/gpt.onnx", model, dir);
    o = run(args, true);
    cr_expect_eq(o.status, 0, "%s", o.out);
    cr_expect(strstr(o.out, "{\"recipe\":\"gpt\",\"onnx\":") && strstr(o.out, "\"opset\":17"),
              "%s", o.out);
}

Test(gpt_cli, a_model_of_another_recipe_is_refused)
{
    char other[128], args[256];
    snprintf(other, sizeof other, "%s/mlp.safetensors", dir);
    em_module *m = em_linear_layer(2, 2, true);
    em_st_meta meta[1] = {{"recipe", "mlp"}};
    cr_assert_eq(em_module_save(m, other, meta, 1), EM_OK, "%s", em_error());
    em_module_free(m);
    snprintf(args, sizeof args, "sample gpt --load %s", other);
    outcome o = run(args, true);
    cr_expect_eq(o.status, 1);
    cr_expect(strstr(o.out, "holds a model of recipe 'mlp', not a gpt model"), "%s", o.out);
    snprintf(args, sizeof args, "sample gpt --load %s/none.safetensors", dir);
    o = run(args, true);
    cr_expect_eq(o.status, 1);
    cr_expect(strstr(o.out, "none.safetensors"), "%s", o.out);
    const char *model_commands[] = {"quantize gpt --load x --save y", "serve gpt --load x",
                                    "bench serve --recipe gpt",
                                    "prune gpt --load x --save y --method l1 --amount 0.5",
                                    "summary gpt"};
    for (size_t i = 0; i < sizeof model_commands / sizeof *model_commands; i++) {
        o = run(model_commands[i], true);
        cr_expect_eq(o.status, 2, "%s", model_commands[i]);
        cr_expect(strstr(o.out, "recipe 'gpt' is not supported here"), "%s: %s",
                  model_commands[i], o.out);
    }
}
