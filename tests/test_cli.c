/* The `ember` command itself: every command and subcommand answers --help, and a bad option
 * value, an unknown option or a missing operand ends it with status 2 and one clear line before
 * it loads any data (the data directory given here does not exist). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helpers/ember_cli.h"

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

static void expect(const char *args, int status, const char *text)
{
    outcome o = run(args);
    cr_expect_eq(o.status, status, "ember %s: exit %d, expected %d; output:\n%s", args, o.status,
                 status, o.out);
    cr_expect(strstr(o.out, text), "ember %s: '%s' not in:\n%s", args, text, o.out);
}

Test(cli, every_command_has_help)
{
    const char *cmds[] = {"info", "demo", "train", "eval", "compare", "profile", "quantize",
                          "prune", "bench ops", "bench train", "bench infer", "bench attention",
                          "sample", "bench sample"};
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
    expect("train cnn " NO_DATA " --grad-accum 0", 2, "--grad-accum: 0 is out of range");
    expect("train cnn " NO_DATA " --threads abc", 2, "--threads: 'abc' is not an integer");
    expect("train cnn " NO_DATA " --max-steps -5", 2, "--max-steps: -5 is out of range");
    expect("train cnn " NO_DATA " --optim bogus", 2,
           "ember train: --optim: 'bogus' is not one of sgd, adam, adamw, rmsprop\n");
    expect("train cnn " NO_DATA " --optim=bogus", 2, "'bogus' is not one of");
    expect("train cnn " NO_DATA " --amp f8", 2, "--amp: 'f8' is not one of f16, bf16, off");
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
    expect("bench train --rounds 0", 2, "--rounds: 0 is out of range");
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
    expect("train cnn " NO_DATA " --profile /nonexistent/dir/t.json", 2,
           "ember train: --profile: cannot write '/nonexistent/dir/t.json'");
    expect("profile cnn " NO_DATA " --trace /nonexistent/dir/t.json", 2,
           "ember profile: --trace: cannot write '/nonexistent/dir/t.json'");
}

Test(cli, equals_spelling_reaches_the_run)
{
    /* well-formed options get as far as loading the (missing) data, and fail there */
    outcome o = run("train cnn --epochs=1 --lr=0.01 --optim=adam --data=/nonexistent/ember-test");
    cr_expect_eq(o.status, 1, "%s", o.out);
    cr_expect(strstr(o.out, "/nonexistent/ember-test"), "%s", o.out);
}

/* A saved run names what it holds: resuming it with another optimizer, or evaluating it as
 * another recipe, is an error saying so (needs the Fashion-MNIST package). */
Test(cli, a_checkpoint_is_resumed_and_evaluated_only_as_what_it_is)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
        cr_skip_test("Fashion-MNIST is not installed");
        return;
    }
    char ckpt[] = "/tmp/ember_cli_ckpt_XXXXXX", args[256];
    int fd = mkstemp(ckpt);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "train mlp --epochs 1 --max-steps 2 --save %s", ckpt);
    expect(args, 0, "\"steps\":2");
    snprintf(args, sizeof args, "train mlp --epochs 1 --max-steps 3 --resume %s --optim sgd",
             ckpt);
    expect(args, 1, "was saved by the optimizer {\"kind\":\"adamw\",\"lr\":0.001,");
    expect(args, 1, "this run's is {\"kind\":\"sgd\",\"lr\":0.001,");
    snprintf(args, sizeof args, "eval cnn --load %s", ckpt);
    expect(args, 1, "holds a model of the mlp recipe, not of cnn");
    unlink(ckpt);
}
