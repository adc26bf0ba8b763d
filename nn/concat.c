/* Concat: y = cat([branch_0(x), ..., branch_n-1(x)], dim), children "0", "1", ...; with an
 * Identity as a branch it is a U-Net's skip connection (em_concat_skip), so a model that joins
 * branches needs no module type of its own. Its one setting, dim, is in its description, so
 * model files and the ONNX export know it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_concat_options o;
} concat_module;

static em_tensor *concat_forward(em_module *m, const em_tensor *x /* (*) */)
{
    em_tensor **outs = malloc((size_t)m->n_children * sizeof *outs);
    if (!outs) {
        em_set_error(EM_ERR_MEMORY, "Concat: out of memory");
        return NULL;
    }
    em_scope_begin();
    bool ok = true;
    for (int i = 0; i < m->n_children && ok; i++)
        ok = (outs[i] = em_forward(m->children[i].module, x)) != NULL;
    em_tensor *y = ok ? em_cat(outs, m->n_children, (int)((concat_module *)m)->o.dim) : NULL;
    free(outs);
    return em_nn_scope_return(y);
}

static const em_setting concat_settings[] = {
    {.name = "dim", .kind = EM_SETTING_INT, .offset = offsetof(em_concat_options, dim),
     .min = -EM_MAX_DIMS, .max = EM_MAX_DIMS - 1, .def = 1}};

/* A Concat over dim holding the n children (taken, freed on failure); NULL with an error
 * naming fn. */
static em_module *concat_new(int64_t dim, em_module **children, int n, const char *fn)
{
    char why[160];
    em_concat_options o = {.dim = dim};
    em_module *m = NULL;
    if (n < 1)
        em_set_error(EM_ERR_ARG, "%s: needs at least one branch", fn);
    else if (!em_options_check(&em_concat_type, &o, why, sizeof why))
        em_set_error(EM_ERR_ARG, "%s: %s", fn, why);
    else if ((m = em_module_alloc(sizeof(concat_module), &em_concat_type)))
        ((concat_module *)m)->o = o;
    for (int i = 0; i < n; i++)
        if (m)
            m = em_module_append_numbered(m, &em_concat_type, children[i], fn);
        else
            em_module_free(children[i]);
    return m;
}

static em_module *concat_build(const em_module_type *type, const void *options,
                               em_module **children, int n)
{
    return concat_new(((const em_concat_options *)options)->dim, children, n, type->type_name);
}

EM_MODULE_TYPE(em_concat_type) = {
    .type_name = "Concat",
    .forward = concat_forward,
    EM_SETTINGS(concat_settings),
    .options_offset = offsetof(concat_module, o),
    .options_size = sizeof(em_concat_options),
    .traits = EM_TRAIT_CONTAINER,
    .build = concat_build,
    .flops = em_no_flops,
};

em_module *em_concat(int dim, int n, ...)
{
    em_module **children = malloc((size_t)(n > 0 ? n : 1) * sizeof *children);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        em_module *c = va_arg(ap, em_module *);
        if (children)
            children[i] = c;
        else
            em_module_free(c);
    }
    va_end(ap);
    if (!children) {
        em_set_error(EM_ERR_MEMORY, "em_concat: out of memory");
        return NULL;
    }
    em_module *m = concat_new(dim, children, n, "em_concat");
    free(children);
    return m;
}

em_module *em_concat_skip(em_module *inner, int dim)
{
    if (!inner) {
        if (!em_has_error())
            em_set_error(EM_ERR_ARG, "em_concat_skip: inner is NULL");
        return NULL;
    }
    return em_concat(dim, 2, em_identity_layer(), inner);
}
