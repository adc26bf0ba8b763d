/* f32 products of a Linear, c (m, n) = a (m, k) @ op(b) + its bias (or + c, or nothing), op(b)
 * being b^T with b (n, k) (the forward's x @ w^T) or b (k, n) itself (the input gradient's
 * g @ w), on AVX2+FMA: op(b) is copied once per call into panels of 16 columns (k, 16), and each
 * 6 x 16 tile of c is summed over all of k in 12 registers, reading the 6 rows of a where they
 * lie. OpenBLAS copies a into panels too; at a Linear's sizes (k of a few hundred, thousands of
 * rows) skipping that copy measured 10-20% faster on 2 threads for x @ w^T (4096 x 512 x 128:
 * 4.0 -> 3.2 ms) and about even for g @ w. Each element of c is one sum in the order of k, on any
 * number of threads. Weight gradients (a^T b over the rows) stay with OpenBLAS: read unpacked,
 * their long sums ran at half its speed. */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_dnnl_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

#define TILE_ROWS 6
#define PANEL 16
/* Products with fewer rows of c than this go to OpenBLAS: each element of op(b) copied serves
 * m multiply-adds, and below this OpenBLAS's vector copies won (an MLP at batch 64, 784 -> 512:
 * 35k -> 25k samples/s with the tiles at 64 rows). */
#define TILES_MIN_ROWS 512
/* ... and with a longer k: a's rows would no longer stay in cache across a row of tiles. */
#define TILES_MAX_K 1024
/* ... and with a b of more elements: its copy would be a large allocation of its own. */
#define TILES_MAX_B (1 << 20)
/* A product below this many multiply-adds runs on one thread. */
#define TILES_PARALLEL_MIN_MNK (1 << 18)
/* Rows of c go to threads in chunks of this many blocks of TILE_ROWS as the threads come free,
 * so that a core the machine slows takes fewer: in `ember profile gpt` the threads' wait for
 * each other at the end of the tiles fell from 4.8% to 0.8% of their time (halves of the rows
 * fixed per thread before). a's column sums are kept per chunk and added in row order. */
#define CHUNK_BLOCKS 16
/* Bytes of b's panels that one sweep over a block of rows reuses, kept in the core's L2. */
#define PANELS_BYTES (256 * 1024)

/* What a tile of c starts from: 16 bias values for every row, else c itself (load) or 0 */
typedef struct {
    const float *bias;
    bool load;
} tile_start;

/* c (rows, 16) = start + a (rows, k) @ panel (k, 16), c f32 or (bf16) rounded to bf16 as it is
 * stored; rows <= TILE_ROWS and bf16 constants at each call, so each call unrolls into its own
 * register tile. */
EM_AVX2 static inline __attribute__((always_inline)) void
tile(const int rows, const bool bf16, int64_t k, const float *a, int64_t lda, const float *panel,
     void *c, int64_t ldc, tile_start start)
{
    __m256 acc[TILE_ROWS][2];
    const __m256 zero = _mm256_setzero_ps();
    const __m256 b0 = start.bias ? _mm256_loadu_ps(start.bias) : zero;
    const __m256 b1 = start.bias ? _mm256_loadu_ps(start.bias + 8) : zero;
    const float *cf = c; /* start.load: f32 only */
    #pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        acc[r][0] = start.load ? _mm256_loadu_ps(cf + r * ldc) : b0;
        acc[r][1] = start.load ? _mm256_loadu_ps(cf + r * ldc + 8) : b1;
    }
    for (int64_t l = 0; l < k; l++, panel += PANEL) {
        __m256 b0 = _mm256_load_ps(panel), b1 = _mm256_load_ps(panel + 8);
        #pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 x = _mm256_broadcast_ss(a + r * lda + l);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
    }
    #pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        if (bf16) {
            em_store_bf16x16_avx2((uint16_t *)c + r * ldc, acc[r][0], acc[r][1]);
            continue;
        }
        _mm256_storeu_ps((float *)c + r * ldc, acc[r][0]);
        _mm256_storeu_ps((float *)c + r * ldc + 8, acc[r][1]);
    }
}

/* The tile of `rows` rows at a, c, with rows given at run time (c f32) */
EM_AVX2 static void tile_rows(int64_t rows, int64_t k, const float *a, int64_t lda,
                              const float *panel, float *c, int64_t ldc, tile_start start)
{
    switch (rows) {
    case 6: tile(6, false, k, a, lda, panel, c, ldc, start); break;
    case 5: tile(5, false, k, a, lda, panel, c, ldc, start); break;
    case 4: tile(4, false, k, a, lda, panel, c, ldc, start); break;
    case 3: tile(3, false, k, a, lda, panel, c, ldc, start); break;
    case 2: tile(2, false, k, a, lda, panel, c, ldc, start); break;
    default: tile(1, false, k, a, lda, panel, c, ldc, start); break;
    }
}

/* A tile of c (f32, or bf16 rounded as stored) with rows given at run time and `cols` <= 16
 * real columns in its panel: through a 16-wide f32 copy where it is not a whole f32 tile */
EM_AVX2 static void tile_any(bool bf16, int64_t rows, int64_t cols, int64_t k, const float *a,
                             int64_t lda, const float *panel, void *c, int64_t ldc,
                             tile_start start)
{
    if (!bf16 && cols == PANEL) {
        tile_rows(rows, k, a, lda, panel, c, ldc, start);
        return;
    }
    if (bf16 && cols == PANEL && rows == TILE_ROWS) {
        tile(TILE_ROWS, true, k, a, lda, panel, c, ldc, start);
        return;
    }
    float part[TILE_ROWS * PANEL] = {0}, bias[PANEL] = {0};
    for (int64_t r = 0; start.load && r < rows; r++) /* start.load: f32 only */
        memcpy(part + r * PANEL, (float *)c + r * ldc, (size_t)cols * sizeof(float));
    if (start.bias) {
        memcpy(bias, start.bias, (size_t)cols * sizeof(float));
        start.bias = bias;
    }
    tile_rows(rows, k, a, lda, panel, part, PANEL, start);
    for (int64_t r = 0; r < rows; r++)
        if (bf16)
            em_cpu_f32_to_half_n(EM_BF16, (uint16_t *)c + r * ldc, part + r * PANEL, cols);
        else
            memcpy((float *)c + r * ldc, part + r * PANEL, (size_t)cols * sizeof(float));
}

/* dst (n) = src (n) of f32 or bf16, as f32 */
static void copy_row(bool bf16, float *dst, const void *src, int64_t n)
{
    if (bf16)
        em_cpu_half_to_f32_n(EM_BF16, dst, src, n);
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

/* Element offset i of f32 or bf16 data */
static inline const void *at(bool bf16, const void *p, int64_t i)
{
    return (const char *)p + i * (bf16 ? 2 : 4);
}

/* panels (ceil(n / 16), k, 16) = op(b) (k, n) in f32, in groups of 16 columns, zero past column
 * n: b (n, k) transposed when tb, else b (k, n) as it is; b f32 or bf16 (widened as copied) */
static void pack_panels(bool bf16, const void *b, int64_t ldb, bool tb, int64_t n, int64_t k,
                        float *panels)
{
    const int64_t count = (n + PANEL - 1) / PANEL;
    #pragma omp for schedule(static)
    for (int64_t p = 0; p < count; p++) {
        const int64_t j0 = p * PANEL, cols = n - j0 < PANEL ? n - j0 : PANEL;
        float *panel = panels + p * k * PANEL;
        for (int64_t j = 0; tb && j < PANEL; j++) {
            const void *row = j < cols ? at(bf16, b, (j0 + j) * ldb) : NULL;
            for (int64_t l = 0; l < k; l++)
                panel[l * PANEL + j] = row ? em_cpu_f32_or_bf16_at(bf16, row, l) : 0.0f;
        }
        for (int64_t l = 0; !tb && l < k; l++) {
            copy_row(bf16, panel + l * PANEL, at(bf16, b, l * ldb + j0), cols);
            memset(panel + l * PANEL + cols, 0, (size_t)(PANEL - cols) * sizeof(float));
        }
    }
}

/* sums (k) += the rows of a (rows, k), each element widened to double */
EM_AVX2 static void add_rows(int64_t rows, int64_t k, const float *a, int64_t lda, double *sums)
{
    for (int64_t r = 0; r < rows; r++, a += lda) {
        int64_t l = 0;
        for (; l + 4 <= k; l += 4)
            _mm256_storeu_pd(sums + l, _mm256_add_pd(_mm256_loadu_pd(sums + l),
                                                     _mm256_cvtps_pd(_mm_loadu_ps(a + l))));
        for (; l < k; l++)
            sums[l] += a[l];
    }
}

/* Rows [r0, r1) of c against panels [p0, p1); a's rows summed into a_sums (k) when not NULL,
 * while they are in cache. a and c f32, or bf16: a block of a's rows widened into the thread's
 * buffer as the block starts, c rounded to bf16 as the tiles store it. */
EM_AVX2 static void tiles(bool bf16, const void *a, int64_t lda, const float *panels, int64_t n,
                          int64_t k, const float *bias, bool load, void *c, int64_t ldc,
                          int64_t r0, int64_t r1, int64_t p0, int64_t p1, double *a_sums)
{
    float block[TILE_ROWS * TILES_MAX_K]; /* (rows, k) of a widened, bf16 only */
    for (int64_t i = r0; i < r1; i += TILE_ROWS) {
        int64_t rows = r1 - i < TILE_ROWS ? r1 - i : TILE_ROWS;
        const float *ai = bf16 ? block : (const float *)a + i * lda;
        const int64_t ld = bf16 ? k : lda;
        for (int64_t r = 0; bf16 && r < rows; r++)
            copy_row(true, block + r * k, at(true, a, (i + r) * lda), k);
        for (int64_t p = p0; p < p1; p++) {
            const float *panel = panels + p * k * PANEL;
            void *ct = (char *)c + (i * ldc + p * PANEL) * (bf16 ? 2 : 4);
            int64_t cols = n - p * PANEL;
            tile_start start = {bias ? bias + p * PANEL : NULL, load};
            if (!bf16 && cols >= PANEL && rows == TILE_ROWS)
                tile(TILE_ROWS, false, k, ai, ld, panel, ct, ldc, start);
            else
                tile_any(bf16, rows, cols < PANEL ? cols : PANEL, k, ai, ld, panel, ct, ldc,
                         start);
        }
        if (a_sums)
            add_rows(rows, k, ai, ld, a_sums);
    }
}

/* em_cpu_gemm_tiles_f32 on f32, or on bf16 a, b and c (em_cpu_linear_tiles_bf16) */
static bool gemm_tiles(bool bf16, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                       const void *b, int64_t ldb, bool tb, em_tiles_extras extras, void *c,
                       int64_t ldc)
{
    if (m < TILES_MIN_ROWS || k < 1 || k > TILES_MAX_K || n < 1 || n * k > TILES_MAX_B ||
        !em_cpu_has_avx2() || (bf16 && extras.add_to_c))
        return false;
    const int64_t count = (n + PANEL - 1) / PANEL;
    const int nt = m * n * k >= TILES_PARALLEL_MIN_MNK ? em_cpu_threads() : 1;
    const int64_t blocks = (m + TILE_ROWS - 1) / TILE_ROWS;
    const int64_t chunks = (blocks + CHUNK_BLOCKS - 1) / CHUNK_BLOCKS;
    /* the panels, then each chunk's sums of a's columns (aligned: panels are 16 floats wide) */
    const int64_t sums = extras.a_col_sums ? chunks * k : 0;
    float *panels = em_cpu_scratch((size_t)(count * k * PANEL) * sizeof(float) +
                                   (size_t)sums * sizeof(double));
    if (!panels)
        return false;
    double *chunk_sums = (double *)(panels + count * k * PANEL);
    for (int64_t l = 0; l < sums; l++)
        chunk_sums[l] = 0;
    int64_t group = PANELS_BYTES / (k * PANEL * (int64_t)sizeof(float)); /* panels per sweep */
    group = group < 1 ? 1 : group;
    const int64_t sweeps = (count + group - 1) / group;
    const bool load = extras.add_to_c && !extras.bias;
    const int64_t side = extras.side ? extras.side_tasks : 0;
    #pragma omp parallel num_threads(nt)
    {
        pack_panels(bf16, b, ldb, tb, n, k, panels);
        #pragma omp for schedule(dynamic) nowait
        for (int64_t task = -side; task < sweeps * chunks; task++) {
            if (task < 0) {
                extras.side(extras.side_ctx, task + side);
                continue;
            }
            const int64_t p0 = task / chunks * group, chunk = task % chunks;
            const int64_t r0 = chunk * CHUNK_BLOCKS * TILE_ROWS, r1 = r0 + CHUNK_BLOCKS * TILE_ROWS;
            tiles(bf16, a, lda, panels, n, k, extras.bias, load, c, ldc, r0, r1 < m ? r1 : m, p0,
                  p0 + group < count ? p0 + group : count,
                  sums && p0 == 0 ? chunk_sums + chunk * k : NULL);
        }
    }
    for (int64_t l = 0; sums && l < k; l++) { /* the chunks' sums in row order */
        double sum = 0;
        for (int64_t t = 0; t < chunks; t++)
            sum += chunk_sums[t * k + l];
        extras.a_col_sums[l] = (float)sum;
    }
    em_cpu_scratch_free(panels);
    return true;
}

bool em_cpu_gemm_tiles_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, bool tb, em_tiles_extras extras,
                           float *c, int64_t ldc)
{
    return gemm_tiles(false, m, n, k, a, lda, b, ldb, tb, extras, c, ldc);
}

bool em_cpu_linear_tiles_bf16(int64_t m, int64_t n, int64_t k, const uint16_t *x, int64_t ldx,
                              const uint16_t *w, int64_t ldw, const float *bias, uint16_t *y,
                              int64_t ldy)
{
    return gemm_tiles(true, m, n, k, x, ldx, w, ldw, true, (em_tiles_extras){.bias = bias}, y,
                      ldy);
}

int em_cpu_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                  const void *w, int64_t ldw, const void *b, void *y, int64_t ldy)
{
    if (em_cpu_dnnl_takes(dt))
        return em_cpu_dnnl_linear(dt, m, n, k, x, ldx, w, ldw, b, y, ldy);
    if (em_cpu_is_half(dt))
        return em_cpu_half_linear(dt, m, n, k, x, ldx, w, ldw, b, y, ldy);
    return dt == EM_F32 && em_cpu_gemm_tiles_f32(m, n, k, x, ldx, w, ldw, true,
                                                 (em_tiles_extras){.bias = b}, y, ldy)
               ? EM_KERNEL_OK
               : EM_KERNEL_UNSUPPORTED;
}

/* Rows of a weight gradient per task of em_cpu_linear_grad: a fixed cut, since OpenBLAS's sums
 * for a row depend on the block it is in (so gw has the same bits on any number of threads).
 * Fewer blocks copy x into OpenBLAS's panels fewer times: the gpt's five Linear backwards
 * (4096 rows), 2 threads, against gx then gw in two calls: 512 rows -7.4%, 256 -4.8%, 128 -4.0%
 * (medians of 40 alternating calls, three runs each). */
#define WEIGHT_ROWS 512

/* The weight gradient's part of em_cpu_linear_grad: rows [task * rows, ...) of gw = g^T x, one
 * OpenBLAS product on the thread that takes the task */
typedef struct {
    const em_linear_grads *a;
    int64_t rows;
} weight_rows;

static void weight_rows_task(void *ctx, int64_t task)
{
    const weight_rows *wr = ctx;
    const em_linear_grads *a = wr->a;
    const int64_t r0 = task * wr->rows, rows = a->k - r0 < wr->rows ? a->k - r0 : wr->rows;
    em_cpu_gemm(EM_F32, true, false, rows, a->n, a->m, 1.0, (const float *)a->g + r0, a->ldg, 0,
                a->x, a->ldx, 0, 0.0, (float *)a->gw + r0 * a->ldgw, a->ldgw, 0, 1);
}

/* gx and gb from the tiles, and gw in blocks of WEIGHT_ROWS rows handed out first on the same
 * threads: a thread done first with its block takes more of the tiles' chunks, where gw on its
 * own had one thread wait for the other at its end, and one fork serves both products. */
int em_cpu_linear_grad(em_dtype dt, const em_linear_grads *a)
{
    if (em_cpu_dnnl_takes(dt))
        return em_cpu_dnnl_linear_grad(dt, a);
    if (em_cpu_is_half(dt))
        return em_cpu_half_linear_grad(dt, a);
    if (dt != EM_F32 || a->param_dt != dt || !a->gx ||
        (a->gw && (a->ldg < a->k || a->ldx < a->n || a->ldgw < a->n)))
        return EM_KERNEL_UNSUPPORTED;
    weight_rows wr = {a, WEIGHT_ROWS};
    em_tiles_extras extras = {.a_col_sums = a->gb};
    if (a->gw) {
        em_cpu_blas_one_thread();
        extras.side_tasks = (a->k + WEIGHT_ROWS - 1) / WEIGHT_ROWS;
        extras.side = weight_rows_task;
        extras.side_ctx = &wr;
    }
    return em_cpu_gemm_tiles_f32(a->m, a->n, a->k, a->g, a->ldg, a->w, a->ldw, false, extras,
                                 a->gx, a->ldgx)
               ? EM_KERNEL_OK
               : EM_KERNEL_UNSUPPORTED;
}
