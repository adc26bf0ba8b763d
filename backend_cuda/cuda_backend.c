/* The CUDA backend's table and its discovery: each entry comes from the file of its family
 * (cuda_memory.c, cuda_gemm.c, the cuda_*.cu kernels). Entries left NULL are reported by the ops
 * as "not supported on cuda". */
#include "backend_cuda/cuda_internal.h"

static const em_backend cuda_backend = {
    .device = EM_CUDA,
    .name = "cuda",
    .alloc = em_cuda_alloc,
    .free = em_cuda_free,
    .copy_from_host = em_cuda_copy_from_host,
    .copy_to_host = em_cuda_copy_to_host,
    .synchronize = em_cuda_synchronize,
    .gemm = em_cuda_gemm,
};

const em_backend *em_cuda_table(void)
{
    return &cuda_backend;
}

void em_cuda_backend_discover(void); /* listed in backend_list.c */

void em_cuda_backend_discover(void)
{
    if (em_cuda_init())
        em_backend_register(&cuda_backend);
}
