/* Binary elementwise kernels and their gradients on CUDA, with the formulas of
 * backend/binary_ops_internal.h that the CPU kernels run too (arithmetic, maximum/minimum,
 * comparisons to bool), and where(): f16/bf16 computed in f32, integers and bool in i64.
 * Broadcast inputs arrive with stride 0. */
#include "backend/kernel_args_internal.h"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

/* The formulas of binary_ops_internal.h by compute type C (float, double or int64_t). */
__device__ __forceinline__ float value(int op, float a, float b)
{
    return em_binary_value_f32((em_binary_op)op, a, b);
}
__device__ __forceinline__ double value(int op, double a, double b)
{
    return em_binary_value_f64((em_binary_op)op, a, b);
}
__device__ __forceinline__ int64_t value(int op, int64_t a, int64_t b)
{
    return em_binary_int_value((em_binary_op)op, a, b);
}
__device__ __forceinline__ float grad_value(int op, bool wrt_b, float g, float a, float b, float y)
{
    return em_binary_grad_value_f32((em_binary_op)op, wrt_b, g, a, b, y);
}
__device__ __forceinline__ double grad_value(int op, bool wrt_b, double g, double a, double b,
                                             double y)
{
    return em_binary_grad_value_f64((em_binary_op)op, wrt_b, g, a, b, y);
}

/* What a functor needs at run time: the op, and for a gradient the operand it is taken by. */
struct binary_args {
    int op;
    bool wrt_b;
};

/* a op b as a functor on compute type C: OP fixed at compile time, or OP = -1 for the run-time
 * switch (heavy: pow). */
template <class C, int OP> struct binary_fn {
    static constexpr bool heavy() { return OP < 0; }
    binary_args p;
    __device__ C operator()(C a, C b) const { return value(OP < 0 ? p.op : OP, a, b); }
};

/* g times the partial derivative of y = a op b by a or b, as binary_fn. */
template <class C, int OP> struct binary_grad_fn {
    static constexpr bool heavy() { return OP < 0; }
    binary_args p;
    __device__ C operator()(C g, C a, C b, C y) const
    {
        return grad_value(OP < 0 ? p.op : OP, p.wrt_b, g, a, b, y);
    }
};

/* 1 when comparison op holds, else 0: one kernel per dtype, the comparison chosen at run time
 * among the list's. */
#define COMPARE_CASE(o)                                                                           \
    case o: return value(o, a, b) != 0;
template <class C> struct compare_fn {
    int op;
    __device__ int64_t operator()(C a, C b) const
    {
        switch (op) {
            EM_BINARY_COMPARE_OPS(COMPARE_CASE)
        }
        return 0;
    }
};

/* Ops of a few instructions: their flat runs get a kernel each (vector lanes). pow and every
 * strided view go through one kernel per dtype that switches on the op at run time. */
constexpr bool light_op(int op)
{
    return op == EM_BINARY_ADD || op == EM_BINARY_SUB || op == EM_BINARY_MUL ||
           op == EM_BINARY_DIV || op == EM_BINARY_MAXIMUM || op == EM_BINARY_MINIMUM;
}

/* run(flat, any) with Fn's functor of op at compile time as flat where op is light op OP or a
 * later one (and one that C computes: integers have no division), else the run-time one, and the
 * run-time one as any. */
template <template <class, int> class Fn, class C, int OP = 0, class Run>
int by_op(binary_args p, const Run &run)
{
    const Fn<C, -1> any = {p};
    if constexpr (OP == EM_BINARY_COUNT) {
        return run(any, any);
    } else if constexpr (!light_op(OP) ||
                         (!std::is_floating_point<C>::value && OP == EM_BINARY_DIV)) {
        return by_op<Fn, C, OP + 1>(p, run);
    } else {
        if (p.op != OP)
            return by_op<Fn, C, OP + 1>(p, run);
        const Fn<C, OP> flat = {p};
        return run(flat, any);
    }
}

template <class T> struct where_fn {
    __device__ T operator()(int64_t c, T a, T b) const { return c ? a : b; }
};

} // namespace

/* out = a op b (em_binary_args_ok) */
extern "C" int em_cuda_binary(em_binary_op op, const em_arr *out, const em_arr *a,
                              const em_arr *b)
{
    if (!em_binary_args_ok(op, out, a, b))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr *ab[2] = {a, b};
    if (em_binary_is_compare(op))
        return dispatch_dtype(a->dtype, [&](auto tag) {
            typedef decltype(tag) T;
            const compare_fn<typename T::compute> f = {op};
            return elementwise<tag_bool, T, T>(f, out, ab);
        });
    auto run = [&](auto tag) {
        typedef decltype(tag) T;
        return by_op<binary_fn, typename T::compute>({op, false}, [&](auto flat, auto any) {
            return elementwise<T, T, T>(flat, any, out, ab);
        });
    };
    return em_dtype_is_float(a->dtype) ? dispatch_float(a->dtype, run)
                                       : dispatch_int(a->dtype, run);
}

/* gx = g times the partial derivative of y = a op b by a or b (em_binary_grad_args_ok) */
extern "C" int em_cuda_binary_grad(em_binary_op op, bool wrt_b, const em_arr *gx,
                                   const em_arr *g, const em_arr *a, const em_arr *b,
                                   const em_arr *y)
{
    if (!em_binary_grad_args_ok(op, gx, g, a, b, y))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr *in[4] = {g, a, b, y};
    return dispatch_float(gx->dtype, [&](auto tag) {
        typedef decltype(tag) T;
        return by_op<binary_grad_fn, typename T::compute>({op, wrt_b}, [&](auto flat, auto any) {
            return elementwise<T, T, T, T, T>(flat, any, gx, in);
        });
    });
}

/* out = cond ? a : b elementwise; cond bool, a and b of out's dtype, all of out's shape */
extern "C" int em_cuda_where(const em_arr *out, const em_arr *cond, const em_arr *a,
                             const em_arr *b)
{
    if (cond->dtype != EM_BOOL || a->dtype != out->dtype || b->dtype != out->dtype ||
        !em_arr_same_shape(out, cond) || !em_arr_same_shape(out, a) || !em_arr_same_shape(out, b))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr *in[3] = {cond, a, b};
    return dispatch_raw(em_dtype_size(out->dtype), [&](auto tag) {
        typedef decltype(tag) R;
        return elementwise<R, tag_bool, R, R>(where_fn<typename R::storage>(), out, in);
    });
}
