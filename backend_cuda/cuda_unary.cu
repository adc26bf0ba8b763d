/* Unary elementwise kernels and their gradients on CUDA, with backend_cpu/cpu_unary.c's formulas:
 * f32 and f64 natively, f16/bf16 computed in f32, integer dtypes (in i64, wrapping) for the
 * sign/abs/scale family. One functor per op, instantiated per dtype on the elementwise family. */
#include "backend/kernel_args_internal.h"
#include "backend_cuda/cuda_math_internal.cuh"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

const double SQRT_2_OVER_PI = 0.79788456080286535588; /* sqrt(2 / pi) */
const double SQRT_HALF = 0.70710678118654752440;      /* 1 / sqrt(2) */
const double INV_SQRT_2PI = 0.39894228040143267794;   /* 1 / sqrt(2 pi) */
const double GELU_KAPPA = 0.044715;

/* Ops of a few arithmetic instructions: their flat runs get a kernel each (vector lanes). The
 * others (libm, division) and every strided view go through one kernel per dtype that switches
 * on the op at run time. */
constexpr bool light_op(int op)
{
    return op == EM_UNARY_NEG || op == EM_UNARY_ABS || op == EM_UNARY_SIGN ||
           op == EM_UNARY_SQUARE || op == EM_UNARY_RELU || op == EM_UNARY_LEAKY_RELU ||
           op == EM_UNARY_CLAMP || op == EM_UNARY_ADD_SCALAR || op == EM_UNARY_MUL_SCALAR ||
           op == EM_UNARY_FLOOR || op == EM_UNARY_CEIL || op == EM_UNARY_ROUND;
}

/* op(v) in compute type C (float or double). */
template <class C> __device__ __forceinline__ C unary_value(int op, C v, C p0, C p1)
{
    const C h = (C)0.5, one = 1, zero = 0;
    switch (op) {
    case EM_UNARY_NEG: return -v;
    case EM_UNARY_ABS: return m_fabs(v);
    case EM_UNARY_SIGN: return v > zero ? one : v < zero ? -one : v;
    case EM_UNARY_EXP: return m_exp(v);
    case EM_UNARY_LOG: return m_log(v);
    case EM_UNARY_LOG1P: return m_log1p(v);
    case EM_UNARY_SQRT: return m_sqrt(v);
    case EM_UNARY_RSQRT: return one / m_sqrt(v);
    case EM_UNARY_SQUARE: return v * v;
    case EM_UNARY_RECIPROCAL: return one / v;
    case EM_UNARY_SIN: return m_sin(v);
    case EM_UNARY_COS: return m_cos(v);
    case EM_UNARY_TANH: return m_tanh(v);
    case EM_UNARY_SIGMOID: return one / (one + m_exp(-v));
    case EM_UNARY_RELU: return v < zero ? zero : v;
    case EM_UNARY_LEAKY_RELU: return v < zero ? v * p0 : v;
    case EM_UNARY_GELU: return h * v * (one + m_erf(v * (C)SQRT_HALF));
    case EM_UNARY_GELU_TANH:
        return h * v * (one + m_tanh((C)SQRT_2_OVER_PI * (v + (C)GELU_KAPPA * v * v * v)));
    case EM_UNARY_SILU: return v / (one + m_exp(-v));
    case EM_UNARY_FLOOR: return m_floor(v);
    case EM_UNARY_CEIL: return m_ceil(v);
    case EM_UNARY_ROUND: return m_rint(v);
    case EM_UNARY_CLAMP: return (v < p0 ? p0 : v) > p1 ? p1 : (v < p0 ? p0 : v);
    case EM_UNARY_ADD_SCALAR: return v + p0;
    case EM_UNARY_MUL_SCALAR: return v * p0;
    default: return m_pow(v, p0); /* EM_UNARY_POW_SCALAR */
    }
}

/* op(v) in i64, wrapping through uint64_t; clamp's lo/hi are the integers in [min, max]. */
__device__ __forceinline__ int64_t unary_int_value(int op, int64_t v, int64_t p0, int64_t lo,
                                                   int64_t hi)
{
    switch (op) {
    case EM_UNARY_NEG: return (int64_t)(0 - (uint64_t)v);
    case EM_UNARY_ABS: return v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
    case EM_UNARY_SIGN: return (int64_t)(v > 0) - (int64_t)(v < 0);
    case EM_UNARY_SQUARE: return (int64_t)((uint64_t)v * (uint64_t)v);
    case EM_UNARY_RELU: return v < 0 ? 0 : v;
    case EM_UNARY_CLAMP: return (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v);
    case EM_UNARY_ADD_SCALAR: return (int64_t)((uint64_t)v + (uint64_t)p0);
    default: return (int64_t)((uint64_t)v * (uint64_t)p0); /* EM_UNARY_MUL_SCALAR */
    }
}

/* The op as a functor: OP fixed at compile time (OP = -1: op chosen at run time, heavy). */
template <class C, int OP> struct unary_fn {
    static constexpr bool heavy() { return OP < 0; }
    int op;
    C p0, p1;
    __device__ C operator()(C v) const { return unary_value<C>(OP < 0 ? op : OP, v, p0, p1); }
};

/* The integer ops: all light, one kernel per dtype switching at run time. */
struct unary_int_fn {
    int op;
    int64_t p0, lo, hi;
    __device__ int64_t operator()(int64_t v) const { return unary_int_value(op, v, p0, lo, hi); }
};

/* Runs float op with a flat kernel of its own when it is light op OP or a later one, else with
 * the run-time switch. */
template <class T, int OP = 0>
int unary_by_op(em_unary_op op, double p0, double p1, const em_arr *out, const em_arr *in)
{
    typedef typename T::compute C;
    unary_fn<C, -1> any = {op, (C)p0, (C)p1};
    if constexpr (OP == EM_UNARY_COUNT) {
        return elementwise<T, T>(any, out, &in);
    } else if constexpr (!light_op(OP)) {
        return unary_by_op<T, OP + 1>(op, p0, p1, out, in);
    } else {
        if (op != OP)
            return unary_by_op<T, OP + 1>(op, p0, p1, out, in);
        unary_fn<C, OP> flat = {op, (C)p0, (C)p1};
        return elementwise<T, T>(flat, any, out, &in);
    }
}

/* Integer op (em_unary_int_supported) with parameters as integers: truncated, saturated, NaN as
 * 0; clamp's bounds moved in to the integers within [min, max]. */
template <class T> int unary_int(em_unary_op op, double p0, double p1, const em_arr *out,
                                 const em_arr *in)
{
    const int64_t q0 = em_f64_to_i64(p0), q1 = em_f64_to_i64(p1);
    const unary_int_fn f = {op, q0, p0 > (double)q0 ? q0 + 1 : q0, p1 < (double)q1 ? q1 - 1 : q1};
    return elementwise<T, T>(f, out, &in);
}

/* ---- gradients: gx = gy * f'(x), v the operand the op reads (x, y, or gy when neither) ---- */

template <class C>
__device__ __forceinline__ C unary_grad_value(int op, bool from_y, C g, C v, C p0, C p1)
{
    const C h = (C)0.5, one = 1, two = 2, zero = 0;
    const C beta = (C)SQRT_2_OVER_PI, kappa = (C)GELU_KAPPA;
    switch (op) {
    case EM_UNARY_NEG: return -g;
    case EM_UNARY_ABS: return v > zero ? g : v < zero ? -g : zero;
    case EM_UNARY_SIGN: case EM_UNARY_FLOOR: case EM_UNARY_CEIL: case EM_UNARY_ROUND:
        return zero;
    case EM_UNARY_EXP: return from_y ? g * v : g * m_exp(v);
    case EM_UNARY_LOG: return g / v;
    case EM_UNARY_LOG1P: return g / (one + v);
    case EM_UNARY_SQRT: return from_y ? g * h / v : g * h / m_sqrt(v);
    case EM_UNARY_RSQRT: return from_y ? -h * g * v * v * v : -h * g / (v * m_sqrt(v));
    case EM_UNARY_SQUARE: return g * two * v;
    case EM_UNARY_RECIPROCAL: return from_y ? -g * v * v : -g / (v * v);
    case EM_UNARY_SIN: return g * m_cos(v);
    case EM_UNARY_COS: return -g * m_sin(v);
    case EM_UNARY_TANH: {
        if (from_y)
            return g * (one - v * v);
        const C t = m_tanh(v);
        return g * (one - t * t);
    }
    case EM_UNARY_SIGMOID: {
        if (from_y)
            return g * v * (one - v);
        const C e = one + m_exp(-v);
        return g / e * (one - one / e);
    }
    case EM_UNARY_RELU: return v > zero ? g : zero;
    case EM_UNARY_LEAKY_RELU: return v > zero ? g : g * p0;
    case EM_UNARY_GELU:
        return g * (h * (one + m_erf(v * (C)SQRT_HALF)) + v * (C)INV_SQRT_2PI * m_exp(-h * v * v));
    case EM_UNARY_GELU_TANH: { /* PyTorch's formula, t = tanh(beta (x + kappa x^3)) */
        const C t = m_tanh(beta * (v + kappa * v * v * v));
        return g * (h * (one + t) + h * v * (one - t * t) * beta * (one + (C)3 * kappa * v * v));
    }
    case EM_UNARY_SILU: { /* s (1 + x (1 - s)), s = sigmoid(x) */
        const C e = one + m_exp(-v);
        return g / e * (one + v * (one - one / e));
    }
    case EM_UNARY_CLAMP: return v >= p0 && v <= p1 ? g : zero;
    case EM_UNARY_ADD_SCALAR: return g;
    case EM_UNARY_MUL_SCALAR: return g * p0;
    default: /* EM_UNARY_POW_SCALAR */
        return p0 == zero ? zero : g * p0 * m_pow(v, p0 - one);
    }
}

template <class C, int OP> struct unary_grad_fn {
    static constexpr bool heavy() { return OP < 0; }
    int op;
    bool from_y;
    C p0, p1;
    __device__ C operator()(C g, C v) const
    {
        return unary_grad_value<C>(OP < 0 ? op : OP, from_y, g, v, p0, p1);
    }
};

template <class T, int OP = 0>
int grad_by_op(em_unary_op op, double p0, double p1, bool from_y, const em_arr *gx,
               const em_arr *const *gy_src)
{
    typedef typename T::compute C;
    unary_grad_fn<C, -1> any = {op, from_y, (C)p0, (C)p1};
    if constexpr (OP == EM_UNARY_COUNT) {
        return elementwise<T, T, T>(any, gx, gy_src);
    } else if constexpr (!light_op(OP)) {
        return grad_by_op<T, OP + 1>(op, p0, p1, from_y, gx, gy_src);
    } else {
        if (op != OP)
            return grad_by_op<T, OP + 1>(op, p0, p1, from_y, gx, gy_src);
        unary_grad_fn<C, OP> flat = {op, from_y, (C)p0, (C)p1};
        return elementwise<T, T, T>(flat, any, gx, gy_src);
    }
}

} // namespace

/* out = op(in); out and in of one shape and dtype */
extern "C" int em_cuda_unary(em_unary_op op, double p0, double p1, const em_arr *out,
                             const em_arr *in)
{
    if ((unsigned)op >= EM_UNARY_COUNT || in->dtype != out->dtype || !em_arr_same_shape(out, in))
        return EM_KERNEL_UNSUPPORTED;
    if (em_dtype_is_float(out->dtype))
        return dispatch_float(out->dtype, [&](auto tag) {
            return unary_by_op<decltype(tag)>(op, p0, p1, out, in);
        });
    if (!em_unary_int_supported(op))
        return EM_KERNEL_UNSUPPORTED;
    return dispatch_int(out->dtype,
                        [&](auto tag) { return unary_int<decltype(tag)>(op, p0, p1, out, in); });
}

/* gx = gy * op'(x or y); gx, gy and the operand read of one shape and float dtype */
extern "C" int em_cuda_unary_grad(em_unary_op op, double p0, double p1, const em_arr *gx,
                                  const em_arr *gy, const em_arr *x, const em_arr *y)
{
    if ((unsigned)op >= EM_UNARY_COUNT || !em_dtype_is_float(gx->dtype) ||
        gy->dtype != gx->dtype || !em_arr_same_shape(gx, gy))
        return EM_KERNEL_UNSUPPORTED;
    bool from_y;
    const em_arr *src = em_unary_grad_source(op, gy, x, y, &from_y);
    if (src == NULL || src->dtype != gx->dtype || !em_arr_same_shape(gx, src))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr *in[2] = {gy, src};
    return dispatch_float(gx->dtype, [&](auto tag) {
        return grad_by_op<decltype(tag)>(op, p0, p1, from_y, gx, in);
    });
}
