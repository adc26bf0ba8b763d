/* CUDA Graphs against eager steps on the same GPU: an MLP trained through the step graph (SGD
 * with momentum, its learning rate changed every step, clipping on the device; AdamW under bf16
 * autocast) ends with every weight and every step's loss bit for bit those of the same steps run
 * eagerly; the capture took no memory from the device; a replayed step queues the input copies,
 * the optimizer's constants and one graph launch; a batch of another shape runs eagerly between
 * replays, which go on after it; a step that reads its loss on the host runs eagerly and says
 * why; the trainer's cuda_graph option trains as the trainer without it. Skipped where no GPU is
 * present. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "ember.h"
#include "train/train_internal.h"

TestSuite(cuda_graph, .init = em_scope_begin, .fini = em_scope_end);

#define BATCH 32
#define N_BATCHES 4
#define STEPS 10

static void skip_without_cuda(void)
{
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, EM_CUDA);
    if (!probe)
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    em_release(probe);
}

typedef struct {
    em_module *net;
    em_optim *opt;
    double lr;      /* at step 0; it falls to half by the last step */
    em_dtype amp;
    bool read_loss; /* reads its loss on the host inside the step */
} run;

static run run_new(bool adamw, em_dtype amp)
{
    em_manual_seed(5);
    run r = {.net = em_sequential(5, em_linear_layer(64, 128, true), em_relu_layer(),
                                  em_linear_layer(128, 64, true), em_relu_layer(),
                                  em_linear_layer(64, 10, true)),
             .lr = adamw ? 1e-3 : 0.05, .amp = amp};
    cr_assert_eq(em_module_to(r.net, EM_CUDA), EM_OK, "%s", em_error());
    r.opt = adamw ? em_adamw(r.net, (em_adam_opts){.lr = r.lr})
                  : em_sgd(r.net, (em_sgd_opts){.lr = r.lr, .momentum = 0.9});
    cr_assert(r.opt, "%s", em_error());
    return r;
}

static void run_free(run *r)
{
    em_optim_free(r->opt);
    em_module_free(r->net);
}

/* The step: forward (under autocast), loss, backward, clipping at 1 on the device, update. */
static em_status train_step(void *ctx, em_tensor *const *in, em_tensor **out)
{
    run *r = ctx;
    if (r->amp != EM_F32 && em_autocast_begin(r->amp) != EM_OK)
        return em_error_status();
    em_tensor *logits = em_forward(r->net, in[0]); // (B, 10)
    if (r->amp != EM_F32)
        em_autocast_end();
    em_tensor *loss = em_cross_entropy(logits, in[1], (em_cross_entropy_opts){0});
    if (loss && r->read_loss)
        em_item(loss);
    em_status st = loss ? em_backward(loss) : em_error_status();
    if (st == EM_OK)
        st = em_clip_grad_norm_optim_device(r->opt, 1.0, 2.0, NULL);
    if (st == EM_OK)
        st = em_optim_step(r->opt);
    em_optim_zero_grad(r->opt);
    *out = loss;
    return st;
}

typedef struct {
    em_tensor *xs, *ys; /* (N_BATCHES, BATCH, 64), (N_BATCHES, BATCH) on the GPU */
} data;

static data data_new(void)
{
    em_generator g = em_generator_new(9);
    data d = {em_to_device(em_randn(EM_SHAPE(N_BATCHES, BATCH, 64), EM_F32, &g), EM_CUDA),
              em_to_device(em_randint(EM_SHAPE(N_BATCHES, BATCH), EM_I64, 0, 10, &g), EM_CUDA)};
    cr_assert(d.xs && d.ys, "%s", em_error());
    return d;
}

/* Step s's batch: half a batch at step short_at (a shape the graph was not captured for). */
static void batch_of(const data *d, int s, int short_at, em_tensor **x, em_tensor **y)
{
    *x = em_select(d->xs, 0, s % N_BATCHES);
    *y = em_select(d->ys, 0, s % N_BATCHES);
    if (s == short_at) {
        *x = em_narrow(*x, 0, 0, BATCH / 2);
        *y = em_narrow(*y, 0, 0, BATCH / 2);
    }
}

/* STEPS steps of r, through a step graph when g is given, else called directly; each step's
 * loss into losses. */
static void train(run *r, em_step_graph *g, const data *d, int short_at, double *losses)
{
    for (int s = 0; s < STEPS; s++) {
        em_scope_begin();
        em_tensor *x, *y, *loss = NULL;
        batch_of(d, s, short_at, &x, &y);
        em_optim_set_lr(r->opt, 0, r->lr * (1.0 - s / (2.0 * STEPS)));
        em_status st = g ? em_step_graph_run(g, (em_tensor *[]){x, y}, 2, &loss)
                         : train_step(r, (em_tensor *[]){x, y}, &loss);
        cr_assert_eq(st, EM_OK, "step %d: %s", s, em_error());
        losses[s] = em_item(loss);
        em_scope_end();
    }
}

static void assert_same_weights(em_module *a, em_module *b)
{
    em_param_ref pa[8], pb[8];
    int n = em_module_parameters(a, pa, 8);
    cr_assert_eq(em_module_parameters(b, pb, 8), n);
    for (int i = 0; i < n; i++) {
        int64_t k = em_numel(pa[i].value);
        float *va = malloc((size_t)k * sizeof *va), *vb = malloc((size_t)k * sizeof *vb);
        cr_assert_eq(em_copy_to_host(pa[i].value, EM_F32, va), EM_OK);
        cr_assert_eq(em_copy_to_host(pb[i].value, EM_F32, vb), EM_OK);
        cr_assert(!memcmp(va, vb, (size_t)k * sizeof *va), "%s differs after %d steps",
                  pa[i].name, STEPS);
        free(va);
        free(vb);
    }
}

/* Eager and graphed runs of the same steps: the same bits; the graph's counts. */
static em_step_graph_stats compare(bool adamw, em_dtype amp, int short_at)
{
    data d = data_new();
    run eager = run_new(adamw, amp), graphed = run_new(adamw, amp);
    double want[STEPS], got[STEPS];
    train(&eager, NULL, &d, short_at, want);
    em_step_graph *g = em_step_graph_new(EM_CUDA, train_step, &graphed, (em_step_graph_opts){0});
    cr_assert(g, "%s", em_error());
    train(&graphed, g, &d, short_at, got);
    cr_assert_str_empty(em_step_graph_why_eager(g));
    for (int s = 0; s < STEPS; s++)
        cr_assert_eq(got[s], want[s], "step %d's loss: graph %.9g, eager %.9g", s, got[s],
                     want[s]);
    assert_same_weights(eager.net, graphed.net);
    em_step_graph_stats st = em_step_graph_get_stats(g);
    em_step_graph_free(g);
    run_free(&eager);
    run_free(&graphed);
    em_release(d.xs);
    em_release(d.ys);
    return st;
}

Test(cuda_graph, sgd_replays_are_bit_for_bit_the_eager_steps)
{
    skip_without_cuda();
    em_step_graph_stats st = compare(false, EM_F32, -1);
    cr_assert_eq(st.replays, STEPS - 3, "three eager warm-up steps, then replays: %lld",
                 (long long)st.replays);
    cr_assert_eq(st.eager_steps, 3);
    cr_assert_eq(st.capture_device_allocs, 0, "the warm-up grew the pool for the capture");
    cr_assert_gt(st.captured_launches, 10);
    cr_assert_gt(st.pool_bytes, 0);
}

Test(cuda_graph, adamw_under_bf16_autocast_replays_bit_for_bit)
{
    skip_without_cuda();
    em_step_graph_stats st = compare(true, EM_BF16, -1);
    cr_assert_eq(st.replays, STEPS - 3);
    cr_assert_eq(st.capture_device_allocs, 0);
}

Test(cuda_graph, another_shape_runs_eagerly_between_replays)
{
    skip_without_cuda();
    em_step_graph_stats st = compare(false, EM_F32, 6);
    cr_assert_eq(st.replays, STEPS - 4, "step 6 ran eagerly: %lld replays",
                 (long long)st.replays);
    cr_assert_eq(st.eager_steps, 4);
}

/* A replayed step queues: two input copies, the SGD group's constants, the graph. */
Test(cuda_graph, a_replayed_step_is_four_launches)
{
    skip_without_cuda();
    data d = data_new();
    run r = run_new(false, EM_F32);
    em_step_graph *g = em_step_graph_new(EM_CUDA, train_step, &r, (em_step_graph_opts){0});
    const em_backend *be = em_backend_get(EM_CUDA);
    for (int s = 0; s < 6; s++) {
        em_scope_begin();
        em_tensor *x, *y, *loss;
        batch_of(&d, s, -1, &x, &y);
        em_device_counts before, after;
        be->counts(&before);
        cr_assert_eq(em_step_graph_run(g, (em_tensor *[]){x, y}, 2, &loss), EM_OK, "%s",
                     em_error());
        be->counts(&after);
        if (s >= 4) {
            cr_assert(em_step_graph_replayed(g));
            cr_assert_eq(after.launches - before.launches, 4, "step %d: %llu launches", s,
                         (unsigned long long)(after.launches - before.launches));
            cr_assert_eq(after.host_waits, before.host_waits);
        }
        em_scope_end();
    }
    em_step_graph_free(g);
    run_free(&r);
    em_release(d.xs);
    em_release(d.ys);
}

Test(cuda_graph, a_step_reading_its_loss_runs_eagerly_and_says_why)
{
    skip_without_cuda();
    data d = data_new();
    run eager = run_new(false, EM_F32), graphed = run_new(false, EM_F32);
    eager.read_loss = graphed.read_loss = true;
    double want[STEPS], got[STEPS];
    train(&eager, NULL, &d, -1, want);
    em_step_graph *g = em_step_graph_new(EM_CUDA, train_step, &graphed,
                                         (em_step_graph_opts){.quiet = true});
    train(&graphed, g, &d, -1, got);
    cr_assert(strstr(em_step_graph_why_eager(g), "waits for the device"), "%s",
              em_step_graph_why_eager(g));
    cr_assert_eq(em_step_graph_get_stats(g).replays, 0);
    cr_assert(!memcmp(got, want, sizeof got));
    assert_same_weights(eager.net, graphed.net);
    em_step_graph_free(g);
    run_free(&eager);
    run_free(&graphed);
    em_release(d.xs);
    em_release(d.ys);
}

Test(cuda_graph, trainer_option_trains_as_the_eager_trainer)
{
    skip_without_cuda();
    data d = data_new();
    run plain = run_new(false, EM_F32), graphed = run_new(false, EM_F32);
    em_scheduler *s1 = em_exponential_lr(plain.opt, 0.95);
    em_scheduler *s2 = em_exponential_lr(graphed.opt, 0.95);
    em_trainer *a = em_trainer_new(plain.net, plain.opt, NULL,
                                   (em_trainer_opts){.tech = {.clip = 1.0}, .scheduler = s1});
    em_trainer *b = em_trainer_new(graphed.net, graphed.opt, NULL,
                                   (em_trainer_opts){.tech = {.clip = 1.0, .cuda_graph = true},
                                                     .scheduler = s2});
    cr_assert(a && b, "%s", em_error());
    for (int s = 0; s < STEPS; s++) {
        em_scope_begin();
        em_tensor *x, *y;
        batch_of(&d, s, -1, &x, &y);
        double la, lb;
        cr_assert_eq(em_trainer_step(a, x, y, &la), EM_OK, "%s", em_error());
        cr_assert_eq(em_trainer_step(b, x, y, &lb), EM_OK, "%s", em_error());
        cr_assert_eq(la, lb, "step %d: %.9g vs %.9g", s, la, lb);
        em_scope_end();
    }
    assert_same_weights(plain.net, graphed.net);
    cr_assert(b->graph, "the trainer made its graph");
    cr_assert_eq(em_step_graph_get_stats(b->graph).replays, STEPS - 3);
    em_trainer_free(a);
    em_trainer_free(b);
    em_scheduler_free(s1);
    em_scheduler_free(s2);
    run_free(&plain);
    run_free(&graphed);
    em_release(d.xs);
    em_release(d.ys);
}
