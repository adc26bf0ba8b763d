/* The backward pass: collects the graph behind a tensor without recursion, runs each node's rule in
 * reverse topological order with grad mode and autocast off (checking its gradients in anomaly
 * mode), accumulates into leaves and tells gradient-ready hooks (grad_hooks.c) as each registered
 * leaf's gradient completes; plus grad mode, detach and retain_grad. */
#include <stdlib.h>

#include "autograd/autograd_internal.h"

static _Thread_local bool grad_disabled;

bool em_grad_enabled(void)
{
    return !grad_disabled;
}

bool em_set_grad_enabled(bool enabled)
{
    bool prev = !grad_disabled;
    grad_disabled = !enabled;
    return prev;
}

em_tensor *em_requires_grad_(em_tensor *t, bool requires_grad)
{
    if (!em_present(t, "em_requires_grad_", "t"))
        return NULL;
    if (t->node) {
        em_set_error(EM_ERR_ARG, "em_requires_grad_: only a leaf's requires_grad can be set "
                                 "(this tensor was made by %s)", t->node->op);
        return NULL;
    }
    if (requires_grad && !em_dtype_is_float(t->dtype)) {
        em_set_error(EM_ERR_ARG, "em_requires_grad_: only floating-point tensors can require "
                                 "grad, not %s", em_dtype_name(t->dtype));
        return NULL;
    }
    t->requires_grad = requires_grad;
    return t;
}

em_tensor *em_retain_grad(em_tensor *t)
{
    if (t && t->node)
        t->retains_grad = true;
    return t;
}

em_tensor *em_detach(const em_tensor *t)
{
    return t ? em_alias_of(t) : NULL;
}

void em_zero_grad(em_tensor *t)
{
    if (!em_present(t, "em_zero_grad", "t"))
        return;
    em_release(t->grad);
    t->grad = NULL;
}

/* A growable array of nodes. */
typedef struct {
    em_node **v;
    size_t n, cap;
} node_list;

static bool list_push(node_list *l, em_node *node)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        em_node **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = node;
    return true;
}

/* Add g into t->grad (a leaf, or a non-leaf that retains its grad). The grad is t's own
 * contiguous tensor in t's dtype, added into in place from the second time on. */
static em_status grad_into_tensor(em_tensor *t, em_tensor *g)
{
    bool own = em_tensor_exclusive(g) && g->dtype == t->dtype && em_same_shape(g, t);
    if (!t->grad) {
        em_tensor *c = own ? g : em_tensor_cast_raw(g, t->dtype);
        if (!c)
            return em_error_status();
        t->grad = em_retain(c);
        return EM_OK;
    }
    em_tensor *c = g->dtype == t->dtype ? g : em_tensor_cast_raw(g, t->dtype);
    const em_backend *be = c ? em_tensor_backend(t, "em_backward") : NULL;
    if (!be)
        return em_error_status();
    em_arr o = em_tensor_arr(t->grad), b = em_tensor_arr(c);
    return em_kernel_status(be->binary(EM_BINARY_ADD, &o, &o, &b), "em_backward", t);
}

/* Collect every node reachable from root (each taking a reference) and count, in ->pending,
 * how many collected nodes consume its output; the hook pass counts the consumers of leaves. */
static em_status collect(em_node *root, node_list *all, em_hook_pass *hooks)
{
    root->refcount++;
    if (!list_push(all, root))
        return em_set_error(EM_ERR_MEMORY, "em_backward: out of memory");
    for (size_t i = 0; i < all->n; i++) {
        em_node *node = all->v[i];
        if (node->released)
            return em_set_error(EM_ERR_STATE, "em_backward: graph already freed (op %s)",
                                node->op);
        for (int k = 0; k < node->n_inputs; k++) {
            em_tensor *in = node->inputs[k];
            if (in)
                em_hook_pass_count(hooks, in);
            if (!in || !in->node || in->node->pending++ > 0)
                continue;
            in->node->refcount++;
            if (!list_push(all, in->node))
                return em_set_error(EM_ERR_MEMORY, "em_backward: out of memory");
        }
    }
    return EM_OK;
}

/* The module whose forward made node, when that was in the profiler's current run. */
static const char *node_module(const em_node *node)
{
    return node->prof_module && node->prof_session == em_prof_session() ? node->prof_module
                                                                        : NULL;
}

/* Run one node's rule and hand the input gradients on; the node then frees what it held. */
static em_status run_node(em_node *node, node_list *ready, em_hook_pass *hooks)
{
    em_status st = EM_OK;
    em_tensor **grad_in = calloc(node->n_inputs > 0 ? (size_t)node->n_inputs : 1,
                                 sizeof *grad_in);
    if (!grad_in)
        return em_set_error(EM_ERR_MEMORY, "em_backward: out of memory");
    em_scope_begin();
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_NODE, node->op,
                                                    node_module(node), false,
                                                    EM_PHASE_BACKWARD,
                                                    (const em_tensor *[]){node->grad_accum}, 1);
    if (node->grad_accum)
        st = node->backward(node, node->grad_accum, grad_in);
    if (profiled)
        em_prof_end();
    if (st == EM_OK && em_anomaly_mode())
        st = em_anomaly_check_backward(node, grad_in);
    for (int k = 0; k < node->n_inputs && st == EM_OK; k++) {
        em_tensor *in = node->inputs[k], *g = grad_in[k];
        if (!in)
            continue;
        if (g && in->node)
            st = em_grad_accumulate(&in->node->grad_accum, g);
        if (st == EM_OK && g && (!in->node || in->retains_grad))
            st = grad_into_tensor(in, g);
        if (st == EM_OK)
            em_hook_pass_consumed(hooks, in);
        if (in->node && --in->node->pending == 0 && !list_push(ready, in->node))
            st = em_set_error(EM_ERR_MEMORY, "em_backward: out of memory");
    }
    em_scope_end();
    free(grad_in);
    if (st == EM_OK) {
        em_node_free_held(node);
        node->released = true;
    }
    return st;
}

em_status em_backward_grad(em_tensor *t, em_tensor *grad)
{
    if (!t || !grad)
        return em_has_error() ? em_error_status()
                              : em_set_error(EM_ERR_ARG, "em_backward: NULL tensor");
    if (!t->requires_grad)
        return em_set_error(EM_ERR_ARG, "em_backward: the tensor does not require grad");
    if (!em_same_shape(t, grad)) {
        char bt[128], bg[128];
        return em_set_error(EM_ERR_ARG, "em_backward: grad shape %s differs from tensor %s",
                            em_shape_str(grad, bg, sizeof bg), em_shape_str(t, bt, sizeof bt));
    }
    if (grad->device != t->device)
        return em_set_error(EM_ERR_ARG, "em_backward: grad on %s, tensor on %s",
                            em_device_name(grad->device), em_device_name(t->device));
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_REGION, "autograd.backward", NULL,
                                                    false, EM_PHASE_BACKWARD,
                                                    (const em_tensor *[]){t}, 1);
    bool prev = em_set_grad_enabled(false);
    em_dtype prev_autocast = em_autocast_swap(EM_F32); /* each rule runs in its forward's dtype */
    em_anomaly_backward_enter();
    em_status st;
    em_hook_pass *hooks = em_hook_pass_begin(&st);
    em_scope_begin();
    em_tensor *seed = grad->dtype == t->dtype ? (em_tensor *)grad
                                              : em_tensor_cast_raw(grad, t->dtype);
    if (!seed)
        st = em_error_status();
    if (st == EM_OK && (!t->node || t->retains_grad))
        st = grad_into_tensor(t, seed);
    if (st == EM_OK && t->node) {
        node_list all = {0}, ready = {0};
        st = collect(t->node, &all, hooks);
        if (st == EM_OK) {
            t->node->grad_accum = em_retain(seed);
            if (!list_push(&ready, t->node))
                st = em_set_error(EM_ERR_MEMORY, "em_backward: out of memory");
        }
        while (st == EM_OK && ready.n > 0)
            st = run_node(ready.v[--ready.n], &ready, hooks);
        for (size_t i = 0; i < all.n; i++) {
            all.v[i]->pending = 0;
            em_release(all.v[i]->grad_accum);
            all.v[i]->grad_accum = NULL;
            em_node_release(all.v[i]);
        }
        free(all.v);
        free(ready.v);
    }
    em_scope_end();
    st = em_hook_pass_end(hooks, st);
    em_anomaly_backward_leave();
    em_autocast_swap(prev_autocast);
    em_set_grad_enabled(prev);
    if (profiled)
        em_prof_end();
    return st;
}

em_status em_backward(em_tensor *loss)
{
    if (!loss)
        return em_has_error() ? em_error_status()
                              : em_set_error(EM_ERR_ARG, "em_backward: NULL tensor");
    if (em_numel(loss) != 1) {
        char b[128];
        return em_set_error(EM_ERR_ARG, "em_backward: the loss must hold one element, not %s "
                                        "(use em_backward_grad)", em_shape_str(loss, b, sizeof b));
    }
    em_scope_begin();
    em_shape s = em_shape_of(loss);
    em_tensor *one = em_raw_full("em_backward", &s, loss->dtype, loss->device, 1.0);
    em_status st = one ? em_backward_grad(loss, one) : em_error_status();
    em_scope_end();
    return st;
}
