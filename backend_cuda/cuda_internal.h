/* The CUDA backend's shared plumbing, private to backend_cuda/: the one compute stream every
 * kernel, copy and cuBLAS call runs on, the cuBLAS handle, the launch check, the device index
 * flag, and the entry points each cuda_*.cu file gives the table in cuda_backend.c.
 *
 * Conventions for the kernel files (compiled by nvcc as C++, entries extern "C"):
 * - Launch on em_cuda_launch_stream() only (it counts the launch: kernels, copies, fills and
 *   library calls alike), and return em_cuda_launch_status() after the launches, so a launch
 *   error becomes EM_KERNEL_FAILED. Never synchronize inside a kernel entry: inside a captured
 *   graph (cuda_graph.c) nothing runs until the graph is launched.
 * - Scratch memory comes from em_cuda_scratch / em_cuda_scratch_free (the accounting allocator,
 *   stream-ordered: a block freed after a launch is reused only by later work on the stream).
 * - Semantics are the CPU kernels' (backend_cpu/), bit for bit where the interface promises it
 *   (integer and index results, RNG, copies); f16/bf16 compute in f32, f32 in f32 (no TF32 unless
 *   the TF32 switch is on), f64 in f64. Reductions are deterministic: a fixed launch shape and a
 *   fixed order of combination, no atomics on floating point.
 * - Index kernels raise the device index flag (em_cuda_index_flag, below) instead of failing;
 *   synchronize and copy_to_host report it as EM_KERNEL_BAD_INDEX. */
#ifndef EMBER_CUDA_INTERNAL_H
#define EMBER_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend_internal.h" /* C declarations, also in the C++ of the .cu files */

/* cuda_memory.c */
cudaStream_t em_cuda_stream(void);
cudaStream_t em_cuda_launch_stream(void); /* em_cuda_stream, counting one launch */
void em_cuda_count_launch(void);          /* one launch by a library (cuBLAS, cuDNN) */
void em_cuda_counts(em_device_counts *c); /* the table's counts */
void *em_cuda_stream_handle(void); /* em_cuda_stream for the table's stream entry */
cublasHandle_t em_cuda_cublas(void);
/* the libraries' workspace on the stream (cuBLAS's, cuBLASLt's), NULL and 0 when none */
void *em_cuda_workspace(size_t *nbytes);
bool em_cuda_tf32(void); /* f32 products on TF32 tensor cores (em_cuda_set_tf32) */
bool em_cuda_init(void); /* the stream and cuBLAS handle; false when no usable device */
int em_cuda_status(cudaError_t err); /* EM_KERNEL_OK, or EM_KERNEL_FAILED keeping what failed */
int em_cuda_fail(const char *why);   /* EM_KERNEL_FAILED keeping why */
/* the last launch's error, as em_cuda_status; in debug builds or with EMBER_CUDA_SYNC=1 it
 * waits for the kernel, so a fault inside it is reported by the op that launched it */
int em_cuda_launch_status(void);
const char *em_cuda_take_failure(void); /* the table's take_failure */
void *em_cuda_alloc(size_t nbytes);
void em_cuda_free(void *ptr);
int em_cuda_copy_from_host(void *dst, const void *src_host, size_t nbytes);
int em_cuda_copy_to_host(void *dst_host, const void *src, size_t nbytes);
int em_cuda_synchronize(void);
void *em_cuda_host_alloc(size_t nbytes); /* page-locked */
void em_cuda_host_free(void *ptr_host);
int em_cuda_mark(void **ev);
int em_cuda_copy_from_host_async(void *dst, const void *src_host, size_t nbytes, void *after,
                                 void **done);
int em_cuda_event_wait(void *ev);
void em_cuda_event_free(void *ev);
void em_cuda_describe(char *buf, size_t n);
int em_cuda_set_tf32(bool on);
void *em_cuda_scratch(size_t nbytes);               /* NULL when out of memory */
void em_cuda_scratch_free(void *ptr, size_t nbytes); /* NULL is fine */
const em_backend *em_cuda_table(void);              /* cuda_backend.c */

/* cuda_graph.c: the stream captured into graphs (the table's capture and graph entries). While
 * capturing, copies from the host go through em_cuda_capture_host_copy and whatever would wait
 * for the device fails through em_cuda_capture_refuse. */
bool em_cuda_capturing(void);
int em_cuda_capture_begin(void);
int em_cuda_capture_end(void **graph);
int em_cuda_graph_launch(void *graph);
void em_cuda_graph_free(void *graph);
int em_cuda_capture_host_copy(void *dst, const void *src_host, size_t nbytes);
int em_cuda_capture_refuse(const char *what); /* EM_KERNEL_FAILED: "<what> inside a captured..." */

/* cuda_index_flag.cu: the device index flag. A kernel raises it with atomicCAS(flag, 0, code),
 * code its em_cuda_index_kernel (the first raised is kept); em_cuda_take_index_error gives
 * EM_KERNEL_BAD_INDEX once when raised (and clears it), em_cuda_bad_index_kernel then names the
 * kernel ("gather"). em_cuda_index_flag is the flag's device address (NULL if unavailable). */
typedef enum {
    EM_CUDA_INDEX_SELECT = 1,
    EM_CUDA_INDEX_ADD,
    EM_CUDA_GATHER,
    EM_CUDA_SCATTER_ADD,
    EM_CUDA_CROSS_ENTROPY,
    EM_CUDA_SCATTER
} em_cuda_index_kernel;
int *em_cuda_index_flag(void);
int em_cuda_take_index_error(void);
const char *em_cuda_bad_index_kernel(void);

/* cuda_timer.c: the profiler's event pairs (see the table's timer_* entries) */
void *em_cuda_timer_start(void);
void em_cuda_timer_stop(void *timer);
int em_cuda_timer_read(void *timer, double *ms);

/* cuda_gemm.c */
int em_cuda_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 double alpha, const void *a, int64_t lda, int64_t stride_a,
                 const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);
/* the same for f16/bf16 a and b with an f32 c (accumulating a half product in f32) */
int em_cuda_gemm_f32_out(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *a, int64_t lda, int64_t stride_a,
                         const void *b, int64_t ldb, int64_t stride_b,
                         double beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch);

/* cuda_linear.c: a Linear with its bias through cuBLASLt's epilogues */
int em_cuda_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                   const void *w, int64_t ldw, const void *b, void *y, int64_t ldy);
int em_cuda_linear_grad(em_dtype dt, const em_linear_grads *a);

/* cuda_cudnn.c (cuda_cudnn_absent.c in a build without cuDNN): the convolutions through cuDNN,
 * EM_KERNEL_UNSUPPORTED where it does not serve one (then cuda_conv.cu's kernels run); a line
 * on cuDNN and its mode for the device's description */
int em_cudnn_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                    const void *bias, void *y);
int em_cudnn_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                               const void *w, void *gx);
int em_cudnn_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                const void *x, void *gw, void *gbias);
void em_cudnn_describe(char *buf, size_t n);

/* cuda_conv.cu, cuda_pool.cu */
int em_cuda_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                   const void *bias, void *y);
int em_cuda_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                              const void *w, void *gx);
int em_cuda_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                               const void *x, void *gw, void *gbias);
int em_cuda_max_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                       em_pool_tap *argmax);
int em_cuda_max_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                            const em_pool_tap *argmax, void *gx);
int em_cuda_avg_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y);
int em_cuda_avg_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy, void *gx);

/* cuda_optim.cu, cuda_amp.cu */
int em_cuda_sgd_update(em_dtype dt, const em_sgd_hparams *h, const em_array_list *l);
int em_cuda_adam_update(em_dtype dt, const em_adam_hparams *h, const em_array_list *l);
int em_cuda_rmsprop_update(em_dtype dt, const em_rmsprop_hparams *h, const em_array_list *l);
int em_cuda_unscale_check(em_dtype dt, double inv_scale, const em_array_list *l, float *found_inf);
int em_cuda_norm_pow_sum(em_dtype dt, double p, const em_array_list *l, double *out);
int em_cuda_clip_grad_norm(em_dtype dt, double p, double max_norm, const double *sums,
                           int n_sums, const em_array_list *l, double *total);

/* cuda_int8.cu */
int64_t em_cuda_int8_packed_size(int64_t n, int64_t k);
int em_cuda_int8_pack(int64_t n, int64_t k, const int8_t *w, void *packed);
int em_cuda_qlinear_dynamic(int64_t m, int64_t n, int64_t k, const float *x, const void *packed,
                            const float *w_scale, int64_t n_scales, const float *bias, float *y);
int em_cuda_qlinear_static(int64_t m, int64_t n, int64_t k, const float *x, float x_scale,
                           int32_t x_zero_point, const void *packed, const float *w_scale,
                           int64_t n_scales, const float *bias, bool relu, float *y);
int em_cuda_qconv2d_static(const em_conv2d_shape *s, const float *x, float x_scale,
                           int32_t x_zero_point, const void *packed, const float *w_scale,
                           int64_t n_scales, const float *bias, bool relu, float *y);

/* cuda_attention.cu */
int em_cuda_attention(const em_attention_params *p, const em_arr *q, const em_arr *k,
                      const em_arr *v, const em_arr *mask, const em_arr *out, const em_arr *lse);
int em_cuda_attention_grad(const em_attention_params *p, const em_arr *q, const em_arr *k,
                           const em_arr *v, const em_arr *mask, const em_arr *out,
                           const em_arr *lse, const em_arr *gout, const em_arr *gq,
                           const em_arr *gk, const em_arr *gv);

/* cuda_copy.cu */
int em_cuda_fill(const em_arr *out, double value);
int em_cuda_copy(const em_arr *out, const em_arr *in);

/* cuda_unary.cu */
int em_cuda_unary(em_unary_op op, const em_unary_params *p, const em_arr *out, const em_arr *in);
int em_cuda_unary_grad(em_unary_op op, const em_unary_params *p, const em_arr *gx,
                       const em_arr *gy, const em_arr *x, const em_arr *y);

/* cuda_binary.cu */
int em_cuda_binary(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b);
int em_cuda_binary_grad(em_binary_op op, bool wrt_b, const em_arr *gx, const em_arr *g,
                        const em_arr *a, const em_arr *b, const em_arr *y);
int em_cuda_where(const em_arr *out, const em_arr *cond, const em_arr *a, const em_arr *b);

/* cuda_reduce.cu */
int em_cuda_reduce(em_reduce_op op, const em_reduce_params *p, const em_arr *out,
                   const em_arr *in);

/* cuda_cumulative.cu */
int em_cuda_cumulative(bool prod, bool reverse, int dim, const em_arr *out, const em_arr *in);

/* cuda_rng.cu */
int em_cuda_rng_fill(em_rng_dist dist, const em_rng_params *p, uint64_t seed, uint64_t offset,
                     const em_arr *out);

/* cuda_softmax.cu */
int em_cuda_softmax(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *x, void *y);
int em_cuda_softmax_grad(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *gy,
                         const void *y, void *gx);
int em_cuda_cross_entropy(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                          const int64_t *target, void *loss, double *stats);
int em_cuda_cross_entropy_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                               const int64_t *target, const double *stats, const void *g,
                               void *gx);

/* cuda_layer_norm.cu */
int em_cuda_layer_norm(em_dtype dt, int64_t rows, int64_t cols, const void *x, const void *w,
                       const void *b, double eps, void *y, double *stats);
int em_cuda_layer_norm_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                            const void *w, const double *stats, const void *gy, void *gx,
                            void *gw, void *gb);

/* cuda_index.cu */
int em_cuda_index_select(const em_arr *out, const em_arr *in, int dim, const em_arr *idx);
int em_cuda_index_add(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
int em_cuda_gather(const em_arr *out, const em_arr *in, int dim, const em_arr *idx);
int em_cuda_scatter_add(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
int em_cuda_scatter(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);

#ifdef __cplusplus
}
#endif

#endif
