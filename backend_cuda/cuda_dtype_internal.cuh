/* Element types in CUDA kernels (device code; include from .cu files only): one tag per dtype
 * naming its storage and compute types, the load/store rules of the CPU bit for bit (the
 * f16/bf16 conversions of backend/dtype.c, the converters of backend_cpu/cpu_convert.c and the
 * staging stores of backend_cpu/cpu_strided.c), and a dispatch from em_dtype to a tag. Every
 * conversion is __host__ __device__: host code (fill's value) converts as the CPU does. */
#ifndef EMBER_CUDA_DTYPE_INTERNAL_CUH
#define EMBER_CUDA_DTYPE_INTERNAL_CUH

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/convert_internal.h"
#include "backend_cuda/cuda_internal.h"

#define EM_HD __host__ __device__ __forceinline__

namespace em_cuda {

/* The f16/bf16 conversions of backend/dtype.c: on the host its own functions; on the device the
 * conversion instructions (IEEE round to nearest even with gradual underflow and overflow to
 * inf: the same bits) and NaN made by hand as dtype.c makes it (quiet, top payload bits kept). */
EM_HD uint16_t f32_to_f16(float x)
{
#ifdef __CUDA_ARCH__
    const uint32_t f = __float_as_uint(x), a = f & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(((f >> 16) & 0x8000) | 0x7e00 | ((a >> 13) & 0x3ff));
    return __half_as_ushort(__float2half_rn(x));
#else
    return em_f32_to_f16(x);
#endif
}

EM_HD float f16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
        return __uint_as_float(((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u |
                               ((uint32_t)(h & 0x3ff) << 13));
    return __half2float(__ushort_as_half(h));
#else
    return em_f16_to_f32(h);
#endif
}

EM_HD uint16_t f32_to_bf16(float x)
{
#ifdef __CUDA_ARCH__
    const uint32_t f = __float_as_uint(x);
    if ((f & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((f >> 16) | 0x40);
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    return em_f32_to_bf16(x);
#endif
}

EM_HD float bf16_to_f32(uint16_t b)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)b << 16);
#else
    return em_bf16_to_f32(b);
#endif
}

/* A dtype tag: storage (the bytes in memory), compute (f32 for f32/f16/bf16, f64, i64 for the
 * integers and bool), load (storage -> compute; bool reads 0/1) and store (compute -> storage;
 * halves round to nearest even, integers wrap like C casts, bool is != 0). A float tag also has
 * from_f64, em_store_f64's rule (f16/bf16 through f32). conv(v) is the copy kernel's store of a
 * loaded value v (float for f32/f16/bf16, double, or int64_t for integers and bool), exactly as
 * cpu_convert.c stores each source dtype's natural C value. */
struct tag_f32 {
    typedef float storage;
    typedef float compute;
    static const em_dtype dtype = EM_F32;
    static EM_HD float load(float v) { return v; }
    static EM_HD float store(float v) { return v; }
    static EM_HD float from_f64(double v) { return (float)v; }
    static EM_HD float conv(float v) { return v; }
    static EM_HD float conv(double v) { return (float)v; }
    static EM_HD float conv(int64_t v) { return (float)v; }
};

struct tag_f64 {
    typedef double storage;
    typedef double compute;
    static const em_dtype dtype = EM_F64;
    static EM_HD double load(double v) { return v; }
    static EM_HD double store(double v) { return v; }
    static EM_HD double from_f64(double v) { return v; }
    static EM_HD double conv(float v) { return (double)v; }
    static EM_HD double conv(double v) { return v; }
    static EM_HD double conv(int64_t v) { return (double)v; }
};

struct tag_f16 {
    typedef uint16_t storage;
    typedef float compute;
    static const em_dtype dtype = EM_F16;
    static EM_HD float load(uint16_t v) { return f16_to_f32(v); }
    static EM_HD uint16_t store(float v) { return f32_to_f16(v); }
    static EM_HD uint16_t from_f64(double v) { return f32_to_f16((float)v); }
    static EM_HD uint16_t conv(float v) { return f32_to_f16(v); }
    static EM_HD uint16_t conv(double v) { return f32_to_f16(em_f64_to_f32_odd(v)); }
    static EM_HD uint16_t conv(int64_t v) { return f32_to_f16(em_f64_to_f32_odd((double)v)); }
};

struct tag_bf16 {
    typedef uint16_t storage;
    typedef float compute;
    static const em_dtype dtype = EM_BF16;
    static EM_HD float load(uint16_t v) { return bf16_to_f32(v); }
    static EM_HD uint16_t store(float v) { return f32_to_bf16(v); }
    static EM_HD uint16_t from_f64(double v) { return f32_to_bf16((float)v); }
    static EM_HD uint16_t conv(float v) { return f32_to_bf16(v); }
    static EM_HD uint16_t conv(double v) { return f32_to_bf16(em_f64_to_f32_odd(v)); }
    static EM_HD uint16_t conv(int64_t v) { return f32_to_bf16(em_f64_to_f32_odd((double)v)); }
};

/* The integer dtypes: computed in i64, stored wrapping (two's complement). */
template <class T, em_dtype DT> struct tag_int {
    typedef T storage;
    typedef int64_t compute;
    static const em_dtype dtype = DT;
    static EM_HD int64_t load(T v) { return (int64_t)v; }
    static EM_HD T store(int64_t v) { return (T)v; }
    static EM_HD T conv(float v) { return (T)em_f64_to_i64(v); }
    static EM_HD T conv(double v) { return (T)em_f64_to_i64(v); }
    static EM_HD T conv(int64_t v) { return (T)v; }
};
typedef tag_int<int8_t, EM_I8> tag_i8;
typedef tag_int<uint8_t, EM_U8> tag_u8;
typedef tag_int<int32_t, EM_I32> tag_i32;
typedef tag_int<int64_t, EM_I64> tag_i64;

struct tag_bool {
    typedef uint8_t storage;
    typedef int64_t compute;
    static const em_dtype dtype = EM_BOOL;
    static EM_HD int64_t load(uint8_t v) { return v != 0; }
    static EM_HD uint8_t store(int64_t v) { return v != 0; }
    static EM_HD uint8_t conv(float v) { return v != 0; }
    static EM_HD uint8_t conv(double v) { return v != 0; }
    static EM_HD uint8_t conv(int64_t v) { return v != 0; }
};

/* Raw elements of a width, moved without conversion (fill, same-dtype copies, where, index). */
template <class T> struct tag_raw {
    typedef T storage;
    typedef T compute;
    static EM_HD T load(T v) { return v; }
    static EM_HD T store(T v) { return v; }
};

/* f(tag) for the tag of dt; EM_KERNEL_UNSUPPORTED for an invalid dtype. */
template <class F> int dispatch_dtype(em_dtype dt, F &&f)
{
    switch (dt) {
    case EM_F32: return f(tag_f32());
    case EM_F64: return f(tag_f64());
    case EM_F16: return f(tag_f16());
    case EM_BF16: return f(tag_bf16());
    case EM_I8: return f(tag_i8());
    case EM_U8: return f(tag_u8());
    case EM_I32: return f(tag_i32());
    case EM_I64: return f(tag_i64());
    case EM_BOOL: return f(tag_bool());
    default: return EM_KERNEL_UNSUPPORTED;
    }
}

/* f(tag) for a float dtype (f32, f64, f16, bf16); EM_KERNEL_UNSUPPORTED otherwise. */
template <class F> int dispatch_float(em_dtype dt, F &&f)
{
    switch (dt) {
    case EM_F32: return f(tag_f32());
    case EM_F64: return f(tag_f64());
    case EM_F16: return f(tag_f16());
    case EM_BF16: return f(tag_bf16());
    default: return EM_KERNEL_UNSUPPORTED;
    }
}

/* f(tag) for an integer dtype (i8, u8, i32, i64; not bool); EM_KERNEL_UNSUPPORTED otherwise. */
template <class F> int dispatch_int(em_dtype dt, F &&f)
{
    switch (dt) {
    case EM_I8: return f(tag_i8());
    case EM_U8: return f(tag_u8());
    case EM_I32: return f(tag_i32());
    case EM_I64: return f(tag_i64());
    default: return EM_KERNEL_UNSUPPORTED;
    }
}

/* f(tag_raw<T>) for an element size of 1, 2, 4 or 8 bytes. */
template <class F> int dispatch_raw(size_t elsize, F &&f)
{
    switch (elsize) {
    case 1: return f(tag_raw<uint8_t>());
    case 2: return f(tag_raw<uint16_t>());
    case 4: return f(tag_raw<uint32_t>());
    case 8: return f(tag_raw<uint64_t>());
    default: return EM_KERNEL_UNSUPPORTED;
    }
}

} // namespace em_cuda

#endif
