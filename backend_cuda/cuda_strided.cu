/* Host side of the CUDA strided iteration (cuda_strided_internal.cuh): the flat and 32-bit checks
 * of an em_iter, and launch sizes. */
#include "backend_cuda/cuda_strided_internal.cuh"

namespace em_cuda {

bool iter_is_flat(const em_iter *l)
{
    if (l->ndim != 1)
        return false;
    for (int k = 0; k < l->nops; k++)
        if (l->strides[k][0] != 1 && l->strides[k][0] != 0)
            return false;
    return l->strides[0][0] == 1 || l->numel == 1;
}

bool iter_fits_32bit(const em_iter *l)
{
    const int64_t limit = (int64_t)1 << 31;
    if (l->numel >= limit)
        return false;
    for (int k = 0; k < l->nops; k++) {
        int64_t last = 0;
        for (int d = 0; d < l->ndim; d++)
            last += (l->shape[d] - 1) * l->strides[k][d];
        if (last >= limit)
            return false;
    }
    return true;
}

int64_t pow2_ceil(int64_t n)
{
    int64_t p = 1;
    while (p < n)
        p *= 2;
    return p;
}

unsigned grid_for(int64_t n, int64_t per_block)
{
    int64_t blocks = (n + per_block - 1) / per_block;
    return (unsigned)(blocks < 1 ? 1 : blocks > MAX_GRID ? MAX_GRID : blocks);
}

} // namespace em_cuda
