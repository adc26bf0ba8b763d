/* The grad scaler's, guards' and clipping's kernels on CUDA, over lists of arrays (cuda_list.cuh):
 * unscale in place while flagging inf/NaN, the per-array sums of |x|^p (or max |x|) in two
 * fixed-shape passes (chunk partials, then each array's partials in order), and the scaling of
 * clipping by a total norm the kernel takes from those sums: the same bits on every run, no
 * atomics, nothing read back to the host. */
#include <math.h>

#include "backend_cuda/cuda_list.cuh"

template <typename T, typename L>
__global__ void unscale_kernel(L c, T inv_scale, float *found_inf)
{
    const int a = blockIdx.y;
    T *g = (T *)c.data[a]; // (numel)
    bool bad = false;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c.numel[a];
         i += (int64_t)gridDim.x * blockDim.x) {
        bad |= !isfinite(g[i]);
        g[i] *= inv_scale;
    }
    if (bad)
        *found_inf = 1.0f; /* every writer writes the same value */
}

template <typename T>
static int unscale_launch(T inv_scale, const em_array_list *l, float *found_inf)
{
    return for_each_chunk(l, [&](const auto &c, dim3 grid, int) {
        unscale_kernel<T><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(c, inv_scale,
                                                                             found_inf);
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_unscale_check(em_dtype dt, double inv_scale, const em_array_list *l,
                                     float *found_inf)
{
    if (dt == EM_F32)
        return unscale_launch<float>((float)inv_scale, l, found_inf);
    if (dt == EM_F64)
        return unscale_launch<double>(inv_scale, l, found_inf);
    return EM_KERNEL_UNSUPPORTED;
}

#define NORM_CHUNK 65536 /* elements one block of the first pass sums */

/* |x|^p for p > 0 (x^2 and |x| without pow), combined by sum; for p = inf, max |x| with NaN
 * passed through */
struct pow_sum {
    double p;
    __device__ double term(double x) const
    {
        const double a = fabs(x);
        return p == 2 ? a * a : p == 1 ? a : isinf(p) ? a : pow(a, p);
    }
    __device__ double combine(double acc, double v) const
    {
        if (!isinf(p))
            return acc + v;
        return (v > acc || isnan(v)) && !isnan(acc) ? v : acc;
    }
};

/* The fixed tree of one block over part[LIST_THREADS]. */
__device__ double block_combine(double *part, pow_sum op)
{
    for (int half = LIST_THREADS / 2; half > 0; half /= 2) {
        __syncthreads();
        if ((int)threadIdx.x < half)
            part[threadIdx.x] = op.combine(part[threadIdx.x], part[threadIdx.x + half]);
    }
    __syncthreads();
    return part[0];
}

/* The chunks of an array of n elements (one for an empty array). */
__device__ __host__ static int64_t chunks_of(int64_t n)
{
    return n > 0 ? (n + NORM_CHUNK - 1) / NORM_CHUNK : 1;
}

/* Where array a's partials start: the chunks of the arrays before it. */
template <typename L> __device__ int64_t chunk_base(const L &c, int a)
{
    int64_t base = 0;
    for (int i = 0; i < a; i++)
        base += chunks_of(c.numel[i]);
    return base;
}

/* partials[chunk_base(a) + blockIdx.x] = the combination over chunk blockIdx.x of array a */
template <typename T, typename L>
__global__ void pow_sum_chunks(L c, pow_sum op, double *partials)
{
    __shared__ double part[LIST_THREADS];
    const int a = blockIdx.y;
    const T *x = (const T *)c.data[a]; // (numel)
    const int64_t start = (int64_t)blockIdx.x * NORM_CHUNK;
    if (blockIdx.x >= chunks_of(c.numel[a]))
        return;
    const int64_t end = start + NORM_CHUNK < c.numel[a] ? start + NORM_CHUNK : c.numel[a];
    double acc = 0;
    for (int64_t i = start + threadIdx.x; i < end; i += LIST_THREADS)
        acc = op.combine(acc, op.term((double)x[i]));
    part[threadIdx.x] = acc;
    const double total = block_combine(part, op);
    if (threadIdx.x == 0)
        partials[chunk_base(c, a) + blockIdx.x] = total;
}

/* out[a] = the combination of array a's partials in chunk order */
template <typename L> __global__ void pow_sum_arrays(L c, pow_sum op, const double *partials,
                                                     double *out)
{
    __shared__ double part[LIST_THREADS];
    const int a = blockIdx.x;
    const int64_t base = chunk_base(c, a), end = base + chunks_of(c.numel[a]);
    double acc = 0;
    for (int64_t i = base + threadIdx.x; i < end; i += LIST_THREADS)
        acc = op.combine(acc, partials[i]);
    part[threadIdx.x] = acc;
    const double total = block_combine(part, op);
    if (threadIdx.x == 0)
        out[a] = total;
}

/* One chunk of arrays; out has the chunk's n slots. */
template <typename T, typename L> static int pow_sums_chunk(pow_sum op, const L &c, double *out)
{
    int64_t partials_n = 0, most = 1;
    for (int a = 0; a < c.n; a++) {
        partials_n += chunks_of(c.numel[a]);
        most = chunks_of(c.numel[a]) > most ? chunks_of(c.numel[a]) : most;
    }
    const size_t bytes = (size_t)partials_n * sizeof(double);
    double *partials = (double *)em_cuda_scratch(bytes);
    if (!partials)
        return EM_KERNEL_FAILED;
    pow_sum_chunks<T><<<dim3((unsigned)most, (unsigned)c.n), LIST_THREADS, 0,
                        em_cuda_launch_stream()>>>(c, op, partials);
    pow_sum_arrays<<<(unsigned)c.n, LIST_THREADS, 0, em_cuda_launch_stream()>>>(c, op, partials,
                                                                               out);
    int rc = em_cuda_launch_status();
    em_cuda_scratch_free(partials, bytes);
    return rc;
}

template <typename T> static int pow_sums(pow_sum op, const em_array_list *l, double *out)
{
    return for_each_chunk(l, [&](const auto &c, dim3, int first) {
        return pow_sums_chunk<T>(op, c, out + first);
    });
}

extern "C" int em_cuda_norm_pow_sum(em_dtype dt, double p, const em_array_list *l, double *out)
{
    if (!(p > 0))
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        return pow_sums<float>(pow_sum{p}, l, out);
    if (dt == EM_F64)
        return pow_sums<double>(pow_sum{p}, l, out);
    return EM_KERNEL_UNSUPPORTED;
}

/* The total norm from the per-array sums, as em_grad_norm_from_sums (optim/) adds them. */
__device__ double total_norm(const double *sums, int n, double p)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        if (isinf(p))
            total = sums[i] > total || isnan(sums[i]) ? sums[i] : total;
        else
            total += sums[i];
    }
    return isinf(p) ? total : p == 2 ? sqrt(total) : pow(total, 1.0 / p);
}

/* Every element *= (T)coef where coef = max_norm / (total + 1e-6) is below 1 or NaN (clipping's
 * rule); the first block's first thread writes the total. */
template <typename T, typename L>
__global__ void clip_kernel(L c, const double *sums, int n_sums, double p, double max_norm,
                            double *total_out)
{
    __shared__ double total;
    if (threadIdx.x == 0)
        total = total_norm(sums, n_sums, p);
    __syncthreads();
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        *total_out = total;
    const double coef = max_norm / (total + 1e-6);
    if (!(coef < 1 || isnan(coef)))
        return;
    const int a = blockIdx.y;
    T *g = (T *)c.data[a]; // (numel)
    const T k = (T)coef;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c.numel[a];
         i += (int64_t)gridDim.x * blockDim.x)
        g[i] = g[i] * k;
}

template <typename T>
static int clip_launch(double p, double max_norm, const double *sums, int n_sums,
                       const em_array_list *l, double *total)
{
    return for_each_chunk(l, [&](const auto &c, dim3 grid, int) {
        clip_kernel<T><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(c, sums, n_sums, p,
                                                                          max_norm, total);
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_clip_grad_norm(em_dtype dt, double p, double max_norm, const double *sums,
                                      int n_sums, const em_array_list *l, double *total)
{
    if (!(p > 0) || l->n == 0)
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        return clip_launch<float>(p, max_norm, sums, n_sums, l, total);
    if (dt == EM_F64)
        return clip_launch<double>(p, max_norm, sums, n_sums, l, total);
    return EM_KERNEL_UNSUPPORTED;
}
