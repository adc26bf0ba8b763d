/* Scaled dot-product attention on CUDA with the CPU kernel's semantics (cpu_attention.c), never
 * holding the (Lq, Lk) matrix: the entry points, and the kernels for what the tiled ones
 * (cuda_attention_tiled.cu: head dims up to TILED_MAX_DIM, not f64) do not take. Forward: a
 * block per query row walks the keys in tiles of BLOCK with an online softmax (running max and
 * sum, the output rescaled as the max grows) and keeps the row's log-sum-exp. Backward
 * recomputes the weights from it: a block per query row sums its query gradient over the keys,
 * a block per key row its key and value gradients over the queries, each sum in a fixed order
 * (no atomics): deterministic. Simple rather than fast (one thread per score, head dims up to
 * MAX_DIM); f16/bf16 compute in f32. */
#include "backend_cuda/cuda_attention_internal.cuh"

namespace {

typedef attention_call call;
const int BLOCK = 128;
const int PER_THREAD = 4;                  /* head dims one thread accumulates */
const int64_t MAX_DIM = BLOCK * PER_THREAD; /* D and Dv at most */

/* The masked score of query i (scaled, qs in shared memory) and key j. */
template <typename T, typename A>
__device__ A score(const call &c, const A *qs, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (c.p.causal && j > i)
        return -INFINITY;
    const T *kr = row_at<const T>(c.k, b, h, j);
    A s = 0;
    for (int64_t x = 0; x < c.d; x++)
        s += qs[x] * load(kr + x);
    return c.has_mask ? s + (A)mask_add(c.mask, b, h, i, j) : s;
}

struct op_add {
    template <class A> __device__ A operator()(A a, A b) const { return a + b; }
};

/* v combined over the block in a fixed tree; every thread gets the result. */
template <class A, class Op> __device__ A block_reduce(A v, Op op, A *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            red[threadIdx.x] = op(red[threadIdx.x], red[threadIdx.x + half]);
        __syncthreads();
    }
    const A r = red[0];
    __syncthreads();
    return r;
}

/* dst (n) = scale * src (n) in shared memory */
template <typename T, typename A>
__device__ void stage_row(A *dst, const T *src, int64_t n, A scale)
{
    for (int64_t x = threadIdx.x; x < n; x += BLOCK)
        dst[x] = scale * load(src + x);
}

/* out row and lse of query row blockIdx.x = (b * H + h) * Lq + i */
template <typename T> __global__ void __launch_bounds__(BLOCK) forward_kernel(call c)
{
    typedef acc_t<T> A;
    extern __shared__ unsigned char smem[];
    A *qs = (A *)smem;   // (D) the scaled query
    A *w = qs + c.d;     // (BLOCK) the tile's weights
    A *red = w + BLOCK;  // (BLOCK)
    const int64_t row = blockIdx.x, bh = row / c.lq, i = row % c.lq;
    const int64_t b = bh / c.heads, h = bh % c.heads;
    stage_row(qs, row_at<const T>(c.q, b, h, i), c.d, (A)c.p.scale);
    __syncthreads();
    A acc[PER_THREAD] = {};
    A m = -INFINITY, l = 0;
    const A drop_scale = (A)(1.0 / (1.0 - c.p.dropout_p));
    const int64_t jend = c.p.causal && i + 1 < c.lk ? i + 1 : c.lk;
    for (int64_t j0 = 0; j0 < jend; j0 += BLOCK) {
        const int64_t j = j0 + threadIdx.x, cols = jend - j0 < BLOCK ? jend - j0 : BLOCK;
        const A s = j < jend ? score<T>(c, qs, b, h, i, j) : (A)-INFINITY;
        const A mx = block_reduce(s, op_max(), red);
        const A mnew = mx > m || mx != mx ? mx : m;
        if (mnew == -INFINITY) /* every key so far is masked: weights 0 (the same in all threads) */
            continue;
        const A alpha = m == -INFINITY ? (A)0 : (A)exp((double)(m - mnew));
        A e = j < jend ? (A)exp((double)(s - mnew)) : (A)0;
        l = l * alpha + block_reduce(e, op_add(), red);
        m = mnew;
        if (c.p.dropout_p > 0 && j < jend)
            e = kept(c.p, ((uint64_t)bh * c.lq + i) * c.lk + j) ? e * drop_scale : (A)0;
        w[threadIdx.x] = e;
        __syncthreads();
        for (int u = 0; u < PER_THREAD; u++) {
            const int64_t x = threadIdx.x + (int64_t)u * BLOCK;
            if (x >= c.dv)
                break;
            acc[u] *= alpha;
            for (int64_t t = 0; t < cols; t++)
                acc[u] += w[t] * load(row_at<const T>(c.v, b, h, j0 + t) + x);
        }
        __syncthreads();
    }
    const bool any = l > 0 || l != l;
    const A inv = any ? (A)1 / l : (A)0;
    T *o = row_at<T>(c.out, b, h, i);
    for (int u = 0; u < PER_THREAD; u++) {
        const int64_t x = threadIdx.x + (int64_t)u * BLOCK;
        if (x < c.dv)
            store(o + x, acc[u] * inv);
    }
    if (threadIdx.x == 0)
        ((A *)c.lse.data)[row] = any ? m + (A)log((double)l) : (A)-INFINITY;
}

/* delta (B * H * Lq) = rowsum(gout * out), summed in double */
template <typename T> __global__ void delta_kernel(call c, acc_t<T> *delta)
{
    const int64_t rows = c.q.shape[0] * c.heads * c.lq;
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < rows;
         row += (int64_t)gridDim.x * blockDim.x) {
        const int64_t bh = row / c.lq, i = row % c.lq, b = bh / c.heads, h = bh % c.heads;
        const T *g = row_at<const T>(c.gout, b, h, i), *o = row_at<const T>(c.out, b, h, i);
        double sum = 0;
        for (int64_t x = 0; x < c.dv; x++)
            sum += (double)load(g + x) * (double)load(o + x);
        delta[row] = (acc_t<T>)sum;
    }
}

/* gq row of query row blockIdx.x = scale * sum over its keys of ds(i, j) k_j */
template <typename T>
__global__ void __launch_bounds__(BLOCK) grad_q_kernel(call c, const acc_t<T> *delta)
{
    typedef acc_t<T> A;
    extern __shared__ unsigned char smem[];
    A *qs = (A *)smem;  // (D) the scaled query
    A *go = qs + c.d;   // (Dv) its output gradient
    A *ds = go + c.dv;  // (BLOCK) the tile's score gradients
    const int64_t row = blockIdx.x, bh = row / c.lq, i = row % c.lq;
    const int64_t b = bh / c.heads, h = bh % c.heads;
    stage_row(qs, row_at<const T>(c.q, b, h, i), c.d, (A)c.p.scale);
    stage_row(go, row_at<const T>(c.gout, b, h, i), c.dv, (A)1);
    __syncthreads();
    const A lse = ((const A *)c.lse.data)[row], di = delta[row];
    A dq[PER_THREAD] = {};
    /* a row that sees no key has no gradient */
    const int64_t jend = lse == -INFINITY ? 0 : c.p.causal && i + 1 < c.lk ? i + 1 : c.lk;
    for (int64_t j0 = 0; j0 < jend; j0 += BLOCK) {
        const int64_t j = j0 + threadIdx.x, cols = jend - j0 < BLOCK ? jend - j0 : BLOCK;
        A g = 0, pw;
        if (j < jend) {
            const T *vr = row_at<const T>(c.v, b, h, j);
            A dp = 0;
            for (int64_t x = 0; x < c.dv; x++)
                dp += go[x] * load(vr + x);
            g = score_grad(c, score<T>(c, qs, b, h, i, j), lse, dp, di,
                           ((uint64_t)bh * c.lq + i) * c.lk + j, &pw);
        }
        ds[threadIdx.x] = g;
        __syncthreads();
        for (int u = 0; u < PER_THREAD; u++) {
            const int64_t y = threadIdx.x + (int64_t)u * BLOCK;
            if (y >= c.d)
                break;
            for (int64_t t = 0; t < cols; t++)
                dq[u] += ds[t] * load(row_at<const T>(c.k, b, h, j0 + t) + y);
        }
        __syncthreads();
    }
    T *gq = row_at<T>(c.gq, b, h, i);
    for (int u = 0; u < PER_THREAD; u++) {
        const int64_t y = threadIdx.x + (int64_t)u * BLOCK;
        if (y < c.d)
            store(gq + y, dq[u] * (A)c.p.scale);
    }
}

/* gk and gv rows of key row blockIdx.x = (b * H + h) * Lk + j: sums over the queries that see
 * it of ds(i, j) scale q_i and of the dropped weight times gout_i */
template <typename T>
__global__ void __launch_bounds__(BLOCK) grad_kv_kernel(call c, const acc_t<T> *delta)
{
    typedef acc_t<T> A;
    extern __shared__ unsigned char smem[];
    A *kr = (A *)smem;  // (D) the key
    A *vr = kr + c.d;   // (Dv) its value
    A *pw = vr + c.dv;  // (BLOCK) the tile's dropped weights
    A *ds = pw + BLOCK; // (BLOCK) and score gradients
    const int64_t row = blockIdx.x, bh = row / c.lk, j = row % c.lk;
    const int64_t b = bh / c.heads, h = bh % c.heads;
    stage_row(kr, row_at<const T>(c.k, b, h, j), c.d, (A)1);
    stage_row(vr, row_at<const T>(c.v, b, h, j), c.dv, (A)1);
    __syncthreads();
    const A scale = (A)c.p.scale;
    A gk[PER_THREAD] = {}, gv[PER_THREAD] = {};
    for (int64_t i0 = c.p.causal ? j : 0; i0 < c.lq; i0 += BLOCK) {
        const int64_t i = i0 + threadIdx.x, rows = c.lq - i0 < BLOCK ? c.lq - i0 : BLOCK;
        A g = 0, p = 0;
        const A lse = i < c.lq ? ((const A *)c.lse.data)[bh * c.lq + i] : (A)-INFINITY;
        if (lse != -INFINITY) {
            const T *qr = row_at<const T>(c.q, b, h, i), *gr = row_at<const T>(c.gout, b, h, i);
            A s = 0, dp = 0;
            for (int64_t x = 0; x < c.d; x++)
                s += scale * load(qr + x) * kr[x];
            if (c.has_mask)
                s += (A)mask_add(c.mask, b, h, i, j);
            for (int64_t x = 0; x < c.dv; x++)
                dp += load(gr + x) * vr[x];
            g = score_grad(c, s, lse, dp, delta[bh * c.lq + i],
                           ((uint64_t)bh * c.lq + i) * c.lk + j, &p);
        }
        pw[threadIdx.x] = p;
        ds[threadIdx.x] = g;
        __syncthreads();
        for (int u = 0; u < PER_THREAD; u++) {
            const int64_t x = threadIdx.x + (int64_t)u * BLOCK;
            for (int64_t t = 0; x < c.dv && t < rows; t++)
                gv[u] += pw[t] * load(row_at<const T>(c.gout, b, h, i0 + t) + x);
            for (int64_t t = 0; x < c.d && t < rows; t++)
                gk[u] += ds[t] * (scale * load(row_at<const T>(c.q, b, h, i0 + t) + x));
        }
        __syncthreads();
    }
    T *gkr = row_at<T>(c.gk, b, h, j), *gvr = row_at<T>(c.gv, b, h, j);
    for (int u = 0; u < PER_THREAD; u++) {
        const int64_t x = threadIdx.x + (int64_t)u * BLOCK;
        if (x < c.d)
            store(gkr + x, gk[u]);
        if (x < c.dv)
            store(gvr + x, gv[u]);
    }
}

/* a (n0, n1, n2, n3) 4-D array of dtype dt with a contiguous last dim */
bool arr4(const em_arr *a, em_dtype dt, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    return a && a->ndim == 4 && a->dtype == dt && a->shape[0] == n0 && a->shape[1] == n1 &&
           a->shape[2] == n2 && a->shape[3] == n3 && (n3 <= 1 || a->strides[3] == 1);
}

/* The call's dims from q, k, v and the operands' checks (the CPU's, plus the head-dim and grid
 * limits of these kernels); false when they do not fit together. */
bool make_call(call *c, const em_attention_params *p, const em_arr *q, const em_arr *k,
               const em_arr *v, const em_arr *mask, const em_arr *out, const em_arr *lse,
               const em_arr *const *grads /* gout, gq, gk, gv, or NULL */)
{
    if (!q || !k || !v || !out || !lse || q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return false;
    const em_dtype dt = q->dtype;
    const int64_t nb = q->shape[0];
    *c = call{};
    c->p = *p;
    c->heads = q->shape[1];
    c->lq = q->shape[2];
    c->d = q->shape[3];
    c->lk = k->shape[2];
    c->dv = v->shape[3];
    const em_dtype lse_dt = dt == EM_F64 ? EM_F64 : EM_F32;
    bool ok = (dt == EM_F32 || dt == EM_F64 || dt == EM_F16 || dt == EM_BF16) &&
              arr4(q, dt, nb, c->heads, c->lq, c->d) && arr4(k, dt, nb, c->heads, c->lk, c->d) &&
              arr4(v, dt, nb, c->heads, c->lk, c->dv) &&
              arr4(out, dt, nb, c->heads, c->lq, c->dv) && lse->dtype == lse_dt &&
              p->dropout_p >= 0 && p->dropout_p < 1 && c->d <= MAX_DIM && c->dv <= MAX_DIM &&
              nb * c->heads * (c->lq > c->lk ? c->lq : c->lk) < ((int64_t)1 << 31);
    if (ok && mask)
        ok = mask->ndim == 4 && (mask->dtype == EM_BOOL || em_dtype_is_float(mask->dtype));
    for (int dim = 0; ok && mask && dim < 4; dim++)
        ok = mask->shape[dim] == (dim == 0 ? nb : dim == 1 ? c->heads : dim == 2 ? c->lq : c->lk);
    if (ok && grads)
        ok = arr4(grads[0], dt, nb, c->heads, c->lq, c->dv) &&
             arr4(grads[1], dt, nb, c->heads, c->lq, c->d) &&
             arr4(grads[2], dt, nb, c->heads, c->lk, c->d) &&
             arr4(grads[3], dt, nb, c->heads, c->lk, c->dv);
    if (!ok)
        return false;
    c->q = *q;
    c->k = *k;
    c->v = *v;
    c->out = *out;
    c->lse = *lse;
    c->has_mask = mask != NULL;
    if (mask)
        c->mask = *mask;
    if (grads) {
        c->gout = *grads[0];
        c->gq = *grads[1];
        c->gk = *grads[2];
        c->gv = *grads[3];
    }
    return true;
}

} // namespace

extern "C" int em_cuda_attention(const em_attention_params *p, const em_arr *q, const em_arr *k,
                                 const em_arr *v, const em_arr *mask, const em_arr *out,
                                 const em_arr *lse)
{
    call c;
    if (!make_call(&c, p, q, k, v, mask, out, lse, NULL))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t rows = q->shape[0] * c.heads * c.lq;
    if (rows == 0)
        return EM_KERNEL_OK;
    return dispatch_float(q->dtype, [&](auto t) {
        typedef decltype(t) T;
        const size_t shared = (size_t)(c.d + 2 * BLOCK) * sizeof(acc_t<T>);
        if (tiled_attention_fits(q->dtype, c.d, c.dv))
            return tiled_attention(c, q->dtype);
        forward_kernel<T><<<(unsigned)rows, BLOCK, shared, em_cuda_launch_stream()>>>(c);
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_attention_grad(const em_attention_params *p, const em_arr *q,
                                      const em_arr *k, const em_arr *v, const em_arr *mask,
                                      const em_arr *out, const em_arr *lse, const em_arr *gout,
                                      const em_arr *gq, const em_arr *gk, const em_arr *gv)
{
    call c;
    const em_arr *grads[4] = {gout, gq, gk, gv};
    if (!make_call(&c, p, q, k, v, mask, out, lse, grads))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t bh = q->shape[0] * c.heads, qrows = bh * c.lq, krows = bh * c.lk;
    return dispatch_float(q->dtype, [&](auto t) {
        typedef decltype(t) T;
        typedef acc_t<T> A;
        const size_t bytes = (size_t)(qrows > 0 ? qrows : 1) * sizeof(A);
        A *delta = (A *)em_cuda_scratch(bytes); // (B * H * Lq)
        if (!delta)
            return (int)EM_KERNEL_FAILED;
        const size_t shared = (size_t)(c.d + c.dv + 2 * BLOCK) * sizeof(A);
        int rc = EM_KERNEL_OK;
        if (qrows > 0) {
            delta_kernel<T><<<grid_for(qrows, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
                c, delta);
            rc = em_cuda_launch_status();
        }
        if (rc == EM_KERNEL_OK && tiled_attention_fits(q->dtype, c.d, c.dv)) {
            rc = tiled_attention_grad(c, q->dtype, (const float *)delta); /* A is f32 there */
            em_cuda_scratch_free(delta, bytes);
            return rc;
        }
        if (rc == EM_KERNEL_OK && qrows > 0) {
            grad_q_kernel<T><<<(unsigned)qrows, BLOCK, shared, em_cuda_launch_stream()>>>(c, delta);
            rc = em_cuda_launch_status();
        }
        if (rc == EM_KERNEL_OK && krows > 0) {
            grad_kv_kernel<T><<<(unsigned)krows, BLOCK, shared, em_cuda_launch_stream()>>>(
                c, delta);
            rc = em_cuda_launch_status();
        }
        em_cuda_scratch_free(delta, bytes);
        return rc;
    });
}
