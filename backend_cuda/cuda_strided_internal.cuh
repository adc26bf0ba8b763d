/* Strided iteration in CUDA kernels (device code; include from .cu files only): the operands of
 * an em_iter (backend/strided_internal.h: one shape, size-1 dims dropped, dims in the output's
 * memory order, contiguous dims merged) run either as a flat run (every operand contiguous or one
 * broadcast element: vectorized loads) or by 32-bit offsets from a linear index with
 * multiply-shift division (split into pieces on the host when a view needs more than 31 bits), or
 * 64-bit ones. elementwise() runs a functor over dtype tags with both kernels. */
#ifndef EMBER_CUDA_STRIDED_INTERNAL_CUH
#define EMBER_CUDA_STRIDED_INTERNAL_CUH

#include <type_traits>
#include <utility>

#include "backend/strided_internal.h"
#include "backend_cuda/cuda_dtype_internal.cuh"
#include "backend_cuda/cuda_internal.h"

namespace em_cuda {

const int BLOCK = 256;        /* threads per block of the elementwise kernels */
const int MAX_GRID = 1 << 16; /* blocks of a grid-stride launch at most */

/* n / d for n < 2^31 and d in [1, 2^31): a high multiply, an add and a shift. */
struct fastdiv {
    uint32_t d, m, s;
    void init(uint32_t div)
    {
        d = div;
        s = 0;
        while (((uint64_t)1 << s) < div)
            s++;
        m = (uint32_t)(((uint64_t)1 << 32) * (((uint64_t)1 << s) - div) / div + 1);
    }
    __device__ __forceinline__ uint32_t div(uint32_t n) const
    {
        return (__umulhi(n, m) + n) >> s;
    }
};

/* One dim where every operand has stride 1 or 0 (a broadcast element): a flat run. */
bool iter_is_flat(const em_iter *l);

/* Whether every offset of l (and its element count) fits in 31 bits. */
bool iter_fits_32bit(const em_iter *l);

/* The smallest power of two >= n. */
int64_t pow2_ceil(int64_t n);

/* Blocks for n work items of per_block each, at least 1 and at most MAX_GRID. */
unsigned grid_for(int64_t n, int64_t per_block);

/* 32-bit offsets of N operands from a linear index of their iteration: dims innermost first. */
template <int N> struct strided {
    int ndim;
    fastdiv size[EM_MAX_DIMS];
    uint32_t stride[EM_MAX_DIMS][N];

    void init(const em_iter *l)
    {
        ndim = l->ndim;
        for (int d = 0; d < ndim; d++) {
            int src = l->ndim - 1 - d;
            size[d].init((uint32_t)l->shape[src]);
            for (int k = 0; k < N; k++)
                stride[d][k] = (uint32_t)l->strides[k][src];
        }
    }

    __device__ __forceinline__ void offsets(uint32_t i, uint32_t *off) const
    {
#pragma unroll
        for (int k = 0; k < N; k++)
            off[k] = 0;
#pragma unroll
        for (int d = 0; d < EM_MAX_DIMS; d++) {
            if (d == ndim)
                break;
            uint32_t q = size[d].div(i);
            uint32_t r = i - q * size[d].d;
#pragma unroll
            for (int k = 0; k < N; k++)
                off[k] += r * stride[d][k];
            i = q;
        }
    }
};

/* A 64-bit division, kept out of line: its long instruction sequence appears once per kernel. */
static __device__ __noinline__ uint64_t div64(uint64_t n, uint64_t d)
{
    return n / d;
}

/* n / d for 64-bit n: a multiply-shift while n < 2^31, else a division. */
struct dim_div {
    fastdiv f;
    uint64_t d;
    void init(uint64_t div)
    {
        d = div;
        if (div < ((uint64_t)1 << 31)) {
            f.init((uint32_t)div);
        } else { /* every n < 2^31 is below d: quotient 0 */
            f.d = 0;
            f.m = 0;
            f.s = 31;
        }
    }
    __device__ __forceinline__ uint64_t div(uint64_t n) const
    {
        return n < ((uint64_t)1 << 31) ? f.div((uint32_t)n) : div64(n, d);
    }
};

/* 64-bit offsets of an iteration's first N operands from a linear index (for kernels whose
 * positions are not split into 32-bit pieces): dims innermost first, none for one element. */
template <int N> struct strided64 {
    int ndim;
    dim_div size[EM_MAX_DIMS];
    int64_t stride[EM_MAX_DIMS][N];

    void init(const em_iter *l)
    {
        ndim = l->numel <= 1 ? 0 : l->ndim;
        for (int d = 0; d < ndim; d++) {
            int src = l->ndim - 1 - d;
            size[d].init((uint64_t)l->shape[src]);
            for (int k = 0; k < N; k++)
                stride[d][k] = l->strides[k][src];
        }
    }

    __device__ __forceinline__ void offsets(uint64_t i, int64_t *off) const
    {
#pragma unroll
        for (int k = 0; k < N; k++)
            off[k] = ndim == 1 ? (int64_t)i * stride[0][k] : 0;
        if (ndim == 1)
            return;
#pragma unroll 1
        for (int d = 0; d < ndim; d++) {
            const uint64_t q = size[d].div(i);
            const int64_t r = (int64_t)(i - q * size[d].d);
#pragma unroll
            for (int k = 0; k < N; k++)
                off[k] += r * stride[d][k];
            i = q;
        }
    }
};

/* launch(it, n, data) for pieces of l that each fit in 32-bit offsets: l itself when it fits,
 * else halves of its outermost dim (data advanced to each piece), recursively. Stops at the
 * first status that is not EM_KERNEL_OK. */
template <int N, class F> int for_each_piece(em_iter l, F &launch)
{
    while (l.ndim > 1 && l.shape[0] == 1) {
        l.ndim--;
        for (int d = 0; d < l.ndim; d++) {
            l.shape[d] = l.shape[d + 1];
            for (int k = 0; k < l.nops; k++)
                l.strides[k][d] = l.strides[k][d + 1];
        }
    }
    if (iter_fits_32bit(&l)) {
        strided<N> it;
        it.init(&l);
        return launch(it, (uint32_t)l.numel, l.data);
    }
    em_iter hi = l;
    int64_t half = l.shape[0] / 2;
    l.numel = l.numel / l.shape[0] * half;
    l.shape[0] = half;
    hi.shape[0] -= half;
    hi.numel -= l.numel;
    for (int k = 0; k < l.nops; k++)
        hi.data[k] += half * l.strides[k][0] * (int64_t)l.elsize[k];
    int rc = for_each_piece<N>(l, launch);
    return rc != EM_KERNEL_OK ? rc : for_each_piece<N>(hi, launch);
}

/* ---- the elementwise family: out = f(in...) over out's shape ---- */

template <class T, int VEC> struct alignas(sizeof(T) * VEC) vec {
    T v[VEC];
};

/* Elements per thread of a flat run: 16-byte accesses for the widest operand, at most 8. */
template <class... T> struct widest;
template <class T> struct widest<T> {
    static const size_t value = sizeof(T);
};
template <class T, class... R> struct widest<T, R...> {
    static const size_t value = sizeof(T) > widest<R...>::value ? sizeof(T) : widest<R...>::value;
};
template <class... T> struct vec_width {
    static const int value = 16 / widest<T...>::value < 8 ? (int)(16 / widest<T...>::value) : 8;
};

/* Whether functor F declares itself heavy (static constexpr bool heavy() returning true): libm
 * math, whose body is then not repeated per vector lane (flat runs go one element at a time). */
template <class F, class = void> struct heavy_fn : std::false_type {
};
template <class F>
struct heavy_fn<F, std::void_t<decltype(F::heavy())>>
    : std::integral_constant<bool, F::heavy()> {
};

template <class F, class... T> struct flat_width {
    static const int value = heavy_fn<F>::value ? 1 : vec_width<T...>::value;
};

/* Input pointers of a flat run and which of them are one broadcast element. */
template <int NIN> struct flat_inputs {
    const void *p[NIN > 0 ? NIN : 1];
    bool scalar[NIN > 0 ? NIN : 1];
    bool aligned; /* every pointer that is not a broadcast element is vector-aligned */
};

/* The m (1..VEC) elements of p from i as a vector (lanes past m repeat element i): one vector
 * load when aligned and whole, one repeated element for a broadcast operand. */
template <class T, int VEC>
__device__ __forceinline__ vec<T, VEC> load_vec(const T *p, int64_t i, int m, bool scalar,
                                                bool aligned)
{
    vec<T, VEC> r;
    if (scalar) {
        T x = p[0];
#pragma unroll
        for (int j = 0; j < VEC; j++)
            r.v[j] = x;
    } else if (aligned && m == VEC) {
        r = *reinterpret_cast<const vec<T, VEC> *>(p + i);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
            r.v[j] = p[i + (j < m ? j : 0)];
    }
    return r;
}

template <int VEC, class Out, class... In, class F>
__device__ __forceinline__ void compute_vec(F &f, typename Out::storage *out, int64_t i, int m,
                                            bool aligned, vec<typename In::storage, VEC>... v)
{
    vec<typename Out::storage, VEC> r;
#pragma unroll
    for (int j = 0; j < VEC; j++)
        r.v[j] = Out::store(f(In::load(v.v[j])...));
    if (aligned && m == VEC) {
        *reinterpret_cast<vec<typename Out::storage, VEC> *>(out + i) = r;
    } else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
            if (j < m)
                out[i + j] = r.v[j];
    }
}

template <int VEC, class Out, class... In, class F, size_t... I>
__device__ __forceinline__ void flat_step(F &f, typename Out::storage *out,
                                          const flat_inputs<sizeof...(In)> &a, int64_t i, int m,
                                          std::index_sequence<I...>)
{
    compute_vec<VEC, Out, In...>(
        f, out, i, m, a.aligned,
        load_vec<typename In::storage, VEC>((const typename In::storage *)a.p[I], i, m,
                                            a.scalar[I], a.aligned)...);
}

/* out (n) = f(in (n) or broadcast elements), VEC elements per thread and grid-stride step. */
template <class F, class Out, class... In>
__global__ void __launch_bounds__(BLOCK)
    flat_kernel(int64_t n, F f, typename Out::storage *out, flat_inputs<sizeof...(In)> a)
{
    const int VEC = flat_width<F, typename Out::storage, typename In::storage...>::value;
    const int64_t step = (int64_t)gridDim.x * BLOCK * VEC;
#pragma unroll 1
    for (int64_t i = ((int64_t)blockIdx.x * BLOCK + threadIdx.x) * VEC; i < n; i += step) {
        const int m = n - i < VEC ? (int)(n - i) : VEC;
        flat_step<VEC, Out, In...>(f, out, a, i, m, std::index_sequence_for<In...>());
    }
}

template <class Out, class... In, class F, size_t... I>
__device__ __forceinline__ void strided_one(F &f, char *const *data, const uint32_t *off,
                                            std::index_sequence<I...>)
{
    ((typename Out::storage *)data[0])[off[0]] =
        Out::store(f(In::load(((const typename In::storage *)data[I + 1])[off[I + 1]])...));
}

/* Base pointers of a strided launch (operand 0 the output). */
template <int N> struct base_ptrs {
    char *p[N];
};

/* The n elements of a strided piece, one per thread and grid-stride step. */
template <class F, class Out, class... In>
__global__ void __launch_bounds__(BLOCK)
    strided_kernel(uint32_t n, F f, strided<1 + sizeof...(In)> it,
                   base_ptrs<1 + sizeof...(In)> data)
{
    const uint32_t step = gridDim.x * BLOCK;
#pragma unroll 1
    for (uint32_t i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += step) {
        uint32_t off[1 + sizeof...(In)];
        it.offsets(i, off);
        strided_one<Out, In...>(f, data.p, off, std::index_sequence_for<In...>());
    }
}

/* out = f(in[0], in[1], ...) elementwise, with Out and In... the dtype tags of out and of each
 * in[k] (all of out's shape, broadcast inputs with stride 0); f maps the inputs' compute values
 * to out's compute value: flat_f on flat runs, any_f on strided views (a functor that serves many
 * ops with a runtime switch keeps the strided kernels few). One launch (more only for views
 * beyond 31-bit offsets). */
template <class Out, class... In, class FFlat, class FAny>
int elementwise(FFlat flat_f, FAny any_f, const em_arr *out, const em_arr *const *in)
{
    const int N = 1 + (int)sizeof...(In);
    const em_arr *ops[EM_ITER_MAX_OPS] = {out};
    for (int k = 1; k < N; k++)
        ops[k] = in[k - 1];
    em_iter l;
    em_iter_init(&l, out->ndim, out->shape, N, ops, 0);
    if (l.numel == 0)
        return EM_KERNEL_OK;
    if (iter_is_flat(&l)) {
        const int VEC = flat_width<FFlat, typename Out::storage, typename In::storage...>::value;
        flat_inputs<sizeof...(In)> a;
        a.aligned = (uintptr_t)l.data[0] % (sizeof(typename Out::storage) * VEC) == 0;
        const size_t vbytes[] = {sizeof(typename In::storage) * VEC..., 0};
        for (int k = 1; k < N; k++) {
            a.p[k - 1] = l.data[k];
            a.scalar[k - 1] = l.strides[k][0] == 0 && l.numel > 1;
            a.aligned = a.aligned && (a.scalar[k - 1] || (uintptr_t)l.data[k] % vbytes[k - 1] == 0);
        }
        flat_kernel<FFlat, Out, In...><<<grid_for(l.numel, (int64_t)BLOCK * VEC), BLOCK, 0,
                                         em_cuda_launch_stream()>>>(
            l.numel, flat_f, (typename Out::storage *)l.data[0], a);
        return em_cuda_launch_status();
    }
    auto launch = [&](const strided<N> &it, uint32_t n, char *const *data) {
        base_ptrs<N> p;
        for (int k = 0; k < N; k++)
            p.p[k] = data[k];
        strided_kernel<FAny, Out, In...><<<grid_for(n, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
            n, any_f, it, p);
        return em_cuda_launch_status();
    };
    return for_each_piece<N>(l, launch);
}

template <class Out, class... In, class F>
int elementwise(F f, const em_arr *out, const em_arr *const *in)
{
    return elementwise<Out, In...>(f, f, out, in);
}

} // namespace em_cuda

#endif
