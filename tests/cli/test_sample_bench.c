/* `ember bench sample` and its PyTorch half (bench/gpt_torch.py sample) on a gpt trained here on
 * a small corpus: greedy generation (top-k 1) gives the same characters in ember and PyTorch
 * from the same model file, past the block where both caches restart; the benchmark's table
 * and JSON with PyTorch beside and without it. The PyTorch tests run where $EMBER_PYTHON
 * imports torch (the benchmark venv of scripts/bench_venv.sh) and skip otherwise. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/ember_cli.h"

static char dir[64], model[96], out[16384];

/* A corpus of made-up sentences and a gpt trained on it for 40 steps (one thread). */
static void train_model(void)
{
    snprintf(dir, sizeof dir, "/tmp/ember_sample_bench_XXXXXX");
    cr_assert(mkdtemp(dir));
    const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat", ".\n", "%\n", "dog ",
                           "ran "};
    char path[128];
    snprintf(path, sizeof path, "%s/cookie", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int i = 0; i < 3000; i++)
        fputs(words[(i * 7 + i / 13) % 10], f);
    fclose(f);
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    char args[512];
    snprintf(args, sizeof args, "train gpt --data %s --max-steps 40 --batch 8 --threads 1 "
             "--save %s", dir, model);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "ember %s:\n%s", args, out);
}

static void remove_model(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(sample_bench, .init = train_model, .fini = remove_model, .timeout = 600);

/* $EMBER_PYTHON when it imports torch, else NULL after saying the test skips. */
static const char *torch_python(void)
{
    const char *py = getenv("EMBER_PYTHON");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py ? py : "");
    if (py && *py && system(cmd) == 0)
        return py;
    fprintf(stderr, "PyTorch test skipped: $EMBER_PYTHON (%s) does not import torch\n",
            py ? py : "unset");
    return NULL;
}

/* The JSON object in file path (removed after reading). */
static json_t *read_json(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    unlink(path);
    cr_assert(json_is_object(j), "%s: %s", path, e.text);
    return j;
}

static double number(const json_t *j, const char *way, const char *key)
{
    return json_number_value(json_object_get(json_object_get(j, way), key));
}

/* 160 characters after 'the ': the 164 outgrow the block of 128, so both caches restart from
 * the last 64 once; argmax sampling leaves nothing to the frameworks' random generators. */
Test(sample_bench, greedy_text_is_pytorchs)
{
    const char *py = torch_python();
    if (!py)
        cr_skip_test("no PyTorch");
    char args[512], cmd[1024], line[4096];
    snprintf(args, sizeof args, "sample gpt --load %s --prompt 'the ' --tokens 160 --top-k 1",
             model);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    /* the text is stdout's line; stderr's characters/s line comes before or after it */
    const char *ember = !strncmp(out, "the ", 4) ? out : strstr(out, "\nthe ");
    cr_assert(ember, "%s", out);
    ember += *ember == '\n';
    snprintf(cmd, sizeof cmd, "'%s' '%s/bench/gpt_torch.py' sample --load %s --prompt 'the ' "
             "--tokens 160 --top-k 1 --threads 1 --text", py, getenv("EMBER_SOURCE_DIR"), model);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    bool got = fgets(line, sizeof line, p) != NULL;
    cr_assert_eq(pclose(p), 0, "%s", cmd);
    cr_assert(got && !strncmp(line, "text ", 5), "%s", line);
    json_error_t e;
    json_t *text = json_loads(line + 5, JSON_DECODE_ANY, &e);
    cr_assert(json_is_string(text), "%s: %s", line, e.text);
    cr_expect_eq(strlen(json_string_value(text)), 160);
    cr_expect_eq(strncmp(ember + 4, json_string_value(text), 160), 0,
                 "ember:   %.160s\npytorch: %s", ember + 4, json_string_value(text));
    cr_expect(strchr(json_string_value(text), 'o') && strchr(json_string_value(text), ' '),
              "a model that writes words, not one character: %s", json_string_value(text));
    json_decref(text);
}

/* Beside PyTorch: both frameworks' characters/s with the cache and without, and the ratio. */
Test(sample_bench, figures_beside_pytorch)
{
    if (!torch_python())
        cr_skip_test("no PyTorch");
    char path[128], args[512];
    snprintf(path, sizeof path, "%s/bench.json", dir);
    snprintf(args, sizeof args, "bench sample --load %s --tokens 30 --rounds 1 --threads 1 "
             "--json %s", model, path);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "ember chars/s  torch chars/s  ember/torch") &&
              strstr(out, "beside torch "), "%s", out);
    json_t *j = read_json(path);
    const char *about = json_string_value(json_object_get(j, "torch"));
    cr_expect(about && !strncmp(about, "torch 2.", 8) && strstr(out, about), "%s", out);
    const char *ways[] = {"cache", "no_cache"};
    for (int w = 0; w < 2; w++) {
        double ember = number(j, ways[w], "chars_per_s"),
               torch = number(j, ways[w], "torch_chars_per_s");
        cr_expect(ember > 0 && torch > 0, "%s: %g %g", ways[w], ember, torch);
        /* the ratio of the unrounded figures, to 2 places */
        cr_expect_float_eq(number(j, ways[w], "ratio"), ember / torch,
                           0.005 + ember / torch * 0.1 / torch, "%s", ways[w]);
    }
    json_decref(j);
}

/* Without PyTorch one line says why, and ember's figures come alone, with null in the JSON. */
Test(sample_bench, without_pytorch_ember_alone)
{
    char path[128], args[512];
    snprintf(path, sizeof path, "%s/bench.json", dir);
    snprintf(args, sizeof args, "bench sample --load %s --tokens 30 --rounds 2 --threads 1 "
             "--json %s", model, path);
    setenv("EMBER_PYTHON", "/bin/false", 1);
    int status = em_test_ember(args, out, sizeof out);
    unsetenv("EMBER_PYTHON");
    cr_assert_eq(status, 0, "%s", out);
    cr_expect(strstr(out, "PyTorch half skipped: /bin/false cannot import torch"), "%s", out);
    cr_expect(strstr(out, "ember chars/s") && !strstr(out, "torch chars/s"), "%s", out);
    cr_expect(strstr(out, "the first 30 characters agree"), "%s", out);
    json_t *j = read_json(path);
    cr_expect(json_is_null(json_object_get(j, "torch")));
    cr_expect_eq(json_integer_value(json_object_get(j, "rounds")), 2);
    cr_expect_eq(json_integer_value(json_object_get(j, "tokens")), 30);
    cr_expect_gt(number(j, "cache", "chars_per_s"), 0);
    cr_expect(json_is_null(json_object_get(json_object_get(j, "cache"), "torch_chars_per_s")));
    cr_expect(json_is_null(json_object_get(json_object_get(j, "no_cache"), "ratio")));
    json_decref(j);

    snprintf(args, sizeof args, "bench sample --load %s --json %s/none/bench.json", model, dir);
    cr_expect_eq(em_test_ember(args, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "--json: ") && strstr(out, "none/bench.json"), "%s", out);
}
