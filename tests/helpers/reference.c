/* Deterministic inputs and value comparisons for tests against PyTorch reference values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

int em_ref_fill_params(em_module *m)
{
    int n = em_module_parameters(m, NULL, 0);
    em_param_ref *refs = calloc((size_t)n + 1, sizeof *refs);
    if (!refs) {
        em_set_error(EM_ERR_MEMORY, "em_ref_fill_params: out of memory");
        return -1;
    }
    em_module_parameters(m, refs, n);
    for (int k = 0; k < n && n >= 0; k++) {
        em_tensor *v = em_ref_wave(em_shape_of(refs[k].value), 0.7, 1.3 * k + 0.1, 0.3);
        if (!v || em_copy_(refs[k].value, v) != EM_OK)
            n = -1;
        em_release(v);
    }
    free(refs);
    return n;
}

double em_ref_checksum(const em_tensor *t)
{
    int64_t n = em_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v), sum = 0;
    if (!v || em_copy_to_host(t, EM_F64, v) != EM_OK) {
        free(v);
        return NAN;
    }
    for (int64_t i = 0; i < n; i++)
        sum += v[i] * cos(0.3 * (double)i);
    free(v);
    return sum;
}
