/* What the CUDA attention kernels share (cuda_attention.cu: any head size, one block per row;
 * cuda_attention_tiled.cu: head dims up to TILED_MAX_DIM in f32, f16 and bf16, tiles of rows
 * through shared memory): one call's operands and the per-weight pieces of the CPU kernel's
 * semantics (the mask's additive form, the dropout draw, the score gradient). */
#ifndef EMBER_CUDA_ATTENTION_INTERNAL_CUH
#define EMBER_CUDA_ATTENTION_INTERNAL_CUH

#include <math.h>

#include "backend/philox.h"
#include "backend_cuda/cuda_real.cuh"

/* One call's operands, by value in the kernels' parameters: q (B, H, Lq, D), k (B, H, Lk, D),
 * v (B, H, Lk, Dv), out and gout (B, H, Lq, Dv), lse (B, H, Lq) contiguous, mask broadcast to
 * (B, H, Lq, Lk) when has_mask; gradients with their inputs' shapes (backward only). */
struct attention_call {
    em_attention_params p;
    int64_t heads, lq, lk, d, dv;
    bool has_mask;
    em_arr q, k, v, mask, out, lse, gout, gq, gk, gv;
};

/* Element (b, h, i, 0) of a 4-D array with a contiguous last dim. */
template <typename T>
static __device__ __forceinline__ T *row_at(const em_arr &a, int64_t b, int64_t h, int64_t i)
{
    return (T *)a.data + b * a.strides[0] + h * a.strides[1] + i * a.strides[2];
}

/* The mask's additive form at (b, h, i, j): 0 or -inf for bool, else its value. */
static __device__ double mask_add(const em_arr &m, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const int64_t e = b * m.strides[0] + h * m.strides[1] + i * m.strides[2] + j * m.strides[3];
    switch (m.dtype) {
    case EM_BOOL:
        return ((const bool *)m.data)[e] ? 0.0 : -INFINITY;
    case EM_F32:
        return ((const float *)m.data)[e];
    case EM_F64:
        return ((const double *)m.data)[e];
    case EM_F16:
        return __half2float(((const __half *)m.data)[e]);
    default: /* bf16; checked on the host */
        return __bfloat162float(((const __nv_bfloat16 *)m.data)[e]);
    }
}

/* Whether dropout keeps weight idx of the flat (B, H, Lq, Lk) mask (em_bernoulli's draw). */
static __device__ bool kept(const em_attention_params &p, uint64_t idx)
{
    const em_philox_block blk = em_philox4x32_10(p.offset + idx / 4, p.seed);
    return (double)em_philox_uniform(blk.v[idx % 4]) < 1.0 - p.dropout_p;
}

struct op_max { /* NaN wins, as the CPU's row maximum */
    template <class A> __device__ A operator()(A a, A b) const { return b > a || b != b ? b : a; }
};

/* The score gradient of weight (i, j) given its score s, and the dropped weight into *pw. */
template <typename A>
static __device__ A score_grad(const attention_call &c, A s, A lse, A dp, A delta, uint64_t idx,
                               A *pw)
{
    const A p = (A)exp((double)(s - lse));
    if (c.p.dropout_p <= 0) {
        *pw = p;
        return p * (dp - delta);
    }
    const A z = kept(c.p, idx) ? (A)(1.0 / (1.0 - c.p.dropout_p)) : (A)0;
    *pw = p * z;
    return p * (dp * z - delta);
}

/* The tiled kernels, for calls whose head dims are at most TILED_MAX_DIM in f32, f16 or bf16
 * (tiled_attention_fits); delta (B * H * Lq) = rowsum(gout * out) in f32. */
const int64_t TILED_MAX_DIM = 64;
bool tiled_attention_fits(em_dtype dt, int64_t d, int64_t dv);
int tiled_attention(const attention_call &c, em_dtype dt);
int tiled_attention_grad(const attention_call &c, em_dtype dt, const float *delta);

#endif
