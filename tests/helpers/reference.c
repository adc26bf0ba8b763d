/* Deterministic inputs and value comparisons for tests against PyTorch reference values. */
#include <math.h>
#include <stdio.h>

#include "helpers/reference.h"

#define REF_MAX 512

em_tensor *em_ref_wave(em_shape shape, double a, double b, double scale)
{
    int64_t n = em_shape_numel(&shape);
    double v[REF_MAX];
    if (n > REF_MAX) {
        em_set_error(EM_ERR_ARG, "em_ref_wave: %lld elements, at most %d", (long long)n, REF_MAX);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * sin((double)i * a + b);
    return em_from_data(shape, EM_F64, v);
}

bool em_ref_close(const em_tensor *t, const double *want, int64_t n, double tol)
{
    double got[REF_MAX];
    if (!t || em_numel(t) != n || n > REF_MAX) {
        fprintf(stderr, "em_ref_close: %s\n", t ? "element count differs" : em_error());
        return false;
    }
    em_copy_to_host(t, EM_F64, got);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol)) {
            fprintf(stderr, "em_ref_close: element %lld is %.10f, want %.10f\n", (long long)i,
                    got[i], want[i]);
            return false;
        }
    return true;
}
