/* The device index flag: index kernels raise it instead of failing (a kernel cannot return a
 * verdict without the host waiting for it); the next synchronize reports it once. The flag holds
 * the em_cuda_index_kernel code of the first kernel that raised it. */
#include "backend_cuda/cuda_internal.h"

__device__ int em_cuda_bad_index_flag;

static const char *kernel_names[] = {"an index kernel", "index_select", "index_add", "gather",
                                     "scatter_add", "cross_entropy", "scatter"};
static int last_raised; /* the code taken by the last report */

extern "C" int *em_cuda_index_flag(void)
{
    static int *address;
    if (!address && cudaGetSymbolAddress((void **)&address, em_cuda_bad_index_flag) != cudaSuccess)
        return NULL;
    return address;
}

extern "C" int em_cuda_take_index_error(void)
{
    int raised = 0, zero = 0;
    if (cudaMemcpyFromSymbol(&raised, em_cuda_bad_index_flag, sizeof raised) != cudaSuccess)
        return EM_KERNEL_FAILED;
    if (!raised)
        return EM_KERNEL_OK;
    if (cudaMemcpyToSymbol(em_cuda_bad_index_flag, &zero, sizeof zero) != cudaSuccess)
        return EM_KERNEL_FAILED;
    last_raised = raised;
    return EM_KERNEL_BAD_INDEX;
}

extern "C" const char *em_cuda_bad_index_kernel(void)
{
    return last_raised > 0 && last_raised <= EM_CUDA_SCATTER ? kernel_names[last_raised]
                                                           : kernel_names[0];
}
