/* The CUDA random fill: element i of the contiguous output takes Philox(seed, offset + i / 4)
 * lane i % 4 (backend/philox.h, shared with the CPU), values made in double with
 * backend_cpu/cpu_rng.c's formulas and stored by the f64 converter of the copy kernel. Uniform,
 * randint and bernoulli give the CPU's bits: their arithmetic is written with round-to-nearest
 * intrinsics, so no multiply-add is contracted. Normal draws use the device's log, sin and cos,
 * which may differ from the host's libm in the last bit. */
#include "backend/philox.h"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

const double TWO_PI = 2.0 * 3.14159265358979323846;

/* The four values of one Philox block (cpu_rng.c's block_values). */
__device__ __forceinline__ void block_values(int dist, const em_rng_params &p, em_philox_block b,
                                             double *v /* (4) */)
{
    double u[4];
    for (int j = 0; j < 4; j++)
        u[j] = (double)em_philox_uniform(b.v[j]);
    const double range = __dsub_rn(p.high, p.low);
    switch (dist) {
    case EM_RNG_UNIFORM:
        for (int j = 0; j < 4; j++)
            v[j] = __dadd_rn(p.low, __dmul_rn(range, u[j]));
        break;
    case EM_RNG_NORMAL: /* Box-Muller on lanes (0, 1) and (2, 3); log(1 - u) is finite */
        for (int j = 0; j < 4; j += 2) {
            const double r = sqrt(__dmul_rn(-2.0, log(__dsub_rn(1.0, u[j]))));
            const double theta = __dmul_rn(TWO_PI, u[j + 1]);
            v[j] = __dadd_rn(p.mean, __dmul_rn(__dmul_rn(p.std, r), cos(theta)));
            v[j + 1] = __dadd_rn(p.mean, __dmul_rn(__dmul_rn(p.std, r), sin(theta)));
        }
        break;
    case EM_RNG_RANDINT:
        for (int j = 0; j < 4; j++) {
            const double k = floor(__dmul_rn(u[j], range));
            v[j] = __dadd_rn(p.low, k < range ? k : __dsub_rn(range, 1.0));
        }
        break;
    case EM_RNG_BERNOULLI:
        for (int j = 0; j < 4; j++)
            v[j] = u[j] < p.p ? 1.0 : 0.0;
        break;
    }
}

/* out (n, contiguous): one Philox block (four elements) per thread and grid-stride step. */
template <class D>
__global__ void __launch_bounds__(BLOCK)
    rng_kernel(int dist, em_rng_params p, uint64_t seed, uint64_t offset, int64_t n,
               bool aligned, typename D::storage *out)
{
    typedef typename D::storage T;
    const int64_t nblocks = (n + 3) / 4;
#pragma unroll 1
    for (int64_t b = (int64_t)blockIdx.x * BLOCK + threadIdx.x; b < nblocks;
         b += (int64_t)gridDim.x * BLOCK) {
        double v[4];
        block_values(dist, p, em_philox4x32_10(offset + (uint64_t)b, seed), v);
        vec<T, 4> r;
        for (int j = 0; j < 4; j++)
            r.v[j] = D::conv(v[j]);
        const int64_t i = 4 * b;
        if (aligned && i + 4 <= n) {
            *reinterpret_cast<vec<T, 4> *>(out + i) = r;
        } else {
            for (int j = 0; j < 4 && i + j < n; j++)
                out[i + j] = r.v[j];
        }
    }
}

} // namespace

/* out (contiguous, any dtype) = draws of dist with parameters p */
extern "C" int em_cuda_rng_fill(em_rng_dist dist, const em_rng_params *p, uint64_t seed,
                                uint64_t offset, const em_arr *out)
{
    if (!em_dtype_valid(out->dtype) || !em_arr_contiguous(out) || dist > EM_RNG_BERNOULLI)
        return EM_KERNEL_UNSUPPORTED;
    const int64_t n = em_arr_numel(out);
    if (n == 0)
        return EM_KERNEL_OK;
    return dispatch_dtype(out->dtype, [&](auto tag) {
        typedef decltype(tag) D;
        typedef typename D::storage T;
        const bool aligned = (uintptr_t)out->data % sizeof(vec<T, 4>) == 0;
        rng_kernel<D><<<grid_for((n + 3) / 4, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
            (int)dist, *p, seed, offset, n, aligned, (T *)out->data);
        return em_cuda_launch_status();
    });
}
