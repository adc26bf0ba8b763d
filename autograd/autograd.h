/* Differentiable ops and the define-by-run tape. Each op checks its arguments, computes its
 * output through the device's backend and, when grad mode is on and an input requires grad,
 * records a node whose backward rule em_backward() runs in reverse topological order. */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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
em_tensor *em_softsign(const em_tensor *t); /* x / (1 + |x|) */
/* PyTorch's activations of the same names, their gradients at the kinks included; each is one
 * formula and derivative in backend/unary_formula_impl_internal.h that the CPU and CUDA unary
 * kernels run: */
em_tensor *em_mish(const em_tensor *t); /* x tanh(softplus(x)) */
/* log1p(exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch: 1, 20) */
em_tensor *em_softplus(const em_tensor *t, double beta, double threshold);
/* clamp to [min_val, max_val] (min_val < max_val; PyTorch: -1, 1), but with gradient 0 at the
 * bounds themselves (clamp passes it there) */
em_tensor *em_hardtanh(const em_tensor *t, double min_val, double max_val);
em_tensor *em_elu(const em_tensor *t, double alpha);  /* x > 0 ? x : alpha (exp(x) - 1) */
em_tensor *em_selu(const em_tensor *t);               /* elu with PyTorch's alpha, times scale */
em_tensor *em_hardswish(const em_tensor *t);          /* x relu6(x + 3) / 6 */
em_tensor *em_logsigmoid(const em_tensor *t);         /* log(sigmoid(x)), stable for any x */
em_tensor *em_floor(const em_tensor *t);
em_tensor *em_ceil(const em_tensor *t);
em_tensor *em_round(const em_tensor *t);
/* min(max(t, min), max): +-INFINITY for no bound. The gradient passes where min < x < max and
 * is 0 at the bounds, as PyTorch 2.x's clamp (1.13's passed there too) and hardtanh's */
em_tensor *em_clamp(const em_tensor *t, double min, double max);
/* clamp with tensor bounds (either NULL for none) broadcast with t, in t's dtype -> the three's
 * broadcast shape; where min > max the result is max, as PyTorch's. Gradients as PyTorch 2.x's:
 * with min < max, t where min < t < max, a bound where t lies beyond it, and half each to t and
 * the bound t equals; with min == max, t where it equals them, else the bound it lies beyond;
 * with min > max, max. Runs on the maximum/minimum kernels, its backward on where and the
 * comparisons (CPU and CUDA). */
em_tensor *em_clamp_tensor(const em_tensor *t, const em_tensor *min, const em_tensor *max);
em_tensor *em_where(const em_tensor *cond, const em_tensor *a, const em_tensor *b);
/* comparisons: bool result, not differentiable */
em_tensor *em_eq(const em_tensor *a, const em_tensor *b);
em_tensor *em_ne(const em_tensor *a, const em_tensor *b);
em_tensor *em_lt(const em_tensor *a, const em_tensor *b);
em_tensor *em_le(const em_tensor *a, const em_tensor *b);
em_tensor *em_gt(const em_tensor *a, const em_tensor *b);
em_tensor *em_ge(const em_tensor *a, const em_tensor *b);

/* In place, outside the graph, as torch.Tensor.lerp_: t += weight (end - t), with PyTorch's
 * formula (end - (end - t) (1 - weight) from weight 0.5 up, so weight 1 gives end exactly); end
 * (t's floating dtype and device) broadcasts to t. An exponential moving average's update. */
em_status em_lerp_(em_tensor *t, const em_tensor *end, double weight);

/* ---- reductions: dims (n_dims entries, negative from the end); n_dims 0 reduces all ---- */
em_tensor *em_sum(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_mean(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_amax(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_amin(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
em_tensor *em_var(const em_tensor *t, const int *dims, int n_dims, int correction, bool keepdim);
/* std, prod: the reduce kernel (CPU and CUDA); logsumexp and vector_norm: composed of ops with
 * both; cumsum, cumprod: the cumulative kernel (both). */
/* sqrt(var) (correction 1: unbiased, 0: biased), gradient 0 where it is 0, as PyTorch's */
em_tensor *em_std(const em_tensor *t, const int *dims, int n_dims, int correction, bool keepdim);
/* integers give i64; gradient PyTorch's, exact where an element is 0 (no division by it) */
em_tensor *em_prod(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
/* log(sum(exp(t))) over dims without overflow (float t; -inf where every element is -inf) */
em_tensor *em_logsumexp(const em_tensor *t, const int *dims, int n_dims, bool keepdim);
/* running sum / product along dim (float t; t's shape), accumulated in double as PyTorch's CPU
 * does; cumprod's gradient is exact where t holds zeros */
em_tensor *em_cumsum(const em_tensor *t, int dim);
em_tensor *em_cumprod(const em_tensor *t, int dim);
/* PyTorch's linalg.vector_norm: ord 2 (Euclidean), 1, inf (max |x|), -inf (min |x|), 0 (count
 * of non-zeros) or any p > 0 ((sum |x|^p)^(1/p)); float t; gradient 0 where the norm is 0 and
 * shared evenly between ties for +-inf, as PyTorch's */
em_tensor *em_vector_norm(const em_tensor *t, double ord, const int *dims, int n_dims,
                          bool keepdim);
em_tensor *em_argmax(const em_tensor *t, int dim, bool keepdim); /* i64, not differentiable */
em_tensor *em_argmin(const em_tensor *t, int dim, bool keepdim);
em_tensor *em_sum_all(const em_tensor *t);  /* 0-d */
em_tensor *em_mean_all(const em_tensor *t); /* 0-d */

/* ---- linear algebra ---- */
/* PyTorch's matmul: 1-D and 2-D operands, and batched with broadcast batch dims */
em_tensor *em_matmul(const em_tensor *a, const em_tensor *b);
em_tensor *em_bmm(const em_tensor *a, const em_tensor *b); /* (B,M,K) x (B,K,N) */
/* PyTorch's einsum: "ij,jk->ik", "bhqd,bhkd->bhqk", "i,j->ij", "ij->ji", "bij->bj", "ii->i"
 * (a repeated subscript takes the diagonal), "...ij,...jk" ("..." broadcasts, right-aligned),
 * any number of operands of one dtype and device, spaces ignored. Without "->" the output is
 * "..." then the subscripts used once, A-Z before a-z (PyTorch's order). Subscripts of one
 * name broadcast (size 1 with any). Operands are contracted left to right, each pair as one
 * em_bmm after permutes and reshapes; subscripts no later operand nor the output holds are
 * summed first. Composed of ops with CPU and CUDA kernels. A malformed equation, or one that
 * does not fit the operands, is an error naming the equation and what is wrong. */
em_tensor *em_einsum(const char *equation, em_tensor *const *operands, int n);
em_tensor *em_outer(const em_tensor *a, const em_tensor *b); /* (n) x (m) -> (n, m) */
/* beta input + alpha mat1 @ mat2: input broadcasts to (n, p), mat1 (n, m), mat2 (m, p); with
 * beta 0 input is left out (its NaN and Inf do not reach the result), as PyTorch's. PyTorch's
 * defaults: beta 1, alpha 1. Composed of matmul, mul and add (CPU and CUDA kernels). */
em_tensor *em_addmm(const em_tensor *input, const em_tensor *mat1, const em_tensor *mat2,
                    double beta, double alpha);
/* addmm batched: input broadcasts to (B, n, p), batch1 (B, n, m), batch2 (B, m, p) */
em_tensor *em_baddbmm(const em_tensor *input, const em_tensor *batch1, const em_tensor *batch2,
                      double beta, double alpha);
/* y = x @ w^T + b: x (*, in), w (out, in), b (out) or NULL */
em_tensor *em_linear(const em_tensor *x, const em_tensor *w, const em_tensor *b);
/* relu(em_linear(x, w, b)) as one op, equal to the two: the ReLU runs in place on the product's
 * output (no second tensor, no second node), its backward masks the gradient by that output */
em_tensor *em_linear_relu(const em_tensor *x, const em_tensor *w, const em_tensor *b);

/* ---- convolution and pooling (NCHW); zero fields take PyTorch's defaults ---- */
/* padding values beside sizes: PyTorch's padding="same" (stride 1 only: dilation (k - 1) in
 * all per dim, half before, the odd one after: the output keeps the input's size) and "valid"
 * (none, as 0). em_conv2d takes them as padding[0] (padding[1] 0 or the same constant). */
#define EM_PADDING_SAME (-1)
#define EM_PADDING_VALID (-2)
typedef struct {
    int64_t stride[2];   /* default 1 */
    int64_t padding[2];  /* default 0; or EM_PADDING_SAME / EM_PADDING_VALID */
    int64_t dilation[2]; /* default 1 */
    int64_t groups;      /* default 1 */
} em_conv2d_opts;
/* x (N, C_in, H, W), w (C_out, C_in/groups, KH, KW), b (C_out) or NULL */
em_tensor *em_conv2d(const em_tensor *x, const em_tensor *w, const em_tensor *b, em_conv2d_opts o);

typedef struct {
    int64_t stride, padding, dilation, groups; /* zero takes the default (1, 0, 1, 1) */
} em_conv1d_opts; /* padding may be EM_PADDING_SAME or EM_PADDING_VALID */
/* x (N, C_in, L), w (C_out, C_in/groups, K), b (C_out) or NULL -> (N, C_out, L_out) */
em_tensor *em_conv1d(const em_tensor *x, const em_tensor *w, const em_tensor *b, em_conv1d_opts o);

typedef struct {
    int64_t stride[2];         /* default 1 */
    int64_t padding[2];        /* default 0: taken off each side of the output */
    int64_t output_padding[2]; /* default 0: added at the end; below stride or dilation */
    int64_t dilation[2];       /* default 1 */
    int64_t groups;            /* default 1 */
} em_conv_transpose2d_opts;
/* The gradient of em_conv2d with respect to its input, as torch.nn.functional.conv_transpose2d:
 * x (N, C_in, H, W), w (C_in, C_out/groups, KH, KW), b (C_out) or NULL -> (N, C_out, H_out,
 * W_out), H_out = (H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1. */
em_tensor *em_conv_transpose2d(const em_tensor *x, const em_tensor *w, const em_tensor *b,
                               em_conv_transpose2d_opts o);

typedef struct {
    int64_t kernel[2];  /* required */
    int64_t stride[2];  /* default: kernel */
    int64_t padding[2]; /* default 0; at most half the kernel */
    int64_t dilation[2]; /* max_pool2d: taps this far apart, default 1 (avg_pool2d has none) */
    bool exclude_pad;   /* avg_pool2d: divide by in-bounds elements only (count_include_pad=False) */
    bool ceil_mode;     /* PyTorch's ceil_mode: a last, partial window where one starts inside */
} em_pool2d_opts;
em_tensor *em_max_pool2d(const em_tensor *x, em_pool2d_opts o);
em_tensor *em_avg_pool2d(const em_tensor *x, em_pool2d_opts o);
/* max_pool2d(relu(x)) as one op: the same values and gradients, ReLU on the pooled values */
em_tensor *em_relu_max_pool2d(const em_tensor *x, em_pool2d_opts o);
/* -log_softmax(x)[i][target[i]] for each row of logits x (N, C) against i64 class indices target
 * (N): the values and gradient of em_log_softmax then a gather, as one op that keeps each row's
 * max and log-sum rather than the log-probabilities (the two ops where the backend has no such
 * kernel). em_cross_entropy runs on it when no class weights, smoothing or ignored index apply. */
em_tensor *em_cross_entropy_rows(const em_tensor *x, const em_tensor *target);
/* -(t log x + (1 - t) log(1 - x)) per element of probabilities x and targets t (one shape, float),
 * each log clamped at -100, with PyTorch's gradient g (x - t) / max(x (1 - x), 1e-12) (finite at
 * 0 and 1; 1e-12 as a float, 9.999999960041972e-13, in f64 too, as PyTorch's epsilon is); x
 * outside [0, 1] gives NaN. em_binary_cross_entropy (nn/nn.h) weights and reduces it. */
em_tensor *em_binary_cross_entropy_elementwise(const em_tensor *input, const em_tensor *target);

/* Layer normalisation of each row of x (R, C), C > 0, with weight and bias (C) or NULL:
 * (x - mean) / sqrt(var + eps) * weight + bias, the variance biased, as one op whose backward
 * gives x, weight and bias their gradients from each row's mean and rstd (f32 and f64 where the
 * backend has the kernel; mean, var and elementwise ops otherwise). Under autocast it runs in
 * f32. em_layer_norm runs on it. */
em_tensor *em_layer_norm_rows(const em_tensor *x, const em_tensor *weight, const em_tensor *bias,
                              double eps);

/* ---- softmax family ---- */
em_tensor *em_softmax(const em_tensor *t, int dim);
em_tensor *em_log_softmax(const em_tensor *t, int dim);

/* ---- attention ----
 * PyTorch's scaled_dot_product_attention: q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv)
 * -> (B, H, Lq, Dv) = dropout(softmax(q k^T * scale + mask)) v, fused: neither forward nor
 * backward holds the (Lq, Lk) weights (the backend recomputes them from each row's saved
 * log-sum-exp). A row that sees no key gives zeros (the composition would give NaN). Under
 * autocast it runs in the region's low dtype. */
typedef struct {
    const em_tensor *attn_mask; /* NULL, or broadcastable to (B, H, Lq, Lk): bool (true: the key
                                   takes part) or floating (added to the scores); a floating
                                   mask that requires grad (a learned bias) gets its gradient,
                                   summed over its broadcast dims: the op then runs composed of
                                   matmul and softmax, holding the (Lq, Lk) weights, as
                                   PyTorch's math path */
    double dropout_p;           /* on the weights, in [0, 1); give 0 in eval */
    bool is_causal;             /* query i sees keys j <= i (top-left); excludes attn_mask */
    double scale;               /* 0: 1 / sqrt(D) */
    em_generator *gen;          /* dropout's generator; NULL: the global one (em_manual_seed) */
} em_sdpa_opts;
em_tensor *em_scaled_dot_product_attention(const em_tensor *q, const em_tensor *k,
                                           const em_tensor *v, em_sdpa_opts o);
/* Self-attention over a fused in-projection qkv (B, T, 3E), E = heads * D: q, k and v are its
 * three E-wide column blocks split into heads (views, no copies), and backward writes their
 * gradients into one (B, T, 3E) tensor rather than three that are then scattered and summed.
 * The values and gradients of em_scaled_dot_product_attention on those views; (B, H, T, D). */
em_tensor *em_self_attention_packed(const em_tensor *qkv, int64_t heads, em_sdpa_opts o);

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
/* em_embedding whose row padding_idx (in [-num, num), negative counting from the end) gets no
 * gradient, as PyTorch's embedding(..., padding_idx); its values are looked up as any row's */
em_tensor *em_embedding_padded(const em_tensor *weight, const em_tensor *index,
                               int64_t padding_idx);
em_tensor *em_one_hot(const em_tensor *index /* i64 */, int64_t num_classes); /* i64 */

/* ---- padding and resampling (PyTorch 2.x's F.pad and F.interpolate) ----
 * Composed of index_select, cat and elementwise ops, so they run on the CPU and CUDA kernels
 * those have, and their gradients sum into each source position. */
typedef enum { EM_PAD_CONSTANT, EM_PAD_REFLECT, EM_PAD_REPLICATE } em_pad_mode;
/* x padded by pads[0] before and pads[1] after its last dim, pads[2], pads[3] around the dim
 * before it, ... (n_pads even, at most 2 x->ndim). Constant: with value, on any dims; a
 * negative pad crops. Reflect (pad < the dim's size) and replicate: the last 1, 2 or 3 dims of
 * an input with channels (and a batch) in front, i.e. n_pads 2 on 2-d or 3-d x, 4 on 3-d or 4-d,
 * 6 on 4-d or 5-d; value must be 0. */
em_tensor *em_pad(const em_tensor *x, const int64_t *pads, int n_pads, em_pad_mode mode,
                  double value);
typedef enum { EM_INTERP_NEAREST, EM_INTERP_LINEAR, EM_INTERP_BILINEAR } em_interp_mode;
typedef struct {
    em_interp_mode mode;         /* nearest (PyTorch's default, floor(dst * scale)); linear for
                                  * (N, C, L), bilinear for (N, C, H, W) */
    int64_t size[2];             /* output (H, W) or (L); a second 0 repeats the first */
    double scale_factor[2];      /* or: output floor(in * scale_factor); a second 0 repeats */
    bool align_corners;          /* linear modes: corner centres map onto corner centres */
    bool recompute_scale_factor; /* map positions by in / out, not by 1 / scale_factor */
} em_interpolate_opts;
/* x (N, C, L) or (N, C, H, W) resampled to the size o gives, as F.interpolate. */
em_tensor *em_interpolate(const em_tensor *x, em_interpolate_opts o);
/* ---- writing at indices (PyTorch's out-of-place forms: the result is a new tensor) ----
 * scatter: self with out[i][index[i][j]] = src[i][j] along dim (3-d: out[i][index[i][j][k]][k]
 * for dim 1, ...); index is i64 with self's ndim, no larger than src in any dim nor than self
 * outside dim, entries in [0, self.size(dim)). Where several entries of index meet one element,
 * ember keeps the last along dim (deterministic on every device; PyTorch leaves it undefined).
 * Gradients as PyTorch's: self's is zero at the written positions, src's is the gradient
 * gathered at index (each duplicate gets it). CPU and CUDA kernels (backend scatter). */
em_tensor *em_scatter(const em_tensor *self, int dim, const em_tensor *index /* i64 */,
                      const em_tensor *src);
/* scatter with every written element value (no src) */
em_tensor *em_scatter_value(const em_tensor *self, int dim, const em_tensor *index /* i64 */,
                            double value);
/* out[i][index[i][j]] += src[i][j]: duplicates add up, in index order (deterministic); float
 * dtypes. self's gradient is the gradient, src's the gradient gathered at index. CPU and CUDA
 * kernels (backend scatter_add). */
em_tensor *em_scatter_add(const em_tensor *self, int dim, const em_tensor *index /* i64 */,
                          const em_tensor *src);
/* self with value at every position whose coordinate along dim is in index (i64 (n) or (),
 * entries in [-size, size), negative counting from the end); gradient zero there. Indices are
 * checked on the host (on CUDA a copy back), then written with the scatter kernel. */
em_tensor *em_index_fill(const em_tensor *self, int dim, const em_tensor *index /* i64 */,
                         double value);
/* PyTorch's index_put(self, (indices[0], ..), values, accumulate): the n (1 to self's ndim) i64
 * index tensors broadcast together to shape B and pick positions self[i0, .., i(n-1), ...]
 * (entries in [-size, size) of their dim); values (self's dtype) broadcasts to the indexed
 * shape (B, self's dims from n on) and replaces them, or is added to them when accumulate
 * (duplicates then add up; float dtypes). Without accumulate, where positions repeat the last
 * in B's row-major order wins (deterministic; PyTorch leaves it undefined). Gradients: self's
 * is zero at the written positions (the gradient itself when accumulate); values' is the
 * gradient gathered at the positions, summed over its broadcast dims. Indices are checked on the
 * host, then the scatter and scatter_add kernels write (CPU and CUDA). */
em_tensor *em_index_put(const em_tensor *self, em_tensor *const *indices, int n,
                        const em_tensor *values, bool accumulate);

/* ---- choosing by value, and sampling ---- */
/* The k largest (or smallest) entries along dim, sorted, as PyTorch's topk (NaN counts as the
 * largest): *values (differentiable) and *indices (i64; NULL: not wanted) get t's shape with k
 * along dim. Among equal values (-0 equals +0; NaNs are equal) ember puts the lower index first,
 * on every device and every run, since it ranks on the host; PyTorch promises no order among
 * ties, so its indices may differ there (its values do not). */
em_status em_topk(const em_tensor *t, int64_t k, int dim, bool largest, em_tensor **values,
                  em_tensor **indices);
/* num_samples class indices (i64) drawn from each row of probs (C) or (N, C) (weights, finite,
 * >= 0, need not sum to 1) -> (num_samples) or (N, num_samples); without replacement a class is
 * drawn at most once per row. Uniforms come from gen (NULL: the global generator). */
em_tensor *em_multinomial(const em_tensor *probs, int64_t num_samples, bool replacement,
                          em_generator *gen);
typedef struct {
    double temperature; /* logits are divided by it; 0: 1 */
    int64_t top_k;      /* draw among the k largest logits; 0: all (1: greedy) */
} em_sample_opts;
/* One token per row of logits (V) or (N, V) -> i64 () or (N): softmax(logits / temperature)
 * over the top_k largest, sampled with em_multinomial. */
em_tensor *em_sample_logits(const em_tensor *logits, em_sample_opts o, em_generator *gen);

/* ---- masking (gradients flow to the kept elements) ---- */
em_tensor *em_masked_fill(const em_tensor *t, const em_tensor *mask /* bool, broadcasts to t */,
                          double value);
/* t (*, M, N) with (i, j) kept when j - i <= diagonal (tril) or >= diagonal (triu), else 0 */
em_tensor *em_tril(const em_tensor *t, int64_t diagonal);
em_tensor *em_triu(const em_tensor *t, int64_t diagonal);

/* ---- mixed precision: autocast regions (per thread, nestable) ----
 * Inside a region begun with a low dtype (EM_F16 or EM_BF16), PyTorch's autocast policy:
 * matmul, bmm, einsum, addmm, baddbmm, linear, conv2d and conv_transpose2d cast their f32 inputs
 * to it and run there (the backend accumulates in f32), giving low-precision outputs; softmax,
 * log_softmax, sum, mean, var, exp, log, log1p, pow, pow_scalar, rsqrt and reciprocal cast
 * f16/bf16 inputs up and run in f32 (so do the losses and norms built on them); the ops of
 * several inputs otherwise (binary ops, where, cat, stack, outer, scatter, scatter_add, index_put)
 * promote float dtypes to the widest (f16 with bf16: f32), as PyTorch's cat and stack do; outside
 * a region mixed dtypes stay an error naming the op and the two tensors ("em_cat: dtypes differ:
 * tensor 0 (bf16 [2,3]) and tensor 1 (f32 [1,3])"). In every op a 0-d tensor takes the others'
 * dtype. The casts are
 * em_to_dtype ops, so an f32 leaf (a master weight) gets its gradient in f32; each op's backward
 * runs in the dtype its forward ran in. Backward itself runs with autocast off. EM_F32 begins a
 * region with autocast off (a hole in an enclosing region). Every begin needs its end. */
em_status em_autocast_begin(em_dtype low);
em_status em_autocast_end(void);   /* EM_ERR_STATE when no region is open */
em_dtype em_autocast_dtype(void);  /* the innermost region's dtype; EM_F32 when autocast is off */

/* ---- gradient checkpointing ----
 * em_checkpoint runs fn(ctx, inputs, n) with grad mode off, so the activations inside it are
 * freed as they go, and records one node on its output. That node's backward re-runs fn with
 * grad mode on over detached copies of the inputs, with the global generator (em_manual_seed)
 * and the autocast dtype as they were in the forward (so dropout masks match), backpropagates
 * through the recomputed graph (parameters used inside fn get their grads there) and hands the
 * inputs their grads. fn must return a new reference and compute the same thing both times; ctx
 * must stay valid until backward. With grad mode off it just calls fn. Generators other than
 * the global one are not replayed. */
typedef em_tensor *(*em_checkpoint_fn)(void *ctx, em_tensor *const *inputs, int n);
em_tensor *em_checkpoint(em_checkpoint_fn fn, void *ctx, em_tensor *const *inputs, int n);

/* ---- gradient-ready hooks (data-parallel training) ----
 * grad_ready(ctx, leaf) runs during backward as soon as the last node of the graph that consumes
 * one of the registered leaves has added its gradient in: leaf->grad then holds its value for
 * this pass (added to what earlier passes left there; NULL when no gradient reached it). It runs
 * once per backward pass in which the leaf is part of the graph (a checkpointed segment's
 * recomputation is a pass of its own). backward_done(ctx, status), when set, runs when the
 * outermost em_backward that reached one of the leaves ends, with its status so far; what it
 * returns becomes em_backward's status when that was EM_OK (its error message set). Hooks run on
 * the thread running backward, which must not be the same leaf's backward on another thread.
 * Register and remove hooks only while no backward runs; leaves must outlive their hooks. */
typedef struct {
    void (*grad_ready)(void *ctx, em_tensor *leaf);
    em_status (*backward_done)(void *ctx, em_status status); /* or NULL */
    void *ctx;                                          /* names the set for removal */
} em_grad_hooks;
em_status em_grad_hooks_add(em_tensor *const *leaves, int n, em_grad_hooks hooks);
void em_grad_hooks_remove(void *ctx); /* every set registered with this ctx */

/* ---- anomaly mode (per thread) ----
 * When on, every op's floating output is checked for NaN/Inf in forward and every gradient a
 * backward rule produces; the first offender fails with EM_ERR_NUMERIC, e.g.
 * "anomaly: em_log produced NaN in forward; inputs [4,3]" (the op returns NULL) or
 * "anomaly: backward of div produced Inf; inputs [4,3] x [4,3]" (em_backward returns it).
 * Slow (each output is scanned): a debugging aid. */
bool em_set_anomaly_mode(bool on); /* returns the previous mode */
bool em_anomaly_mode(void);

#ifdef __cplusplus
}
#endif

#endif
