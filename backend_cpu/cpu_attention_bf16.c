/* CPU attention on bf16 operands with the CPU's bf16 dot products (AVX512_BF16 vdpbf16ps): the
 * tiles of cpu_attention.c's f32 kernel (FlashAttention's online softmax forward, backward from
 * each row's log-sum-exp), with every product of two bf16 tiles summed in f32 and the softmax in
 * f32, the weights and score gradients rounded to bf16 for the products that take them (as
 * PyTorch's bf16 flash attention does). For calls without a mask or dropout, on even head dims;
 * cpu_attention.c widens the others to f32.
 * A bf16 pair (two neighbours along a product's sum) is one 32-bit word: a left operand's row
 * holds its pairs in order (a bf16 row in memory already does), a right operand is packed as
 * rows of pairs ("pair rows", (k / 2, n) words), once per head. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend_cpu/cpu_attention_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

#define BF16_DOT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* Tiles of BR query rows and BC keys, as the f32 kernel's. */
#define BR EM_ATT_BR
#define BC EM_ATT_BC
/* Rows of a register tile: 6 rows x 4 vectors of 16 sums, 24 accumulators. */
#define TILE_ROWS 6

typedef struct {
    const em_attention_params *p;
    int64_t batch, heads, lq, lk, d, dv;
    const em_arr *q, *k, *v, *out, *lse, *gout, *gq, *gk, *gv;
} call;

/* f's bits rounded to bf16 in their top half, as em_f32_to_bf16 rounds (nearest even, a NaN
 * made quiet); branch-free, so loops of it vectorize. */
static inline uint32_t rounded_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    const uint32_t nearest = b + 0x7fffu + ((b >> 16) & 1u);
    return (b & 0x7fffffffu) > 0x7f800000u ? b | 0x400000u : nearest;
}

static inline uint16_t bf16_of(float f)
{
    return (uint16_t)(rounded_bits(f) >> 16);
}

/* the pair (bf16 of lo, bf16 of hi) as one word */
static inline uint32_t pair_of(float lo, float hi)
{
    return (rounded_bits(hi) & 0xffff0000u) | rounded_bits(lo) >> 16;
}

static inline float f32_of(uint16_t h)
{
    const uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline uint32_t pair(uint16_t lo, uint16_t hi)
{
    return (uint32_t)lo | (uint32_t)hi << 16;
}

static inline int64_t round16(int64_t n)
{
    return (n + 15) / 16 * 16;
}

/* Element (b, h, i, 0) of a (B, H, L, X) bf16 array with a contiguous last dim. */
static inline uint16_t *row(const em_arr *a, int64_t b, int64_t h, int64_t i)
{
    return (uint16_t *)a->data + b * a->strides[0] + h * a->strides[1] + i * a->strides[2];
}

/* c (ROWS, NV * 16) (+)= a (ROWS, 2 k2) @ b (2 k2, NV * 16): a's pair (r, l) at
 * a[r * a_row + l * a_col], b's pair rows ldb words apart, c's rows ldc apart. ROWS and NV are
 * constants where it is inlined, so the ROWS x NV sums stay in registers. */
BF16_DOT static inline __attribute__((always_inline)) void dot_tile(
    const int ROWS, const int NV, int64_t k2, const uint32_t *a, int64_t a_row, int64_t a_col,
    const uint32_t *b, int64_t ldb, float *c, int64_t ldc, bool accumulate)
{
    __m512 acc[TILE_ROWS][4];
    _Pragma("GCC unroll 6") for (int r = 0; r < ROWS; r++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t l = 0; l < k2; l++) {
        __m512bh bv[4];
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            bv[v] = (__m512bh)_mm512_loadu_si512(b + l * ldb + 16 * v);
        _Pragma("GCC unroll 6") for (int r = 0; r < ROWS; r++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * a_row + l * a_col]);
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
        }
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < ROWS; r++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}

/* The columns j.. (NV vectors) of c (+)= a @ b over all m rows: TILE_ROWS at a time, then one. */
#define DOT_COLUMNS(NV)                                                                           \
    do {                                                                                          \
        int64_t i = 0;                                                                            \
        for (; i + TILE_ROWS <= m; i += TILE_ROWS)                                                \
            dot_tile(TILE_ROWS, NV, k2, a + i * a_row, a_row, a_col, b + j, ldb,                  \
                     c + i * ldc + j, ldc, accumulate);                                           \
        for (; i < m; i++)                                                                        \
            dot_tile(1, NV, k2, a + i * a_row, a_row, a_col, b + j, ldb, c + i * ldc + j, ldc,    \
                     accumulate);                                                                 \
    } while (0)

/* c (m, n) (+)= a (m, 2 k2) @ b (2 k2, n), n a multiple of 16 (see dot_tile). */
BF16_DOT static void dot(int64_t m, int64_t n, int64_t k2, const uint32_t *a, int64_t a_row,
                         int64_t a_col, const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
                         bool accumulate)
{
    for (int64_t j = 0; j < n; j += 64) {
        const int64_t left = (n - j) / 16;
        if (left >= 4)
            DOT_COLUMNS(4);
        else if (left == 3)
            DOT_COLUMNS(3);
        else if (left == 2)
            DOT_COLUMNS(2);
        else
            DOT_COLUMNS(1);
    }
}

/* Rows ahead of the one being packed that the packs ask for: the rows of a head lie far apart
 * (a packed projection's), one cache miss after another without it. */
#define PREFETCH_ROWS 16

/* Asks for row r of a bf16 matrix (rows ld apart, n values) to be brought into cache, when it
 * exists. Always inlined: as a function of its own GCC finds it free of effects and drops it. */
static inline __attribute__((always_inline)) void prefetch_row(const uint16_t *src, int64_t ld,
                                                               int64_t rows, int64_t r,
                                                               int64_t n)
{
    if (r >= rows)
        return;
    for (int64_t at = 0; at < n * (int64_t)sizeof(uint16_t); at += 64)
        __builtin_prefetch((const char *)(src + r * ld) + at);
}

/* dst (n2, ldd) words = rows r0 .. r0 + rows of a bf16 matrix (src, rows ld apart) transposed
 * word by word: dst[x][r] = the pair x of row r (a right operand summed along its rows' pairs);
 * columns past `rows` up to cols zeroed. */
BF16_DOT static void transpose_pairs(const uint16_t *src, int64_t ld, int64_t rows,
                                     int64_t n2, uint32_t *dst, int64_t ldd, int64_t cols)
{
    for (int64_t x = 0; x < n2; x++)
        for (int64_t r = rows; r < cols; r++)
            dst[x * ldd + r] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *s = src + r * ld;
        prefetch_row(src, ld, rows, r + PREFETCH_ROWS, 2 * n2);
        for (int64_t x = 0; x < n2; x++)
            dst[x * ldd + r] = pair(s[2 * x], s[2 * x + 1]);
    }
}

/* dst (rows / 2 rounded up, ldd) words = pair rows of a bf16 matrix's rows r (src, rows ld
 * apart, n values each): dst[r / 2][y] = (row r, row r + 1) at column y; a missing last row and
 * the columns past n up to ldd are zero. */
BF16_DOT static void interleave_rows(const uint16_t *src, int64_t ld, int64_t rows, int64_t n,
                                     uint32_t *dst, int64_t ldd)
{
    for (int64_t r = 0; r < rows; r += 2) {
        const uint16_t *lo = src + r * ld, *hi = r + 1 < rows ? lo + ld : NULL;
        uint32_t *d = dst + r / 2 * ldd;
        prefetch_row(src, ld, rows, r + PREFETCH_ROWS, n);
        prefetch_row(src, ld, rows, r + PREFETCH_ROWS + 1, n);
        if (hi) {
            #pragma omp simd
            for (int64_t y = 0; y < n; y++)
                d[y] = pair(lo[y], hi[y]);
        } else {
            #pragma omp simd
            for (int64_t y = 0; y < n; y++)
                d[y] = lo[y];
        }
        for (int64_t y = n; y < ldd; y++)
            d[y] = 0;
    }
}

/* dst (rows, BC / 2) words = a f32 tile's rows (BC wide) rounded to bf16: left operand rows
 * summed along the tile's columns (a bf16 row is its own pairs) */
BF16_DOT static void round_rows(const float *t, int64_t rows, uint32_t *dst)
{
    uint16_t *h = (uint16_t *)dst;
    #pragma omp simd
    for (int64_t x = 0; x < rows * BC; x++)
        h[x] = bf16_of(t[x]);
}

/* dst (BR / 2, BC) words = pairs of a f32 tile's (rows, BC) rows rounded to bf16:
 * dst[i / 2][j] = (t[i][j], t[i + 1][j]), a missing last row zero; read with a_row 1 and
 * a_col BC, it is the left operand t^T summed along the tile's rows */
BF16_DOT static void round_row_pairs(const float *t, int64_t rows, uint32_t *dst)
{
    for (int64_t i = 0; i < rows; i += 2) {
        const float *lo = t + i * BC, *hi = lo + BC;
        uint32_t *d = dst + i / 2 * BC;
        if (i + 1 < rows) {
            #pragma omp simd
            for (int64_t j = 0; j < BC; j++)
                d[j] = pair_of(lo[j], hi[j]);
        } else {
            #pragma omp simd
            for (int64_t j = 0; j < BC; j++)
                d[j] = rounded_bits(lo[j]) >> 16;
        }
    }
}

/* dst (n) bf16 = src (n) * scale rounded */
BF16_DOT static void store_scaled(int64_t n, const float *src, float scale, uint16_t *dst)
{
    #pragma omp simd
    for (int64_t x = 0; x < n; x++)
        dst[x] = bf16_of(src[x] * scale);
}

/* How many of the keys j0..j0+cols query i sees. */
static inline int64_t seen(const call *c, int64_t i, int64_t j0, int64_t cols)
{
    const int64_t s = c->p->causal ? i + 1 - j0 : cols;
    return s < 0 ? 0 : s < cols ? s : cols;
}

/* Per head, a thread's packs of the keys and values (forward): scale-free keys as pair columns
 * per key block, (BC, d / 2) -> (d / 2, BC) words; values as pair rows, (BC / 2, dvp). */
BF16_DOT static void pack_head(const call *c, uint32_t *kt, uint32_t *vp, em_att_packed_head *ph,
                               int64_t bh, int64_t until)
{
    const int64_t b = bh / c->heads, h = bh % c->heads, d2 = c->d / 2, dvp = round16(c->dv);
    if (ph->bh != bh)
        *ph = (em_att_packed_head){bh, 0};
    for (; ph->keys < until; ph->keys += BC) {
        const int64_t j0 = ph->keys, cols = c->lk - j0 < BC ? c->lk - j0 : BC;
        transpose_pairs(row(c->k, b, h, j0), c->k->strides[2], cols, d2, kt + j0 * d2, BC, BC);
        interleave_rows(row(c->v, b, h, j0), c->v->strides[2], cols, c->dv, vp + j0 / 2 * dvp,
                        dvp);
        for (int64_t r = (cols + 1) / 2; r < BC / 2; r++) /* a short block's missing pairs */
            memset(vp + (j0 / 2 + r) * dvp, 0, (size_t)dvp * sizeof(uint32_t));
    }
}

/* Output rows i0.. of head bh (one query block), as the f32 kernel's forward_block. */
BF16_DOT static void forward_block(const call *c, const em_att_tiles *t, float *scratch,
                                   em_att_packed_head *ph, int64_t bh, int64_t i0)
{
    const int64_t b = bh / c->heads, h = bh % c->heads, d2 = c->d / 2, dv = c->dv;
    const int64_t dvp = round16(dv), lkp = (c->lk + BC - 1) / BC * BC;
    const int64_t rows = c->lq - i0 < BR ? c->lq - i0 : BR;
    uint32_t *kt = (uint32_t *)scratch;          // (lkp / BC, d2, BC) keys' pairs
    uint32_t *vp = kt + d2 * lkp;                // (lkp / 2, dvp) values' pair rows
    float *s = (float *)(vp + lkp / 2 * dvp);    // (BR, BC) scores, then weights
    uint32_t *pw = (uint32_t *)(s + BR * BC);    // (BR, BC / 2) weights in bf16
    float *acc = (float *)(pw + BR * BC / 2);    // (BR, dvp) output, unnormalised
    float *m = acc + BR * dvp, *l = m + BR;      // (BR) running max and sum
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
        memset(acc + r * dvp, 0, (size_t)dvp * sizeof(float));
    }
    const int64_t jend = c->p->causal && i0 + rows < c->lk ? i0 + rows : c->lk;
    pack_head(c, kt, vp, ph, bh, jend);
    const uint32_t *q = (const uint32_t *)row(c->q, b, h, i0);
    const int64_t ldq = c->q->strides[2] / 2;
    for (int64_t j0 = 0; j0 < jend; j0 += BC) {
        const int64_t cols = jend - j0 < BC ? jend - j0 : BC;
        dot(rows, BC, d2, q, ldq, 1, kt + j0 * d2, BC, s, BC, false);
        for (int64_t r = 0; r < rows; r++) {
            float *sr = s + r * BC;
            const int64_t sn = seen(c, i0 + r, j0, cols);
            const float scale = (float)c->p->scale;
            #pragma omp simd
            for (int64_t x = 0; x < sn; x++)
                sr[x] *= scale;
            for (int64_t x = sn; x < BC; x++)
                sr[x] = 0;
            const float mx = (float)t->row_max(sn, sr);
            const float mnew = mx > m[r] || isnan(mx) ? mx : m[r];
            if (mnew == -INFINITY) { /* every key so far is masked: weights 0 */
                for (int64_t x = 0; x < sn; x++)
                    sr[x] = 0;
                continue;
            }
            const float alpha = m[r] == -INFINITY ? 0 : expf(m[r] - mnew);
            l[r] = l[r] * alpha + (float)t->exp_sum(sn, sr, mnew, sr);
            m[r] = mnew;
            if (alpha != 1)
                #pragma omp simd
                for (int64_t x = 0; x < dvp; x++)
                    acc[r * dvp + x] *= alpha;
        }
        round_rows(s, rows, pw);
        dot(rows, dvp, (cols + 1) / 2, pw, BC / 2, 1, vp + j0 / 2 * dvp, dvp, acc, dvp, true);
    }
    float *lse = (float *)c->lse->data + bh * c->lq + i0;
    for (int64_t r = 0; r < rows; r++) {
        const float inv = l[r] > 0 || isnan(l[r]) ? 1 / l[r] : 0;
        store_scaled(dv, acc + r * dvp, inv, row(c->out, b, h, i0 + r));
        lse[r] = l[r] > 0 || isnan(l[r]) ? m[r] + logf(l[r]) : -INFINITY;
    }
}

static int64_t forward_scratch(const call *c)
{
    const int64_t dvp = round16(c->dv), lkp = (c->lk + BC - 1) / BC * BC;
    return c->d / 2 * lkp + lkp / 2 * dvp + BR * BC + BR * BC / 2 + BR * dvp + 2 * BR;
}

/* The gradients of head bh, as the f32 kernel's backward_head. */
BF16_DOT static void backward_head(const call *c, const em_att_tiles *t, float *scratch,
                                   int64_t bh)
{
    const int64_t b = bh / c->heads, h = bh % c->heads, d = c->d, dv = c->dv;
    const int64_t d2 = d / 2, dv2 = dv / 2, dp = round16(d), dvp = round16(dv);
    const int64_t lq = c->lq, lk = c->lk, lkp = (lk + BC - 1) / BC * BC;
    const int64_t lqp = (lq + BR - 1) / BR * BR;
    uint32_t *kt = (uint32_t *)scratch;       // (lkp / BC, d2, BC) keys' pairs
    uint32_t *vt = kt + d2 * lkp;             // (lkp / BC, dv2, BC) values' pairs
    uint32_t *kr = vt + dv2 * lkp;            // (lkp / 2, dp) keys' pair rows
    uint32_t *qr = kr + lkp / 2 * dp;         // (lqp / 2, dp) queries' pair rows
    uint32_t *gr = qr + lqp / 2 * dp;         // (lqp / 2, dvp) output gradient's pair rows
    uint32_t *w1 = gr + lqp / 2 * dvp;        // (BR / 2, BC) P's, then dS's row pairs in bf16
    uint32_t *w2 = w1 + BC * BR / 2;          // (BR, BC / 2) dS in bf16
    float *p = (float *)(w2 + BR * BC / 2);   // (BR, BC) weights
    float *ds = p + BR * BC;                  // (BR, BC) weight, then score gradients
    float *dk = ds + BR * BC;                 // (BC, dp) key gradient / scale
    float *dvb = dk + BC * dp;                // (BC, dvp)
    float *delta = dvb + BC * dvp;            // (lq) rowsum(gout * out)
    float *dq = delta + lq;                   // (lq, dp) query gradient / scale
    for (int64_t j0 = 0; j0 < lk; j0 += BC) {
        const int64_t cols = lk - j0 < BC ? lk - j0 : BC;
        transpose_pairs(row(c->k, b, h, j0), c->k->strides[2], cols, d2, kt + j0 * d2, BC, BC);
        transpose_pairs(row(c->v, b, h, j0), c->v->strides[2], cols, dv2, vt + j0 * dv2, BC,
                        BC);
    }
    interleave_rows(row(c->k, b, h, 0), c->k->strides[2], lk, d, kr, dp);
    interleave_rows(row(c->q, b, h, 0), c->q->strides[2], lq, d, qr, dp);
    interleave_rows(row(c->gout, b, h, 0), c->gout->strides[2], lq, dv, gr, dvp);
    for (int64_t i = 0; i < lq; i++) {
        const uint16_t *g = row(c->gout, b, h, i), *o = row(c->out, b, h, i);
        float sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (int64_t x = 0; x < dv; x++)
            sum += f32_of(g[x]) * f32_of(o[x]);
        delta[i] = sum;
    }
    memset(dq, 0, (size_t)(lq * dp) * sizeof(float));
    const float *lse = (const float *)c->lse->data + bh * lq;
    const float scale = (float)c->p->scale;
    const int64_t ldq = c->q->strides[2] / 2, ldg = c->gout->strides[2] / 2;
    for (int64_t j0 = 0; j0 < lk; j0 += BC) {
        const int64_t cols = lk - j0 < BC ? lk - j0 : BC;
        memset(dk, 0, (size_t)(BC * dp) * sizeof(float));
        memset(dvb, 0, (size_t)(BC * dvp) * sizeof(float));
        for (int64_t i0 = c->p->causal ? j0 / BR * BR : 0; i0 < lq; i0 += BR) {
            const int64_t rows = lq - i0 < BR ? lq - i0 : BR;
            dot(rows, BC, d2, (const uint32_t *)row(c->q, b, h, i0), ldq, 1, kt + j0 * d2, BC, p,
                BC, false);
            dot(rows, BC, dv2, (const uint32_t *)row(c->gout, b, h, i0), ldg, 1, vt + j0 * dv2,
                BC, ds, BC, false);
            for (int64_t r = 0; r < rows; r++) {
                float *pr = p + r * BC, *dr = ds + r * BC;
                const int64_t sn = lse[i0 + r] == -INFINITY ? 0 : seen(c, i0 + r, j0, cols);
                #pragma omp simd
                for (int64_t x = 0; x < sn; x++)
                    pr[x] *= scale;
                for (int64_t x = sn; x < BC; x++) /* keys the row does not see: no gradient */
                    pr[x] = dr[x] = 0;
                t->exp_sum(sn, pr, lse[i0 + r], pr);
                const float di = delta[i0 + r];
                #pragma omp simd
                for (int64_t x = 0; x < sn; x++)
                    dr[x] = pr[x] * (dr[x] - di);
            }
            round_row_pairs(p, rows, w1);
            dot(cols, dvp, (rows + 1) / 2, w1, 1, BC, gr + i0 / 2 * dvp, dvp, dvb, dvp, true);
            round_rows(ds, rows, w2);
            dot(rows, dp, (cols + 1) / 2, w2, BC / 2, 1, kr + j0 / 2 * dp, dp, dq + i0 * dp, dp,
                true);
            round_row_pairs(ds, rows, w1);
            dot(cols, dp, (rows + 1) / 2, w1, 1, BC, qr + i0 / 2 * dp, dp, dk, dp, true);
        }
        for (int64_t x = 0; x < cols; x++) {
            store_scaled(d, dk + x * dp, scale, row(c->gk, b, h, j0 + x));
            store_scaled(dv, dvb + x * dvp, 1, row(c->gv, b, h, j0 + x));
        }
    }
    for (int64_t i = 0; i < lq; i++)
        store_scaled(d, dq + i * dp, scale, row(c->gq, b, h, i));
}

static int64_t backward_scratch(const call *c)
{
    const int64_t dp = round16(c->d), dvp = round16(c->dv);
    const int64_t lkp = (c->lk + BC - 1) / BC * BC, lqp = (c->lq + BR - 1) / BR * BR;
    return c->d / 2 * lkp + c->dv / 2 * lkp + lkp / 2 * dp + lqp / 2 * dp + lqp / 2 * dvp +
           BC * BR / 2 + BR * BC / 2 + 2 * BR * BC + BC * dp + BC * dvp + c->lq + c->lq * dp;
}

/* One task of em_cpu_attention_bf16's call, forward or backward (em_att_run_tasks). */
typedef struct {
    const call *c;
    const em_att_tiles *t;
    int64_t qblocks;
} tasks;

static void forward_task(void *ctx, void *scratch, em_att_packed_head *packed, int64_t task)
{
    const tasks *k = ctx;
    forward_block(k->c, k->t, scratch, packed, task / k->qblocks, task % k->qblocks * BR);
}

static void backward_task(void *ctx, void *scratch, em_att_packed_head *packed, int64_t task)
{
    const tasks *k = ctx;
    (void)packed; /* backward packs a whole head per task */
    backward_head(k->c, k->t, scratch, task);
}

/* A bf16 (B, H, L, X) operand these kernels read or write as words: X even, rows an even number
 * of elements apart from a 4-byte aligned start. */
static bool word_rows(const em_arr *a)
{
    return !a || (a->shape[3] % 2 == 0 && a->strides[2] % 2 == 0 &&
                  (uintptr_t)a->data % sizeof(uint32_t) == 0);
}

int em_cpu_attention_bf16(const em_attention_params *p, int64_t batch, int64_t heads,
                          int64_t lq, int64_t lk, int64_t d, int64_t dv, const em_arr *q,
                          const em_arr *k, const em_arr *v, const em_arr *mask, const em_arr *out,
                          const em_arr *lse, const em_arr *gout, const em_arr *gq,
                          const em_arr *gk, const em_arr *gv)
{
    if (q->dtype != EM_BF16 || !em_cpu_has_avx512_bf16() || !em_cpu_has_avx2() || mask ||
        p->dropout_p != 0 || !word_rows(q) || !word_rows(k) || !word_rows(v) ||
        !word_rows(gout) || d % 2 || dv % 2)
        return EM_KERNEL_UNSUPPORTED;
    const call c = {.p = p, .batch = batch, .heads = heads, .lq = lq, .lk = lk, .d = d, .dv = dv,
                    .q = q, .k = k, .v = v, .out = out, .lse = lse, .gout = gout, .gq = gq,
                    .gk = gk, .gv = gv};
    const bool grad = gout != NULL;
    tasks run = {&c, em_cpu_att_tiles_f32(true), (lq + BR - 1) / BR};
    const int64_t per_thread = grad ? backward_scratch(&c) : forward_scratch(&c);
    const double work = (double)batch * (double)heads * (double)lq * (double)lk * (double)(d + dv);
    return em_att_run_tasks(batch * heads, run.qblocks, grad, work,
                            (size_t)per_thread * sizeof(float),
                            grad ? backward_task : forward_task, &run)
               ? EM_KERNEL_OK
               : EM_KERNEL_FAILED;
}
