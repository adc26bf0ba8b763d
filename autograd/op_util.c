/* Helpers the op files share: dim normalisation, backend entry checks and the raw (graph-free)
 * fill, copy, unary, binary and reduce calls that forward passes and backward rules build on. */
#include "autograd/autograd_internal.h"

int em_norm_dim(int dim, int ndim)
{
    if (dim < 0)
        dim += ndim;
    return (dim < 0 || dim >= ndim) ? -1 : dim;
}

bool em_kernel_present(const void *entry, const char *fn, const em_tensor *t)
{
    if (entry)
        return true;
    em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported on %s", fn, em_device_name(t->device));
    return false;
}

em_tensor *em_raw_full(const char *fn, const em_shape *s, em_dtype dt, em_device dev, double v)
{
    em_tensor *t = em_empty_on(*s, dt, dev);
    if (!t)
        return NULL;
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be || !em_kernel_present((const void *)be->fill, fn, t))
        return NULL;
    em_arr a = em_tensor_arr(t);
    if (em_kernel_status(be->fill(&a, v), fn, t) != EM_OK)
        return NULL;
    return t;
}

em_status em_raw_copy_into(const char *fn, em_tensor *out, const em_tensor *in)
{
    const em_backend *be = em_tensor_backend(out, fn);
    if (!be)
        return em_error_status();
    if (!em_kernel_present((const void *)be->copy, fn, out))
        return EM_ERR_UNSUPPORTED;
    em_shape s = em_shape_of(out);
    em_arr o = em_tensor_arr(out), i = em_tensor_arr_broadcast(in, &s);
    return em_kernel_status(be->copy(&o, &i), fn, in);
}

em_tensor *em_raw_unary(const char *fn, em_unary_op op, em_unary_params p, const em_tensor *x)
{
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be || !em_kernel_present((const void *)be->unary, fn, x))
        return NULL;
    em_tensor *y = em_empty_on(em_shape_of(x), x->dtype, x->device);
    if (!y)
        return NULL;
    em_arr o = em_tensor_arr(y), i = em_tensor_arr(x);
    if (em_kernel_status(be->unary(op, &p, &o, &i), fn, x) != EM_OK)
        return NULL;
    return y;
}

em_tensor *em_raw_binary(const char *fn, em_binary_op op, const em_tensor *a, const em_tensor *b)
{
    em_shape sa = em_shape_of(a), sb = em_shape_of(b), s;
    if (!em_broadcast_shapes(&sa, &sb, &s)) {
        char ba[128], bb[128];
        em_set_error(EM_ERR_ARG, "%s: shapes do not broadcast: %s and %s", fn,
                     em_shape_str(a, ba, sizeof ba), em_shape_str(b, bb, sizeof bb));
        return NULL;
    }
    const em_backend *be = em_tensor_backend(a, fn);
    if (!be || !em_kernel_present((const void *)be->binary, fn, a))
        return NULL;
    em_dtype dt = em_binary_is_compare(op) ? EM_BOOL : a->dtype;
    em_tensor *y = em_empty_on(s, dt, a->device);
    if (!y)
        return NULL;
    em_arr o = em_tensor_arr(y);
    em_arr xa = em_tensor_arr_broadcast(a, &s), xb = em_tensor_arr_broadcast(b, &s);
    if (em_kernel_status(be->binary(op, &o, &xa, &xb), fn, a) != EM_OK)
        return NULL;
    return y;
}

em_tensor *em_raw_reduce(const char *fn, em_reduce_op op, em_reduce_params p, const em_tensor *x,
                         unsigned mask)
{
    const em_backend *be = em_tensor_backend(x, fn);
    if (!be || !em_kernel_present((const void *)be->reduce, fn, x))
        return NULL;
    em_shape s = em_shape_of(x);
    for (int d = 0; d < s.ndim; d++)
        if (mask & (1u << d))
            s.d[d] = 1;
    /* as PyTorch: indices are i64, and so are sums and products of integers and bools */
    bool int_sum = (op == EM_REDUCE_SUM || op == EM_REDUCE_PROD) && !em_dtype_is_float(x->dtype);
    em_dtype dt = (op == EM_REDUCE_ARGMAX || op == EM_REDUCE_ARGMIN || int_sum) ? EM_I64 : x->dtype;
    em_tensor *in = x->dtype == EM_BOOL && int_sum ? em_tensor_cast_raw(x, EM_I64) : em_retain(
                                                                                  (em_tensor *)x);
    em_tensor *y = in ? em_empty_on(s, dt, x->device) : NULL;
    em_arr o, i;
    if (y) {
        o = em_tensor_arr(y);
        i = em_tensor_arr(in);
    }
    if (y && em_kernel_status(be->reduce(op, &p, &o, &i), fn, x) != EM_OK) {
        em_release(y);
        y = NULL;
    }
    em_release(in);
    return y;
}

em_tensor *em_index_on(const int64_t *idx /* (n) */, int64_t n, em_device dev)
{
    em_tensor *t = em_from_data(EM_SHAPE(n), EM_I64, idx);
    return t && dev != EM_CPU ? em_to_device(t, dev) : t;
}

em_tensor *em_alias_of(const em_tensor *t)
{
    return em_tensor_alias(t, t->ndim, t->shape, t->strides, t->offset);
}

em_tensor *em_scope_return(em_tensor *y)
{
    y = em_keep(y);
    em_scope_end();
    return y;
}

bool em_record(em_tensor *out, const char *op, em_backward_fn backward,
               em_tensor *const *inputs, int n_inputs, const void *params, size_t params_size,
               em_node **node)
{
    if (EM_PROFILING())
        em_prof_op_end(op, inputs, n_inputs);
    em_node *n = NULL;
    bool anomaly = em_anomaly_mode();
    if (anomaly && !em_anomaly_check_forward(op, out, inputs, n_inputs))
        return false;
    if (em_needs_grad(inputs, n_inputs)) {
        n = em_node_attach(out, op, backward, inputs, n_inputs, params, params_size);
        if (!n)
            return false;
        if (anomaly)
            n->input_shapes = em_anomaly_shapes(inputs, n_inputs);
        if (EM_PROFILING())
            n->prof_module = em_prof_current_module(&n->prof_session);
    }
    if (node)
        *node = n;
    return true;
}

/* ---- reduced dims (ops_reduce.c, ops_vector_norm.c) ---- */

/* The dims as a bit mask (bit d = dim d); n 0 means every dim. */
bool em_dims_mask(const char *fn, const em_tensor *t /* (*) */, const int *dims, int n,
                  unsigned *mask)
{
    if (!em_array_present(dims, n, fn, "dims", "n_dims"))
        return false;
    *mask = n == 0 ? (1u << t->ndim) - 1 : 0;
    for (int i = 0; i < n; i++) {
        int d = em_norm_dim(dims[i], t->ndim);
        if (d < 0 || (*mask & (1u << d))) {
            char b[128];
            em_set_error(EM_ERR_ARG, "%s: dim %d out of range or repeated for %s", fn, dims[i],
                         em_shape_str(t, b, sizeof b));
            return false;
        }
        *mask |= 1u << d;
    }
    return true;
}

em_shape em_keep_shape(const em_shape *s, unsigned mask)
{
    em_shape k = *s;
    for (int d = 0; d < k.ndim; d++)
        if (mask & (1u << d))
            k.d[d] = 1;
    return k;
}

em_tensor *em_drop_dims(const em_tensor *yk /* (*), 1 on the dims in mask */, unsigned mask)
{
    em_shape s = {.ndim = 0};
    for (int d = 0; d < yk->ndim; d++)
        if (!(mask & (1u << d)))
            s.d[s.ndim++] = yk->shape[d];
    int64_t strides[EM_MAX_DIMS];
    em_contiguous_strides(&s, strides);
    return em_tensor_alias(yk, s.ndim, s.d, strides, yk->offset);
}

bool em_check_pair(const char *fn, const em_tensor *a /* (*) */, const em_tensor *b /* (*) */)
{
    char sa[128], sb[128];
    if (a->dtype != b->dtype) {
        em_set_error(EM_ERR_ARG, "%s: dtypes differ: %s %s and %s %s", fn, em_dtype_name(a->dtype),
                     em_shape_str(a, sa, sizeof sa), em_dtype_name(b->dtype),
                     em_shape_str(b, sb, sizeof sb));
        return false;
    }
    if (a->device != b->device) {
        em_set_error(EM_ERR_ARG, "%s: tensors on different devices: %s and %s", fn,
                     em_device_name(a->device), em_device_name(b->device));
        return false;
    }
    return true;
}
