/* Scalar conversions the backends share bit for bit: f64 to f32 rounding to odd (a further
 * rounding to f16 or bf16 then equals rounding the f64 directly) and floats to i64 (truncated
 * toward zero, NaN as 0, saturating). Header-only, and __host__ __device__ under nvcc (as
 * philox.h), so that CUDA kernels run the very same code. */
#ifndef EMBER_CONVERT_INTERNAL_H
#define EMBER_CONVERT_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef EM_HOST_DEVICE
#ifdef __CUDACC__
#define EM_HOST_DEVICE __host__ __device__
#else
#define EM_HOST_DEVICE
#endif
#endif

static inline EM_HOST_DEVICE float em_f64_to_f32_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || d != d)
        return f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (!(u & 1))
        u += (fabs((double)f) > fabs(d)) ? (uint32_t)-1 : 1u;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline EM_HOST_DEVICE int64_t em_f64_to_i64(double d)
{
    if (d != d)
        return 0;
    if (d >= 0x1p63)
        return INT64_MAX;
    if (d < -0x1p63)
        return INT64_MIN;
    return (int64_t)d;
}

#endif
