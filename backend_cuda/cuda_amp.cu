/* The grad scaler's and guards' kernels on CUDA, over lists of arrays: unscale in place while
 * flagging inf/NaN (one launch per LIST_MAX arrays), and the per-array sums of |x|^p (or max |x|)
 * in two fixed-shape passes (chunk partials, then each array's partials in order): the same bits
 * on every run, no atomics. */
#include <math.h>

#include "backend_cuda/cuda_list.cuh"

template <typename T> __global__ void unscale_kernel(list_chunk c, T inv_scale, float *found_inf)
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

extern "C" int em_cuda_unscale_check(em_dtype dt, double inv_scale, const em_array_list *l,
                                     float *found_inf)
{
    if (dt != EM_F32 && dt != EM_F64)
        return EM_KERNEL_UNSUPPORTED;
    for (int first = 0; first < l->n; first += LIST_MAX) {
        int64_t longest;
        list_chunk c = chunk_of_list(l, first, &longest);
        if (dt == EM_F32)
            unscale_kernel<float><<<list_grid(c, longest), LIST_THREADS, 0,
                                    em_cuda_launch_stream()>>>(c, (float)inv_scale, found_inf);
        else
            unscale_kernel<double><<<list_grid(c, longest), LIST_THREADS, 0,
                                     em_cuda_launch_stream()>>>(c, inv_scale, found_inf);
        int rc = em_cuda_launch_status();
        if (rc != EM_KERNEL_OK)
            return rc;
    }
    return EM_KERNEL_OK;
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

/* partials[chunk_base[a] + blockIdx.x] = the combination over chunk blockIdx.x of array a */
template <typename T>
__global__ void pow_sum_chunks(list_chunk c, const int64_t *chunk_base, pow_sum op,
                               double *partials)
{
    __shared__ double part[LIST_THREADS];
    const int a = blockIdx.y;
    const T *x = (const T *)c.data[a]; // (numel)
    const int64_t start = (int64_t)blockIdx.x * NORM_CHUNK;
    if (start >= c.numel[a] && !(start == 0 && c.numel[a] == 0))
        return;
    const int64_t end = start + NORM_CHUNK < c.numel[a] ? start + NORM_CHUNK : c.numel[a];
    double acc = 0;
    for (int64_t i = start + threadIdx.x; i < end; i += LIST_THREADS)
        acc = op.combine(acc, op.term((double)x[i]));
    part[threadIdx.x] = acc;
    const double total = block_combine(part, op);
    if (threadIdx.x == 0)
        partials[chunk_base[a] + blockIdx.x] = total;
}

/* out[a] = the combination of array a's partials in chunk order */
__global__ void pow_sum_arrays(int n, const int64_t *chunk_base, pow_sum op,
                               const double *partials, double *out)
{
    __shared__ double part[LIST_THREADS];
    const int a = blockIdx.x;
    double acc = 0;
    for (int64_t i = chunk_base[a] + threadIdx.x; i < chunk_base[a + 1]; i += LIST_THREADS)
        acc = op.combine(acc, partials[i]);
    part[threadIdx.x] = acc;
    const double total = block_combine(part, op);
    if (threadIdx.x == 0 && a < n)
        out[a] = total;
}

/* One chunk of at most LIST_MAX arrays; out has the chunk's n slots. */
static int pow_sums_chunk(em_dtype dt, pow_sum op, const list_chunk &c, double *out)
{
    int64_t base[LIST_MAX + 1] = {0}, most = 1;
    for (int a = 0; a < c.n; a++) {
        const int64_t chunks = c.numel[a] > 0 ? (c.numel[a] + NORM_CHUNK - 1) / NORM_CHUNK : 1;
        base[a + 1] = base[a] + chunks;
        most = chunks > most ? chunks : most;
    }
    const size_t bytes = (size_t)(LIST_MAX + 1) * sizeof(int64_t) +
                         (size_t)base[c.n] * sizeof(double);
    char *scratch = (char *)em_cuda_scratch(bytes);
    if (!scratch)
        return EM_KERNEL_FAILED;
    int64_t *chunk_base = (int64_t *)scratch;
    double *partials = (double *)(scratch + (LIST_MAX + 1) * sizeof(int64_t));
    int rc = em_cuda_status(cudaMemcpyAsync(chunk_base, base, sizeof base, cudaMemcpyHostToDevice,
                                            em_cuda_stream()));
    const dim3 grid((unsigned)most, (unsigned)c.n);
    if (rc == EM_KERNEL_OK && dt == EM_F32)
        pow_sum_chunks<float><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(
            c, chunk_base, op, partials);
    else if (rc == EM_KERNEL_OK)
        pow_sum_chunks<double><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(
            c, chunk_base, op, partials);
    if (rc == EM_KERNEL_OK)
        pow_sum_arrays<<<(unsigned)c.n, LIST_THREADS, 0, em_cuda_launch_stream()>>>(
            c.n, chunk_base, op, partials, out);
    rc = rc == EM_KERNEL_OK ? em_cuda_launch_status() : rc;
    em_cuda_scratch_free(scratch, bytes);
    return rc;
}

extern "C" int em_cuda_norm_pow_sum(em_dtype dt, double p, const em_array_list *l, double *out)
{
    if ((dt != EM_F32 && dt != EM_F64) || !(p > 0))
        return EM_KERNEL_UNSUPPORTED;
    const pow_sum op = {p};
    for (int first = 0; first < l->n; first += LIST_MAX) {
        int64_t longest;
        list_chunk c = chunk_of_list(l, first, &longest);
        int rc = pow_sums_chunk(dt, op, c, out + first);
        if (rc != EM_KERNEL_OK)
            return rc;
    }
    return EM_KERNEL_OK;
}
