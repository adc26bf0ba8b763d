/* What the batch, instance and group norms share: per-channel vectors (C) checked against x
 * (N, C, *) and broadcast over it, and the running statistics' update. */
#include "nn/nn_internal.h"

bool em_norm_check_input(const char *fn, const em_tensor *x)
{
    if (!em_present(x, fn, "x"))
        return false;
    if (x->ndim >= 2 && em_dtype_is_float(x->dtype))
        return true;
    char bx[64];
    em_set_error(EM_ERR_ARG, "%s: x must be floating point (N, C, *), not %s %s", fn,
                 em_dtype_name(x->dtype), em_shape_str(x, bx, sizeof bx));
    return false;
}

bool em_norm_check_channels(const char *fn, const em_tensor *v, const char *what,
                            const em_tensor *x)
{
    int64_t c = x->shape[1];
    if (!v || (v->ndim == 1 && v->shape[0] == c))
        return true;
    char bx[64], bv[64];
    em_set_error(EM_ERR_ARG, "%s: %s must have shape [%lld] for x %s, not %s", fn, what,
                 (long long)c, em_shape_str(x, bx, sizeof bx), em_shape_str(v, bv, sizeof bv));
    return false;
}

int64_t em_norm_positions(const em_tensor *x)
{
    int64_t positions = 1;
    for (int i = 2; i < x->ndim; i++)
        positions *= x->shape[i];
    return positions;
}

em_tensor *em_norm_per_channel(const em_tensor *v, const em_tensor *x)
{
    em_shape s = {.ndim = x->ndim};
    for (int i = 0; i < x->ndim; i++)
        s.d[i] = i == 1 ? x->shape[1] : 1;
    em_tensor *r = em_reshape(v, s);
    return r && r->dtype != x->dtype ? em_to_dtype(r, x->dtype) : r;
}

em_status em_norm_update_running(em_tensor *running, const em_tensor *stat, double momentum)
{
    em_tensor *old = em_to_dtype(em_reshape(running, em_shape_of(stat)), stat->dtype);
    em_tensor *upd = em_add(em_mul_scalar(old, 1.0 - momentum), em_mul_scalar(stat, momentum));
    return upd ? em_copy_(running, em_reshape(upd, em_shape_of(running))) : em_error_status();
}
