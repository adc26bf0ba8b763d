/* Scaled dot-product attention on CUDA for head dims up to TILED_MAX_DIM in f32, f16 and bf16
 * (the transformer's usual 32 to 64), in tiles of TILE rows held in shared memory: a block of
 * THREADS threads loads a tile of queries (or keys) once and walks the tiles of keys (queries)
 * past it, so each row read from global memory serves TILE rows instead of one. LANES threads
 * share a row: each computes TILE / LANES of its scores and keeps XPER of its head dims.
 * The same semantics and passes as cuda_attention.cu (online softmax and log-sum-exp forward;
 * backward recomputing the weights, query gradients per query tile, key and value gradients per
 * key tile, each sum in a fixed order, no atomics: deterministic); computes in f32. */
#include <type_traits>

#include "backend_cuda/cuda_attention_internal.cuh"

namespace {

const int TILE = 32;
const int THREADS = 128;
const int LANES = THREADS / TILE;            /* threads per row of a tile */
const int PER = TILE / LANES;                /* scores one thread computes per tile */
const int XPER = (int)TILED_MAX_DIM / LANES; /* head dims one thread accumulates */
const int PITCH = (int)TILED_MAX_DIM + 1;    /* a row in shared memory, padded off bank conflicts */
const unsigned ALL_LANES = 0xffffffffu;

static_assert(THREADS % TILE == 0 && 32 % LANES == 0, "a row's threads share a warp");

/* dst rows 0..TILE-1 = scale * rows row0.. of a (width of them), zero past its `rows` rows */
template <typename T>
__device__ void load_tile(float (*dst)[PITCH], const em_arr &a, int64_t b, int64_t h, int64_t row0,
                          int64_t rows, int64_t width, float scale)
{
    for (int64_t e = threadIdx.x; e < TILE * width; e += THREADS) {
        const int64_t r = e / width, x = e % width;
        dst[r][x] = row0 + r < rows ? scale * load(row_at<const T>(a, b, h, row0 + r) + x) : 0.f;
    }
}

/* a value combined over the LANES threads of a row (a fixed tree: the same in each of them) */
template <class Op> __device__ float row_reduce(float v, Op op)
{
    for (int offset = 1; offset < LANES; offset *= 2)
        v = op(v, __shfl_xor_sync(ALL_LANES, v, offset));
    return v;
}
struct op_add {
    __device__ float operator()(float a, float b) const { return a + b; }
};

/* sum over x < n of a[x] * b[x] (rows in shared memory) */
__device__ float dot(const float *a, const float *b, int64_t n)
{
    float s = 0;
    for (int64_t x = 0; x < n; x++)
        s += a[x] * b[x];
    return s;
}

/* whether query i sees key j (both inside the call) */
__device__ bool visible(const attention_call &c, int64_t i, int64_t j)
{
    return i < c.lq && j < c.lk && !(c.p.causal && j > i);
}

/* the keys that rows i0.. of a query tile see: past them every weight is 0 */
__device__ int64_t keys_seen(const attention_call &c, int64_t i0)
{
    const int64_t last = (i0 + TILE < c.lq ? i0 + TILE : c.lq) - 1;
    return c.p.causal && last + 1 < c.lk ? last + 1 : c.lk;
}

/* out rows and lse of the query tile blockIdx.x = (b * H + h) * tiles + tile */
template <typename T> __global__ void __launch_bounds__(THREADS) forward_kernel(attention_call c)
{
    __shared__ float qs[TILE][PITCH], ks[TILE][PITCH], vs[TILE][PITCH]; // scaled q, k, v rows
    __shared__ float ws[TILE][TILE + 1];                                // the tile's weights
    const int64_t tiles = (c.lq + TILE - 1) / TILE, bh = blockIdx.x / tiles;
    const int64_t i0 = blockIdx.x % tiles * TILE, b = bh / c.heads, h = bh % c.heads;
    const int r = threadIdx.x / LANES, lane = threadIdx.x % LANES;
    const int64_t i = i0 + r;
    load_tile<T>(qs, c.q, b, h, i0, c.lq, c.d, (float)c.p.scale);
    float o[XPER] = {};
    float m = -INFINITY, l = 0;
    const float drop_scale = (float)(1.0 / (1.0 - c.p.dropout_p));
    for (int64_t j0 = 0, jend = keys_seen(c, i0); j0 < jend; j0 += TILE) {
        __syncthreads(); /* the last tile's keys are read */
        load_tile<T>(ks, c.k, b, h, j0, c.lk, c.d, 1.f);
        load_tile<T>(vs, c.v, b, h, j0, c.lk, c.dv, 1.f);
        __syncthreads();
        float s[PER], mx = -INFINITY;
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int col = lane + u * LANES;
            const int64_t j = j0 + col;
            s[u] = -INFINITY;
            if (visible(c, i, j)) {
                s[u] = dot(qs[r], ks[col], c.d);
                if (c.has_mask)
                    s[u] += (float)mask_add(c.mask, b, h, i, j);
            }
            mx = op_max()(mx, s[u]);
        }
        mx = row_reduce(mx, op_max());
        const float mnew = mx > m || mx != mx ? mx : m;
        /* while every key so far is masked the weights are 0 and nothing changes */
        const float alpha = mnew == -INFINITY ? 1.f
                            : m == -INFINITY  ? 0.f
                                              : (float)exp((double)(m - mnew));
        float sum = 0;
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int col = lane + u * LANES;
            const int64_t j = j0 + col;
            float e = mnew == -INFINITY ? 0.f : (float)exp((double)(s[u] - mnew));
            sum += e;
            if (c.p.dropout_p > 0 && visible(c, i, j))
                e = kept(c.p, ((uint64_t)bh * c.lq + i) * c.lk + j) ? e * drop_scale : 0.f;
            ws[r][col] = e;
        }
        l = l * alpha + row_reduce(sum, op_add());
        m = mnew;
        __syncwarp(); /* the row's weights are written by its own lanes */
#pragma unroll
        for (int k = 0; k < XPER; k++) {
            const int x = lane + k * LANES;
            float acc = o[k] * alpha;
            for (int col = 0; x < c.dv && col < TILE; col++)
                acc += ws[r][col] * vs[col][x];
            o[k] = acc;
        }
    }
    if (i >= c.lq)
        return;
    const bool any = l > 0 || l != l;
    const float inv = any ? 1.f / l : 0.f;
    T *out = row_at<T>(c.out, b, h, i);
#pragma unroll
    for (int k = 0; k < XPER; k++) {
        const int x = lane + k * LANES;
        if (x < c.dv)
            store(out + x, o[k] * inv);
    }
    if (lane == 0)
        ((float *)c.lse.data)[bh * c.lq + i] = any ? m + (float)log((double)l) : -INFINITY;
}

/* gq rows of the query tile blockIdx.x: scale * sum over the keys of ds(i, j) k_j */
template <typename T>
__global__ void __launch_bounds__(THREADS) grad_q_kernel(attention_call c, const float *delta)
{
    __shared__ float qs[TILE][PITCH], gos[TILE][PITCH]; // scaled q and gout rows
    __shared__ float ks[TILE][PITCH], vs[TILE][PITCH];
    __shared__ float ds[TILE][TILE + 1]; // the tile's score gradients
    const int64_t tiles = (c.lq + TILE - 1) / TILE, bh = blockIdx.x / tiles;
    const int64_t i0 = blockIdx.x % tiles * TILE, b = bh / c.heads, h = bh % c.heads;
    const int r = threadIdx.x / LANES, lane = threadIdx.x % LANES;
    const int64_t i = i0 + r;
    load_tile<T>(qs, c.q, b, h, i0, c.lq, c.d, (float)c.p.scale);
    load_tile<T>(gos, c.gout, b, h, i0, c.lq, c.dv, 1.f);
    const float lse = i < c.lq ? ((const float *)c.lse.data)[bh * c.lq + i] : -INFINITY;
    const float di = i < c.lq ? delta[bh * c.lq + i] : 0.f;
    float dq[XPER] = {};
    for (int64_t j0 = 0, jend = keys_seen(c, i0); j0 < jend; j0 += TILE) {
        __syncthreads();
        load_tile<T>(ks, c.k, b, h, j0, c.lk, c.d, 1.f);
        load_tile<T>(vs, c.v, b, h, j0, c.lk, c.dv, 1.f);
        __syncthreads();
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const int col = lane + u * LANES;
            const int64_t j = j0 + col;
            float g = 0, pw;
            if (lse != -INFINITY && visible(c, i, j)) { /* a row that sees no key has none */
                float s = dot(qs[r], ks[col], c.d);
                if (c.has_mask)
                    s += (float)mask_add(c.mask, b, h, i, j);
                g = score_grad(c, s, lse, dot(gos[r], vs[col], c.dv), di,
                               ((uint64_t)bh * c.lq + i) * c.lk + j, &pw);
            }
            ds[r][col] = g;
        }
        __syncwarp();
#pragma unroll
        for (int k = 0; k < XPER; k++) {
            const int y = lane + k * LANES;
            float acc = dq[k];
            for (int col = 0; y < c.d && col < TILE; col++)
                acc += ds[r][col] * ks[col][y];
            dq[k] = acc;
        }
    }
    if (i >= c.lq)
        return;
    T *gq = row_at<T>(c.gq, b, h, i);
#pragma unroll
    for (int k = 0; k < XPER; k++) {
        const int y = lane + k * LANES;
        if (y < c.d)
            store(gq + y, dq[k] * (float)c.p.scale);
    }
}

/* gk and gv rows of the key tile blockIdx.x: sums over the queries that see each key of
 * ds(i, j) scale q_i and of the dropped weight times gout_i */
template <typename T>
__global__ void __launch_bounds__(THREADS) grad_kv_kernel(attention_call c, const float *delta)
{
    __shared__ float ks[TILE][PITCH], vs[TILE][PITCH];
    __shared__ float qs[TILE][PITCH], gos[TILE][PITCH]; // scaled q and gout rows
    __shared__ float ws[TILE][TILE + 1], ds[TILE][TILE + 1]; // [key][query]: weights, gradients
    __shared__ float lses[TILE], deltas[TILE];
    const int64_t tiles = (c.lk + TILE - 1) / TILE, bh = blockIdx.x / tiles;
    const int64_t j0 = blockIdx.x % tiles * TILE, b = bh / c.heads, h = bh % c.heads;
    const int r = threadIdx.x / LANES, lane = threadIdx.x % LANES;
    const int64_t j = j0 + r;
    load_tile<T>(ks, c.k, b, h, j0, c.lk, c.d, 1.f);
    load_tile<T>(vs, c.v, b, h, j0, c.lk, c.dv, 1.f);
    float gk[XPER] = {}, gv[XPER] = {};
    /* under the causal mask only queries i >= j see key j */
    for (int64_t i0 = c.p.causal ? j0 : 0; i0 < c.lq; i0 += TILE) {
        __syncthreads();
        load_tile<T>(qs, c.q, b, h, i0, c.lq, c.d, (float)c.p.scale);
        load_tile<T>(gos, c.gout, b, h, i0, c.lq, c.dv, 1.f);
        if (threadIdx.x < TILE) {
            const int64_t i = i0 + threadIdx.x;
            lses[threadIdx.x] = i < c.lq ? ((const float *)c.lse.data)[bh * c.lq + i] : -INFINITY;
            deltas[threadIdx.x] = i < c.lq ? delta[bh * c.lq + i] : 0.f;
        }
        __syncthreads();
        for (int u = 0; u < PER; u++) {
            const int row = lane + u * LANES;
            const int64_t i = i0 + row;
            float g = 0, p = 0;
            if (lses[row] != -INFINITY && visible(c, i, j)) {
                float s = dot(qs[row], ks[r], c.d);
                if (c.has_mask)
                    s += (float)mask_add(c.mask, b, h, i, j);
                g = score_grad(c, s, lses[row], dot(gos[row], vs[r], c.dv), deltas[row],
                               ((uint64_t)bh * c.lq + i) * c.lk + j, &p);
            }
            ws[r][row] = p;
            ds[r][row] = g;
        }
        __syncwarp();
#pragma unroll
        for (int k = 0; k < XPER; k++) {
            const int x = lane + k * LANES;
            float v = gv[k], g = gk[k];
            for (int row = 0; x < c.dv && row < TILE; row++)
                v += ws[r][row] * gos[row][x];
            for (int row = 0; x < c.d && row < TILE; row++)
                g += ds[r][row] * qs[row][x];
            gv[k] = v;
            gk[k] = g;
        }
    }
    if (j >= c.lk)
        return;
    T *gkr = row_at<T>(c.gk, b, h, j), *gvr = row_at<T>(c.gv, b, h, j);
#pragma unroll
    for (int k = 0; k < XPER; k++) {
        const int x = lane + k * LANES;
        if (x < c.d)
            store(gkr + x, gk[k]);
        if (x < c.dv)
            store(gvr + x, gv[k]);
    }
}

/* blocks of one tile of `rows` rows per (batch, head) */
unsigned tile_blocks(const attention_call &c, int64_t rows)
{
    return (unsigned)(c.q.shape[0] * c.heads * ((rows + TILE - 1) / TILE));
}

/* f(T{}) for the storage type of dt: f32, f16 or bf16 (no f64 kernels are built) */
template <typename F> int dispatch_tiled(em_dtype dt, F f)
{
    return dispatch_float(dt, [&](auto t) {
        if constexpr (std::is_same<decltype(t), double>::value)
            return (int)EM_KERNEL_UNSUPPORTED;
        else
            return f(t);
    });
}

} // namespace

bool tiled_attention_fits(em_dtype dt, int64_t d, int64_t dv)
{
    return (dt == EM_F32 || dt == EM_F16 || dt == EM_BF16) && d <= TILED_MAX_DIM &&
           dv <= TILED_MAX_DIM;
}

int tiled_attention(const attention_call &c, em_dtype dt)
{
    return dispatch_tiled(dt, [&](auto t) {
        typedef decltype(t) T;
        forward_kernel<T><<<tile_blocks(c, c.lq), THREADS, 0, em_cuda_launch_stream()>>>(c);
        return em_cuda_launch_status();
    });
}

int tiled_attention_grad(const attention_call &c, em_dtype dt, const float *delta)
{
    return dispatch_tiled(dt, [&](auto t) {
        typedef decltype(t) T;
        int rc = EM_KERNEL_OK;
        if (tile_blocks(c, c.lq) > 0) {
            grad_q_kernel<T><<<tile_blocks(c, c.lq), THREADS, 0, em_cuda_launch_stream()>>>(
                c, delta);
            rc = em_cuda_launch_status();
        }
        if (rc == EM_KERNEL_OK && tile_blocks(c, c.lk) > 0) {
            grad_kv_kernel<T><<<tile_blocks(c, c.lk), THREADS, 0, em_cuda_launch_stream()>>>(
                c, delta);
            rc = em_cuda_launch_status();
        }
        return rc;
    });
}
