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
#include "helpers/ember_cli.h"

typedef struct {
    int status;
    char out[16384]; /* stdout, or stdout and stderr together */
} outcome;

/* A shell command line ($EMBER_BIN is the program) run with one thread: two would wait on each
 * other for seconds per step on a busy machine. */
static outcome run_shell(const char *line)
{
    cr_assert(getenv("EMBER_BIN"), "EMBER_BIN is not set");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "export OMP_NUM_THREADS=1; %s", line);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    outcome o = {0};
    size_t n = fread(o.out, 1, sizeof o.out - 1, p);
    o.out[n] = 0;
    int st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return o;
}

static outcome run(const char *args, bool with_stderr)
{
    char line[1024];
    snprintf(line, sizeof line, "$EMBER_BIN %s %s", args, with_stderr ? "2>&1" : "2>/dev/null");
    return run_shell(line);
}

static char dir[64], model[96];

/* Two "fortune files" of made-up sentences (em_test_write_fortunes). */
static void write_corpus(void)
{
    snprintf(dir, sizeof dir, "/tmp/ember_gpt_cli_XXXXXX");
    cr_assert(mkdtemp(dir));
    cr_assert(em_test_write_fortunes(dir));
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
    cr_expect(strstr(o.out, "holds a model of the mlp recipe, not of gpt"), "%s", o.out);
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

/* The refusals below come under a 2 GB address-space cap, except in an AddressSanitizer build,
 * whose shadow memory alone reserves terabytes of it. */
#if defined(__SANITIZE_ADDRESS__) /* GCC says so; clang through __has_feature */
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#if defined(ASAN_BUILD)
#define ADDRESS_CAP ""
#else
#define ADDRESS_CAP "ulimit -v 2000000; "
#endif

/* A gpt file of a few hundred bytes in gpt's layout (vocabulary "abc", E = 4, block 8, one
 * block's attention weights) whose metadata entries key and key2 (NULL: none) say value and
 * value2 instead. */
static void write_small_gpt(const char *path, const char *key, const char *value,
                            const char *key2, const char *value2)
{
    em_tensor *wte = em_zeros(EM_SHAPE(3, 4), EM_F32), *wpe = em_zeros(EM_SHAPE(8, 4), EM_F32);
    em_tensor *in_proj = em_zeros(EM_SHAPE(12, 4), EM_F32);
    em_st_entry t[3] = {{"wte.weight", wte}, {"wpe.weight", wpe},
                        {"h.0.self_attn.in_proj_weight", in_proj}};
    em_st_meta meta[6] = {{"recipe", "gpt"},     {"gpt.vocab", "abc"},   {"gpt.n_layer", "1"},
                          {"gpt.n_head", "2"},   {"gpt.n_embd", "4"},    {"gpt.block_size", "8"}};
    for (int i = 2; i < 6; i++)
        meta[i].value = !strcmp(meta[i].key, key)              ? value
                        : key2 && !strcmp(meta[i].key, key2) ? value2
                                                             : meta[i].value;
    cr_assert_eq(em_safetensors_save(path, t, 3, meta, 6), EM_OK, "%s", em_error());
    em_release(wte);
    em_release(wpe);
    em_release(in_proj);
}

/* The metadata gave the model's size and ember built it before looking at a tensor: a 1 kB file
 * claiming n_layer 100000 or n_embd 65536 took gigabytes. Now each claim is checked against a
 * limit and the tensors the file holds first: under a 2 GB address-space cap the refusal comes
 * at once, naming the field and its value. */
Test(gpt_cli, a_small_file_naming_a_huge_model_is_refused_before_it_is_built)
{
    const struct {
        const char *key, *value, *key2, *value2, *want;
    } cases[] = {
        {"gpt.n_layer", "100000", NULL, NULL,
         "the gpt metadata gpt.n_layer = 100000 is missing or out of range (1 to 1024)"},
        {"gpt.n_layer", "1000", NULL, NULL,
         "gpt.n_layer = 1000, but the file holds the tensors of 1 block"},
        {"gpt.n_embd", "99999999999", NULL, NULL,
         "gpt.n_embd = 99999999999 is missing or out of range (1 to 65536)"},
        {"gpt.n_embd", "65536", NULL, NULL,
         "wte.weight should be [3,65536] (gpt.vocab of 3 characters, gpt.n_embd = 65536); the "
         "file holds [3,4]"},
        {"gpt.block_size", "1048576", NULL, NULL,
         "wpe.weight should be [1048576,4] (gpt.block_size = 1048576, gpt.n_embd = 4); the file "
         "holds [8,4]"},
        {"gpt.n_head", "5", NULL, NULL, "gpt.n_head = 5 is missing or out of range (1 to 4)"},
        {"gpt.n_head", "3", NULL, NULL, "gpt.n_embd = 4 is not a multiple of gpt.n_head = 3"},
    };
    char path[128], args[512];
    snprintf(path, sizeof path, "%s/claims.safetensors", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_small_gpt(path, cases[i].key, cases[i].value, cases[i].key2, cases[i].value2);
        snprintf(args, sizeof args, "sample gpt --load %s --tokens 2", path);
        char capped[640];
        snprintf(capped, sizeof capped, ADDRESS_CAP "timeout 30 $EMBER_BIN %s 2>&1", args);
        outcome o = run_shell(capped);
        cr_expect_eq(o.status, 1, "%s: %s", cases[i].value, o.out);
        cr_expect(strstr(o.out, cases[i].want), "%s = %s: %s", cases[i].key, cases[i].value,
                  o.out);
    }
    write_small_gpt(path, "gpt.n_layer", "1", NULL, NULL);
    snprintf(args, sizeof args, "sample gpt --load %s --tokens 2", path);
    outcome o = run(args, true);
    cr_expect_eq(o.status, 1, "%s", o.out);
    cr_expect(strstr(o.out, "has no tensor 'h.0.self_attn.in_proj_bias'"),
              "the claims hold, the file lacks the rest: %s", o.out);
}

/* A whole-model file holds the model it names: its GPT of width 1 over 2^20 positions (4 MB of
 * position embeddings) in 256 blocks loads, but the key/value cache of one sampled sequence
 * would hold 2^28 keys and as many values (2 GiB): refused under the 2 GB cap, naming the sizes.
 * A vocabulary of another size than the model's tokens is refused too. */
Test(gpt_cli, a_whole_model_gpt_whose_cache_would_be_huge_is_refused)
{
    char path[128], args[512];
    snprintf(path, sizeof path, "%s/long.safetensors", dir);
    em_module *m = em_gpt((em_gpt_settings){.vocab_size = 3, .block_size = 1 << 20, .n_layer = 256,
                                          .n_head = 1, .n_embd = 1});
    cr_assert_not_null(m, "%s", em_error());
    em_st_meta vocab = {"gpt.vocab", "abc"};
    cr_assert_eq(em_model_save_meta(m, path, &vocab, 1), EM_OK, "%s", em_error());
    snprintf(args, sizeof args, ADDRESS_CAP "timeout 60 $EMBER_BIN sample --load %s --tokens 2 "
             "2>&1", path);
    outcome o = run_shell(args);
    cr_expect_eq(o.status, 1, "%s", o.out);
    cr_expect(strstr(o.out, "n_layer = 256 x block_size = 1048576 x n_embd = 1 keys to cache a "
                            "sequence are more than 2^27"), "%s", o.out);
    vocab.value = "ab";
    cr_assert_eq(em_model_save_meta(m, path, &vocab, 1), EM_OK, "%s", em_error());
    em_module_free(m);
    snprintf(args, sizeof args, "sample --load %s --tokens 2", path);
    o = run(args, true);
    cr_expect_eq(o.status, 1, "%s", o.out);
    cr_expect(strstr(o.out, "the gpt vocabulary is missing or not the model's (2 characters for "
                            "3 tokens)"), "%s", o.out);
}

/* `--load` of a FIFO waited for a writer forever; now it is refused at once, naming it. */
Test(gpt_cli, a_fifo_given_to_load_is_refused, .timeout = 60)
{
    char fifo[128], args[256];
    snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    /* the one loader, which every command loads through */
    const char *commands[] = {"sample gpt --load %s", "export mlp --load %s --onnx /dev/null"};
    for (int i = 0; i < 2; i++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, commands[i], fifo);
        snprintf(args, sizeof args, "timeout 20 $EMBER_BIN %s 2>&1", cmd);
        outcome o = run_shell(args);
        cr_expect_eq(o.status, 1, "%s: %s", cmd, o.out);
        char want[256];
        snprintf(want, sizeof want, "cannot open '%s': it is a FIFO, not a regular file", fifo);
        cr_expect(strstr(o.out, want), "%s: %s", cmd, o.out);
    }
    unlink(fifo);
}
