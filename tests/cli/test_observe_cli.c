/* The observability commands on the real data (Fashion-MNIST, installed by setup.sh): `ember
 * profile` prints its tables and writes a trace a viewer takes; `ember train --tensorboard`
 * writes event files TensorBoard's loader reads, one loss per micro-batch; the gpt recipe, which
 * trains itself, is watched the same way; a resumed run's steps continue the first run's, and
 * --save-every writes checkpoints within an epoch. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/ember_cli.h"
#include "helpers/files.h"
#include "helpers/venv.h"

Test(observe_cli, profile_prints_the_tables_and_writes_a_trace)
{
    if (em_test_venv_skip())
        return;
    char dir[] = "/tmp/ember_profile_cli_XXXXXX", args[512], out[16384], trace[128];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/mlp.json", dir);
    snprintf(args, sizeof args, "profile mlp --warmup 1 --steps 3 --threads 2 --trace %s", trace);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "ember profile mlp on cpu: micro-batches 2 to 4 of batch 64"), "%s", out);
    cr_expect(strstr(out, "ember profiler: 3 steps"), "%s", out);
    cr_expect(strstr(out, "linear_backward") && strstr(out, "optimizer.step") &&
              strstr(out, "loader.next"), "%s", out);
    cr_expect(strstr(out, "  0 (Linear)"), "the layer-wise table:\n%s", out);
    char *checked = em_test_venv_output("trace_check.py", trace);
    cr_assert_not_null(checked);
    cr_expect(strstr(checked, "event linear|main: forward: 9\n"), "three Linear layers, three "
              "steps:\n%s", checked);
    free(checked);
    unlink(trace);
    rmdir(dir);
}

Test(observe_cli, train_writes_tensorboard_event_files)
{
    if (em_test_venv_skip())
        return;
    char dir[] = "/tmp/ember_tb_cli_XXXXXX", args[512], out[16384];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(args, sizeof args, "train mlp --max-steps 12 --epochs 1 --no-val --threads 2 "
             "--tensorboard %s/run --histogram-every 5", dir);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    char path[512];
    snprintf(args, sizeof args, "%s/run", dir);
    cr_assert(em_test_only_file(args, "events.out.tfevents.", path, sizeof path), "%s", args);
    char *read = em_test_venv_output("tb_read.py", path);
    cr_assert_not_null(read);
    int losses = 0, weights = 0;
    for (char *line = strtok(read, "\n"); line; line = strtok(NULL, "\n")) {
        losses += !strncmp(line, "scalar", 6) && strstr(line, " train/loss ");
        weights += !strncmp(line, "histo", 5) && strstr(line, " weights/0.weight ");
    }
    cr_expect_eq(losses, 12, "one loss per micro-batch");
    cr_expect_eq(weights, 2, "weights at micro-batches 5 and 10");
    free(read);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_assert_eq(system(args), 0);
}

Test(observe_cli, gpt_is_profiled_and_logged)
{
    if (em_test_venv_skip())
        return;
    char dir[] = "/tmp/ember_gpt_observe_XXXXXX", args[768], out[16384], path[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/text", dir); /* a "fortune file" */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 600; i++)
        fputs(i % 7 == 6 ? "%\n" : "the cat sat on a mat.\n", f);
    fclose(f);
    snprintf(args, sizeof args, "train gpt --data %s --max-steps 3 --batch 2 --threads 2 "
             "--tensorboard %s/run --profile %s/gpt.json --profile-steps 2:3", dir, dir, dir);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "ember profiler: 2 steps"), "%s", out);
    cr_expect(strstr(out, "  h.0 (TransformerEncoderLayer)"), "the layer-wise table:\n%s", out);
    snprintf(path, sizeof path, "%s/gpt.json", dir);
    char *checked = em_test_venv_output("trace_check.py", path);
    cr_assert_not_null(checked);
    cr_expect(strstr(checked, "event h.3.linear2 (Linear)|main: forward: 2\n"), "%s", checked);
    cr_expect(strstr(checked, "\nok\n"), "%s", checked);
    free(checked);
    snprintf(args, sizeof args, "%s/run", dir);
    cr_assert(em_test_only_file(args, "events.out.tfevents.", path, sizeof path), "%s", args);
    char *read = em_test_venv_output("tb_read.py", path);
    cr_assert_not_null(read);
    int losses = 0;
    for (char *line = strtok(read, "\n"); line; line = strtok(NULL, "\n"))
        losses += !strncmp(line, "scalar", 6) && strstr(line, " train/loss ");
    cr_expect_eq(losses, 3, "one loss per micro-batch:\n%s", read);
    free(read);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_assert_eq(system(args), 0);
}

/* The steps of the train/loss scalars that TensorBoard's loader reads from the event files of
 * logdir, in the order the files were opened, into steps (max); how many there are. */
static int loss_steps(const char *logdir, long *steps, int max)
{
    char *read = em_test_venv_output("tb_read.py", logdir);
    cr_assert_not_null(read);
    int n = 0;
    long step;
    for (char *line = strtok(read, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, " train/loss ") && sscanf(line, "scalar %ld", &step) == 1 && n < max)
            steps[n++] = step;
    free(read);
    return n;
}

Test(observe_cli, a_resumed_run_continues_tensorboards_steps)
{
    if (em_test_venv_skip())
        return;
    char dir[128], args[768], out[16384];
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_tb_resume_"));
    const char *run = "train mlp --epochs 1 --no-val --threads 2 --max-steps 5";
    snprintf(args, sizeof args, "%s --save %s/ckpt --tensorboard %s/run", run, dir, dir);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    snprintf(args, sizeof args, "%s --resume %s/ckpt --tensorboard %s/run", run, dir, dir);
    cr_assert_eq(em_test_ember(args, out, sizeof out), 0, "%s", out);
    snprintf(args, sizeof args, "%s/run", dir);
    long steps[32];
    int n = loss_steps(args, steps, 32);
    cr_expect_eq(n, 10, "two runs of 5 micro-batches");
    for (int i = 0; i < n; i++)
        cr_expect_eq(steps[i], i + 1, "loss %d of the two runs is at step %ld", i, steps[i]);
    em_test_remove_tree(dir);
}

/* `--save-every 3`: the checkpoint appears within the first epoch; killed then, the run resumes
 * from a step that is a multiple of 3, which TensorBoard's steps continue. */
Test(observe_cli, save_every_writes_checkpoints_within_an_epoch)
{
    if (em_test_venv_skip())
        return;
    char dir[128], cmd[1024], out[16384];
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_save_every_"));
    snprintf(cmd, sizeof cmd, "'%s' train mlp --epochs 1 --no-val --threads 2 --save %s/ckpt "
             "--save-every 3 >/dev/null 2>&1 & pid=$!; "
             "while [ ! -e %s/ckpt ] && kill -0 $pid 2>/dev/null; do sleep 0.01; done; "
             "kill -KILL $pid; wait $pid; test -e %s/ckpt", getenv("EMBER_BIN"), dir, dir, dir);
    cr_assert_eq(system(cmd), 0, "no checkpoint within the epoch");
    snprintf(cmd, sizeof cmd, "train mlp --epochs 1 --no-val --threads 2 --max-steps 2 "
             "--resume %s/ckpt --tensorboard %s/run", dir, dir);
    cr_assert_eq(em_test_ember(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "%s/run", dir);
    long steps[4];
    cr_assert_eq(loss_steps(cmd, steps, 4), 2);
    cr_expect(steps[0] > 1 && (steps[0] - 1) % 3 == 0 && steps[1] == steps[0] + 1,
              "resumed at step %ld", steps[0]);
    em_test_remove_tree(dir);
}
