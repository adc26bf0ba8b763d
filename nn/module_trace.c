/* One traced forward of a model on zeros (eval mode, no grad) with a hook after every module's
 * forward: what the summary and the FLOP count read a model's layers by. */
#include <stdlib.h>

#include "nn/nn_internal.h"

/* The dtype and device a forward expects: i64 indices for a layer of the index-input trait
 * (Embedding) first, else those of the first parameter (f32 on the cpu when there is none). */
static void input_kind(const em_module *m, em_dtype *dtype, em_device *device)
{
    const em_module *leaf = m;
    while (leaf->n_children > 0 && leaf->n_params == 0)
        leaf = leaf->children[0].module;
    em_param_ref first;
    bool any = em_module_parameters(m, &first, 1) > 0;
    *dtype = leaf->type->traits & EM_TRAIT_INDEX_INPUT ? EM_I64
             : any ? first.value->dtype : EM_F32;
    *device = any ? first.value->device : EM_CPU;
}

int em_module_count(const em_module *m)
{
    int n = 1;
    for (int i = 0; i < m->n_children; i++)
        n += em_module_count(m->children[i].module);
    return n;
}

/* Depth-first: each module's mode into modes[*at] (save) or from it (restore). */
static void swap_modes(em_module *m, bool *modes, int *at, bool save)
{
    if (save)
        modes[(*at)++] = m->training;
    else
        m->training = modes[(*at)++];
    for (int i = 0; i < m->n_children; i++)
        swap_modes(m->children[i].module, modes, at, save);
}

em_status em_module_trace(em_module *m, em_shape input, em_forward_hook hook, void *ctx)
{
    bool *modes = malloc((size_t)em_module_count(m) * sizeof *modes);
    if (!modes)
        return em_set_error(EM_ERR_MEMORY, "em_module_trace: out of memory");
    int at = 0;
    swap_modes(m, modes, &at, true);
    em_module_eval(m);
    em_dtype dtype;
    em_device device;
    input_kind(m, &dtype, &device);
    bool grad = em_set_grad_enabled(false);
    void *prev_ctx;
    em_forward_hook prev = em_set_forward_hook(hook, ctx, &prev_ctx);
    em_scope_begin();
    em_tensor *x = em_zeros(input, dtype);
    if (x && device != EM_CPU)
        x = em_to_device(x, device);
    em_tensor *y = em_forward(m, x);
    em_scope_end();
    em_set_forward_hook(prev, prev_ctx, NULL);
    em_set_grad_enabled(grad);
    at = 0;
    swap_modes(m, modes, &at, false);
    free(modes);
    return y ? EM_OK : em_error_status();
}
