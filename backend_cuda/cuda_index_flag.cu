/* The device index flag: index kernels raise it instead of failing (a kernel cannot return a
 * verdict without the host waiting for it); the next synchronize reports it once. */
#include "backend_cuda/cuda_internal.h"

__device__ int em_cuda_bad_index_flag;

extern "C" int em_cuda_take_index_error(void)
{
    int raised = 0, zero = 0;
    if (cudaMemcpyFromSymbol(&raised, em_cuda_bad_index_flag, sizeof raised) != cudaSuccess)
        return EM_KERNEL_FAILED;
    if (!raised)
        return EM_KERNEL_OK;
    if (cudaMemcpyToSymbol(em_cuda_bad_index_flag, &zero, sizeof zero) != cudaSuccess)
        return EM_KERNEL_FAILED;
    return EM_KERNEL_BAD_INDEX;
}
