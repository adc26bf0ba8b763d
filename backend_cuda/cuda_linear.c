/* A Linear's forward and gradients on CUDA through cuBLASLt epilogues: y = x @ w^T + b in one
 * product that adds the bias as it writes (CUBLASLT_EPILOGUE_BIAS), and the weight gradient's
 * product that sums the bias gradient from the same reads of g (CUBLASLT_EPILOGUE_BGRADB). The
 * matmul plans (descriptors, layouts, the heuristic's algorithm) are made once per shape and kept.
 * f32 (TF32 only when switched on), f16 and bf16 with f32 accumulation; where cuBLASLt has no
 * algorithm for a shape, the forward is declined (the op adds the bias through a plain product)
 * and the gradients take plain products and the column-sum reduction. */
#include <cublasLt.h>
#include <pthread.h>
#include <string.h>

#include "backend_cuda/cuda_internal.h"

typedef enum { PLAN_BIAS, PLAN_BGRADB } plan_kind;

/* What a plan depends on: the heuristic sees the shapes, the layouts and the pointers'
 * alignments (the bias pointer's too). Zeroed before it is filled, so that memcmp compares it. */
typedef struct {
    plan_kind kind;
    em_dtype dt;
    bool tf32;
    int64_t rows_d, cols_d, inner; /* D (rows_d, cols_d) = op(A) (rows_d, inner) op(B) */
    int64_t lda, ldb, ldd;
    uint32_t align[4]; /* of A, B, D and the bias, in bytes (at most 256) */
} plan_key;

typedef struct {
    plan_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    bool usable; /* the heuristic found an algorithm */
} plan;

#define MAX_PLANS 256

static struct {
    pthread_mutex_t lock;
    cublasLtHandle_t lt;
    bool ready, failed;
    plan plans[MAX_PLANS];
    int n;
} lt_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

static cudaDataType cuda_type(em_dtype dt)
{
    return dt == EM_F32 ? CUDA_R_32F : dt == EM_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

static uint32_t alignment(const void *p)
{
    uintptr_t v = (uintptr_t)p;
    uint32_t a = 1;
    while (a < 256 && v % (2 * a) == 0)
        a *= 2;
    return a;
}

static bool fits_int(const plan_key *k)
{
    const int64_t v[] = {k->rows_d, k->cols_d, k->inner, k->lda, k->ldb, k->ldd};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] < 1 || v[i] > INT32_MAX)
            return false;
    return true;
}

static bool ok(cublasStatus_t st)
{
    return st == CUBLAS_STATUS_SUCCESS;
}

static void plan_destroy(plan *p)
{
    if (p->a)
        cublasLtMatrixLayoutDestroy(p->a);
    if (p->b)
        cublasLtMatrixLayoutDestroy(p->b);
    if (p->d)
        cublasLtMatrixLayoutDestroy(p->d);
    if (p->desc)
        cublasLtMatmulDescDestroy(p->desc);
    memset(p, 0, sizeof *p);
}

/* The descriptors of key's product, bias pointer set, and the heuristic's first algorithm. A:
 * (inner, rows_d) stored with ld lda read transposed for PLAN_BIAS, (rows_d, inner) for
 * PLAN_BGRADB; B: (inner, cols_d) for PLAN_BIAS, (cols_d, inner) read transposed for
 * PLAN_BGRADB; column-major, cuBLAS's view of ember's row-major matrices. */
static void plan_make(plan *p, const plan_key *k, void *bias)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    cudaDataType t = cuda_type(k->dt);
    cublasComputeType_t compute = k->dt == EM_F32 && k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                              : CUBLAS_COMPUTE_32F;
    cublasOperation_t ta = k->kind == PLAN_BIAS ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = k->kind == PLAN_BIAS ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasLtEpilogue_t epi = k->kind == PLAN_BIAS ? CUBLASLT_EPILOGUE_BIAS
                                                  : CUBLASLT_EPILOGUE_BGRADB;
    int32_t bias_type = (int32_t)t;
    bool made =
        ok(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F)) &&
        ok(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
        ok(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
        ok(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                          sizeof epi)) &&
        ok(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                          &bias_type, sizeof bias_type)) &&
        ok(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    uint64_t a_rows = ta == CUBLAS_OP_T ? (uint64_t)k->inner : (uint64_t)k->rows_d;
    uint64_t a_cols = ta == CUBLAS_OP_T ? (uint64_t)k->rows_d : (uint64_t)k->inner;
    uint64_t b_rows = tb == CUBLAS_OP_T ? (uint64_t)k->cols_d : (uint64_t)k->inner;
    uint64_t b_cols = tb == CUBLAS_OP_T ? (uint64_t)k->inner : (uint64_t)k->cols_d;
    made = made && ok(cublasLtMatrixLayoutCreate(&p->a, t, a_rows, a_cols, k->lda)) &&
           ok(cublasLtMatrixLayoutCreate(&p->b, t, b_rows, b_cols, k->ldb)) &&
           ok(cublasLtMatrixLayoutCreate(&p->d, t, (uint64_t)k->rows_d, (uint64_t)k->cols_d,
                                         k->ldd));
    cublasLtMatmulPreference_t pref = NULL;
    size_t ws_bytes = 0;
    em_cuda_workspace(&ws_bytes);
    const cublasLtMatmulPreferenceAttributes_t aligns[3] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    made = made && ok(cublasLtMatmulPreferenceCreate(&pref)) &&
           ok(cublasLtMatmulPreferenceSetAttribute(
               pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes)) &&
           ok(cublasLtMatmulPreferenceSetAttribute(
               pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->align[2],
               sizeof k->align[2]));
    for (int i = 0; made && i < 3; i++)
        made = ok(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &k->align[i],
                                                       sizeof k->align[i]));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    made = made && ok(cublasLtMatmulAlgoGetHeuristic(lt_state.lt, p->desc, p->a, p->b, p->d,
                                                     p->d, pref, 1, &result, &found));
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    p->usable = made && found > 0;
    if (p->usable)
        p->algo = result.algo;
}

/* The kept plan of key, made on first use (lock held); a plan of its own in *spare (to be
 * destroyed after the call) when the cache is full. */
static plan *plan_get(const plan_key *k, void *bias, plan *spare)
{
    for (int i = 0; i < lt_state.n; i++)
        if (!memcmp(&lt_state.plans[i].key, k, sizeof *k))
            return &lt_state.plans[i];
    plan *p = lt_state.n < MAX_PLANS ? &lt_state.plans[lt_state.n++] : spare;
    plan_make(p, k, bias);
    return p;
}

static bool lt_ready(void)
{
    if (!lt_state.ready && !lt_state.failed) {
        lt_state.ready = ok(cublasLtCreate(&lt_state.lt));
        lt_state.failed = !lt_state.ready;
    }
    return lt_state.ready;
}

/* *k: the key of a product D (rows_d, cols_d) = op(A) (rows_d, inner) op(B) of kind with those
 * row strides (the alignments lt_matmul's). */
static void key_of(plan_key *k, plan_kind kind, em_dtype dt, int64_t rows_d, int64_t cols_d,
                   int64_t inner, int64_t lda, int64_t ldb, int64_t ldd)
{
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->dt = dt;
    k->rows_d = rows_d;
    k->cols_d = cols_d;
    k->inner = inner;
    k->lda = lda;
    k->ldb = ldb;
    k->ldd = ldd;
}

/* D = op(A) op(B) with key's epilogue, bias the bias or the bias gradient; EM_KERNEL_UNSUPPORTED
 * where cuBLASLt has no algorithm for it. */
static int lt_matmul(plan_key *k, const void *a, const void *b, void *d, void *bias)
{
    k->align[0] = alignment(a);
    k->align[1] = alignment(b);
    k->align[2] = alignment(d);
    k->align[3] = alignment(bias);
    k->tf32 = em_cuda_tf32();
    if (!fits_int(k))
        return EM_KERNEL_UNSUPPORTED;
    pthread_mutex_lock(&lt_state.lock);
    plan spare = {0};
    plan *p = lt_ready() ? plan_get(k, bias, &spare) : NULL;
    int rc = EM_KERNEL_UNSUPPORTED;
    if (p && p->usable) {
        const float one = 1, zero = 0;
        size_t ws_bytes = 0;
        void *ws = em_cuda_workspace(&ws_bytes);
        em_cuda_count_launch();
        rc = ok(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                               sizeof bias)) &&
                     ok(cublasLtMatmul(lt_state.lt, p->desc, &one, a, p->a, b, p->b, &zero, d,
                                       p->d, d, p->d, &p->algo, ws, ws_bytes, em_cuda_stream()))
                 ? EM_KERNEL_OK
                 : EM_KERNEL_FAILED;
    }
    if (p == &spare)
        plan_destroy(&spare);
    pthread_mutex_unlock(&lt_state.lock);
    return rc;
}

static bool lt_dtype(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F16 || dt == EM_BF16;
}

int em_cuda_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                   const void *w, int64_t ldw, const void *b, void *y, int64_t ldy)
{
    if (!b || !lt_dtype(dt) || m == 0)
        return EM_KERNEL_UNSUPPORTED; /* a plain product serves these */
    /* y^T (n, m) = w (n, k) as A^T, x^T (k, m) as B, the bias along y^T's rows */
    plan_key key;
    key_of(&key, PLAN_BIAS, dt, n, m, k, ldw, ldx, ldy);
    return lt_matmul(&key, w, x, y, (void *)b);
}

/* gb (k) = the sums of g's (m, k) columns, by the reduction kernel. */
static int column_sums(em_dtype dt, int64_t m, int64_t k, const void *g, int64_t ldg, void *gb)
{
    em_arr in = {.data = (void *)g, .dtype = dt, .ndim = 2, .shape = {m, k}, .strides = {ldg, 1}};
    em_arr out = {.data = gb, .dtype = dt, .ndim = 2, .shape = {1, k}, .strides = {k, 1}};
    return em_cuda_reduce(EM_REDUCE_SUM, &(em_reduce_params){0}, &out, &in);
}

int em_cuda_linear_grad(em_dtype dt, const em_linear_grads *a)
{
    if (!lt_dtype(dt))
        return EM_KERNEL_UNSUPPORTED;
    /* gx (m, n) = g (m, k) @ w (k, n) */
    int rc = em_cuda_gemm(dt, false, false, a->m, a->n, a->k, 1.0, a->g, a->ldg, 0, a->w, a->ldw,
                          0, 0.0, a->gx, a->ldgx, 0, 1);
    if (rc != EM_KERNEL_OK || (!a->gw && !a->gb))
        return rc;
    if (a->gw && a->gb && a->m > 0) {
        /* gw^T (n, k) = x^T (n, m) as A, g (m, k) as B^T; gb along gw^T's columns */
        plan_key key;
        key_of(&key, PLAN_BGRADB, dt, a->n, a->k, a->m, a->ldx, a->ldg, a->ldgw);
        rc = lt_matmul(&key, a->x, a->g, a->gw, a->gb);
        if (rc != EM_KERNEL_UNSUPPORTED)
            return rc;
    }
    if (a->gw) /* gw (k, n) = g^T (k, m) @ x (m, n) */
        rc = em_cuda_gemm(dt, true, false, a->k, a->n, a->m, 1.0, a->g, a->ldg, 0, a->x, a->ldx,
                          0, 0.0, a->gw, a->ldgw, 0, 1);
    return rc == EM_KERNEL_OK && a->gb ? column_sums(dt, a->m, a->k, a->g, a->ldg, a->gb) : rc;
}
