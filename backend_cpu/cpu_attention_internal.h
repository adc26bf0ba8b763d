/* The small dense pieces the CPU attention kernels (cpu_attention.c) are built from: products of
 * tiles that stay in cache and exp/max over score rows, in f32 with AVX2+FMA or in portable C
 * (cpu_attention_tiles.c), and in f64 in portable C. */
#ifndef EMBER_CPU_ATTENTION_INTERNAL_H
#define EMBER_CPU_ATTENTION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tiles hold rows of query (EM_ATT_BR) and key (EM_ATT_BC) positions; packed right-hand operands
 * and products have widths rounded up to EM_ATT_NPAD columns. */
#define EM_ATT_BR 64
#define EM_ATT_BC 64
_Static_assert(EM_ATT_BR == EM_ATT_BC, "a tile on the causal diagonal is square (em_att_tri)");
#define EM_ATT_NPAD 16

static inline int64_t em_att_pad(int64_t n)
{
    return (n + EM_ATT_NPAD - 1) / EM_ATT_NPAD * EM_ATT_NPAD;
}

/* What a product on the causal diagonal (query block i0 == key block j0) may leave out: the
 * elements of c above the diagonal (they are masked), or the terms of row i that a's zeros above
 * (keys past i) or below (queries before i) the diagonal make 0. */
typedef enum {
    EM_ATT_FULL,      /* the whole product */
    EM_ATT_C_LOWER,   /* c(i, j) only for j <= i; the rest is left as it is */
    EM_ATT_A_LOWER,   /* a(i, l) == 0 for l > i */
    EM_ATT_A_UPPER,   /* a(i, l) == 0 for l < i */
} em_att_tri;

/* Tile operations on one real type. */
typedef struct {
    /* c (m, n) = (accumulate ? c : 0) + a @ b, with a(i, l) at a[i * a_row + l * a_col] for
     * l < k, b (k, n) row-major with row stride ldb and c with row stride ldc; n, ldb and ldc
     * are multiples of EM_ATT_NPAD; tri says what may be left out */
    void (*matmul)(int64_t m, int64_t n, int64_t k, const void *a, int64_t a_row, int64_t a_col,
                   const void *b, int64_t ldb, void *c, int64_t ldc, bool accumulate,
                   em_att_tri tri);
    /* y (n) = exp(x - sub), returned summed in double; an x of -inf gives 0 */
    double (*exp_sum)(int64_t n, const void *x, double sub, void *y);
    /* the largest of x (n), -inf when n is 0 */
    double (*row_max)(int64_t n, const void *x);
    /* dst (n, ldd) = scale * the first n elements of `rows` rows of src, transposed:
     * dst[x * ldd + r] = scale * src[r * src_row + x] */
    void (*transpose)(int64_t rows, int64_t n, const void *src, int64_t src_row, double scale,
                      void *dst, int64_t ldd);
} em_att_tiles;

/* Which head's keys and values a thread's scratch holds packed, and up to which key */
typedef struct {
    int64_t bh, keys;
} em_att_packed_head;

/* One task of an attention call on the thread's scratch and packed head: forward, query block
 * task % qblocks of head task / qblocks; backward, head task. */
typedef void (*em_att_task_fn)(void *ctx, void *scratch, em_att_packed_head *packed,
                               int64_t task);

/* cpu_attention.c: runs every task of a call over `heads` (batch x heads) heads of qblocks query
 * blocks, forward or backward (grad), each thread in its own part of one scratch block
 * (per_thread bytes, 64-byte aligned) from the accounting allocator; on one thread below a
 * call's work (B H Lq Lk (D + Dv) multiply-adds) worth forking for. False when the scratch could
 * not be had. */
bool em_att_run_tasks(int64_t heads, int64_t qblocks, bool grad, double work,
                      size_t per_thread, em_att_task_fn task, void *ctx);

/* f32 tiles on AVX2+FMA (avx2, where the CPU has them) or in portable C */
const em_att_tiles *em_cpu_att_tiles_f32(bool avx2);
const em_att_tiles *em_cpu_att_tiles_f64(void);

#endif
