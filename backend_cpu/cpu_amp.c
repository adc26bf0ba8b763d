/* Mixed-precision kernel on the CPU: unscale gradients in place and flag any inf or NaN, in one
 * pass (the grad scaler's unscale step). */
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* f32 in f32 arithmetic, as PyTorch's kernel: g *= inv_scale; a non-finite element is one whose
 * exponent bits are all ones. */
static bool unscale_f32(int64_t n, float inv_scale, float *restrict g)
{
    int bad = 0;
#pragma omp parallel for simd reduction(| : bad) if (n >= EM_CPU_PARALLEL_MIN) \
        num_threads(em_cpu_threads())
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &g[i], sizeof bits);
        bad |= (bits & 0x7f800000u) == 0x7f800000u;
        g[i] *= inv_scale;
    }
    return bad;
}

static bool unscale_f64(int64_t n, double inv_scale, double *restrict g)
{
    int bad = 0;
#pragma omp parallel for simd reduction(| : bad) if (n >= EM_CPU_PARALLEL_MIN) \
        num_threads(em_cpu_threads())
    for (int64_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &g[i], sizeof bits);
        bad |= (bits & 0x7ff0000000000000u) == 0x7ff0000000000000u;
        g[i] *= inv_scale;
    }
    return bad;
}

int em_cpu_unscale_check(em_dtype dt, double inv_scale, const em_array_list *l, float *found_inf)
{
    if (dt != EM_F32 && dt != EM_F64)
        return EM_KERNEL_UNSUPPORTED;
    bool bad = false;
    for (int i = 0; i < l->n; i++)
        bad |= dt == EM_F32 ? unscale_f32(l->numel[i], (float)inv_scale, l->data[i])
                            : unscale_f64(l->numel[i], inv_scale, l->data[i]);
    if (bad)
        *found_inf = 1.0f;
    return EM_KERNEL_OK;
}
