/* The int8 product shared by the dynamic and static kernels: the packed panel layout, the
 * description of one product and the tile kernels of each path (portable, AVX2, AVX-512 VNNI).
 * Private to backend_cpu/cpu_int8_*.c. */
#ifndef EMBER_CPU_INT8_INTERNAL_H
#define EMBER_CPU_INT8_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* A packed operand holds panels of 16 columns: kg = ceil(k / 4) groups of 16 columns x 4
 * consecutive k bytes (64 bytes); a panel is kg * 64 bytes, the padding is zero. */
#define EM_INT8_PANEL 16
#define EM_INT8_KGROUP 4
#define EM_INT8_GROUP_BYTES (EM_INT8_PANEL * EM_INT8_KGROUP)
/* Columns per tile: two panels. Operands are packed to a whole number of tiles. */
#define EM_INT8_TILE_COLS (2 * EM_INT8_PANEL)

/* What a tile writes, when not the int32 sums: f32 y = (sum - corr) * scale + bias, clamped at
 * 0 when relu; the arrays are indexed by the column, or by the row when per_row. */
typedef struct {
    const int32_t *corr; /* zero point x weight row sum */
    const float *scale;  /* activation scale x weight scale */
    const float *bias;
    bool per_row; /* conv: rows are output channels */
    bool relu;
} em_int8_epilogue;

/* out (m, n) = A (m, k) . B (n, k)^T. B is packed in panels (b_panel bytes apart). A is either
 * rows lda bytes apart (lda > 0; a 4-byte group steps 4 bytes) or packed in panels like B
 * (lda == 0; then k is a multiple of 4). One operand is u7 (0..127) and the other s8: A is the
 * unsigned one unless a_signed (conv: A holds the weights and B the patches).
 * Output column j goes to out + row * ldo + (j / seg) * seg_valid + j % seg and only columns
 * with j % seg < seg_valid are written (a conv's output rows are padded to seg columns); seg is
 * a multiple of EM_INT8_PANEL. */
typedef struct {
    int64_t m, n, k;
    const uint8_t *a;
    int64_t lda;
    bool a_signed;
    const int8_t *b;
    int64_t b_panel;
    const em_int8_epilogue *epi; /* NULL: out is int32 sums */
    void *out;
    int64_t ldo, seg, seg_valid;
} em_int8_product;

/* A tile: rows r0 .. r0 + mr - 1 (within one 16-row panel when A is packed) x columns
 * j0 .. j0 + EM_INT8_TILE_COLS - 1. */
typedef void (*em_int8_tile_fn)(const em_int8_product *p, int64_t r0, int mr, int64_t j0);

void em_int8_tile_portable(const em_int8_product *p, int64_t r0, int mr, int64_t j0);
void em_int8_tile_avx2(const em_int8_product *p, int64_t r0, int mr, int64_t j0);
void em_int8_tile_vnni(const em_int8_product *p, int64_t r0, int mr, int64_t j0);
#define EM_INT8_MR_PORTABLE 4
#define EM_INT8_MR_AVX2 4
#define EM_INT8_MR_VNNI 8

/* Runs the product's tiles on the path; threaded over tiles when threaded and large. */
void em_int8_product_run(em_cpu_int8_path path, const em_int8_product *p, bool threaded);

static inline int64_t em_int8_round_up(int64_t v, int64_t to)
{
    return (v + to - 1) / to * to;
}

static inline int64_t em_int8_groups(int64_t k)
{
    return (k + EM_INT8_KGROUP - 1) / EM_INT8_KGROUP;
}

/* The first byte of A's row r, and the step between its 4-byte groups. */
static inline const uint8_t *em_int8_a_row(const em_int8_product *p, int64_t r)
{
    if (p->lda)
        return p->a + r * p->lda;
    return p->a + r / EM_INT8_PANEL * em_int8_groups(p->k) * EM_INT8_GROUP_BYTES +
           r % EM_INT8_PANEL * EM_INT8_KGROUP;
}

static inline int64_t em_int8_a_step(const em_int8_product *p)
{
    return p->lda ? EM_INT8_KGROUP : EM_INT8_GROUP_BYTES;
}

static inline int32_t em_int8_load32(const uint8_t *at)
{
    int32_t v;
    memcpy(&v, at, sizeof v);
    return v;
}

/* Group g (4 bytes) of a row of A, reading only the valid bytes of a last, partial group. */
static inline int32_t em_int8_a_group(const em_int8_product *p, const uint8_t *row, int64_t g)
{
    int32_t v = 0;
    int64_t left = p->k - g * EM_INT8_KGROUP;
    memcpy(&v, row + g * em_int8_a_step(p), (size_t)(left < EM_INT8_KGROUP ? left
                                                                             : EM_INT8_KGROUP));
    return v;
}

/* Where output row r, column j0 goes, and how many of the width columns from j0 are kept. */
static inline int64_t em_int8_out_index(const em_int8_product *p, int64_t r, int64_t j0)
{
    return r * p->ldo + j0 / p->seg * p->seg_valid + j0 % p->seg;
}

static inline int em_int8_out_cols(const em_int8_product *p, int64_t j0, int width)
{
    int64_t left = p->seg_valid - j0 % p->seg, to_n = p->n - j0;
    left = left < to_n ? left : to_n;
    return left <= 0 ? 0 : left < width ? (int)left : width;
}

/* Fills e's arrays for n columns (or rows) rounded up to a tile, from one scratch block that
 * is returned for em_cpu_scratch_free (NULL when out of memory): scale = x_scale * w_scale,
 * bias (0 without one), corr = x_zero_point * the packed weight's row sums. */
void *em_int8_epilogue_init(em_int8_epilogue *e, int64_t n, const void *packed, float x_scale,
                            int32_t x_zero_point, const float *w_scale, int64_t n_scales,
                            const float *bias);

/* y (m, n) = the dequantized product of x (m, k) and packed w, x quantized with x_scale and
 * x_zero_point, or (dynamic) with its own range; relu clamps y at 0. */
int em_int8_qlinear(em_cpu_int8_path path, int64_t m, int64_t n, int64_t k, const float *x,
                    bool dynamic, float x_scale, int32_t x_zero_point, const void *packed,
                    const float *w_scale, int64_t n_scales, const float *bias, bool relu,
                    float *y);

/* cpu_int8_quantize.c: q (n) = clamp(round(x / scale) + zero_point, 0, 127), with the given
 * scale and zero point, or with those of x's own range (returned). */
void em_int8_quantize_fixed(bool avx2, int64_t n, const float *x, float scale,
                            int32_t zero_point, uint8_t *q);
void em_int8_quantize_range(bool avx2, int64_t n, const float *x, uint8_t *q, float *scale,
                            int32_t *zero_point);

/* Writes cols results of row r from the int32 sums of columns j0 .. j0 + cols - 1. */
void em_int8_store_row(const em_int8_product *p, int64_t r, int64_t j0, const int32_t *sum,
                       int cols);

#endif
