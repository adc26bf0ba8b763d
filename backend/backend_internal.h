/* The backend interface (private to the library): one table of kernels per device, filled in by
 * each backend when the registry discovers it. Kernels see pointers, shapes, strides and dtypes
 * only; argument checking, broadcasting and autograd live above, in tensor/ and autograd/.
 * A NULL entry means "not supported on this device"; callers turn that into a clear error.
 *
 * Where pointers live: every data pointer a kernel takes (em_arr.data, x, w, y, gy, argmax, param,
 * grad, found_inf, out, packed, ...) is in the memory of the table's own device, allocated by its
 * alloc entry or by em_workspace_alloc. Host pointers are only those named *_host
 * (copy_from_host, copy_to_host) and the hyperparameter and shape structs, which are read on the
 * host before the kernel starts. A kernel may return before the device has finished; reading the
 * results on the host goes through copy_to_host, which waits. */
#ifndef EMBER_BACKEND_INTERNAL_H
#define EMBER_BACKEND_INTERNAL_H

#include "backend/dtype.h"
#include "backend/binary_ops_internal.h" /* em_binary_op */
#include "backend/reduce_ops_internal.h" /* em_reduce_op, em_reduce_params */
#include "backend/unary_ops_internal.h"  /* em_unary_op, em_unary_params */

/* What a kernel returns: 0 on success, or one of these. */
enum {
    EM_KERNEL_OK = 0,
    EM_KERNEL_UNSUPPORTED = -1, /* this dtype (combination) is not implemented by the kernel */
    EM_KERNEL_FAILED = -2,      /* the device reported a failure (out of memory, launch error) */
    EM_KERNEL_BAD_INDEX = -3    /* an index kernel met an index outside its dimension: at once on
                                 * the CPU; on an asynchronous device from the next synchronize
                                 * or copy_to_host after the kernel (a flag the kernel raised) */
};

/* A strided view of device memory. data points at the view's first element (offset applied);
 * strides count elements and may be 0 (broadcast) or negative-free permutations. */
typedef struct {
    void *data;
    em_dtype dtype;
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_MAX_DIMS];
} em_arr;

typedef enum {
    EM_RNG_UNIFORM,   /* [low, high) */
    EM_RNG_NORMAL,    /* mean, std */
    EM_RNG_RANDINT,   /* integers in [low, high) */
    EM_RNG_BERNOULLI  /* 1 with probability p, else 0 */
} em_rng_dist;

/* The parameters of a distribution; each reads only its own fields. */
typedef struct {
    double low, high; /* UNIFORM, RANDINT */
    double mean, std; /* NORMAL */
    double p;         /* BERNOULLI */
} em_rng_params;

/* The gradients of a Linear y = x @ w^T + b from g = dL/dy: gx (m, n) = g (m, k) @ w, w (k, n),
 * where gx is not NULL; gb (k) = the sums of g's columns over its rows, where gb is not NULL;
 * gw (k, n) = g^T @ x, x (m, n), where gw is not NULL. One dtype for all but gw and gb, which
 * are param_dt: the dtype itself, or f32 under a half one (f32 parameters under autocast; a
 * backend that cannot write it returns EM_KERNEL_UNSUPPORTED); ld* are row strides. */
typedef struct {
    int64_t m, n, k;
    const void *g, *w, *x;
    int64_t ldg, ldw, ldx;
    void *gx, *gb, *gw;
    int64_t ldgx, ldgw;
    em_dtype param_dt;
} em_linear_grads;

/* Shapes of a 2-D convolution; x (N, C_in, H, W), w (C_out, C_in/groups, KH, KW),
 * y (N, C_out, H_out, W_out); all contiguous. */
typedef struct {
    int64_t n, c_in, h, w;
    int64_t c_out, kh, kw;
    int64_t h_out, w_out;
    int64_t stride[2], pad[2], dilation[2];
    int64_t groups;
} em_conv2d_shape;

/* Which tap of its window gave a max pooling output, row-major (i * kernel[1] + j for row i and
 * column j of the window), -1 for none: an all-padding window, or with relu a maximum that is
 * not positive. Two bytes an output where PyTorch keeps an 8-byte index into the plane: the
 * backward pass reads them all, and max pooling runs on the largest activations of a CNN. */
typedef int16_t em_pool_tap;
#define EM_POOL_MAX_TAPS INT16_MAX /* windows of at most this many taps */

/* Shapes of 2-D pooling; x (N, C, H, W), y (N, C, H_out, W_out); contiguous. */
typedef struct {
    int64_t n, c, h, w;
    int64_t h_out, w_out;
    int64_t kernel[2], stride[2], pad[2];
    int64_t dilation[2];    /* >= 1: taps dilation apart; average pooling takes 1 */
    bool count_include_pad; /* average pooling only */
    /* max pooling only: y = relu(the maximum), argmax -1 (no gradient) where the maximum is not
     * positive: max_pool2d(relu(x)) in one pass */
    bool relu;
} em_pool2d_shape;

/* Where a fused update takes the constants of its step (the learning rate, bias corrections,
 * decay factors) from: the launch's parameters (consts NULL), or device memory, so that a
 * captured graph (tensor/device_graph_internal.h) runs each replay with the constants the
 * optimizer wrote there before it. Given consts, the entry writes the constants there first (a
 * queued copy) unless the device is capturing (a replay's are written before it runs), and
 * with write_only it writes them and updates nothing. A device without graphs ignores it. */
typedef struct {
    void *consts; /* EM_UPDATE_CONSTS_BYTES of the device's memory, or NULL */
    bool write_only;
} em_update_consts;
#define EM_UPDATE_CONSTS_BYTES 128

/* Hyperparameters of the fused optimizer updates; PyTorch's semantics (see optim/optim.h). */
typedef struct {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step; /* the momentum buffer starts as the gradient itself (no dampening) */
    em_update_consts at;
} em_sgd_hparams;

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled; /* AdamW: param *= 1 - lr * weight_decay; else L2 added to the gradient */
    bool amsgrad;
    int64_t step;   /* this update's count, from 1 (bias correction) */
    em_update_consts at;
} em_adam_hparams;

typedef struct {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered;
    em_update_consts at;
} em_rmsprop_hparams;

/* The arrays one fused launch goes over: n arrays of one dtype, array i holding numel[i]
 * contiguous elements in the device's memory; these lists of pointers and counts are host memory.
 * The optimizer updates read grad and update data (the parameters) and state[k], the rule's k-th
 * state buffer of each array (a NULL list where the rule keeps no such state), and write low[i],
 * where the list and its entry are not NULL, with the new parameter rounded to low_dtype (an
 * f32 parameter's copy under autocast; a backend without this returns EM_KERNEL_UNSUPPORTED
 * for such a list, before it changes anything). */
typedef struct {
    int n;
    const int64_t *numel;    /* (n) */
    void *const *data;       /* (n) */
    const void *const *grad; /* (n) */
    void *const *state[3];   /* (n) each, or NULL */
    void *const *low;        /* (n), or NULL */
    em_dtype low_dtype;
} em_array_list;

/* Scaled dot-product attention of one call (the kernels' view of em_scaled_dot_product_attention):
 * per batch b and head h, scores s = scale * q k^T (+ mask), out = dropout(softmax(s)) v. */
typedef struct {
    double scale;
    bool causal;           /* query i sees keys j <= i only (the top-left diagonal) */
    double dropout_p;      /* 0: none. Else weight (b, h, i, j) is kept, times 1 / (1 - p), when
                              the Philox uniform of element ((b * H + h) * Lq + i) * Lk + j of
                              (seed, offset) is below 1 - p: em_bernoulli's mask of that shape */
    uint64_t seed, offset;
} em_attention_params;

/* What a device has queued and waited for since it started: the profiler's launches per step, and
 * the step graph's checks of a step before it captures one (train/step_graph.c). */
typedef struct {
    uint64_t launches;    /* kernels, copies, fills and library calls (cuBLAS, cuDNN) queued */
    uint64_t host_waits;  /* copy_to_host and synchronize calls: the host waited for the device */
    uint64_t host_copies; /* copy_from_host calls */
    uint64_t host_copy_hash;    /* the sum (wrapping) of a hash of the bytes of each of those
                                   up to EM_HASHED_COPY_BYTES long: two stretches of work
                                   copied the same host values when their sums grew alike */
    uint64_t long_host_copies;  /* copy_from_host calls of more bytes than that */
} em_device_counts;
#define EM_HASHED_COPY_BYTES 16384

typedef struct em_backend {
    em_device device;
    const char *name;

    /* memory */
    void *(*alloc)(size_t nbytes);                     /* NULL when out of memory */
    void (*free)(void *ptr);
    int (*copy_from_host)(void *dst, const void *src_host, size_t nbytes);
    int (*copy_to_host)(void *dst_host, const void *src, size_t nbytes);
    int (*synchronize)(void);
    /* page-locked host memory for fast, asynchronous copies (NULL entries: plain host memory) */
    void *(*host_alloc)(size_t nbytes);
    void (*host_free)(void *ptr_host);
    /* Asynchronous copies beside the kernels (NULL entries: the device has none). mark records
     * the point the device's queued kernels have reached into *ev. copy_from_host_async copies
     * from page-locked src_host on a separate queue, after the device has passed `after` (NULL:
     * at once): later kernels see the bytes, and *done is a handle for event_wait, which returns
     * once src_host may be reused. event_wait and event_free release a handle. */
    int (*mark)(void **ev);
    int (*copy_from_host_async)(void *dst, const void *src_host, size_t nbytes, void *after,
                                void **done);
    int (*event_wait)(void *ev);
    void (*event_free)(void *ev);
    /* the queue the device runs its kernels on, as an opaque handle (CUDA: the cudaStream_t), for
     * code that orders its own device work after theirs (distributed/nccl.c); NULL entry: none to give */
    void *(*stream)(void);
    /* a line about the device into buf: "NVIDIA H100 80GB HBM3, 79.1 GiB, compute capability 9.0" */
    void (*describe)(char *buf, size_t n);
    /* what describe's line leaves out, a "topic: what" line each ("CPU features: AVX2+FMA yes,
     * ..."); NULL entry: nothing more to say */
    void (*details)(char *buf, size_t n);
    /* f32 matrix products on TF32 tensor cores (on) or in full f32 (off, the default); NULL where
     * f32 products are always full f32 */
    int (*set_tf32)(bool on);
    /* the threads a parallel kernel called from this thread may fork (n >= 1), their count
     * now, and the team it forks now (fewer while other processes hold the cores); NULL where
     * the device has no host threads to set */
    int (*set_threads)(int n);
    int (*threads)(void);
    int (*active_threads)(void);

    /* device time for the profiler; NULL where host clocks see all of it (the CPU). timer_start
     * records a start mark in the device's stream and returns a handle (NULL when it cannot),
     * timer_stop records the end mark, timer_read waits for it, gives the milliseconds between
     * the marks and frees the handle (ms may be NULL to only free it). */
    void *(*timer_start)(void);
    void (*timer_stop)(void *timer);
    int (*timer_read)(void *timer, double *ms);
    /* the device's counts so far (em_device_counts); NULL where nothing is queued (the CPU) */
    void (*counts)(em_device_counts *c);
    /* Graphs of the device's queue (NULL entries: the device has none). capture_begin starts
     * recording the queue: the kernels, copies and library calls queued until capture_end are
     * kept in a graph instead of run. Meanwhile nothing runs, so whatever would make the host
     * wait (copy_to_host, synchronize) fails, and copy_from_host keeps the bytes it is given in
     * the graph's own memory (every launch copies those same bytes again). capture_end gives the
     * graph, or EM_KERNEL_FAILED when something queued could not be kept (take_failure says
     * what); graph_launch queues a kept graph's work once more; graph_free frees one. */
    int (*capture_begin)(void);
    int (*capture_end)(void **graph);
    int (*graph_launch)(void *graph);
    void (*graph_free)(void *graph);

    /* elementwise: out and inputs share out's shape (inputs already broadcast by strides) */
    int (*fill)(const em_arr *out, double value);
    int (*copy)(const em_arr *out, const em_arr *in); /* strided copy with dtype conversion */
    /* out = op(in) with the formulas of unary_ops_internal.h; p: the op's parameters */
    int (*unary)(em_unary_op op, const em_unary_params *p, const em_arr *out, const em_arr *in);
    /* gx = gy * f'(x): x is the op's input, y its output; an op reads the one it needs */
    /* Read y when given, else x: EXP (y), SQRT (0.5/y), RSQRT (-0.5 y^3), RECIPROCAL (-y^2),
     * TANH (1-y^2), SIGMOID (y(1-y)). Read x: the others. Read neither (both may be NULL):
     * NEG, ADD_SCALAR, MUL_SCALAR, and SIGN/FLOOR/CEIL/ROUND (zero gradient). PyTorch's rules
     * at kinks: relu'(0) = abs'(0) = 0, leaky_relu'(0) = slope, clamp passes min <= x <= max
     * (hardtanh only min < x < max),
     * pow_scalar with exponent 0 gives 0; GELU_TANH uses PyTorch's tanh-approximation
     * derivative. */
    int (*unary_grad)(em_unary_op op, const em_unary_params *p, const em_arr *gx,
                      const em_arr *gy, const em_arr *x, const em_arr *y);
    /* out = a op b with the formulas of binary_ops_internal.h: a and b of one dtype, out of it
     * (bool for the comparisons); integers take the ops em_binary_int_supported names */
    int (*binary)(em_binary_op op, const em_arr *out, const em_arr *a, const em_arr *b);
    /* gx = g times the partial derivative of y = a op b by a (wrt_b false) or by b, with the
     * same header's formulas; g, a, b and y of gx's shape (a and b broadcast by strides) and
     * one float dtype; not for the comparisons */
    int (*binary_grad)(em_binary_op op, bool wrt_b, const em_arr *gx, const em_arr *g,
                       const em_arr *a, const em_arr *b, const em_arr *y);
    int (*where)(const em_arr *out, const em_arr *cond, const em_arr *a, const em_arr *b);

    /* reduction: out has in's ndim, with size 1 on every reduced dim; what each op folds and
     * divides by is reduce_ops_internal.h's */
    /* Dtypes: float in -> any float out (accumulated in double; MEAN/VAR float only); integer or
     * bool in -> SUM/PROD to any integer out (i64 accumulation, wrapping); MAX/MIN out = in;
     * ARGMAX/ARGMIN -> i64. Empty MAX/MIN/ARG* are unsupported; empty SUM 0, PROD 1, MEAN NaN. */
    int (*reduce)(em_reduce_op op, const em_reduce_params *p, const em_arr *out, const em_arr *in);
    /* out = the running sum (prod: product) of in along dim, from the last element back when
     * reverse; out and in share a shape and a float dtype, any strides; accumulated in double,
     * one element after the other (PyTorch's CPU order), so every backend gives the same bits */
    int (*cumulative)(bool prod, bool reverse, int dim, const em_arr *out, const em_arr *in);

    /* random numbers: element i of out (contiguous) takes Philox(seed, offset + i / 4) lane i % 4 */
    int (*rng_fill)(em_rng_dist dist, const em_rng_params *p, uint64_t seed, uint64_t offset,
                    const em_arr *out);

    /* row-major C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b < batch;
     * op(A) is (m, k), op(B) is (k, n), C is (m, n); ld* are row strides, stride_* batch strides */
    int (*gemm)(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, int64_t stride_a,
                const void *b, int64_t ldb, int64_t stride_b,
                double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);

    /* Optional (NULL, or EM_KERNEL_UNSUPPORTED for a call: the op copies b into y and calls gemm
     * with beta 1). A Linear's forward with its bias: y (m, n) = x (m, k) @ w^T + b, w (n, k),
     * b (n) or NULL, all of dtype dt; ld* are row strides. */
    int (*linear)(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                  const void *w, int64_t ldw, const void *b, void *y, int64_t ldy);
    /* Optional, as linear (the op calls gemm for each gradient and sums g's columns). A
     * Linear's gradients in one call, so that the backend can spread them over its threads
     * together (em_linear_grads). */
    int (*linear_grad)(em_dtype dt, const em_linear_grads *a);

    int (*conv2d)(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                  const void *bias /* (C_out) or NULL */, void *y);
    int (*conv2d_grad_input)(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                             const void *w, void *gx /* overwritten */);
    int (*conv2d_grad_weight)(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                              const void *x, void *gw /* overwritten */,
                              void *gbias /* (C_out) overwritten, or NULL */);
    /* Optional (NULL, or EM_KERNEL_UNSUPPORTED for a call: the op calls the two above). Both
     * gradients of one layer in one call, so that the backend can prepare gy for both once. */
    int (*conv2d_grads)(const em_conv2d_shape *s, em_dtype dt, const void *gy, const void *x,
                        const void *w, void *gx /* overwritten */, void *gw /* overwritten */,
                        void *gbias /* (C_out) overwritten, or NULL */);

    int (*max_pool2d)(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                      em_pool_tap *argmax /* (N, C, H_out, W_out) */);
    int (*max_pool2d_grad)(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                           const em_pool_tap *argmax, void *gx /* overwritten */);
    int (*avg_pool2d)(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y);
    int (*avg_pool2d_grad)(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                           void *gx /* overwritten */);

    /* softmax over the last dim of contiguous (rows, cols) data; log selects log_softmax */
    int (*softmax)(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *x, void *y);
    int (*softmax_grad)(em_dtype dt, bool log, int64_t rows, int64_t cols, const void *gy,
                        const void *y, void *gx);
    /* Optional (NULL: em_cross_entropy composes log_softmax and a gather). Per row of contiguous
     * (rows, cols) logits loss = -log_softmax(x)[target] as softmax computes it, stats (rows, 2)
     * the row's max and log-sum; EM_KERNEL_BAD_INDEX for a target outside [0, cols). The
     * gradient: gx given g (rows), the values log_softmax's rule gives. */
    int (*cross_entropy)(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                         const int64_t *target, void *loss, double *stats);
    int (*cross_entropy_grad)(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                              const int64_t *target, const double *stats, const void *g,
                              void *gx);

    /* Optional (NULL: em_layer_norm composes mean, var and elementwise ops). Per row of
     * contiguous (rows, cols) x: y = (x - mean) * rstd * w + b with rstd = 1 / sqrt(var + eps)
     * (the biased variance), w and b (cols) or NULL; stats (rows, 2) f64 the row's mean and
     * rstd. The gradient: gx (rows, cols) given gy, and gw, gb (cols) overwritten with their sums
     * over the rows in a fixed order (NULL: not wanted). f32 and f64. */
    int (*layer_norm)(em_dtype dt, int64_t rows, int64_t cols, const void *x, const void *w,
                      const void *b, double eps, void *y, double *stats);
    int (*layer_norm_grad)(em_dtype dt, int64_t rows, int64_t cols, const void *x,
                           const void *w, const double *stats, const void *gy, void *gx,
                           void *gw, void *gb);

    /* Index arguments are i64 arrays on the device, validated there (EM_KERNEL_BAD_INDEX). */
    /* out = in with dim replaced by idx (1-D, n = out.shape[dim] entries in [0, in.shape[dim])) */
    int (*index_select)(const em_arr *out, const em_arr *in, int dim, const em_arr *idx);
    /* out[.., idx[i], ..] += src[.., i, ..] along dim (idx 1-D, src.shape[dim] entries);
     * deterministic order */
    int (*index_add)(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
    /* out[i][j] = in[i][idx[i][j]] along dim (idx is i64 with out's shape) */
    int (*gather)(const em_arr *out, const em_arr *in, int dim, const em_arr *idx);
    /* out[i][idx[i][j]] += src[i][j] along dim; deterministic order */
    int (*scatter_add)(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
    /* out[i][idx[i][j]] = src[i][j] along dim (any dtype); where several j of one line meet one
     * element, the last j wins (deterministic) */
    int (*scatter)(const em_arr *out, int dim, const em_arr *idx, const em_arr *src);
    /* after synchronize or copy_to_host gave EM_KERNEL_BAD_INDEX: the kernel whose index was out
     * of range ("gather"); NULL on a device whose index kernels report it themselves */
    const char *(*bad_index_kernel)(void);
    /* Optional: what the device said of the last EM_KERNEL_FAILED on this thread ("an illegal
     * memory access was encountered (cudaErrorIllegalAddress)"), once; NULL when nothing is
     * kept. */
    const char *(*take_failure)(void);

    /* Optimizer updates in place, one launch over every array of the list (f32 or f64, each
     * state buffer the size of its parameter); all arrays share h (and its step). */
    /* state[0] the momentum buffers (NULL list when momentum is 0) */
    int (*sgd_update)(em_dtype dt, const em_sgd_hparams *h, const em_array_list *l);
    /* state[0] exp_avg, state[1] exp_avg_sq, state[2] max_exp_avg_sq (NULL unless amsgrad) */
    int (*adam_update)(em_dtype dt, const em_adam_hparams *h, const em_array_list *l);
    /* state[0] square_avg, state[1] momentum buffers (NULL when momentum is 0), state[2]
     * grad_avg (NULL unless centered) */
    int (*rmsprop_update)(em_dtype dt, const em_rmsprop_hparams *h, const em_array_list *l);

    /* attention without the (Lq, Lk) matrix (FlashAttention's tiles and online softmax):
     * q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv), out (B, H, Lq, Dv), one float dtype,
     * any strides with the last dim contiguous; mask NULL or (B, H, Lq, Lk) with 0-strided
     * broadcast dims, bool (false drops the key) or float (added to the score); lse (B, H, Lq)
     * contiguous, f64 for f64 and f32 otherwise: each row's log-sum-exp of scores, -inf (and an
     * out row of zeros) where a row sees no key. grad reads lse and out, overwrites gq, gk, gv
     * (q's, k's, v's shapes and strides) from gout (out's). */
    int (*attention)(const em_attention_params *p, const em_arr *q, const em_arr *k,
                     const em_arr *v, const em_arr *mask, const em_arr *out, const em_arr *lse);
    int (*attention_grad)(const em_attention_params *p, const em_arr *q, const em_arr *k,
                          const em_arr *v, const em_arr *mask, const em_arr *out,
                          const em_arr *lse, const em_arr *gout, const em_arr *gq,
                          const em_arr *gk, const em_arr *gv);

    /* dynamic int8 linear (PyTorch's quantize_dynamic): w (n, k) s8 is packed once into
     * int8_packed_size(n, k) bytes of the backend's layout; each call quantizes x per tensor
     * to unsigned 7-bit values from its range, accumulates in int32 and writes f32
     * y (m, n) = dequantized product + bias; w_scale has n_scales = 1 or n entries */
    int64_t (*int8_packed_size)(int64_t n, int64_t k);
    int (*int8_pack)(int64_t n, int64_t k, const int8_t *w, void *packed);
    int (*qlinear_dynamic)(int64_t m, int64_t n, int64_t k, const float *x /* (m, k) */,
                           const void *packed, const float *w_scale, int64_t n_scales,
                           const float *bias /* (n) or NULL */, float *y /* (m, n) */);
    /* static int8 (calibrated): as qlinear_dynamic, but x is quantized with the fixed x_scale
     * and x_zero_point, and relu clamps y at 0 (a fused ReLU) */
    int (*qlinear_static)(int64_t m, int64_t n, int64_t k, const float *x /* (m, k) */,
                          float x_scale, int32_t x_zero_point, const void *packed,
                          const float *w_scale, int64_t n_scales,
                          const float *bias /* (n) or NULL */, bool relu, float *y /* (m, n) */);
    /* static int8 conv2d (groups 1): w (C_out, C_in * KH * KW) s8 packed as above; x quantized
     * with x_scale and x_zero_point, padding taking the zero point's value; relu as above */
    int (*qconv2d_static)(const em_conv2d_shape *s, const float *x /* (N, C_in, H, W) */,
                          float x_scale, int32_t x_zero_point, const void *packed,
                          const float *w_scale, int64_t n_scales,
                          const float *bias /* (C_out) or NULL */, bool relu,
                          float *y /* (N, C_out, H_out, W_out) */);

    /* mixed precision and stability guards, one launch over the arrays of l.data (f32 or f64) */
    /* every array *= inv_scale in place; *found_inf (one f32 in this device's memory) is set to
     * 1 when an element was inf or NaN and left as it is otherwise */
    int (*unscale_check)(em_dtype dt, double inv_scale, const em_array_list *l, float *found_inf);
    /* out[i] (l.n f64 in this device's memory) = sum of |x|^p over array i for p > 0, or max |x|
     * for p = inf; an inf or NaN element makes it inf or NaN */
    int (*norm_pow_sum)(em_dtype dt, double p, const em_array_list *l, double *out);
    /* Optional (NULL: clipping reads the norm back and scales each array on the host's word):
     * clipping by a total norm without the host. total = the n_sums f64 sums (norm_pow_sum's
     * out, this device's memory) added in order, then ^(1/p), or their max for p = inf (as
     * em_grad_norm_from_sums); every array of l (f32 or f64) *= coef = max_norm / (total +
     * 1e-6) where coef < 1 or is NaN, as the MUL_SCALAR op would; *total (one f64 in this
     * device's memory) = total. l holds at least one array. */
    int (*clip_grad_norm)(em_dtype dt, double p, double max_norm, const double *sums,
                          int n_sums, const em_array_list *l, double *total);
} em_backend;

/* ---- the registry (backend/backend.c) ---- */

/* The backend of a device, or NULL when ember was built without it or no such device is present.
 * The first call discovers every backend this build holds (backend_list.c, made by CMake). */
const em_backend *em_backend_get(em_device dev);
/* Called by a backend's discovery function when its device is usable. */
void em_backend_register(const em_backend *be);

/* ---- scratch memory for kernels ----
 * Kernels that need scratch memory take it here, so that it goes through the device's accounting
 * allocator (tensor/memory.c installs it) and scratch bytes show in the memory statistics. NULL
 * when out of memory or over the memory budget. Free with the size that was asked for. */
void *em_workspace_alloc(const em_backend *be, size_t nbytes);
void em_workspace_free(const em_backend *be, void *ptr, size_t nbytes);

typedef struct {
    void *(*alloc)(em_device device, size_t nbytes);
    void (*free)(em_device device, void *ptr, size_t nbytes);
} em_workspace_allocator;
/* Installed once by the allocator; until then workspace comes from the backend's alloc. */
void em_workspace_set_allocator(const em_workspace_allocator *a);

#endif
