/* CPU matrix products: row-major batched GEMM through OpenBLAS (sgemm, dgemm); f16/bf16 are
 * widened to f32, multiplied with f32 accumulation and rounded back. */
#include <cblas.h>
#include <omp.h>

#include "backend_cpu/cpu_dense_internal.h"

/* All CPU parallelism in ember is OpenMP's: OpenBLAS is kept at one thread (its own spinning
 * threads would fight OpenMP's for the cores; measured on 2 cores, a product right after an
 * OpenMP loop ran at half speed) and each product is cut into row or column blocks, one BLAS
 * call per block, spread over OpenMP threads. */

/* A product below this many multiply-adds runs on one thread: the fork costs more than it saves. */
#define PARALLEL_MIN_MNK (1 << 18)
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

static void blas1(em_dtype dt, const gemm_dims *g, const void *a, const void *b, void *c)
{
    CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    if (dt == EM_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, (float)g->alpha,
                    a, (int)g->lda, b, (int)g->ldb, (float)g->beta, c, (int)g->ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, g->alpha,
                    a, (int)g->lda, b, (int)g->ldb, g->beta, c, (int)g->ldc);
}

/* Block p of one product, `step` rows of C (and op(A)) when split_rows, else columns. */
static void gemm_block(em_dtype dt, const gemm_dims *g, const char *a, const char *b, char *c,
                       bool split_rows, int64_t step, int64_t p)
{
    size_t es = em_dtype_size(dt);
    int64_t len = split_rows ? g->m : g->n;
    int64_t lo = p * step, hi = lo + step < len ? lo + step : len;
    if (lo >= hi)
        return;
    gemm_dims sub = *g;
    if (split_rows) {
        sub.m = hi - lo;
        a += (size_t)(g->ta ? lo : lo * g->lda) * es;
        c += (size_t)(lo * g->ldc) * es;
    } else {
        sub.n = hi - lo;
        b += (size_t)(g->tb ? lo * g->ldb : lo) * es;
        c += (size_t)lo * es;
    }
    blas1(dt, &sub, a, b, c);
}

/* OpenBLAS's rule for its unpacked small-matrix kernels (sgemm_small_kernel_permit of the
 * SkylakeX set): products of at most this many multiply-adds, and in the form that is ember's
 * row-major A @ B^T, C blocks of at most SMALL_MAX_C elements and K of at least SMALL_MIN_K. */
#define SMALL_MAX_MNK 1000000
#define SMALL_MAX_C 1200
#define SMALL_MIN_K 32

/* Rows (split_rows) or columns of C per block that OpenBLAS multiplies with its small-matrix
 * kernels, or 0 where it would not. Those kernels read A and B where they lie — no copy into
 * packed panels, no pass zeroing C first — and on the MLP's batch-64 products, cut into such
 * blocks, they ran 20-30% faster than the packed kernels on the whole (x @ w^T 64x512x784:
 * 260 -> 208 us; the weight gradient's A^T B, 512x784x64: 270 -> 188 us; two threads). Only
 * those two forms: cutting the plain A B of an input gradient gained nothing there and slowed
 * the optimizer's pass after it (122 -> 152 us), and OpenBLAS never takes the TT form. */
static int64_t small_block(const gemm_dims *g, bool split_rows)
{
    if (g->ta == g->tb || !em_cpu_blas_small_kernels())
        return 0;
    int64_t other = split_rows ? g->n : g->m;
    int64_t most = SMALL_MAX_MNK / (other * g->k);
    if (g->tb) {
        if (g->k < SMALL_MIN_K)
            return 0;
        most = most < SMALL_MAX_C / other ? most : SMALL_MAX_C / other;
    }
    return most / SPLIT_ALIGN * SPLIT_ALIGN;
}

/* f32/f64 batched product: whole products over threads when the batch fills them; a single f32
 * product in small-kernel blocks where it can be (small_block), else cut into one block per
 * thread. Blocks are rows of C when A comes transposed (a weight gradient: rows ran faster than
 * columns, 512x784x64 in 2 blocks 256 -> 229 us) or C is taller than wide, else columns. */
static void real_gemm(em_dtype dt, const gemm_dims *g, const void *a, int64_t stride_a,
                      const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch)
{
    size_t es = em_dtype_size(dt);
    int nt = em_cpu_threads();
    int64_t mnk = g->m * g->n * g->k, parts = 1;
    bool split_rows = g->ta || g->m >= g->n;
    int64_t len = split_rows ? g->m : g->n, step = len;
    int64_t small = dt == EM_F32 && batch == 1 ? small_block(g, split_rows) : 0;
    if (small > 0 && small < len) {
        step = small;
        parts = (len + step - 1) / step;
    } else if (nt > 1 && batch < nt && mnk >= PARALLEL_MIN_MNK) {
        int64_t most = (len + SPLIT_ALIGN - 1) / SPLIT_ALIGN;
        parts = nt < most ? nt : most;
        step = ((len + parts - 1) / parts + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
    }
    int64_t tasks = batch * parts;
    #pragma omp parallel for if (nt > 1 && tasks > 1 && batch * mnk >= PARALLEL_MIN_MNK) \
            num_threads(nt)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t i = t / parts;
        gemm_block(dt, g, (const char *)a + (size_t)(i * stride_a) * es,
                   (const char *)b + (size_t)(i * stride_b) * es,
                   (char *)c + (size_t)(i * stride_c) * es, split_rows, step, t % parts);
    }
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
    /* One BLAS thread per call: ember splits the work over its OpenMP threads. Only a pthreads
     * build is told so; an OpenMP build already runs single-threaded inside ember's parallel
     * regions, and its setter would also set ember's own OpenMP thread count to 1. */
    if (openblas_get_parallel() == 1 && openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
    if (em_cpu_is_half(dt))
        return half_gemm(dt, &g, a, stride_a, b, stride_b, c, stride_c, batch);
    real_gemm(dt, &g, a, stride_a, b, stride_b, c, stride_c, batch);
    return EM_KERNEL_OK;
}
