/* Dtype sizes and names; f16/bf16 conversions (round trips, ties to even, overflow, inf/NaN,
 * subnormals); the F16C bulk path against the scalar one; the CPU copy kernel's conversions. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static bool f16_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

Test(dtype, sizes_and_names)
{
    cr_assert_eq(em_dtype_size(EM_F32), 4);
    cr_assert_eq(em_dtype_size(EM_F64), 8);
    cr_assert_eq(em_dtype_size(EM_F16), 2);
    cr_assert_eq(em_dtype_size(EM_BF16), 2);
    cr_assert_eq(em_dtype_size(EM_I8), 1);
    cr_assert_eq(em_dtype_size(EM_U8), 1);
    cr_assert_eq(em_dtype_size(EM_I32), 4);
    cr_assert_eq(em_dtype_size(EM_I64), 8);
    cr_assert_eq(em_dtype_size(EM_BOOL), 1);
    cr_assert_eq(em_dtype_size((em_dtype)99), 0);
    cr_assert_str_eq(em_dtype_name(EM_BF16), "bf16");
    cr_assert_str_eq(em_dtype_name(EM_BOOL), "bool");
    cr_assert_str_eq(em_dtype_name((em_dtype)-1), "invalid");
    cr_assert_str_eq(em_device_name(EM_CUDA), "cuda");
    cr_assert(em_dtype_is_float(EM_BF16) && !em_dtype_is_float(EM_I64));
    cr_assert(em_dtype_valid(EM_BOOL) && !em_dtype_valid(EM_NDTYPES));
}

Test(dtype, f16_all_patterns_round_trip)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = em_f16_to_f32((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            cr_assert(isnan(f), "%04x", h);
            cr_assert(f16_is_nan(em_f32_to_f16(f)), "%04x", h);
            continue;
        }
        cr_assert_eq(em_f32_to_f16(f), h, "%04x -> %a", h, f);
    }
}

Test(dtype, f16_values)
{
    cr_assert_eq(em_f16_to_f32(0x3c00), 1.0f);
    cr_assert_eq(em_f16_to_f32(0xc000), -2.0f);
    cr_assert_eq(em_f16_to_f32(0x7bff), 65504.0f);
    cr_assert_eq(em_f16_to_f32(0x0001), 0x1p-24f);
    cr_assert_eq(em_f16_to_f32(0x03ff), 1023 * 0x1p-24f);
    cr_assert_eq(em_f16_to_f32(0x7c00), INFINITY);
    cr_assert_eq(em_f16_to_f32(0xfc00), -INFINITY);
    cr_assert_eq(bits(em_f16_to_f32(0x8000)), 0x80000000u);
}

Test(dtype, f16_ties_to_even)
{
    cr_assert_eq(em_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);        /* tie: down to even */
    cr_assert_eq(em_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);    /* tie: up to even 1+2^-9 */
    cr_assert_eq(em_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    cr_assert_eq(em_f32_to_f16(1.0f + 0x1p-12f), 0x3c00);
    cr_assert_eq(em_f32_to_f16(-1.0f - 3 * 0x1p-11f), 0xbc02);
}

Test(dtype, f16_overflow_inf_nan)
{
    cr_assert_eq(em_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(em_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(em_f32_to_f16(65520.0f), 0x7c00); /* the tie above the largest rounds to inf */
    cr_assert_eq(em_f32_to_f16(1e10f), 0x7c00);
    cr_assert_eq(em_f32_to_f16(-1e10f), 0xfc00);
    cr_assert_eq(em_f32_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(em_f32_to_f16(-INFINITY), 0xfc00);
    cr_assert(f16_is_nan(em_f32_to_f16(NAN)));
    cr_assert(f16_is_nan(em_f32_to_f16(from_bits(0x7f800001u)))); /* payload in low bits only */
    cr_assert(f16_is_nan(em_f32_to_f16(from_bits(0xffc00000u))));
}

Test(dtype, f16_subnormals)
{
    cr_assert_eq(em_f32_to_f16(0x1p-24f), 0x0001);
    cr_assert_eq(em_f32_to_f16(0x1p-25f), 0x0000);           /* tie between 0 and 2^-24: 0 */
    cr_assert_eq(em_f32_to_f16(0x1p-25f * 1.5f), 0x0001);
    cr_assert_eq(em_f32_to_f16(3 * 0x1p-25f), 0x0002);       /* tie between 1 and 2: 2 */
    cr_assert_eq(em_f32_to_f16(5 * 0x1p-25f), 0x0002);       /* tie between 2 and 3: 2 */
    cr_assert_eq(em_f32_to_f16(1023 * 0x1p-24f), 0x03ff);
    cr_assert_eq(em_f32_to_f16(0x1p-14f), 0x0400);
    cr_assert_eq(em_f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400); /* rounds up into the normals */
    cr_assert_eq(em_f32_to_f16(1e-10f), 0x0000);
    cr_assert_eq(em_f32_to_f16(-1e-10f), 0x8000);
    cr_assert_eq(em_f32_to_f16(from_bits(1)), 0x0000);         /* an f32 subnormal */
}

Test(dtype, bf16_round_trip_and_rounding)
{
    for (uint32_t b = 0; b < 65536; b++) {
        float f = em_bf16_to_f32((uint16_t)b);
        cr_assert_eq(bits(f), b << 16);
        if (isnan(f))
            cr_assert(isnan(em_bf16_to_f32(em_f32_to_bf16(f))));
        else
            cr_assert_eq(em_f32_to_bf16(f), b, "%04x", b);
    }
    cr_assert_eq(em_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie: down to even */
    cr_assert_eq(em_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie: up to even */
    cr_assert_eq(em_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    cr_assert_eq(em_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    cr_assert_eq(em_f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f);
    cr_assert_eq(em_f32_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(em_f32_to_bf16(-INFINITY), 0xff80);
    cr_assert(isnan(em_bf16_to_f32(em_f32_to_bf16(from_bits(0x7f800001u)))));
    cr_assert(isnan(em_bf16_to_f32(em_f32_to_bf16(from_bits(0xff800001u)))));
    cr_assert_eq(em_f32_to_bf16(from_bits(0x00010000u)), 0x0001); /* subnormal kept */
    cr_assert_eq(em_f32_to_bf16(from_bits(0x00008000u)), 0x0000); /* tie to even zero */
    cr_assert_eq(em_f32_to_bf16(from_bits(0x00018000u)), 0x0002);
}

/* Every one of the 65536 values of dt, widened in bulk, has the scalar function's bits. */
static void check_half_to_f32(em_dtype dt, float (*scalar)(uint16_t))
{
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = malloc(65536 * sizeof *f);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    em_cpu_half_to_f32_n(dt, f, h, 65536);
    for (uint32_t i = 0; i < 65536; i++)
        cr_assert_eq(bits(f[i]), bits(scalar(h[i])), "%s %04x", em_dtype_name(dt), i);
    free(h);
    free(f);
}

Test(dtype, bulk_half_to_f32_matches_scalar)
{
    check_half_to_f32(EM_F16, em_f16_to_f32);
    check_half_to_f32(EM_BF16, em_bf16_to_f32);
}

/* Compare bulk and scalar f32 -> dt on n patterns made by pattern(i). */
static void check_f32_to_half(em_dtype dt, uint32_t (*pattern)(uint64_t), uint64_t n)
{
    uint16_t (*scalar)(float) = dt == EM_F16 ? em_f32_to_f16 : em_f32_to_bf16;
    enum { CHUNK = 1 << 20 };
    float *f = malloc(CHUNK * sizeof *f);
    uint16_t *h = malloc(CHUNK * sizeof *h);
    for (uint64_t start = 0; start < n; start += CHUNK) {
        int64_t m = n - start < CHUNK ? (int64_t)(n - start) : CHUNK;
        for (int64_t i = 0; i < m; i++)
            f[i] = from_bits(pattern(start + (uint64_t)i));
        em_cpu_f32_to_half_n(dt, h, f, m);
        for (int64_t i = 0; i < m; i++)
            if (h[i] != scalar(f[i]))
                cr_assert_fail("f32 %08x to %s: bulk %04x scalar %04x", bits(f[i]),
                               em_dtype_name(dt), h[i], scalar(f[i]));
    }
    free(f);
    free(h);
}

static uint32_t stride_pattern(uint64_t i)
{
    return (uint32_t)(i * 251u + (i >> 3));
}

/* every f32 whose low 13 bits sit at, just below or just above a half-way point */
static uint32_t tie_pattern(uint64_t i)
{
    static const uint32_t low[3] = {0x0fff, 0x1000, 0x1001};
    return (uint32_t)((i / 3) << 13) | low[i % 3];
}

/* the subnormal-half region (below 2^-14), where ties sit at higher bits: a sample of it */
static uint32_t small_pattern(uint64_t i)
{
    return (uint32_t)(0x32f00000u + 5 * (i >> 1)) | (i & 1 ? 0x80000000u : 0);
}

/* its ties: exponent e keeps 126 - e bits below the half's last place */
static uint32_t small_tie_pattern(uint64_t i)
{
    uint32_t e = 103 + (uint32_t)(i / 1536), s = 126 - e;
    uint32_t half = 1u << (s - 1), prefix = (uint32_t)((i / 3) % 512) & ((1u << (23 - s)) - 1);
    return e << 23 | prefix << s | (half - 1 + (uint32_t)(i % 3));
}

Test(dtype, bulk_f32_to_f16_matches_scalar)
{
    check_f32_to_half(EM_F16, stride_pattern, (1ull << 32) / 251);
    check_f32_to_half(EM_F16, tie_pattern, 3ull << 19);
    check_f32_to_half(EM_F16, small_pattern, 2ull * (0x38800000u - 0x32f00000u) / 5);
    check_f32_to_half(EM_F16, small_tie_pattern, 10 * 1536);
}

/* every f32 whose low 16 bits sit at, just below or just above a bf16 half-way point, over all
 * exponents and signs (NaN and infinity included) */
static uint32_t bf16_tie_pattern(uint64_t i)
{
    static const uint32_t low[3] = {0x7fff, 0x8000, 0x8001};
    return (uint32_t)((i / 3) << 16) | low[i % 3];
}

/* subnormals (either sign) in one half of each 32 values and normal numbers in the other, the
 * second half in even runs of 32 and the first in odd ones */
static uint32_t half_subnormal_pattern(uint64_t i)
{
    const bool subnormal = (i / 16) % 2 != (i / 32) % 2;
    return subnormal ? (uint32_t)(i * 40503u) & 0x807fffffu
                     : 0x3f800000u | (uint32_t)(i * 2654435761u & 0x7fffff);
}

/* Also runs that are not a whole number of vectors: the first 37 and 53 patterns, subnormal
 * ties (a step of 32 and a part of 16; one of 32, a whole 16 and a part). */
Test(dtype, bulk_f32_to_bf16_matches_scalar)
{
    check_f32_to_half(EM_BF16, stride_pattern, (1ull << 32) / 251);
    check_f32_to_half(EM_BF16, bf16_tie_pattern, 3ull << 16);
    check_f32_to_half(EM_BF16, bf16_tie_pattern, 37);
    check_f32_to_half(EM_BF16, bf16_tie_pattern, 53);
    check_f32_to_half(EM_BF16, half_subnormal_pattern, 4096);
}

/* copy one element of src_dt at src into dst_dt at dst through the CPU copy kernel */
static void convert1(em_dtype dst_dt, void *dst, em_dtype src_dt, const void *src)
{
    em_arr out = {.data = dst, .dtype = dst_dt, .ndim = 0};
    em_arr in = {.data = (void *)src, .dtype = src_dt, .ndim = 0};
    cr_assert_eq(em_cpu_copy(&out, &in), EM_KERNEL_OK);
}

Test(dtype, copy_conversions)
{
    double d = 1.0 + 0x1p-11 + 0x1p-40; /* just above an f16 tie; via a plain f32 it would tie */
    uint16_t h;
    convert1(EM_F16, &h, EM_F64, &d);
    cr_assert_eq(h, 0x3c01);
    convert1(EM_BF16, &h, EM_F64, &(double){1.0 + 0x1p-8 + 0x1p-40});
    cr_assert_eq(h, 0x3f81);

    int32_t i32;
    convert1(EM_I32, &i32, EM_F32, &(float){-1.7f});
    cr_assert_eq(i32, -1);
    convert1(EM_I32, &i32, EM_F32, &(float){NAN});
    cr_assert_eq(i32, 0);
    int64_t i64;
    convert1(EM_I64, &i64, EM_F64, &(double){1e30});
    cr_assert_eq(i64, INT64_MAX);
    convert1(EM_I64, &i64, EM_I8, &(int8_t){-5});
    cr_assert_eq(i64, -5);
    uint8_t u8;
    convert1(EM_U8, &u8, EM_I32, &(int32_t){300});
    cr_assert_eq(u8, 44);
    convert1(EM_BOOL, &u8, EM_F32, &(float){0.25f});
    cr_assert_eq(u8, 1);
    convert1(EM_BOOL, &u8, EM_I64, &(int64_t){0});
    cr_assert_eq(u8, 0);
    float f;
    convert1(EM_F32, &f, EM_BOOL, &(uint8_t){1});
    cr_assert_eq(f, 1.0f);
    convert1(EM_F32, &f, EM_I64, &(int64_t){16777217});
    cr_assert_eq(f, 16777216.0f);
    convert1(EM_F32, &f, EM_BF16, &(uint16_t){0xc040});
    cr_assert_eq(f, -3.0f);
}

Test(dtype, copy_all_pairs_small_integers)
{
    /* small integers are exact in every dtype: each pair must carry them over unchanged */
    for (int s = 0; s < EM_NDTYPES; s++)
        for (int d = 0; d < EM_NDTYPES; d++) {
            int hi = (s == EM_BOOL || d == EM_BOOL) ? 2 : 100;
            double vals[6];
            char src[6 * 8], dst[6 * 8];
            em_arr from = {.data = vals, .dtype = EM_F64, .ndim = 1, .shape = {6}, .strides = {1}};
            em_arr a = {.data = src, .dtype = (em_dtype)s, .ndim = 1, .shape = {6}, .strides = {1}};
            em_arr b = {.data = dst, .dtype = (em_dtype)d, .ndim = 1, .shape = {3}, .strides = {2}};
            for (int i = 0; i < 6; i++)
                vals[i] = (i * 37) % hi;
            em_cpu_copy(&a, &from);
            a.shape[0] = 3;
            a.strides[0] = 2;
            cr_assert_eq(em_cpu_copy(&b, &a), EM_KERNEL_OK);
            double back[3];
            em_arr to = {.data = back, .dtype = EM_F64, .ndim = 1, .shape = {3}, .strides = {1}};
            em_cpu_copy(&to, &b);
            for (int i = 0; i < 3; i++)
                cr_assert_eq(back[i], vals[2 * i], "%s -> %s", em_dtype_name(s),
                             em_dtype_name(d));
        }
}

Test(dtype, copy_strided_large_f32_to_f16)
{
    /* (600, 300) transposed view: above the parallel threshold, not contiguous */
    int64_t r = 600, c = 300;
    float *x = malloc((size_t)(r * c) * sizeof *x);
    uint16_t *y = malloc((size_t)(r * c) * sizeof *y);
    for (int64_t i = 0; i < r * c; i++)
        x[i] = (float)i * 0.37f - 1000.0f;
    em_arr in = {.data = x, .dtype = EM_F32, .ndim = 2, .shape = {c, r}, .strides = {1, c}};
    em_arr out = {.data = y, .dtype = EM_F16, .ndim = 2, .shape = {c, r}, .strides = {r, 1}};
    cr_assert_eq(em_cpu_copy(&out, &in), EM_KERNEL_OK);
    for (int64_t j = 0; j < c; j++)
        for (int64_t i = 0; i < r; i++)
            cr_assert_eq(y[j * r + i], em_f32_to_f16(x[i * c + j]));
    free(x);
    free(y);
}

Test(dtype, fill_kernel)
{
    int32_t buf[12] = {0};
    em_arr col = {.data = buf + 1, .dtype = EM_I32, .ndim = 2, .shape = {4, 1}, .strides = {3, 1}};
    cr_assert_eq(em_cpu_fill(&col, 7.9), EM_KERNEL_OK);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(buf[i], i % 3 == 1 ? 7 : 0);
    uint16_t h[5];
    em_arr a = {.data = h, .dtype = EM_BF16, .ndim = 1, .shape = {5}, .strides = {1}};
    em_cpu_fill(&a, -2.0);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(h[i], 0xc000);
}

Test(dtype, copy_contiguous_large_split_across_threads)
{
    /* one long row: split into pieces across threads, bulk f16 and bf16 paths */
    int64_t n = 100003;
    float *x = malloc((size_t)n * sizeof *x), *back = malloc((size_t)n * sizeof *back);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i - 50000) * 1.37e-3f;
    em_arr in = {.data = x, .dtype = EM_F32, .ndim = 1, .shape = {n}, .strides = {1}};
    em_arr out = {.data = h, .dtype = EM_F16, .ndim = 1, .shape = {n}, .strides = {1}};
    em_arr ret = {.data = back, .dtype = EM_F32, .ndim = 1, .shape = {n}, .strides = {1}};
    cr_assert_eq(em_cpu_copy(&out, &in), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_copy(&ret, &out), EM_KERNEL_OK);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(h[i], em_f32_to_f16(x[i]));
        cr_assert_eq(back[i], em_f16_to_f32(h[i]));
    }
    out.dtype = EM_BF16;
    cr_assert_eq(em_cpu_copy(&out, &in), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_copy(&ret, &out), EM_KERNEL_OK);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(h[i], em_f32_to_bf16(x[i]));
        cr_assert_eq(back[i], em_bf16_to_f32(h[i]));
    }
    free(x);
    free(back);
    free(h);
}
