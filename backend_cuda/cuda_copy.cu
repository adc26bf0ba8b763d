/* The CUDA fill and strided copy kernels: any shape and strides, any pair of the 9 dtypes, with
 * the CPU's conversions bit for bit (cuda_dtype_internal.cuh). Contiguous same-dtype copies are
 * device memcpy; everything else runs the elementwise family. */
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

/* Every element the same bits. */
template <class T> struct constant {
    T bits;
    __device__ T operator()() const { return bits; }
};

/* A loaded source value (float, double or int64_t) stored as dtype D, cpu_convert.c's rule. */
template <class D> struct convert_to {
    template <class V> __device__ typename D::storage operator()(V v) const { return D::conv(v); }
};

struct identity {
    template <class V> __device__ V operator()(V v) const { return v; }
};

} // namespace

/* out (any shape, strides, dtype) = value converted as the CPU's f64 converter does */
extern "C" int em_cuda_fill(const em_arr *out, double value)
{
    return dispatch_dtype(out->dtype, [&](auto tag) {
        typedef decltype(tag) D;
        typedef typename D::storage T;
        constant<T> f = {D::conv(value)};
        return elementwise<tag_raw<T>>(f, out, nullptr);
    });
}

/* out = in converted to out's dtype; both of out's shape (in may broadcast with stride 0) */
extern "C" int em_cuda_copy(const em_arr *out, const em_arr *in)
{
    if (!em_dtype_valid(out->dtype) || !em_dtype_valid(in->dtype) || !em_arr_same_shape(out, in))
        return EM_KERNEL_UNSUPPORTED;
    if (out->dtype == in->dtype) {
        const em_arr *ops[2] = {out, in};
        em_iter l;
        em_iter_init(&l, out->ndim, out->shape, 2, ops, 0);
        if (l.numel > 0 && iter_is_flat(&l) && l.strides[1][0] == 1)
            return em_cuda_status(cudaMemcpyAsync(l.data[0], l.data[1],
                                                  (size_t)(l.numel * l.elsize[0]),
                                                  cudaMemcpyDeviceToDevice,
                                                  em_cuda_launch_stream()));
        return dispatch_raw(em_dtype_size(out->dtype), [&](auto tag) {
            typedef decltype(tag) R;
            return elementwise<R, R>(identity(), out, &in);
        });
    }
    return dispatch_dtype(in->dtype, [&](auto src_tag) {
        typedef decltype(src_tag) S;
        return dispatch_dtype(out->dtype, [&](auto dst_tag) {
            typedef decltype(dst_tag) D;
            if constexpr (std::is_same<S, D>::value)
                return EM_KERNEL_UNSUPPORTED; /* same dtypes went the raw way above */
            else
                return elementwise<tag_raw<typename D::storage>, S>(convert_to<D>(), out, &in);
        });
    });
}
