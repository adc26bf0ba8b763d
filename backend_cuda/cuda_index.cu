/* CUDA indexing kernels on strided views, with backend_cpu/cpu_index.c's semantics: index_select
 * and gather (any dtype) move elements; index_add and scatter_add (float dtypes) add each output
 * element's contributions in index order, rounding after each add as the CPU does, so the sums
 * are the CPU's bits and the same on every run (no float atomics). Index arrays are i64 on the
 * device, validated there: an index outside its dimension raises the device index flag and
 * nothing is read or written for it.
 *
 * The adds go through a stable radix sort (CUB, part of the CUDA toolkit) of the entries by
 * their index: the entries that meet one output element end up side by side, still in index
 * order, and one thread adds each such run. scatter (assignment, any dtype) sorts the same way
 * and writes the last entry of each run: the last along dim wins, as on the CPU. */
#define CCCL_DISABLE_NVTX
#include <cub/device/device_radix_sort.cuh>

#include "backend/kernel_args_internal.h"
#include "backend_cuda/cuda_strided_internal.cuh"

using namespace em_cuda;

namespace {

/* Records a bad index for kernel code (the first raised is kept). */
__device__ __forceinline__ void raise_bad_index(int *flag, int code)
{
    atomicCAS(flag, 0, code);
}

/* ---- index_select and gather: out[pos] = in[pos with dim's coordinate = idx[pos]] ---- */

/* data: out, in (with stride 0 along dim), idx (i64, 0 along the dims it does not vary on) */
template <class R>
__global__ void __launch_bounds__(BLOCK)
    gather_kernel(uint32_t n, strided<3> it, base_ptrs<3> data, int64_t in_step, int64_t bound,
                  int code, int *flag)
{
#pragma unroll 1
    for (uint32_t i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) {
        uint32_t off[3];
        it.offsets(i, off);
        const int64_t k = ((const int64_t *)data.p[2])[off[2]];
        if (k < 0 || k >= bound) {
            raise_bad_index(flag, code);
            continue;
        }
        ((R *)data.p[0])[off[0]] = ((const R *)data.p[1])[off[1] + k * in_step];
    }
}

/* out = in gathered along dim by idx (an i64 view of out's shape). */
int gather_run(const em_arr *out, const em_arr *in, int dim, const em_arr *idx, int code)
{
    em_arr in_rest = *in; /* in without dim: the index supplies that coordinate */
    in_rest.strides[dim] = 0;
    const em_arr *ops[3] = {out, &in_rest, idx};
    em_iter l;
    em_iter_init(&l, out->ndim, out->shape, 3, ops, 0);
    if (l.numel == 0)
        return EM_KERNEL_OK;
    int *flag = em_cuda_index_flag();
    if (!flag)
        return EM_KERNEL_FAILED;
    return dispatch_raw(em_dtype_size(out->dtype), [&](auto tag) {
        typedef typename decltype(tag)::storage R;
        auto launch = [&](const strided<3> &it, uint32_t n, char *const *d) {
            base_ptrs<3> p = {{d[0], d[1], d[2]}};
            gather_kernel<R><<<grid_for(n, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
                n, it, p, in->strides[dim], in->shape[dim], code, flag);
            return em_cuda_launch_status();
        };
        return for_each_piece<3>(l, launch);
    });
}

/* An i64 view of a 1-D index of shape's dim entries that every other dim of shape broadcasts. */
em_arr index_along(const em_arr *idx, int ndim, const int64_t *shape, int dim)
{
    em_arr v = *idx;
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = d == dim ? idx->strides[0] : 0;
    }
    return v;
}

/* ---- index_add and scatter_add: out[.., idx, ..] += src[.., j, ..] in order of j ----
 * The entries are the src elements' indices in line order: a line is one position of the dims
 * before dim (pre) and after it (post); entry e = line * n + j for the n positions j along dim.
 * index_add has one index list for every line: its entries are the n indices alone. */

struct lines {
    uint64_t n;          /* positions along dim */
    uint64_t post;       /* positions of the dims after dim */
    dim_div n_div, post_div;
    strided64<3> pre_off, post_off; /* offsets of out, src, idx over the dims before / after dim */
    int64_t step[3];     /* strides along dim of out, src, idx */
};

/* g over src's shape with operands out, src, idx (each with src's rank). */
void lines_init(lines *g, const em_arr *out, const em_arr *src, const em_arr *idx, int dim)
{
    const em_arr *ops[3] = {out, src, idx};
    int64_t pre_shape[EM_MAX_DIMS], post_shape[EM_MAX_DIMS];
    for (int d = 0; d < src->ndim; d++) {
        pre_shape[d] = d < dim ? src->shape[d] : 1;
        post_shape[d] = d > dim ? src->shape[d] : 1;
    }
    em_iter pre, post;
    em_iter_init(&pre, src->ndim, pre_shape, 3, ops, 0);
    em_iter_init(&post, src->ndim, post_shape, 3, ops, 0);
    g->n = (uint64_t)src->shape[dim];
    g->post = (uint64_t)post.numel;
    g->n_div.init(g->n > 0 ? g->n : 1);
    g->post_div.init(g->post > 0 ? g->post : 1);
    g->pre_off.init(&pre);
    g->post_off.init(&post);
    for (int k = 0; k < 3; k++)
        g->step[k] = ops[k]->strides[dim];
}

/* Offsets (out, src, idx) of line's position 0 along dim. */
__device__ __forceinline__ void line_offsets(const lines &g, uint64_t line, int64_t *off)
{
    const uint64_t p = g.post_div.div(line);
    int64_t a[3], b[3];
    g.pre_off.offsets(p, a);
    g.post_off.offsets(line - p * g.post, b);
    for (int k = 0; k < 3; k++)
        off[k] = a[k] + b[k];
}

/* key (entries) = entry e's index, or bound for one outside [0, bound) (flagged); val = e. */
__global__ void __launch_bounds__(BLOCK)
    keys_kernel(lines g, uint64_t entries, const int64_t *idx, int64_t bound, int code,
                int *flag, uint32_t *key, uint32_t *val)
{
#pragma unroll 1
    for (uint64_t e = (uint64_t)blockIdx.x * BLOCK + threadIdx.x; e < entries;
         e += (uint64_t)gridDim.x * BLOCK) {
        const uint64_t line = g.n_div.div(e);
        int64_t off[3];
        line_offsets(g, line, off);
        const int64_t k = idx[off[2] + (int64_t)(e - line * g.n) * g.step[2]];
        const bool ok = k >= 0 && k < bound;
        if (!ok)
            raise_bad_index(flag, code);
        key[e] = ok ? (uint32_t)k : (uint32_t)bound;
        val[e] = (uint32_t)e;
    }
}

/* Threads over (sorted entry s, repeat r); the thread at the start of a run of entries with one
 * key on one line adds the run's src elements, in entry order, to out at that key. A run's line
 * is its entries' own (scatter_add: one repeat) or the repeat itself (index_add: one index list
 * serves all pre * post lines, and val is j). */
template <class T>
__global__ void __launch_bounds__(BLOCK)
    add_runs_kernel(lines g, uint64_t entries, dim_div repeat, bool own_lines,
                    const uint32_t *key, const uint32_t *val, uint32_t bound,
                    const typename T::storage *src, typename T::storage *out)
{
    typedef typename T::compute C;
    const uint64_t total = entries * repeat.d;
#pragma unroll 1
    for (uint64_t t = (uint64_t)blockIdx.x * BLOCK + threadIdx.x; t < total;
         t += (uint64_t)gridDim.x * BLOCK) {
        const uint64_t s = repeat.div(t);
        const uint32_t x = key[s];
        if (x == bound)
            continue;
        const uint64_t line = own_lines ? g.n_div.div(val[s]) : t - s * repeat.d;
        if (s > 0 && key[s - 1] == x && (!own_lines || g.n_div.div(val[s - 1]) == line))
            continue; /* not the first entry of its run */
        int64_t off[3];
        line_offsets(g, line, off);
        typename T::storage *dst = out + off[0] + (int64_t)x * g.step[0];
        C acc = T::load(*dst);
        for (uint64_t u = s; u < entries && key[u] == x; u++) {
            const uint64_t e = val[u];
            if (own_lines && g.n_div.div(e) != line)
                break;
            const uint64_t j = own_lines ? e - line * g.n : e;
            acc = T::load(T::store(acc + T::load(src[off[1] + (int64_t)j * g.step[1]])));
        }
        *dst = T::store(acc);
    }
}

/* Threads over sorted entries s (scatter: each entry its own line's); the last entry of a run
 * of one key on one line writes its src element to out at that key. */
template <class R>
__global__ void __launch_bounds__(BLOCK)
    assign_last_kernel(lines g, uint64_t entries, const uint32_t *key, const uint32_t *val,
                       uint32_t bound, const R *src, R *out)
{
#pragma unroll 1
    for (uint64_t s = (uint64_t)blockIdx.x * BLOCK + threadIdx.x; s < entries;
         s += (uint64_t)gridDim.x * BLOCK) {
        const uint32_t x = key[s];
        const uint64_t line = g.n_div.div(val[s]);
        if (x == bound ||
            (s + 1 < entries && key[s + 1] == x && g.n_div.div(val[s + 1]) == line))
            continue; /* a bad index, or not the last entry of its run */
        int64_t off[3];
        line_offsets(g, line, off);
        const uint64_t j = val[s] - line * g.n;
        out[off[0] + (int64_t)x * g.step[0]] = src[off[1] + (int64_t)j * g.step[1]];
    }
}

/* The runs of sorted entries applied to out: added (index_add, scatter_add) or assigned. */
int apply_runs(const em_arr *out, const em_arr *src, const lines &g, uint64_t entries,
               dim_div repeat, bool one_list, bool assign, const uint32_t *key,
               const uint32_t *val, uint32_t bound)
{
    if (assign)
        return dispatch_raw(em_dtype_size(out->dtype), [&](auto tag) {
            typedef typename decltype(tag)::storage R;
            assign_last_kernel<R><<<grid_for((int64_t)entries, BLOCK), BLOCK, 0,
                                    em_cuda_launch_stream()>>>(g, entries, key, val, bound,
                                                        (const R *)src->data, (R *)out->data);
            return em_cuda_launch_status();
        });
    return dispatch_float(out->dtype, [&](auto tag) {
        typedef decltype(tag) T;
        typedef typename T::storage S;
        add_runs_kernel<T><<<grid_for((int64_t)(entries * repeat.d), BLOCK), BLOCK, 0,
                             em_cuda_launch_stream()>>>(g, entries, repeat, !one_list, key, val,
                                                        bound, (const S *)src->data,
                                                        (S *)out->data);
        return em_cuda_launch_status();
    });
}

/* out += src (out = src when assign) along dim by the i64 indices of idx (a view with src's
 * rank): one list of src.shape[dim] indices for every line (index_add), or one index per src
 * element (scatter_add, scatter). The entries' keys are sorted when there are several. */
int write_by_index(const em_arr *out, int dim, const em_arr *idx, const em_arr *src,
                 bool one_list, bool assign, int code)
{
    const int64_t bound = out->shape[dim];
    lines g;
    lines_init(&g, out, src, idx, dim);
    const uint64_t entries = one_list ? g.n : (uint64_t)em_arr_numel(src);
    if (entries == 0)
        return EM_KERNEL_OK;
    if (entries >= ((uint64_t)1 << 31) || bound >= ((int64_t)1 << 31))
        return EM_KERNEL_UNSUPPORTED; /* entries and keys are 32-bit */
    const uint64_t nrepeat = one_list ? (uint64_t)em_arr_numel(src) / g.n : 1;
    dim_div repeat; /* threads per sorted entry: the lines of one list, else 1 */
    repeat.init(nrepeat > 0 ? nrepeat : 1);
    int *flag = em_cuda_index_flag();
    if (!flag)
        return EM_KERNEL_FAILED;
    int bits = 1; /* key bits: up to bound, the key of a bad index */
    while (bits < 32 && ((uint64_t)1 << bits) <= (uint64_t)bound)
        bits++;
    size_t sort_bytes = 0;
    if (entries > 1 && cub::DeviceRadixSort::SortPairs(
                           NULL, sort_bytes, (const uint32_t *)NULL, (uint32_t *)NULL,
                           (const uint32_t *)NULL, (uint32_t *)NULL, (int)entries, 0, bits,
                           em_cuda_stream()) != cudaSuccess)
        return EM_KERNEL_FAILED;
    const size_t list = (entries * sizeof(uint32_t) + 255) / 256 * 256;
    const size_t bytes = 4 * list + sort_bytes;
    char *scratch = (char *)em_cuda_scratch(bytes);
    if (!scratch)
        return EM_KERNEL_FAILED;
    uint32_t *key = (uint32_t *)scratch, *val = (uint32_t *)(scratch + list);
    uint32_t *key_sorted = (uint32_t *)(scratch + 2 * list);
    uint32_t *val_sorted = (uint32_t *)(scratch + 3 * list);
    keys_kernel<<<grid_for((int64_t)entries, BLOCK), BLOCK, 0, em_cuda_launch_stream()>>>(
        g, entries, (const int64_t *)idx->data, bound, code, flag, key, val);
    int rc = em_cuda_launch_status();
    if (rc == EM_KERNEL_OK && entries > 1) {
        rc = em_cuda_status(cub::DeviceRadixSort::SortPairs(
            scratch + 4 * list, sort_bytes, key, key_sorted, val, val_sorted, (int)entries, 0,
            bits, em_cuda_launch_stream()));
        key = key_sorted;
        val = val_sorted;
    }
    if (rc == EM_KERNEL_OK && nrepeat > 0)
        rc = apply_runs(out, src, g, entries, repeat, one_list, assign, key, val,
                        (uint32_t)bound);
    em_cuda_scratch_free(scratch, bytes);
    return rc;
}

bool index_list_ok(const em_arr *idx, int64_t n)
{
    return idx->dtype == EM_I64 && idx->ndim == 1 && idx->shape[0] == n;
}

} // namespace

/* out = in with dim replaced by idx (1-D i64, out.shape[dim] entries) */
extern "C" int em_cuda_index_select(const em_arr *out, const em_arr *in, int dim,
                                    const em_arr *idx)
{
    if (!em_index_views_match(out, in, dim) || !index_list_ok(idx, out->shape[dim]))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr along = index_along(idx, out->ndim, out->shape, dim);
    return gather_run(out, in, dim, &along, EM_CUDA_INDEX_SELECT);
}

/* out[.., idx[i], ..] += src[.., i, ..] along dim (idx 1-D i64, src.shape[dim] entries) */
extern "C" int em_cuda_index_add(const em_arr *out, int dim, const em_arr *idx, const em_arr *src)
{
    if (!em_index_views_match(out, src, dim) || !em_dtype_is_float(out->dtype) ||
        !index_list_ok(idx, src->shape[dim]))
        return EM_KERNEL_UNSUPPORTED;
    const em_arr along = index_along(idx, src->ndim, src->shape, dim);
    return write_by_index(out, dim, &along, src, true, false, EM_CUDA_INDEX_ADD);
}

/* out[i][j] = in[i][idx[i][j]] along dim (idx i64 of out's shape) */
extern "C" int em_cuda_gather(const em_arr *out, const em_arr *in, int dim, const em_arr *idx)
{
    if (!em_gather_views_ok(out, in, idx, dim))
        return EM_KERNEL_UNSUPPORTED;
    return gather_run(out, in, dim, idx, EM_CUDA_GATHER);
}

/* out[i][idx[i][j]] += src[i][j] along dim (idx i64 of src's shape) */
extern "C" int em_cuda_scatter_add(const em_arr *out, int dim, const em_arr *idx,
                                   const em_arr *src)
{
    if (!em_gather_views_ok(src, out, idx, dim) || !em_dtype_is_float(out->dtype))
        return EM_KERNEL_UNSUPPORTED;
    return write_by_index(out, dim, idx, src, false, false, EM_CUDA_SCATTER_ADD);
}

/* out[i][idx[i][j]] = src[i][j] along dim (idx i64 of src's shape); the last j wins */
extern "C" int em_cuda_scatter(const em_arr *out, int dim, const em_arr *idx, const em_arr *src)
{
    if (!em_gather_views_ok(src, out, idx, dim))
        return EM_KERNEL_UNSUPPORTED;
    return write_by_index(out, dim, idx, src, false, true, EM_CUDA_SCATTER);
}
