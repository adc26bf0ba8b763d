/* The CPU random fill: element i of the contiguous output takes Philox(seed, offset + i / 4) lane
 * i % 4, so the numbers never depend on the thread count. Values are made in double, then stored
 * in the output's dtype. */
#include <math.h>

#include "backend/philox.h"
#include "backend/strided_internal.h"
#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

/* Philox blocks per work unit (each unit converts its values in one call). */
#define BLOCKS_PER_UNIT 64

/* The four values of one Philox block. */
static void block_values(em_rng_dist dist, const em_rng_params *p, em_philox_block b,
                         double *v /* (4) */)
{
    double u[4];
    for (int j = 0; j < 4; j++)
        u[j] = (double)em_philox_uniform(b.v[j]);
    switch (dist) {
    case EM_RNG_UNIFORM:
        for (int j = 0; j < 4; j++)
            v[j] = p->low + (p->high - p->low) * u[j];
        break;
    case EM_RNG_NORMAL:
        /* Box-Muller on lanes (0, 1) and (2, 3); 1 - u is in (0, 1], so the log is finite */
        for (int j = 0; j < 4; j += 2) {
            double r = sqrt(-2.0 * log(1.0 - u[j]));
            double theta = 2.0 * M_PI * u[j + 1];
            v[j] = p->mean + p->std * r * cos(theta);
            v[j + 1] = p->mean + p->std * r * sin(theta);
        }
        break;
    case EM_RNG_RANDINT: {
        double range = p->high - p->low;
        for (int j = 0; j < 4; j++) {
            double k = floor(u[j] * range);
            v[j] = p->low + (k < range ? k : range - 1);
        }
        break;
    }
    case EM_RNG_BERNOULLI:
        for (int j = 0; j < 4; j++)
            v[j] = u[j] < p->p ? 1.0 : 0.0;
        break;
    }
}

int em_cpu_rng_fill(em_rng_dist dist, const em_rng_params *p, uint64_t seed, uint64_t offset,
                    const em_arr *out)
{
    if (!em_dtype_valid(out->dtype) || !em_arr_contiguous(out) || dist > EM_RNG_BERNOULLI)
        return EM_KERNEL_UNSUPPORTED;
    int64_t numel = 1;
    for (int d = 0; d < out->ndim; d++)
        numel *= out->shape[d];
    em_cpu_convert_fn store = em_cpu_converter(EM_F64, out->dtype);
    int64_t size = (int64_t)em_dtype_size(out->dtype);
    int64_t per_unit = 4 * BLOCKS_PER_UNIT;
    int64_t units = (numel + per_unit - 1) / per_unit;
    char *dst = out->data;
#pragma omp parallel for schedule(static) if (numel >= EM_CPU_PARALLEL_MIN) \
        num_threads(em_cpu_threads())
    for (int64_t u = 0; u < units; u++) {
        double vals[4 * BLOCKS_PER_UNIT];
        int64_t first = u * per_unit;
        int64_t n = numel - first < per_unit ? numel - first : per_unit;
        for (int64_t b = 0; b * 4 < n; b++) {
            uint64_t counter = offset + (uint64_t)(first / 4 + b);
            block_values(dist, p, em_philox4x32_10(counter, seed), vals + 4 * b);
        }
        store(dst + first * size, size, (const char *)vals, sizeof(double), n);
    }
    return EM_KERNEL_OK;
}
