/* The grads of a set of parameters on one device and in one dtype, as the lists one backend
 * launch goes over (the grad scaler's unscale, the norm sums of clipping and the guards); grads
 * that are not contiguous go through contiguous copies, written back when asked. */
#include <stdlib.h>

#include "optim/guards_internal.h"

em_status em_grad_list_make(const char *fn, em_tensor *const *params, int n, em_device dev,
                            em_dtype dt, em_grad_list *l)
{
    size_t m = (size_t)(n > 0 ? n : 1);
    *l = (em_grad_list){.numel = malloc(m * sizeof *l->numel),
                        .data = malloc(m * sizeof *l->data),
                        .which = malloc(m * sizeof *l->which),
                        .copies = calloc(m, sizeof *l->copies)};
    if (!l->numel || !l->data || !l->which || !l->copies)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    for (int i = 0; i < n; i++) {
        em_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g || g->device != dev || g->dtype != dt)
            continue;
        em_tensor *c = em_is_contiguous(g) ? g : em_tensor_contiguous_raw(g);
        if (!c)
            return em_error_status();
        l->copies[l->n] = c != g ? c : NULL;
        l->numel[l->n] = em_numel(c);
        l->data[l->n] = em_data_ptr(c);
        l->which[l->n++] = i;
    }
    return EM_OK;
}

em_array_list em_grad_list_arrays(const em_grad_list *l)
{
    return (em_array_list){.n = l->n, .numel = l->numel, .data = l->data};
}

em_status em_grad_list_write_back(const em_grad_list *l, em_tensor *const *params)
{
    for (int k = 0; k < l->n; k++)
        if (l->copies[k] && em_copy_(params[l->which[k]]->grad, l->copies[k]) != EM_OK)
            return em_error_status();
    return EM_OK;
}

void em_grad_list_free(em_grad_list *l)
{
    for (int k = 0; l->copies && k < l->n; k++)
        em_release(l->copies[k]);
    free(l->numel);
    free(l->data);
    free(l->which);
    free(l->copies);
    *l = (em_grad_list){0};
}
