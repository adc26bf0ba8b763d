/* Autocast: the per-thread stack of low-precision regions and the cast policy the ops consult
 * (matmul/linear/conv in f16 or bf16, softmax, reductions and exp/log in f32, mixed promoted). */
#include "autograd/autograd_internal.h"

#define AUTOCAST_MAX_DEPTH 64

static _Thread_local em_dtype current = EM_F32; /* EM_F32: autocast is off */
static _Thread_local em_dtype outer[AUTOCAST_MAX_DEPTH];
static _Thread_local int depth;

static bool is_half(em_dtype dt)
{
    return dt == EM_F16 || dt == EM_BF16;
}

em_status em_autocast_begin(em_dtype low)
{
    if (!is_half(low) && low != EM_F32)
        return em_set_error(EM_ERR_ARG, "em_autocast_begin: dtype must be f16, bf16 or f32 "
                                        "(off), not %s", em_dtype_name(low));
    if (depth == AUTOCAST_MAX_DEPTH)
        return em_set_error(EM_ERR_STATE, "em_autocast_begin: regions nested deeper than %d",
                            AUTOCAST_MAX_DEPTH);
    outer[depth++] = current;
    current = low;
    return EM_OK;
}

em_status em_autocast_end(void)
{
    if (depth == 0)
        return em_set_error(EM_ERR_STATE, "em_autocast_end: no autocast region is open");
    current = outer[--depth];
    return EM_OK;
}

em_dtype em_autocast_dtype(void)
{
    return current;
}

em_dtype em_autocast_swap(em_dtype dtype)
{
    em_dtype prev = current;
    current = dtype;
    return prev;
}

/* The dtype t is cast to under policy p, or t's own when it stays. */
static em_dtype target(em_autocast_policy p, const em_tensor *t)
{
    if (p == EM_AUTOCAST_LOW)
        return t->dtype == EM_F32 || is_half(t->dtype) ? current : t->dtype;
    return is_half(t->dtype) ? EM_F32 : t->dtype;
}

bool em_autocast_needed(em_autocast_policy p, const em_tensor *const *ts, int n)
{
    if (current == EM_F32)
        return false;
    for (int i = 0; i < n; i++)
        if (ts[i] && target(p, ts[i]) != ts[i]->dtype)
            return true;
    return false;
}

bool em_autocast_inputs(em_autocast_policy p, const em_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        em_dtype dt = target(p, ts[i]);
        if (dt != ts[i]->dtype && !(ts[i] = em_to_dtype(ts[i], dt)))
            return false;
    }
    return true;
}

em_dtype em_autocast_promote(em_dtype a, em_dtype b)
{
    if (a == EM_F64 || b == EM_F64)
        return EM_F64;
    return a == b ? a : EM_F32; /* f32 with a half, or f16 with bf16 */
}

bool em_autocast_layer_inputs(const em_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        bool kept_leaf = ts[i] && ts[i]->dtype == EM_F32 && !ts[i]->node;
        if (!kept_leaf && !em_autocast_inputs(EM_AUTOCAST_LOW, ts + i, 1))
            return false;
    }
    return true;
}

const em_tensor *em_as_dtype_raw(const em_tensor *t, em_dtype dtype)
{
    return !t || t->dtype == dtype ? t : em_tensor_cast_raw(t, dtype);
}
