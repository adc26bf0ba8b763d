/* The CPU fill and strided copy kernels: any shape and strides, any pair of dtypes. Dims are
 * coalesced first; contiguous same-dtype rows are memcpy, contiguous f32 <-> f16/bf16 rows use the
 * bulk converters, and large copies split rows across OpenMP threads. */
#include <string.h>

#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

/* Below this many elements per piece, a row is not split further across threads. */
#define SPLIT_MIN 4096

/* A copy after coalescing: ndim >= 1 dims, byte steps of the destination and the source. */
typedef struct {
    int ndim;
    int64_t numel;
    int64_t shape[EM_MAX_DIMS];
    int64_t dst_step[EM_MAX_DIMS];
    int64_t src_step[EM_MAX_DIMS];
} copy_loop;

/* Drop size-1 dims and merge neighbours that are contiguous in both arrays. */
static void coalesce(copy_loop *l, const em_arr *out, const em_arr *in)
{
    size_t dsize = em_dtype_size(out->dtype), ssize = em_dtype_size(in->dtype);
    l->ndim = 0;
    l->numel = 1;
    for (int i = 0; i < out->ndim; i++) {
        int64_t n = out->shape[i];
        l->numel *= n;
        if (n == 1)
            continue;
        int64_t ds = out->strides[i] * (int64_t)dsize, ss = in->strides[i] * (int64_t)ssize;
        int k = l->ndim;
        if (k > 0 && l->dst_step[k - 1] == ds * n && l->src_step[k - 1] == ss * n) {
            l->shape[k - 1] *= n;
            l->dst_step[k - 1] = ds;
            l->src_step[k - 1] = ss;
            continue;
        }
        l->shape[k] = n;
        l->dst_step[k] = ds;
        l->src_step[k] = ss;
        l->ndim++;
    }
    if (l->ndim == 0) {
        l->ndim = 1;
        l->shape[0] = 1;
        l->dst_step[0] = (int64_t)dsize;
        l->src_step[0] = (int64_t)ssize;
    }
}

#define DEFINE_COPY_ELEMS(T)                                                                  \
    static void copy_elems_##T(char *dst, int64_t dst_step, const char *src, int64_t src_step,  \
                               int64_t n)                                                     \
    {                                                                                         \
        if (dst_step == (int64_t)sizeof(T) && src_step == 0) {                                \
            T v = *(const T *)src;                                                            \
            T *d = (T *)dst;                                                                  \
            for (int64_t i = 0; i < n; i++)                                                   \
                d[i] = v;                                                                     \
            return;                                                                           \
        }                                                                                     \
        for (int64_t i = 0; i < n; i++)                                                       \
            *(T *)(dst + i * dst_step) = *(const T *)(src + i * src_step);                    \
    }
DEFINE_COPY_ELEMS(uint8_t)
DEFINE_COPY_ELEMS(uint16_t)
DEFINE_COPY_ELEMS(uint32_t)
DEFINE_COPY_ELEMS(uint64_t)

static void memcpy_row(char *dst, int64_t dst_step, const char *src, int64_t src_step, int64_t n)
{
    (void)src_step;
    memcpy(dst, src, (size_t)(n * dst_step));
}

/* Contiguous rows between f32 and a half dtype, on the bulk vector converters. */
#define DEFINE_HALF_ROWS(H, DT)                                                               \
    static void f32_to_##H##_row(char *dst, int64_t dst_step, const char *src,                \
                                 int64_t src_step, int64_t n)                                 \
    {                                                                                         \
        (void)dst_step, (void)src_step;                                                       \
        em_cpu_f32_to_half_n(DT, (uint16_t *)dst, (const float *)src, n);                     \
    }                                                                                         \
    static void H##_to_f32_row(char *dst, int64_t dst_step, const char *src,                  \
                               int64_t src_step, int64_t n)                                   \
    {                                                                                         \
        (void)dst_step, (void)src_step;                                                       \
        em_cpu_half_to_f32_n(DT, (float *)dst, (const uint16_t *)src, n);                     \
    }
DEFINE_HALF_ROWS(f16, EM_F16)
DEFINE_HALF_ROWS(bf16, EM_BF16)

/* The row function for the innermost dim of l. */
static em_cpu_convert_fn pick_row(const copy_loop *l, em_dtype dt_out, em_dtype dt_in)
{
    int64_t dsize = (int64_t)em_dtype_size(dt_out), ssize = (int64_t)em_dtype_size(dt_in);
    int last = l->ndim - 1;
    bool contiguous = l->dst_step[last] == dsize && l->src_step[last] == ssize;
    if (dt_out == dt_in) {
        if (contiguous)
            return memcpy_row;
        switch (dsize) {
        case 1:
            return copy_elems_uint8_t;
        case 2:
            return copy_elems_uint16_t;
        case 4:
            return copy_elems_uint32_t;
        default:
            return copy_elems_uint64_t;
        }
    }
    if (contiguous && dt_in == EM_F32 && dt_out == EM_F16)
        return f32_to_f16_row;
    if (contiguous && dt_in == EM_F16 && dt_out == EM_F32)
        return f16_to_f32_row;
    if (contiguous && dt_in == EM_F32 && dt_out == EM_BF16)
        return f32_to_bf16_row;
    if (contiguous && dt_in == EM_BF16 && dt_out == EM_F32)
        return bf16_to_f32_row;
    return em_cpu_converter(dt_in, dt_out);
}

/* A copy cut into units: pieces of `piece` elements of each row, per_row of them a row. */
typedef struct {
    const copy_loop *l;
    em_cpu_convert_fn row;
    char *dst;
    const char *src;
    int64_t piece, per_row;
} copy_units;

/* Unit u of the copy: piece `u % per_row` of row `u / per_row`. */
static void copy_unit(void *ctx, int64_t u)
{
    const copy_units *c = ctx;
    const copy_loop *l = c->l;
    const int64_t piece = c->piece, per_row = c->per_row;
    const int last = l->ndim - 1;
    const int64_t n = l->shape[last];
    int64_t r = u / per_row, start = (u % per_row) * piece;
    int64_t len = n - start < piece ? n - start : piece;
    int64_t doff = start * l->dst_step[last], soff = start * l->src_step[last];
    for (int d = last - 1; d >= 0; d--) {
        int64_t i = r % l->shape[d];
        r /= l->shape[d];
        doff += i * l->dst_step[d];
        soff += i * l->src_step[d];
    }
    c->row(c->dst + doff, l->dst_step[last], c->src + soff, l->src_step[last], len);
}

static void run_loop(const copy_loop *l, em_cpu_convert_fn row, char *dst, const char *src)
{
    int last = l->ndim - 1;
    int64_t n = l->shape[last];
    int64_t rows = l->numel / n;
    /* few long rows: split each into pieces so every thread gets work */
    int64_t piece = n;
    if (l->numel >= EM_CPU_PARALLEL_MIN && rows < 64) {
        piece = (n + 63) / 64;
        if (piece < SPLIT_MIN)
            piece = SPLIT_MIN;
    }
    copy_units c = {l, row, dst, src, piece, (n + piece - 1) / piece};
    em_cpu_run_tasks(rows * c.per_row, l->numel >= EM_CPU_PARALLEL_MIN, copy_unit, &c);
}

int em_cpu_copy(const em_arr *out, const em_arr *in)
{
    if (!em_dtype_valid(out->dtype) || !em_dtype_valid(in->dtype))
        return EM_KERNEL_UNSUPPORTED;
    copy_loop l;
    coalesce(&l, out, in);
    if (l.numel == 0)
        return EM_KERNEL_OK;
    run_loop(&l, pick_row(&l, out->dtype, in->dtype), out->data, in->data);
    return EM_KERNEL_OK;
}

int em_cpu_fill(const em_arr *out, double value)
{
    if (!em_dtype_valid(out->dtype))
        return EM_KERNEL_UNSUPPORTED;
    /* the value converted once, then copied from a source whose strides are all 0 */
    uint64_t pattern = 0;
    em_cpu_converter(EM_F64, out->dtype)((char *)&pattern, 0, (const char *)&value, 0, 1);
    em_arr in = {.data = &pattern, .dtype = out->dtype, .ndim = out->ndim};
    memcpy(in.shape, out->shape, sizeof in.shape);
    return em_cpu_copy(out, &in);
}
