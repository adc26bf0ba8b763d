/* Floating dtypes in CUDA kernels: a kernel templated on the storage type T computes in
 * acc_t<T> (f32 for f32/f16/bf16, f64 for f64) and converts with load/store (round to nearest
 * even on store, as backend/dtype.c). dispatch_float runs a functor for a runtime dtype. */
#ifndef EMBER_CUDA_REAL_CUH
#define EMBER_CUDA_REAL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend_cuda/cuda_internal.h"

template <typename T> struct acc_type { using type = float; };
template <> struct acc_type<double> { using type = double; };
template <typename T> using acc_t = typename acc_type<T>::type;

__device__ __forceinline__ float load(const float *p) { return *p; }
__device__ __forceinline__ double load(const double *p) { return *p; }
__device__ __forceinline__ float load(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(double *p, double v) { *p = v; }
__device__ __forceinline__ void store(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* f(T{}) for the storage type of dt (f32, f64, f16, bf16); EM_KERNEL_UNSUPPORTED otherwise. */
template <typename F> static int dispatch_float(em_dtype dt, F f)
{
    switch (dt) {
    case EM_F32:
        return f(float{});
    case EM_F64:
        return f(double{});
    case EM_F16:
        return f(__half{});
    case EM_BF16:
        return f(__nv_bfloat16{});
    default:
        return EM_KERNEL_UNSUPPORTED;
    }
}

/* Blocks of `threads` covering n items, capped for grid-stride loops. */
static inline unsigned grid_for(int64_t n, int threads)
{
    int64_t blocks = (n + threads - 1) / threads;
    return (unsigned)(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

#endif
