/* CPU scaled dot-product attention without the (Lq, Lk) score matrix: FlashAttention's tiles
 * with an online softmax in forward, keeping each row's log-sum-exp; backward recomputes the
 * weights tile by tile from it. f32 runs on AVX2+FMA tiles where the CPU has them (else portable
 * C), f64 in portable C, bf16 on the CPU's bf16 dot products where it has them
 * (cpu_attention_bf16.c), other f16/bf16 calls through f32 copies. The typed body is
 * cpu_attention_impl_internal.h, the tiles cpu_attention_tiles.c. */
#include <math.h>
#include <omp.h>

#include "backend/philox.h"
#include "backend_cpu/cpu_attention_internal.h"
#include "backend_cpu/cpu_dense_internal.h"

/* Below this many multiply-adds (B H Lq Lk (D + Dv)) a call runs on one thread. */
#define ATT_PARALLEL_MIN_WORK 65536.0
/* Forward hands out whole heads when there are at least this many per thread, else query blocks */
#define ATT_HEADS_PER_THREAD 4

/* One call's operands: q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv), out and gout
 * (B, H, Lq, Dv), lse (B, H, Lq); grads with their inputs' shapes; mask NULL or broadcast to
 * (B, H, Lq, Lk). Backward-only operands are NULL in forward. */
typedef struct {
    const em_attention_params *p;
    int64_t batch, heads, lq, lk, d, dv;
    const em_arr *q, *k, *v, *mask, *out, *lse;
    const em_arr *gout, *gq, *gk, *gv;
} att_call;

typedef em_att_packed_head att_packed_head;

/* How many of the keys j0..j0+cols query i sees: all of them, or under the causal mask those
 * up to i. Scores past it are never computed (their weights are 0). */
static inline int64_t att_seen(const att_call *c, int64_t i, int64_t j0, int64_t cols)
{
    int64_t seen = c->p->causal ? i + 1 - j0 : cols;
    return seen < 0 ? 0 : seen < cols ? seen : cols;
}

/* keep (n) = whether dropout keeps weights idx0.. of the flat (B, H, Lq, Lk) mask */
static void att_keep_row(const em_attention_params *p, uint64_t idx0, int64_t n, uint8_t *keep)
{
    const double keep_p = 1.0 - p->dropout_p;
    for (int64_t x = 0; x < n;) {
        uint64_t idx = idx0 + (uint64_t)x;
        em_philox_block blk = em_philox4x32_10(p->offset + idx / 4, p->seed);
        for (unsigned lane = (unsigned)(idx % 4); lane < 4 && x < n; lane++, x++)
            keep[x] = (double)em_philox_uniform(blk.v[lane]) < keep_p;
    }
}

/* add (n) = the mask's additive form at (b, h, i, j0..): 0 or -inf for bool, else its value */
static void att_mask_row(const em_arr *m, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n,
                         double *add)
{
    int64_t at = b * m->strides[0] + h * m->strides[1] + i * m->strides[2], sj = m->strides[3];
    for (int64_t x = 0; x < n; x++) {
        int64_t e = at + (j0 + x) * sj;
        switch (m->dtype) {
        case EM_BOOL:
            add[x] = ((const bool *)m->data)[e] ? 0.0 : -INFINITY;
            break;
        case EM_F32:
            add[x] = ((const float *)m->data)[e];
            break;
        case EM_F64:
            add[x] = ((const double *)m->data)[e];
            break;
        case EM_F16:
            add[x] = em_f16_to_f32(((const uint16_t *)m->data)[e]);
            break;
        default: /* bf16; checked before */
            add[x] = em_bf16_to_f32(((const uint16_t *)m->data)[e]);
            break;
        }
    }
}

bool em_att_run_tasks(int64_t heads, int64_t qblocks, bool grad, double work,
                      size_t per_thread, em_att_task_fn task, void *ctx)
{
    const int64_t tasks = grad ? heads : heads * qblocks;
    per_thread = (per_thread + 63) / 64 * 64; /* each thread's part starts 64-byte aligned */
    int nt = tasks > 1 && work >= ATT_PARALLEL_MIN_WORK ? em_cpu_threads() : 1;
    nt = nt < tasks ? nt : (int)(tasks > 0 ? tasks : 1);
    char *scratch = em_cpu_scratch((size_t)nt * per_thread);
    if (!scratch)
        return false;
    /* forward: a thread takes all query blocks of a head at once where there are heads enough
     * to go round, packing its keys and values once */
    const int64_t chunk = !grad && heads >= ATT_HEADS_PER_THREAD * nt ? qblocks : 1;
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        char *mine = scratch + (size_t)omp_get_thread_num() * per_thread;
        em_att_packed_head packed = {-1, 0};
        #pragma omp for schedule(dynamic, chunk)
        for (int64_t t = 0; t < tasks; t++)
            task(ctx, mine, &packed, t);
    }
    em_cpu_scratch_free(scratch);
    return true;
}

#define REAL float
#define ATT_FN(name) att_##name##_f32
#include "backend_cpu/cpu_attention_impl_internal.h"
#undef REAL
#undef ATT_FN
#undef ATT_ROWS_REALS
#undef ATT_PREFETCH_ROWS
#undef ATT_OUT_AHEAD_ROWS

#define REAL double
#define ATT_FN(name) att_##name##_f64
#include "backend_cpu/cpu_attention_impl_internal.h"
#undef REAL
#undef ATT_FN
#undef ATT_ROWS_REALS
#undef ATT_PREFETCH_ROWS
#undef ATT_OUT_AHEAD_ROWS

/* a (n0, n1, n2, n3) 4-D array of dtype dt with a contiguous last dim */
static bool arr4(const em_arr *a, em_dtype dt, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    return a && a->ndim == 4 && a->dtype == dt && a->shape[0] == n0 && a->shape[1] == n1 &&
           a->shape[2] == n2 && a->shape[3] == n3 && (n3 <= 1 || a->strides[3] == 1);
}

/* The call's dims from q, k, v; false when the operands do not fit together. */
static bool att_check(att_call *c, bool grad)
{
    const em_arr *q = c->q, *k = c->k, *v = c->v;
    if (!q || !k || !v || q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return false;
    em_dtype dt = q->dtype;
    c->batch = q->shape[0];
    c->heads = q->shape[1];
    c->lq = q->shape[2];
    c->d = q->shape[3];
    c->lk = k->shape[2];
    c->dv = v->shape[3];
    em_dtype lse_dt = dt == EM_F64 ? EM_F64 : EM_F32;
    bool ok = (dt == EM_F32 || dt == EM_F64 || em_cpu_is_half(dt)) &&
              arr4(q, dt, c->batch, c->heads, c->lq, c->d) &&
              arr4(k, dt, c->batch, c->heads, c->lk, c->d) &&
              arr4(v, dt, c->batch, c->heads, c->lk, c->dv) &&
              arr4(c->out, dt, c->batch, c->heads, c->lq, c->dv) && c->lse &&
              c->lse->dtype == lse_dt && c->p->dropout_p >= 0 && c->p->dropout_p < 1;
    if (ok && c->mask)
        ok = c->mask->ndim == 4 && (c->mask->dtype == EM_BOOL || em_dtype_is_float(c->mask->dtype));
    for (int dim = 0; ok && c->mask && dim < 4; dim++) {
        int64_t want = dim == 0 ? c->batch : dim == 1 ? c->heads : dim == 2 ? c->lq : c->lk;
        ok = c->mask->shape[dim] == want;
    }
    if (ok && grad)
        ok = arr4(c->gout, dt, c->batch, c->heads, c->lq, c->dv) &&
             arr4(c->gq, dt, c->batch, c->heads, c->lq, c->d) &&
             arr4(c->gk, dt, c->batch, c->heads, c->lk, c->d) &&
             arr4(c->gv, dt, c->batch, c->heads, c->lk, c->dv);
    return ok;
}

/* A contiguous f32 array of a's shape, holding a's values when copy; data NULL when out of
 * memory. */
static em_arr f32_like(const em_arr *a, bool copy)
{
    em_arr f = {.dtype = EM_F32, .ndim = 4};
    int64_t n = 1;
    for (int d = 3; d >= 0; d--) {
        f.shape[d] = a->shape[d];
        f.strides[d] = n;
        n *= a->shape[d];
    }
    f.data = em_cpu_f32_buffer(n);
    if (f.data && copy)
        em_cpu_copy(&f, a);
    return f;
}

/* f16/bf16: the call on f32 copies of its operands, results narrowed into the caller's. */
static int att_run_half(const att_call *c, bool avx2, bool grad)
{
    enum { Q, K, V, OUT, GOUT, GQ, GK, GV, N };
    const em_arr *src[N] = {c->q, c->k, c->v, c->out, c->gout, c->gq, c->gk, c->gv};
    bool input[N] = {true, true, true, grad, grad, false, false, false};
    int n = grad ? N : GOUT;
    em_arr f[N];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        f[i] = f32_like(src[i], input[i]);
        ok = ok && f[i].data;
    }
    att_call fc = *c;
    fc.q = &f[Q];
    fc.k = &f[K];
    fc.v = &f[V];
    fc.out = &f[OUT];
    if (grad) {
        fc.gout = &f[GOUT];
        fc.gq = &f[GQ];
        fc.gk = &f[GK];
        fc.gv = &f[GV];
    }
    ok = ok && att_run_f32(&fc, em_cpu_att_tiles_f32(avx2), grad);
    for (int i = 0; ok && i < n; i++)
        if (!input[i])
            em_cpu_copy(src[i], &f[i]);
    for (int i = 0; i < n; i++)
        em_cpu_scratch_free(f[i].data);
    return ok ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}

static int att_run(att_call *c, bool avx2, bool grad)
{
    if (!att_check(c, grad))
        return EM_KERNEL_UNSUPPORTED;
    const int rc = avx2 ? em_cpu_attention_bf16(c->p, c->batch, c->heads, c->lq, c->lk, c->d,
                                                c->dv, c->q, c->k, c->v, c->mask, c->out, c->lse,
                                                c->gout, c->gq, c->gk, c->gv)
                        : EM_KERNEL_UNSUPPORTED;
    if (rc != EM_KERNEL_UNSUPPORTED)
        return rc;
    if (c->q->dtype == EM_F32)
        return att_run_f32(c, em_cpu_att_tiles_f32(avx2), grad) ? EM_KERNEL_OK
                                                                 : EM_KERNEL_FAILED;
    if (c->q->dtype == EM_F64)
        return att_run_f64(c, em_cpu_att_tiles_f64(), grad) ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    return att_run_half(c, avx2, grad);
}

int em_cpu_attention_path(bool avx2, const em_attention_params *p, const em_arr *q,
                          const em_arr *k, const em_arr *v, const em_arr *mask,
                          const em_arr *out, const em_arr *lse)
{
    att_call c = {.p = p, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse};
    return att_run(&c, avx2, false);
}

int em_cpu_attention_grad_path(bool avx2, const em_attention_params *p, const em_arr *q,
                               const em_arr *k, const em_arr *v, const em_arr *mask,
                               const em_arr *out, const em_arr *lse, const em_arr *gout,
                               const em_arr *gq, const em_arr *gk, const em_arr *gv)
{
    att_call c = {.p = p, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse,
                  .gout = gout, .gq = gq, .gk = gk, .gv = gv};
    return att_run(&c, avx2, true);
}

int em_cpu_attention(const em_attention_params *p, const em_arr *q, const em_arr *k,
                     const em_arr *v, const em_arr *mask, const em_arr *out, const em_arr *lse)
{
    return em_cpu_attention_path(true, p, q, k, v, mask, out, lse);
}

int em_cpu_attention_grad(const em_attention_params *p, const em_arr *q, const em_arr *k,
                          const em_arr *v, const em_arr *mask, const em_arr *out,
                          const em_arr *lse, const em_arr *gout, const em_arr *gq,
                          const em_arr *gk, const em_arr *gv)
{
    return em_cpu_attention_grad_path(true, p, q, k, v, mask, out, lse, gout, gq, gk, gv);
}
