/* The CPU backend's kernels, one family per file; cpu_backend.c puts them in the table. */
#ifndef EMBER_CPU_KERNELS_INTERNAL_H
#define EMBER_CPU_KERNELS_INTERNAL_H

#include <sched.h>

#include "backend/backend_internal.h"

/* Below this many elements a kernel runs on one thread (no OpenMP fork overhead). */
#define EM_CPU_PARALLEL_MIN 32768
/* task(ctx, t) for t < tasks: over em_cpu_threads() threads (static schedule: a thread takes a
 * run of consecutive tasks) where `threaded` and there are two tasks or more, else on the
 * calling thread without entering OpenMP at all. For regions that often run small: OpenMP's
 * `if` clause still enters its runtime, and a region of one thread costs about 0.65 us on a
 * Zen 4 EPYC (a loop over 512 floats: 0.04 us), which a batch-1 forward paid several times per
 * layer. */
typedef void (*em_cpu_task_fn)(void *ctx, int64_t t);
void em_cpu_run_tasks(int64_t tasks, bool threaded, em_cpu_task_fn task, void *ctx);

/* cpu_threads.c: the threads a parallel region of the backend forks from this thread now: 1
 * inside a parallel region; else the user's count (omp_get_max_threads), fewer while other
 * processes hold the cores, unless EMBER_ADAPTIVE_THREADS=0 (em_cpu_threads_adaptive false).
 * Every `omp parallel` of the backend names it (or a count taken from it) in num_threads. */
int em_cpu_threads(void);
bool em_cpu_threads_adaptive(void);
/* the user's count for this thread (OpenMP's), set and read: the governor's ceiling */
int em_cpu_set_threads(int n);
int em_cpu_max_threads(void);
/* One sampling window of the thread that forks. */
typedef struct {
    int64_t wall_ns;  /* its length */
    int64_t wait_ns;  /* the thread's time waiting on a run queue in it; < 0: unknown */
    double idle_cpus; /* idle time of the CPUs the thread may run on, in CPUs; < 0: unknown */
} em_cpu_load;
/* The team after window w: one smaller when the thread waited for a core over 10% of it, one
 * larger when 0.7 of a CPU sat idle, within [1, ceiling]; the ceiling when a signal it needs is
 * unknown or the window is EM_CPU_STALE_WINDOW_NS or longer (the thread ran no kernels for
 * most of it). */
#define EM_CPU_STALE_WINDOW_NS 1000000000LL
int em_cpu_team_next(const em_cpu_load *w, int team, int ceiling);
/* /proc/thread-self/schedstat's text -> the run-queue wait in ns (its second field) */
bool em_cpu_parse_schedstat(const char *text, int64_t *wait_ns);
/* /proc/stat's text -> idle + iowait seconds summed over the cpuN lines of the CPUs in cpus (a
 * set of setsize bytes); false when none of them is there */
bool em_cpu_parse_idle(const char *text, const cpu_set_t *cpus, size_t setsize, double *idle_s);

/* cpu_memory.c */
void *em_cpu_alloc(size_t nbytes); /* 64-byte aligned */
void em_cpu_free(void *ptr);
int em_cpu_copy_from_host(void *dst, const void *src_host, size_t nbytes);
int em_cpu_copy_to_host(void *dst_host, const void *src, size_t nbytes);
int em_cpu_synchronize(void);
void em_cpu_describe(char *buf, size_t n);
void em_cpu_details(char *buf, size_t n); /* the thread governor, the CPU features */
/* cpu_backend.c: scratch memory for kernels, from the accounting allocator (em_workspace_alloc),
 * 64-byte aligned; NULL when out of memory or over the budget. Free with em_cpu_scratch_free. */
void *em_cpu_scratch(size_t nbytes);
void em_cpu_scratch_free(void *ptr); /* NULL is fine */

/* cpu_dnnl.c: what multiplies each kind of product on this CPU, engine and ISA, a line per kind
 * (f32, bf16, f16, int8) into buf: "bf16  oneDNN avx512_core_bf16" */
void em_cpu_products_describe(char *buf, size_t n);

/* cpu_blas_core.c: at discovery, OpenBLAS's widest kernel set for this CPU where OpenBLAS did not
 * recognise it; a line naming the set in use ("OpenBLAS SkylakeX kernels") into buf */
void em_cpu_blas_choose_core(void);
void em_cpu_blas_describe(char *buf, size_t n);
bool em_cpu_blas_small_kernels(void);

/* cpu_copy.c: fill, strided copy with dtype conversion */
int em_cpu_fill(const em_arr *out, double value);
int em_cpu_copy(const em_arr *out, const em_arr *in);

/* cpu_rng.c */
int em_cpu_rng_fill(em_rng_dist dist, const em_rng_params *p, uint64_t seed, uint64_t offset,
                    const em_arr *out);

/* cpu_gelu.c: GELU (erf) and its gradient over n contiguous f32 on AVX-512 or AVX2+FMA (the same
 * bits); false (nothing done) without AVX2, where cpu_unary.c's portable loop runs */
bool em_cpu_gelu_f32(int64_t n, float *y, const float *x);
bool em_cpu_gelu_grad_f32(int64_t n, float *gx, const float *gy, const float *x);

/* cpu_unary.c, cpu_binary.c, cpu_reduce.c */
int em_cpu_unary(em_unary_op op, const em_unary_params *p, const em_arr *out, const em_arr *in);
int em_cpu_unary_grad(em_unary_op op, const em_unary_params *p, const em_arr *gx,
                      const em_arr *gy, const em_arr *x, const em_arr *y);
int em_cpu_binary(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b);
int em_cpu_binary_grad(em_binary_op op, bool wrt_b, const em_arr *gx, const em_arr *g,
                       const em_arr *a, const em_arr *b, const em_arr *y);
int em_cpu_where(const em_arr *out, const em_arr *cond, const em_arr *a, const em_arr *b);
int em_cpu_reduce(em_reduce_op op, const em_reduce_params *p, const em_arr *out,
                  const em_arr *in);
/* cpu_cumulative.c */
int em_cpu_cumulative(bool prod, bool reverse, int dim, const em_arr *out, const em_arr *in);

/* cpu_gemm.c */
int em_cpu_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, int64_t stride_a,
                const void *b, int64_t ldb, int64_t stride_b,
                double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);
/* f32 on AVX2+FMA where the product is large enough (cpu_gemm_tiles.c), else unsupported */
int em_cpu_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                  const void *w, int64_t ldw, const void *b, void *y, int64_t ldy);
int em_cpu_linear_grad(em_dtype dt, const em_linear_grads *a);
/* Leaves OpenBLAS to one thread of its own (ember's OpenMP threads split the products). */
void em_cpu_blas_one_thread(void);

/* cpu_conv.c */
int em_cpu_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                  const void *bias, void *y);
int em_cpu_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                             const void *w, void *gx);
int em_cpu_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                              const void *x, void *gw, void *gbias);
/* Both gradients in one call where oneDNN runs the layer (gy reordered for it once); else
 * EM_KERNEL_UNSUPPORTED. */
int em_cpu_conv2d_grads(const em_conv2d_shape *s, em_dtype dt, const void *gy, const void *x,
                        const void *w, void *gx, void *gw, void *gbias);

/* cpu_pool.c */
int em_cpu_max_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                      em_pool_tap *argmax);
int em_cpu_max_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                           const em_pool_tap *argmax, void *gx);
int em_cpu_avg_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y);
int em_cpu_avg_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy, void *gx);

/* cpu_softmax.c */
int em_cpu_softmax(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *x, void *y);
int em_cpu_cross_entropy(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                         const int64_t *target, void *loss, double *stats);
int em_cpu_cross_entropy_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                              const int64_t *target, const double *stats, const void *g,
                              void *gx);
int em_cpu_layer_norm(em_dtype dt, int64_t rows, int64_t cols, const void *x, const void *w,
                      const void *b, double eps, void *y, double *stats);
int em_cpu_layer_norm_grad(em_dtype dt, int64_t rows, int64_t cols, const void *x, const void *w,
                           const double *stats, const void *gy, void *gx, void *gw, void *gb);
int em_cpu_softmax_grad(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *gy,
                        const void *y, void *gx);

/* cpu_attention.c: fused scaled dot-product attention; _path picks the AVX2 (true, where the
 * CPU has it) or the portable f32 tiles */
int em_cpu_attention(const em_attention_params *p, const em_arr *q, const em_arr *k,
                     const em_arr *v, const em_arr *mask, const em_arr *out, const em_arr *lse);
int em_cpu_attention_grad(const em_attention_params *p, const em_arr *q, const em_arr *k,
                          const em_arr *v, const em_arr *mask, const em_arr *out,
                          const em_arr *lse, const em_arr *gout, const em_arr *gq,
                          const em_arr *gk, const em_arr *gv);
int em_cpu_attention_path(bool avx2, const em_attention_params *p, const em_arr *q,
                          const em_arr *k, const em_arr *v, const em_arr *mask,
                          const em_arr *out, const em_arr *lse);
int em_cpu_attention_grad_path(bool avx2, const em_attention_params *p, const em_arr *q,
                               const em_arr *k, const em_arr *v, const em_arr *mask,
                               const em_arr *out, const em_arr *lse, const em_arr *gout,
                               const em_arr *gq, const em_arr *gk, const em_arr *gv);

/* cpu_attention_bf16.c: em_cpu_attention (gout NULL) or em_cpu_attention_grad on bf16 operands
 * with AVX512_BF16 dot products, where the call has no mask or dropout and even head dims (with
 * rows an even number of elements apart); EM_KERNEL_UNSUPPORTED (nothing done) elsewhere. */
int em_cpu_attention_bf16(const em_attention_params *p, int64_t batch, int64_t heads,
                          int64_t lq, int64_t lk, int64_t d, int64_t dv, const em_arr *q,
                          const em_arr *k, const em_arr *v, const em_arr *mask, const em_arr *out,
                          const em_arr *lse, const em_arr *gout, const em_arr *gq,
                          const em_arr *gk, const em_arr *gv);

/* cpu_index.c */
int em_cpu_index_select(const em_arr *out, const em_arr *in, int dim, const em_arr *idx);
int em_cpu_index_add(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
int em_cpu_gather(const em_arr *out, const em_arr *in, int dim, const em_arr *idx);
int em_cpu_scatter_add(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
int em_cpu_scatter(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);

/* cpu_optim.c */
int em_cpu_sgd_update(em_dtype dt, const em_sgd_hparams *h, const em_array_list *l);
int em_cpu_adam_update(em_dtype dt, const em_adam_hparams *h, const em_array_list *l);
int em_cpu_rmsprop_update(em_dtype dt, const em_rmsprop_hparams *h, const em_array_list *l);

/* cpu_int8_*.c: int8 products. Activations are quantized to 0..EM_CPU_U7_MAX (7 bits, exact
 * under AVX2's 16-bit pair sums), weights are s8 packed by em_cpu_int8_pack. Each path gives
 * the same int32 sums; the _path functions pick one (tests), the others the fastest here. */
#define EM_CPU_U7_MAX 127
typedef enum {
    EM_CPU_INT8_PORTABLE,
    EM_CPU_INT8_AVX2, /* AVX2 + FMA: maddubs / madd */
    EM_CPU_INT8_VNNI, /* AVX-512 F, BW, VL and VNNI: vpdpbusd */
    EM_CPU_INT8_DNNL, /* oneDNN's u8 x s8 matmul (the best where the CPU has VNNI or AMX-INT8);
                       * a convolution's products run on the best of the others */
    EM_CPU_INT8_PATHS
} em_cpu_int8_path;
bool em_cpu_int8_path_supported(em_cpu_int8_path path);
em_cpu_int8_path em_cpu_int8_best_path(void);
int64_t em_cpu_int8_packed_size(int64_t n, int64_t k);
int em_cpu_int8_pack(int64_t n, int64_t k, const int8_t *w, void *packed);
/* c (m, n) i32 = a (m, k) @ w^T with a's rows lda bytes apart, values 0..127; w packed;
 * an unsupported path is refused. */
int em_cpu_int8_gemm_path(em_cpu_int8_path path, int64_t m, int64_t n, int64_t k,
                          const uint8_t *a, int64_t lda, const void *packed, int32_t *c,
                          int64_t ldc);
/* scale and zero point of the range [min, max] widened to hold 0 */
void em_cpu_qparams_u7(float min, float max, float *scale, int32_t *zero_point);
/* q (n) = clamp(round(x / scale) + zero_point, 0, 127) with x's own range */
int em_cpu_quantize_u7(int64_t n, const float *x, uint8_t *q, float *scale, int32_t *zero_point);
int em_cpu_qlinear_dynamic(int64_t m, int64_t n, int64_t k, const float *x, const void *packed,
                           const float *w_scale, int64_t n_scales, const float *bias, float *y);
int em_cpu_qlinear_dynamic_path(em_cpu_int8_path path, int64_t m, int64_t n, int64_t k,
                                const float *x, const void *packed, const float *w_scale,
                                int64_t n_scales, const float *bias, float *y);

/* cpu_int8_static.c: static (calibrated) int8 linear and conv2d */
int em_cpu_qlinear_static(int64_t m, int64_t n, int64_t k, const float *x, float x_scale,
                          int32_t x_zero_point, const void *packed, const float *w_scale,
                          int64_t n_scales, const float *bias, bool relu, float *y);
int em_cpu_qconv2d_static(const em_conv2d_shape *s, const float *x, float x_scale,
                          int32_t x_zero_point, const void *packed, const float *w_scale,
                          int64_t n_scales, const float *bias, bool relu, float *y);
int em_cpu_qconv2d_static_path(em_cpu_int8_path path, const em_conv2d_shape *s, const float *x,
                               float x_scale, int32_t x_zero_point, const void *packed,
                               const float *w_scale, int64_t n_scales, const float *bias,
                               bool relu, float *y);

/* cpu_amp.c: unscale gradients in place, flagging inf/NaN; cpu_norm.c: sum |x|^p or max |x| */
int em_cpu_unscale_check(em_dtype dt, double inv_scale, const em_array_list *l, float *found_inf);
int em_cpu_norm_pow_sum(em_dtype dt, double p, const em_array_list *l, double *out);

#endif
