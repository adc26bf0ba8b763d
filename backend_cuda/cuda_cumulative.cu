/* Running sums and products along one dim on CUDA, with backend_cpu/cpu_cumulative.c's order:
 * one thread per line walks it in double, one element after the other, so the bits are the
 * CPU's. Lines are many in the uses this serves (a dim of a batch); a long single line runs on
 * one thread. */
#include "backend/kernel_args_internal.h"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

/* data: out, in at each line's element 0; the line: len elements, steps (elements) */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    lines_kernel(uint32_t n, strided<2> it, base_ptrs<2> data, bool prod, int64_t len,
                 int64_t step_out, int64_t step_in, int64_t start_out, int64_t start_in)
{
    typedef typename T::storage S;
#pragma unroll 1
    for (uint32_t i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) {
        uint32_t off[2];
        it.offsets(i, off);
        S *out = (S *)data.p[0] + (int64_t)off[0] + start_out; // (len) along step_out
        const S *in = (const S *)data.p[1] + (int64_t)off[1] + start_in; // (len) along step_in
        double acc = prod ? 1.0 : 0.0;
        for (int64_t k = 0; k < len; k++) {
            const double v = (double)T::load(in[k * step_in]);
            acc = prod ? acc * v : acc + v;
            out[k * step_out] = T::from_f64(acc);
        }
    }
}

} // namespace

/* out = the running sum or product of in along dim (from the end when reverse) */
extern "C" int em_cuda_cumulative(bool prod, bool reverse, int dim, const em_arr *out,
                                  const em_arr *in)
{
    if (!em_cumulative_args_ok(out, in, dim))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t len = out->shape[dim];
    int64_t step_out = out->strides[dim], step_in = in->strides[dim], start_out = 0, start_in = 0;
    if (reverse) {
        start_out = (len - 1) * step_out;
        start_in = (len - 1) * step_in;
        step_out = -step_out;
        step_in = -step_in;
    }
    em_arr lo = *out, li = *in; /* one position per line: dim as size 1 */
    lo.shape[dim] = li.shape[dim] = 1;
    const em_arr *ops[2] = {&lo, &li};
    em_iter l;
    em_iter_init(&l, lo.ndim, lo.shape, 2, ops, 0);
    if (len == 0 || l.numel == 0)
        return EM_KERNEL_OK;
    return dispatch_float(out->dtype, [&](auto tag) {
        typedef decltype(tag) T;
        auto launch = [&](const strided<2> &it, uint32_t n, char *const *d) {
            base_ptrs<2> p = {{d[0], d[1]}};
            lines_kernel<T><<<grid_for(n, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
                n, it, p, prod, len, step_out, step_in, start_out, start_in);
            return em_cuda_launch_status();
        };
        return for_each_piece<2>(l, launch);
    });
}
