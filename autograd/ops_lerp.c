/* em_lerp_: linear interpolation towards another tensor in place, outside the graph (an
 * exponential moving average's update), with PyTorch's formula. */
#include <math.h>

#include "autograd/autograd_internal.h"

em_status em_lerp_(em_tensor *t /* (*) */, const em_tensor *end /* broadcasts to t */,
                   double weight)
{
    const char *fn = "em_lerp_";
    if (!t || !end)
        return em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
    em_shape ts = em_shape_of(t), es = em_shape_of(end), bs;
    bool fits = em_broadcast_shapes(&es, &ts, &bs) && bs.ndim == ts.ndim;
    for (int d = 0; fits && d < ts.ndim; d++)
        fits = bs.d[d] == ts.d[d];
    if (!em_dtype_is_float(t->dtype) || end->dtype != t->dtype || end->device != t->device ||
        !fits || !isfinite(weight)) {
        char bt[128], be[128];
        return em_set_error(EM_ERR_ARG, "%s: end %s %s must broadcast to self %s %s, of its "
                            "floating dtype and device, with a finite weight (%g)", fn,
                            em_dtype_name(end->dtype), em_shape_str(end, be, sizeof be),
                            em_dtype_name(t->dtype), em_shape_str(t, bt, sizeof bt), weight);
    }
    em_scope_begin();
    bool grad = em_set_grad_enabled(false);
    /* PyTorch's: t + w (end - t) for w < 0.5, end - (end - t) (1 - w) otherwise (exact at 1) */
    em_tensor *diff = em_sub(end, t);
    em_tensor *y = weight < 0.5 ? em_add(t, em_mul_scalar(diff, weight))
                                : em_sub(end, em_mul_scalar(diff, 1 - weight));
    em_status st = y ? em_copy_(t, y) : em_error_status();
    em_set_grad_enabled(grad);
    em_scope_end();
    return st;
}
