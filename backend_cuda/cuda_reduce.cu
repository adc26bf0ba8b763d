/* Reductions on CUDA: sum, mean, prod, max/min, argmax/argmin and var over any set of dims, with
 * the folds of backend/reduce_ops_internal.h that the CPU kernels run too (floats accumulate in
 * double, integers in i64 wrapping, NaN wins max/min, the first index wins arg ties) and
 * deterministic results: the launch shape depends only on the shapes, every thread folds fixed
 * positions in order and partial results combine in a fixed tree (no atomics).
 *
 * The input is seen as K outputs (the kept dims) by R reduced positions. A block serves several
 * outputs: in row mode (reduced dims innermost in memory) lanes along x share an output's
 * positions and outputs go along y; in column mode (kept dims innermost) outputs go along x, so
 * neighbouring threads read neighbouring elements, and lanes along y share the positions. When
 * there are few outputs and many positions, blockIdx.y cuts the positions into chunks whose
 * partial results a second kernel combines in chunk order. */
#include "backend/kernel_args_internal.h"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

const int RBLOCK = 256; /* threads per reduction block */

/* A reduction's geometry (a kernel argument). */
struct red_shape {
    uint64_t K, R;      /* outputs, reduced positions per output */
    uint64_t chunk;     /* positions per blockIdx.y */
    strided64<2> kept;  /* output o: input offset [0], output offset [1] */
    strided64<1> red;   /* position r: input offset from the output's */
    bool rows;          /* row mode: lanes along x; column mode: lanes along y */
    bool linear_out;    /* output o at element o (the mean of var), else at the kept strides */
    em_dtype out_dt;
    int64_t out_elsize;
    double div;         /* float results are divided by this (mean: R; var: R - correction) */
};

/* Input and output offsets of output o. */
__device__ __forceinline__ void kept_offsets(const red_shape &s, uint64_t o, int64_t *in_off,
                                             int64_t *out_off)
{
    int64_t off[2];
    s.kept.offsets(o, off);
    *in_off = off[0];
    *out_off = s.linear_out ? (int64_t)o : off[1];
}

/* em_store_f64's rule: float dtypes from double (f16/bf16 through f32). */
__device__ void store_f64_as(em_dtype dt, char *p, double v)
{
    switch (dt) {
    case EM_F32: *(float *)p = tag_f32::from_f64(v); break;
    case EM_F64: *(double *)p = v; break;
    case EM_F16: *(uint16_t *)p = tag_f16::from_f64(v); break;
    default: *(uint16_t *)p = tag_bf16::from_f64(v); break; /* EM_BF16 */
    }
}

/* em_store_i64's rule: integers wrap like C casts, bool is != 0. */
__device__ void store_i64_as(em_dtype dt, char *p, int64_t v)
{
    switch (dt) {
    case EM_I8: *(int8_t *)p = tag_i8::store(v); break;
    case EM_U8: *(uint8_t *)p = tag_u8::store(v); break;
    case EM_I32: *(int32_t *)p = tag_i32::store(v); break;
    case EM_I64: *(int64_t *)p = v; break;
    default: *(uint8_t *)p = tag_bool::store(v); break; /* EM_BOOL */
    }
}

/* ---- the reduction kinds, from the folds of reduce_ops_internal.h: accumulator, identity, fold
 * of one element, combination of two partial results (the earlier first), and the stored
 * result ---- */

__device__ __forceinline__ double identity(em_fold k, double) { return em_fold_identity_f(k); }
__device__ __forceinline__ int64_t identity(em_fold k, int64_t) { return em_fold_identity_i(k); }
__device__ __forceinline__ double step(em_fold k, double a, double x, double mean)
{
    return em_fold_step_f(k, a, x, mean);
}
__device__ __forceinline__ int64_t step(em_fold k, int64_t a, int64_t x, double)
{
    return em_fold_step_i(k, a, x);
}
__device__ __forceinline__ double combination(em_fold k, double a, double b)
{
    return em_fold_combine_f(k, a, b);
}
__device__ __forceinline__ int64_t combination(em_fold k, int64_t a, int64_t b)
{
    return em_fold_step_i(k, a, b);
}
__device__ __forceinline__ bool arg_better(bool max, double x, int64_t pos, double v, int64_t at)
{
    return em_fold_arg_better_f(max, x, pos, v, at);
}
__device__ __forceinline__ bool arg_better(bool max, int64_t x, int64_t pos, int64_t v,
                                           int64_t at)
{
    return em_fold_arg_better_i(max, x, pos, v, at);
}

/* Fold K of values V: double for float inputs (stored divided by s.div), int64_t for integers. */
template <int K, class V> struct value_kind {
    typedef V acc;
    static __device__ acc init() { return identity((em_fold)K, V()); }
    static __device__ acc fold(acc a, V x, int64_t, double mean)
    {
        return step((em_fold)K, a, x, mean);
    }
    static __device__ acc combine(acc a, acc b) { return combination((em_fold)K, a, b); }
    static __device__ void store(const red_shape &s, char *p, acc a)
    {
        if constexpr (std::is_floating_point<V>::value)
            store_f64_as(s.out_dt, p, a / s.div);
        else
            store_i64_as(s.out_dt, p, a);
    }
};

/* argmax/argmin (K): the best value and its position; em_fold_arg_better is a total order, so
 * the first NaN, else the first extreme value, wins however the partial results meet: the CPU's
 * sequential answer. */
template <int K, class V> struct arg_kind {
    struct acc {
        V v;
        int64_t i;
    };
    static __device__ acc init()
    {
        acc a;
        a.v = identity((em_fold)K, V());
        a.i = EM_ARG_NONE;
        return a;
    }
    static __device__ acc fold(acc a, V x, int64_t pos, double)
    {
        acc b;
        b.v = x;
        b.i = pos;
        return combine(a, b);
    }
    static __device__ acc combine(acc a, acc b)
    {
        return arg_better(K == EM_FOLD_ARGMAX, b.v, b.i, a.v, a.i) ? b : a;
    }
    static __device__ void store(const red_shape &, char *p, acc a) { *(int64_t *)p = a.i; }
};

/* The kind of fold K over V. */
template <int K, class V> struct kind : value_kind<K, V> {
};
template <class V> struct kind<EM_FOLD_ARGMAX, V> : arg_kind<EM_FOLD_ARGMAX, V> {
};
template <class V> struct kind<EM_FOLD_ARGMIN, V> : arg_kind<EM_FOLD_ARGMIN, V> {
};

/* Folds the block's lanes of each output into lane 0's result, pairwise in a fixed tree. */
template <class Kind>
__device__ typename Kind::acc block_combine(typename Kind::acc a, typename Kind::acc *buf,
                                            int lane, int lanes, bool rows)
{
    const int me = threadIdx.y * blockDim.x + threadIdx.x;
    const int step = rows ? 1 : blockDim.x; /* buf distance between neighbouring lanes */
    buf[me] = a;
    __syncthreads();
    for (int h = lanes / 2; h > 0; h /= 2) {
        if (lane < h)
            buf[me] = Kind::combine(buf[me], buf[me + h * step]);
        __syncthreads();
    }
    return buf[me - lane * step];
}

/* out (K outputs at the kept strides) or partial (gridDim.y, K) = the reduction of in over each
 * output's chunk blockIdx.y of positions; mean (K, f64) feeds sqdev_f, else NULL. */
template <class In, class Kind>
__global__ void __launch_bounds__(RBLOCK)
    reduce_kernel(red_shape s, const typename In::storage *in, const double *mean, char *out,
                  typename Kind::acc *partial)
{
    typedef typename Kind::acc acc;
    __shared__ acc buf[RBLOCK];
    const int lanes = s.rows ? blockDim.x : blockDim.y;
    const int lane = s.rows ? threadIdx.x : threadIdx.y;
    const uint64_t o = s.rows ? (uint64_t)blockIdx.x * blockDim.y + threadIdx.y
                              : (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t r0 = (uint64_t)blockIdx.y * s.chunk;
    const uint64_t r1 = s.R < r0 + s.chunk ? s.R : r0 + s.chunk;
    acc a = Kind::init();
    int64_t in_off = 0, out_off = 0;
    if (o < s.K) {
        kept_offsets(s, o, &in_off, &out_off);
        const double m = mean ? mean[o] : 0;
        for (uint64_t r = r0 + lane; r < r1; r += lanes) {
            int64_t off;
            s.red.offsets(r, &off);
            a = Kind::fold(a, In::load(in[in_off + off]), (int64_t)r, m);
        }
    }
    a = block_combine<Kind>(a, buf, lane, lanes, s.rows);
    if (lane != 0 || o >= s.K)
        return;
    if (gridDim.y == 1)
        Kind::store(s, out + out_off * s.out_elsize, a);
    else
        partial[blockIdx.y * s.K + o] = a;
}

const int FIN_LANES = 32, FIN_OUTS = RBLOCK / FIN_LANES;

/* out = the combination of partial (nchunk, K) over chunks, in chunk order per lane and a fixed
 * tree across lanes. */
template <class Kind>
__global__ void __launch_bounds__(RBLOCK)
    finish_kernel(red_shape s, const typename Kind::acc *partial, uint64_t nchunk, char *out)
{
    typedef typename Kind::acc acc;
    __shared__ acc buf[RBLOCK];
    const uint64_t o = (uint64_t)blockIdx.x * FIN_OUTS + threadIdx.y;
    acc a = Kind::init();
    if (o < s.K)
        for (uint64_t c = threadIdx.x; c < nchunk; c += FIN_LANES)
            a = Kind::combine(a, partial[c * s.K + o]);
    a = block_combine<Kind>(a, buf, threadIdx.x, FIN_LANES, true);
    if (threadIdx.x != 0 || o >= s.K)
        return;
    int64_t in_off, out_off;
    kept_offsets(s, o, &in_off, &out_off);
    Kind::store(s, out + out_off * s.out_elsize, a);
}

/* A reduction planned on the host: the geometry and the launch shape. */
struct plan {
    red_shape s;
    dim3 block, grid;
    const char *in;
};

/* Plans out = reduce(in): kept dims walked in the input's memory order, reduced dims too (in
 * row-major order for arg ops, whose positions count that way); row mode unless the kept dims
 * are the finer ones in memory; a grid with enough blocks to fill the device, cut by shape only. */
void make_plan(plan *p, const em_arr *out, const em_arr *in, bool arg)
{
    int64_t kshape[EM_MAX_DIMS], rshape[EM_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) {
        const bool reduced = out->shape[d] != in->shape[d];
        kshape[d] = reduced ? 1 : in->shape[d];
        rshape[d] = reduced ? in->shape[d] : 1;
    }
    const em_arr *kops[2] = {in, out};
    em_iter kept, red;
    em_iter_init(&kept, in->ndim, kshape, 2, kops, 0);
    em_iter_init(&red, in->ndim, rshape, 1, kops, arg ? EM_ITER_KEEP_ORDER : 0);
    red_shape &s = p->s;
    s.K = (uint64_t)kept.numel;
    s.R = (uint64_t)red.numel;
    s.kept.init(&kept);
    s.red.init(&red);
    s.out_dt = out->dtype;
    s.out_elsize = (int64_t)em_dtype_size(out->dtype);
    s.linear_out = false;
    s.div = 1;
    p->in = (const char *)in->data;

    const int64_t ks = kept.strides[0][kept.ndim - 1], rs = red.strides[0][red.ndim - 1];
    s.rows = !(s.K > 1 && s.R > 1 && ks < rs);
    const int64_t K = (int64_t)s.K, R = (int64_t)(s.R > 0 ? s.R : 1);
    int bx, by, lanes;
    if (s.rows) {
        bx = (int)(R < RBLOCK ? pow2_ceil(R) : RBLOCK);
        by = (int)(K < RBLOCK / bx ? pow2_ceil(K) : RBLOCK / bx);
        lanes = bx;
    } else {
        by = (int)(R < 8 ? pow2_ceil(R) : 8);
        bx = (int)(K < RBLOCK / by ? pow2_ceil(K) : RBLOCK / by);
        by = (int)(R < RBLOCK / bx ? pow2_ceil(R) : RBLOCK / bx);
        lanes = by;
    }
    const int64_t outs = s.rows ? by : bx;
    const int64_t blocks = (K + outs - 1) / outs;
    int64_t chunks = 1;
    if (blocks < 256 && R > (int64_t)lanes * 64) { /* few blocks, long rows: cut the rows */
        chunks = (R + (int64_t)lanes * 32 - 1) / ((int64_t)lanes * 32);
        const int64_t want = (512 + blocks - 1) / blocks;
        chunks = chunks < want ? chunks : want;
    }
    s.chunk = (uint64_t)((R + chunks - 1) / chunks);
    chunks = (R + (int64_t)s.chunk - 1) / (int64_t)s.chunk;
    p->block = dim3(bx, by);
    p->grid = dim3((unsigned)blocks, (unsigned)chunks);
}

/* Runs the planned reduction of kind Kind over input dtype In into out (mean: K f64, or NULL). */
template <class In, class Kind> int run(const plan &p, char *out, const double *mean)
{
    typedef typename Kind::acc acc;
    const typename In::storage *in = (const typename In::storage *)p.in;
    if (p.grid.y == 1) {
        reduce_kernel<In, Kind><<<p.grid, p.block, 0, em_cuda_launch_stream()>>>(p.s, in, mean, out,
                                                                           NULL);
        return em_cuda_launch_status();
    }
    const size_t bytes = (size_t)p.grid.y * p.s.K * sizeof(acc);
    acc *partial = (acc *)em_cuda_scratch(bytes);
    if (!partial)
        return EM_KERNEL_FAILED;
    reduce_kernel<In, Kind><<<p.grid, p.block, 0, em_cuda_launch_stream()>>>(p.s, in, mean, out,
                                                                       partial);
    const unsigned blocks = (unsigned)((p.s.K + FIN_OUTS - 1) / FIN_OUTS);
    finish_kernel<Kind><<<blocks, dim3(FIN_LANES, FIN_OUTS), 0, em_cuda_launch_stream()>>>(
        p.s, partial, p.grid.y, out);
    int rc = em_cuda_launch_status();
    em_cuda_scratch_free(partial, bytes);
    return rc;
}

/* A pass of fold K (run_kind) or k (run_fold) over input dtype In, accumulated in V (double or
 * int64_t). */
template <class In, class V, int K> int run_kind(const plan &p, char *out, const double *mean)
{
    if constexpr (K == EM_FOLD_SQDEV && !std::is_floating_point<V>::value)
        return EM_KERNEL_UNSUPPORTED; /* float only: VAR takes float inputs */
    else
        return run<In, kind<K, V>>(p, out, mean);
}

#define FOLD_CASE(K)                                                                              \
    case K: return run_kind<In, V, K>(p, out, mean);
template <class In, class V> int run_fold(em_fold k, const plan &p, char *out, const double *mean)
{
    switch (k) {
        EM_FOLDS(FOLD_CASE)
    }
    return EM_KERNEL_UNSUPPORTED; /* not a fold */
}

/* var: the means (K, f64) in a first pass, the squared deviations from them in a second (its
 * divisor already in p). */
template <class In> int run_var(plan p, const em_reduce_params *params, char *out)
{
    const size_t bytes = (size_t)p.s.K * sizeof(double);
    double *mean = (double *)em_cuda_scratch(bytes);
    if (!mean)
        return EM_KERNEL_FAILED;
    const red_shape var = p.s;
    p.s.out_dt = EM_F64;
    p.s.out_elsize = sizeof(double);
    p.s.linear_out = true;
    p.s.div = em_reduce_divisor(EM_REDUCE_MEAN, params, (int64_t)p.s.R);
    int rc = run_kind<In, double, EM_FOLD_SUM>(p, (char *)mean, NULL);
    p.s = var;
    if (rc == EM_KERNEL_OK)
        rc = run_kind<In, double, EM_FOLD_SQDEV>(p, out, mean);
    em_cuda_scratch_free(mean, bytes);
    return rc;
}

} // namespace

/* out (in's ndim, 1 on every reduced dim) = op over the reduced dims of in (any strides) */
extern "C" int em_cuda_reduce(em_reduce_op op, const em_reduce_params *params, const em_arr *out,
                              const em_arr *in)
{
    int64_t R;
    if (!em_reduce_args_ok(op, out, in, &R))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t K = em_arr_numel(out);
    if (K == 0)
        return EM_KERNEL_OK;
    if ((K + RBLOCK - 1) / RBLOCK >= ((int64_t)1 << 31))
        return EM_KERNEL_UNSUPPORTED; /* more blocks than a grid holds */
    const em_fold k = em_reduce_fold(op);
    plan p;
    make_plan(&p, out, in, em_fold_is_arg(k));
    p.s.div = em_reduce_divisor(op, params, R);
    char *o = (char *)out->data;
    return dispatch_dtype(in->dtype, [&](auto tag) {
        typedef decltype(tag) In;
        if constexpr (!std::is_floating_point<typename In::compute>::value)
            return run_fold<In, int64_t>(k, p, o, NULL);
        else if (k == EM_FOLD_SQDEV)
            return run_var<In>(p, params, o);
        else
            return run_fold<In, double>(k, p, o, NULL);
    });
}
