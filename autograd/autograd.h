/* Differentiable ops and the define-by-run tape. Each op checks its arguments, computes its
 * output through the device's backend and, when grad mode is on and an input requires grad,
 * records a node whose backward rule em_backward() runs in reverse topological order. */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include "tensor/tensor.h"

/* ---- the tape ---- */
em_status em_backward(em_tensor *loss);                 /* loss must hold one element */
em_status em_backward_grad(em_tensor *t, em_tensor *grad); /* seed with grad (t's shape) */
em_tensor *em_requires_grad_(em_tensor *t, bool requires_grad); /* on a leaf; returns t */
em_tensor *em_retain_grad(em_tensor *t);  /* keep a non-leaf's grad after backward; returns t */
em_tensor *em_detach(const em_tensor *t); /* same storage, outside the graph */
bool em_grad_enabled(void);
bool em_set_grad_enabled(bool enabled);   /* returns the previous mode; per thread */
void em_zero_grad(em_tensor *t);          /* drops t->grad */

/* ---- views (share storage with their input) ---- */
em_tensor *em_reshape(const em_tensor *t, em_shape shape); /* one dim may be -1; copies if needed */
em_tensor *em_view(const em_tensor *t, em_shape shape);    /* never copies; error if impossible */
em_tensor *em_flatten(const em_tensor *t, int start_dim, int end_dim);
em_tensor *em_permute(const em_tensor *t, const int *dims); /* dims has t->ndim entries */
em_tensor *em_transpose(const em_tensor *t, int dim0, int dim1);
em_tensor *em_narrow(const em_tensor *t, int dim, int64_t start, int64_t length);
em_tensor *em_slice(const em_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
em_tensor *em_select(const em_tensor *t, int dim, int64_t index); /* drops dim */
em_tensor *em_expand(const em_tensor *t, em_shape shape); /* -1 keeps a dim */
em_tensor *em_squeeze(const em_tensor *t, int dim);       /* dim of size 1 */
em_tensor *em_unsqueeze(const em_tensor *t, int dim);
em_tensor *em_contiguous(const em_tensor *t);             /* t itself (retained) when contiguous */
em_tensor *em_clone(const em_tensor *t);
em_tensor *em_to_dtype(const em_tensor *t, em_dtype dtype); /* grad flows back in t's dtype */

/* ---- elementwise, broadcasting ---- */
em_tensor *em_add(const em_tensor *a, const em_tensor *b);
em_tensor *em_sub(const em_tensor *a, const em_tensor *b);
em_tensor *em_mul(const em_tensor *a, const em_tensor *b);
em_tensor *em_div(const em_tensor *a, const em_tensor *b);
em_tensor *em_pow(const em_tensor *a, const em_tensor *b);
em_tensor *em_maximum(const em_tensor *a, const em_tensor *b);
em_tensor *em_minimum(const em_tensor *a, const em_tensor *b);
em_tensor *em_add_scalar(const em_tensor *t, double s);
em_tensor *em_mul_scalar(const em_tensor *t, double s);
em_tensor *em_pow_scalar(const em_tensor *t, double p);
em_tensor *em_neg(const em_tensor *t);
em_tensor *em_abs(const em_tensor *t);
em_tensor *em_sign(const em_tensor *t);
em_tensor *em_exp(const em_tensor *t);
em_tensor *em_log(const em_tensor *t);
em_tensor *em_log1p(const em_tensor *t);
em_tensor *em_sqrt(const em_tensor *t);
em_tensor *em_rsqrt(const em_tensor *t);
em_tensor *em_square(const em_tensor *t);
em_tensor *em_reciprocal(const em_tensor *t);
em_tensor *em_sin(const em_tensor *t);
em_tensor *em_cos(const em_tensor *t);
em_tensor *em_tanh(const em_tensor *t);
em_tensor *em_sigmoid(const em_tensor *t);
em_tensor *em_relu(const em_tensor *t);
em_tensor *em_leaky_relu(const em_tensor *t, double negative_slope);
em_tensor *em_gelu(const em_tensor *t, bool tanh_approximation);
em_tensor *em_silu(const em_tensor *t);
em_tensor *em_floor(const em_tensor *t);
em_tensor *em_ceil(const em_tensor *t);
em_tensor *em_round(const em_tensor *t);
em_tensor *em_clamp(const em_tensor *t, double min, double max); /* +-INFINITY for no bound */
em_tensor *em_where(const em_tensor *cond, const em_tensor *a, const em_tensor *b);
/* comparisons: bool result, not differentiable */
em_tensor *em_eq(const em_tensor *a, const em_tensor *b);
em_tensor *em_ne(const em_tensor *a, const em_tensor *b);
em_tensor *em_lt(const em_tensor *a, const em_tensor *b);
em_tensor *em_le(const em_tensor *a, const em_tensor *b);
em_tensor *em_gt(const em_tensor *a, const em_tensor *b);
em_tensor *em_ge(const em_tensor *a, const em_tensor *b);

/* ---- reductions: dims (n_dims entries, negative from the end); n_dims 0 reduces all ---- */
em_tensor *em_sum(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_mean(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_amax(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_amin(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_var(const em_tensor *t, const int *dims, int n_dims, int correction, bool keepdim);
em_tensor *em_argmax(const em_tensor *t, int dim, bool keepdim); /* i64, not differentiable */
em_tensor *em_argmin(const em_tensor *t, int dim, bool keepdim);
em_tensor *em_sum_all(const em_tensor *t);  /* 0-d */
em_tensor *em_mean_all(const em_tensor *t); /* 0-d */

/* ---- linear algebra ---- */
/* PyTorch's matmul: 1-D and 2-D operands, and batched with broadcast batch dims */
em_tensor *em_matmul(const em_tensor *a, const em_tensor *b);
em_tensor *em_bmm(const em_tensor *a, const em_tensor *b); /* (B,M,K) x (B,K,N) */
/* y = x @ w^T + b: x (*, in), w (out, in), b (out) or NULL */
em_tensor *em_linear(const em_tensor *x, const em_tensor *w, const em_tensor *b);

/* ---- convolution and pooling (NCHW); zero fields take PyTorch's defaults ---- */
typedef struct {
    int64_t stride[2];   /* default 1 */
    int64_t padding[2];  /* default 0 */
    int64_t dilation[2]; /* default 1 */
    int64_t groups;      /* default 1 */
} em_conv2d_opts;
/* x (N, C_in, H, W), w (C_out, C_in/groups, KH, KW), b (C_out) or NULL */
em_tensor *em_conv2d(const em_tensor *x, const em_tensor *w, const em_tensor *b, em_conv2d_opts o);

typedef struct {
    int64_t kernel[2];  /* required */
    int64_t stride[2];  /* default: kernel */
    int64_t padding[2]; /* default 0 */
    bool exclude_pad;   /* avg_pool2d: divide by in-bounds elements only (count_include_pad=False) */
} em_pool2d_opts;
em_tensor *em_max_pool2d(const em_tensor *x, em_pool2d_opts o);
em_tensor *em_avg_pool2d(const em_tensor *x, em_pool2d_opts o);

/* ---- softmax family ---- */
em_tensor *em_softmax(const em_tensor *t, int dim);
em_tensor *em_log_softmax(const em_tensor *t, int dim);

/* ---- joining and indexing ---- */
em_tensor *em_cat(em_tensor *const *ts, int n, int dim);
em_tensor *em_stack(em_tensor *const *ts, int n, int dim);
/* splits into pieces of split_size along dim (the last may be smaller); writes up to max_out
 * tensors to out and returns how many there are, or -1 on error */
int em_split(const em_tensor *t, int64_t split_size, int dim, em_tensor **out, int max_out);
em_tensor *em_index_select(const em_tensor *t, int dim, const em_tensor *index /* i64 (n) */);
em_tensor *em_gather(const em_tensor *t, int dim, const em_tensor *index /* i64 */);
/* weight (num, dim), index i64 (*) -> (*, dim) */
em_tensor *em_embedding(const em_tensor *weight, const em_tensor *index);
em_tensor *em_one_hot(const em_tensor *index /* i64 */, int64_t num_classes); /* i64 */

#endif
