/* The pruning reparametrization: NAME becomes NAME_orig plus a NAME_mask buffer, the module's
 * type is swapped for one whose forward multiplies them first; custom masks, remove, queries. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "prune/prune_internal.h"
#include "tensor/core_internal.h"

/* A pruned module's type: the original's description with pruned_forward and without build.
 * One per original type, made on first use and never freed. */
typedef struct {
    em_module_type type; /* first: a module's type pointer points here */
    const em_module_type *orig;
} pruned_type;

#define MAX_PRUNED_TYPES 64
static pruned_type registry[MAX_PRUNED_TYPES];
static int n_registered;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static em_tensor *pruned_forward(em_module *m, const em_tensor *x);

static bool is_pruned_type(const em_module_type *t)
{
    return t->forward == pruned_forward;
}

static const em_module_type *orig_type(const em_module_type *t)
{
    return is_pruned_type(t) ? ((const pruned_type *)t)->orig : t;
}

static const em_module_type *pruned_type_of(const em_module_type *orig, const char *fn)
{
    const em_module_type *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registered && !found; i++)
        if (registry[i].orig == orig)
            found = &registry[i].type;
    if (!found && n_registered < MAX_PRUNED_TYPES) {
        pruned_type *p = &registry[n_registered++];
        /* the original's description, but no build: a file cannot rebuild the masks */
        *p = (pruned_type){.type = *orig, .orig = orig};
        p->type.forward = pruned_forward;
        p->type.build = NULL;
        p->type.wraps = orig;
        found = &p->type;
    }
    pthread_mutex_unlock(&registry_lock);
    if (!found)
        em_set_error(EM_ERR_UNSUPPORTED, "%s: more than %d module types pruned", fn,
                     MAX_PRUNED_TYPES);
    return found;
}

int em_prune_find_param(const em_module *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name))
            return i;
    return -1;
}

int em_prune_find_buffer(const em_module *m, const char *name)
{
    for (int i = 0; i < m->n_buffers; i++)
        if (!strcmp(m->buffers[i].name, name))
            return i;
    return -1;
}

/* The mask of parameter i when it is a NAME_orig with a NAME_mask buffer, else NULL. */
static em_tensor *mask_of_param(const em_module *m, int i)
{
    const char *p = m->params[i].name;
    size_t len = strlen(p);
    if (len <= 5 || strcmp(p + len - 5, "_orig"))
        return NULL;
    char mask[160];
    snprintf(mask, sizeof mask, "%.*s_mask", (int)(len - 5), p);
    int b = em_prune_find_buffer(m, mask);
    return b >= 0 ? m->buffers[b].value : NULL;
}

/* Runs the original forward with each pruned parameter replaced by orig * mask, as PyTorch's
 * forward pre-hook sets module.weight. */
static em_tensor *pruned_forward(em_module *m, const em_tensor *x)
{
    int n = m->n_params;
    em_tensor **orig = malloc((size_t)(n ? n : 1) * sizeof *orig);
    if (!orig) {
        em_set_error(EM_ERR_MEMORY, "em_forward: out of memory for a pruned %s's %d parameters",
                     m->type->type_name, n);
        return NULL;
    }
    bool ok = true;
    em_scope_begin();
    for (int i = 0; i < n; i++) {
        orig[i] = m->params[i].value;
        em_tensor *mask = mask_of_param(m, i);
        if (mask && ok) {
            m->params[i].value = em_mul(orig[i], mask);
            ok = m->params[i].value != NULL;
        }
    }
    em_tensor *y = ok ? orig_type(m->type)->forward(m, x) : NULL;
    for (int i = 0; i < n; i++)
        m->params[i].value = orig[i];
    free(orig);
    em_keep(y);
    em_scope_end();
    return y;
}

em_status em_prune_write(em_tensor *dst, const float *values, const char *fn)
{
    em_tensor *src = em_from_data(em_shape_of(dst), EM_F32, values);
    em_status st = src ? em_copy_(dst, src) : em_error_status();
    em_release(src);
    if (st != EM_OK)
        em_set_error(st, "%s: %s", fn, em_error());
    return st;
}

em_tensor *em_prune_reparametrize(em_module *m, const char *name, const char *fn)
{
    if (!m || !name) {
        em_set_error(EM_ERR_ARG, "%s: module and parameter name must be given", fn);
        return NULL;
    }
    char orig_name[160], mask_name[160];
    snprintf(orig_name, sizeof orig_name, "%s_orig", name);
    snprintf(mask_name, sizeof mask_name, "%s_mask", name);
    int b = em_prune_find_buffer(m, mask_name);
    if (b >= 0 && em_prune_find_param(m, orig_name) >= 0)
        return m->buffers[b].value;
    int i = em_prune_find_param(m, name);
    if (i < 0) {
        em_set_error(EM_ERR_ARG, "%s: %s has no parameter '%s'", fn, m->type->type_name, name);
        return NULL;
    }
    const em_module_type *type = pruned_type_of(orig_type(m->type), fn);
    char *renamed = type ? strdup(orig_name) : NULL;
    if (type && !renamed)
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    em_tensor *w = m->params[i].value;
    em_tensor *mask = renamed ? em_module_add_buffer(m, mask_name, em_ones_like(w)) : NULL;
    if (!mask) {
        free(renamed);
        return NULL;
    }
    free(m->params[i].name);
    m->params[i].name = renamed;
    em_module_names_changed(m);
    m->type = type;
    return mask;
}

em_tensor *em_prune_mask(const em_module *m, const char *name)
{
    if (!em_present(m, "em_prune_mask", "m") || !em_present(name, "em_prune_mask", "name"))
        return NULL;
    char orig_name[160], mask_name[160];
    snprintf(orig_name, sizeof orig_name, "%s_orig", name);
    snprintf(mask_name, sizeof mask_name, "%s_mask", name);
    int b = em_prune_find_buffer(m, mask_name);
    return b >= 0 && em_prune_find_param(m, orig_name) >= 0 ? m->buffers[b].value : NULL;
}

em_tensor *em_prune_param(const em_module *m, const char *name)
{
    if (!em_present(m, "em_prune_param", "m") || !em_present(name, "em_prune_param", "name"))
        return NULL;
    em_tensor *mask = em_prune_mask(m, name);
    if (!mask) {
        int i = em_prune_find_param(m, name);
        return i >= 0 ? em_retain(m->params[i].value) : NULL;
    }
    char orig_name[160];
    snprintf(orig_name, sizeof orig_name, "%s_orig", name);
    bool grad = em_set_grad_enabled(false);
    em_tensor *v = em_mul(m->params[em_prune_find_param(m, orig_name)].value, mask);
    em_set_grad_enabled(grad);
    return v;
}

em_status em_prune_custom_from_mask(em_module *m, const char *name, const em_tensor *mask)
{
    const char *fn = "em_prune_custom_from_mask";
    if (!mask)
        return em_set_error(EM_ERR_ARG, "%s: NULL mask", fn);
    em_tensor *w = em_prune_param(m, name);
    char sw[64], sm[64];
    if (w && !em_same_shape(w, mask)) {
        em_status st = em_set_error(EM_ERR_ARG, "%s: mask %s differs from %s's shape %s", fn,
                                    em_shape_str(mask, sm, sizeof sm), name,
                                    em_shape_str(w, sw, sizeof sw));
        em_release(w);
        return st;
    }
    em_release(w);
    em_tensor *cur = em_prune_reparametrize(m, name, fn);
    float *old = cur ? em_host_f32(cur, fn) : NULL;
    float *add = old ? em_host_f32(mask, fn) : NULL;
    em_status st = add ? EM_OK : em_error_status();
    if (add) {
        for (int64_t i = 0; i < em_numel(cur); i++)
            old[i] = add[i] != 0 ? old[i] : 0;
        st = em_prune_write(cur, old, fn);
    }
    free(old);
    free(add);
    return st;
}

em_status em_prune_remove(em_module *m, const char *name)
{
    const char *fn = "em_prune_remove";
    em_tensor *mask = em_prune_mask(m, name);
    if (!mask)
        return em_set_error(EM_ERR_ARG, "%s: parameter '%s' of %s is not pruned", fn,
                            name ? name : "", m ? m->type->type_name : "NULL module");
    char orig_name[160], mask_name[160];
    snprintf(orig_name, sizeof orig_name, "%s_orig", name);
    snprintf(mask_name, sizeof mask_name, "%s_mask", name);
    int i = em_prune_find_param(m, orig_name), b = em_prune_find_buffer(m, mask_name);
    em_tensor *v = em_prune_param(m, name);
    char *renamed = v ? strdup(name) : NULL;
    em_status st = renamed ? em_copy_(m->params[i].value, v)
                           : v ? em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn)
                               : em_error_status();
    em_release(v);
    if (st != EM_OK) {
        free(renamed);
        return st;
    }
    free(m->params[i].name);
    m->params[i].name = renamed;
    em_release(m->buffers[b].value);
    free(m->buffers[b].name);
    memmove(&m->buffers[b], &m->buffers[b + 1],
            sizeof *m->buffers * (size_t)(m->n_buffers - b - 1));
    m->n_buffers--;
    em_module_names_changed(m);
    bool still = false;
    for (int p = 0; p < m->n_params; p++)
        still = still || mask_of_param(m, p);
    if (!still)
        m->type = orig_type(m->type);
    return EM_OK;
}

em_status em_prune_remove_all(em_module *model)
{
    if (!model)
        return em_set_error(EM_ERR_ARG, "em_prune_remove_all: NULL model");
    for (int p = 0; p < model->n_params; p++) {
        if (!mask_of_param(model, p))
            continue;
        char base[160];
        snprintf(base, sizeof base, "%.*s", (int)strlen(model->params[p].name) - 5,
                 model->params[p].name);
        em_status st = em_prune_remove(model, base);
        if (st != EM_OK)
            return st;
    }
    for (int c = 0; c < model->n_children; c++) {
        em_status st = em_prune_remove_all(model->children[c].module);
        if (st != EM_OK)
            return st;
    }
    return EM_OK;
}

bool em_prune_is_pruned(const em_module *model)
{
    if (!model)
        return false;
    if (is_pruned_type(model->type))
        return true;
    for (int c = 0; c < model->n_children; c++)
        if (em_prune_is_pruned(model->children[c].module))
            return true;
    return false;
}
