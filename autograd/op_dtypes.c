/* The dtype an op's several tensor inputs meet in: the binary ops' rule (0-d tensors adapt,
 * float dtypes promote inside an autocast region) for every op that takes more than one. */
#include <stdio.h>

#include "autograd/autograd_internal.h"

/* "tensor 1 (f32 [3])" for a list's member (names NULL), else "src f32 [3]" ("f32 [3]" for an
 * empty name) */
static void describe(const char *const *names, const em_tensor *const *ts, int i, char *buf,
                     size_t n)
{
    char shape[128];
    em_shape_str(ts[i], shape, sizeof shape);
    const char *dt = em_dtype_name(ts[i]->dtype);
    if (!names)
        snprintf(buf, n, "tensor %d (%s %s)", i, dt, shape);
    else
        snprintf(buf, n, "%s%s%s %s", names[i], *names[i] ? " " : "", dt, shape);
}

bool em_unify_dtypes(const char *fn, const char *const *names, const em_tensor **ts, int n)
{
    int lead = -1; /* the first tensor with dims, else the first one */
    for (int i = 0; i < n && (lead < 0 || ts[lead]->ndim == 0); i++)
        if (ts[i] && (lead < 0 || ts[i]->ndim > 0))
            lead = i;
    if (lead < 0)
        return true;
    bool autocast = em_autocast_dtype() != EM_F32;
    em_dtype dt = ts[lead]->dtype;
    for (int i = 0; i < n; i++) {
        if (!ts[i] || ts[i]->ndim == 0 || ts[i]->dtype == dt)
            continue;
        if (!autocast || !em_dtype_is_float(dt) || !em_dtype_is_float(ts[i]->dtype)) {
            char a[160], b[160];
            describe(names, ts, lead, a, sizeof a);
            describe(names, ts, i, b, sizeof b);
            em_set_error(EM_ERR_ARG, "%s: dtypes differ: %s and %s", fn, a, b);
            return false;
        }
        dt = em_autocast_promote(dt, ts[i]->dtype);
    }
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->dtype != dt && !(ts[i] = em_to_dtype(ts[i], dt)))
            return false;
    return true;
}
