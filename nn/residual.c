/* Residual: y = body(x) + shortcut(x), with the identity when there is no shortcut; children
 * "body" and "shortcut". With Sequential inside it, a ResNet block or a pre-norm transformer
 * block needs no module type of its own. */
#include <stdio.h>

#include "nn/nn_internal.h"

/* children: body, then shortcut when there is one */
static em_tensor *residual_forward(em_module *m, const em_tensor *x /* (*) */)
{
    em_scope_begin();
    em_tensor *body = em_forward(m->children[0].module, x), *y = NULL;
    const em_tensor *skip = m->n_children > 1 ? em_forward(m->children[1].module, x) : x;
    if (body && skip && !em_same_shape(body, skip)) {
        char bb[128], bs[128];
        em_set_error(EM_ERR_ARG, "Residual: body gives %s, %s gives %s",
                     em_shape_str(body, bb, sizeof bb),
                     m->n_children > 1 ? "shortcut" : "the identity",
                     em_shape_str(skip, bs, sizeof bs));
    } else if (body && skip) {
        y = em_keep(em_add(body, skip));
    }
    em_scope_end();
    return y;
}

static void residual_describe(const em_module *m, char *buf, size_t n)
{
    snprintf(buf, n, "shortcut=%s", m->n_children > 1 ? "module" : "identity");
}

/* the sum of the two branches: 1 per element */
static double residual_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)m, (void)x;
    return (double)em_numel(y);
}

static em_module *residual_build(const em_module_type *type, const void *options,
                                 em_module **children, int n)
{
    (void)options;
    if (n == 1 || n == 2)
        return em_residual(children[0], n == 2 ? children[1] : NULL);
    for (int i = 0; i < n; i++)
        em_module_free(children[i]);
    em_set_error(EM_ERR_ARG, "%s: %d children, not 1 or 2 (body and shortcut)",
                 type->type_name, n);
    return NULL;
}

EM_MODULE_TYPE(em_residual_type) = {
    .type_name = "Residual",
    .forward = residual_forward,
    .describe = residual_describe,
    .traits = EM_TRAIT_CONTAINER,
    .build = residual_build,
    .flops = residual_flops,
};

em_module *em_residual(em_module *body, em_module *shortcut)
{
    em_module *m = body ? em_module_alloc(sizeof(em_module), &em_residual_type) : NULL;
    if (!body && !em_has_error())
        em_set_error(EM_ERR_ARG, "em_residual: body is NULL");
    if (!m) {
        em_module_free(body);
        em_module_free(shortcut);
        return NULL;
    }
    if (!em_module_add_child(m, "body", body)) {
        em_module_free(m);
        em_module_free(shortcut);
        return NULL;
    }
    if (shortcut && !em_module_add_child(m, "shortcut", shortcut)) {
        em_module_free(m);
        return NULL;
    }
    return m;
}
