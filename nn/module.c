/* The module tree: making modules, named parameters, buffers and children; train/eval; forward
 * with the summary's hook; depth-first traversal with dotted names; freeing a whole tree. */

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/name_table.h"
#include "io/utf8.h"
#include "nn/nn_internal.h"
#include "tensor/core_internal.h"
#include "observe/profiler_internal.h"

static _Thread_local em_forward_hook forward_hook;
static _Thread_local void *forward_hook_ctx;
static _Thread_local const em_tensor *forward_hook_input; /* the x of the hook's forward */

em_forward_hook em_set_forward_hook(em_forward_hook hook, void *ctx, void **prev_ctx)
{
    em_forward_hook prev = forward_hook;
    if (prev_ctx)
        *prev_ctx = forward_hook_ctx;
    forward_hook = hook;
    forward_hook_ctx = ctx;
    return prev;
}

bool em_forward_hooked(void)
{
    return forward_hook != NULL;
}

const em_tensor *em_forward_hook_input(void)
{
    return forward_hook_input;
}

/* A root module's dotted names handed out by em_module_parameters and em_module_buffers, each
 * once, found through a hash table (a tree of thousands of modules has as many names). */
struct module_names {
    char **names;         /* (n) */
    em_name_table *index; /* name -> its position in names */
    int n;
};

static void module_names_free(struct module_names *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        free(t->names[i]);
    free(t->names);
    em_name_table_free(t->index);
    free(t);
}

/* What nn/ keeps of every module and its users do not see, placed by em_module_alloc just before
 * the module's struct (aligned as malloc aligns, so the struct after it is too). */
typedef struct {
    _Alignas(max_align_t) struct module_names *names; /* the dotted names traversals of this
                                                          root hand out; NULL until the first */
    em_module *parent; /* the module this one is a child of, NULL for a root */
    int height;        /* levels of modules below this one (0 for a leaf) */
    em_name_table *own_names; /* every name of its params, buffers and children, once it has
                               * OWN_NAMES_INDEXED_FROM of them; NULL before (and after running
                               * out of memory: a scan finds them then) */
} module_books;

/* A module with this many names checks a new one through a hash table instead of a scan. */
#define OWN_NAMES_INDEXED_FROM 16

static module_books *books(const em_module *m)
{
    return (module_books *)((char *)m - sizeof(module_books));
}

em_module *em_module_alloc(size_t size, const em_module_type *type)
{
    if (!type || size < sizeof(em_module)) {
        em_set_error(EM_ERR_ARG, "em_module_alloc: %s", type ? "size is smaller than em_module"
                                                             : "NULL type");
        return NULL;
    }
    module_books *b = size <= SIZE_MAX - sizeof *b ? calloc(1, sizeof *b + size) : NULL;
    if (!b) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", type->type_name);
        return NULL;
    }
    em_module *m = (em_module *)(b + 1);
    m->type = type;
    m->training = true;
    return m;
}

static bool name_taken(const em_module *m, const char *name)
{
    int64_t unused;
    if (books(m)->own_names)
        return em_name_table_get(books(m)->own_names, name, &unused);
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name))
            return true;
    for (int i = 0; i < m->n_buffers; i++)
        if (!strcmp(m->buffers[i].name, name))
            return true;
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name))
            return true;
    return false;
}

/* list (n elements of size bytes) with room for one more: it doubles when n is a power of two
 * (or 0), so that n additions copy O(n) elements; NULL when out of memory (list as it was). */
static void *room_for_one(void *list, int n, size_t size)
{
    if (n & (n - 1))
        return list;
    return realloc(list, (size_t)(n ? 2 * n : 1) * size);
}

/* Adds every name of m to a new table; NULL when out of memory. */
static em_name_table *index_own_names(const em_module *m)
{
    int n = m->n_params + m->n_buffers + m->n_children;
    em_name_table *t = em_name_table_new((size_t)n * 2);
    bool ok = t != NULL;
    for (int i = 0; ok && i < m->n_params; i++)
        ok = em_name_table_add(t, m->params[i].name, 0, NULL) >= 0;
    for (int i = 0; ok && i < m->n_buffers; i++)
        ok = em_name_table_add(t, m->buffers[i].name, 0, NULL) >= 0;
    for (int i = 0; ok && i < m->n_children; i++)
        ok = em_name_table_add(t, m->children[i].name, 0, NULL) >= 0;
    if (!ok)
        em_name_table_free(t);
    return ok ? t : NULL;
}

/* Records that m has gained the name (its own copy); the table is dropped when it cannot take
 * it, so that it never lacks a name. */
static void note_name(em_module *m, const char *name)
{
    module_books *b = books(m);
    if (!b->own_names && m->n_params + m->n_buffers + m->n_children >= OWN_NAMES_INDEXED_FROM)
        b->own_names = index_own_names(m);
    else if (b->own_names && em_name_table_add(b->own_names, name, 0, NULL) < 0) {
        em_name_table_free(b->own_names);
        b->own_names = NULL;
    }
}

void em_module_names_changed(em_module *m)
{
    em_name_table_free(books(m)->own_names);
    books(m)->own_names = NULL;
}

/* Checks m and name for an add_* call; false with an error set. */
static bool check_add(const em_module *m, const char *name, const char *fn)
{
    if (!m || !name || !*name) {
        em_set_error(EM_ERR_ARG, "%s: module and name must be given", fn);
        return false;
    }
    if (strchr(name, '.')) {
        em_set_error(EM_ERR_ARG, "%s: name \"%s\" must not contain '.'", fn, name);
        return false;
    }
    if (em_utf8_check(fn, "name", name) != EM_OK) /* names go into files: state dicts, ONNX */
        return false;
    if (name_taken(m, name)) {
        em_set_error(EM_ERR_ARG, "%s: name \"%s\" is already used in this %s", fn, name,
                     m->type->type_name);
        return false;
    }
    return true;
}

static em_tensor *add_tensor(em_module *m, em_named_tensor **list, int *n, const char *name,
                             em_tensor *value, const char *fn)
{
    if (!em_present(value, fn, "value"))
        return NULL;
    if (!check_add(m, name, fn)) {
        em_release(value);
        return NULL;
    }
    em_named_tensor *grown = room_for_one(*list, *n, sizeof **list);
    char *copy = strdup(name);
    if (!grown || !copy) {
        if (grown)
            *list = grown;
        free(copy);
        em_release(value);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    *list = grown;
    /* the module takes the creation reference, also from a scope that holds it */
    em_scope_forget(value);
    (*list)[*n] = (em_named_tensor){.name = copy, .value = value};
    (*n)++;
    note_name(m, copy);
    return value;
}

em_tensor *em_module_add_param(em_module *m, const char *name, em_tensor *value)
{
    if (value && !em_dtype_is_float(value->dtype)) {
        em_set_error(EM_ERR_ARG, "em_module_add_param: \"%s\" must be floating point, not %s",
                     name ? name : "", em_dtype_name(value->dtype));
        em_release(value);
        return NULL;
    }
    em_tensor *t = add_tensor(m, &m->params, &m->n_params, name, value, "em_module_add_param");
    return t ? em_requires_grad_(t, true) : NULL;
}

em_tensor *em_module_add_buffer(em_module *m, const char *name, em_tensor *value)
{
    return add_tensor(m, &m->buffers, &m->n_buffers, name, value, "em_module_add_buffer");
}

/* Raises the heights above m to what a child of height child_height under it needs. */
static void raise_heights(em_module *m, int child_height)
{
    for (int h = child_height + 1; m && books(m)->height < h; m = books(m)->parent, h++)
        books(m)->height = h;
}

/* Whether a is m or one of m's ancestors (the walk up is bounded by EM_MODULE_MAX_DEPTH). */
static bool is_ancestor(const em_module *a, const em_module *m)
{
    for (; m; m = books(m)->parent)
        if (m == a)
            return true;
    return false;
}

/* Checks that child may go under m: in no tree yet, not m or its ancestor, and the tree no
 * deeper than EM_MODULE_MAX_DEPTH after. */
static bool check_child(const em_module *m, const em_module *child, const char *name)
{
    static const char *fn = "em_module_add_child";
    bool cycle = is_ancestor(child, m);
    if (cycle || books(child)->parent) {
        em_set_error(EM_ERR_ARG, "%s: \"%s\" is %s", fn, name,
                     cycle ? "the module itself or its ancestor" : "already a child of a module");
        return false;
    }
    int depth = 2 + books(child)->height; /* modules from the root down to child's deepest leaf */
    for (const em_module *a = books(m)->parent; a; a = books(a)->parent)
        depth++;
    if (depth > EM_MODULE_MAX_DEPTH) {
        em_set_error(EM_ERR_ARG, "%s: \"%s\" would make the tree %d modules deep; at most %d "
                     "(EM_MODULE_MAX_DEPTH)", fn, name, depth, EM_MODULE_MAX_DEPTH);
        return false;
    }
    return true;
}

em_module *em_module_add_child(em_module *m, const char *name, em_module *child)
{
    if (!em_present(child, "em_module_add_child", "child"))
        return NULL;
    if (!check_add(m, name, "em_module_add_child") || !check_child(m, child, name)) {
        if (!books(child)->parent && !is_ancestor(child, m)) /* a module in a tree is the tree's */
            em_module_free(child);
        return NULL;
    }
    em_named_module *grown = room_for_one(m->children, m->n_children, sizeof *grown);
    char *copy = strdup(name);
    if (!grown || !copy) {
        if (grown)
            m->children = grown;
        free(copy);
        em_module_free(child);
        em_set_error(EM_ERR_MEMORY, "em_module_add_child: out of memory");
        return NULL;
    }
    m->children = grown;
    m->children[m->n_children++] = (em_named_module){.name = copy, .module = child};
    note_name(m, copy);
    books(child)->parent = m;
    raise_heights(m, books(child)->height);
    return child;
}

em_module *em_module_set_child(em_module *m, int i, em_module *child)
{
    em_module *old = m->children[i].module;
    books(old)->parent = NULL;
    m->children[i].module = child;
    books(child)->parent = m;
    /* the heights above may fall as well as rise */
    for (em_module *a = m; a; a = books(a)->parent) {
        module_books *ab = books(a);
        ab->height = 0;
        for (int k = 0; k < a->n_children; k++)
            if (books(a->children[k].module)->height + 1 > ab->height)
                ab->height = books(a->children[k].module)->height + 1;
    }
    return old;
}

bool em_module_add_children(em_module *m, int n, const char *const *names, em_module **kids)
{
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (!ok || !kids[i]) { /* add_child frees what it is given; free the rest here */
            em_module_free(kids[i]);
            ok = false;
            continue;
        }
        ok = em_module_add_child(m, names[i], kids[i]) != NULL;
    }
    return ok;
}

void em_module_free(em_module *m)
{
    if (!m)
        return;
    if (m->type && m->type->destroy)
        m->type->destroy(m);
    for (int i = 0; i < m->n_children; i++) {
        em_module_free(m->children[i].module);
        free(m->children[i].name);
    }
    for (int i = 0; i < m->n_params; i++) {
        em_release(m->params[i].value);
        free(m->params[i].name);
    }
    for (int i = 0; i < m->n_buffers; i++) {
        em_release(m->buffers[i].value);
        free(m->buffers[i].name);
    }
    module_names_free(books(m)->names);
    em_name_table_free(books(m)->own_names);
    free(m->children);
    free(m->params);
    free(m->buffers);
    free(books(m));
}

/* Frees m (on a failed append) unless it is part of a tree, which owns it; returns NULL. */
static em_module *free_unowned(em_module *m)
{
    if (m && !books(m)->parent)
        em_module_free(m);
    return NULL;
}

em_module *em_module_append_numbered(em_module *m, const em_module_type *type, em_module *child,
                                     const char *fn)
{
    if (!m || !child || m->type != type) {
        if (!m || !child)
            em_set_error(EM_ERR_ARG, "%s: %s is NULL", fn, m ? "module" : type->type_name);
        else
            em_set_error(EM_ERR_ARG, "%s: module is a %s, not a %s", fn, m->type->type_name,
                         type->type_name);
        free_unowned(child);
        return free_unowned(m);
    }
    char name[24];
    snprintf(name, sizeof name, "%d", m->n_children);
    return em_module_add_child(m, name, child) ? m : free_unowned(m);
}

em_module *em_module_numbered(const em_module_type *type, int n, va_list ap, const char *fn)
{
    em_module *m = n >= 0 ? em_module_alloc(sizeof(em_module), type) : NULL;
    if (n < 0)
        em_set_error(EM_ERR_ARG, "%s: count %d is negative", fn, n);
    for (int i = 0; i < n; i++) {
        em_module *child = va_arg(ap, em_module *);
        if (m)
            m = em_module_append_numbered(m, type, child, fn);
        else
            em_module_free(child);
    }
    return m;
}

em_module *em_module_build_numbered(const em_module_type *type, const void *options,
                                    em_module **children, int n)
{
    (void)options;
    em_module *m = em_module_alloc(sizeof(em_module), type);
    for (int i = 0; i < n; i++)
        if (m)
            m = em_module_append_numbered(m, type, children[i], type->type_name);
        else
            em_module_free(children[i]);
    return m;
}

em_module *em_module_child(const em_module *m, const char *dotted_name)
{
    if (!m || !dotted_name) {
        em_set_error(EM_ERR_ARG, "em_module_child: module and name must be given");
        return NULL;
    }
    const char *part = dotted_name;
    for (;;) {
        const char *dot = strchr(part, '.');
        size_t len = dot ? (size_t)(dot - part) : strlen(part);
        const em_module *next = NULL;
        for (int i = 0; i < m->n_children && !next; i++)
            if (strlen(m->children[i].name) == len && !strncmp(m->children[i].name, part, len))
                next = m->children[i].module;
        if (!next) {
            em_set_error(EM_ERR_ARG, "em_module_child: no child \"%.*s\" in this %s (looking "
                         "up \"%s\")", (int)len, part, m->type->type_name, dotted_name);
            return NULL;
        }
        m = next;
        if (!dot)
            return (em_module *)m;
        part = dot + 1;
    }
}

/* While the profiler runs, each forward is a region named by the module's dotted path from the
 * outermost module running on this thread ("" for that one), with its type as detail. */
static _Thread_local const em_module *running_module;
static _Thread_local char running_path[256];
static _Thread_local size_t running_path_len;

/* m's dotted path below parent ("blocks.0" when parent runs a grandchild itself) into buf, up to
 * 4 levels down; false when parent does not hold it. */
static bool path_below(const em_module *parent, const em_module *m, char *buf, size_t n,
                       int levels)
{
    for (int i = 0; i < parent->n_children; i++)
        if (parent->children[i].module == m)
            return snprintf(buf, n, "%s", parent->children[i].name) >= 0;
    for (int i = 0; levels > 1 && i < parent->n_children; i++) {
        char below[192];
        if (path_below(parent->children[i].module, m, below, sizeof below, levels - 1))
            return snprintf(buf, n, "%s.%s", parent->children[i].name, below) >= 0;
    }
    return false;
}

/* The name m has below parent, or its type's name when parent does not hold it. */
static void child_name(const em_module *parent, const em_module *m, char *buf, size_t n)
{
    if (!path_below(parent, m, buf, n, 4))
        snprintf(buf, n, "%s", m->type->type_name);
}

static em_tensor *profiled_forward(em_module *m, const em_tensor *x)
{
    const em_module *parent = running_module;
    size_t len = running_path_len;
    if (parent) {
        char name[192];
        child_name(parent, m, name, sizeof name);
        int n = snprintf(running_path + len, sizeof running_path - len, "%s%s", len ? "." : "",
                         name);
        running_path_len = n > 0 && len + (size_t)n < sizeof running_path
                               ? len + (size_t)n : sizeof running_path - 1;
    }
    bool open = em_prof_begin(EM_PROF_MODULE, running_path, m->type->type_name, true,
                              EM_PHASE_INHERIT, &x, 1);
    running_module = m;
    em_tensor *y = m->type->forward(m, x);
    running_module = parent;
    if (open)
        em_prof_end();
    running_path_len = len;
    running_path[len] = '\0';
    return y;
}

em_tensor *em_forward(em_module *m, const em_tensor *x)
{
    if (!em_present(x, "em_forward", "x"))
        return NULL;
    if (!m || !m->type || !m->type->forward) {
        em_set_error(EM_ERR_ARG, "em_forward: %s%s", m && m->type ? m->type->type_name
                                                                  : "module is NULL",
                     m && m->type ? " has no forward (run its children)" : "");
        return NULL;
    }
    em_tensor *y = EM_PROFILING() ? profiled_forward(m, x) : m->type->forward(m, x);
    if (forward_hook) {
        const em_tensor *outer = forward_hook_input;
        forward_hook_input = x;
        forward_hook(m, y, forward_hook_ctx);
        forward_hook_input = outer;
    }
    return y;
}

void em_module_train(em_module *m, bool training)
{
    if (!m)
        return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++)
        em_module_train(m->children[i].module, training);
}

void em_module_eval(em_module *m)
{
    em_module_train(m, false);
}

/* The root's stored copy of a dotted name (one per distinct name, so pointers handed out by
 * earlier traversals stay valid); NULL when out of memory. */
static const char *intern_name(em_module *root, const char *name)
{
    module_books *b = books(root);
    if (!b->names && !(b->names = calloc(1, sizeof *b->names)))
        return NULL;
    struct module_names *t = b->names;
    int64_t at;
    if (!t->index && !(t->index = em_name_table_new(64)))
        return NULL;
    if (em_name_table_get(t->index, name, &at))
        return t->names[at];
    char **grown = room_for_one(t->names, t->n, sizeof *grown);
    if (!grown)
        return NULL;
    t->names = grown;
    char *copy = strdup(name);
    if (!copy || em_name_table_add(t->index, copy, t->n, NULL) < 0) {
        free(copy);
        return NULL;
    }
    t->names[t->n++] = copy;
    return copy;
}

typedef struct {
    em_module *root;
    em_param_ref *out;
    int max, count;
    bool buffers;
    bool failed;
} walk_state;

static void walk(walk_state *w, const em_module *m, const char *prefix)
{
    int n = w->buffers ? m->n_buffers : m->n_params;
    const em_named_tensor *list = w->buffers ? m->buffers : m->params;
    for (int i = 0; i < n; i++, w->count++) {
        if (w->count >= w->max || w->failed)
            continue;
        char *full = NULL;
        if (asprintf(&full, "%s%s", prefix, list[i].name) < 0) {
            w->failed = true;
            continue;
        }
        const char *name = intern_name(w->root, full);
        free(full);
        if (!name) {
            w->failed = true;
            continue;
        }
        w->out[w->count] = (em_param_ref){.name = name, .value = list[i].value};
    }
    for (int i = 0; i < m->n_children; i++) {
        char *child_prefix = NULL;
        if (asprintf(&child_prefix, "%s%s.", prefix, m->children[i].name) < 0) {
            w->failed = true;
            return;
        }
        walk(w, m->children[i].module, child_prefix);
        free(child_prefix);
    }
}

static int traverse(const em_module *m, em_param_ref *out, int max, bool buffers,
                    const char *fn)
{
    if (!m || (max > 0 && !out)) {
        em_set_error(EM_ERR_ARG, "%s: module and output array must be given", fn);
        return -1;
    }
    /* the name cache is bookkeeping, not part of the module's value */
    walk_state w = {.root = (em_module *)m, .out = out, .max = max, .buffers = buffers};
    walk(&w, m, "");
    if (w.failed) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return -1;
    }
    return w.count;
}

int em_module_parameters(const em_module *m, em_param_ref *out, int max)
{
    return traverse(m, out, max, false, "em_module_parameters");
}

int em_module_buffers(const em_module *m, em_param_ref *out, int max)
{
    return traverse(m, out, max, true, "em_module_buffers");
}

em_tensor *em_module_find(const em_module *m, const char *dotted_name)
{
    if (!em_present(m, "em_module_find", "m")
        || !em_present(dotted_name, "em_module_find", "dotted_name"))
        return NULL;
    const char *dot = strchr(dotted_name, '.');
    if (!dot) {
        for (int i = 0; i < m->n_params; i++)
            if (!strcmp(m->params[i].name, dotted_name))
                return m->params[i].value;
        for (int i = 0; i < m->n_buffers; i++)
            if (!strcmp(m->buffers[i].name, dotted_name))
                return m->buffers[i].value;
        return NULL;
    }
    size_t len = (size_t)(dot - dotted_name);
    for (int i = 0; i < m->n_children; i++)
        if (strlen(m->children[i].name) == len &&
            !strncmp(m->children[i].name, dotted_name, len))
            return em_module_find(m->children[i].module, dot + 1);
    return NULL;
}

static uint64_t hash_tensors(uint64_t h, const em_named_tensor *list, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t t = em_tensor_hash(list[i].value);
        h = em_fnv1a(h, list[i].name, strlen(list[i].name) + 1);
        h = em_fnv1a(h, &t, sizeof t);
    }
    return h;
}

static uint64_t module_hash(uint64_t h, const em_module *m)
{
    h = em_fnv1a(h, m->type->type_name, strlen(m->type->type_name) + 1);
    h = hash_tensors(h, m->params, m->n_params);
    h = hash_tensors(h, m->buffers, m->n_buffers);
    for (int i = 0; i < m->n_children; i++)
        h = module_hash(em_fnv1a(h, m->children[i].name, strlen(m->children[i].name) + 1),
                        m->children[i].module);
    return h;
}

uint64_t em_module_hash(const em_module *m)
{
    return m ? module_hash(EM_FNV1A_START, m) : 0;
}

int64_t em_module_num_params(const em_module *m)
{
    if (!m)
        return 0;
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        n += em_numel(m->params[i].value);
    for (int i = 0; i < m->n_children; i++)
        n += em_module_num_params(m->children[i].module);
    return n;
}

void em_module_zero_grad(em_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_params; i++)
        em_zero_grad(m->params[i].value);
    for (int i = 0; i < m->n_children; i++)
        em_module_zero_grad(m->children[i].module);
}
