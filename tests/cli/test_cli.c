/* The `ember` command itself: every command and subcommand answers --help, and a bad option
 * value, an unknown option or a missing operand ends it with status 2 and one clear line before
 * it loads any data (the data directory given here does not exist). Whole runs on a tiny
 * Fashion-MNIST of noise check what `ember train` prints: one JSON line alone on stdout, whose
 * learning rates under every schedule are PyTorch's, presets and what they turned on, and what
 * `ember eval` and `ember summary` print. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/ember_cli.h"
#include "helpers/files.h"
#include "ember.h"

typedef struct {
    int status;
    char out[8192]; /* stdout and stderr together */
} outcome;

static outcome run(const char *args)
{
    outcome o = {0};
    o.status = em_test_ember(args, o.out, sizeof o.out);
    return o;
}

/* The stdout of `ember ARGS` alone (stderr to err_path when given, else dropped); it must exit 0
 * and print exactly one line. */
static json_t *run_json(const char *args, const char *err_path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>%s", getenv("EMBER_BIN"), args,
             err_path ? err_path : "/dev/null");
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ember %s failed: %s", args, out);
    cr_assert(n > 0 && out[n - 1] == '\n' && strchr(out, '\n') == out + n - 1,
              "ember %s: stdout is not one line: '%s'", args, out);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert(json_is_object(j), "ember %s: stdout is no JSON object: %s (%s)", args, out, e.text);
    return j;
}

static double num(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    cr_assert(json_is_number(v), "\"%s\" is no number", key);
    return json_number_value(v);
}

static const char *str(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    cr_assert(json_is_string(v), "\"%s\" is no string", key);
    return json_string_value(v);
}

/* ---- a Fashion-MNIST of 96 training and 32 test images of noise (em_test_write_fashion_noise)
 * ---- */
static char data_dir[] = "/tmp/ember_cli_data_XXXXXX";

static void make_data(void)
{
    cr_assert(mkdtemp(data_dir));
    cr_assert(em_test_write_fashion_noise(data_dir));
}

static void remove_data(void)
{
    const char *names[] = {"train-images", "train-labels", "t10k-images", "t10k-labels"};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s-idx%d-ubyte.gz", data_dir, names[i], i % 2 ? 1 : 3);
        unlink(path);
    }
    rmdir(data_dir);
}

static void expect(const char *args, int status, const char *text)
{
    outcome o = run(args);
    cr_expect_eq(o.status, status, "ember %s: exit %d, expected %d; output:\n%s", args, o.status,
                 status, o.out);
    cr_expect(strstr(o.out, text), "ember %s: '%s' not in:\n%s", args, text, o.out);
}

Test(cli, every_command_has_help)
{
    const char *cmds[] = {"info", "demo", "train", "eval", "summary", "lr-find", "compare",
                          "profile", "quantize", "prune", "export", "serve", "bench ops",
                          "bench train", "bench infer", "bench serve", "bench attention", "sample",
                          "bench sample"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        char usage[64];
        snprintf(usage, sizeof usage, "usage: ember %s", cmds[i]);
        expect(args, 0, usage);
    }
    expect("--help", 0, "usage: ember COMMAND");
    expect("bench --help", 0, "bench infer");
    expect("bench", 2, "usage: ember bench WHAT");
}

/* Every command that reads data says in its --help where the recipes' data lives: Debian's
 * Fashion-MNIST and fortunes folders. */
Test(cli, every_data_option_says_where_the_data_lives)
{
    const char *cmds[] = {"train", "eval", "lr-find", "compare", "profile", "quantize", "prune",
                          "bench infer", "bench serve", "bench train"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        expect(args, 0, "--data DIR");
        expect(args, 0, "/usr/share/datasets/fashion-mnist (Debian's fashion-mnist)");
        expect(args, 0, "/usr/share/games/fortunes (Debian's fortunes)");
    }
}

Test(cli, version)
{
    expect("--version", 0, "ember 0.");
    expect("train --version", 0, "ember 0.");
}

#define NO_DATA "--data /nonexistent/ember-test"

Test(cli, bad_values_exit_2_before_loading_data)
{
    expect("train cnn " NO_DATA " --lr abc", 2, "ember train: --lr: 'abc' is not a number\n");
    expect("train cnn " NO_DATA " --epochs 0", 2, "ember train: --epochs: 0 is out of range");
    expect("train cnn " NO_DATA " --epochs 1.5", 2, "ember train: --epochs: '1.5' is not an "
                                                    "integer");
    expect("train cnn " NO_DATA " --batch 0", 2, "ember train: --batch: 0 is out of range");
    expect("train cnn " NO_DATA " --batch 4294967297", 2, "ember train: --batch: 4294967297 is "
           "out of range (must be in [1, 2147483647])\n"); /* it wrapped to 1 */
    expect("compare cnn " NO_DATA " --batch 4294967300", 2, "--batch: 4294967300 is out of range");
    expect("profile cnn " NO_DATA " --batch 4294967297", 2, "--batch: 4294967297 is out of range");
    expect("train cnn " NO_DATA " --grad-accum 0", 2, "--grad-accum: 0 is out of range");
    expect("train cnn " NO_DATA " --threads abc", 2, "--threads: 'abc' is not an integer");
    expect("train cnn " NO_DATA " --max-steps -5", 2, "--max-steps: -5 is out of range");
    expect("train cnn " NO_DATA " --optim bogus", 2,
           "ember train: --optim: 'bogus' is not one of sgd, adam, adamw, rmsprop\n");
    expect("train cnn " NO_DATA " --optim=bogus", 2, "'bogus' is not one of");
    expect("train cnn " NO_DATA " --amp f8", 2, "--amp: 'f8' is not one of f16, bf16, off");
    expect("train cnn " NO_DATA " --schedule linear", 2, "--schedule: 'linear' is not one of "
           "constant, cosine, warmup-cosine, onecycle, step, plateau");
    expect("train cnn " NO_DATA " --preset max", 2, "--preset: 'max' is not one of basic, "
           "advanced, ultra");
    expect("summary nosuch", 2, "ember summary: unknown recipe 'nosuch'");
    expect("train cnn " NO_DATA " --mem-budget -1", 2, "--mem-budget: '-1' is not a "
                                                       "non-negative integer");
    expect("train cnn " NO_DATA " --bogus 1", 2, "ember train: unknown option '--bogus'");
    expect("train nosuch " NO_DATA, 2, "ember train: unknown recipe 'nosuch'");
    expect("train " NO_DATA, 2, "ember train: missing RECIPE");
    expect("eval cnn " NO_DATA, 2, "ember eval: --load FILE is required");
    expect("compare cnn " NO_DATA " --steps 0", 2, "ember compare: --steps: 0 is out of range");
    expect("quantize cnn --load a --save b --threads 0", 2, "--threads: 0 is out of range");
    expect("prune cnn --load a --save b --method l1 --amount 1.5", 2,
           "ember prune: --amount: 1.5 is out of range (must be in [0, 1))");
    expect("bench infer cnn --load a --iters 5", 2, "--iters: 5 is out of range");
    expect("bench infer cnn --load a --rounds 0", 2, "--rounds: 0 is out of range");
    expect("bench train --rounds 0", 2, "--rounds: 0 is out of range");
    expect("bench train --cases mlp_b64,nope", 2, "ember bench train: --cases: no case 'nope' "
                                                  "on cpu (the cases: mlp_b64 mlp_b256 cnn_b64 "
                                                  "gpt_b32 gpt_b8_t256 gpt_b64_t256)");
    expect("train cnn " NO_DATA " --save-every 10", 2,
           "ember train: --save-every needs --save FILE\n");
    expect("train cnn " NO_DATA " --save-every 0 --save x", 2, "--save-every: 0 is out of range");
    expect("train cnn " NO_DATA " --save /nonexistent/ember-test/run.ckpt", 2,
           "ember train: --save: cannot write '/nonexistent/ember-test/run.ckpt'");
    expect("train cnn " NO_DATA " --profile t.json --profile-steps 3-9", 2,
           "ember train: --profile-steps: '3-9' is not FIRST:LAST (micro-batches counting from "
           "1, FIRST <= LAST)\n");
    expect("train cnn " NO_DATA " --profile t.json --profile-steps 5:3", 2, "'5:3' is not");
    expect("train cnn " NO_DATA " --profile t.json --profile-steps 0:3", 2, "'0:3' is not");
    expect("train cnn " NO_DATA " --profile-steps 1:3", 2,
           "ember train: --profile-steps needs --profile FILE.json\n");
    expect("train cnn " NO_DATA " --histogram-every 0", 2, "--histogram-every: 0 is out of range");
    expect("profile cnn " NO_DATA " --steps 0", 2, "ember profile: --steps: 0 is out of range");
}

Test(cli, an_unwritable_report_or_trace_fails_before_any_work)
{
    expect("compare cnn " NO_DATA " --report /nonexistent/dir/r.html", 2,
           "ember compare: --report: cannot write '/nonexistent/dir/r.html'");
    expect("bench train " NO_DATA " --report /nonexistent/dir/r.html", 2,
           "ember bench train: --report: cannot write '/nonexistent/dir/r.html'");
    expect("bench train " NO_DATA " --json /nonexistent/dir/r.json", 2,
           "ember bench train: --json: cannot write '/nonexistent/dir/r.json'");
    expect("train cnn " NO_DATA " --profile /nonexistent/dir/t.json", 2,
           "ember train: --profile: cannot write '/nonexistent/dir/t.json'");
    expect("profile cnn " NO_DATA " --trace /nonexistent/dir/t.json", 2,
           "ember profile: --trace: cannot write '/nonexistent/dir/t.json'");
    expect("train cnn " NO_DATA " --tensorboard /dev/null/runs", 2,
           "ember train: --tensorboard: em_tb_writer_check: log directory '/dev/null/runs': "
           "'/dev/null' is not a directory\n");
}

/* --device names a missing device at once (exit 2, before any data loads); where the device is
 * present the run gets past the check and fails at the (missing) data instead. */
Test(cli, a_device_that_is_not_there_is_named_at_once)
{
    expect("train mlp " NO_DATA " --device tpu", 2, "--device: 'tpu' is not one of cpu, cuda");
    if (em_device_available(EM_CUDA)) {
        expect("train mlp " NO_DATA " --device cuda --tf32", 1, "/nonexistent/ember-test");
        expect("compare mlp " NO_DATA " --device cuda", 1, "/nonexistent/ember-test");
        expect("profile mlp " NO_DATA " --device cuda", 1, "/nonexistent/ember-test");
        return;
    }
    expect("train mlp " NO_DATA " --device cuda", 2,
           "ember train: --device cuda: no cuda device is available");
    expect("train mlp " NO_DATA " --device cuda --tf32", 2, "--device cuda: no cuda device");
    expect("compare mlp " NO_DATA " --device cuda", 2,
           "ember compare: --device cuda: no cuda device is available");
    expect("profile mlp " NO_DATA " --device cuda", 2,
           "ember profile: --device cuda: no cuda device is available");
    expect("bench train " NO_DATA " --device cuda", 2,
           "ember bench train: --device cuda: no cuda device is available");
}

Test(cli, equals_spelling_reaches_the_run)
{
    /* well-formed options get as far as loading the (missing) data, and fail there */
    outcome o = run("train cnn --epochs=1 --lr=0.01 --optim=adam --data=/nonexistent/ember-test");
    cr_expect_eq(o.status, 1, "%s", o.out);
    cr_expect(strstr(o.out, "/nonexistent/ember-test"), "%s", o.out);
}

/* ckpt (a mkstemp template) becomes the checkpoint of 2 steps of `ember train mlp` on the noise
 * data. */
static void two_step_checkpoint(char *ckpt)
{
    char args[256];
    int fd = mkstemp(ckpt);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --max-steps 2 --save %s",
             data_dir, ckpt);
    expect(args, 0, "\"steps\":2");
}

/* A saved run names what it holds: resuming it with another optimizer, or evaluating it as
 * another recipe, is an error saying so. */
Test(cli, a_checkpoint_is_resumed_and_evaluated_only_as_what_it_is, .init = make_data,
     .fini = remove_data)
{
    char ckpt[] = "/tmp/ember_cli_ckpt_XXXXXX", args[256];
    two_step_checkpoint(ckpt);
    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --max-steps 3 --resume %s "
             "--optim sgd", data_dir, ckpt);
    expect(args, 1, "was saved by the optimizer {\"kind\":\"adamw\",\"lr\":0.001,");
    expect(args, 1, "this run's is {\"kind\":\"sgd\",\"lr\":0.001,");
    snprintf(args, sizeof args, "eval cnn --data %s --load %s", data_dir, ckpt);
    expect(args, 1, "holds a model of the mlp recipe, not of cnn");
    unlink(ckpt);
}

/* A model file names its recipe: `ember serve`, `ember bench serve` and `ember summary` take it
 * from there (bench serve assumed cnn). The summary of the quantized mlp counts its int8 weights
 * (784*512 + 512*256 + 256*10 = 535,040 bytes) and its per-channel f32 scales and biases (2 x
 * (512 + 256 + 10) = 1,556, 6,224 bytes) as non-trainable parameters: 536,596 in 541,264 bytes. */
Test(cli, model_commands_read_the_recipe_from_the_file, .init = make_data, .fini = remove_data)
{
    char dir[128], args[512], cmd[1024];
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_cli_recipe_"));
    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --no-val --save %s/mlp.ckpt",
             data_dir, dir);
    expect(args, 0, "\"recipe\":\"mlp\"");
    snprintf(args, sizeof args, "quantize mlp --data %s --load %s/mlp.ckpt --save %s/q.st",
             data_dir, dir, dir);
    expect(args, 0, "\"qscheme\":\"per_channel\"");
    snprintf(args, sizeof args, "summary --load %s/q.st", dir);
    expect(args, 0, "  0 (QuantizedLinear)                    [1,512]                     402,432");
    expect(args, 0, "Total params: 536,596\nTrainable params: 0\nNon-trainable params: 536,596\n"
                    "Params size: 541,264 bytes");
    expect("summary", 2, "ember summary: give RECIPE or --load FILE");
    snprintf(args, sizeof args, "bench serve --load %s/mlp.ckpt --only batching --seconds 0.5 "
             "--clients 2 --threads 1", dir);
    expect(args, 0, "ember bench serve: mlp (");
    snprintf(cmd, sizeof cmd, "'%s' serve --load %s/mlp.ckpt --port 0 >%s/serve.out 2>&1 & "
             "pid=$!; for i in $(seq 200); do grep -q serving %s/serve.out && break; sleep 0.05; "
             "done; kill -TERM $pid; wait $pid", getenv("EMBER_BIN"), dir, dir, dir);
    cr_expect_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -q '^{\"serving\":\"mlp\",' %s/serve.out", dir);
    cr_expect_eq(system(cmd), 0, "ember serve did not serve the mlp");
    snprintf(args, sizeof args, "serve --load %s/nothing.st", dir);
    expect(args, 1, "ember serve: em_safetensors_load:");
    em_test_remove_tree(dir);
}

/* Commands about image classifiers list only those recipes in --help (gpt is a language
 * model); training commands and export (which writes gpt too) list every recipe. */
Test(cli, help_lists_the_recipes_a_command_takes)
{
    const char *built[] = {"serve", "summary", "quantize", "prune", "bench infer",
                           "bench serve"};
    for (size_t i = 0; i < sizeof built / sizeof *built; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", built[i]);
        outcome o = run(args);
        cr_expect_eq(o.status, 0, "%s", args);
        cr_expect(strstr(o.out, "  deepmlp  ") && !strstr(o.out, "  gpt  "), "%s:\n%s", args,
                  o.out);
    }
    expect("train --help", 0, "  gpt      ");
    expect("export --help", 0, "  gpt      ");
    expect("serve --help", 0, "usage: ember serve [RECIPE] [options]");
    expect("summary nosuch", 2, "ember summary: unknown recipe 'nosuch'\n\nrecipes:\n  mlp");
    outcome o = run("summary nosuch");
    cr_expect(!strstr(o.out, "  gpt  "), "%s", o.out);
}

/* The learning rate after 5 of a run's 9 updates (3 epochs of 3 batches) under each schedule:
 * PyTorch 1.13's CosineAnnealingLR(T_max=9), OneCycleLR(max_lr=0.01, total_steps=9) and
 * StepLR(step_size=3, gamma=0.1) on SGD(lr=0.01), stepped 5 times; warmup-cosine by hand:
 * warmup 1 update, then 0.01 * (1 + cos(pi * (5 - 1) / (9 - 1))) / 2 = 0.005. */
Test(cli, every_schedule_reaches_pytorchs_learning_rate, .init = make_data, .fini = remove_data)
{
    const struct {
        const char *name;
        double lr;
    } cases[] = {{"constant", 0.01}, {"cosine", 0.004131759111665349},
                 {"warmup-cosine", 0.005}, {"onecycle", 0.00462637102666975},
                 {"step", 0.001}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "train mlp --data %s --epochs 3 --batch 32 --lr 0.01 "
                 "--max-steps 5 --workers 0 --no-val --schedule %s", data_dir, cases[i].name);
        json_t *j = run_json(args, NULL);
        cr_expect_str_eq(str(j, "schedule"), cases[i].name);
        cr_expect_eq(num(j, "steps"), 5);
        cr_expect(fabs(num(j, "lr") - cases[i].lr) <= 1e-12 * cases[i].lr,
                  "%s: lr %.17g, expected %.17g", cases[i].name, num(j, "lr"), cases[i].lr);
        json_decref(j);
    }
}

/* plateau: with SGD at lr 1e-6 the validation loss of noise moves far less than the threshold
 * (1e-4 relative), so epoch 1 sets the best, epochs 2 and 3 do not improve, and after epoch 3
 * (more than patience 1 bad epochs) the lr is cut to 1e-7, as PyTorch's ReduceLROnPlateau does;
 * each epoch's line on stderr carries its validation results. */
Test(cli, plateau_cuts_after_epochs_without_improvement, .init = make_data, .fini = remove_data)
{
    char args[256], err_path[] = "/tmp/ember_cli_err_XXXXXX";
    int fd = mkstemp(err_path);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "train mlp --data %s --epochs 4 --batch 32 --optim sgd --lr 1e-6 "
             "--workers 0 --schedule plateau", data_dir);
    json_t *j = run_json(args, err_path);
    cr_expect(fabs(num(j, "lr") - 1e-7) <= 1e-19, "lr %.17g", num(j, "lr"));
    cr_expect_eq(num(j, "steps"), 12);
    json_decref(j);
    FILE *f = fopen(err_path, "r");
    cr_assert(f);
    char err[8192];
    size_t n = fread(err, 1, sizeof err - 1, f);
    err[n] = 0;
    fclose(f);
    unlink(err_path);
    for (int e = 1; e <= 4; e++) {
        char line[64];
        snprintf(line, sizeof line, "epoch %d/4 loss ", e);
        const char *at = strstr(err, line);
        cr_expect(at && strstr(at, "val_loss ") && strstr(at, "val_acc "), "%s", err);
    }
    cr_expect(strstr(err, "lr 1e-06 "), "%s", err);
    cr_expect(strstr(err, "epoch 4/4 loss ") && strstr(strstr(err, "epoch 4/4 loss "), "lr 1e-07"),
              "%s", err);
}

static bool flag(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    cr_assert(json_is_boolean(v), "\"%s\" is no boolean", key);
    return json_is_true(v);
}

/* A preset turns on its bundle and the summary says so; options given beside it win. With 3
 * micro-batches and accumulation over 2 the epoch takes 2 updates (the last one partial). */
Test(cli, presets_turn_on_their_techniques_and_say_so, .init = make_data, .fini = remove_data)
{
    char args[256];
    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --batch 32 --workers 0 --no-val",
             data_dir);
    json_t *j = run_json(args, NULL);
    cr_expect(json_is_null(json_object_get(j, "preset")));
    cr_expect_str_eq(str(j, "amp"), "off");
    cr_expect_str_eq(str(j, "schedule"), "cosine");
    cr_expect(!flag(j, "guard") && !flag(j, "checkpoint_activations"));
    cr_expect_eq(num(j, "clip"), 0);
    json_decref(j);

    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --batch 32 --workers 0 --no-val "
             "--preset basic", data_dir);
    j = run_json(args, NULL);
    cr_expect_str_eq(str(j, "preset"), "basic");
    cr_expect(flag(j, "guard") && !flag(j, "checkpoint_activations"));
    cr_expect_eq(num(j, "clip"), 1);
    cr_expect_str_eq(str(j, "amp"), "off");
    json_decref(j);

    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --batch 32 --workers 0 --no-val "
             "--preset ultra", data_dir);
    j = run_json(args, NULL);
    cr_expect_str_eq(str(j, "preset"), "ultra");
    cr_expect_str_eq(str(j, "amp"), "bf16");
    cr_expect_str_eq(str(j, "schedule"), "warmup-cosine");
    cr_expect(flag(j, "guard") && flag(j, "checkpoint_activations"));
    cr_expect_eq(num(j, "clip"), 1);
    cr_expect_eq(num(j, "grad_accum"), 2);
    cr_expect_eq(num(j, "steps"), 3);
    cr_expect_eq(num(j, "updates"), 2);
    json_decref(j);

    snprintf(args, sizeof args, "train mlp --data %s --epochs 1 --batch 32 --workers 0 --no-val "
             "--preset advanced --amp off --clip 0.5 --schedule step", data_dir);
    j = run_json(args, NULL);
    cr_expect_str_eq(str(j, "preset"), "advanced");
    cr_expect_str_eq(str(j, "amp"), "off");
    cr_expect_str_eq(str(j, "schedule"), "step");
    cr_expect_eq(num(j, "clip"), 0.5);
    cr_expect(flag(j, "guard"));
    cr_expect_eq(num(j, "grad_accum"), 1);
    json_decref(j);
}

/* `ember eval` prints what the evaluation measured and nothing of training: the saved model's
 * test accuracy and loss, the same the training run's last validation measured. */
Test(cli, eval_prints_eval_fields_only, .init = make_data, .fini = remove_data)
{
    char ckpt[] = "/tmp/ember_cli_ckpt_XXXXXX", args[256];
    int fd = mkstemp(ckpt);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "train mlp --data %s --epochs 2 --batch 32 --workers 0 --save %s",
             data_dir, ckpt);
    json_t *train = run_json(args, NULL);
    snprintf(args, sizeof args, "eval mlp --data %s --load %s", data_dir, ckpt);
    json_t *eval = run_json(args, NULL);
    unlink(ckpt);
    const char *keys[] = {"recipe", "load", "test_acc", "test_loss", "peak_bytes", "wall_s"};
    cr_expect_eq(json_object_size(eval), sizeof keys / sizeof keys[0], "%s",
                 json_dumps(eval, 0));
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_expect(json_object_get(eval, keys[i]), "no \"%s\"", keys[i]);
    cr_expect_str_eq(str(eval, "load"), ckpt);
    cr_expect_eq(num(eval, "test_acc"), num(train, "test_acc"));
    cr_expect_eq(num(eval, "test_loss"), num(train, "test_loss"));
    json_decref(eval);
    json_decref(train);
}

/* `ember lr-find`: the curve's rates are start (end / start)^(i / num_iter), its first
 * smoothed loss is the first loss (the bias correction), the suggestion is em_lr_suggestion of
 * the curve it printed, and the range is checked before any data loads. */
Test(cli, lr_find_prints_the_range_tests_curve, .init = make_data, .fini = remove_data)
{
    char args[256];
    snprintf(args, sizeof args, "lr-find mlp --data %s --batch 32 --num-iter 20 --start-lr 1e-5 "
             "--end-lr 0.01", data_dir);
    json_t *j = run_json(args, NULL);
    cr_expect_str_eq(str(j, "recipe"), "mlp");
    int n = (int)num(j, "updates");
    cr_assert(n == 20, "the loss of noise diverged at lr <= 0.01: %d updates", n);
    double lr[20], loss[20], smoothed[20];
    for (int i = 0; i < n; i++) {
        lr[i] = json_number_value(json_array_get(json_object_get(j, "lr"), (size_t)i));
        loss[i] = json_number_value(json_array_get(json_object_get(j, "loss"), (size_t)i));
        smoothed[i] = json_number_value(json_array_get(json_object_get(j, "smoothed"),
                                                       (size_t)i));
        double want = 1e-5 * pow(1e3, i / 20.0);
        cr_expect(fabs(lr[i] - want) <= 1e-12 * want, "lr[%d] %.17g, want %.17g", i, lr[i],
                  want);
        cr_expect(isfinite(loss[i]) && loss[i] > 0, "loss[%d] %g", i, loss[i]);
    }
    cr_expect(fabs(smoothed[0] - loss[0]) <= 1e-12 * loss[0], "%.17g vs %.17g", smoothed[0],
              loss[0]);
    cr_expect_eq(num(j, "suggestion"), em_lr_suggestion(lr, smoothed, n));
    json_decref(j);
    expect("lr-find mlp --start-lr 0.1 --end-lr 0.01 --data /nonexistent", 2,
           "--start-lr 0.1 is not below --end-lr 0.01");
    expect("lr-find mlp --num-iter 1 --data /nonexistent", 2, "--num-iter");
}

/* `ember summary` prints the module table with the parameter counts computed by hand:
 * mlp 784*512+512 + 512*256+256 + 256*10+10; cnn 1*32*9+32 + 32*64*9+64 + 3136*128+128 +
 * 128*10+10. */
Test(cli, summary_prints_the_module_table)
{
    expect("summary mlp", 0, "Total params: 535,818\n");
    expect("summary cnn", 0, "Total params: 421,642\n");
    expect("summary cnn", 0, "Input shape: [1,1,28,28]\n");
    expect("summary --help", 0, "usage: ember summary");
}

/* `ember bench infer` beside onnxruntime: the ONNX file ember exports of the model runs there at
 * both batch sizes, f32 and int8, in each of the two rounds (its version and accuracy printed
 * once), and its f32 accuracy on the test images is `ember eval`'s; the ceiling counts the
 * batch's multiply-adds as 784-512-256-10 makes them: 64 x (784 x 512 + 512 x 256 + 256 x 10) =
 * 34,242,560. */
Test(cli, bench_infer_runs_the_exported_model_in_onnxruntime, .init = make_data,
     .fini = remove_data)
{
    char ckpt[] = "/tmp/ember_cli_ckpt_XXXXXX", args[256];
    two_step_checkpoint(ckpt);
    snprintf(args, sizeof args, "eval mlp --data %s --load %s", data_dir, ckpt);
    json_t *eval = run_json(args, NULL);
    snprintf(args, sizeof args, "bench infer mlp --data %s --load %s --iters 20 --no-torch",
             data_dir, ckpt);
    outcome o = run(args);
    unlink(ckpt);
    cr_assert_eq(o.status, 0, "%s", o.out);
    const char *rows[] = {"\nort_f32           1 ", "\nort_int8          1 ",
                          "\nort_f32          64 ", "\nort_int8         64 ",
                          "\nember_f32 vs ort_f32, p50 speed-up", "onnxruntime 1.",
                          "\nceiling at batch 64: 34.2M multiply-adds; ", " 2 rounds, "};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        cr_expect(strstr(o.out, rows[i]), "'%s' not in:\n%s", rows[i] + 1, o.out);
    const char *version = strstr(o.out, "onnxruntime 1.");
    cr_expect(version && !strstr(version + 1, "onnxruntime 1."), "printed twice:\n%s", o.out);
    const char *acc = strstr(o.out, "ort_f32 test_acc ");
    cr_assert(acc, "%s", o.out);
    cr_expect_float_eq(strtod(acc + strlen("ort_f32 test_acc "), NULL), num(eval, "test_acc"),
                       1e-9, "%s", o.out);
    json_decref(eval);
}

/* `ember bench train --json` on the noise data without PyTorch: every case with the FLOPs per
 * sample computed by hand (tests/nn/test_flops.c), a GEMM bound, ember train's rate beside the
 * step rate, the team its steps ran with, and null where PyTorch did not run. */
Test(cli, bench_train_writes_its_figures_as_json, .init = make_data, .fini = remove_data)
{
    char path[160], args[400];
    snprintf(path, sizeof path, "%s/bench.json", data_dir);
    snprintf(args, sizeof args, "bench train --data %s --only fashion --rounds 1 --steps 10 "
             "--json %s", data_dir, path);
    setenv("EMBER_PYTHON", "/bin/false", 1);
    outcome o = run(args);
    unsetenv("EMBER_PYTHON");
    cr_assert_eq(o.status, 0, "%s", o.out);
    cr_expect(strstr(o.out, "% of bound") && strstr(o.out, "% of OpenBLAS"), "%s", o.out);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    unlink(path);
    cr_assert(json_is_object(j), "%s", e.text);
    cr_expect_str_eq(str(j, "device"), "cpu");
    cr_expect(json_is_null(json_object_get(j, "torch")), "the PyTorch that did not run is null");
    cr_expect(strstr(o.out, "beside no PyTorch (its half did not run)"), "%s", o.out);
    cr_expect(json_is_false(json_object_get(j, "cuda_graph")));
    const json_t *cases = json_object_get(j, "cases");
    cr_assert_eq(json_array_size(cases), 3);
    const char *names[] = {"mlp_b64", "mlp_b256", "cnn_b64"};
    const double flops[] = {2407424, 2407424, 24995328};
    for (size_t i = 0; i < 3; i++) {
        const json_t *c = json_array_get(cases, i);
        cr_expect_str_eq(str(c, "case"), names[i]);
        cr_expect_eq(num(c, "flops_per_sample"), flops[i], "%s", names[i]);
        cr_expect_gt(num(c, "samples_per_s"), 0);
        cr_expect_gt(num(c, "gemm_bound_gflops"), 0);
        cr_expect_gt(num(c, "gemm_bound_pct"), 0);
        /* the bound takes each product the faster way, one of them OpenBLAS's threads */
        cr_expect_gt(num(c, "openblas_bound_gflops"), 0);
        cr_expect_geq(num(c, "gemm_bound_gflops"), num(c, "openblas_bound_gflops"), "%s",
                      names[i]);
        cr_expect_geq(num(c, "openblas_bound_pct"), num(c, "gemm_bound_pct"), "%s", names[i]);
        cr_expect_gt(num(c, "train_samples_per_s"), 0);
        /* the governor's team: the 2 threads a test runs with, fewer while others are busy */
        cr_expect(num(c, "team") >= 1 && num(c, "team") <= 2, "%s: team %g", names[i],
                  num(c, "team"));
        /* samples/s is written rounded to a whole number, GFLOP/s to 2 places */
        cr_expect(fabs(num(c, "gflops") - flops[i] * num(c, "samples_per_s") * 1e-9) <=
                  flops[i] * 0.5e-9 + 0.005, "%s: %g GFLOP/s", names[i], num(c, "gflops"));
        cr_expect(json_is_null(json_object_get(c, "torch_samples_per_s")));
    }
    json_decref(j);
}

/* `ember bench train --gpt-data DIR` reads gpt's text from DIR, and names it when it cannot. */
Test(cli, bench_train_names_a_missing_gpt_text)
{
    outcome o = run("bench train --only gpt --rounds 1 --gpt-steps 1 --gpt-data /nonexistent/text");
    cr_expect_eq(o.status, 1, "%s", o.out);
    cr_expect(strstr(o.out, "gpt: cannot read the fortunes in /nonexistent/text"), "%s", o.out);
}

/* `ember bench train --only gpt` under f16 autocast (its grad scaler unscaling before the
 * clipping) without PyTorch: the three gpt cases train, each with a rate and null beside it. */
Test(cli, bench_train_runs_the_gpt_cases_under_autocast, .init = make_data, .fini = remove_data)
{
    char path[160], args[400];
    snprintf(path, sizeof path, "%s/bench_gpt.json", data_dir);
    snprintf(args, sizeof args, "bench train --only gpt --amp f16 --rounds 1 --gpt-steps 1 "
             "--json %s", path);
    setenv("EMBER_PYTHON", "/bin/false", 1);
    outcome o = run(args);
    unsetenv("EMBER_PYTHON");
    cr_assert_eq(o.status, 0, "%s", o.out);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    unlink(path);
    cr_assert(json_is_object(j), "%s", e.text);
    cr_expect_str_eq(str(j, "amp"), "f16");
    const char *names[] = {"gpt_b32", "gpt_b8_t256", "gpt_b64_t256"};
    for (size_t i = 0; i < 3; i++) {
        const json_t *g = json_object_get(j, names[i]);
        cr_assert(json_is_object(g), "%s missing", names[i]);
        cr_expect_gt(num(g, "tokens_per_s"), 0, "%s", names[i]);
        cr_expect(json_is_null(json_object_get(g, "torch_tokens_per_s")), "%s", names[i]);
    }
    json_decref(j);
}

/* `ember bench train --cases` runs those cases alone; with --cuda-graph on the CPU, which has no
 * device graphs, the steps run eagerly and say why. */
Test(cli, bench_train_runs_the_cases_named)
{
    char path[160], args[400];
    snprintf(path, sizeof path, "/tmp/ember-bench-cases-%d.json", (int)getpid());
    snprintf(args, sizeof args, "bench train --cases gpt_b32 --cuda-graph --rounds 1 "
             "--gpt-steps 1 --json %s", path);
    setenv("EMBER_PYTHON", "/bin/false", 1);
    outcome o = run(args);
    unsetenv("EMBER_PYTHON");
    cr_assert_eq(o.status, 0, "%s", o.out);
    cr_expect(strstr(o.out, "ember: cuda graph: cpu has no device graphs; running eagerly"), "%s",
              o.out);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    unlink(path);
    cr_assert(json_is_object(j), "%s", e.text);
    cr_expect(json_is_true(json_object_get(j, "cuda_graph")));
    cr_expect_eq(json_array_size(json_object_get(j, "cases")), 0);
    cr_expect(json_is_object(json_object_get(j, "gpt_b32")));
    cr_expect(!json_object_get(j, "gpt_b8_t256") && !json_object_get(j, "gpt_b64_t256"));
    json_decref(j);
}

/* The stdout of `ember info` run under `env ENV` into out (n bytes); it must exit 0. */
static void info_with(const char *env, char *out, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env %s %s info", env, getenv("EMBER_BIN"));
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = 0;
    cr_expect_eq(pclose(p), 0, "%s failed:\n%s", cmd, out);
}

/* `ember info` without a wait policy in the environment: ember's GOMP_SPINCOUNT, set before
 * libgomp loaded (the command ran itself again); one the user sets is kept. */
Test(cli, the_wait_policy_is_embers_unless_the_environment_sets_one)
{
    char out[2048];
    const char *envs[] = {"-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT",
                          "-u GOMP_SPINCOUNT OMP_WAIT_POLICY=active"};
    const char *want[] = {"OpenMP wait policy: GOMP_SPINCOUNT=10000 (ember's default)\n",
                          "OpenMP wait policy: OMP_WAIT_POLICY=active GOMP_SPINCOUNT=unset "
                          "(the environment's)\n"};
    for (int i = 0; i < 2; i++) {
        info_with(envs[i], out, sizeof out);
        cr_expect(strstr(out, want[i]), "'%s' not in:\n%s", want[i], out);
    }
}

/* The CPU backend runs OpenBLAS's widest kernel set for this CPU: a DYNAMIC_ARCH OpenBLAS that
 * does not know the CPU's model falls back to SSE3 kernels (Prescott), several times slower, and
 * ember then chooses again; a set the user names in OPENBLAS_CORETYPE is kept. */
Test(cli, openblas_runs_the_widest_kernels_the_cpu_has_unless_the_user_names_a_set)
{
    const char *envs[] = {"-u OPENBLAS_CORETYPE", "OPENBLAS_CORETYPE=Prescott"};
    for (int i = 0; i < 2; i++) {
        char out[2048];
        info_with(envs[i], out, sizeof out);
        if (i == 1) {
            cr_expect(strstr(out, "OpenBLAS Prescott kernels\n"), "%s", out);
            continue;
        }
        if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
            continue; /* no wider set exists for this CPU */
        const char *wide[] = {"OpenBLAS Haswell ", "OpenBLAS Zen ", "OpenBLAS SkylakeX ",
                              "OpenBLAS Cooperlake ", "OpenBLAS SapphireRapids ",
                              "OpenBLAS Excavator "};
        bool found = false;
        for (size_t k = 0; k < sizeof wide / sizeof *wide; k++)
            found = found || strstr(out, wide[k]);
        cr_expect(found, "an AVX2 CPU runs pre-AVX2 OpenBLAS kernels:\n%s", out);
    }
}

/* `ember info` names what multiplies each kind of product: oneDNN on the CPU's bf16 instructions
 * where it has them, ember's own kernels with EMBER_DNNL=0 or EMBER_CPU_ISA=avx2. */
Test(cli, info_names_the_engine_of_each_product)
{
    char out[2048];
    info_with("-u EMBER_DNNL -u EMBER_CPU_ISA", out, sizeof out);
    bool bf16 = __builtin_cpu_supports("avx512bf16"); /* AMX-BF16 CPUs have it too */
    cr_expect(strstr(out, bf16 ? "\nbf16  oneDNN " : "\nbf16  ember, widened to f32 ("), "%s",
              out);
    info_with("EMBER_DNNL=0", out, sizeof out);
    cr_expect(strstr(out, "\nbf16  ember, widened to f32 (EMBER_DNNL=0)\n"), "%s", out);
    cr_expect(strstr(out, " tiles (EMBER_DNNL=0)\n"), "%s", out);
    info_with("EMBER_CPU_ISA=avx2", out, sizeof out);
    cr_expect(strstr(out, "AVX-512 no"), "%s", out);
    cr_expect(strstr(out, "\nbf16  ember, widened to f32 (EMBER_CPU_ISA=avx2)\n"), "%s", out);
}

/* `ember export` refuses NaN weights, naming the tensor, and writes them with --allow-nonfinite. */
Test(cli, export_refuses_nonfinite_weights_unless_allowed)
{
    em_module *mlp = em_sequential(5, em_linear_layer(784, 512, true), em_relu_layer(),
                                   em_linear_layer(512, 256, true), em_relu_layer(),
                                   em_linear_layer(256, 10, true)); /* the mlp recipe's */
    cr_assert_not_null(mlp, "%s", em_error());
    ((float *)em_data_ptr(mlp->children[2].module->params[1].value))[7] = NAN;
    char model[] = "/tmp/ember_cli_nan_XXXXXX", onnx[64], args[256];
    close(mkstemp(model));
    snprintf(onnx, sizeof onnx, "%s.onnx", model);
    cr_assert_eq(em_module_save(mlp, model, NULL, 0), EM_OK, "%s", em_error());
    em_module_free(mlp);
    snprintf(args, sizeof args, "export mlp --load %s --onnx %s", model, onnx);
    expect(args, 1, "ember export: em_onnx_export: '2.bias' holds 1 NaN or Inf values of 256");
    cr_expect_neq(access(onnx, F_OK), 0, "no file may be written");
    snprintf(args, sizeof args, "export mlp --load %s --onnx %s --allow-nonfinite", model, onnx);
    expect(args, 0, "\"opset\":17");
    cr_expect_eq(access(onnx, F_OK), 0);
    unlink(onnx);
    unlink(model);
}
