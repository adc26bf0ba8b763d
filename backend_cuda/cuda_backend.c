/* The CUDA backend's table and its discovery: each entry comes from the file of its family
 * (cuda_memory.c, cuda_timer.c, cuda_gemm.c, the cuda_*.cu kernels). Entries left NULL are
 * reported by the ops as "not supported on cuda". */
#include "backend_cuda/cuda_internal.h"

static const em_backend cuda_backend = {
    .device = EM_CUDA,
    .name = "cuda",
    .alloc = em_cuda_alloc,
    .free = em_cuda_free,
    .copy_from_host = em_cuda_copy_from_host,
    .copy_to_host = em_cuda_copy_to_host,
    .synchronize = em_cuda_synchronize,
    .host_alloc = em_cuda_host_alloc,
    .host_free = em_cuda_host_free,
    .mark = em_cuda_mark,
    .copy_from_host_async = em_cuda_copy_from_host_async,
    .event_wait = em_cuda_event_wait,
    .event_free = em_cuda_event_free,
    .stream = em_cuda_stream_handle,
    .describe = em_cuda_describe,
    .set_tf32 = em_cuda_set_tf32,
    .fill = em_cuda_fill,
    .copy = em_cuda_copy,
    .unary = em_cuda_unary,
    .unary_grad = em_cuda_unary_grad,
    .binary = em_cuda_binary,
    .binary_grad = em_cuda_binary_grad,
    .where = em_cuda_where,
    .reduce = em_cuda_reduce,
    .cumulative = em_cuda_cumulative,
    .rng_fill = em_cuda_rng_fill,
    .timer_start = em_cuda_timer_start,
    .timer_stop = em_cuda_timer_stop,
    .timer_read = em_cuda_timer_read,
    .counts = em_cuda_counts,
    .capture_begin = em_cuda_capture_begin,
    .capture_end = em_cuda_capture_end,
    .graph_launch = em_cuda_graph_launch,
    .graph_free = em_cuda_graph_free,
    .gemm = em_cuda_gemm,
    .linear = em_cuda_linear,
    .linear_grad = em_cuda_linear_grad,
    .conv2d = em_cuda_conv2d,
    .conv2d_grad_input = em_cuda_conv2d_grad_input,
    .conv2d_grad_weight = em_cuda_conv2d_grad_weight,
    .max_pool2d = em_cuda_max_pool2d,
    .max_pool2d_grad = em_cuda_max_pool2d_grad,
    .avg_pool2d = em_cuda_avg_pool2d,
    .avg_pool2d_grad = em_cuda_avg_pool2d_grad,
    .sgd_update = em_cuda_sgd_update,
    .adam_update = em_cuda_adam_update,
    .rmsprop_update = em_cuda_rmsprop_update,
    .attention = em_cuda_attention,
    .attention_grad = em_cuda_attention_grad,
    .int8_packed_size = em_cuda_int8_packed_size,
    .int8_pack = em_cuda_int8_pack,
    .qlinear_dynamic = em_cuda_qlinear_dynamic,
    .qlinear_static = em_cuda_qlinear_static,
    .qconv2d_static = em_cuda_qconv2d_static,
    .unscale_check = em_cuda_unscale_check,
    .norm_pow_sum = em_cuda_norm_pow_sum,
    .clip_grad_norm = em_cuda_clip_grad_norm,
    .softmax = em_cuda_softmax,
    .softmax_grad = em_cuda_softmax_grad,
    .cross_entropy = em_cuda_cross_entropy,
    .cross_entropy_grad = em_cuda_cross_entropy_grad,
    .layer_norm = em_cuda_layer_norm,
    .layer_norm_grad = em_cuda_layer_norm_grad,
    .index_select = em_cuda_index_select,
    .index_add = em_cuda_index_add,
    .gather = em_cuda_gather,
    .scatter_add = em_cuda_scatter_add,
    .scatter = em_cuda_scatter,
    .bad_index_kernel = em_cuda_bad_index_kernel,
    .take_failure = em_cuda_take_failure,
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
