/* Watching a training run: every TensorBoard scalar and histogram of a small run read back by
 * TensorBoard's loader with its step (the loss and gradient norm equal to what the loop saw), a
 * resumed run's steps counting on and, after a crash past its checkpoint, shown once each by
 * TensorBoard's accumulator; the profiler over chosen micro-batches, the leak warning, and the
 * errors found before training. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/files.h"
#include "helpers/venv.h"

#define BATCHES 8

typedef struct {
    em_module *net;
    em_optim *opt;
    em_dataset *ds, *val;
    em_loader *dl;
    em_trainer *t;
    em_tensor *x, *y;
    double loss[2 * BATCHES + 1], norm[2 * BATCHES + 1]; /* by step of this trainer, from 1 */
    int64_t step;
    em_tensor *kept[4 * BATCHES]; /* a leaking loss keeps one tensor a call (validation too) */
    int n_kept;
} run;

static void on_step(void *ctx, const em_progress *p)
{
    run *r = ctx;
    r->step = p->step;
    r->loss[p->step] = p->loss;
}

static em_status before_update(void *ctx, em_optim *optim)
{
    (void)optim;
    run *r = ctx;
    em_tensor *ps[4];
    em_param_ref refs[4];
    cr_assert_eq(em_module_parameters(r->net, refs, 4), 4);
    for (int i = 0; i < 4; i++)
        ps[i] = refs[i].value;
    r->norm[r->step + 1] = em_grad_norm(ps, 4, 2.0);
    return EM_OK;
}

static em_tensor *leaking_loss(void *ctx, const em_tensor *out, const em_tensor *y)
{
    run *r = ctx;
    cr_assert_lt(r->n_kept, 4 * BATCHES);
    r->kept[r->n_kept++] = em_keep(em_zeros(EM_SHAPE(4096), EM_F32)); /* 16 KiB a step */
    return em_cross_entropy(out, y, (em_cross_entropy_opts){0});
}

/* A run of one epoch of BATCHES batches, validated on its training data; o adds options. */
static void make_run(run *r, bool leak, em_trainer_opts o)
{
    memset(r, 0, sizeof *r);
    em_manual_seed(11);
    r->net = em_sequential(3, em_linear_layer(6, 8, true), em_relu_layer(),
                           em_linear_layer(8, 3, true));
    r->opt = em_sgd(r->net, (em_sgd_opts){.lr = 0.1});
    r->x = em_randn(EM_SHAPE(4 * BATCHES, 6), EM_F32, NULL);
    r->y = em_randint(EM_SHAPE(4 * BATCHES), EM_I64, 0, 3, NULL);
    r->ds = em_tensor_dataset(r->x, r->y);
    r->val = em_tensor_dataset(r->x, r->y);
    r->dl = em_loader_new(r->ds, (em_loader_opts){.batch_size = 4});
    o.val = r->val;
    o.loss = leak ? leaking_loss : NULL;
    o.loss_ctx = r;
    r->t = em_trainer_new(r->net, r->opt, r->dl, o);
    cr_assert_not_null(r->t, "%s", em_error());
    cr_assert_eq(em_trainer_add_callbacks(r->t, (em_trainer_callbacks){
                     .ctx = r, .on_step = on_step, .before_update = before_update}), EM_OK);
}

static void free_run(run *r)
{
    em_trainer_free(r->t);
    em_loader_free(r->dl);
    em_dataset_free(r->ds);
    em_dataset_free(r->val);
    em_optim_free(r->opt);
    em_module_free(r->net);
    em_release(r->x);
    em_release(r->y);
    for (int i = 0; i < r->n_kept; i++)
        em_release(r->kept[i]);
}

/* The steps of tag's scalars or histograms in the reader's output, in the order the files and
 * records hold them, into steps (max of them; NULL: only counted); how many there are. */
static int steps_of(const char *out, const char *kind, const char *tag, long *steps, int max)
{
    int n = 0;
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1
                                                                          : NULL) {
        char k[16], t[96];
        long step;
        if (sscanf(line, "%15s %ld %95s", k, &step, t) == 3 && !strcmp(k, kind) &&
            !strcmp(t, tag)) {
            if (steps && n < max)
                steps[n] = step;
            n++;
        }
    }
    return n;
}

static int count_tag(const char *out, const char *kind, const char *tag)
{
    return steps_of(out, kind, tag, NULL, 0);
}

/* value of scalar tag at step in the reader's output; NAN when absent */
static double scalar_at(const char *out, const char *tag, long step)
{
    char needle[160];
    snprintf(needle, sizeof needle, "scalar %ld %s ", step, tag);
    const char *p = strstr(out, needle);
    return p ? strtod(p + strlen(needle), NULL) : NAN;
}

Test(observer, a_run_in_tensorboard_and_the_profiler)
{
    if (em_test_venv_skip())
        return;
    run r;
    make_run(&r, false, (em_trainer_opts){0});
    char dir[] = "/tmp/ember_observer_XXXXXX", trace[128], logdir[160], log_path[160];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    snprintf(logdir, sizeof logdir, "%s/tb", dir);
    snprintf(log_path, sizeof log_path, "%s/log.txt", dir);
    FILE *log = fopen(log_path, "w+");
    em_observer *ob = em_observer_new(r.t, r.net, (em_observe_opts){
        .tensorboard = logdir, .histogram_every = 2, .profile = trace, .profile_first = 2,
        .profile_last = 4, .log = log});
    cr_assert_not_null(ob, "%s", em_error());
    cr_assert_eq(em_trainer_fit(r.t, 1), EM_OK, "%s", em_error());
    cr_assert_eq(em_observer_free(ob), EM_OK, "%s", em_error());

    const em_profile_summary *s = em_profiler_summary();
    cr_assert_not_null(s);
    cr_expect_eq(s->steps, 3, "micro-batches 2, 3 and 4");
    rewind(log);
    char text[16384] = {0};
    cr_assert_gt(fread(text, 1, sizeof text - 1, log), 0);
    fclose(log);
    cr_expect(strstr(text, "ember profiler: 3 steps") && strstr(text, "linear_backward") &&
              strstr(text, "Chrome trace written to"), "%s", text);
    cr_expect(!strstr(text, "warning"), "%s", text);
    char *checked = em_test_venv_output("trace_check.py", trace);
    cr_assert_not_null(checked);
    cr_expect(strstr(checked, "\nok\n"), "the trace as a viewer reads it:\n%s", checked);
    free(checked);

    char path[512];
    cr_assert(em_test_only_file(logdir, "events.out.tfevents.", path, sizeof path), "%s", logdir);
    char *out = em_test_venv_output("tb_read.py", path);
    cr_assert_not_null(out);
    const char *per_step[] = {"train/loss", "train/lr", "train/loss_scale", "train/samples_per_s",
                              "train/grad_norm", "memory/cpu_live_mb", "memory/cpu_peak_mb",
                              "memory/cpu_reserved_mb"};
    for (int i = 0; i < 8; i++)
        cr_expect_eq(count_tag(out, "scalar", per_step[i]), BATCHES, "%s:\n%s", per_step[i], out);
    cr_expect_eq(count_tag(out, "scalar", "val/loss"), 1);
    cr_expect_eq(count_tag(out, "scalar", "val/accuracy"), 1);
    cr_expect_eq(count_tag(out, "scalar", "train/epoch_loss"), 1);
    const char *params[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    for (int i = 0; i < 4; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "weights/%s", params[i]);
        cr_expect_eq(count_tag(out, "histo", tag), BATCHES / 2, "%s:\n%s", tag, out);
        snprintf(tag, sizeof tag, "grads/%s", params[i]);
        cr_expect_eq(count_tag(out, "histo", tag), BATCHES / 2, "%s:\n%s", tag, out);
    }
    for (long step = 1; step <= BATCHES; step++) {
        cr_expect_eq(scalar_at(out, "train/loss", step), (double)(float)r.loss[step],
                     "loss at step %ld", step);
        cr_expect_eq(scalar_at(out, "train/grad_norm", step), (double)(float)r.norm[step],
                     "gradient norm at step %ld", step);
        cr_expect_eq(scalar_at(out, "train/lr", step), (double)0.1f);
    }
    free(out);
    free_run(&r);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(observer, a_leak_is_named_on_the_log)
{
    run r;
    make_run(&r, true, (em_trainer_opts){0});
    char path[] = "/tmp/ember_observer_log_XXXXXX";
    FILE *log = fdopen(mkstemp(path), "w+");
    em_observer *ob = em_observer_new(r.t, r.net, (em_observe_opts){.memory_window = 5,
                                                                    .log = log});
    cr_assert_not_null(ob, "%s", em_error());
    cr_assert_eq(em_trainer_fit(r.t, 1), EM_OK, "%s", em_error());
    cr_assert_eq(em_observer_free(ob), EM_OK);
    rewind(log);
    char text[4096] = {0};
    cr_assert_gt(fread(text, 1, sizeof text - 1, log), 0, "a warning was written");
    fclose(log);
    unlink(path);
    cr_expect(strstr(text, "ember: warning: cpu memory rises by 16384 bytes per step over the "
                           "last 5 steps") != NULL, "%s", text);
    free_run(&r);
}

Test(observer, bad_options_fail_before_training)
{
    run r;
    make_run(&r, false, (em_trainer_opts){0});
    cr_expect_null(em_observer_new(r.t, r.net, (em_observe_opts){
        .profile = "/nonexistent/dir/trace.json"}));
    cr_expect_eq(em_error_status(), EM_ERR_IO);
    cr_expect(strstr(em_error(), "/nonexistent/dir/trace.json") != NULL, "%s", em_error());
    em_error_clear();
    cr_expect_null(em_observer_new(r.t, r.net, (em_observe_opts){.tensorboard = "/proc/x/y"}));
    cr_expect(strstr(em_error(), "cannot create log directory '/proc/x'") != NULL, "%s",
              em_error());
    em_error_clear();
    cr_expect_null(em_observer_new(r.t, r.net, (em_observe_opts){
        .profile = "/tmp/t.json", .profile_first = 5, .profile_last = 3}));
    cr_expect_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
    cr_expect(!em_profiler_running());
    free_run(&r);
}

/* The reader's output holds train/loss once at each step of the two epochs, 1 to 2 BATCHES */
static void expect_each_step_once(const char *out)
{
    long steps[64];
    int n = steps_of(out, "scalar", "train/loss", steps, 64);
    cr_expect_eq(n, 2 * BATCHES, "%s", out);
    for (int i = 0; i < n; i++)
        cr_expect_eq(steps[i], i + 1, "point %d of train/loss is at step %ld", i, steps[i]);
}

/* Two epochs of a run with o (resumed from the checkpoint `resume` first when given, on_step
 * added when given) watched by an observer logging into logdir, histograms every 4 steps */
static void observed_fit(em_trainer_opts o, const char *resume,
                         void (*on_step)(void *ctx, const em_progress *p), const char *logdir)
{
    run r;
    make_run(&r, false, o);
    cr_assert(!resume || em_trainer_resume(r.t, resume) == EM_OK, "%s", em_error());
    cr_assert(!on_step || em_trainer_add_callbacks(r.t, (em_trainer_callbacks){
                              .on_step = on_step}) == EM_OK);
    em_observer *ob = em_observer_new(r.t, r.net, (em_observe_opts){.tensorboard = logdir,
                                                                    .histogram_every = 4});
    cr_assert_not_null(ob, "%s", em_error());
    cr_assert_eq(em_trainer_fit(r.t, 2), EM_OK, "%s", em_error());
    cr_assert_eq(em_observer_free(ob), EM_OK, "%s", em_error());
    free_run(&r);
}

/* A run stopped after 5 micro-batches and resumed from its checkpoint logs into the same
 * directory: read back in the order the files were opened, every point's step rises, the
 * resumed run's from 6 on, and the validation scalars sit at the last step of their epoch. */
Test(observer, a_resumed_run_counts_its_steps_on)
{
    if (em_test_venv_skip())
        return;
    char dir[128], ckpt[192], logdir[192];
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_observer_resume_"));
    snprintf(ckpt, sizeof ckpt, "%s/run.ckpt", dir);
    snprintf(logdir, sizeof logdir, "%s/tb", dir);
    observed_fit((em_trainer_opts){.checkpoint = ckpt, .max_steps = 5}, NULL, NULL, logdir);
    observed_fit((em_trainer_opts){.checkpoint = ckpt}, ckpt, NULL, logdir);
    char *out = em_test_venv_output("tb_read.py", logdir);
    cr_assert_not_null(out);
    expect_each_step_once(out);
    long steps[64];
    int n = steps_of(out, "scalar", "val/loss", steps, 64);
    cr_expect(n == 2 && steps[0] == BATCHES && steps[1] == 2 * BATCHES, "%s", out);
    n = steps_of(out, "scalar", "train/epoch_loss", steps, 64);
    cr_expect(n == 2 && steps[0] == BATCHES && steps[1] == 2 * BATCHES, "%s", out);
    n = steps_of(out, "histo", "weights/0.weight", steps, 64);
    cr_expect(n == 4 && steps[0] == 4 && steps[1] == 8 && steps[2] == 12 && steps[3] == 16,
              "%s", out);
    free(out);
    em_test_remove_tree(dir);
}

/* The crash a kill -9 leaves: a checkpoint at step 4 (checkpoint_every), then steps 5..7
 * logged before the process died. The copy taken at step 5 is that checkpoint. */
static char crash_from[192], crash_to[192];

static void keep_checkpoint(void *ctx, const em_progress *p)
{
    (void)ctx;
    if (p->global_step != 5)
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", crash_from, crash_to);
    cr_assert_eq(system(cmd), 0);
}

/* The run resumed from that checkpoint marks step 5 as a restart (em_tb_writer_purge): TensorBoard's
 * accumulator (tb_shown.py) shows every train/loss step once, 1 to 16; the raw records hold steps
 * 5, 6 and 7 twice (without the mark TensorBoard showed them twice, one step going backwards). */
Test(observer, a_run_killed_past_its_checkpoint_shows_each_step_once)
{
    if (em_test_venv_skip())
        return;
    char dir[128], logdir[192];
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_observer_purge_"));
    snprintf(crash_from, sizeof crash_from, "%s/run.ckpt", dir);
    snprintf(crash_to, sizeof crash_to, "%s/crash.ckpt", dir);
    snprintf(logdir, sizeof logdir, "%s/tb", dir);
    observed_fit((em_trainer_opts){.checkpoint = crash_from, .checkpoint_every = 4,
                                   .max_steps = 7}, NULL, keep_checkpoint, logdir);
    observed_fit((em_trainer_opts){0}, crash_to, NULL, logdir);
    char *raw = em_test_venv_output("tb_read.py", logdir);
    cr_assert_not_null(raw);
    cr_expect_eq(steps_of(raw, "scalar", "train/loss", NULL, 0), 7 + 12, "%s", raw);
    free(raw);
    char *shown = em_test_venv_output("tb_shown.py", logdir);
    cr_assert_not_null(shown);
    expect_each_step_once(shown);
    free(shown);
    em_test_remove_tree(dir);
}
