/* Element types and devices: the vocabulary every layer shares, from the kernels up.
 * Also the scalar f16/bf16 conversions (round to nearest even), used by kernels and tensors alike. */
#ifndef EMBER_DTYPE_H
#define EMBER_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EM_MAX_DIMS 8 /* the most dimensions a tensor has */

typedef enum {
    EM_F32 = 0, /* zero is the default everywhere an options struct names a dtype */
    EM_F64,
    EM_F16,
    EM_BF16,
    EM_I8,
    EM_U8,
    EM_I32,
    EM_I64,
    EM_BOOL,
    EM_NDTYPES
} em_dtype;

typedef enum {
    EM_CPU = 0,
    EM_CUDA,
    EM_NDEVICES
} em_device;

size_t em_dtype_size(em_dtype dt);        /* bytes per element; 0 for an invalid dtype */
const char *em_dtype_name(em_dtype dt);   /* "f32", "bf16", ...; "invalid" otherwise */
const char *em_device_name(em_device dev); /* "cpu", "cuda" */
bool em_dtype_is_float(em_dtype dt);      /* f32, f64, f16, bf16 */
bool em_dtype_is_int(em_dtype dt);        /* i8, u8, i32, i64 (not bool) */
bool em_dtype_valid(em_dtype dt);

/* IEEE binary16 and bfloat16 as raw bits; to_* rounds to nearest even, keeps inf and NaN. */
uint16_t em_f32_to_f16(float x);
float em_f16_to_f32(uint16_t h);
uint16_t em_f32_to_bf16(float x);
float em_bf16_to_f32(uint16_t b);

#ifdef __cplusplus
}
#endif

#endif
