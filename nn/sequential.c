/* Sequential: children "0", "1", ... applied in order; the temporaries between them are freed
 * inside the forward's own scope. */
#include <stdarg.h>
#include <stdio.h>

#include "nn/nn_internal.h"

static em_tensor *sequential_forward(em_module *m, const em_tensor *x)
{
    if (m->n_children == 0)
        return em_reshape(x, em_shape_of(x));
    em_scope_begin();
    em_tensor *h = (em_tensor *)x;
    for (int i = 0; i < m->n_children && h; i++)
        h = em_forward(m->children[i].module, h);
    em_keep(h);
    em_scope_end();
    return h;
}

static const em_module_type sequential_type = {"Sequential", sequential_forward, NULL, NULL};

em_module *em_sequential_append(em_module *seq, em_module *m)
{
    if (!seq || !m) {
        em_set_error(EM_ERR_ARG, "em_sequential_append: %s is NULL", seq ? "module" : "seq");
        em_module_free(seq);
        em_module_free(m);
        return NULL;
    }
    if (seq->type != &sequential_type) {
        em_set_error(EM_ERR_ARG, "em_sequential_append: module is a %s, not a Sequential",
                     seq->type->type_name);
        em_module_free(seq);
        em_module_free(m);
        return NULL;
    }
    char name[24];
    snprintf(name, sizeof name, "%d", seq->n_children);
    if (!em_module_add_child(seq, name, m)) {
        em_module_free(seq);
        return NULL;
    }
    return seq;
}

em_module *em_sequential(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    em_module *seq = n >= 0 ? em_module_alloc(sizeof(em_module), &sequential_type) : NULL;
    if (n < 0)
        em_set_error(EM_ERR_ARG, "em_sequential: count %d is negative", n);
    for (int i = 0; i < n; i++) {
        em_module *m = va_arg(ap, em_module *);
        if (seq)
            seq = em_sequential_append(seq, m);
        else
            em_module_free(m);
    }
    va_end(ap);
    return seq;
}
