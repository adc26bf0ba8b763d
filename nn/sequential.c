/* Sequential: children "0", "1", ... applied in order; the temporaries between them are freed
 * inside the forward's own scope. A ReLU followed by max pooling, and a Linear followed by a
 * ReLU, run as one op. */
#include <stdarg.h>

#include "nn/nn_internal.h"
#include "observe/profiler_internal.h"

/* Whether a then b is ReLU then MaxPool2d (b's options into o): they run as em_relu_max_pool2d,
 * the same values and gradients without the full-size ReLU output. Not while a forward hook
 * watches each module's output. */
static bool relu_then_max_pool(const em_module *a, const em_module *b, em_pool2d_opts *o)
{
    if (em_forward_hooked() || !em_module_is_relu(a) || b->type != &em_max_pool2d_type)
        return false;
    *o = em_pool_opts_2d(em_module_options(b));
    return true;
}

/* Whether a then b is Linear then ReLU: they run as em_linear_relu, the same values and
 * gradients without the ReLU's own tensors. Not while a forward hook watches each module's
 * output, nor while the profiler lists each layer's time. */
static bool linear_then_relu(const em_module *a, const em_module *b)
{
    return !em_forward_hooked() && !EM_PROFILING() && em_module_is_linear(a) &&
           em_module_is_relu(b);
}

static em_tensor *sequential_forward(em_module *m, const em_tensor *x)
{
    if (m->n_children == 0)
        return em_reshape(x, em_shape_of(x));
    em_scope_begin();
    em_tensor *h = (em_tensor *)x;
    for (int i = 0; i < m->n_children && h; i++) {
        em_module *c = m->children[i].module, *next = i + 1 < m->n_children
                                                           ? m->children[i + 1].module : NULL;
        em_pool2d_opts o;
        if (next && relu_then_max_pool(c, next, &o)) {
            h = em_relu_max_pool2d(h, o);
            i++;
        } else if (next && linear_then_relu(c, next)) {
            h = em_linear_relu_forward(c, h);
            i++;
        } else {
            h = em_forward(c, h);
        }
    }
    em_keep(h);
    em_scope_end();
    return h;
}

EM_MODULE_TYPE(em_sequential_type) = {
    .type_name = "Sequential",
    .forward = sequential_forward,
    .traits = EM_TRAIT_CONTAINER | EM_TRAIT_SEQUENTIAL,
    .build = em_module_build_numbered,
};

em_module *em_sequential_append(em_module *seq, em_module *m)
{
    return em_module_append_numbered(seq, &em_sequential_type, m, "em_sequential_append");
}

em_module *em_sequential(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    em_module *seq = em_module_numbered(&em_sequential_type, n, ap, "em_sequential");
    va_end(ap);
    return seq;
}
