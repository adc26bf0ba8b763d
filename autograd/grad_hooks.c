/* Gradient-ready hooks: a registry of leaves whose owners want to hear, during backward, the
 * moment each leaf's gradient is complete, and when the outermost backward ends. The engine
 * counts each registered leaf's consumers in the graph it collects and fires the hook when the
 * last of them has handed its gradient in, so a data-parallel reducer can start communicating
 * while the rest of backward runs. */
#include <pthread.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"

typedef struct {
    em_tensor *leaf;
    int set; /* index into sets */
} registered_leaf;

typedef struct {
    em_grad_hooks hooks;
    bool live;
} hook_set;

/* The registry changes only while no backward runs (the owner's contract). */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static registered_leaf *leaves;
static int n_leaves;
static hook_set *sets;
static int n_sets;

/* One backward pass: registered leaves of its graph, in an open-addressing table by address. */
typedef struct {
    em_tensor *leaf;
    int set;
    int remaining; /* consuming slots of the graph that have not handed their gradient in */
} pass_slot;

struct em_hook_pass {
    pass_slot *slots; /* (cap), cap a power of two, at least twice the registered leaves */
    size_t cap;
};

static _Thread_local int depth;          /* nested backward calls (checkpointing) */
static _Thread_local int *touched;       /* sets with a leaf in this outermost backward */
static _Thread_local int n_touched, cap_touched;

em_status em_grad_hooks_add(em_tensor *const *ts, int n, em_grad_hooks hooks)
{
    if (n < 0 || (n > 0 && !ts) || !hooks.grad_ready)
        return em_set_error(EM_ERR_ARG, "em_grad_hooks_add: NULL tensors, n < 0 (%d) or no "
                                        "grad_ready function", n);
    for (int i = 0; i < n; i++)
        if (!ts[i] || ts[i]->node || !ts[i]->requires_grad)
            return em_set_error(EM_ERR_ARG, "em_grad_hooks_add: tensor %d is not a leaf that "
                                            "requires grad", i);
    pthread_mutex_lock(&registry_mu);
    registered_leaf *l = realloc(leaves, (size_t)(n_leaves + n + 1) * sizeof *l);
    hook_set *s = l ? realloc(sets, (size_t)(n_sets + 1) * sizeof *s) : NULL;
    if (l)
        leaves = l;
    if (s)
        sets = s;
    em_status st = EM_OK;
    if (!l || !s) {
        st = em_set_error(EM_ERR_MEMORY, "em_grad_hooks_add: out of memory");
    } else {
        sets[n_sets] = (hook_set){.hooks = hooks, .live = true};
        for (int i = 0; i < n; i++)
            leaves[n_leaves++] = (registered_leaf){.leaf = ts[i], .set = n_sets};
        n_sets++;
    }
    pthread_mutex_unlock(&registry_mu);
    return st;
}

void em_grad_hooks_remove(void *ctx)
{
    pthread_mutex_lock(&registry_mu);
    int kept = 0;
    for (int i = 0; i < n_leaves; i++)
        if (sets[leaves[i].set].hooks.ctx != ctx)
            leaves[kept++] = leaves[i];
    n_leaves = kept;
    for (int s = 0; s < n_sets; s++)
        if (sets[s].hooks.ctx == ctx)
            sets[s].live = false;
    if (n_leaves == 0) {
        free(leaves);
        free(sets);
        leaves = NULL;
        sets = NULL;
        n_sets = 0;
    }
    pthread_mutex_unlock(&registry_mu);
}

static size_t slot_of(const em_hook_pass *p, const em_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull;
    size_t i = h & (p->cap - 1);
    while (p->slots[i].leaf && p->slots[i].leaf != t)
        i = (i + 1) & (p->cap - 1);
    return i;
}

static void touch(int set)
{
    for (int i = 0; i < n_touched; i++)
        if (touched[i] == set)
            return;
    if (n_touched == cap_touched) {
        int cap = cap_touched ? 2 * cap_touched : 8;
        int *t = realloc(touched, (size_t)cap * sizeof *t);
        if (!t)
            return; /* that set then hears no backward_done: its owner waits at its next sync */
        touched = t;
        cap_touched = cap;
    }
    touched[n_touched++] = set;
}

em_hook_pass *em_hook_pass_begin(em_status *st)
{
    *st = EM_OK;
    if (depth++ == 0)
        n_touched = 0;
    if (n_leaves == 0)
        return NULL;
    em_hook_pass *p = calloc(1, sizeof *p);
    size_t cap = 16;
    while (cap < 2 * (size_t)n_leaves)
        cap *= 2;
    if (p)
        p->slots = calloc(cap, sizeof *p->slots);
    if (!p || !p->slots) {
        free(p);
        *st = em_set_error(EM_ERR_MEMORY, "em_backward: out of memory");
        return NULL;
    }
    p->cap = cap;
    for (int i = 0; i < n_leaves; i++) {
        size_t k = slot_of(p, leaves[i].leaf);
        p->slots[k] = (pass_slot){.leaf = leaves[i].leaf, .set = leaves[i].set};
    }
    return p;
}

void em_hook_pass_count(em_hook_pass *p, em_tensor *input)
{
    if (!p || input->node)
        return;
    pass_slot *s = &p->slots[slot_of(p, input)];
    if (s->leaf) {
        s->remaining++;
        touch(s->set);
    }
}

void em_hook_pass_consumed(em_hook_pass *p, em_tensor *input)
{
    if (!p || input->node)
        return;
    pass_slot *s = &p->slots[slot_of(p, input)];
    if (s->leaf && --s->remaining == 0 && sets[s->set].live)
        sets[s->set].hooks.grad_ready(sets[s->set].hooks.ctx, s->leaf);
}

em_status em_hook_pass_end(em_hook_pass *p, em_status st)
{
    if (p) {
        free(p->slots);
        free(p);
    }
    if (--depth > 0)
        return st;
    for (int i = 0; i < n_touched; i++) {
        hook_set *s = &sets[touched[i]];
        em_status done = s->live && s->hooks.backward_done
                             ? s->hooks.backward_done(s->hooks.ctx, st) : EM_OK;
        if (st == EM_OK)
            st = done;
    }
    n_touched = 0;
    return st;
}
