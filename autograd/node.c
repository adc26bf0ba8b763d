/* The tape's node: recording one on an op's output, reference counting and release, and the
 * gradient helpers backward rules share (sum over broadcast dims, accumulation). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

bool em_needs_grad(em_tensor *const *inputs, int n)
{
    if (!em_grad_enabled())
        return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad)
            return true;
    return false;
}

/* Where the parameter struct starts after the node in one allocation: aligned for any type. */
static size_t params_offset(void)
{
    size_t a = _Alignof(max_align_t);
    return (sizeof(em_node) + a - 1) / a * a;
}

em_node *em_node_attach(em_tensor *out, const char *op, em_backward_fn backward,
                        em_tensor *const *inputs, int n_inputs, const void *params,
                        size_t params_size)
{
    em_tensor_node_release_hook = em_node_release;
    em_node *node = calloc(1, params_offset() + params_size);
    em_tensor **in = calloc(n_inputs > 0 ? (size_t)n_inputs : 1, sizeof *in);
    if (!node || !in) {
        free(node);
        free(in);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory recording the graph", op);
        return NULL;
    }
    node->op = op;
    node->backward = backward;
    node->n_inputs = n_inputs;
    node->inputs = in;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && inputs[i]->requires_grad)
            in[i] = em_retain(inputs[i]);
    if (params_size > 0) {
        node->params = (char *)node + params_offset();
        memcpy(node->params, params, params_size);
    }
    node->out_shape = em_shape_of(out);
    node->out_dtype = out->dtype;
    node->refcount = 1;
    out->node = node;
    out->requires_grad = true;
    return node;
}

/* Drop what the node holds: its inputs, saved tensors and pending gradient. */
void em_node_free_held(em_node *node)
{
    for (int i = 0; i < node->n_inputs; i++)
        em_release(node->inputs[i]);
    free(node->inputs);
    node->inputs = NULL;
    node->n_inputs = 0;
    for (int i = 0; i < EM_NODE_MAX_SAVED; i++) {
        em_release(node->saved[i]);
        node->saved[i] = NULL;
    }
    em_release(node->grad_accum);
    node->grad_accum = NULL;
    if (node->params_release)
        node->params_release(node->params);
    node->params_release = NULL;
    free(node->input_shapes);
    node->input_shapes = NULL;
}

void em_node_release(em_node *node)
{
    if (!node || --node->refcount > 0)
        return;
    em_node_free_held(node);
    free(node);
}

em_tensor *em_grad_sum_to(const em_tensor *grad, const em_shape *shape)
{
    if (!em_present(grad, "em_grad_sum_to", "grad"))
        return NULL;
    int lead = grad->ndim - shape->ndim;
    int dims[EM_MAX_DIMS], n = 0;
    for (int d = 0; d < grad->ndim; d++)
        if (d < lead || (shape->d[d - lead] == 1 && grad->shape[d] != 1))
            dims[n++] = d;
    if (n == 0 && lead == 0)
        return em_alias_of(grad);
    em_tensor *s = em_sum(grad, dims, n, true);
    return s ? em_reshape(s, *shape) : NULL;
}

em_status em_grad_accumulate(em_tensor **acc, em_tensor *g)
{
    if (!g)
        return em_error_status() != EM_OK ? em_error_status() : EM_ERR_ARG;
    if (!*acc) {
        *acc = em_retain(g);
        return EM_OK;
    }
    if (em_tensor_exclusive(*acc) && em_same_shape(*acc, g) && (*acc)->dtype == g->dtype) {
        const em_backend *be = em_tensor_backend(g, "em_backward");
        if (!be)
            return em_error_status();
        em_arr o = em_tensor_arr(*acc), b = em_tensor_arr(g);
        return em_kernel_status(be->binary(EM_BINARY_ADD, &o, &o, &b), "em_backward", g);
    }
    em_tensor *sum = em_raw_binary("em_backward", EM_BINARY_ADD, *acc, g);
    if (!sum)
        return em_error_status();
    em_release(*acc);
    *acc = em_retain(sum);
    return EM_OK;
}
