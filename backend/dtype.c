/* Element types and devices: sizes, names, and the scalar f16/bf16 conversions (round to nearest
 * even, inf and NaN kept, subnormals exact) that kernels and the tensor layer share. */
#include "backend/dtype.h"

#include <string.h>

static const size_t dtype_sizes[EM_NDTYPES] = {4, 8, 2, 2, 1, 1, 4, 8, 1};
static const char *const dtype_names[EM_NDTYPES] = {"f32", "f64", "f16", "bf16", "i8",
                                                    "u8",  "i32", "i64", "bool"};

bool em_dtype_valid(em_dtype dt)
{
    return (unsigned)dt < EM_NDTYPES;
}

size_t em_dtype_size(em_dtype dt)
{
    return em_dtype_valid(dt) ? dtype_sizes[dt] : 0;
}

const char *em_dtype_name(em_dtype dt)
{
    return em_dtype_valid(dt) ? dtype_names[dt] : "invalid";
}

const char *em_device_name(em_device dev)
{
    switch (dev) {
    case EM_CPU:
        return "cpu";
    case EM_CUDA:
        return "cuda";
    default:
        return "invalid";
    }
}

bool em_dtype_is_float(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64 || dt == EM_F16 || dt == EM_BF16;
}

bool em_dtype_is_int(em_dtype dt)
{
    return dt == EM_I8 || dt == EM_U8 || dt == EM_I32 || dt == EM_I64;
}

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Shift m right by s bits, rounding to nearest with ties to even. */
static uint32_t shift_round_even(uint32_t m, uint32_t s)
{
    uint32_t r = m >> s;
    uint32_t rem = m & ((1u << s) - 1);
    uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (r & 1)))
        r++;
    return r;
}

uint16_t em_f32_to_f16(float x)
{
    uint32_t f = f32_bits(x);
    uint16_t sign = (uint16_t)((f >> 16) & 0x8000);
    uint32_t a = f & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
    if (a >= 0x47800000u) /* >= 2^16 (or inf): beyond the largest finite half */
        return sign | 0x7c00;
    if (a >= 0x38800000u) /* normal half: rebias exponent 127 -> 15, round 13 bits off */
        return sign | (uint16_t)shift_round_even(a - 0x38000000u, 13);
    if (a < 0x33000000u) /* below 2^-25: rounds to zero */
        return sign;
    /* subnormal half: value / 2^-24 = mantissa * 2^(e - 126) */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    return sign | (uint16_t)shift_round_even(m, 126 - e);
}

float em_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ff;
    if (e == 0x1f) /* inf, or NaN made quiet (as the F16C instruction does) */
        return bits_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e == 0) {
        float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t em_f32_to_bf16(float x)
{
    uint32_t f = f32_bits(x);
    if ((f & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet bit set so it stays NaN */
        return (uint16_t)((f >> 16) | 0x40);
    return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1)) >> 16);
}

float em_bf16_to_f32(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}
