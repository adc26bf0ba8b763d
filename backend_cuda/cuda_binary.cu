/* Binary elementwise kernels (arithmetic, maximum/minimum, comparisons to bool) and where() on
 * CUDA, with backend_cpu/cpu_binary.c's rules: f16/bf16 computed in f32, integers and bool in
 * i64 (arithmetic wrapping), NaN propagated by maximum/minimum and unequal to everything.
 * Broadcast inputs arrive with stride 0. */
#include "backend_cuda/cuda_math_internal.cuh"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

/* a op b in compute type C (float or double). */
template <class C> __device__ __forceinline__ C arith_value(int op, C a, C b)
{
    switch (op) {
    case EM_BINARY_ADD: return a + b;
    case EM_BINARY_SUB: return a - b;
    case EM_BINARY_MUL: return a * b;
    case EM_BINARY_DIV: return a / b;
    case EM_BINARY_POW: return m_pow(a, b);
    case EM_BINARY_MAXIMUM: return a != a || a > b ? a : b;
    default: return a != a || a < b ? a : b; /* EM_BINARY_MINIMUM */
    }
}

/* a op b in i64, wrapping through uint64_t (no DIV or POW). */
__device__ __forceinline__ int64_t arith_int_value(int op, int64_t a, int64_t b)
{
    switch (op) {
    case EM_BINARY_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case EM_BINARY_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case EM_BINARY_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case EM_BINARY_MAXIMUM: return a > b ? a : b;
    default: return a < b ? a : b; /* EM_BINARY_MINIMUM */
    }
}

/* The op as a functor on compute type C: OP fixed at compile time, or OP = -1 for the run-time
 * switch (heavy: pow). */
template <class C, int OP> struct arith_fn {
    static constexpr bool heavy() { return OP < 0; }
    int op;
    __device__ C operator()(C a, C b) const
    {
        if constexpr (std::is_floating_point<C>::value)
            return arith_value<C>(OP < 0 ? op : OP, a, b);
        else
            return arith_int_value(OP < 0 ? op : OP, a, b);
    }
};

/* 1 when a op b holds, else 0 (every comparison with NaN is false but NE). */
template <class C> struct compare_fn {
    int op;
    __device__ int64_t operator()(C a, C b) const
    {
        switch (op) {
        case EM_BINARY_EQ: return a == b;
        case EM_BINARY_NE: return a != b;
        case EM_BINARY_LT: return a < b;
        case EM_BINARY_LE: return a <= b;
        case EM_BINARY_GT: return a > b;
        default: return a >= b; /* EM_BINARY_GE */
        }
    }
};

/* The ops with a flat kernel of their own (a few instructions each). */
constexpr bool light_op(int op)
{
    return op == EM_BINARY_ADD || op == EM_BINARY_SUB || op == EM_BINARY_MUL ||
           op == EM_BINARY_DIV || op == EM_BINARY_MAXIMUM || op == EM_BINARY_MINIMUM;
}

template <class T, int OP = 0>
int arith_by_op(em_binary_op op, const em_arr *out, const em_arr *const *ab)
{
    typedef typename T::compute C;
    arith_fn<C, -1> any = {op};
    if constexpr (OP == EM_BINARY_EQ) {
        if constexpr (std::is_floating_point<C>::value)
            return elementwise<T, T, T>(any, out, ab);
        else
            return EM_KERNEL_UNSUPPORTED; /* the integer ops are all light */
    } else if constexpr (!light_op(OP) || (!std::is_floating_point<C>::value &&
                                           OP == EM_BINARY_DIV)) {
        return arith_by_op<T, OP + 1>(op, out, ab);
    } else {
        if (op != OP)
            return arith_by_op<T, OP + 1>(op, out, ab);
        arith_fn<C, OP> flat = {op};
        return elementwise<T, T, T>(flat, any, out, ab);
    }
}

template <class T> struct where_fn {
    __device__ T operator()(int64_t c, T a, T b) const { return c ? a : b; }
};

} // namespace

/* out = a op b; a, b of one dtype (f32, f64, f16, bf16, integers; bool for comparisons) and of
 * out's shape; out is bool for comparisons, else a's dtype */
extern "C" int em_cuda_binary(em_binary_op op, const em_arr *out, const em_arr *a,
                              const em_arr *b)
{
    if ((unsigned)op >= EM_BINARY_COUNT || a->dtype != b->dtype || !em_arr_same_shape(out, a) ||
        !em_arr_same_shape(out, b))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr *ab[2] = {a, b};
    if (op >= EM_BINARY_EQ) {
        if (out->dtype != EM_BOOL)
            return EM_KERNEL_UNSUPPORTED;
        return dispatch_dtype(a->dtype, [&](auto tag) {
            typedef decltype(tag) T;
            compare_fn<typename T::compute> f = {op};
            return elementwise<tag_bool, T, T>(f, out, ab);
        });
    }
    if (out->dtype != a->dtype)
        return EM_KERNEL_UNSUPPORTED;
    auto run = [&](auto tag) { return arith_by_op<decltype(tag)>(op, out, ab); };
    if (em_dtype_is_float(a->dtype))
        return dispatch_float(a->dtype, run);
    if (op == EM_BINARY_DIV || op == EM_BINARY_POW)
        return EM_KERNEL_UNSUPPORTED;
    return dispatch_int(a->dtype, run);
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
