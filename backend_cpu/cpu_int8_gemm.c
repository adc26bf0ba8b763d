/* The int8 product for quantized Linear and Conv2d layers: u7 activations x s8 weights packed
 * once, int32 sums, an f32 dequantizing epilogue; the packing (ember's panels, then oneDNN's
 * layout of the same weights), the choice of path, the driver that splits a product into
 * tiles, the portable tile and the quantized linear layers (on oneDNN's matmul where the CPU
 * has VNNI or AMX-INT8). */
#include <stdatomic.h>
#include <stdlib.h>

#include "backend_cpu/cpu_dnnl_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_int8_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* Why 7-bit activations: without VNNI the fastest exact AVX2 product is _mm256_maddubs_epi16
 * (u8 x s8, pairs summed to a saturating s16) then _mm256_madd_epi16 by ones (pairs to s32):
 * three instructions per 32 multiply-adds. With a in 0..127 and w in -128..127 a pair sum is
 * at most 2 * 127 * 128 = 32512 < 2^15, so nothing saturates; full 8-bit activations could
 * reach 2 * 255 * 128 and would saturate. The s8 x s8 sign trick (abs/sign) keeps 8 bits but
 * costs a fourth instruction per step, and widening to 16 bits halves the work per
 * instruction. fbgemm's reduce_range (PyTorch's x86 default) makes the same choice; VNNI's
 * vpdpbusd would take 8 bits, but every path keeps 7 so that all give the same sums. */

/* a product below this many multiply-adds runs on one thread */
#define PARALLEL_MIN_MNK (1 << 19)
/* rows of a threaded task (a multiple of every path's MR and of the panel) */
#define TASK_ROWS 64

/* The u8 x s8 product of x (m, k) with the weights w (n, k), in oneDNN's terms; its right-hand
 * operand is packed once (em_dnnl_matmul_pack). */
static em_dnnl_matmul_desc dnnl_product(int64_t m, int64_t n, int64_t k, int64_t lda,
                                        int64_t ldc)
{
    return (em_dnnl_matmul_desc){.a_dt = EM_U8, .b_dt = EM_I8, .c_dt = EM_I32, .tb = true,
                                 .m = m, .n = n, .k = k, .batch = 1, .lda = lda, .ldb = k,
                                 .ldc = ldc, .alpha = 1, .b_packed = true};
}

/* The tiles a path's products run on: its own, or for oneDNN's (whole matrices only) the best
 * of ember's. */
static em_cpu_int8_path tile_path(em_cpu_int8_path path)
{
    if (path != EM_CPU_INT8_DNNL)
        return path;
    return em_cpu_has_avx512_vnni() ? EM_CPU_INT8_VNNI
                      : em_cpu_has_avx2() ? EM_CPU_INT8_AVX2 : EM_CPU_INT8_PORTABLE;
}

/* Whether oneDNN has the u8 x s8 product with packed weights, asked once. */
static atomic_int dnnl_known = -1;
static bool dnnl_supported(void)
{
    int v = atomic_load_explicit(&dnnl_known, memory_order_relaxed);
    if (v < 0) {
        const em_dnnl_matmul_desc d = dnnl_product(1, 16, 16, 16, 16);
        v = em_dnnl_matmul_packed_size(&d) > 0;
        atomic_store_explicit(&dnnl_known, v, memory_order_relaxed);
    }
    return v;
}

bool em_cpu_int8_path_supported(em_cpu_int8_path path)
{
    switch (path) {
    case EM_CPU_INT8_PORTABLE:
        return true;
    case EM_CPU_INT8_AVX2:
        return em_cpu_has_avx2();
    case EM_CPU_INT8_VNNI:
        return em_cpu_has_avx512_vnni();
    case EM_CPU_INT8_DNNL:
        return dnnl_supported();
    case EM_CPU_INT8_PATHS:
        break;
    }
    return false;
}

em_cpu_int8_path em_cpu_int8_best_path(void)
{
    return em_cpu_engine_for(EM_CPU_PRODUCT_INT8)->dnnl ? EM_CPU_INT8_DNNL
                                                        : tile_path(EM_CPU_INT8_DNNL);
}

/* Bytes of ember's packed weights for (n, k): int32 row sums of w (np), then np / 16 panels (see
 * cpu_int8_internal.h); np = n rounded up to a tile. oneDNN's packing of w follows them. */
static int64_t tiles_packed_size(int64_t n, int64_t k)
{
    int64_t np = em_int8_round_up(n, EM_INT8_TILE_COLS);
    return np * (int64_t)sizeof(int32_t) + np * em_int8_groups(k) * EM_INT8_KGROUP;
}

int64_t em_cpu_int8_packed_size(int64_t n, int64_t k)
{
    const em_dnnl_matmul_desc d = dnnl_product(1, n, k, k, n);
    return tiles_packed_size(n, k) + (n > 0 && k > 0 ? em_dnnl_matmul_packed_size(&d) : 0);
}

/* oneDNN's packing of the weights in packed, or NULL where there is none */
static const void *dnnl_weights(int64_t n, int64_t k, const void *packed)
{
    const em_dnnl_matmul_desc d = dnnl_product(1, n, k, k, n);
    return n > 0 && k > 0 && em_dnnl_matmul_packed_size(&d) > 0
               ? (const char *)packed + tiles_packed_size(n, k)
               : NULL;
}

int em_cpu_int8_pack(int64_t n, int64_t k, const int8_t *w, void *packed)
{
    const int8_t *wq = w; // (n, k)
    int64_t np = em_int8_round_up(n, EM_INT8_TILE_COLS), kg = em_int8_groups(k);
    int32_t *sums = packed;                   // (np)
    int8_t *panels = (int8_t *)(sums + np); // (np / 16, kg, 16, 4)
    memset(packed, 0, (size_t)em_cpu_int8_packed_size(n, k));
    const void *dnnl = dnnl_weights(n, k, packed);
    if (dnnl && em_dnnl_matmul_pack(&(em_dnnl_matmul_desc){.a_dt = EM_U8, .b_dt = EM_I8,
                                                           .c_dt = EM_I32, .tb = true, .m = 1,
                                                           .n = n, .k = k, .batch = 1,
                                                           .lda = k, .ldb = k, .ldc = n,
                                                           .alpha = 1, .b_packed = true},
                                    w, (void *)dnnl) != EM_KERNEL_OK)
        return EM_KERNEL_FAILED;
    for (int64_t j = 0; j < n; j++) {
        int8_t *col = panels + j / EM_INT8_PANEL * kg * EM_INT8_GROUP_BYTES +
                      j % EM_INT8_PANEL * EM_INT8_KGROUP;
        int32_t s = 0;
        for (int64_t i = 0; i < k; i++) {
            col[i / EM_INT8_KGROUP * EM_INT8_GROUP_BYTES + i % EM_INT8_KGROUP] = wq[j * k + i];
            s += wq[j * k + i];
        }
        sums[j] = s;
    }
    return EM_KERNEL_OK;
}

void em_int8_store_row(const em_int8_product *p, int64_t r, int64_t j0, const int32_t *sum,
                       int width)
{
    int cols = em_int8_out_cols(p, j0, width);
    int64_t o = em_int8_out_index(p, r, j0);
    const em_int8_epilogue *e = p->epi;
    if (!e) {
        memcpy((int32_t *)p->out + o, sum, (size_t)cols * sizeof(int32_t));
        return;
    }
    float *y = (float *)p->out + o;
    for (int c = 0; c < cols; c++) {
        int64_t i = e->per_row ? r : j0 + c;
        float v = (float)(sum[c] - e->corr[i]) * e->scale[i] + e->bias[i];
        y[c] = e->relu && !(v > 0) ? 0.0f : v;
    }
}

void em_int8_tile_portable(const em_int8_product *p, int64_t r0, int mr, int64_t j0)
{
    int64_t kg = em_int8_groups(p->k);
    const int8_t *panels = p->b + j0 / EM_INT8_PANEL * p->b_panel;
    for (int r = 0; r < mr; r++) {
        int32_t sum[EM_INT8_TILE_COLS] = {0};
        const uint8_t *row = em_int8_a_row(p, r0 + r);
        for (int64_t g = 0; g < kg; g++) {
            int32_t word = em_int8_a_group(p, row, g);
            const uint8_t *a = (const uint8_t *)&word;
            for (int c = 0; c < EM_INT8_TILE_COLS; c++) {
                const int8_t *b = panels + c / EM_INT8_PANEL * p->b_panel +
                                  g * EM_INT8_GROUP_BYTES + c % EM_INT8_PANEL * EM_INT8_KGROUP;
                for (int q = 0; q < EM_INT8_KGROUP; q++)
                    sum[c] += p->a_signed ? (int8_t)a[q] * (uint8_t)b[q] : a[q] * b[q];
            }
        }
        em_int8_store_row(p, r0 + r, j0, sum, EM_INT8_PANEL);
        em_int8_store_row(p, r0 + r, j0 + EM_INT8_PANEL, sum + EM_INT8_PANEL, EM_INT8_PANEL);
    }
}

/* A product cut into tasks: column tiles over chunks of TASK_ROWS rows, on one tile kernel. */
typedef struct {
    const em_int8_product *p;
    em_int8_tile_fn tile;
    int mr;
    int64_t chunks;
} product_tasks;

/* Task t of a product: its column tile t / chunks over the rows of chunk t % chunks. */
static void product_task(void *ctx, int64_t t)
{
    const product_tasks *k = ctx;
    const em_int8_product *p = k->p;
    const int64_t chunks = k->chunks;
    const int mr = k->mr;
    int64_t j0 = t / chunks * EM_INT8_TILE_COLS, r_end = (t % chunks + 1) * TASK_ROWS;
    r_end = r_end < p->m ? r_end : p->m;
    for (int64_t r = t % chunks * TASK_ROWS; r < r_end; r += mr)
        k->tile(p, r, (int)(r_end - r < mr ? r_end - r : mr), j0);
}

void em_int8_product_run(em_cpu_int8_path path, const em_int8_product *p, bool threaded)
{
    static const struct {
        em_int8_tile_fn tile;
        int mr;
    } kernels[EM_CPU_INT8_DNNL] = {
        [EM_CPU_INT8_PORTABLE] = {em_int8_tile_portable, EM_INT8_MR_PORTABLE},
        [EM_CPU_INT8_AVX2] = {em_int8_tile_avx2, EM_INT8_MR_AVX2},
        [EM_CPU_INT8_VNNI] = {em_int8_tile_vnni, EM_INT8_MR_VNNI},
    };
    product_tasks k = {p, kernels[tile_path(path)].tile, kernels[tile_path(path)].mr,
                       (p->m + TASK_ROWS - 1) / TASK_ROWS};
    int64_t col_tiles = (p->n + EM_INT8_TILE_COLS - 1) / EM_INT8_TILE_COLS;
    /* a thread's run of tasks keeps its columns' panels */
    em_cpu_run_tasks(col_tiles * k.chunks, threaded && p->m * p->n * p->k >= PARALLEL_MIN_MNK,
                     product_task, &k);
}

/* The product of a (m, k), rows lda bytes apart, with the packed weights into out (m, n). */
static em_int8_product weight_product(int64_t m, int64_t n, int64_t k, const uint8_t *a,
                                      int64_t lda, const void *packed, void *out, int64_t ldo)
{
    int64_t np = em_int8_round_up(n, EM_INT8_TILE_COLS);
    return (em_int8_product){.m = m, .n = n, .k = k, .a = a, .lda = lda,
                             .b = (const int8_t *)((const int32_t *)packed + np),
                             .b_panel = em_int8_groups(k) * EM_INT8_GROUP_BYTES, .out = out,
                             .ldo = ldo, .seg = np > 0 ? np : EM_INT8_TILE_COLS,
                             .seg_valid = n};
}

/* Products of fewer rows run on ember's tiles even where oneDNN's are the best path: a call into
 * oneDNN costs more than the product. On 2 threads of a Zen 4 EPYC, u8 x s8 (n 512, k 784):
 * 1 row tiles 5.3 us, oneDNN 6.1-9.4 us; 64 rows 123 / 115 us; 256 rows 492 / 450 us. */
#define DNNL_MIN_ROWS 16

/* c (m, n) i32 = a (m, k) @ w^T on oneDNN from its packing of w, for DNNL_MIN_ROWS rows or
 * more; EM_KERNEL_UNSUPPORTED where it does not take these operands (the caller runs ember's
 * tiles). */
static int dnnl_sums(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t lda,
                     const void *packed, int32_t *c, int64_t ldc)
{
    const void *w = dnnl_weights(n, k, packed);
    const em_dnnl_matmul_desc d = dnnl_product(m, n, k, lda, ldc);
    return w ? em_dnnl_matmul(&d, a, w, NULL, c) : EM_KERNEL_UNSUPPORTED;
}

int em_cpu_int8_gemm_path(em_cpu_int8_path path, int64_t m, int64_t n, int64_t k,
                          const uint8_t *a, int64_t lda, const void *packed, int32_t *c,
                          int64_t ldc)
{
    if (m < 0 || n < 0 || k < 0 || lda < 1 || lda < k || ldc < n ||
        !em_cpu_int8_path_supported(path))
        return EM_KERNEL_UNSUPPORTED;
    const int rc = path == EM_CPU_INT8_DNNL && m >= DNNL_MIN_ROWS
                       ? dnnl_sums(m, n, k, a, lda, packed, c, ldc)
                       : EM_KERNEL_UNSUPPORTED;
    if (rc != EM_KERNEL_UNSUPPORTED)
        return rc;
    em_int8_product p = weight_product(m, n, k, a, lda, packed, c, ldc);
    em_int8_product_run(path, &p, true);
    return EM_KERNEL_OK;
}

/* y (cols) = the epilogue of one row's int32 sums (cols) */
EM_WIDEST_LANES static void epilogue_row(int64_t cols, const int32_t *restrict sum,
                                         const em_int8_epilogue *e, float *restrict y)
{
    const int32_t *restrict corr = e->corr;
    const float *restrict scale = e->scale, *restrict bias = e->bias;
    const bool relu = e->relu;
    #pragma omp simd
    for (int64_t j = 0; j < cols; j++) {
        const float v = (float)(sum[j] - corr[j]) * scale[j] + bias[j];
        y[j] = relu && !(v > 0) ? 0.0f : v; /* as the tiles: relu takes NaN to 0 */
    }
}

/* The epilogue of a product's rows of int32 sums (n each) into y */
typedef struct {
    int64_t n;
    const int32_t *sums;
    const em_int8_epilogue *e;
    float *y;
} epilogue_rows;

static void epilogue_task(void *ctx, int64_t i)
{
    const epilogue_rows *r = ctx;
    epilogue_row(r->n, r->sums + i * r->n, r->e, r->y + i * r->n);
}

/* y (m, n) = the epilogue of the product of q (m, k) with the weights, on oneDNN */
static int dnnl_qlinear(int64_t m, int64_t n, int64_t k, const uint8_t *q, int64_t lda,
                        const void *packed, const em_int8_epilogue *e, float *y)
{
    int32_t *sums = em_cpu_scratch((size_t)(m * n > 0 ? m * n : 1) * sizeof(int32_t));
    int rc = sums ? dnnl_sums(m, n, k, q, lda, packed, sums, n) : EM_KERNEL_FAILED;
    epilogue_rows r = {n, sums, e, y};
    em_cpu_run_tasks(rc == EM_KERNEL_OK ? m : 0, m * n >= EM_CPU_PARALLEL_MIN, epilogue_task, &r);
    em_cpu_scratch_free(sums);
    return rc;
}

void *em_int8_epilogue_init(em_int8_epilogue *e, int64_t n, const void *packed, float x_scale,
                            int32_t x_zero_point, const float *w_scale, int64_t n_scales,
                            const float *bias)
{
    int64_t np = em_int8_round_up(n, EM_INT8_TILE_COLS);
    float *scale = em_cpu_scratch((size_t)(np > 0 ? np : 1) * (2 * sizeof(float) +
                                                                sizeof(int32_t)));
    if (!scale)
        return NULL;
    float *b = scale + np;               // (np)
    int32_t *corr = (int32_t *)(b + np); // (np)
    const int32_t *sums = packed;        // (np)
    for (int64_t j = 0; j < np; j++) {
        bool real = j < n;
        scale[j] = real ? x_scale * w_scale[n_scales == 1 ? 0 : j] : 0;
        b[j] = real && bias ? bias[j] : 0;
        corr[j] = x_zero_point * sums[j];
    }
    *e = (em_int8_epilogue){.corr = corr, .scale = scale, .bias = b};
    return scale;
}

int em_int8_qlinear(em_cpu_int8_path path, int64_t m, int64_t n, int64_t k, const float *x,
                    bool dynamic, float x_scale, int32_t x_zero_point, const void *packed,
                    const float *w_scale, int64_t n_scales, const float *bias, bool relu,
                    float *y)
{
    if (m < 0 || n < 0 || k < 0 || (n_scales != 1 && n_scales != n) ||
        !em_cpu_int8_path_supported(path))
        return EM_KERNEL_UNSUPPORTED;
    int64_t lda = k > 0 ? k : 1;
    uint8_t *q = em_cpu_scratch((size_t)(m * lda > 0 ? m * lda : 1)); // (m, lda)
    em_int8_epilogue epi = {0};
    void *arrays = NULL;
    if (q) {
        bool avx2 = tile_path(path) != EM_CPU_INT8_PORTABLE;
        if (dynamic)
            em_int8_quantize_range(avx2, m * k, x, q, &x_scale, &x_zero_point);
        else
            em_int8_quantize_fixed(avx2, m * k, x, x_scale, x_zero_point, q);
        arrays = em_int8_epilogue_init(&epi, n, packed, x_scale, x_zero_point, w_scale,
                                       n_scales, bias);
    }
    epi.relu = relu;
    int rc = arrays && path == EM_CPU_INT8_DNNL && m >= DNNL_MIN_ROWS
                 ? dnnl_qlinear(m, n, k, q, lda, packed, &epi, y)
                 : EM_KERNEL_UNSUPPORTED;
    if (arrays && rc == EM_KERNEL_UNSUPPORTED) {
        em_int8_product p = weight_product(m, n, k, q, lda, packed, y, n);
        p.epi = &epi;
        em_int8_product_run(path, &p, true);
    }
    em_cpu_scratch_free(q);
    em_cpu_scratch_free(arrays);
    return !arrays ? EM_KERNEL_FAILED : rc == EM_KERNEL_FAILED ? rc : EM_KERNEL_OK;
}

int em_cpu_qlinear_dynamic_path(em_cpu_int8_path path, int64_t m, int64_t n, int64_t k,
                                const float *x, const void *packed, const float *w_scale,
                                int64_t n_scales, const float *bias, float *y)
{
    return em_int8_qlinear(path, m, n, k, x, true, 0, 0, packed, w_scale, n_scales, bias, false,
                           y);
}

int em_cpu_qlinear_dynamic(int64_t m, int64_t n, int64_t k, const float *x, const void *packed,
                           const float *w_scale, int64_t n_scales, const float *bias, float *y)
{
    return em_cpu_qlinear_dynamic_path(em_cpu_int8_best_path(), m, n, k, x, packed, w_scale,
                                       n_scales, bias, y);
}
