/* Scopes: a per-thread stack; each scope holds the creation references of the tensors made while
 * it is the innermost one, and releases them, newest first, when it ends. A tensor a scope holds
 * is released on that scope's thread. */
#include <stdlib.h>

#include "tensor/core_internal.h"

typedef struct em_scope {
    struct em_scope *parent;
    em_tensor **held; /* entries cleared by em_keep or by a tensor's death are NULL */
    int64_t n, cap;
} em_scope;

static _Thread_local em_scope *top;
static _Thread_local int depth;

/* Append t to s and point t's slot at the entry; false when out of memory. */
static bool scope_hold(em_scope *s, em_tensor *t)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        em_tensor **held = realloc(s->held, (size_t)cap * sizeof *held);
        if (!held)
            return false;
        s->held = held;
        s->cap = cap;
    }
    s->held[s->n] = t;
    *em_tensor_scope_slot(t) = (em_scope_slot){.scope = s, .index = s->n};
    s->n++;
    return true;
}

void em_scope_register(em_tensor *t)
{
    if (!top)
        return;
    if (!scope_hold(top, t)) /* the reference stays with the caller rather than being lost */
        em_set_error(EM_ERR_MEMORY, "em_scope: out of memory holding a tensor");
}

void em_scope_forget(em_tensor *t)
{
    em_scope_slot *slot = em_tensor_scope_slot(t);
    if (slot->scope)
        slot->scope->held[slot->index] = NULL;
    slot->scope = NULL;
}

void em_scope_begin(void)
{
    em_scope *s = calloc(1, sizeof *s);
    if (!s) {
        em_set_error(EM_ERR_MEMORY, "em_scope_begin: out of memory");
        return;
    }
    s->parent = top;
    top = s;
    depth++;
}

void em_scope_end(void)
{
    em_scope *s = top;
    if (!s) {
        em_set_error(EM_ERR_STATE, "em_scope_end: no scope is open");
        return;
    }
    /* pop first: tensors made while releasing belong to the parent */
    top = s->parent;
    depth--;
    for (int64_t i = s->n - 1; i >= 0; i--) {
        em_tensor *t = s->held[i];
        if (!t)
            continue;
        s->held[i] = NULL;
        em_tensor_scope_slot(t)->scope = NULL;
        em_release(t);
    }
    free(s->held);
    free(s);
}

em_tensor *em_keep(em_tensor *t)
{
    if (!t)
        return NULL;
    em_scope_slot *slot = em_tensor_scope_slot(t);
    if (!top || slot->scope != top) /* not held by the innermost scope: it already outlives it */
        return t;
    top->held[slot->index] = NULL;
    slot->scope = NULL;
    if (top->parent && !scope_hold(top->parent, t))
        em_set_error(EM_ERR_MEMORY, "em_keep: out of memory holding a tensor");
    return t;
}

int em_scope_depth(void)
{
    return depth;
}
