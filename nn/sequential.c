/* Sequential: children "0", "1", ... applied in order; the temporaries between them are freed
 * inside the forward's own scope. */
#include <stdarg.h>

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
    return em_module_append_numbered(seq, &sequential_type, m, "em_sequential_append");
}

em_module *em_sequential(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    em_module *seq = em_module_numbered(&sequential_type, n, ap, "em_sequential");
    va_end(ap);
    return seq;
}
