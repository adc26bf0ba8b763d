/* Element conversion between all dtypes on the CPU: one strided row converter per (src, dst)
 * pair, shared by the copy, fill and random kernels. Not installed. */
#ifndef EMBER_CPU_CONVERT_INTERNAL_H
#define EMBER_CPU_CONVERT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/dtype.h"

/* dst[i * dst_step] = convert(src[i * src_step]) for i < n; steps in bytes.
 * Floats to integers truncate toward zero (NaN gives 0, out of range saturates to i64 and then
 * wraps to the narrower type); anything to bool is "!= 0"; to f16/bf16 rounds to nearest even. */
typedef void (*em_cpu_convert_fn)(char *dst, int64_t dst_step, const char *src, int64_t src_step,
                                  int64_t n);

/* The converter for a pair of valid dtypes. */
em_cpu_convert_fn em_cpu_converter(em_dtype src, em_dtype dst);

/* Contiguous bulk f32 <-> half (dt EM_F16 or EM_BF16) conversion: F16C (f16) or AVX2 (bf16)
 * when the CPU has them, else the scalar em_f32_to_f16 / em_f16_to_f32 / em_f32_to_bf16 /
 * em_bf16_to_f32; every path gives the scalar functions' bits. */
void em_cpu_f32_to_half_n(em_dtype dt, uint16_t *dst, const float *src, int64_t n);
void em_cpu_half_to_f32_n(em_dtype dt, float *dst, const uint16_t *src, int64_t n);

#endif
