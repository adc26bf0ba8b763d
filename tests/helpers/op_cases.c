/* The op cases: every differentiable op, every backend kernel it reaches (fill, copy and casts,
 * unary and its gradient, binary with broadcast, where, reductions, RNG, GEMM, conv2d, pooling,
 * softmax, attention, index kernels), views, and the losses and norms built on them, on small
 * shapes, contiguous and not; the layout flags run a case again on permuted, sliced or broadcast
 * input views (helpers/op_cases.h). */
#include <math.h>

#include "helpers/op_cases.h"

/* t on the case's device */
static em_tensor *on(em_tensor *t, em_device d)
{
    return d == EM_CPU ? t : em_to_device(t, d);
}

/* ---- elementwise ---- */

static em_tensor *c_neg(em_tensor *const *x, em_device d) { (void)d; return em_neg(x[0]); }
static em_tensor *c_abs(em_tensor *const *x, em_device d) { (void)d; return em_abs(x[0]); }
static em_tensor *c_sign(em_tensor *const *x, em_device d) { (void)d; return em_sign(x[0]); }
static em_tensor *c_exp(em_tensor *const *x, em_device d) { (void)d; return em_exp(x[0]); }
static em_tensor *c_log(em_tensor *const *x, em_device d) { (void)d; return em_log(x[0]); }
static em_tensor *c_log1p(em_tensor *const *x, em_device d) { (void)d; return em_log1p(x[0]); }
static em_tensor *c_sqrt(em_tensor *const *x, em_device d) { (void)d; return em_sqrt(x[0]); }
static em_tensor *c_rsqrt(em_tensor *const *x, em_device d) { (void)d; return em_rsqrt(x[0]); }
static em_tensor *c_square(em_tensor *const *x, em_device d) { (void)d; return em_square(x[0]); }
static em_tensor *c_recip(em_tensor *const *x, em_device d) { (void)d; return em_reciprocal(x[0]); }
static em_tensor *c_sin(em_tensor *const *x, em_device d) { (void)d; return em_sin(x[0]); }
static em_tensor *c_cos(em_tensor *const *x, em_device d) { (void)d; return em_cos(x[0]); }
static em_tensor *c_tanh(em_tensor *const *x, em_device d) { (void)d; return em_tanh(x[0]); }
static em_tensor *c_sigmoid(em_tensor *const *x, em_device d) { (void)d; return em_sigmoid(x[0]); }
static em_tensor *c_relu(em_tensor *const *x, em_device d) { (void)d; return em_relu(x[0]); }
static em_tensor *c_silu(em_tensor *const *x, em_device d) { (void)d; return em_silu(x[0]); }
static em_tensor *c_floor(em_tensor *const *x, em_device d) { (void)d; return em_floor(x[0]); }
static em_tensor *c_ceil(em_tensor *const *x, em_device d) { (void)d; return em_ceil(x[0]); }
static em_tensor *c_round(em_tensor *const *x, em_device d) { (void)d; return em_round(x[0]); }
static em_tensor *c_leaky(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_leaky_relu(x[0], 0.1);
}
static em_tensor *c_gelu(em_tensor *const *x, em_device d) { (void)d; return em_gelu(x[0], false); }
static em_tensor *c_gelu_tanh(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_gelu(x[0], true);
}
static em_tensor *c_clamp(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_clamp(x[0], -0.5, 0.5);
}
static em_tensor *c_clamp_lo(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_clamp(x[0], -0.3, INFINITY);
}
static em_tensor *c_add_s(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_add_scalar(x[0], 1.5);
}
static em_tensor *c_mul_s(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mul_scalar(x[0], -2.5);
}
static em_tensor *c_pow_s(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pow_scalar(x[0], 2.5);
}
/* an integer power of negative and positive bases */
static em_tensor *c_pow_s_int(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pow_scalar(x[0], 3.0);
}
/* (2, 3, 4) seen as (4, 2, 3) */
static em_tensor *c_exp_permuted(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_exp(em_permute(x[0], (int[]){2, 0, 1}));
}
/* every second row of (6, 5) */
static em_tensor *c_tanh_sliced(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_tanh(em_slice(x[0], 0, 0, 6, 2));
}
static em_tensor *c_softsign(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_softsign(x[0]);
}

static em_tensor *c_mish(em_tensor *const *x, em_device d) { (void)d; return em_mish(x[0]); }
static em_tensor *c_selu(em_tensor *const *x, em_device d) { (void)d; return em_selu(x[0]); }
static em_tensor *c_hardswish(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_hardswish(x[0]);
}
static em_tensor *c_logsigmoid(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_logsigmoid(x[0]);
}
/* beta x crosses the threshold at x = 1: both branches */
static em_tensor *c_softplus(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_softplus(x[0], 2.0, 2.0);
}
static em_tensor *c_hardtanh(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_hardtanh(x[0], -0.5, 0.8);
}
static em_tensor *c_elu(em_tensor *const *x, em_device d) { (void)d; return em_elu(x[0], 0.7); }
/* bounds that cross somewhere (min > max there), broadcast against t */
static em_tensor *c_clamp_tensor(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_clamp_tensor(x[0], x[1], x[2]);
}
static em_tensor *c_clamp_tensor_min(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_clamp_tensor(x[0], x[1], NULL);
}
static em_tensor *c_clamp_tensor_max(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_clamp_tensor(x[0], NULL, x[1]);
}

static em_tensor *c_add(em_tensor *const *x, em_device d) { (void)d; return em_add(x[0], x[1]); }
static em_tensor *c_sub(em_tensor *const *x, em_device d) { (void)d; return em_sub(x[0], x[1]); }
static em_tensor *c_mul(em_tensor *const *x, em_device d) { (void)d; return em_mul(x[0], x[1]); }
static em_tensor *c_div(em_tensor *const *x, em_device d) { (void)d; return em_div(x[0], x[1]); }
static em_tensor *c_pow(em_tensor *const *x, em_device d) { (void)d; return em_pow(x[0], x[1]); }
static em_tensor *c_maximum(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_maximum(x[0], x[1]);
}
static em_tensor *c_minimum(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_minimum(x[0], x[1]);
}
/* a transposed operand: (4, 3)^T + (3, 4) */
static em_tensor *c_add_transposed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_add(em_transpose(x[0], 0, 1), x[1]);
}
/* comparisons of values rounded to integers, so that ties happen */
static em_tensor *compare(em_tensor *(*op)(const em_tensor *, const em_tensor *),
                          em_tensor *const *x)
{
    return op(em_round(x[0]), em_round(x[1]));
}
static em_tensor *c_eq(em_tensor *const *x, em_device d) { (void)d; return compare(em_eq, x); }
static em_tensor *c_ne(em_tensor *const *x, em_device d) { (void)d; return compare(em_ne, x); }
static em_tensor *c_lt(em_tensor *const *x, em_device d) { (void)d; return compare(em_lt, x); }
static em_tensor *c_le(em_tensor *const *x, em_device d) { (void)d; return compare(em_le, x); }
static em_tensor *c_gt(em_tensor *const *x, em_device d) { (void)d; return compare(em_gt, x); }
static em_tensor *c_ge(em_tensor *const *x, em_device d) { (void)d; return compare(em_ge, x); }
static em_tensor *c_where(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_where(em_gt(x[2], em_zeros_like(x[2])), x[0], x[1]);
}
/* a 0-d f32 operand takes the other operand's dtype */
static em_tensor *c_f32_0d_operand(em_tensor *const *x, em_device d)
{
    em_tensor *s = on(em_scalar(2.0, EM_F32), d);
    return em_mul(em_add(x[0], s), s);
}

/* casts through every dtype the copy kernel converts */
static em_tensor *c_cast_f64(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mul(em_to_dtype(em_to_dtype(x[0], EM_F64), x[0]->dtype), x[0]);
}
static em_tensor *c_cast_ints(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *a = em_mul_scalar(x[0], 40.0);
    em_tensor *sum = em_add(em_to_dtype(em_to_dtype(a, EM_I32), EM_I64),
                            em_to_dtype(em_to_dtype(a, EM_I8), EM_I64));
    return em_add(sum, em_to_dtype(em_to_dtype(em_abs(a), EM_U8), EM_I64));
}
static em_tensor *c_cast_bool(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_to_dtype(em_to_dtype(em_round(x[0]), EM_BOOL), EM_I32);
}
static em_tensor *c_contiguous(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_contiguous(em_permute(x[0], (int[]){1, 2, 0}));
}
static em_tensor *c_cat(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cat((em_tensor *[]){x[0], em_transpose(x[1], 0, 1)}, 2, 1);
}
static em_tensor *c_stack(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_stack((em_tensor *[]){x[0], x[1]}, 2, 1);
}
static em_tensor *c_expand(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mul(em_expand(x[0], EM_SHAPE(3, 4, -1)), x[1]);
}
/* x[0] of (2, 3) twice around x[1] of (2, 4) */
static em_tensor *c_cat_repeated(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cat((em_tensor *[]){x[0], x[1], x[0]}, 3, 1);
}
static em_tensor *c_cat_dim0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cat((em_tensor *[]){em_transpose(x[0], 0, 1), x[1]}, 2, 0);
}
static em_tensor *c_stack_narrowed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_stack((em_tensor *[]){x[0], em_narrow(x[1], 1, 1, 3)}, 2, -1);
}
/* (2, 4) split into (2, 3) and (2, 1) */
static em_tensor *c_split(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *parts[3];
    if (em_split(x[0], 3, 1, parts, 3) != 2)
        return NULL;
    return em_mul(em_sum(parts[0], (int[]){1}, 1, false), em_squeeze(parts[1], 1));
}

/* ---- views of a (2, 3, 4) input ---- */

static em_tensor *c_reshape(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_reshape(x[0], EM_SHAPE(4, -1));
}
/* a transposed view reshaped: needs a copy */
static em_tensor *c_reshape_copy(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_reshape(em_transpose(x[0], 0, 2), EM_SHAPE(-1));
}
static em_tensor *c_view(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_view(x[0], EM_SHAPE(6, 4));
}
static em_tensor *c_flatten(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_flatten(x[0], 1, 2);
}
static em_tensor *c_permute(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_permute(x[0], (int[]){2, 0, 1});
}
static em_tensor *c_transpose(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_transpose(x[0], -1, 0);
}
static em_tensor *c_narrow(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_narrow(x[0], 2, 1, 2);
}
static em_tensor *c_slice(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_slice(x[0], 2, -3, 4, 2);
}
static em_tensor *c_select(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_select(x[0], 1, -1);
}
static em_tensor *c_expand_selected(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_expand(em_select(x[0], 0, 1), EM_SHAPE(5, 3, 4));
}
static em_tensor *c_expand_narrowed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_expand(em_narrow(x[0], 1, 0, 1), EM_SHAPE(2, 3, -1));
}
static em_tensor *c_squeeze_unsqueeze(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_squeeze(em_unsqueeze(em_unsqueeze(x[0], 1), -1), 1);
}
static em_tensor *c_clone(em_tensor *const *x, em_device d) { (void)d; return em_clone(x[0]); }
static em_tensor *c_contiguous_as_is(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_contiguous(x[0]);
}

/* ---- reductions ---- */

static em_tensor *c_sum_0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum(x[0], (int[]){0}, 1, false);
}
static em_tensor *c_sum_12_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum(x[0], (int[]){1, -1}, 2, true);
}
static em_tensor *c_sum_all(em_tensor *const *x, em_device d) { (void)d; return em_sum_all(x[0]); }
static em_tensor *c_mean_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mean(x[0], (int[]){1}, 1, false);
}
static em_tensor *c_mean_all(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mean_all(x[0]);
}
static em_tensor *c_amax_2(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amax(x[0], (int[]){2}, 1, true);
}
static em_tensor *c_amin_02(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amin(x[0], (int[]){0, 2}, 2, false);
}
static em_tensor *c_var_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], (int[]){1}, 1, 1, false);
}
static em_tensor *c_prod_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_prod(x[0], (int[]){1}, 1, false);
}
static em_tensor *c_prod_all(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_prod(x[0], NULL, 0, false);
}
/* a zero in row 0 and two in row 1 (x times a 0/1 mask): prod's rule at zeros */
static em_tensor *c_prod_zeros(em_tensor *const *x, em_device d)
{
    double m[] = {1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1};
    em_tensor *mask = on(em_from_data(EM_SHAPE(3, 4), EM_F64, m), d);
    return em_prod(em_mul(x[0], em_to_dtype(mask, x[0]->dtype)), (int[]){-1}, 1, true);
}
static em_tensor *c_std_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_std(x[0], (int[]){1}, 1, 1, false);
}
static em_tensor *c_std_02_biased_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_std(x[0], (int[]){0, 2}, 2, 0, true);
}
static em_tensor *c_logsumexp_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_logsumexp(x[0], (int[]){1}, 1, false);
}
static em_tensor *c_logsumexp_02_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_logsumexp(x[0], (int[]){0, -1}, 2, true);
}
/* vector norms of each order over dim 1 (the -inf one over all dims, keepdim), summed */
static em_tensor *c_vector_norms(em_tensor *const *x, em_device d)
{
    (void)d;
    const double ords[] = {2, 1, INFINITY, 3, 0.5, 1.5, 0};
    em_tensor *r = em_vector_norm(x[0], -INFINITY, NULL, 0, true);
    for (size_t i = 0; i < sizeof ords / sizeof ords[0]; i++)
        r = em_add(r, em_mul_scalar(em_vector_norm(x[0], ords[i], (int[]){1}, 1, false),
                                    (double)(i + 1)));
    return r;
}
static em_tensor *c_vector_norm_2(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_vector_norm(x[0], 2, (int[]){0, 2}, 2, false);
}
static em_tensor *c_cumsum_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cumsum(x[0], 1);
}
static em_tensor *c_cumsum_last(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cumsum(x[0], -1);
}
static em_tensor *c_cumprod_1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cumprod(x[0], 1);
}
static em_tensor *c_cumprod_0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cumprod(x[0], 0);
}
/* ---- padding and resampling ---- */

static em_tensor *c_pad_constant(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pad(x[0], (int64_t[]){2, -1, 0, 1, 1, 1}, 6, EM_PAD_CONSTANT, 0.25);
}
static em_tensor *c_pad_reflect(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pad(x[0], (int64_t[]){3, 2, 1, 2}, 4, EM_PAD_REFLECT, 0);
}
static em_tensor *c_pad_replicate(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pad(x[0], (int64_t[]){2, 3}, 2, EM_PAD_REPLICATE, 0);
}
static em_tensor *c_nearest(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_interpolate(x[0], (em_interpolate_opts){.size = {8, 3}});
}
static em_tensor *c_bilinear(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_interpolate(x[0], (em_interpolate_opts){.mode = EM_INTERP_BILINEAR,
                                                      .scale_factor = {1.7}});
}
static em_tensor *c_bilinear_corners(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_interpolate(x[0], (em_interpolate_opts){.mode = EM_INTERP_BILINEAR,
                                                      .size = {8, 3}, .align_corners = true});
}
static em_tensor *c_interp_linear(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_interpolate(x[0], (em_interpolate_opts){.mode = EM_INTERP_LINEAR, .size = {3}});
}

static em_tensor *c_var_all0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], NULL, 0, 0, true);
}
/* no dims listed: every dim */
static em_tensor *c_sum_no_dims(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum(x[0], NULL, 0, false);
}
static em_tensor *c_mean_20_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mean(x[0], (int[]){2, 0}, 2, true);
}
static em_tensor *c_mean_no_dims_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mean(x[0], NULL, 0, true);
}
static em_tensor *c_amax_0last(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amax(x[0], (int[]){0, -1}, 2, false);
}
static em_tensor *c_amax_no_dims(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amax(x[0], NULL, 0, false);
}
static em_tensor *c_amin_last_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amin(x[0], (int[]){-1}, 1, true);
}
static em_tensor *c_amin_no_dims_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amin(x[0], NULL, 0, true);
}
static em_tensor *c_var_no_dims(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], NULL, 0, 1, false);
}
static em_tensor *c_var_biased_2(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], (int[]){2}, 1, 0, false);
}
static em_tensor *c_var_biased_20_keep(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], (int[]){2, 0}, 2, 0, true);
}
static em_tensor *c_argmax(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_argmax(x[0], 1, false);
}
static em_tensor *c_argmin(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_argmin(x[0], -1, true);
}
/* sums over a permuted view */
static em_tensor *c_sum_permuted(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum(em_permute(x[0], (int[]){2, 0, 1}), (int[]){1}, 1, false);
}

/* ---- linear algebra ---- */

static em_tensor *c_matmul(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_matmul(x[0], x[1]);
}
static em_tensor *c_matmul_tt(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_matmul(em_transpose(x[0], 0, 1), em_transpose(x[1], 0, 1));
}
static em_tensor *c_bmm(em_tensor *const *x, em_device d) { (void)d; return em_bmm(x[0], x[1]); }
/* einsum over the case's inputs; each equation below is one case */
#define EINSUM_CASE(name, equation, n)                                                         \
    static em_tensor *name(em_tensor *const *x, em_device d)                                   \
    {                                                                                          \
        (void)d;                                                                               \
        return em_einsum(equation, x, n);                                                      \
    }
EINSUM_CASE(c_einsum_mm, "ij,jk->ik", 2)
EINSUM_CASE(c_einsum_attention, "bhqd,bhkd->bhqk", 2)
EINSUM_CASE(c_einsum_outer, "i,j->ij", 2)
EINSUM_CASE(c_einsum_diagonal, "ii->i", 1)
EINSUM_CASE(c_einsum_sum, "bij->bj", 1)
EINSUM_CASE(c_einsum_implicit, "bj,ja", 2)
EINSUM_CASE(c_einsum_ellipsis, "...ij,...jk->...ik", 2)
EINSUM_CASE(c_einsum_chain, "ij,jk,kl->il", 3)
EINSUM_CASE(c_einsum_trace_batch, "bii,bj->bj", 2)
static em_tensor *c_outer(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_outer(x[0], x[1]);
}
static em_tensor *c_addmm(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_addmm(x[0], x[1], x[2], 0.5, -1.5);
}
static em_tensor *c_baddbmm(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_baddbmm(x[0], x[1], x[2], -2.0, 0.75);
}
static em_tensor *c_linear(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_linear(x[0], x[1], x[2]);
}
static em_tensor *c_linear_no_bias(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_linear(x[0], x[1], NULL);
}
static em_tensor *c_linear_relu(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_linear_relu(x[0], x[1], x[2]);
}
static em_tensor *c_linear_relu_no_bias(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_linear_relu(x[0], x[1], NULL);
}

/* ---- convolution and pooling ---- */

static em_tensor *c_conv(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], x[2], (em_conv2d_opts){.padding = {1, 1}});
}
static em_tensor *c_conv_unpadded(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], x[2], (em_conv2d_opts){0});
}
static em_tensor *c_conv_stride_pad(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], x[2], (em_conv2d_opts){.stride = {2, 1}, .padding = {1, 2}});
}
static em_tensor *c_conv_groups_stride(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], x[2], (em_conv2d_opts){.stride = {1, 2}, .groups = 2});
}
static em_tensor *c_conv_strided(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], NULL,
                     (em_conv2d_opts){.stride = {2, 1}, .padding = {2, 0}, .dilation = {2, 1}});
}
static em_tensor *c_conv_groups(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], x[2], (em_conv2d_opts){.padding = {1, 1}, .groups = 2});
}
static em_tensor *c_conv_same(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv2d(x[0], x[1], x[2],
                     (em_conv2d_opts){.padding = {EM_PADDING_SAME}, .dilation = {1, 2}});
}
static em_tensor *c_conv_transpose(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv_transpose2d(x[0], x[1], x[2], (em_conv_transpose2d_opts){
        .stride = {2, 1}, .padding = {1, 0}, .output_padding = {1, 0}, .dilation = {1, 2},
        .groups = 2});
}
static em_tensor *c_conv_transpose_dilated(em_tensor *const *x, em_device d)
{
    (void)d; /* output_padding at the stride, below the dilation */
    return em_conv_transpose2d(x[0], x[1], NULL, (em_conv_transpose2d_opts){
        .padding = {1, 0}, .output_padding = {1, 1}, .dilation = {2, 2}});
}
static em_tensor *c_max_pool_dilated(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {2, 3}, .stride = {1, 2},
                                                .padding = {1, 1}, .dilation = {2, 2}});
}
static em_tensor *c_max_pool_dilated_inside(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 2}, .stride = {1, 1},
                                                .dilation = {2, 3}});
}
static em_tensor *c_max_pool(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {2, 2}});
}
static em_tensor *c_max_pool_pad(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                .padding = {1, 1}});
}
static em_tensor *c_max_pool_rect_pad(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 2}, .stride = {1, 2},
                                                .padding = {1, 1}});
}
static em_tensor *c_max_pool_rect(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {2, 3}, .stride = {2, 1}});
}
static em_tensor *c_max_pool_ceil(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {2, 2}, .ceil_mode = true});
}
static em_tensor *c_max_pool_pad_ceil(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_max_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                .padding = {1, 1}, .ceil_mode = true});
}
static em_tensor *c_relu_max_pool(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_relu_max_pool2d(x[0], (em_pool2d_opts){.kernel = {2, 2}});
}
static em_tensor *c_relu_max_pool_pad(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_relu_max_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                     .padding = {1, 1}});
}
static em_tensor *c_avg_pool(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_avg_pool2d(x[0], (em_pool2d_opts){.kernel = {2, 2}});
}
static em_tensor *c_avg_pool_exclude(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_avg_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                .padding = {1, 1}, .exclude_pad = true});
}
static em_tensor *c_avg_pool_pad(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_avg_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                .padding = {1, 1}});
}
static em_tensor *c_avg_pool_pad_ceil(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_avg_pool2d(x[0], (em_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                .padding = {1, 1}, .ceil_mode = true});
}
static em_tensor *c_adaptive_pool(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_adaptive_avg_pool2d(x[0], 2, 3);
}

/* ---- attention ---- */

static em_tensor *c_sdpa_causal(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_scaled_dot_product_attention(x[0], x[1], x[2], (em_sdpa_opts){.is_causal = true});
}
static em_tensor *c_sdpa_mask(em_tensor *const *x, em_device d)
{
    em_tensor *mask = em_gt(x[3], em_scalar(-0.5, x[3]->dtype)); /* (1, 1, Lq, Lk) */
    (void)d;
    return em_scaled_dot_product_attention(x[0], x[1], x[2], (em_sdpa_opts){.attn_mask = mask});
}
static em_tensor *c_sdpa_dropout(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_scaled_dot_product_attention(x[0], x[1], x[2], (em_sdpa_opts){.dropout_p = 0.3,
                                                                            .scale = 0.7});
}

/* self-attention over a packed (B, T, 3E) projection, 2 heads */
static em_tensor *c_self_attention_packed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_self_attention_packed(x[0], 2, (em_sdpa_opts){.is_causal = true});
}

/* ---- softmax ---- */

static em_tensor *c_softmax(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_softmax(x[0], -1);
}
static em_tensor *c_softmax_mid(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_softmax(x[0], 1);
}
static em_tensor *c_softmax_first(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_softmax(x[0], 0);
}
static em_tensor *c_log_softmax(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_log_softmax(x[0], -1);
}
static em_tensor *c_log_softmax_first(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_log_softmax(x[0], 0);
}
static em_tensor *c_log_softmax_mid(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_log_softmax(x[0], 1);
}

static em_tensor *c_conv1d(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv1d(x[0], x[1], x[2], (em_conv1d_opts){.stride = 2, .padding = 1, .groups = 2});
}
static em_tensor *c_conv1d_same(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_conv1d(x[0], x[1], x[2], (em_conv1d_opts){.padding = EM_PADDING_SAME});
}

/* ---- indexing ---- */

static em_tensor *c_index_select0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_index_select(x[0], 0, x[1]);
}
static em_tensor *c_index_select1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_index_select(x[0], 1, x[1]);
}
static em_tensor *c_gather(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_gather(x[0], 1, x[1]);
}
static em_tensor *c_embedding(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_embedding(x[0], x[1]);
}
/* the padding row (the last) is never looked up here: its zero gradient is then the true one,
 * which finite differences can check (tests/autograd/test_ops_indexing.c looks it up) */
static em_tensor *c_embedding_padded(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_embedding_padded(x[0], x[1], -1);
}
static em_tensor *c_one_hot(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_one_hot(x[0], 5);
}

/* ---- writing at indices ---- */

/* an i64 index of shape s on the case's device */
static em_tensor *index_on(em_shape s, const int64_t *v, em_device d)
{
    return on(em_from_data(s, EM_I64, v), d);
}
/* distinct columns per row (a repeated write has no derivative for the overwritten src) */
static em_tensor *c_scatter(em_tensor *const *x, em_device d)
{
    const int64_t at[6] = {0, 4, 2, 3, 1, 0};
    return em_scatter(x[0], 1, index_on(EM_SHAPE(2, 3), at, d), x[1]);
}
/* src (3, 5) larger than the index (2, 4): its corner is written */
static em_tensor *c_scatter_wide_src(em_tensor *const *x, em_device d)
{
    const int64_t at[8] = {2, 0, 1, 0, 0, 1, 2, 2};
    return em_scatter(x[0], 0, index_on(EM_SHAPE(2, 4), at, d), x[1]);
}
static em_tensor *c_scatter_value(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_scatter_value(x[0], 1, x[1], -1.5);
}
static em_tensor *c_scatter_add0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_scatter_add(x[0], 0, x[2], x[1]);
}
static em_tensor *c_scatter_add1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_scatter_add(x[0], 1, x[2], x[1]);
}
static em_tensor *c_index_fill(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_index_fill(x[0], 1, x[1], 2.5);
}
/* x (4, 3) at rows (0, -1, 2) by columns ((1), (2)): six distinct positions, or (accumulate)
 * rows (0, -1, 0), which meet twice */
static em_tensor *index_put_grid(em_tensor *const *x, em_device d, bool accumulate)
{
    const int64_t rows[3] = {0, -1, accumulate ? 0 : 2}, cols[2] = {1, 2};
    em_tensor *at[2] = {index_on(EM_SHAPE(3), rows, d), index_on(EM_SHAPE(2, 1), cols, d)};
    return em_index_put(x[0], at, 2, x[1], accumulate);
}
static em_tensor *c_index_put(em_tensor *const *x, em_device d)
{
    return index_put_grid(x, d, false);
}
static em_tensor *c_index_put_accumulate(em_tensor *const *x, em_device d)
{
    return index_put_grid(x, d, true);
}
static em_tensor *c_index_put_rows(em_tensor *const *x, em_device d)
{
    const int64_t rows[2] = {2, 0};
    em_tensor *at = index_on(EM_SHAPE(2), rows, d);
    return em_index_put(x[0], &at, 1, x[1], false);
}

/* ---- masking, choosing by value, sampling ---- */

static em_tensor *c_masked_fill(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_masked_fill(x[0], em_gt(x[1], em_zeros(EM_SCALAR_SHAPE, x[1]->dtype)), -2.5);
}
static em_tensor *c_tril(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_tril(x[0], -1);
}
static em_tensor *c_triu(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_triu(x[0], 1);
}
static em_tensor *c_topk(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *v = NULL;
    return em_topk(x[0], 3, 1, true, &v, NULL) == EM_OK ? v : NULL;
}
static em_tensor *c_multinomial(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_multinomial(x[0], 6, false, NULL);
}
static em_tensor *c_sample_logits(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sample_logits(x[0], (em_sample_opts){.top_k = 3, .temperature = 0.7}, NULL);
}

/* ---- losses and norms ---- */

static em_tensor *c_cross_entropy(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cross_entropy(x[0], x[1], (em_cross_entropy_opts){0});
}
static em_tensor *c_cross_entropy_smooth(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cross_entropy(x[0], x[1], (em_cross_entropy_opts){.label_smoothing = 0.1,
                                                                .reduction = EM_REDUCTION_SUM});
}
/* (N, C, d1, d2) logits with (N, d1, d2) targets, unreduced */
static em_tensor *c_cross_entropy_nd(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cross_entropy(x[0], x[1], (em_cross_entropy_opts){.reduction = EM_REDUCTION_NONE});
}
/* probability targets (a floating target of the logits' shape), with class weights */
static em_tensor *c_cross_entropy_probs(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cross_entropy(x[0], x[1], (em_cross_entropy_opts){.weight = x[2],
                                                                .label_smoothing = 0.2});
}
/* (N, C, d1) probabilities, unreduced */
static em_tensor *c_cross_entropy_probs_nd(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cross_entropy(x[0], x[1], (em_cross_entropy_opts){.reduction = EM_REDUCTION_NONE});
}
static em_tensor *c_mse(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mse_loss(x[0], x[1], EM_REDUCTION_MEAN);
}
static em_tensor *c_l1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_l1_loss(x[0], x[1], EM_REDUCTION_NONE);
}
static em_tensor *c_bce(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_bce_with_logits(x[0], x[1], EM_REDUCTION_MEAN);
}
/* pos_weight (C) and weight (N, 1) broadcast against (N, C) */
static em_tensor *c_bce_weighted(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_binary_cross_entropy_with_logits(
        x[0], x[1], (em_bce_opts){.reduction = EM_REDUCTION_SUM, .pos_weight = x[2],
                                  .weight = x[3]});
}
static em_tensor *c_bce_probs(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_binary_cross_entropy(em_sigmoid(x[0]), x[1],
                                   (em_bce_opts){.reduction = EM_REDUCTION_MEAN});
}
static em_tensor *c_bce_probs_target_grad(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_binary_cross_entropy(em_sigmoid(x[0]), em_sigmoid(x[1]),
                                   (em_bce_opts){.reduction = EM_REDUCTION_NONE});
}
/* |x - y| crosses beta = 0.7 (delta = 0.7) in the WIDE range: both branches */
static em_tensor *c_smooth_l1(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_smooth_l1_loss(x[0], x[1], EM_REDUCTION_NONE, 0.7);
}
static em_tensor *c_huber(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_huber_loss(x[0], x[1], EM_REDUCTION_MEAN, 0.7);
}
/* input log-probabilities (log_softmax), target probabilities (softmax) or their logs */
static em_tensor *c_kl_div(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_kl_div(em_log_softmax(x[0], 1), em_softmax(x[1], 1), EM_REDUCTION_BATCHMEAN,
                     false);
}
static em_tensor *c_kl_div_log_target(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_kl_div(em_log_softmax(x[0], 1), em_log_softmax(x[1], 1), EM_REDUCTION_SUM, true);
}
static em_tensor *c_cosine_similarity(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_cosine_similarity(x[0], x[1], 1, 1e-8);
}
static em_tensor *c_pairwise_distance(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pairwise_distance(x[0], x[1], 2, 1e-6, false);
}
/* targets 1, -1, 1, -1, -1 (a fixed pattern; cos - margin crosses 0 somewhere) */
static em_tensor *c_cosine_embedding(em_tensor *const *x, em_device d)
{
    em_tensor *y = on(em_from_data(EM_SHAPE(5), EM_F64, (double[]){1, -1, 1, -1, -1}), d);
    return em_cosine_embedding_loss(x[0], x[1], em_to_dtype(y, x[0]->dtype), 0.1,
                                    EM_REDUCTION_MEAN);
}
static em_tensor *c_margin_ranking(em_tensor *const *x, em_device d)
{
    em_tensor *y = on(em_from_data(EM_SHAPE(2, 3), EM_F64, (double[]){1, -1, -1, 1, 1, -1}), d);
    return em_margin_ranking_loss(x[0], x[1], em_to_dtype(y, x[0]->dtype), 0.2,
                                  EM_REDUCTION_SUM);
}
static em_tensor *c_layer_norm(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_layer_norm(x[0], 6, x[1], x[2], 1e-5);
}
static em_tensor *c_layer_norm_plain(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_layer_norm(x[0], 6, NULL, NULL, 1e-5);
}
static em_tensor *c_layer_norm_weight(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_layer_norm(x[0], 6, x[1], NULL, 1e-5);
}
/* training-mode batch norm over (N, C, H, W), running statistics on the case's device */
static em_tensor *batch_norm(em_tensor *const *x, em_device d, bool stats)
{
    em_tensor *mean = em_to_device(em_zeros(EM_SHAPE(3), x[0]->dtype), d);
    em_tensor *var = em_to_device(em_ones(EM_SHAPE(3), x[0]->dtype), d);
    em_tensor *y = em_batch_norm(x[0], mean, var, x[1], x[2], true, 0.1, 1e-5);
    return stats ? (y ? em_cat((em_tensor *[]){mean, var}, 2, 0) : NULL) : y;
}
static em_tensor *c_batch_norm(em_tensor *const *x, em_device d)
{
    return batch_norm(x, d, false);
}
/* the running mean and variance after one training step */
static em_tensor *c_batch_norm_stats(em_tensor *const *x, em_device d)
{
    return batch_norm(x, d, true);
}
static em_tensor *c_group_norm(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_group_norm(x[0], 3, x[1], x[2], 1e-5);
}
static em_tensor *c_group_norm_plain(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_group_norm(x[0], 2, NULL, NULL, 1e-5);
}
/* instance norm over (N, C, L) by each instance's statistics, updating running statistics on
 * the case's device (stats: those statistics after the step) */
static em_tensor *instance_norm(em_tensor *const *x, em_device d, bool stats)
{
    em_tensor *mean = em_to_device(em_full(EM_SHAPE(3), x[0]->dtype, 0.2), d);
    em_tensor *var = em_to_device(em_full(EM_SHAPE(3), x[0]->dtype, 1.5), d);
    em_tensor *y = em_instance_norm(x[0], mean, var, x[1], x[2], true, 0.3, 1e-5);
    return stats ? (y ? em_cat((em_tensor *[]){mean, var}, 2, 0) : NULL) : y;
}
static em_tensor *c_instance_norm(em_tensor *const *x, em_device d)
{
    return instance_norm(x, d, false);
}
static em_tensor *c_instance_norm_stats(em_tensor *const *x, em_device d)
{
    return instance_norm(x, d, true);
}
/* use_input_stats false: normalised by the running statistics */
static em_tensor *c_instance_norm_running(em_tensor *const *x, em_device d)
{
    em_tensor *mean = em_to_device(em_full(EM_SHAPE(3), x[0]->dtype, 0.2), d);
    em_tensor *var = em_to_device(em_full(EM_SHAPE(3), x[0]->dtype, 1.5), d);
    return em_instance_norm(x[0], mean, var, x[1], x[2], false, 0.1, 1e-5);
}

/* ---- random numbers (global generator, seeded before each run) ---- */

static em_tensor *c_dropout(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_dropout(x[0], 0.3, true, NULL);
}
/* drawn on the device itself: its Philox stream must give the CPU's numbers */
static em_tensor *c_rand(em_tensor *const *x, em_device d)
{
    (void)x;
    em_tensor *t = em_empty_on(EM_SHAPE(5, 7), EM_F32, d);
    return t && em_uniform_(t, -2, 3, NULL) == EM_OK ? t : NULL;
}
static em_tensor *c_randn(em_tensor *const *x, em_device d)
{
    (void)x;
    em_tensor *t = em_empty_on(EM_SHAPE(33), EM_F32, d);
    return t && em_normal_(t, 0.5, 2.0, NULL) == EM_OK ? t : NULL;
}
static em_tensor *c_randint(em_tensor *const *x, em_device d)
{
    (void)x;
    em_tensor *t = em_empty_on(EM_SHAPE(2, 9), EM_I64, d);
    return t && em_randint_(t, -3, 1000, NULL) == EM_OK ? t : NULL;
}
static em_tensor *c_bernoulli(em_tensor *const *x, em_device d)
{
    (void)x;
    em_tensor *t = em_empty_on(EM_SHAPE(3, 11), EM_F32, d);
    return t && em_bernoulli_(t, 0.3, NULL) == EM_OK ? t : NULL;
}
static em_tensor *c_full(em_tensor *const *x, em_device d)
{
    (void)x;
    return on(em_add(em_full(EM_SHAPE(2, 3), EM_F32, 1.25), em_arange(0, 6, 2, EM_F32)), d);
}

/* ---- backend kernel paths: integer dtypes, misaligned and broadcast runs, strided views,
 * long and chunked reductions, long softmax rows, repeated indices, draws in every dtype ---- */

/* x * 64 (exact in every float dtype) truncated to dt */
static em_tensor *ints(const em_tensor *x, em_dtype dt)
{
    return em_to_dtype(em_mul_scalar(x, 64.0), dt);
}
/* every integer unary op on a transposed i32 view, summed in i32 */
static em_tensor *c_unary_ints(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *t = em_transpose(ints(x[0], EM_I32), 0, 1);
    em_tensor *r = em_add(em_abs(t), em_clamp(t, -20.5, 30.2));
    r = em_add(r, em_mul_scalar(em_neg(t), -3.0));
    r = em_add(r, em_add(em_square(em_sign(t)), em_relu(t)));
    return em_to_dtype(em_add_scalar(r, 7.0), EM_I64);
}
/* i8, u8 and i64 arithmetic with broadcast, wrapping where it overflows */
static em_tensor *c_binary_ints(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *a = ints(x[0], EM_I8), *b = ints(x[1], EM_I8);
    em_tensor *w = em_to_dtype(em_mul(em_add(a, b), em_sub(a, b)), EM_I64);
    em_tensor *u = em_maximum(ints(em_abs(x[0]), EM_U8), ints(em_abs(x[1]), EM_U8));
    em_tensor *m = em_minimum(ints(x[0], EM_I64), ints(x[1], EM_I64));
    return em_add(em_add(w, em_to_dtype(u, EM_I64)), m);
}
/* comparisons of i32 and of bool operands */
static em_tensor *c_compare_ints(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *a = ints(x[0], EM_I32), *b = ints(x[1], EM_I32);
    em_tensor *pa = em_gt(x[0], em_zeros_like(x[0])), *pb = em_gt(x[1], em_zeros_like(x[1]));
    return em_add(em_to_dtype(em_le(a, b), EM_I64),
                  em_to_dtype(em_ne(pa, em_transpose(pb, 0, 1)), EM_I64));
}
/* f64 unary ops and gradients inside an f32/f16/bf16 case */
static em_tensor *c_unary_f64(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *y = em_to_dtype(x[0], EM_F64);
    em_tensor *z = em_add(em_gelu(y, false), em_mul(em_tanh(y), em_sigmoid(y)));
    z = em_add(z, em_add(em_exp(y), em_silu(em_transpose(em_transpose(y, 0, 1), 0, 1))));
    return em_to_dtype(z, x[0]->dtype);
}
/* light and heavy ops on a contiguous run that starts one element past an aligned address */
static em_tensor *c_unary_offset(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *v = em_narrow(x[0], 0, 1, 37);
    return em_add(em_relu(v), em_mul(em_leaky_relu(v, 0.2), em_exp(v)));
}
/* a heavy op on an expanded (stride 0) view */
static em_tensor *c_sigmoid_expanded(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sigmoid(em_expand(x[0], EM_SHAPE(4, -1, -1)));
}
/* a 0-d operand broadcast over a run */
static em_tensor *c_mul_scalar_tensor(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mul(x[0], em_sum_all(x[1]));
}
static em_tensor *c_pow_transposed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_pow(em_transpose(x[0], 0, 1), x[1]);
}
static em_tensor *c_where_strided(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_where(em_gt(x[2], em_zeros_like(x[2])), em_transpose(x[0], 0, 1), x[1]);
}
/* f32 -> f16 -> bf16 -> f64 -> x's dtype */
static em_tensor *c_cast_chain(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *h = em_to_dtype(em_to_dtype(x[0], EM_F16), EM_BF16);
    return em_to_dtype(em_to_dtype(h, EM_F64), x[0]->dtype);
}
static em_tensor *c_contiguous_expanded(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_contiguous(em_expand(em_transpose(x[0], 0, 1), EM_SHAPE(2, -1, -1)));
}
/* x plus a constant written by fill into every second column of a (4, 6) view */
static em_tensor *c_fill_strided(em_tensor *const *x, em_device d)
{
    em_tensor *z = em_empty_on(EM_SHAPE(4, 6), x[0]->dtype, d);
    if (!z || em_fill_(z, -0.5) != EM_OK || em_fill_(em_slice(z, 1, 0, 6, 2), 1.25) != EM_OK)
        return NULL;
    return em_add(x[0], z);
}
static em_tensor *c_sum_dims02_transposed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum(em_transpose(x[0], 0, 2), (int[]){0, 2}, 2, true);
}
static em_tensor *c_mean_sliced(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_mean(em_slice(x[0], 1, 0, 6, 2), (int[]){1}, 1, false);
}
static em_tensor *c_var_dims01(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], (int[]){0, 1}, 2, 1, true);
}
static em_tensor *c_amax_ints(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_to_dtype(em_amax(ints(x[0], EM_I32), (int[]){1}, 1, false), EM_I64);
}
static em_tensor *c_sum_ints(em_tensor *const *x, em_device d)
{
    (void)d;
    em_tensor *s8 = em_sum(ints(x[0], EM_I8), (int[]){0}, 1, false);
    em_tensor *sb = em_sum(em_gt(x[0], em_zeros_like(x[0])), (int[]){0}, 1, false);
    return em_add(s8, sb);
}
/* values rounded to halves, so that ties happen: the first index wins */
static em_tensor *c_argmax_ties(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_argmax(em_round(em_mul_scalar(x[0], 2.0)), 0, false);
}
static em_tensor *c_argmin_ties_transposed(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_argmin(em_transpose(em_round(em_mul_scalar(x[0], 2.0)), 0, 1), 1, true);
}
/* sums over an empty dim: zeros of shape (1, 3) */
static em_tensor *c_empty_sum(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_add(em_sum(x[0], (int[]){0}, 1, true), em_sum(em_exp(x[0]), (int[]){0}, 1, true));
}
/* long reductions whose positions are cut into chunks combined by a second pass */
static em_tensor *c_sum_all_long(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum_all(x[0]);
}
static em_tensor *c_sum_cols_long(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_sum(x[0], (int[]){0}, 1, false);
}
static em_tensor *c_amax_long(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_amax(x[0], (int[]){0}, 1, false);
}
static em_tensor *c_argmax_ties_long(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_argmax(em_round(em_mul_scalar(x[0], 4.0)), 1, false);
}
static em_tensor *c_var_long(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_var(x[0], (int[]){1}, 1, 1, false);
}
static em_tensor *c_index_select_strided(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_index_select(em_transpose(x[0], 0, 1), 1, x[1]);
}
static em_tensor *c_gather_dim0(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_gather(x[0], 0, x[1]);
}
static em_tensor *c_gather_transposed_index(em_tensor *const *x, em_device d)
{
    (void)d;
    return em_gather(x[0], 1, em_transpose(x[1], 0, 1));
}
typedef enum { DRAW_UNIFORM, DRAW_RANDINT, DRAW_BERNOULLI } draw_kind;

/* two draws in a row (the second at a later Philox offset) into t and a tensor like it */
static em_tensor *draw(em_tensor *t, draw_kind kind)
{
    em_tensor *u = t ? em_empty_like(t) : NULL;
    for (int k = 0; u && k < 2; k++) {
        em_tensor *dst = k == 0 ? t : u;
        em_status st = kind == DRAW_UNIFORM   ? em_uniform_(dst, -3, 5, NULL)
                       : kind == DRAW_RANDINT ? em_randint_(dst, -7, 100, NULL)
                                              : em_bernoulli_(dst, 0.4, NULL);
        if (st != EM_OK)
            return NULL;
    }
    return u ? em_add(em_to_dtype(t, EM_F64), em_to_dtype(u, EM_F64)) : NULL;
}
static em_tensor *c_rand_f16(em_tensor *const *x, em_device d)
{
    (void)x;
    return draw(em_empty_on(EM_SHAPE(7), EM_F16, d), DRAW_UNIFORM);
}
static em_tensor *c_rand_f64(em_tensor *const *x, em_device d)
{
    (void)x;
    return draw(em_empty_on(EM_SHAPE(3, 3), EM_F64, d), DRAW_UNIFORM);
}
static em_tensor *c_randint_i8(em_tensor *const *x, em_device d)
{
    (void)x;
    return draw(em_empty_on(EM_SHAPE(13), EM_I8, d), DRAW_RANDINT);
}
static em_tensor *c_bernoulli_bool(em_tensor *const *x, em_device d)
{
    (void)x;
    return draw(em_empty_on(EM_SHAPE(2, 5), EM_BOOL, d), DRAW_BERNOULLI);
}

#define IN(...) {.shape = EM_SHAPE(__VA_ARGS__), .lo = -1, .hi = 1}
#define POS(...) {.shape = EM_SHAPE(__VA_ARGS__), .lo = 0.5, .hi = 2}
#define WIDE(...) {.shape = EM_SHAPE(__VA_ARGS__), .lo = -2, .hi = 2}
#define FIXED(...) {.shape = EM_SHAPE(__VA_ARGS__), .lo = -1, .hi = 1, .fixed = true}
#define UNIT(...) {.shape = EM_SHAPE(__VA_ARGS__), .lo = 0, .hi = 1, .fixed = true}
#define NO_INPUT {.lo = 0}
#define INDEX(bound, ...) {.shape = EM_SHAPE(__VA_ARGS__), .index_bound = (bound)}
#define VIEWS (EM_CASE_PERMUTED | EM_CASE_SLICED)
#define ALL_LAYOUTS (EM_CASE_PERMUTED | EM_CASE_SLICED | EM_CASE_BROADCAST)

const em_op_case em_op_cases[] = {
    {"neg", c_neg, 1, {IN(3, 4)}, VIEWS},
    {"abs", c_abs, 1, {IN(3, 4)}, VIEWS},
    {"sign", c_sign, 1, {IN(3, 4)}, VIEWS},
    {"exp", c_exp, 1, {IN(3, 4)}, VIEWS},
    {"log", c_log, 1, {POS(3, 4)}, VIEWS},
    {"log1p", c_log1p, 1, {POS(3, 4)}, VIEWS},
    {"sqrt", c_sqrt, 1, {POS(3, 4)}, VIEWS},
    {"rsqrt", c_rsqrt, 1, {POS(3, 4)}, VIEWS},
    {"square", c_square, 1, {IN(3, 4)}, VIEWS},
    {"reciprocal", c_recip, 1, {POS(3, 4)}, VIEWS},
    {"sin", c_sin, 1, {WIDE(3, 4)}, VIEWS},
    {"cos", c_cos, 1, {WIDE(3, 4)}, VIEWS},
    {"tanh", c_tanh, 1, {WIDE(3, 4)}, VIEWS},
    {"sigmoid", c_sigmoid, 1, {WIDE(3, 4)}, VIEWS},
    {"relu", c_relu, 1, {IN(3, 4)}, VIEWS},
    {"leaky_relu", c_leaky, 1, {IN(3, 4)}, VIEWS},
    {"gelu", c_gelu, 1, {WIDE(3, 4)}, VIEWS},
    {"gelu_tanh", c_gelu_tanh, 1, {WIDE(3, 4)}, VIEWS},
    {"silu", c_silu, 1, {WIDE(3, 4)}, VIEWS},
    {"softsign", c_softsign, 1, {WIDE(3, 4)}, VIEWS},
    {"mish", c_mish, 1, {WIDE(3, 4)}, VIEWS},
    {"softplus", c_softplus, 1, {WIDE(3, 4)}, VIEWS},
    {"hardtanh", c_hardtanh, 1, {IN(3, 4)}, VIEWS},
    {"elu", c_elu, 1, {WIDE(3, 4)}, VIEWS},
    {"selu", c_selu, 1, {WIDE(3, 4)}, VIEWS},
    {"hardswish", c_hardswish, 1, {{.shape = EM_SHAPE(3, 4), .lo = -4, .hi = 4}}, VIEWS},
    {"logsigmoid", c_logsigmoid, 1, {WIDE(3, 4)}, VIEWS},
    {"clamp_tensor", c_clamp_tensor, 3, {IN(3, 4), IN(4), IN(3, 1)}, ALL_LAYOUTS},
    {"clamp_tensor_min", c_clamp_tensor_min, 2, {IN(3, 4), IN(3, 4)}, ALL_LAYOUTS},
    {"clamp_tensor_max", c_clamp_tensor_max, 2, {IN(2, 3), IN(3)}, ALL_LAYOUTS},
    {"floor", c_floor, 1, {WIDE(3, 4)}, VIEWS},
    {"ceil", c_ceil, 1, {WIDE(3, 4)}, VIEWS},
    {"round", c_round, 1, {WIDE(3, 4)}, VIEWS},
    {"clamp", c_clamp, 1, {IN(3, 4)}, VIEWS},
    {"add_scalar", c_add_s, 1, {IN(3, 4)}, VIEWS},
    {"mul_scalar", c_mul_s, 1, {IN(3, 4)}, VIEWS},
    {"pow_scalar", c_pow_s, 1, {POS(3, 4)}, VIEWS},
    {"clamp_below", c_clamp_lo, 1, {IN(3, 4)}, VIEWS},
    {"pow_scalar_int", c_pow_s_int, 1, {IN(3, 4)}, VIEWS},
    {"exp_permuted", c_exp_permuted, 1, {IN(2, 3, 4)}, 0},
    {"tanh_sliced", c_tanh_sliced, 1, {IN(6, 5)}, 0},
    {"add_broadcast", c_add, 2, {IN(3, 1, 4), IN(2, 4)}, ALL_LAYOUTS},
    {"sub_broadcast", c_sub, 2, {IN(2, 4), IN(3, 1, 4)}, ALL_LAYOUTS},
    {"mul_broadcast", c_mul, 2, {IN(3, 2, 4), IN(4)}, ALL_LAYOUTS},
    {"div_broadcast", c_div, 2, {IN(3, 4), POS(3, 1)}, ALL_LAYOUTS},
    {"pow", c_pow, 2, {POS(3, 4), IN(3, 4)}, ALL_LAYOUTS},
    {"maximum", c_maximum, 2, {IN(3, 4), IN(4)}, ALL_LAYOUTS},
    {"minimum", c_minimum, 2, {IN(3, 4), IN(3, 4)}, ALL_LAYOUTS},
    {"add", c_add, 2, {IN(2, 3), IN(2, 3)}, ALL_LAYOUTS},
    {"sub", c_sub, 2, {IN(2, 3), IN(2, 3)}, ALL_LAYOUTS},
    {"mul", c_mul, 2, {IN(2, 3), IN(2, 3)}, ALL_LAYOUTS},
    {"div", c_div, 2, {IN(2, 3), POS(2, 3)}, ALL_LAYOUTS},
    {"pow_broadcast", c_pow, 2, {POS(3, 1, 4), IN(5, 1)}, ALL_LAYOUTS},
    {"maximum_same_shape", c_maximum, 2, {IN(2, 3), IN(2, 3)}, ALL_LAYOUTS},
    {"minimum_broadcast", c_minimum, 2, {IN(3, 1, 4), IN(5, 1)}, ALL_LAYOUTS},
    {"div_fixed_divisor", c_div, 2, {IN(2, 3), {.shape = EM_SHAPE(3), .lo = 0.5, .hi = 2,
                                               .fixed = true}}, ALL_LAYOUTS},
    {"f32_0d_operand", c_f32_0d_operand, 1, {IN(2, 2)}, ALL_LAYOUTS},
    {"add_transposed", c_add_transposed, 2, {IN(4, 3), IN(3, 4)}, 0},
    {"eq", c_eq, 2, {WIDE(3, 4), WIDE(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"ne", c_ne, 2, {WIDE(3, 4), WIDE(4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"lt", c_lt, 2, {WIDE(3, 4), WIDE(3, 1)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"le", c_le, 2, {WIDE(3, 4), WIDE(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"gt", c_gt, 2, {WIDE(3, 4), WIDE(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"ge", c_ge, 2, {WIDE(3, 4), WIDE(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"where", c_where, 3, {IN(3, 4), IN(4), FIXED(3, 1)}, ALL_LAYOUTS},
    {"cast_f64", c_cast_f64, 1, {IN(3, 4)}, VIEWS},
    {"cast_ints", c_cast_ints, 1, {IN(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"cast_bool", c_cast_bool, 1, {IN(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"contiguous", c_contiguous, 1, {IN(2, 3, 4)}, VIEWS},
    {"cat", c_cat, 2, {IN(3, 2), IN(4, 3)}, VIEWS},
    {"stack", c_stack, 2, {IN(3, 2), IN(3, 2)}, VIEWS},
    {"expand", c_expand, 2, {IN(4, 1), IN(3, 4, 5)}, 0},
    {"cat_repeated_input", c_cat_repeated, 2, {IN(2, 3), IN(2, 4)}, VIEWS},
    {"cat_dim0", c_cat_dim0, 2, {IN(2, 4), IN(3, 2)}, VIEWS},
    {"stack_last_dim", c_stack_narrowed, 2, {IN(2, 3), IN(2, 4)}, VIEWS},
    {"split", c_split, 1, {IN(2, 4)}, VIEWS},
    {"reshape", c_reshape, 1, {IN(2, 3, 4)}, VIEWS},
    {"reshape_copy", c_reshape_copy, 1, {IN(2, 3, 4)}, VIEWS},
    {"view", c_view, 1, {IN(2, 3, 4)}, 0},
    {"flatten", c_flatten, 1, {IN(2, 3, 4)}, VIEWS},
    {"permute", c_permute, 1, {IN(2, 3, 4)}, VIEWS},
    {"transpose", c_transpose, 1, {IN(2, 3, 4)}, VIEWS},
    {"narrow", c_narrow, 1, {IN(2, 3, 4)}, VIEWS},
    {"slice", c_slice, 1, {IN(2, 3, 4)}, VIEWS},
    {"select", c_select, 1, {IN(2, 3, 4)}, VIEWS},
    {"expand_selected", c_expand_selected, 1, {IN(2, 3, 4)}, VIEWS},
    {"expand_narrowed", c_expand_narrowed, 1, {IN(2, 3, 4)}, VIEWS},
    {"squeeze_unsqueeze", c_squeeze_unsqueeze, 1, {IN(2, 3, 4)}, VIEWS},
    {"clone", c_clone, 1, {IN(2, 3, 4)}, VIEWS},
    {"contiguous_as_is", c_contiguous_as_is, 1, {IN(2, 3, 4)}, VIEWS},
    {"sum_dim0", c_sum_0, 1, {IN(3, 4, 5)}, VIEWS},
    {"sum_dims12_keepdim", c_sum_12_keep, 1, {IN(3, 4, 5)}, VIEWS},
    {"sum_all", c_sum_all, 1, {IN(3, 4, 5)}, VIEWS},
    {"sum_permuted", c_sum_permuted, 1, {IN(3, 4, 5)}, 0},
    {"mean_dim1", c_mean_1, 1, {IN(3, 4, 5)}, VIEWS},
    {"mean_all", c_mean_all, 1, {IN(3, 4, 5)}, VIEWS},
    {"amax_keepdim", c_amax_2, 1, {IN(3, 4, 5)}, VIEWS},
    {"amin_dims02", c_amin_02, 1, {IN(3, 4, 5)}, VIEWS},
    {"var_dim1", c_var_1, 1, {IN(3, 4, 5)}, VIEWS},
    {"var_all_biased", c_var_all0, 1, {IN(3, 4, 5)}, VIEWS},
    {"prod_dim1", c_prod_1, 1, {WIDE(3, 4, 2)}, VIEWS},
    {"prod_all", c_prod_all, 1, {WIDE(2, 3)}, VIEWS},
    {"prod_zeros", c_prod_zeros, 1, {WIDE(3, 4)}, VIEWS},
    {"cumsum_dim1", c_cumsum_1, 1, {IN(3, 4, 5)}, VIEWS},
    {"cumsum_last_dim", c_cumsum_last, 1, {IN(2, 7)}, VIEWS},
    {"cumprod_dim1", c_cumprod_1, 1, {WIDE(3, 5, 2)}, VIEWS},
    {"cumprod_dim0", c_cumprod_0, 1, {WIDE(4, 3)}, VIEWS},
    {"pad_constant_cropping", c_pad_constant, 1, {IN(2, 3, 4)}, VIEWS},
    {"pad_reflect_2d", c_pad_reflect, 1, {IN(2, 3, 4)}, VIEWS},
    {"pad_replicate_1d", c_pad_replicate, 1, {IN(2, 3, 4)}, VIEWS},
    {"interpolate_nearest_5x7_to_8x3", c_nearest, 1, {IN(2, 2, 5, 7)}, VIEWS},
    {"interpolate_bilinear_scale_1_7", c_bilinear, 1, {IN(2, 1, 5, 7)}, VIEWS},
    {"interpolate_bilinear_align_corners", c_bilinear_corners, 1, {IN(1, 2, 5, 7)}, VIEWS},
    {"interpolate_linear_7_to_3", c_interp_linear, 1, {IN(2, 3, 7)}, VIEWS},
    {"std_dim1", c_std_1, 1, {IN(3, 4, 5)}, VIEWS},
    {"std_dims02_biased_keepdim", c_std_02_biased_keep, 1, {IN(3, 4, 5)}, VIEWS},
    {"logsumexp_dim1", c_logsumexp_1, 1, {WIDE(3, 4, 5)}, VIEWS},
    {"logsumexp_dims02_keepdim", c_logsumexp_02_keep, 1, {WIDE(3, 4, 5)}, VIEWS},
    {"vector_norms", c_vector_norms, 1, {WIDE(3, 5)}, VIEWS},
    {"vector_norm_2_dims02", c_vector_norm_2, 1, {IN(3, 4, 2)}, VIEWS},
    {"sum_no_dims", c_sum_no_dims, 1, {IN(3, 4, 2)}, VIEWS},
    {"mean_dims20_keepdim", c_mean_20_keep, 1, {IN(3, 4, 2)}, VIEWS},
    {"mean_no_dims_keepdim", c_mean_no_dims_keep, 1, {IN(3, 4, 2)}, VIEWS},
    {"amax_dims0_last", c_amax_0last, 1, {IN(3, 4, 2)}, VIEWS},
    {"amax_no_dims", c_amax_no_dims, 1, {IN(3, 4, 2)}, VIEWS},
    {"amin_last_keepdim", c_amin_last_keep, 1, {IN(3, 4, 2)}, VIEWS},
    {"amin_no_dims_keepdim", c_amin_no_dims_keep, 1, {IN(3, 4, 2)}, VIEWS},
    {"var_no_dims", c_var_no_dims, 1, {IN(3, 4, 2)}, VIEWS},
    {"var_biased_dim2", c_var_biased_2, 1, {IN(3, 4, 2)}, VIEWS},
    {"var_biased_dims20_keepdim", c_var_biased_20_keep, 1, {IN(3, 4, 2)}, VIEWS},
    {"argmax", c_argmax, 1, {IN(3, 4, 5)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"argmin", c_argmin, 1, {IN(3, 4, 5)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"matmul", c_matmul, 2, {IN(5, 7), IN(7, 3)}, ALL_LAYOUTS},
    {"matmul_transposed", c_matmul_tt, 2, {IN(7, 5), IN(3, 7)}, 0},
    {"matmul_batched_broadcast", c_matmul, 2, {IN(2, 1, 4, 6), IN(3, 6, 5)}, ALL_LAYOUTS},
    {"matmul_vector", c_matmul, 2, {IN(6), IN(2, 6, 3)}, ALL_LAYOUTS},
    {"matmul_dot", c_matmul, 2, {IN(4), IN(4)}, ALL_LAYOUTS},
    {"matmul_vector_matrix", c_matmul, 2, {IN(3), IN(3, 5)}, ALL_LAYOUTS},
    {"matmul_matrix_vector", c_matmul, 2, {IN(2, 3), IN(3)}, ALL_LAYOUTS},
    {"matmul_matrix_batch", c_matmul, 2, {IN(3, 4), IN(2, 4, 2)}, ALL_LAYOUTS},
    {"matmul_batch_vector", c_matmul, 2, {IN(2, 2, 3), IN(3)}, ALL_LAYOUTS},
    {"bmm", c_bmm, 2, {IN(3, 4, 5), IN(3, 5, 2)}, VIEWS},
    {"einsum_matmul", c_einsum_mm, 2, {IN(3, 4), IN(4, 2)}, ALL_LAYOUTS},
    {"einsum_attention_scores", c_einsum_attention, 2, {IN(2, 2, 3, 4), IN(2, 2, 5, 4)}, VIEWS},
    {"einsum_outer", c_einsum_outer, 2, {IN(3), IN(4)}, 0},
    {"einsum_diagonal", c_einsum_diagonal, 1, {IN(4, 4)}, VIEWS},
    {"einsum_sum", c_einsum_sum, 1, {IN(3, 4, 2)}, VIEWS},
    {"einsum_implicit_output", c_einsum_implicit, 2, {IN(3, 4), IN(4, 2)}, VIEWS},
    {"einsum_ellipsis_broadcast", c_einsum_ellipsis, 2, {IN(2, 1, 3, 4), IN(3, 4, 2)}, VIEWS},
    {"einsum_three_operands", c_einsum_chain, 3, {IN(2, 3), IN(3, 4), IN(4, 2)}, VIEWS},
    {"einsum_batch_trace", c_einsum_trace_batch, 2, {IN(2, 3, 3), IN(2, 4)}, VIEWS},
    {"outer", c_outer, 2, {IN(4), IN(3)}, 0},
    {"addmm", c_addmm, 3, {IN(1, 4), IN(3, 5), IN(5, 4)}, VIEWS},
    {"baddbmm", c_baddbmm, 3, {IN(3, 1), IN(2, 3, 4), IN(2, 4, 5)}, VIEWS},
    {"linear", c_linear, 3, {IN(2, 3, 6), IN(4, 6), IN(4)}, VIEWS},
    {"linear_2d", c_linear, 3, {IN(5, 3), IN(4, 3), IN(4)}, VIEWS},
    {"linear_no_bias", c_linear_no_bias, 2, {IN(5, 3), IN(4, 3)}, VIEWS},
    {"linear_vector_input", c_linear, 3, {IN(3), IN(2, 3), IN(2)}, VIEWS},
    {"linear_relu", c_linear_relu, 3, {IN(6, 3), IN(4, 3), IN(4)}, VIEWS},
    {"linear_relu_no_bias", c_linear_relu_no_bias, 2, {IN(6, 3), IN(4, 3)}, VIEWS},
    {"linear_relu_batched", c_linear_relu, 3, {IN(2, 5, 3), IN(4, 3), IN(4)}, VIEWS},
    {"conv2d", c_conv, 3, {IN(2, 3, 5, 5), IN(4, 3, 3, 3), IN(4)}, VIEWS},
    {"conv2d_stride_dilation", c_conv_strided, 2, {IN(1, 2, 7, 6), IN(3, 2, 3, 2)}, VIEWS},
    {"conv2d_groups", c_conv_groups, 3, {IN(2, 4, 4, 5), IN(6, 2, 3, 3), IN(6)}, VIEWS},
    {"conv2d_unpadded", c_conv_unpadded, 3, {IN(2, 2, 5, 4), IN(4, 2, 3, 2), IN(4)}, VIEWS},
    {"conv2d_stride_padding", c_conv_stride_pad, 3, {IN(2, 2, 5, 4), IN(4, 2, 3, 2), IN(4)},
     VIEWS},
    {"conv2d_groups_stride", c_conv_groups_stride, 3, {IN(2, 2, 5, 4), IN(4, 1, 3, 2), IN(4)},
     VIEWS},
    {"conv1d", c_conv1d, 3, {IN(2, 4, 9), IN(6, 2, 3), IN(6)}, VIEWS},
    {"conv2d_padding_same", c_conv_same, 3, {IN(1, 2, 4, 5), IN(3, 2, 2, 3), IN(3)}, VIEWS},
    {"conv1d_padding_same", c_conv1d_same, 3, {IN(2, 2, 6), IN(3, 2, 4), IN(3)}, VIEWS},
    {"conv_transpose2d", c_conv_transpose, 3, {IN(2, 2, 2, 3), IN(2, 2, 3, 2), IN(4)}, VIEWS},
    {"conv_transpose2d_dilated", c_conv_transpose_dilated, 2, {IN(1, 2, 3, 2), IN(2, 3, 2, 2)},
     VIEWS},
    {"max_pool2d_dilated", c_max_pool_dilated, 1, {IN(1, 2, 6, 7)}, VIEWS},
    {"max_pool2d_dilated_inside", c_max_pool_dilated_inside, 1, {IN(2, 1, 6, 7)}, VIEWS},
    {"max_pool2d", c_max_pool, 1, {IN(2, 3, 4, 6)}, VIEWS},
    {"max_pool2d_padded", c_max_pool_pad, 1, {IN(1, 2, 5, 7)}, VIEWS},
    {"max_pool2d_rect_padded", c_max_pool_rect_pad, 1, {IN(2, 3, 5, 6)}, VIEWS},
    {"max_pool2d_rect_stride", c_max_pool_rect, 1, {IN(2, 3, 5, 6)}, VIEWS},
    {"max_pool2d_ceil", c_max_pool_ceil, 1, {IN(2, 3, 5, 6)}, VIEWS},
    {"max_pool2d_padded_ceil", c_max_pool_pad_ceil, 1, {IN(2, 3, 5, 6)}, VIEWS},
    {"relu_max_pool2d", c_relu_max_pool, 1, {IN(2, 3, 4, 6)}, VIEWS},
    {"relu_max_pool2d_padded", c_relu_max_pool_pad, 1, {IN(1, 2, 5, 7)}, VIEWS},
    {"avg_pool2d", c_avg_pool, 1, {IN(2, 3, 4, 6)}, VIEWS},
    {"avg_pool2d_exclude_pad", c_avg_pool_exclude, 1, {IN(1, 2, 5, 7)}, VIEWS},
    {"avg_pool2d_padded", c_avg_pool_pad, 1, {IN(2, 3, 5, 6)}, VIEWS},
    {"avg_pool2d_padded_ceil", c_avg_pool_pad_ceil, 1, {IN(2, 3, 5, 6)}, VIEWS},
    {"adaptive_avg_pool2d", c_adaptive_pool, 1, {IN(1, 2, 5, 7)}, VIEWS},
    {"softmax", c_softmax, 1, {WIDE(3, 7)}, VIEWS},
    {"softmax_mid_dim", c_softmax_mid, 1, {WIDE(2, 5, 3)}, VIEWS},
    {"softmax_first_dim", c_softmax_first, 1, {WIDE(2, 3, 4)}, VIEWS},
    {"softmax_last_dim_3d", c_softmax, 1, {WIDE(2, 3, 4)}, VIEWS},
    {"log_softmax", c_log_softmax, 1, {WIDE(4, 6)}, VIEWS},
    {"log_softmax_first_dim", c_log_softmax_first, 1, {WIDE(2, 3, 4)}, VIEWS},
    {"log_softmax_mid_dim", c_log_softmax_mid, 1, {WIDE(2, 3, 4)}, VIEWS},
    {"log_softmax_last_dim_3d", c_log_softmax, 1, {WIDE(2, 3, 4)}, VIEWS},
    {"sdpa_causal", c_sdpa_causal, 3, {IN(2, 2, 5, 4), IN(2, 2, 5, 4), IN(2, 2, 5, 3)}, VIEWS},
    {"sdpa_bool_mask", c_sdpa_mask, 4,
     {IN(1, 2, 4, 3), IN(1, 2, 6, 3), IN(1, 2, 6, 5), FIXED(1, 1, 4, 6)}, VIEWS},
    /* more rows than one of CUDA's 32-row tiles, the last one partial */
    {"sdpa_causal_over_tiles", c_sdpa_causal, 3,
     {IN(1, 2, 45, 8), IN(1, 2, 45, 8), IN(1, 2, 45, 6)}, VIEWS},
    {"sdpa_mask_over_tiles", c_sdpa_mask, 4,
     {IN(1, 1, 40, 6), IN(1, 1, 37, 6), IN(1, 1, 37, 5), FIXED(1, 1, 40, 37)}, VIEWS},
    /* head dims past what CUDA's tiled kernels hold */
    {"sdpa_wide_heads", c_sdpa_causal, 3, {IN(1, 1, 3, 80), IN(1, 1, 4, 80), IN(1, 1, 4, 72)},
     VIEWS},
    {"self_attention_packed", c_self_attention_packed, 1, {IN(2, 5, 12)}, 0},
    {"sdpa_dropout", c_sdpa_dropout, 3, {IN(2, 1, 6, 4), IN(2, 1, 7, 4), IN(2, 1, 7, 2)},
     EM_CASE_RNG},
    {"index_select_dim0", c_index_select0, 2, {IN(5, 3), INDEX(5, 7)}, VIEWS},
    {"index_select_dim1", c_index_select1, 2, {IN(3, 5, 2), INDEX(5, 4)}, VIEWS},
    {"gather", c_gather, 2, {IN(3, 6), INDEX(6, 3, 4)}, VIEWS},
    {"embedding", c_embedding, 2, {IN(7, 4), INDEX(7, 2, 5)}, VIEWS},
    {"embedding_padded", c_embedding_padded, 2, {IN(7, 4), INDEX(6, 2, 5)}, VIEWS},
    {"scatter", c_scatter, 2, {IN(3, 5), IN(2, 3)}, ALL_LAYOUTS},
    {"scatter_wide_src", c_scatter_wide_src, 2, {IN(3, 4), IN(3, 5)}, VIEWS},
    {"scatter_value", c_scatter_value, 2, {IN(3, 4), INDEX(4, 3, 6)}, ALL_LAYOUTS},
    {"scatter_add_dim0", c_scatter_add0, 3, {IN(3, 4), IN(5, 4), INDEX(3, 5, 4)}, ALL_LAYOUTS},
    {"scatter_add_dim1_small_index", c_scatter_add1, 3,
     {IN(2, 3, 4), IN(2, 5, 4), INDEX(3, 2, 5, 3)}, VIEWS},
    {"index_fill", c_index_fill, 2, {IN(3, 4), INDEX(4, 3)}, ALL_LAYOUTS},
    {"index_put", c_index_put, 2, {IN(4, 3), IN(3)}, VIEWS},
    {"index_put_accumulate", c_index_put_accumulate, 2, {IN(4, 3), IN(2, 3)}, ALL_LAYOUTS},
    {"index_put_rows", c_index_put_rows, 2, {IN(3, 2, 2), IN(2, 1)}, VIEWS},
    {"one_hot", c_one_hot, 1, {INDEX(5, 2, 3)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"masked_fill", c_masked_fill, 2, {IN(3, 4), FIXED(4)}, VIEWS},
    {"tril", c_tril, 1, {IN(2, 3, 4)}, VIEWS},
    {"triu", c_triu, 1, {IN(4, 3)}, VIEWS},
    {"topk", c_topk, 1, {IN(3, 7)}, VIEWS},
    {"cross_entropy", c_cross_entropy, 2, {WIDE(6, 5), INDEX(5, 6)}, VIEWS},
    {"cross_entropy_smoothing_sum", c_cross_entropy_smooth, 2, {WIDE(6, 5), INDEX(5, 6)}, VIEWS},
    {"cross_entropy_nd", c_cross_entropy_nd, 2, {WIDE(2, 4, 3, 2), INDEX(4, 2, 3, 2)}, VIEWS},
    {"cross_entropy_probs", c_cross_entropy_probs, 3, {WIDE(4, 5), IN(4, 5), FIXED(5)}, VIEWS},
    {"cross_entropy_probs_nd", c_cross_entropy_probs_nd, 2, {WIDE(2, 3, 4), UNIT(2, 3, 4)},
     VIEWS},
    {"mse_loss", c_mse, 2, {IN(4, 3), IN(4, 3)}, VIEWS},
    {"l1_loss", c_l1, 2, {IN(4, 3), FIXED(4, 3)}, VIEWS},
    {"bce_with_logits", c_bce, 2, {WIDE(4, 3), UNIT(4, 3)}, VIEWS},
    {"bce_with_logits_weighted", c_bce_weighted, 4,
     {WIDE(4, 3), UNIT(4, 3), POS(3), POS(4, 1)}, VIEWS},
    {"binary_cross_entropy", c_bce_probs, 2, {WIDE(4, 3), UNIT(4, 3)}, VIEWS},
    {"binary_cross_entropy_target_grad", c_bce_probs_target_grad, 2, {WIDE(4, 3), WIDE(4, 3)},
     VIEWS},
    {"smooth_l1_loss", c_smooth_l1, 2, {WIDE(4, 3), WIDE(4, 3)}, VIEWS},
    {"huber_loss", c_huber, 2, {WIDE(4, 3), WIDE(4, 3)}, VIEWS},
    {"kl_div", c_kl_div, 2, {WIDE(3, 4), WIDE(3, 4)}, VIEWS},
    {"kl_div_log_target", c_kl_div_log_target, 2, {WIDE(3, 4), WIDE(3, 4)}, VIEWS},
    {"cosine_similarity", c_cosine_similarity, 2, {IN(3, 4, 2), IN(4, 1)}, VIEWS},
    {"pairwise_distance", c_pairwise_distance, 2, {IN(3, 5), IN(3, 5)}, VIEWS},
    {"cosine_embedding_loss", c_cosine_embedding, 2, {IN(5, 4), IN(5, 4)}, VIEWS},
    {"margin_ranking_loss", c_margin_ranking, 2, {IN(2, 3), IN(2, 3)}, VIEWS},
    {"layer_norm", c_layer_norm, 3, {IN(3, 6), IN(6), IN(6)}, VIEWS},
    {"layer_norm_no_affine", c_layer_norm_plain, 1, {IN(2, 3, 6)}, 0},
    {"layer_norm_weight_only", c_layer_norm_weight, 2, {IN(4, 6), IN(6)}, 0},
    /* more rows than a block of the weight and bias gradients' partial sums (64) */
    {"layer_norm_many_rows", c_layer_norm, 3, {IN(70, 6), IN(6), IN(6)}, 0},
    {"batch_norm_training", c_batch_norm, 3, {IN(4, 3, 2, 2), IN(3), IN(3)}, VIEWS},
    {"batch_norm_running_stats", c_batch_norm_stats, 3, {IN(4, 3, 2, 2), IN(3), IN(3)},
     EM_CASE_NO_GRAD},
    {"group_norm", c_group_norm, 3, {IN(2, 6, 2, 2), IN(6), IN(6)}, VIEWS},
    {"group_norm_no_affine", c_group_norm_plain, 1, {IN(3, 4, 5)}, VIEWS},
    {"instance_norm", c_instance_norm, 3, {IN(2, 3, 4), IN(3), IN(3)}, VIEWS},
    {"instance_norm_running_stats", c_instance_norm_stats, 3, {IN(2, 3, 4), IN(3), IN(3)},
     EM_CASE_NO_GRAD},
    {"instance_norm_by_running_stats", c_instance_norm_running, 3, {IN(2, 3, 4), IN(3), IN(3)},
     VIEWS},
    {"dropout", c_dropout, 1, {IN(5, 8)}, EM_CASE_RNG},
    {"rand_uniform", c_rand, 0, {NO_INPUT}, EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    /* normal draws go through log/sin/cos, whose last bit may differ between libraries */
    {"randn_normal", c_randn, 0, {NO_INPUT}, EM_CASE_NO_GRAD | EM_CASE_RNG},
    {"randint", c_randint, 0, {NO_INPUT}, EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"bernoulli", c_bernoulli, 0, {NO_INPUT}, EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"multinomial", c_multinomial, 1, {POS(3, 8)}, EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"sample_logits", c_sample_logits, 1, {WIDE(4, 9)},
     EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"full_arange", c_full, 0, {NO_INPUT}, EM_CASE_NO_GRAD},
    {"unary_ints_transposed", c_unary_ints, 1, {WIDE(3, 4)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"binary_ints_broadcast", c_binary_ints, 2, {WIDE(3, 4), WIDE(4)},
     EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"compare_ints_and_bools", c_compare_ints, 2, {WIDE(3, 3), WIDE(3, 3)},
     EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"unary_in_f64", c_unary_f64, 1, {WIDE(3, 4)}, 0},
    {"unary_offset_run", c_unary_offset, 1, {WIDE(38)}, 0},
    {"sigmoid_expanded", c_sigmoid_expanded, 1, {WIDE(3, 5)}, 0},
    {"mul_by_0d_tensor", c_mul_scalar_tensor, 2, {IN(3, 4), IN(5)}, 0},
    {"pow_transposed", c_pow_transposed, 2, {POS(4, 3), IN(3, 4)}, 0},
    {"where_strided", c_where_strided, 3, {IN(4, 3), IN(3, 4), FIXED(4)}, 0},
    {"cast_chain_halves", c_cast_chain, 1, {WIDE(5, 7)}, EM_CASE_NO_GRAD},
    {"contiguous_expanded", c_contiguous_expanded, 1, {IN(3, 4)}, 0},
    {"fill_strided", c_fill_strided, 1, {IN(4, 6)}, 0},
    {"empty_sum_exp", c_empty_sum, 1, {IN(0, 3)}, 0},
    {"sum_dims02_transposed", c_sum_dims02_transposed, 1, {IN(3, 4, 5)}, 0},
    {"mean_sliced", c_mean_sliced, 1, {IN(3, 6, 2)}, 0},
    {"var_dims01_keepdim", c_var_dims01, 1, {IN(3, 4, 5)}, VIEWS},
    {"amax_ints", c_amax_ints, 1, {WIDE(3, 4, 5)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"sum_ints_and_bools", c_sum_ints, 1, {WIDE(5, 3)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"argmax_ties", c_argmax_ties, 1, {WIDE(6, 5)}, EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"argmin_ties_transposed", c_argmin_ties_transposed, 1, {WIDE(6, 5)},
     EM_CASE_NO_GRAD | EM_CASE_EXACT},
    /* long enough to be cut into chunks (too long for the finite-difference check) */
    {"sum_all_long", c_sum_all_long, 1, {IN(70001)}, EM_CASE_NO_GRAD},
    {"sum_columns_long", c_sum_cols_long, 1, {IN(20000, 3)}, EM_CASE_NO_GRAD},
    {"amax_long", c_amax_long, 1, {IN(50000, 2)}, EM_CASE_NO_GRAD},
    {"argmax_ties_long", c_argmax_ties_long, 1, {WIDE(3, 40000)},
     EM_CASE_NO_GRAD | EM_CASE_EXACT},
    {"var_long", c_var_long, 1, {IN(2, 30000)}, EM_CASE_NO_GRAD},
    {"softmax_long_rows", c_softmax, 1, {WIDE(2, 1500)}, 0},
    {"log_softmax_many_rows", c_log_softmax, 1, {WIDE(70, 9)}, 0},
    {"index_select_repeats", c_index_select0, 2, {IN(3, 4), INDEX(3, 10)}, 0},
    {"index_select_strided", c_index_select_strided, 2, {IN(4, 3), INDEX(4, 6)}, 0},
    {"gather_dim0_repeats", c_gather_dim0, 2, {IN(5, 3), INDEX(5, 7, 3)}, 0},
    {"gather_transposed_index", c_gather_transposed_index, 2, {IN(4, 6), INDEX(6, 5, 4)}, 0},
    {"embedding_repeats", c_embedding, 2, {IN(4, 3), INDEX(4, 6, 5)}, 0},
    {"rand_uniform_f16_twice", c_rand_f16, 0, {NO_INPUT},
     EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"rand_uniform_f64_twice", c_rand_f64, 0, {NO_INPUT},
     EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"randint_i8_twice", c_randint_i8, 0, {NO_INPUT},
     EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
    {"bernoulli_bool_twice", c_bernoulli_bool, 0, {NO_INPUT},
     EM_CASE_NO_GRAD | EM_CASE_RNG | EM_CASE_EXACT},
};

const int em_n_op_cases = (int)(sizeof em_op_cases / sizeof em_op_cases[0]);

const unsigned em_case_layouts[EM_CASE_N_LAYOUTS] = {0, EM_CASE_PERMUTED, EM_CASE_SLICED,
                                                     EM_CASE_BROADCAST};

bool em_op_case_has_layout(int k, unsigned layout)
{
    return layout == 0 || (em_op_cases[k].flags & layout);
}

const char *em_case_layout_name(unsigned layout)
{
    switch (layout) {
    case EM_CASE_PERMUTED:
        return "permuted";
    case EM_CASE_SLICED:
        return "sliced";
    case EM_CASE_BROADCAST:
        return "broadcast";
    default:
        return "contiguous";
    }
}

/* The shape of the leaf behind an input of shape s in layout. */
static em_shape leaf_shape(em_shape s, unsigned layout)
{
    em_shape l = s;
    if (layout == EM_CASE_PERMUTED)
        for (int i = 0; i < s.ndim; i++)
            l.d[i] = s.d[s.ndim - 1 - i];
    else if (layout == EM_CASE_SLICED && s.ndim > 0)
        l.d[0] = 2 * s.d[0];
    else if (layout == EM_CASE_BROADCAST && s.ndim > 0)
        l.d[0] = 1;
    return l;
}

/* The view of shape s over leaf in layout. */
static em_tensor *layout_view(em_tensor *leaf, em_shape s, unsigned layout)
{
    if (layout == EM_CASE_PERMUTED) {
        int perm[EM_MAX_DIMS];
        for (int i = 0; i < s.ndim; i++)
            perm[i] = s.ndim - 1 - i;
        return em_permute(leaf, perm);
    }
    if (layout == EM_CASE_SLICED && s.ndim > 0)
        return em_slice(leaf, 0, 1, leaf->shape[0], 2);
    if (layout == EM_CASE_BROADCAST)
        return em_expand(leaf, s);
    return leaf;
}

bool em_op_case_inputs(int k, unsigned layout, em_dtype dtype, em_device dev, bool requires_grad,
                       em_tensor **out)
{
    const em_op_case *c = &em_op_cases[k];
    for (int i = 0; i < c->n_inputs; i++) {
        const em_case_input *in = &c->in[i];
        em_generator gen = em_generator_new(1000003u * (uint64_t)k + 7919u * (uint64_t)i + 1);
        em_tensor *t = in->index_bound > 0
                           ? em_randint(in->shape, EM_I64, 0, in->index_bound, &gen)
                           : em_to_dtype(em_uniform(leaf_shape(in->shape, layout), EM_F64, in->lo,
                                                    in->hi, &gen),
                                         dtype);
        if (t && dev != EM_CPU)
            t = em_to_device(t, dev);
        if (!t)
            return false;
        if (requires_grad && in->index_bound == 0 && !in->fixed)
            em_requires_grad_(t, true);
        out[i] = t;
    }
    return true;
}

em_tensor *em_op_case_apply(int k, unsigned layout, em_tensor *const *leaves, em_device dev)
{
    const em_op_case *c = &em_op_cases[k];
    em_tensor *in[EM_CASE_MAX_INPUTS];
    for (int i = 0; i < c->n_inputs; i++)
        in[i] = c->in[i].index_bound > 0 ? leaves[i]
                                         : layout_view(leaves[i], c->in[i].shape, layout);
    em_manual_seed(0x5eed0000u + (uint64_t)k);
    return c->apply(in, dev);
}
