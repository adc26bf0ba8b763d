/* Masking: masked_fill, and tril/triu keeping a matrix's lower or upper triangle. Both are where()
 * over a bool mask, so the gradient flows to the elements kept and is zero where the value was
 * filled in. */
#include <stdlib.h>

#include "autograd/autograd_internal.h"

em_tensor *em_masked_fill(const em_tensor *t /* (*) */,
                          const em_tensor *mask /* bool, broadcasts to t's shape */, double value)
{
    const char *fn = "em_masked_fill";
    if (!em_present(t, fn, "t") || !em_present(mask, fn, "mask"))
        return NULL;
    em_shape st = em_shape_of(t), sm = em_shape_of(mask), s;
    bool ok = mask->dtype == EM_BOOL && mask->device == t->device &&
              em_broadcast_shapes(&st, &sm, &s) && s.ndim == st.ndim;
    for (int d = 0; ok && d < s.ndim; d++)
        ok = s.d[d] == st.d[d];
    if (!ok) {
        char bt[128], bm[128];
        em_set_error(EM_ERR_ARG, "%s: mask must be bool on t's device and broadcast to t's shape:"
                     " t %s, mask %s %s", fn, em_shape_str(t, bt, sizeof bt),
                     em_dtype_name(mask->dtype), em_shape_str(mask, bm, sizeof bm));
        return NULL;
    }
    em_scope_begin();
    em_tensor *fill = em_raw_full(fn, &(em_shape){.ndim = 0}, t->dtype, t->device, value);
    return em_scope_return(fill ? em_where(mask, fill, t) : NULL);
}

/* t with the elements outside the kept triangle zeroed: (i, j) is kept when j - i <= diagonal
 * (lower) or j - i >= diagonal (upper). */
static em_tensor *triangle(const char *fn, const em_tensor *t /* (*, M, N) */, int64_t diagonal,
                           bool lower)
{
    if (!em_present(t, fn, "t"))
        return NULL;
    if (t->ndim < 2) {
        char b[128];
        em_set_error(EM_ERR_ARG, "%s: needs a tensor of at least 2 dims, not %s", fn,
                     em_shape_str(t, b, sizeof b));
        return NULL;
    }
    int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
    bool *keep = malloc((size_t)(rows * cols > 0 ? rows * cols : 1)); // (M, N)
    if (!keep) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            keep[i * cols + j] = lower ? j - i <= diagonal : j - i >= diagonal;
    em_scope_begin();
    em_tensor *mask = em_from_data(EM_SHAPE(rows, cols), EM_BOOL, keep);
    free(keep);
    if (mask && t->device != EM_CPU)
        mask = em_to_device(mask, t->device);
    em_tensor *zero = em_raw_full(fn, &(em_shape){.ndim = 0}, t->dtype, t->device, 0.0);
    return em_scope_return(mask && zero ? em_where(mask, t, zero) : NULL);
}

em_tensor *em_tril(const em_tensor *t /* (*, M, N) */, int64_t diagonal)
{
    return triangle("em_tril", t, diagonal, true);
}

em_tensor *em_triu(const em_tensor *t /* (*, M, N) */, int64_t diagonal)
{
    return triangle("em_triu", t, diagonal, false);
}
