/* Dtype conversion: a copy in the new dtype whose gradient flows back cast to the input's dtype. */
#include "autograd/autograd_internal.h"

static em_status to_dtype_backward(em_node *node, const em_tensor *g /* t's shape */,
                                   em_tensor **grad_in)
{
    grad_in[0] = em_tensor_cast_raw(g, node->inputs[0]->dtype);
    return grad_in[0] ? EM_OK : em_error_status();
}

em_tensor *em_to_dtype(const em_tensor *t /* (*) */, em_dtype dtype)
{
    if (!em_present(t, "em_to_dtype", "t"))
        return NULL;
    if (!em_dtype_valid(dtype)) {
        em_set_error(EM_ERR_ARG, "em_to_dtype: invalid dtype %d", (int)dtype);
        return NULL;
    }
    em_scope_begin();
    em_tensor *in = (em_tensor *)t;
    bool differentiable = em_dtype_is_float(dtype);
    if (differentiable)
        em_op_begin("to_dtype", t);
    em_tensor *y = dtype == t->dtype ? em_alias_of(t) : em_tensor_cast_raw(t, dtype);
    if (y && differentiable && !em_record(y, "to_dtype", to_dtype_backward, &in, 1, NULL, 0, NULL))
        y = NULL;
    return em_scope_return(y);
}
