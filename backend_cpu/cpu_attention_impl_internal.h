/* The typed body of the CPU attention kernels, included by cpu_attention.c once per real type.
 * Expects REAL (float or double) and ATT_FN(name), which names a function for that type, and
 * cpu_attention.c's att_call, att_seen, att_keep_row and att_mask_row. One task is one block of
 * query rows of one (batch, head) in forward (a thread keeps the head's keys and values packed
 * from one of its tasks to the next), and one whole (batch, head) in backward (its query gradient
 * is summed over every key block); tasks spread over OpenMP threads. Under the causal mask the
 * scores past the diagonal are never computed: the tiles on it skip what is masked or zero. */

/* The REALs at the start of a thread's scratch that hold one mask row (doubles) and one dropout
 * row (bytes), keeping what follows aligned. */
#define ATT_ROWS_REALS ((int64_t)(EM_ATT_BC * (sizeof(double) + 1) / sizeof(REAL)))

/* How many rows ahead of the one being packed the packs ask for */
#define ATT_PREFETCH_ROWS 16
/* How many rows of the output backward asks for before it packs its operands */
#define ATT_OUT_AHEAD_ROWS 64

/* Element (b, h, i, 0) of a (B, H, L, X) array with a contiguous last dim. */
static inline REAL *ATT_FN(row)(const em_arr *a, int64_t b, int64_t h, int64_t i)
{
    return (REAL *)a->data + b * a->strides[0] + h * a->strides[1] + i * a->strides[2];
}

/* Asks for the n elements of row i of a's (b, h) matrix to be brought into cache, when the row
 * exists: the packs below read rows far apart, one cache miss after another without it. Always
 * inlined: as a function of its own GCC finds it free of effects and drops every call. */
static inline __attribute__((always_inline)) void ATT_FN(prefetch_row)(const em_arr *a,
                                                                       int64_t b, int64_t h,
                                                                       int64_t i, int64_t n)
{
    if (i >= a->shape[2])
        return;
    const char *p = (const char *)ATT_FN(row)(a, b, h, i);
    for (int64_t at = 0; at < n * (int64_t)sizeof(REAL); at += 64)
        __builtin_prefetch(p + at);
}

/* dst (rows, ldd) = rows i0.. of a's (b, h) matrix, columns past n zeroed up to ldd */
static void ATT_FN(pack_rows)(REAL *dst, int64_t ldd, const em_arr *a, int64_t b, int64_t h,
                              int64_t i0, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const REAL *src = ATT_FN(row)(a, b, h, i0 + r);
        REAL *d = dst + r * ldd;
        ATT_FN(prefetch_row)(a, b, h, i0 + r + ATT_PREFETCH_ROWS, n);
        #pragma omp simd
        for (int64_t x = 0; x < n; x++)
            d[x] = src[x];
        for (int64_t x = n; x < ldd; x++)
            d[x] = 0;
    }
}

/* dst (n, ldd) = scale * the first n elements of `cols` rows at src (row stride src_row),
 * transposed; columns past cols zeroed */
static void ATT_FN(transpose_rows)(const em_att_tiles *t, REAL *dst, int64_t ldd, const REAL *src,
                                   int64_t src_row, int64_t cols, int64_t n, REAL scale)
{
    for (int64_t x = 0; x < n; x++)
        for (int64_t c = cols; c < ldd; c++)
            dst[x * ldd + c] = 0;
    t->transpose(cols, n, src, src_row, (double)scale, dst, ldd);
}

/* Adds the caller's mask to the score tile s (rows, EM_ATT_BC) of query rows i0.. and key
 * columns j0.. (the causal diagonal is att_seen's). */
static void ATT_FN(mask_tile)(const att_call *c, REAL *s, int64_t b, int64_t h, int64_t i0,
                              int64_t rows, int64_t j0, int64_t cols, double *add)
{
    for (int64_t r = 0; c->mask && r < rows; r++) {
        REAL *sr = s + r * EM_ATT_BC;
        att_mask_row(c->mask, b, h, i0 + r, j0, cols, add);
        for (int64_t x = 0; x < cols; x++)
            sr[x] += (REAL)add[x];
    }
}

/* Packs keys (transposed per block of EM_ATT_BC, times the scale) and values of head bh into the
 * thread's kt and vp, up to key `until`, unless the thread's last task left them there. */
static void ATT_FN(pack_head)(const att_call *c, const em_att_tiles *t, REAL *kt, REAL *vp,
                              att_packed_head *packed, int64_t bh, int64_t until)
{
    const int64_t b = bh / c->heads, h = bh % c->heads, d = c->d, dvp = em_att_pad(c->dv);
    if (packed->bh != bh)
        *packed = (att_packed_head){bh, 0};
    for (; packed->keys < until; packed->keys += EM_ATT_BC) {
        int64_t j0 = packed->keys, cols = c->lk - j0 < EM_ATT_BC ? c->lk - j0 : EM_ATT_BC;
        ATT_FN(transpose_rows)(t, kt + j0 * d, EM_ATT_BC, ATT_FN(row)(c->k, b, h, j0),
                               c->k->strides[2], cols, d, (REAL)c->p->scale);
        ATT_FN(pack_rows)(vp + j0 * dvp, dvp, c->v, b, h, j0, cols, c->dv);
    }
}

/* Out rows i0..i0+EM_ATT_BR of (b, h): the running max and sum of each row's scores over the
 * key blocks seen so far, the output accumulated in their scale, rescaled as the max grows. The
 * scores are q (read where it lies) @ (scale k^T), as backward recomputes them. */
static void ATT_FN(forward_block)(const att_call *c, const em_att_tiles *t, REAL *scratch,
                                  att_packed_head *packed, int64_t bh, int64_t i0)
{
    const int64_t b = bh / c->heads, h = bh % c->heads, d = c->d, dv = c->dv;
    const int64_t dvp = em_att_pad(dv);
    const int64_t rows = c->lq - i0 < EM_ATT_BR ? c->lq - i0 : EM_ATT_BR;
    double *add = (double *)scratch;                 // (EM_ATT_BC) one mask row
    uint8_t *keep = (uint8_t *)(add + EM_ATT_BC);    // (EM_ATT_BC) one dropout row
    const int64_t lkp = (c->lk + EM_ATT_BC - 1) / EM_ATT_BC * EM_ATT_BC;
    const REAL *q = ATT_FN(row)(c->q, b, h, i0); // (rows, d), rows c->q->strides[2] apart
    REAL *kt = scratch + ATT_ROWS_REALS; // (lkp / EM_ATT_BC, d, EM_ATT_BC) scale k^T per block
    REAL *vp = kt + d * lkp;           // (lkp, dvp) values
    REAL *s = vp + lkp * dvp;          // (EM_ATT_BR, EM_ATT_BC) scores, then weights
    REAL *acc = s + EM_ATT_BR * EM_ATT_BC; // (EM_ATT_BR, dvp) output, unnormalised
    REAL *m = acc + EM_ATT_BR * dvp, *l = m + EM_ATT_BR; // (EM_ATT_BR) running max and sum
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
        #pragma omp simd
        for (int64_t x = 0; x < dvp; x++)
            acc[r * dvp + x] = 0;
    }
    const REAL drop_scale = (REAL)(1.0 / (1.0 - c->p->dropout_p));
    int64_t jend = c->p->causal && i0 + rows < c->lk ? i0 + rows : c->lk;
    ATT_FN(pack_head)(c, t, kt, vp, packed, bh, jend);
    for (int64_t j0 = 0; j0 < jend; j0 += EM_ATT_BC) {
        int64_t cols = jend - j0 < EM_ATT_BC ? jend - j0 : EM_ATT_BC;
        const bool diag = c->p->causal && j0 == i0; /* the tiles of the causal diagonal */
        t->matmul(rows, em_att_pad(cols), d, q, c->q->strides[2], 1, kt + j0 * d, EM_ATT_BC, s,
                  EM_ATT_BC, false, diag ? EM_ATT_C_LOWER : EM_ATT_FULL);
        ATT_FN(mask_tile)(c, s, b, h, i0, rows, j0, cols, add);
        for (int64_t r = 0; r < rows; r++) {
            REAL *sr = s + r * EM_ATT_BC;
            const int64_t seen = att_seen(c, i0 + r, j0, cols);
            for (int64_t x = seen; x < cols; x++)
                sr[x] = 0;
            REAL mx = (REAL)t->row_max(seen, sr), mnew = mx > m[r] || isnan(mx) ? mx : m[r];
            if (mnew == -INFINITY) { /* every key so far is masked: weights 0 */
                for (int64_t x = 0; x < seen; x++)
                    sr[x] = 0;
                continue;
            }
            REAL alpha = m[r] == -INFINITY ? 0 : (REAL)exp((double)(m[r] - mnew));
            l[r] = l[r] * alpha + (REAL)t->exp_sum(seen, sr, mnew, sr);
            m[r] = mnew;
            if (alpha != 1)
                #pragma omp simd
                for (int64_t x = 0; x < dvp; x++)
                    acc[r * dvp + x] *= alpha;
            if (c->p->dropout_p > 0) {
                att_keep_row(c->p, ((uint64_t)bh * c->lq + i0 + r) * c->lk + j0, seen, keep);
                for (int64_t x = 0; x < seen; x++)
                    sr[x] = keep[x] ? sr[x] * drop_scale : 0;
            }
        }
        t->matmul(rows, dvp, cols, s, EM_ATT_BC, 1, vp + j0 * dvp, dvp, acc, dvp, true,
                  diag ? EM_ATT_A_LOWER : EM_ATT_FULL);
    }
    REAL *lse = (REAL *)c->lse->data + bh * c->lq + i0;
    for (int64_t r = 0; r < rows; r++) {
        REAL *o = ATT_FN(row)(c->out, b, h, i0 + r);
        REAL inv = l[r] > 0 || isnan(l[r]) ? 1 / l[r] : 0;
        #pragma omp simd
        for (int64_t x = 0; x < dv; x++)
            o[x] = acc[r * dvp + x] * inv;
        lse[r] = l[r] > 0 || isnan(l[r]) ? m[r] + (REAL)log((double)l[r]) : -INFINITY;
    }
}

/* REALs of one thread's forward scratch (mask and dropout rows included) */
static int64_t ATT_FN(forward_scratch)(const att_call *c)
{
    int64_t dvp = em_att_pad(c->dv);
    int64_t lkp = (c->lk + EM_ATT_BC - 1) / EM_ATT_BC * EM_ATT_BC;
    return c->d * lkp + lkp * dvp + EM_ATT_BR * EM_ATT_BC + EM_ATT_BR * dvp + 2 * EM_ATT_BR +
           ATT_ROWS_REALS;
}

/* The gradients of (b, h): per key block, its key and value gradients summed over the query
 * blocks that see it, the weights recomputed from the saved log-sum-exp; the query gradient
 * summed over key blocks in dq. Every operand is packed once up front. */
static void ATT_FN(backward_head)(const att_call *c, const em_att_tiles *t, REAL *scratch,
                                  int64_t bh)
{
    const int64_t b = bh / c->heads, h = bh % c->heads, d = c->d, dv = c->dv;
    const int64_t dp = em_att_pad(d), dvp = em_att_pad(dv), lq = c->lq, lk = c->lk;
    const int64_t kblocks = (lk + EM_ATT_BC - 1) / EM_ATT_BC;
    double *add = (double *)scratch;                 // (EM_ATT_BC) one mask row
    uint8_t *keep = (uint8_t *)(add + EM_ATT_BC);    // (EM_ATT_BC) one dropout row
    REAL *qs = scratch + ATT_ROWS_REALS;    // (lq, dp) queries
    REAL *go = qs + lq * dp;            // (lq, dvp) output gradient
    REAL *kt = go + lq * dvp;           // (kblocks, d, EM_ATT_BC) scale k^T per block
    REAL *kp = kt + kblocks * d * EM_ATT_BC; // (lk, dp) keys
    REAL *vt = kp + lk * dp;            // (kblocks, dv, EM_ATT_BC) values, transposed per block
    REAL *p = vt + kblocks * dv * EM_ATT_BC; // (EM_ATT_BR, EM_ATT_BC) weights, then dropped
    REAL *ds = p + EM_ATT_BR * EM_ATT_BC; // (EM_ATT_BR, EM_ATT_BC) weight, then score grads
    REAL *dk = ds + EM_ATT_BR * EM_ATT_BC; // (EM_ATT_BC, dp) key gradient / scale
    REAL *dvb = dk + EM_ATT_BC * dp;    // (EM_ATT_BC, dvp)
    REAL *delta = dvb + EM_ATT_BC * dvp; // (lq) rowsum(gout * out)
    REAL *dq = delta + lq;              // (lq, dp) query gradient / scale
    for (int64_t i = 0; i < ATT_OUT_AHEAD_ROWS; i++) /* read below, after the packs */
        ATT_FN(prefetch_row)(c->out, b, h, i, dv);
    const REAL scale = (REAL)c->p->scale;
    ATT_FN(pack_rows)(qs, dp, c->q, b, h, 0, lq, d);
    ATT_FN(pack_rows)(go, dvp, c->gout, b, h, 0, lq, dv);
    ATT_FN(pack_rows)(kp, dp, c->k, b, h, 0, lk, d);
    for (int64_t j0 = 0; j0 < lk; j0 += EM_ATT_BC) {
        int64_t cols = lk - j0 < EM_ATT_BC ? lk - j0 : EM_ATT_BC;
        ATT_FN(transpose_rows)(t, vt + j0 * dv, EM_ATT_BC, ATT_FN(row)(c->v, b, h, j0),
                               c->v->strides[2], cols, dv, 1);
        ATT_FN(transpose_rows)(t, kt + j0 * d, EM_ATT_BC, kp + j0 * dp, dp, cols, d, scale);
    }
    for (int64_t i = 0; i < lq; i++) {
        const REAL *g = go + i * dvp, *o = ATT_FN(row)(c->out, b, h, i);
        ATT_FN(prefetch_row)(c->out, b, h, i + ATT_OUT_AHEAD_ROWS, dv);
        double sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (int64_t x = 0; x < dv; x++)
            sum += (double)g[x] * (double)o[x];
        delta[i] = (REAL)sum;
        #pragma omp simd
        for (int64_t x = 0; x < dp; x++)
            dq[i * dp + x] = 0;
    }
    const REAL *lse = (const REAL *)c->lse->data + bh * lq;
    const REAL drop_scale = (REAL)(1.0 / (1.0 - c->p->dropout_p));
    for (int64_t j0 = 0; j0 < lk; j0 += EM_ATT_BC) {
        int64_t cols = lk - j0 < EM_ATT_BC ? lk - j0 : EM_ATT_BC, ncols = em_att_pad(cols);
        #pragma omp simd
        for (int64_t x = 0; x < EM_ATT_BC * dp; x++)
            dk[x] = 0;
        #pragma omp simd
        for (int64_t x = 0; x < EM_ATT_BC * dvp; x++)
            dvb[x] = 0;
        for (int64_t i0 = c->p->causal ? j0 / EM_ATT_BR * EM_ATT_BR : 0; i0 < lq;
             i0 += EM_ATT_BR) {
            int64_t rows = lq - i0 < EM_ATT_BR ? lq - i0 : EM_ATT_BR;
            const REAL *qi = qs + i0 * dp, *gi = go + i0 * dvp;
            const bool diag = c->p->causal && j0 == i0; /* the tiles of the causal diagonal */
            const em_att_tri lower_c = diag ? EM_ATT_C_LOWER : EM_ATT_FULL;
            const em_att_tri lower_a = diag ? EM_ATT_A_LOWER : EM_ATT_FULL;
            const em_att_tri upper_a = diag ? EM_ATT_A_UPPER : EM_ATT_FULL;
            t->matmul(rows, ncols, d, qi, dp, 1, kt + j0 * d, EM_ATT_BC, p, EM_ATT_BC, false,
                      lower_c);
            ATT_FN(mask_tile)(c, p, b, h, i0, rows, j0, cols, add);
            t->matmul(rows, ncols, dv, gi, dvp, 1, vt + j0 * dv, EM_ATT_BC, ds, EM_ATT_BC,
                      false, lower_c);
            for (int64_t r = 0; r < rows; r++) {
                REAL *pr = p + r * EM_ATT_BC, *dr = ds + r * EM_ATT_BC, di = delta[i0 + r];
                const int64_t seen = lse[i0 + r] == -INFINITY ? 0 : att_seen(c, i0 + r, j0, cols);
                for (int64_t x = seen; x < cols; x++) /* keys the row does not see: no gradient */
                    pr[x] = dr[x] = 0;
                t->exp_sum(seen, pr, lse[i0 + r], pr);
                if (c->p->dropout_p > 0) {
                    att_keep_row(c->p, ((uint64_t)bh * lq + i0 + r) * lk + j0, seen, keep);
                    for (int64_t x = 0; x < seen; x++) {
                        REAL z = keep[x] ? drop_scale : 0;
                        dr[x] = pr[x] * (dr[x] * z - di);
                        pr[x] *= z;
                    }
                } else {
                    #pragma omp simd
                    for (int64_t x = 0; x < seen; x++)
                        dr[x] = pr[x] * (dr[x] - di);
                }
            }
            t->matmul(cols, dvp, rows, p, 1, EM_ATT_BC, gi, dvp, dvb, dvp, true, upper_a);
            t->matmul(rows, dp, cols, ds, EM_ATT_BC, 1, kp + j0 * dp, dp, dq + i0 * dp, dp, true,
                      lower_a);
            t->matmul(cols, dp, rows, ds, 1, EM_ATT_BC, qi, dp, dk, dp, true, upper_a);
        }
        for (int64_t x = 0; x < cols; x++) {
            REAL *gk = ATT_FN(row)(c->gk, b, h, j0 + x), *gv = ATT_FN(row)(c->gv, b, h, j0 + x);
            #pragma omp simd
            for (int64_t y = 0; y < d; y++)
                gk[y] = dk[x * dp + y] * scale;
            #pragma omp simd
            for (int64_t y = 0; y < dv; y++)
                gv[y] = dvb[x * dvp + y];
        }
    }
    for (int64_t i = 0; i < lq; i++) {
        REAL *gq = ATT_FN(row)(c->gq, b, h, i);
        #pragma omp simd
        for (int64_t y = 0; y < d; y++)
            gq[y] = dq[i * dp + y] * scale;
    }
}

/* REALs of one thread's backward scratch */
static int64_t ATT_FN(backward_scratch)(const att_call *c)
{
    int64_t dp = em_att_pad(c->d), dvp = em_att_pad(c->dv);
    int64_t lkp = (c->lk + EM_ATT_BC - 1) / EM_ATT_BC * EM_ATT_BC;
    return c->lq * dp + c->lq * dvp + c->d * lkp + c->lk * dp + c->dv * lkp +
           2 * EM_ATT_BR * EM_ATT_BC + EM_ATT_BC * dp + EM_ATT_BC * dvp + c->lq + c->lq * dp +
           ATT_ROWS_REALS;
}

/* One task of ATT_FN(run)'s call: ctx its call and tiles. */
typedef struct {
    const att_call *c;
    const em_att_tiles *t;
    int64_t qblocks;
    bool grad;
} ATT_FN(tasks);

static void ATT_FN(task)(void *ctx, void *scratch, em_att_packed_head *packed, int64_t task)
{
    const ATT_FN(tasks) *k = ctx;
    if (k->grad)
        ATT_FN(backward_head)(k->c, k->t, scratch, task);
    else
        ATT_FN(forward_block)(k->c, k->t, scratch, packed, task / k->qblocks,
                              task % k->qblocks * EM_ATT_BR);
}

/* Runs forward (grad false) or backward over every task; false when the scratch could not be
 * had. */
static bool ATT_FN(run)(const att_call *c, const em_att_tiles *t, bool grad)
{
    const int64_t qblocks = (c->lq + EM_ATT_BR - 1) / EM_ATT_BR;
    const int64_t per_thread = grad ? ATT_FN(backward_scratch)(c) : ATT_FN(forward_scratch)(c);
    const double work = (double)c->batch * (double)c->heads * (double)c->lq * (double)c->lk *
                        (double)(c->d + c->dv);
    ATT_FN(tasks) k = {c, t, qblocks, grad};
    return em_att_run_tasks(c->batch * c->heads, qblocks, grad, work,
                            (size_t)per_thread * sizeof(REAL), ATT_FN(task), &k);
}
