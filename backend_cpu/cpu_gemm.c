/* CPU matrix products: row-major batched GEMM through OpenBLAS (sgemm, dgemm); bf16 on oneDNN
 * where the CPU multiplies bf16 (cpu_dnnl_products.c); elsewhere f16/bf16 are widened to f32,
 * multiplied with f32 accumulation and rounded back. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_dnnl_internal.h"

/* All CPU parallelism in ember is OpenMP's: OpenBLAS is kept at one thread (its own spinning
 * threads would fight OpenMP's for the cores; measured on 2 cores, a product right after an
 * OpenMP loop ran at half speed) and each product is cut into blocks of C (and K into passes
 * where needed), one BLAS call per block and pass, the blocks spread over OpenMP threads. */

/* A product below this many multiply-adds runs on one thread: the fork costs more than it saves. */
#define PARALLEL_MIN_MNK (1 << 18)
/* ... and a matrix-vector product below this many: it reads each element of the matrix once, so
 * its time is the matrix's bytes, which two cores' caches deliver about twice as fast as one
 * (the batch-1 forward of the 784-512-256-10 MLP on 2 threads of a Zen 4 EPYC, its 256x512 layer
 * split too: p50 20.4-20.9 -> 17.2-18.6 us, `ember bench infer`). */
#define PARALLEL_MIN_GEMV (1 << 15)
/* Blocks handed to threads are multiples of this many rows or columns, keeping BLAS tiles whole. */
#define SPLIT_ALIGN 16

typedef struct {
    bool ta, tb;
    int64_t m, n, k;
    double alpha, beta;
    int64_t lda, ldb, ldc;
} gemm_dims;

/* BLAS wants ld >= max(1, cols); a single-row matrix may carry any ld, so widen it there.
 * False when a multi-row matrix overlaps its own rows (a broadcast that BLAS cannot read). */
static bool fix_ld(int64_t rows, int64_t cols, int64_t *ld)
{
    int64_t need = cols > 1 ? cols : 1;
    if (*ld >= need)
        return true;
    if (rows > 1)
        return false;
    *ld = need;
    return true;
}

/* C = beta * C, the whole product when k == 0; beta 0 writes zeros even over NaN. */
static void scale_c(em_dtype dt, const gemm_dims *g, void *c, int64_t stride_c, int64_t batch)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) {
                int64_t at = b * stride_c + i * g->ldc + j;
                if (dt == EM_F64) {
                    double *p = (double *)c + at;
                    *p = g->beta == 0 ? 0 : g->beta * *p;
                } else if (dt == EM_F32) {
                    float *p = (float *)c + at;
                    *p = g->beta == 0 ? 0 : (float)g->beta * *p;
                } else {
                    uint16_t *p = (uint16_t *)c + at;
                    float v = dt == EM_F16 ? em_f16_to_f32(*p) : em_bf16_to_f32(*p);
                    v = g->beta == 0 ? 0 : (float)g->beta * v;
                    *p = dt == EM_F16 ? em_f32_to_f16(v) : em_f32_to_bf16(v);
                }
            }
}

/* A product with one row or one column of C as a matrix-vector product: OpenBLAS's gemm packs
 * both operands whatever their shape, which at one row costs more than the product (a batch-1
 * 784x512 Linear, one thread: sgemm 137 us, sgemv 24 us). C's vector is zeroed first where beta
 * is 0, so NaN in it does not survive (gemv scales y by beta). */
static void blas_gemv(em_dtype dt, const gemm_dims *g, const void *a, const void *b, void *c)
{
    bool row = g->m == 1; /* C (1, n) = a (1, k) @ op(B); else C (m, 1) = op(A) @ b (k, 1) */
    const void *mat = row ? b : a, *vec = row ? a : b;
    int64_t ld = row ? g->ldb : g->lda, len = row ? g->n : g->m;
    /* the matrix as stored: op(B)^T is (n, k) when B is stored transposed, op(A) (m, k) when A
     * is not */
    bool stored_as_rows = row ? g->tb : !g->ta;
    int64_t rows = stored_as_rows ? len : g->k, cols = stored_as_rows ? g->k : len;
    int64_t inc_vec = row ? (g->ta ? g->lda : 1) : (g->tb ? 1 : g->ldb);
    int64_t inc_c = row ? 1 : g->ldc;
    CBLAS_TRANSPOSE t = stored_as_rows ? CblasNoTrans : CblasTrans;
    size_t es = em_dtype_size(dt);
    if (g->beta == 0)
        for (int64_t i = 0; i < len; i++)
            memset((char *)c + (size_t)(i * inc_c) * es, 0, es);
    if (dt == EM_F32)
        cblas_sgemv(CblasRowMajor, t, (int)rows, (int)cols, (float)g->alpha, mat, (int)ld, vec,
                    (int)inc_vec, (float)g->beta, c, (int)inc_c);
    else
        cblas_dgemv(CblasRowMajor, t, (int)rows, (int)cols, g->alpha, mat, (int)ld, vec,
                    (int)inc_vec, g->beta, c, (int)inc_c);
}

static void blas1(em_dtype dt, const gemm_dims *g, const void *a, const void *b, void *c)
{
    if (g->m == 1 || g->n == 1) {
        blas_gemv(dt, g, a, b, c);
        return;
    }
    CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    if (dt == EM_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, (float)g->alpha,
                    a, (int)g->lda, b, (int)g->ldb, (float)g->beta, c, (int)g->ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, g->alpha,
                    a, (int)g->lda, b, (int)g->ldb, g->beta, c, (int)g->ldc);
}

/* How one product's C is cut: blocks of `rows` x `cols`, K in passes of `depth` over a block
 * (the first with the product's beta, the rest adding in). */
typedef struct {
    int64_t rows, cols, depth;
} gemm_cut;

/* The block of C at row r0, column c0: cut->rows x cut->cols or what is left at C's edges. */
static void gemm_block(em_dtype dt, const gemm_dims *g, const char *a, const char *b, char *c,
                       const gemm_cut *cut, int64_t r0, int64_t c0)
{
    size_t es = em_dtype_size(dt);
    gemm_dims sub = *g;
    sub.m = g->m - r0 < cut->rows ? g->m - r0 : cut->rows;
    sub.n = g->n - c0 < cut->cols ? g->n - c0 : cut->cols;
    for (int64_t k0 = 0; k0 < g->k; k0 += cut->depth) {
        sub.k = g->k - k0 < cut->depth ? g->k - k0 : cut->depth;
        sub.beta = k0 ? 1.0 : g->beta;
        const char *ak = a + (size_t)(g->ta ? k0 * g->lda + r0 : r0 * g->lda + k0) * es;
        const char *bk = b + (size_t)(g->tb ? c0 * g->ldb + k0 : k0 * g->ldb + c0) * es;
        blas1(dt, &sub, ak, bk, c + (size_t)(r0 * g->ldc + c0) * es);
    }
}

/* OpenBLAS's rule for its unpacked small-matrix kernels (sgemm_small_kernel_permit of the
 * SkylakeX set): products of at most this many multiply-adds, and in the form that is ember's
 * row-major A @ B^T, C blocks of at most SMALL_MAX_C elements and K of at least SMALL_MIN_K. */
#define SMALL_MAX_MNK 1000000
#define SMALL_MAX_C 1200
#define SMALL_MIN_K 32
/* An A^T B cut into blocks of rows and columns paid at K 64 (a batch of 64) and lost at 256:
 * 512x784 weight gradients on one thread, K 64: 414 -> 342 us, K 256: 1449 -> 1755 us. */
#define SMALL_GRID_MAX_K 64

static int64_t align_up(int64_t v)
{
    return (v + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
}

static int64_t align_down(int64_t v)
{
    return v / SPLIT_ALIGN * SPLIT_ALIGN;
}

/* The piece of len cut into `pieces` equal ones, rounded up to a multiple of SPLIT_ALIGN. */
static int64_t piece_of(int64_t len, int64_t pieces)
{
    return align_up((len + pieces - 1) / pieces);
}

/* len cut into equal pieces of at most `most` (a multiple of SPLIT_ALIGN): the piece. */
static int64_t even_piece(int64_t len, int64_t most)
{
    return piece_of(len, (len + most - 1) / most);
}

/* The cut that makes every block a product OpenBLAS multiplies with its small-matrix kernels,
 * or rows 0 where there is none or the whole product already is one. Those kernels read A and B
 * where they lie — no copy into packed panels, no pass zeroing C first. Only the A^T B of a
 * weight gradient (blocks of rows, and of columns where rows alone are too big and K is small)
 * and the A B^T of x @ w^T (blocks of columns, K in passes where needed). Measured on two
 * threads, 64x512x784 x @ w^T 260 -> 208 us, its 512x784x64 weight gradient 270 -> 188 us; on
 * one thread the CNN's 64x128x3136 x @ w^T (four passes of K 784) 505 -> 392 us, its
 * 128x3136x64 gradient (blocks of 16 x 784) 457 -> 348 us. Cutting an input gradient's plain
 * A B gained nothing and slowed the optimizer's pass after it (122 -> 152 us); OpenBLAS never
 * takes the TT form. */
static gemm_cut small_cut(const gemm_dims *g)
{
    const gemm_cut none = {0, 0, 0};
    if (g->ta == g->tb || !em_cpu_blas_small_kernels())
        return none;
    if (g->ta) {
        int64_t rows = align_down(SMALL_MAX_MNK / (g->n * g->k));
        if (rows >= SPLIT_ALIGN)
            return rows < g->m ? (gemm_cut){even_piece(g->m, rows), g->n, g->k} : none;
        int64_t cols = align_down(SMALL_MAX_MNK / (SPLIT_ALIGN * g->k));
        return cols >= SPLIT_ALIGN && g->k <= SMALL_GRID_MAX_K
                   ? (gemm_cut){SPLIT_ALIGN, even_piece(g->n, cols), g->k}
                   : none;
    }
    int64_t cols = align_down(SMALL_MAX_C / g->m);
    if (cols < SPLIT_ALIGN || g->k < SMALL_MIN_K || cols >= g->n)
        return none;
    int64_t depth = SMALL_MAX_MNK / (g->m * cols), passes = (g->k + depth - 1) / depth;
    depth = (g->k + passes - 1) / passes;
    return depth >= SMALL_MIN_K ? (gemm_cut){g->m, cols, depth} : none;
}

/* The multiply-adds from which a product is spread over the threads. */
static int64_t parallel_min(const gemm_dims *g)
{
    return g->m == 1 || g->n == 1 ? PARALLEL_MIN_GEMV : PARALLEL_MIN_MNK;
}

/* Without small-kernel blocks: the whole product, or where threads would idle one block per
 * thread, rows of C when A comes transposed (a weight gradient: rows ran faster than columns,
 * 512x784x64 in 2 blocks 256 -> 229 us) or C is taller than wide, else columns. */
static gemm_cut thread_cut(const gemm_dims *g, int nt, int64_t batch)
{
    gemm_cut cut = {g->m, g->n, g->k};
    if (nt < 2 || batch >= nt || g->m * g->n * g->k < parallel_min(g))
        return cut;
    bool split_rows = g->ta || g->m >= g->n;
    int64_t len = split_rows ? g->m : g->n, most = (len + SPLIT_ALIGN - 1) / SPLIT_ALIGN;
    *(split_rows ? &cut.rows : &cut.cols) = piece_of(len, nt < most ? nt : most);
    return cut;
}

/* A batched product cut into tasks: block p of product i for task i * parts + p. */
typedef struct {
    em_dtype dt;
    const gemm_dims *g;
    const gemm_cut *cut;
    const void *a;
    int64_t stride_a;
    const void *b;
    int64_t stride_b;
    void *c;
    int64_t stride_c;
    int64_t col_blocks, parts; /* blocks of columns, and of C, per product */
} gemm_tasks;

static void gemm_task(void *ctx, int64_t t)
{
    const gemm_tasks *k = ctx;
    const size_t es = em_dtype_size(k->dt);
    const int64_t i = t / k->parts, p = t % k->parts;
    gemm_block(k->dt, k->g, (const char *)k->a + (size_t)(i * k->stride_a) * es,
               (const char *)k->b + (size_t)(i * k->stride_b) * es,
               (char *)k->c + (size_t)(i * k->stride_c) * es, k->cut,
               p / k->col_blocks * k->cut->rows, p % k->col_blocks * k->cut->cols);
}

/* f32/f64 batched product: whole products over threads when the batch fills them; a single f32
 * product in small-kernel blocks where it can be, else cut into one block per thread. */
static void real_gemm(em_dtype dt, const gemm_dims *g, const void *a, int64_t stride_a,
                      const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch)
{
    if (dt == EM_F32 && batch == 1 && !g->ta && g->alpha == 1.0 &&
        (g->beta == 0.0 || g->beta == 1.0) &&
        em_cpu_gemm_tiles_f32(g->m, g->n, g->k, a, g->lda, b, g->ldb, g->tb,
                              (em_tiles_extras){.add_to_c = g->beta == 1.0}, c, g->ldc))
        return; /* a Linear's x @ w^T or g @ w, cpu_gemm_tiles.c */
    gemm_cut cut = dt == EM_F32 && batch == 1 ? small_cut(g) : (gemm_cut){0, 0, 0};
    if (!cut.rows)
        cut = thread_cut(g, em_cpu_threads(), batch);
    const int64_t col_blocks = (g->n + cut.cols - 1) / cut.cols;
    gemm_tasks k = {dt,       g, &cut,     a, stride_a, b, stride_b, c, stride_c,
                    col_blocks, (g->m + cut.rows - 1) / cut.rows * col_blocks};
    em_cpu_run_tasks(batch * k.parts, batch * g->m * g->n * g->k >= parallel_min(g), gemm_task,
                     &k);
}

/* One f16/bf16 product: widen op's operands to packed f32, multiply in f32, narrow C back. */
static void half_gemm1(em_dtype dt, const gemm_dims *g, const void *a, const void *b, void *c,
                       float *fa, float *fb, float *fc)
{
    int64_t ra = g->ta ? g->k : g->m, ca = g->ta ? g->m : g->k;
    int64_t rb = g->tb ? g->n : g->k, cb = g->tb ? g->k : g->n;
    em_cpu_half_to_f32_2d(dt, fa, a, ra, ca, g->lda);
    em_cpu_half_to_f32_2d(dt, fb, b, rb, cb, g->ldb);
    if (g->beta != 0)
        em_cpu_half_to_f32_2d(dt, fc, c, g->m, g->n, g->ldc);
    gemm_dims packed = *g;
    packed.lda = ca;
    packed.ldb = cb;
    packed.ldc = g->n;
    real_gemm(EM_F32, &packed, fa, 0, fb, 0, fc, 0, 1);
    em_cpu_f32_to_half_2d(dt, c, fc, g->m, g->n, g->ldc);
}

static int half_gemm(em_dtype dt, const gemm_dims *g, const void *a, int64_t stride_a,
                     const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch)
{
    float *fa = em_cpu_f32_buffer(g->m * g->k);
    float *fb = em_cpu_f32_buffer(g->k * g->n);
    float *fc = em_cpu_f32_buffer(g->m * g->n);
    int rc = fa && fb && fc ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    for (int64_t i = 0; rc == EM_KERNEL_OK && i < batch; i++)
        half_gemm1(dt, g, (const uint16_t *)a + i * stride_a, (const uint16_t *)b + i * stride_b,
                   (uint16_t *)c + i * stride_c, fa, fb, fc);
    em_cpu_scratch_free(fa);
    em_cpu_scratch_free(fb);
    em_cpu_scratch_free(fc);
    return rc;
}

/* One BLAS thread per call: ember splits the work over its OpenMP threads. Only a pthreads
 * build is told so; an OpenMP build already runs single-threaded inside ember's parallel
 * regions, and its setter would also set ember's own OpenMP thread count to 1. */
void em_cpu_blas_one_thread(void)
{
    if (openblas_get_parallel() == 1 && openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
}

int em_cpu_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, int64_t stride_a,
                const void *b, int64_t ldb, int64_t stride_b,
                double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (dt != EM_F32 && dt != EM_F64 && !em_cpu_is_half(dt))
        return EM_KERNEL_UNSUPPORTED;
    if (m <= 0 || n <= 0 || batch <= 0)
        return EM_KERNEL_OK;
    gemm_dims g = {trans_a, trans_b, m, n, k, alpha, beta, lda, ldb, ldc};
    if (k <= 0) {
        scale_c(dt, &g, c, stride_c, batch);
        return EM_KERNEL_OK;
    }
    if (!fix_ld(trans_a ? k : m, trans_a ? m : k, &g.lda)
        || !fix_ld(trans_b ? n : k, trans_b ? k : n, &g.ldb) || !fix_ld(m, n, &g.ldc))
        return EM_KERNEL_UNSUPPORTED;
    int rc = em_cpu_dnnl_gemm(dt, trans_a, trans_b, m, n, k, alpha, a, g.lda, stride_a, b,
                              g.ldb, stride_b, beta, c, g.ldc, stride_c, batch);
    if (rc != EM_KERNEL_UNSUPPORTED)
        return rc;
    em_cpu_blas_one_thread();
    if (em_cpu_is_half(dt))
        return half_gemm(dt, &g, a, stride_a, b, stride_b, c, stride_c, batch);
    real_gemm(dt, &g, a, stride_a, b, stride_b, c, stride_c, batch);
    return EM_KERNEL_OK;
}
