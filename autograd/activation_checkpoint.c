/* Gradient checkpointing: a function's forward runs without a graph, and one node recomputes it
 * with the forward's RNG state and autocast dtype to backpropagate through it. */
#include <stdlib.h>

#include "autograd/autograd_internal.h"

/* The node's parameters: what it keeps to recompute the segment. */
typedef struct {
    em_checkpoint_fn fn;
    void *ctx;
    int n;
    em_tensor **inputs; /* retained, every one (the values the recomputation starts from) */
    em_generator rng;   /* the global generator as the forward found it */
    em_dtype autocast;  /* the autocast dtype of the forward */
} checkpoint_params;

static void checkpoint_params_release(void *p)
{
    checkpoint_params *c = p;
    for (int i = 0; i < c->n; i++)
        em_release(c->inputs[i]);
    free(c->inputs);
    c->inputs = NULL;
    c->n = 0;
}

/* Re-run fn with grad on over detached inputs, backpropagate g through it, hand out the grads. */
static em_status checkpoint_backward(em_node *node, const em_tensor *g, em_tensor **grad_in)
{
    const checkpoint_params *c = node->params;
    em_tensor **det = calloc(c->n > 0 ? (size_t)c->n : 1, sizeof *det);
    if (!det)
        return em_set_error(EM_ERR_MEMORY, "em_checkpoint: out of memory");
    em_generator *gen = em_default_generator(), now = *gen;
    em_scope_begin();
    bool ok = true;
    for (int i = 0; i < c->n && ok; i++) {
        det[i] = em_detach(c->inputs[i]);
        ok = det[i] && (!c->inputs[i]->requires_grad || em_requires_grad_(det[i], true));
    }
    bool prev_grad = em_set_grad_enabled(true);
    em_dtype prev_autocast = em_autocast_swap(c->autocast);
    *gen = c->rng;
    em_tensor *y = ok ? c->fn(c->ctx, det, c->n) : NULL;
    *gen = now;
    em_autocast_swap(prev_autocast);
    em_set_grad_enabled(prev_grad);
    em_status st = y ? EM_OK : em_error_status();
    if (st == EM_OK && y->requires_grad)
        st = em_backward_grad(y, (em_tensor *)g);
    for (int i = 0; i < c->n && st == EM_OK; i++)
        if (node->inputs[i] && det[i]->grad && !(grad_in[i] = em_keep(em_alias_of(det[i]->grad))))
            st = em_error_status();
    em_scope_end(); /* frees the recomputed graph, y and the detached inputs */
    free(det);
    return st;
}

em_tensor *em_checkpoint(em_checkpoint_fn fn, void *ctx, em_tensor *const *inputs, int n)
{
    if (!fn || n < 0 || (n > 0 && !inputs)) {
        em_set_error(EM_ERR_ARG, "em_checkpoint: need a function and %d inputs", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!inputs[i]) {
            if (!em_has_error())
                em_set_error(EM_ERR_ARG, "em_checkpoint: input %d is NULL", i);
            return NULL;
        }
    if (!em_grad_enabled())
        return fn(ctx, inputs, n);
    em_tensor **kept = calloc(n > 0 ? (size_t)n : 1, sizeof *kept);
    if (!kept) {
        em_set_error(EM_ERR_MEMORY, "em_checkpoint: out of memory");
        return NULL;
    }
    checkpoint_params c = {.fn = fn, .ctx = ctx, .n = n, .inputs = kept,
                           .rng = *em_default_generator(), .autocast = em_autocast_dtype()};
    for (int i = 0; i < n; i++)
        kept[i] = em_retain(inputs[i]);
    em_set_grad_enabled(false);
    em_tensor *y = fn(ctx, inputs, n);
    em_set_grad_enabled(true);
    if (!y || !em_dtype_is_float(y->dtype)) {
        checkpoint_params_release(&c);
        return y;
    }
    em_tensor *out = y;
    if (y->requires_grad) { /* fn handed back a leaf (an input or a parameter): wrap it */
        out = em_alias_of(y);
        em_release(y);
    }
    em_node *node = out ? em_node_attach(out, "checkpoint", checkpoint_backward, inputs, n, &c,
                                         sizeof c)
                        : NULL;
    if (!node) {
        checkpoint_params_release(&c);
        em_release(out);
        return NULL;
    }
    node->params_release = checkpoint_params_release;
    if (em_anomaly_mode())
        node->input_shapes = em_anomaly_shapes(inputs, n);
    return out;
}
