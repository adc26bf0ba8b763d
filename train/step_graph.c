/* The step graph: a training step run eagerly once, twice more in its own memory pool while the
 * device's counts check that it can be captured, then captured and replayed; eagerly where it
 * cannot be (train/step_graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/core_internal.h"
#include "tensor/device_graph_internal.h"
#include "tensor/memory_internal.h"
#include "train/step_graph.h"

/* What the next call does. */
typedef enum {
    PHASE_FIRST,   /* eagerly, as any step: lazy state (workspaces, algorithm choices) is made */
    PHASE_WATCH,   /* eagerly in the pool, its counts kept */
    PHASE_COMPARE, /* eagerly in the pool, its counts against the watched step's */
    PHASE_CAPTURE, /* captured, then replayed */
    PHASE_REPLAY,
    PHASE_EAGER    /* eagerly from now on: why says why */
} phase;

struct em_step_graph {
    em_device device;
    em_step_fn step;
    void *ctx;
    em_step_graph_opts o;
    phase phase;
    int arity;                                   /* inputs a call takes: the first call's */
    em_tensor *inputs[EM_STEP_GRAPH_MAX_INPUTS]; /* the graph's own, shaped at the first call */
    int n_inputs;
    em_tensor *output;       /* the last step's in the graph's inputs (while replaying, the
                                captured step's) */
    em_tensor *other_output; /* the last step's on inputs of another shape */
    em_private_pool *pool;
    em_device_graph *graph;
    em_device_counts watched; /* what the watched step queued and copied */
    bool replayed, told_shape;
    char why[256];
    em_step_graph_stats stats;
};

em_step_graph *em_step_graph_new(em_device device, em_step_fn step, void *ctx,
                                 em_step_graph_opts opts)
{
    static const char fn[] = "em_step_graph_new";
    if (!step || (unsigned)device >= EM_NDEVICES) {
        em_set_error(EM_ERR_ARG, "%s: a step and a device are required", fn);
        return NULL;
    }
    em_step_graph *g = calloc(1, sizeof *g);
    if (!g) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    *g = (em_step_graph){.device = device, .step = step, .ctx = ctx, .o = opts, .arity = -1};
    const em_backend *be = em_backend_get(device);
    if (!be || !be->capture_begin || !be->counts) {
        snprintf(g->why, sizeof g->why, "%s has no device graphs", em_device_name(device));
        g->phase = PHASE_EAGER;
        if (!opts.quiet)
            fprintf(stderr, "ember: cuda graph: %s; running eagerly\n", g->why);
    }
    return g;
}

/* The graph and its pool freed; an output in the pool stays valid (its block joins the shared
 * cache when it is released). */
static void drop_graph(em_step_graph *g)
{
    em_device_graph_free(g->graph); /* its hooks drop what they hold in the pool */
    g->graph = NULL;
    em_private_pool_free(g->pool);
    g->pool = NULL;
}

void em_step_graph_free(em_step_graph *g)
{
    if (!g)
        return;
    em_release(g->other_output);
    em_release(g->output);
    drop_graph(g);
    for (int i = 0; i < g->n_inputs; i++)
        em_release(g->inputs[i]);
    free(g);
}

/* From now on the steps run eagerly, for the reason given (said once on stderr). */
static void go_eager(em_step_graph *g, const char *why)
{
    snprintf(g->why, sizeof g->why, "%s", why);
    if (!g->o.quiet)
        fprintf(stderr, "ember: cuda graph: %s; running eagerly\n", g->why);
    drop_graph(g);
    g->phase = PHASE_EAGER;
}

/* The step on inputs, its output held in *out (the last one released first). */
static em_status run_step(em_step_graph *g, em_tensor *const *inputs, em_tensor **out)
{
    em_release(*out);
    *out = NULL;
    em_scope_begin();
    em_tensor *o = NULL;
    em_status st = g->step(g->ctx, inputs, &o);
    if (st == EM_OK && o)
        *out = em_retain(o);
    em_scope_end();
    g->stats.eager_steps++;
    return st;
}

static em_device_counts counts_now(const em_step_graph *g)
{
    em_device_counts c = {0};
    em_backend_get(g->device)->counts(&c);
    return c;
}

static em_device_counts counts_since(em_device_counts a, em_device_counts b)
{
    return (em_device_counts){b.launches - a.launches, b.host_waits - a.host_waits,
                              b.host_copies - a.host_copies, b.host_copy_hash - a.host_copy_hash,
                              b.long_host_copies - a.long_host_copies};
}

/* Why a step with counts c (and random numbers drawn when drew) cannot be captured; NULL when it
 * can. compare: the watched step's counts, which c must match. */
static const char *uncapturable(const em_device_counts *c, bool drew,
                                const em_device_counts *compare, char *buf, size_t n)
{
    if (c->host_waits) {
        snprintf(buf, n, "the step waits for the device %llu times (a value read on the host: "
                 "a loss's value, the grad scaler's inf check, a clipping norm)",
                 (unsigned long long)c->host_waits);
        return buf;
    }
    if (drew)
        return "the step draws random numbers (dropout), whose counters advance on the host";
    if (c->long_host_copies)
        return "the step copies over 16 KiB from the host itself; pass such data as an input";
    if (compare && (c->host_copies != compare->host_copies ||
                    c->host_copy_hash != compare->host_copy_hash))
        return "the values the step copies from the host differ from one step to the next (a "
               "tensor made from a host number each step)";
    return NULL;
}

/* An eager step in the pool, checked; the watched step's counts kept, the next compared. */
static em_status watched_step(em_step_graph *g)
{
    if (!g->pool && !(g->pool = em_private_pool_new(g->device)))
        return em_error_status();
    em_generator *gen = em_default_generator();
    uint64_t offset = gen->offset;
    em_device_counts before = counts_now(g);
    em_private_pool_use(g->pool, false);
    em_status st = run_step(g, g->inputs, &g->output);
    em_private_pool_leave(g->pool);
    if (st != EM_OK)
        return st;
    em_device_counts c = counts_since(before, counts_now(g));
    char buf[200];
    const char *why = uncapturable(&c, gen->offset != offset,
                                   g->phase == PHASE_COMPARE ? &g->watched : NULL, buf,
                                   sizeof buf);
    if (why)
        go_eager(g, why);
    else if (g->phase == PHASE_WATCH)
        g->watched = c;
    return EM_OK;
}

/* The step captured into the graph, then its first replay. A failed capture cannot be undone:
 * the step's host side ran (the optimizer's counts advanced) and none of its work did. */
static em_status capture(em_step_graph *g)
{
    static const char fn[] = "em_step_graph_run";
    em_release(g->output); /* its blocks are the capture's to reuse */
    g->output = NULL;
    if (!(g->graph = em_device_graph_begin(g->device))) {
        char why[256];
        snprintf(why, sizeof why, "the capture did not start: %s", em_error());
        em_error_clear();
        go_eager(g, why);
        return run_step(g, g->inputs, &g->output);
    }
    em_device_counts before = counts_now(g);
    em_private_pool_use(g->pool, true);
    em_status st = run_step(g, g->inputs, &g->output);
    g->stats.eager_steps--; /* it ran nothing */
    em_private_pool_leave(g->pool);
    char step_error[256];
    snprintf(step_error, sizeof step_error, "%s", st == EM_OK ? "" : em_error());
    em_status end = em_device_graph_end(g->graph);
    g->stats.captured_launches = (int64_t)counts_since(before, counts_now(g)).launches;
    if (st != EM_OK || end != EM_OK) {
        char why[512];
        snprintf(why, sizeof why, "the capture failed: %s", st != EM_OK ? step_error : em_error());
        em_error_clear();
        em_release(g->output); /* never written */
        g->output = NULL;
        go_eager(g, why);
        return em_set_error(EM_ERR_STATE, "%s: %s; the step's update was not applied", fn, why);
    }
    em_private_pool_stats ps = em_private_pool_get_stats(g->pool);
    g->stats.pool_bytes = (int64_t)ps.bytes;
    g->stats.capture_device_allocs = ps.capture_device_allocs;
    g->phase = PHASE_REPLAY;
    return EM_OK;
}

/* Whether inputs are shaped as the graph's own (made at the first call). */
static bool inputs_fit(em_step_graph *g, em_tensor *const *inputs, int n, char *why, size_t wn)
{
    if (!g->n_inputs) {
        for (int i = 0; i < n; i++) {
            em_tensor *t = em_empty_on(em_shape_of(inputs[i]), inputs[i]->dtype, g->device);
            if (!t)
                return false;
            em_scope_forget(t);
            g->inputs[g->n_inputs++] = t;
        }
        return true;
    }
    for (int i = 0; i < n; i++) {
        const em_tensor *a = inputs[i], *b = g->inputs[i];
        if (a->dtype != b->dtype || !em_same_shape(a, b)) {
            char sa[64], sb[64];
            snprintf(why, wn, "input %d is %s %s, the captured step's %s %s", i,
                     em_dtype_name(a->dtype), em_shape_str(a, sa, sizeof sa),
                     em_dtype_name(b->dtype), em_shape_str(b, sb, sizeof sb));
            return false;
        }
    }
    return true;
}

em_status em_step_graph_run(em_step_graph *g, em_tensor *const *inputs, int n,
                            em_tensor **output)
{
    static const char fn[] = "em_step_graph_run";
    if (!g || n < 0 || n > EM_STEP_GRAPH_MAX_INPUTS || (n && !inputs) ||
        (g->arity >= 0 && n != g->arity))
        return em_set_error(EM_ERR_ARG, "%s: NULL graph, or %d inputs where the graph takes %d "
                            "(at most %d)", fn, n, g ? g->arity : 0, EM_STEP_GRAPH_MAX_INPUTS);
    for (int i = 0; i < n; i++)
        if (!inputs[i])
            return em_set_error(EM_ERR_ARG, "%s: input %d is NULL", fn, i);
    g->arity = n;
    if (output)
        *output = NULL;
    g->replayed = false;
    em_release(g->other_output);
    g->other_output = NULL;
    if (g->phase == PHASE_EAGER) {
        em_status st = run_step(g, inputs, &g->output);
        if (output)
            *output = g->output;
        return st;
    }
    char why[200];
    if (!inputs_fit(g, inputs, n, why, sizeof why)) {
        if (!g->n_inputs)
            return em_error_status();
        if (!g->told_shape && !g->o.quiet)
            fprintf(stderr, "ember: cuda graph: %s; this step runs eagerly\n", why);
        g->told_shape = true;
        em_status st = run_step(g, inputs, &g->other_output);
        if (output)
            *output = g->other_output;
        return st;
    }
    for (int i = 0; i < n; i++)
        if (inputs[i] != g->inputs[i] && em_copy_(g->inputs[i], inputs[i]) != EM_OK)
            return em_error_status();
    em_status st = EM_OK;
    switch (g->phase) {
    case PHASE_FIRST:
        st = run_step(g, g->inputs, &g->output);
        g->phase = PHASE_WATCH;
        break;
    case PHASE_WATCH:
    case PHASE_COMPARE:
        st = watched_step(g);
        if (g->phase != PHASE_EAGER)
            g->phase++;
        break;
    case PHASE_CAPTURE:
        st = capture(g);
        if (st == EM_OK)
            st = em_device_graph_replay(g->graph);
        g->replayed = st == EM_OK;
        g->stats.replays += g->replayed;
        break;
    case PHASE_REPLAY:
        st = em_device_graph_replay(g->graph);
        g->replayed = st == EM_OK;
        g->stats.replays += g->replayed;
        break;
    case PHASE_EAGER:
        break;
    }
    if (output)
        *output = g->output;
    return st;
}

bool em_step_graph_replayed(const em_step_graph *g)
{
    return g && g->replayed;
}

const char *em_step_graph_why_eager(const em_step_graph *g)
{
    return g ? g->why : "";
}

em_step_graph_stats em_step_graph_get_stats(const em_step_graph *g)
{
    return g ? g->stats : (em_step_graph_stats){0};
}
