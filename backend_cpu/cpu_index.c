/* CPU indexing kernels on strided views: index_select and gather (any dtype), index_add and
 * scatter_add (float dtypes, each output element summed in index order: deterministic), and
 * scatter (any dtype; where indices meet, the last along dim wins).
 * A view is walked as (pre, along, post): the dims before `dim`, dim itself, the dims after. */
#include <string.h>

#include "backend/kernel_args_internal.h"
#include "backend_cpu/cpu_dense_internal.h"

/* Elements in dims [d0, d1) of shape. */
static int64_t span(const int64_t *shape, int d0, int d1)
{
    int64_t n = 1;
    for (int d = d0; d < d1; d++)
        n *= shape[d];
    return n;
}

/* Element offset of flat (row-major) position i over dims [d0, d1) of shape, under strides. */
static int64_t flat_offset(const int64_t *shape, const int64_t *strides, int d0, int d1, int64_t i)
{
    int64_t off = 0;
    for (int d = d1 - 1; d >= d0; d--) {
        off += i % shape[d] * strides[d];
        i /= shape[d];
    }
    return off;
}

/* Offsets (post) of every position over the dims after dim, under strides; NULL when out of
 * memory. */
static int64_t *post_offsets(const int64_t *shape, const int64_t *strides, int dim, int ndim)
{
    const int64_t post = span(shape, dim + 1, ndim);
    int64_t *off = em_cpu_scratch((size_t)(post > 0 ? post : 1) * sizeof(int64_t));
    if (off)
        for (int64_t q = 0; q < post; q++)
            off[q] = flat_offset(shape, strides, dim + 1, ndim, q);
    return off;
}

/* The post-offset tables of the views a kernel walks together, over the positions of shape. */
typedef struct {
    int64_t *out, *in, *idx;
} post_tables;

static void tables_free(post_tables *t)
{
    em_cpu_scratch_free(t->out);
    em_cpu_scratch_free(t->in);
    em_cpu_scratch_free(t->idx);
}

/* idx may be NULL (index_select, index_add take a plain index list); false when out of memory. */
static bool tables_new(post_tables *t, const int64_t *shape, int dim, int ndim, const em_arr *out,
                       const em_arr *in, const em_arr *idx)
{
    t->out = post_offsets(shape, out->strides, dim, ndim);
    t->in = post_offsets(shape, in->strides, dim, ndim);
    t->idx = idx ? post_offsets(shape, idx->strides, dim, ndim) : NULL;
    if (t->out && t->in && (t->idx || !idx))
        return true;
    tables_free(t);
    return false;
}

static bool float_dtype(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64 || em_cpu_is_half(dt);
}

/* dst[dq[q]] = src[sq[q]] for q in [q0, q1), elements of es bytes. */
static void copy_run(size_t es, char *dst, const int64_t *dq, const char *src, const int64_t *sq,
                     int64_t q0, int64_t q1)
{
    switch (es) {
    case 1:
        for (int64_t q = q0; q < q1; q++)
            dst[dq[q]] = src[sq[q]];
        break;
    case 2:
        for (int64_t q = q0; q < q1; q++)
            ((uint16_t *)dst)[dq[q]] = ((const uint16_t *)src)[sq[q]];
        break;
    case 4:
        for (int64_t q = q0; q < q1; q++)
            ((uint32_t *)dst)[dq[q]] = ((const uint32_t *)src)[sq[q]];
        break;
    default:
        for (int64_t q = q0; q < q1; q++)
            ((uint64_t *)dst)[dq[q]] = ((const uint64_t *)src)[sq[q]];
        break;
    }
}

/* dst[dq[q]] += src[sq[q]] for q in [q0, q1); f16/bf16 add in f32 and round once per add. */
static void add_run(em_dtype dt, char *dst, const int64_t *dq, const char *src, const int64_t *sq,
                    int64_t q0, int64_t q1)
{
    if (dt == EM_F32) {
        for (int64_t q = q0; q < q1; q++)
            ((float *)dst)[dq[q]] += ((const float *)src)[sq[q]];
    } else if (dt == EM_F64) {
        for (int64_t q = q0; q < q1; q++)
            ((double *)dst)[dq[q]] += ((const double *)src)[sq[q]];
    } else {
        uint16_t *d = (uint16_t *)dst;
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t q = q0; q < q1; q++) {
            if (dt == EM_F16)
                d[dq[q]] = em_f32_to_f16(em_f16_to_f32(d[dq[q]]) + em_f16_to_f32(s[sq[q]]));
            else
                d[dq[q]] = em_f32_to_bf16(em_bf16_to_f32(d[dq[q]]) + em_bf16_to_f32(s[sq[q]]));
        }
    }
}

/* The n entries of a 1-D i64 index array as a packed list (idx's own data when contiguous);
 * NULL when the array is not a 1-D i64 array of n entries or out of memory (*owned says whether
 * the caller frees the list). */
static const int64_t *index_list(const em_arr *idx, int64_t n, bool *owned)
{
    *owned = false;
    if (idx->dtype != EM_I64 || idx->ndim != 1 || idx->shape[0] != n)
        return NULL;
    if (idx->strides[0] == 1 || n <= 1)
        return idx->data;
    int64_t *list = em_cpu_scratch((size_t)n * sizeof *list);
    for (int64_t j = 0; list && j < n; j++)
        list[j] = ((const int64_t *)idx->data)[j * idx->strides[0]];
    *owned = list != NULL;
    return list;
}

static bool indices_ok(const int64_t *idx, int64_t n, int64_t size)
{
    for (int64_t j = 0; j < n; j++)
        if (idx[j] < 0 || idx[j] >= size)
            return false;
    return true;
}

/* An index kernel's verdict on its list, freeing an owned copy when it stops here. */
static int index_list_status(const int64_t *idx, bool owned, int64_t n, int64_t size)
{
    if (!idx)
        return EM_KERNEL_UNSUPPORTED;
    if (indices_ok(idx, n, size))
        return EM_KERNEL_OK;
    if (owned)
        em_cpu_scratch_free((void *)idx);
    return EM_KERNEL_BAD_INDEX;
}

/* Out-of-range indices return EM_KERNEL_BAD_INDEX before anything is written. */
int em_cpu_index_select(const em_arr *out, const em_arr *in, int dim, const em_arr *index)
{
    if (!em_index_views_match(out, in, dim))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t n = out->shape[dim];
    bool owned;
    const int64_t *idx = index_list(index, n, &owned);
    int rc = index_list_status(idx, owned, n, in->shape[dim]);
    if (rc != EM_KERNEL_OK)
        return rc;
    const size_t es = em_dtype_size(out->dtype);
    const int64_t pre = span(out->shape, 0, dim), post = span(out->shape, dim + 1, out->ndim);
    post_tables t;
    if (!tables_new(&t, out->shape, dim, out->ndim, out, in, NULL)) {
        if (owned)
            em_cpu_scratch_free((void *)idx);
        return EM_KERNEL_FAILED;
    }
    #pragma omp parallel for collapse(2) if (pre * n * post >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p = 0; p < pre; p++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t o = flat_offset(out->shape, out->strides, 0, dim, p)
                              + j * out->strides[dim];
            const int64_t i = flat_offset(out->shape, in->strides, 0, dim, p)
                              + idx[j] * in->strides[dim];
            copy_run(es, (char *)out->data + o * (int64_t)es, t.out,
                     (const char *)in->data + i * (int64_t)es, t.in, 0, post);
        }
    tables_free(&t);
    if (owned)
        em_cpu_scratch_free((void *)idx);
    return EM_KERNEL_OK;
}

/* Post positions are handed to threads in blocks of this many; each thread adds every index
 * into its own block in order, so no two threads touch one element. */
#define ADD_BLOCK 256

int em_cpu_index_add(const em_arr *out, int dim, const em_arr *index, const em_arr *src)
{
    if (!em_index_views_match(out, src, dim) || !float_dtype(out->dtype))
        return EM_KERNEL_UNSUPPORTED;
    const int64_t n = src->shape[dim];
    bool owned;
    const int64_t *idx = index_list(index, n, &owned);
    int rc = index_list_status(idx, owned, n, out->shape[dim]);
    if (rc != EM_KERNEL_OK)
        return rc;
    const int64_t es = (int64_t)em_dtype_size(out->dtype);
    const int64_t pre = span(src->shape, 0, dim), post = span(src->shape, dim + 1, src->ndim);
    const int64_t blocks = (post + ADD_BLOCK - 1) / ADD_BLOCK;
    post_tables t;
    if (!tables_new(&t, src->shape, dim, src->ndim, out, src, NULL)) {
        if (owned)
            em_cpu_scratch_free((void *)idx);
        return EM_KERNEL_FAILED;
    }
    #pragma omp parallel for collapse(2) if (pre * n * post >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p = 0; p < pre; p++)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t o = flat_offset(src->shape, out->strides, 0, dim, p);
            const int64_t s = flat_offset(src->shape, src->strides, 0, dim, p);
            const int64_t q1 = (b + 1) * ADD_BLOCK < post ? (b + 1) * ADD_BLOCK : post;
            for (int64_t j = 0; j < n; j++)
                add_run(out->dtype, (char *)out->data + (o + idx[j] * out->strides[dim]) * es,
                        t.out, (const char *)src->data + (s + j * src->strides[dim]) * es, t.in,
                        b * ADD_BLOCK, q1);
        }
    tables_free(&t);
    if (owned)
        em_cpu_scratch_free((void *)idx);
    return EM_KERNEL_OK;
}

/* Every idx entry (idx with shape) in [0, size). */
static bool arr_indices_ok(const em_arr *idx, const int64_t *shape, int64_t size)
{
    const int64_t total = span(shape, 0, idx->ndim);
    const int64_t *v = idx->data;
    for (int64_t i = 0; i < total; i++) {
        const int64_t at = v[flat_offset(shape, idx->strides, 0, idx->ndim, i)];
        if (at < 0 || at >= size)
            return false;
    }
    return true;
}

static void copy_elem(size_t es, char *dst, const char *src)
{
    switch (es) {
    case 1:
        *dst = *src;
        break;
    case 2:
        *(uint16_t *)dst = *(const uint16_t *)src;
        break;
    case 4:
        *(uint32_t *)dst = *(const uint32_t *)src;
        break;
    default:
        *(uint64_t *)dst = *(const uint64_t *)src;
        break;
    }
}

int em_cpu_gather(const em_arr *out, const em_arr *in, int dim, const em_arr *idx)
{
    if (!em_gather_views_ok(out, in, idx, dim))
        return EM_KERNEL_UNSUPPORTED;
    if (!arr_indices_ok(idx, out->shape, in->shape[dim]))
        return EM_KERNEL_BAD_INDEX;
    const int64_t es = (int64_t)em_dtype_size(out->dtype), n = out->shape[dim];
    const int64_t pre = span(out->shape, 0, dim), post = span(out->shape, dim + 1, out->ndim);
    post_tables t;
    if (!tables_new(&t, out->shape, dim, out->ndim, out, in, idx))
        return EM_KERNEL_FAILED;
    #pragma omp parallel for collapse(2) if (pre * n * post >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p = 0; p < pre; p++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t o = flat_offset(out->shape, out->strides, 0, dim, p)
                              + j * out->strides[dim];
            const int64_t i = flat_offset(out->shape, in->strides, 0, dim, p);
            const int64_t *x = (const int64_t *)idx->data
                               + flat_offset(out->shape, idx->strides, 0, dim, p)
                               + j * idx->strides[dim];
            for (int64_t q = 0; q < post; q++)
                copy_elem((size_t)es, (char *)out->data + (o + t.out[q]) * es,
                          (const char *)in->data
                              + (i + x[t.idx[q]] * in->strides[dim] + t.in[q]) * es);
        }
    tables_free(&t);
    return EM_KERNEL_OK;
}

/* out[i][idx[i][j]] = src[i][j] (assign) or += src[i][j] along dim, j in order within each
 * block of post positions: the last j wins an assignment, sums add in index order. */
static int scatter_run(const em_arr *out, int dim, const em_arr *idx, const em_arr *src,
                       bool assign)
{
    if (!em_gather_views_ok(src, out, idx, dim) || !(assign || float_dtype(out->dtype)))
        return EM_KERNEL_UNSUPPORTED;
    if (!arr_indices_ok(idx, src->shape, out->shape[dim]))
        return EM_KERNEL_BAD_INDEX;
    const int64_t es = (int64_t)em_dtype_size(out->dtype), n = src->shape[dim];
    const int64_t pre = span(src->shape, 0, dim), post = span(src->shape, dim + 1, src->ndim);
    const int64_t blocks = (post + ADD_BLOCK - 1) / ADD_BLOCK;
    post_tables t;
    if (!tables_new(&t, src->shape, dim, src->ndim, out, src, idx))
        return EM_KERNEL_FAILED;
    #pragma omp parallel for collapse(2) if (pre * n * post >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p = 0; p < pre; p++)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t o = flat_offset(src->shape, out->strides, 0, dim, p);
            const int64_t s = flat_offset(src->shape, src->strides, 0, dim, p);
            const int64_t x = flat_offset(src->shape, idx->strides, 0, dim, p);
            const int64_t q1 = (b + 1) * ADD_BLOCK < post ? (b + 1) * ADD_BLOCK : post;
            for (int64_t j = 0; j < n; j++)
                for (int64_t q = b * ADD_BLOCK; q < q1; q++) {
                    const int64_t at = ((const int64_t *)idx->data)[x + j * idx->strides[dim]
                                                                    + t.idx[q]];
                    char *dst = (char *)out->data + (o + at * out->strides[dim]) * es;
                    const char *from = (const char *)src->data + (s + j * src->strides[dim]) * es;
                    if (assign)
                        copy_elem((size_t)es, dst + t.out[q] * es, from + t.in[q] * es);
                    else
                        add_run(out->dtype, dst, t.out, from, t.in, q, q + 1);
                }
        }
    tables_free(&t);
    return EM_KERNEL_OK;
}

int em_cpu_scatter(const em_arr *out, int dim, const em_arr *idx, const em_arr *src)
{
    return scatter_run(out, dim, idx, src, true);
}

int em_cpu_scatter_add(const em_arr *out, int dim, const em_arr *idx, const em_arr *src)
{
    return scatter_run(out, dim, idx, src, false);
}
