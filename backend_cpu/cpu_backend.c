/* The CPU backend's table: OpenBLAS for matrix products, OpenMP across large loops. */
#include <stdint.h>

#include "backend_cpu/cpu_kernels_internal.h"

void em_cpu_backend_discover(void); /* listed in backend_list.c */

static const em_backend cpu_backend = {
    .device = EM_CPU,
    .name = "cpu",
    .alloc = em_cpu_alloc,
    .free = em_cpu_free,
    .copy_from_host = em_cpu_copy_from_host,
    .copy_to_host = em_cpu_copy_to_host,
    .synchronize = em_cpu_synchronize,
    .describe = em_cpu_describe,
    .details = em_cpu_details,
    .set_threads = em_cpu_set_threads,
    .threads = em_cpu_max_threads,
    .active_threads = em_cpu_threads,
    .fill = em_cpu_fill,
    .copy = em_cpu_copy,
    .unary = em_cpu_unary,
    .unary_grad = em_cpu_unary_grad,
    .binary = em_cpu_binary,
    .binary_grad = em_cpu_binary_grad,
    .where = em_cpu_where,
    .reduce = em_cpu_reduce,
    .cumulative = em_cpu_cumulative,
    .rng_fill = em_cpu_rng_fill,
    .gemm = em_cpu_gemm,
    .linear = em_cpu_linear,
    .linear_grad = em_cpu_linear_grad,
    .conv2d = em_cpu_conv2d,
    .conv2d_grad_input = em_cpu_conv2d_grad_input,
    .conv2d_grad_weight = em_cpu_conv2d_grad_weight,
    .conv2d_grads = em_cpu_conv2d_grads,
    .max_pool2d = em_cpu_max_pool2d,
    .max_pool2d_grad = em_cpu_max_pool2d_grad,
    .avg_pool2d = em_cpu_avg_pool2d,
    .avg_pool2d_grad = em_cpu_avg_pool2d_grad,
    .softmax = em_cpu_softmax,
    .softmax_grad = em_cpu_softmax_grad,
    .cross_entropy = em_cpu_cross_entropy,
    .cross_entropy_grad = em_cpu_cross_entropy_grad,
    .layer_norm = em_cpu_layer_norm,
    .layer_norm_grad = em_cpu_layer_norm_grad,
    .attention = em_cpu_attention,
    .attention_grad = em_cpu_attention_grad,
    .index_select = em_cpu_index_select,
    .index_add = em_cpu_index_add,
    .gather = em_cpu_gather,
    .scatter_add = em_cpu_scatter_add,
    .scatter = em_cpu_scatter,
    .sgd_update = em_cpu_sgd_update,
    .adam_update = em_cpu_adam_update,
    .rmsprop_update = em_cpu_rmsprop_update,
    .int8_packed_size = em_cpu_int8_packed_size,
    .int8_pack = em_cpu_int8_pack,
    .qlinear_dynamic = em_cpu_qlinear_dynamic,
    .qlinear_static = em_cpu_qlinear_static,
    .qconv2d_static = em_cpu_qconv2d_static,
    .unscale_check = em_cpu_unscale_check,
    .norm_pow_sum = em_cpu_norm_pow_sum,
};

/* A block starts with its size, one alignment unit ahead of the pointer handed out. */
#define SCRATCH_HEADER 64

void *em_cpu_scratch(size_t nbytes)
{
    if (nbytes > SIZE_MAX - SCRATCH_HEADER)
        return NULL;
    char *block = em_workspace_alloc(&cpu_backend, nbytes + SCRATCH_HEADER);
    if (!block)
        return NULL;
    *(size_t *)block = nbytes + SCRATCH_HEADER;
    return block + SCRATCH_HEADER;
}

void em_cpu_scratch_free(void *ptr)
{
    if (!ptr)
        return;
    char *block = (char *)ptr - SCRATCH_HEADER;
    em_workspace_free(&cpu_backend, block, *(size_t *)block);
}

void em_cpu_backend_discover(void)
{
    em_cpu_blas_choose_core();
    em_backend_register(&cpu_backend);
}
