/* Checkpointed modules: em_checkpoint_module runs a module's forward under em_checkpoint, and
 * em_checkpoint_sequential runs a Sequential as checkpointed segments. Both change the module in
 * place (its type), so parameter names and saved models stay as they were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

/* Children [first, end) of a Sequential: one segment's function context. */
typedef struct {
    em_module *seq;
    int first, end;
} segment;

/* The type a checkpointed module gets; the module's type points at its first member. */
typedef struct {
    em_module_type type;
    const em_module_type *inner; /* the module's own type */
    int n_segments;              /* 0: the whole forward is one checkpointed function */
    segment seg[];
} checkpoint_type;

static const checkpoint_type *type_of(const em_module *m)
{
    return (const checkpoint_type *)m->type;
}

static em_tensor *module_fn(void *ctx, em_tensor *const *inputs, int n)
{
    (void)n;
    em_module *m = ctx;
    return type_of(m)->inner->forward(m, inputs[0]);
}

static em_tensor *checkpointed_forward(em_module *m, const em_tensor *x)
{
    em_tensor *in = (em_tensor *)x;
    return em_checkpoint(module_fn, m, &in, 1);
}

static em_tensor *segment_fn(void *ctx, em_tensor *const *inputs, int n)
{
    (void)n;
    const segment *s = ctx;
    em_scope_begin();
    em_tensor *h = inputs[0];
    for (int i = s->first; i < s->end && h; i++)
        h = em_forward(s->seq->children[i].module, h);
    em_keep(h);
    em_scope_end();
    return h;
}

/* Every segment but the last is checkpointed; the last one's activations are used right away
 * by backward, so recomputing them would save nothing (PyTorch's checkpoint_sequential). */
static em_tensor *segmented_forward(em_module *m, const em_tensor *x)
{
    const checkpoint_type *t = type_of(m);
    em_scope_begin();
    em_tensor *h = (em_tensor *)x;
    for (int s = 0; s < t->n_segments && h; s++) {
        void *ctx = (void *)&t->seg[s];
        h = s + 1 < t->n_segments ? em_checkpoint(segment_fn, ctx, &h, 1) : segment_fn(ctx, &h, 1);
    }
    em_keep(h);
    em_scope_end();
    return h;
}

static void checkpoint_destroy(em_module *m)
{
    checkpoint_type *t = (checkpoint_type *)m->type;
    if (t->inner->destroy)
        t->inner->destroy(m);
    free(t);
}

static void checkpoint_describe(const em_module *m, char *buf, size_t n)
{
    const checkpoint_type *t = type_of(m);
    char own[192] = "";
    if (t->inner->describe)
        t->inner->describe(m, own, sizeof own);
    else
        em_describe_settings(m, own, sizeof own);
    if (t->n_segments)
        snprintf(buf, n, "%s%scheckpointed in %d segments", own, *own ? ", " : "",
                 t->n_segments);
    else
        snprintf(buf, n, "%s%scheckpointed", own, *own ? ", " : "");
}

static bool is_checkpointed(const em_module *m)
{
    return m->type->forward == checkpointed_forward || m->type->forward == segmented_forward;
}

const em_module_type *em_module_own_type(const em_module *m)
{
    const em_module_type *t = m->type;
    while (t->wraps)
        t = t->wraps;
    return t;
}

/* Give m a checkpoint type over its own; NULL with an error when out of memory. */
static checkpoint_type *retype(em_module *m, int n_segments, const char *fn)
{
    checkpoint_type *t = calloc(1, sizeof *t + (size_t)n_segments * sizeof(segment));
    if (!t) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    t->inner = m->type;
    t->n_segments = n_segments;
    t->type = *m->type; /* the description stays the module's own */
    t->type.forward = n_segments ? segmented_forward : checkpointed_forward;
    t->type.destroy = checkpoint_destroy;
    t->type.describe = checkpoint_describe;
    t->type.wraps = m->type;
    m->type = &t->type;
    return t;
}

em_module *em_checkpoint_module(em_module *m)
{
    if (!m) {
        if (!em_has_error())
            em_set_error(EM_ERR_ARG, "em_checkpoint_module: module is NULL");
        return NULL;
    }
    if (is_checkpointed(m))
        return m;
    return retype(m, 0, "em_checkpoint_module") ? m : NULL;
}

em_module *em_checkpoint_sequential(em_module *seq, int n_segments)
{
    const char *fn = "em_checkpoint_sequential";
    if (!seq) {
        if (!em_has_error())
            em_set_error(EM_ERR_ARG, "%s: module is NULL", fn);
        return NULL;
    }
    if (!(seq->type->traits & EM_TRAIT_SEQUENTIAL) || is_checkpointed(seq)) {
        em_set_error(EM_ERR_ARG, "%s: needs a Sequential not yet checkpointed, got %s%s", fn,
                     is_checkpointed(seq) ? "a checkpointed " : "", seq->type->type_name);
        return NULL;
    }
    if (n_segments < 1 || n_segments > seq->n_children) {
        em_set_error(EM_ERR_ARG, "%s: %d segments for %d children (need 1..%d)", fn, n_segments,
                     seq->n_children, seq->n_children);
        return NULL;
    }
    checkpoint_type *t = retype(seq, n_segments, fn);
    if (!t)
        return NULL;
    int64_t k = seq->n_children;
    for (int s = 0; s < n_segments; s++)
        t->seg[s] = (segment){.seq = seq, .first = (int)(s * k / n_segments),
                              .end = (int)((s + 1) * k / n_segments)};
    return seq;
}
