/* The profiler: the table's self times, shares and bottlenecks on a hand-made run; a real
 * training loop's ops, phases, shapes, bytes and modules; the Chrome trace read back as a trace
 * viewer reads it (tests/python/trace_check.py), loader workers on their own tracks; errors. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "helpers/venv.h"
#include "observe/profiler_internal.h"

#ifdef EMBER_NO_PROFILER
Test(profiler, compiled_out)
{
    cr_expect_eq(em_profiler_start((em_profiler_opts){0}), EM_ERR_UNSUPPORTED);
    cr_expect(strstr(em_error(), "-DEMBER_PROFILER=OFF") != NULL, "%s", em_error());
}
#else

static em_prof_event ev(em_prof_kind kind, em_prof_phase phase, const char *name,
                        const char *detail, int64_t t0, int64_t dur)
{
    return (em_prof_event){.kind = (uint8_t)kind, .phase = (uint8_t)phase, .name = name,
                           .detail = detail, .t0_ns = t0, .dur_ns = dur, .dtype = -1,
                           .device = -1};
}

static const em_profile_row *row(const em_profile_summary *s, const char *name,
                                 const char *phase)
{
    for (int i = 0; i < s->n_rows; i++)
        if (!strcmp(s->rows[i].name, name) && !strcmp(s->rows[i].phase, phase))
            return &s->rows[i];
    cr_assert_fail("no row %s (%s)", name, phase);
    return NULL;
}

Test(profiler, table_of_a_hand_made_run)
{
    em_prof_event events[] = {
        ev(EM_PROF_STEP, EM_PHASE_FORWARD, "step", NULL, 0, 1000),
        ev(EM_PROF_MODULE, EM_PHASE_FORWARD, "", "Sequential", 0, 600),
        ev(EM_PROF_MODULE, EM_PHASE_FORWARD, "0", "Linear", 10, 300),
        ev(EM_PROF_OP, EM_PHASE_FORWARD, "linear", NULL, 20, 250),
        ev(EM_PROF_MODULE, EM_PHASE_FORWARD, "1", "ReLU", 320, 100),
        ev(EM_PROF_OP, EM_PHASE_FORWARD, "relu", NULL, 330, 80),
        ev(EM_PROF_REGION, EM_PHASE_BACKWARD, "autograd.backward", NULL, 700, 900),
        ev(EM_PROF_NODE, EM_PHASE_BACKWARD, "relu", "1", 710, 100),
        ev(EM_PROF_NODE, EM_PHASE_BACKWARD, "linear", "0", 820, 700),
        ev(EM_PROF_OP, EM_PHASE_BACKWARD, "matmul", NULL, 830, 600),
        ev(EM_PROF_STEP, EM_PHASE_FORWARD, "step", NULL, 1000, 1000),
    };
    events[3].bytes = 100;
    events[3].n_shapes = 1;
    events[3].ndim[0] = 2;
    events[3].shape[0][0] = 4;
    events[3].shape[0][1] = 8;
    em_prof_run run = {.events = events, .n = 11, .wall_ns = 2500};
    em_profile_summary s;
    cr_assert_eq(em_prof_summarise(&run, &s), EM_OK, "%s", em_error());
    cr_expect_eq(s.steps, 2);
    cr_expect_float_eq(s.step_ms, 0.002, 1e-12);
    cr_assert_eq(s.n_rows, 6);
    /* self: matmul 600, linear 250, then the three of 100 by name, relu 80 */
    const char *order[] = {"matmul", "linear", "autograd.backward", "linear_backward",
                           "relu_backward", "relu"};
    double self_ns[] = {600, 250, 100, 100, 100, 80};
    for (int i = 0; i < 6; i++) {
        cr_expect_str_eq(s.rows[i].name, order[i]);
        cr_expect_float_eq(s.rows[i].self_ms, self_ns[i] / 1e6, 1e-12, "%s", order[i]);
        cr_expect_float_eq(s.rows[i].self_pct, 100 * self_ns[i] / 2000, 1e-9);
        cr_expect_eq(s.rows[i].bottleneck, i == 0, "%s", order[i]);
        cr_expect_eq(s.rows[i].calls, 1);
    }
    const em_profile_row *bw = row(&s, "autograd.backward", "backward");
    cr_expect_float_eq(bw->total_ms, 900 / 1e6, 1e-12);
    cr_expect_float_eq(bw->total_pct, 45, 1e-9);
    const em_profile_row *lin = row(&s, "linear", "forward");
    cr_expect_eq(lin->bytes, 100);
    cr_expect_str_eq(lin->shapes, "[4,8]");
    cr_expect_str_eq(row(&s, "matmul", "backward")->phase, "backward");

    cr_assert_eq(s.n_modules, 3);
    cr_expect_str_eq(s.modules[0].name, "(Sequential)");
    cr_expect_str_eq(s.modules[1].name, "0 (Linear)");
    cr_expect_str_eq(s.modules[2].name, "1 (ReLU)");
    double fwd[] = {600, 300, 100}, bwd[] = {800, 700, 100};
    for (int k = 0; k < 3; k++) {
        cr_expect_eq(s.modules[k].depth, k ? 1 : 0);
        cr_expect_float_eq(s.modules[k].forward_ms, fwd[k] / 1e6, 1e-12);
        cr_expect_float_eq(s.modules[k].backward_ms, bwd[k] / 1e6, 1e-12);
        cr_expect_float_eq(s.modules[k].pct, 100 * (fwd[k] + bwd[k]) / 2000, 1e-9);
    }
    cr_expect(!s.modules[0].bottleneck, "the root is the whole model, never a bottleneck");
    cr_expect(s.modules[1].bottleneck);
    cr_expect(!s.modules[2].bottleneck);
    em_prof_summary_free(&s);
}

/* A small MLP trained for `steps` steps on a fixed batch, inside the profiler. */
static void train_mlp(int steps)
{
    em_manual_seed(3);
    em_module *net = em_sequential(3, em_linear_layer(8, 16, true), em_relu_layer(),
                                   em_linear_layer(16, 4, true));
    em_optim *opt = em_sgd(net, (em_sgd_opts){.lr = 0.1});
    em_tensor *x = em_randn(EM_SHAPE(4, 8), EM_F32, NULL);
    em_tensor *y = em_randint(EM_SHAPE(4), EM_I64, 0, 4, NULL);
    for (int s = 0; s < steps; s++) {
        em_scope_begin();
        em_tensor *loss = em_cross_entropy(em_forward(net, x), y, (em_cross_entropy_opts){0});
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        cr_assert_eq(em_optim_step(opt), EM_OK);
        em_optim_zero_grad(opt);
        em_scope_end();
        em_profiler_step();
    }
    em_release(x);
    em_release(y);
    em_optim_free(opt);
    em_module_free(net);
}

Test(profiler, a_training_loop_ops_phases_shapes_bytes_and_modules)
{
    train_mlp(2); /* not recorded: the profiler is off */
    cr_assert_eq(em_profiler_start((em_profiler_opts){0}), EM_OK, "%s", em_error());
    cr_expect(em_profiler_running());
    train_mlp(5);
    cr_assert_eq(em_profiler_stop(), EM_OK, "%s", em_error());
    const em_profile_summary *s = em_profiler_summary();
    cr_assert_not_null(s);
    cr_expect_eq(s->steps, 5);
    const em_profile_row *lin = row(s, "linear", "forward");
    cr_expect_eq(lin->calls, 10);
    cr_expect_str_eq(lin->shapes, "[4,8] x [16,8] x [16]");
    cr_expect_str_eq(lin->dtype, "f32");
    cr_expect_str_eq(lin->device, "cpu");
    /* outputs (4, 16) and (4, 4) in f32, five times each */
    cr_expect_eq(lin->bytes, 5 * (4 * 16 * 4 + 4 * 4 * 4));
    cr_expect_eq(row(s, "linear_backward", "backward")->calls, 10);
    cr_expect_eq(row(s, "relu", "forward")->calls, 5);
    cr_expect_eq(row(s, "relu_backward", "backward")->calls, 5);
    cr_expect_eq(row(s, "autograd.backward", "backward")->calls, 5);
    cr_expect_eq(row(s, "optimizer.step", "optimizer")->calls, 5);
    double self_sum = 0;
    for (int i = 0; i < s->n_rows; i++) {
        cr_expect_leq(s->rows[i].self_ms, s->rows[i].total_ms + 1e-9, "%s", s->rows[i].name);
        cr_expect_geq(s->rows[i].self_ms, 0, "%s", s->rows[i].name);
        if (i > 0)
            cr_expect_geq(s->rows[i - 1].self_ms, s->rows[i].self_ms, "sorted by self time");
        self_sum += s->rows[i].self_ms;
    }
    cr_expect_leq(self_sum, s->wall_ms, "self times do not overlap");
    cr_assert_eq(s->n_modules, 4);
    const char *names[] = {"(Sequential)", "0 (Linear)", "1 (ReLU)", "2 (Linear)"};
    for (int k = 0; k < 4; k++) {
        cr_expect_str_eq(s->modules[k].name, names[k]);
        cr_expect_eq(s->modules[k].calls, 5);
        cr_expect_gt(s->modules[k].backward_ms, 0, "%s", names[k]);
        cr_expect_leq(s->modules[k].forward_ms, s->modules[0].forward_ms + 1e-9);
    }

    char path[] = "/tmp/ember_table_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w+");
    em_profiler_print(f, 3);
    rewind(f);
    char text[8192] = {0};
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    unlink(path);
    cr_assert_gt(n, 0);
    cr_expect(strstr(text, "ember profiler: 5 steps") == text, "%s", text);
    cr_expect(strstr(text, "Self ms") && strstr(text, "more rows") && strstr(text, "2 (Linear)"),
              "%s", text);
}

static long count_of(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

Test(profiler, chrome_trace_nests_with_loader_workers_on_their_own_tracks)
{
    if (em_test_venv_skip())
        return;
    em_manual_seed(5);
    em_tensor *xs = em_randn(EM_SHAPE(24, 8), EM_F32, NULL);
    em_tensor *ys = em_randint(EM_SHAPE(24), EM_I64, 0, 4, NULL);
    em_dataset *ds = em_tensor_dataset(xs, ys);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4, .num_workers = 2});
    em_module *net = em_sequential(2, em_linear_layer(8, 4, true), em_relu_layer());
    em_optim *opt = em_sgd(net, (em_sgd_opts){.lr = 0.1});
    char path[] = "/tmp/ember_trace_XXXXXX.json";
    close(mkstemps(path, 5));
    cr_assert_eq(em_profiler_start((em_profiler_opts){.trace_path = path}), EM_OK, "%s",
                 em_error());
    cr_assert_eq(em_profile_range_push("epoch"), EM_OK);
    em_batch b;
    int batches = 0;
    for (em_status st; (st = em_loader_next(dl, &b)) != EM_END; batches++) {
        cr_assert_eq(st, EM_OK, "%s", em_error());
        em_scope_begin();
        cr_assert_eq(em_profile_range_push("step \"quoted\""), EM_OK);
        em_tensor *loss = em_cross_entropy(em_forward(net, b.x), b.y, (em_cross_entropy_opts){0});
        cr_assert_eq(em_backward(loss), EM_OK, "%s", em_error());
        em_optim_step(opt);
        em_optim_zero_grad(opt);
        cr_assert_eq(em_profile_range_pop("step \"quoted\""), EM_OK);
        em_scope_end();
        em_release(b.x);
        em_release(b.y);
        em_profiler_step();
    }
    cr_assert_eq(em_profile_range_pop("epoch"), EM_OK);
    cr_assert_eq(em_profiler_stop(), EM_OK, "%s", em_error());
    cr_assert_eq(batches, 6);
    char *out = em_test_venv_output("trace_check.py", path);
    cr_assert_not_null(out, "the trace checker failed (see above)");
    cr_expect_eq(count_of(out, "event linear|main: forward: "), 6, "%s", out);
    cr_expect_eq(count_of(out, "event linear_backward|main: backward: "), 6, "%s", out);
    cr_expect_eq(count_of(out, "event optimizer.step|main: optimizer: "), 6, "%s", out);
    cr_expect_eq(count_of(out, "event loader.next|main: loader: "), 7, "%s", out);
    cr_expect_eq(count_of(out, "event step \"quoted\"|main: ranges: "), 6, "%s", out);
    cr_expect_eq(count_of(out, "event epoch|main: ranges: "), 1, "%s", out);
    cr_expect_eq(count_of(out, "event 0 (Linear)|main: forward: "), 6, "%s", out);
    long w0 = count_of(out, "event load batch|loader worker 0: loader: ");
    long w1 = count_of(out, "event load batch|loader worker 1: loader: ");
    /* which worker fills which batch is up to the scheduler */
    cr_expect_eq((w0 > 0 ? w0 : 0) + (w1 > 0 ? w1 : 0), 6, "every batch on a worker's track:\n%s",
                 out);
    free(out);
    unlink(path);
    em_loader_free(dl);
    em_dataset_free(ds);
    em_optim_free(opt);
    em_module_free(net);
    em_release(xs);
    em_release(ys);
}

/* The layer-wise table names each module by its path and indents it by how deep its forward ran:
 * a nested Sequential's children one level in, and the attention's out_proj, which the encoder
 * layer runs through its self_attn child without that child's forward, as self_attn.out_proj. */
Test(profiler, modules_by_path_and_nesting)
{
    em_module *net = em_sequential(2, em_transformer_encoder_layer(8, 2, (em_transformer_opts){
                                          .dim_feedforward = 16}),
                                   em_sequential(2, em_linear_layer(8, 4, true), em_relu_layer()));
    em_tensor *x = em_ones(EM_SHAPE(2, 3, 8), EM_F32);
    cr_assert_eq(em_profiler_start((em_profiler_opts){0}), EM_OK, "%s", em_error());
    em_scope_begin();
    cr_assert_not_null(em_forward(net, x), "%s", em_error());
    em_scope_end();
    cr_assert_eq(em_profiler_stop(), EM_OK, "%s", em_error());
    const em_profile_summary *s = em_profiler_summary();
    const struct {
        const char *name;
        int depth;
    } want[] = {{"(Sequential)", 0}, {"0 (TransformerEncoderLayer)", 1},
                {"0.self_attn.out_proj (Linear)", 2}, {"0.linear1 (Linear)", 2},
                {"1 (Sequential)", 1}, {"1.0 (Linear)", 2}, {"1.1 (ReLU)", 2}};
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        int found = -1;
        for (int k = 0; k < s->n_modules; k++)
            if (!strcmp(s->modules[k].name, want[w].name))
                found = k;
        cr_assert_geq(found, 0, "no module %s", want[w].name);
        cr_expect_eq(s->modules[found].depth, want[w].depth, "%s", want[w].name);
        cr_expect_eq(s->modules[found].calls, 1, "%s", want[w].name);
    }
    em_release(x);
    em_module_free(net);
}

Test(profiler, misuse_is_a_clear_error)
{
    cr_expect_eq(em_profiler_stop(), EM_ERR_STATE);
    cr_expect(strstr(em_error(), "em_profiler_stop: the profiler is not running") != NULL, "%s",
              em_error());
    em_error_clear();
    cr_expect_eq(em_profiler_start((em_profiler_opts){.trace_path = "/nonexistent/dir/t.json"}),
                 EM_ERR_IO);
    cr_expect(strstr(em_error(), "/nonexistent/dir/t.json") != NULL, "%s", em_error());
    cr_expect(!em_profiler_running());
    em_error_clear();
    cr_assert_eq(em_profiler_start((em_profiler_opts){0}), EM_OK);
    cr_expect_eq(em_profiler_start((em_profiler_opts){0}), EM_ERR_STATE);
    cr_expect(strstr(em_error(), "already running") != NULL, "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_profiler_stop(), EM_OK);

    cr_expect_eq(em_profile_range_pop("a"), EM_ERR_STATE);
    cr_expect(strstr(em_error(), "no range is open") != NULL, "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_profile_range_push("outer"), EM_OK);
    cr_assert_eq(em_profile_range_push("inner"), EM_OK);
    cr_expect_eq(em_profile_range_pop("outer"), EM_ERR_STATE);
    cr_expect(strstr(em_error(), "\"outer\" closed out of order: the innermost open range is "
                                 "\"inner\"") != NULL, "%s", em_error());
    em_error_clear();
    cr_expect_eq(em_profile_range_pop("inner"), EM_OK, "the failed pop closed nothing");
    cr_expect_eq(em_profile_range_pop("outer"), EM_OK);
    cr_expect_eq(em_profile_range_push(""), EM_ERR_ARG);
    em_error_clear();
}

Test(profiler, nothing_is_recorded_while_off)
{
    cr_assert_eq(em_profiler_start((em_profiler_opts){0}), EM_OK);
    cr_assert_eq(em_profiler_stop(), EM_OK);
    train_mlp(2);
    const em_profile_summary *s = em_profiler_summary();
    cr_assert_not_null(s);
    cr_expect_eq(s->n_events, 0);
    cr_expect_eq(s->n_rows, 0);
}
#endif

/* A range name that is not UTF-8 is refused at the push (the trace is JSON, UTF-8 only); a valid
 * one longer than the trace's name field is cut at a character boundary, and the trace is
 * written and parses. */
Test(profiler, range_names_keep_the_trace_utf8)
{
    if (em_test_venv_skip())
        return;
    char path[] = "/tmp/ember_trace_XXXXXX.json";
    close(mkstemps(path, 5));
    cr_assert_eq(em_profiler_start((em_profiler_opts){.trace_path = path}), EM_OK, "%s",
                 em_error());
    cr_expect_eq(em_profile_range_push("bad\xc3("), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "em_profile_range_push: range name \"bad\" is followed by byte "
                                 "0xc3 at offset 3, which is not UTF-8"), "%s", em_error());
    em_error_clear();
    char long_name[2 * 100 + 1] = ""; /* 100 times U+00E9, two bytes each */
    for (int i = 0; i < 100; i++)
        strcat(long_name, "\xc3\xa9");
    cr_assert_eq(em_profile_range_push(long_name), EM_OK, "%s", em_error());
    cr_assert_eq(em_profile_range_pop(long_name), EM_OK, "%s", em_error());
    cr_assert_eq(em_profiler_stop(), EM_OK, "%s", em_error());
    char *out = em_test_venv_output("trace_check.py", path);
    cr_assert_not_null(out, "the trace checker failed (see above)");
    char want[256] = "event "; /* the name field holds 159 bytes: 79 whole characters */
    for (int i = 0; i < 79; i++)
        strcat(want, "\xc3\xa9");
    strcat(want, "|main: ranges: 1");
    cr_expect(strstr(out, want) != NULL, "%s", out);
    free(out);
    unlink(path);
}
