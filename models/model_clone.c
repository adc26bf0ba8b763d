/* em_module_clone: a deep copy of a module tree through each module's description (its type's
 * settings and build, as em_model_load rebuilds a file), its tensors copied in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_file_internal.h"
#include "nn/nn_internal.h"
#include "quant/quantize.h"

/* dst (built for the copy) takes src's dtype, device, values and requires_grad, in place so
 * that whatever the built module holds of it stays valid; false with an error naming what. */
static bool copy_tensor(em_tensor *dst, const em_tensor *src, const char *what, const char *path)
{
    if (!em_same_shape(dst, src)) {
        char bd[64], bs[64];
        em_set_error(EM_ERR_ARG, "em_module_clone: module '%s': %s is %s, built as %s",
                     em_model_module_name(path), what, em_shape_str(src, bs, sizeof bs),
                     em_shape_str(dst, bd, sizeof bd));
        return false;
    }
    return em_to_dtype_(dst, src->dtype) == EM_OK && em_to_device_(dst, src->device) == EM_OK &&
           em_copy_(dst, src) == EM_OK &&
           em_requires_grad_(dst, src->requires_grad) != NULL;
}

/* Whether the copy's named tensors are the original's, one for one: n of them each. */
static bool copy_named(em_named_tensor *dst, int n_dst, const em_named_tensor *src, int n,
                       const char *path)
{
    if (n_dst != n) {
        em_set_error(EM_ERR_ARG, "em_module_clone: module '%s' holds %d tensors, its build %d",
                     em_model_module_name(path), n, n_dst);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(dst[i].name, src[i].name)) {
            em_set_error(EM_ERR_ARG, "em_module_clone: module '%s' holds '%s' where its build "
                         "holds '%s'", em_model_module_name(path), src[i].name, dst[i].name);
            return false;
        }
        if (!copy_tensor(dst[i].value, src[i].value, src[i].name, path))
            return false;
    }
    return true;
}

/* dst (built for the copy) takes src's tensors and train/eval mode and, with children, those of
 * every module below it: the modules a type's build makes itself (a MultiheadAttention's
 * out_proj, a GPT's blocks) are filled in where they stand. */
static bool copy_state(em_module *dst, const em_module *src, const char *path, bool children)
{
    if (!copy_named(dst->params, dst->n_params, src->params, src->n_params, path) ||
        !copy_named(dst->buffers, dst->n_buffers, src->buffers, src->n_buffers, path))
        return false;
    dst->training = src->training;
    if (!children)
        return true;
    if (dst->n_children != src->n_children) {
        em_set_error(EM_ERR_ARG, "em_module_clone: module '%s' holds %d modules, its build %d",
                     em_model_module_name(path), src->n_children, dst->n_children);
        return false;
    }
    for (int i = 0; i < src->n_children; i++) {
        char sub[EM_MODEL_PATH_CHARS];
        em_model_child_path(sub, path, src->children[i].name);
        if (strcmp(dst->children[i].name, src->children[i].name)) {
            em_set_error(EM_ERR_ARG, "em_module_clone: module '%s' holds '%s' where its build "
                         "holds '%s'", em_model_module_name(path), src->children[i].name,
                         dst->children[i].name);
            return false;
        }
        if (!copy_state(dst->children[i].module, src->children[i].module, sub, true))
            return false;
    }
    return true;
}

/* A container is rebuilt around copies of its children; any other module is built whole by its
 * type, then filled in. */
static em_module *clone_node(const em_module *m, const char *path)
{
    const em_module_type *own = em_module_own_type(m);
    if (!m->type->build) {
        em_set_error(EM_ERR_ARG, "em_module_clone: module '%s' is a %s, whose type has no build "
                     "to copy it through (its settings and build, as a model file needs; a "
                     "pruned layer: em_prune_remove it)", em_model_module_name(path),
                     own->type_name);
        return NULL;
    }
    bool container = own->traits & EM_TRAIT_CONTAINER;
    int n = container ? m->n_children : 0;
    em_module **kids = malloc((size_t)(n ? n : 1) * sizeof *kids);
    if (!kids) {
        em_set_error(EM_ERR_MEMORY, "em_module_clone: out of memory for module '%s''s %d "
                     "children", em_model_module_name(path), n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        char sub[EM_MODEL_PATH_CHARS];
        em_model_child_path(sub, path, m->children[i].name);
        if (!(kids[i] = clone_node(m->children[i].module, sub))) {
            for (int j = 0; j < i; j++)
                em_module_free(kids[j]);
            free(kids);
            return NULL;
        }
    }
    em_module *c = own->build(own, em_module_options(m), kids, n);
    free(kids);
    if (c && !copy_state(c, m, path, !container)) {
        em_module_free(c);
        return NULL;
    }
    return c;
}

em_module *em_module_clone(const em_module *m)
{
    if (!m) {
        em_set_error(EM_ERR_ARG, "em_module_clone: NULL module");
        return NULL;
    }
    em_scope_begin(); /* the copy's tensors are its own; what copying makes is freed here */
    bool grad = em_set_grad_enabled(false);
    em_module *c = clone_node(m, "");
    em_set_grad_enabled(grad);
    em_scope_end();
    if (c && em_is_quantized(c) && em_quantize_repack(c) != EM_OK) {
        em_module_free(c);
        return NULL;
    }
    return c;
}
