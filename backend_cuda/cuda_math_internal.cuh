/* Math functions by compute type in CUDA kernels (device code; include from .cu files only):
 * the f32 functions for float, the f64 ones for double, so one templated formula serves both. */
#ifndef EMBER_CUDA_MATH_INTERNAL_CUH
#define EMBER_CUDA_MATH_INTERNAL_CUH

namespace em_cuda {

__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }

} // namespace em_cuda

#endif
