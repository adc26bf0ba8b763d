/* Unary elementwise kernels and their gradients on CUDA, with the formulas of
 * backend/unary_ops_internal.h that the CPU kernels run too: f32 and f64 natively, f16/bf16
 * computed in f32, integer dtypes (in i64, wrapping) for the sign/abs/scale family. One functor
 * per op, instantiated per dtype on the elementwise family. */
#include "backend/kernel_args_internal.h"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

/* Ops of a few arithmetic instructions: their flat runs get a kernel each (vector lanes). The
 * others (libm, division) and every strided view go through one kernel per dtype that switches
 * on the op at run time. */
constexpr bool light_op(int op)
{
    return op == EM_UNARY_NEG || op == EM_UNARY_ABS || op == EM_UNARY_SIGN ||
           op == EM_UNARY_SQUARE || op == EM_UNARY_RELU || op == EM_UNARY_LEAKY_RELU ||
           op == EM_UNARY_CLAMP || op == EM_UNARY_ADD_SCALAR || op == EM_UNARY_MUL_SCALAR ||
           op == EM_UNARY_FLOOR || op == EM_UNARY_CEIL || op == EM_UNARY_ROUND ||
           op == EM_UNARY_HARDTANH || op == EM_UNARY_HARDSWISH;
}

/* The formulas of unary_ops_internal.h by compute type C (float or double). */
__device__ __forceinline__ float value(int op, float v, const em_unary_params &p)
{
    return em_unary_value_f32((em_unary_op)op, v, &p);
}
__device__ __forceinline__ double value(int op, double v, const em_unary_params &p)
{
    return em_unary_value_f64((em_unary_op)op, v, &p);
}
__device__ __forceinline__ float grad_value(int op, bool from_y, float g, float v,
                                            const em_unary_params &p)
{
    return em_unary_grad_value_f32((em_unary_op)op, from_y, g, v, &p);
}
__device__ __forceinline__ double grad_value(int op, bool from_y, double g, double v,
                                             const em_unary_params &p)
{
    return em_unary_grad_value_f64((em_unary_op)op, from_y, g, v, &p);
}

/* The op as a functor: OP fixed at compile time (OP = -1: op chosen at run time, heavy). */
template <class C, int OP> struct unary_fn {
    static constexpr bool heavy() { return OP < 0; }
    int op;
    em_unary_params p;
    __device__ C operator()(C v) const { return value(OP < 0 ? op : OP, v, p); }
};

/* The integer ops: all light, one kernel per dtype switching at run time. */
struct unary_int_fn {
    int op;
    em_unary_int_params p;
    __device__ int64_t operator()(int64_t v) const
    {
        return em_unary_int_value((em_unary_op)op, v, &p);
    }
};

/* Runs float op with a flat kernel of its own when it is light op OP or a later one, else with
 * the run-time switch. */
template <class T, int OP = 0>
int unary_by_op(em_unary_op op, const em_unary_params *p, const em_arr *out, const em_arr *in)
{
    typedef typename T::compute C;
    unary_fn<C, -1> any = {op, *p};
    if constexpr (OP == EM_UNARY_COUNT) {
        return elementwise<T, T>(any, out, &in);
    } else if constexpr (!light_op(OP)) {
        return unary_by_op<T, OP + 1>(op, p, out, in);
    } else {
        if (op != OP)
            return unary_by_op<T, OP + 1>(op, p, out, in);
        unary_fn<C, OP> flat = {op, *p};
        return elementwise<T, T>(flat, any, out, &in);
    }
}

/* Integer op (em_unary_int_supported) with its parameters as integers. */
template <class T> int unary_int(em_unary_op op, const em_unary_params *p, const em_arr *out,
                                 const em_arr *in)
{
    const unary_int_fn f = {op, em_unary_int_params_of(p)};
    return elementwise<T, T>(f, out, &in);
}

/* ---- gradients: gx = gy * f'(x), v the operand the op reads (x, y, or gy when neither) ---- */

template <class C, int OP> struct unary_grad_fn {
    static constexpr bool heavy() { return OP < 0; }
    int op;
    bool from_y;
    em_unary_params p;
    __device__ C operator()(C g, C v) const
    {
        return grad_value(OP < 0 ? op : OP, from_y, g, v, p);
    }
};

template <class T, int OP = 0>
int grad_by_op(em_unary_op op, const em_unary_params *p, bool from_y, const em_arr *gx,
               const em_arr *const *gy_src)
{
    typedef typename T::compute C;
    unary_grad_fn<C, -1> any = {op, from_y, *p};
    if constexpr (OP == EM_UNARY_COUNT) {
        return elementwise<T, T, T>(any, gx, gy_src);
    } else if constexpr (!light_op(OP)) {
        return grad_by_op<T, OP + 1>(op, p, from_y, gx, gy_src);
    } else {
        if (op != OP)
            return grad_by_op<T, OP + 1>(op, p, from_y, gx, gy_src);
        unary_grad_fn<C, OP> flat = {op, from_y, *p};
        return elementwise<T, T, T>(flat, any, gx, gy_src);
    }
}

} // namespace

/* out = op(in); out and in of one shape and dtype */
extern "C" int em_cuda_unary(em_unary_op op, const em_unary_params *p, const em_arr *out,
                             const em_arr *in)
{
    if ((unsigned)op >= EM_UNARY_COUNT || in->dtype != out->dtype || !em_arr_same_shape(out, in))
        return EM_KERNEL_UNSUPPORTED;
    if (em_dtype_is_float(out->dtype))
        return dispatch_float(out->dtype, [&](auto tag) {
            return unary_by_op<decltype(tag)>(op, p, out, in);
        });
    if (!em_unary_int_supported(op))
        return EM_KERNEL_UNSUPPORTED;
    return dispatch_int(out->dtype,
                        [&](auto tag) { return unary_int<decltype(tag)>(op, p, out, in); });
}

/* gx = gy * op'(x or y); gx, gy and the operand read of one shape and float dtype */
extern "C" int em_cuda_unary_grad(em_unary_op op, const em_unary_params *p, const em_arr *gx,
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
        return grad_by_op<decltype(tag)>(op, p, from_y, gx, in);
    });
}
