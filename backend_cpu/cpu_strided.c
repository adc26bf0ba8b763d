/* N-d strided iteration shared by the CPU kernels (dim merging, run walking, thread splitting)
 * and the staging loads/stores that move strided values of any dtype to compute buffers. */
#include "backend_cpu/cpu_strided_internal.h"

#include <assert.h>
#include <omp.h>
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* Whether dim a should be walked outside dim b: the first operand whose strides on the two dims
 * are both nonzero and differ decides; ties keep the given order. */
static bool dim_outer(const em_iter *it, int a, int b)
{
    for (int k = 0; k < it->nops; k++) {
        int64_t sa = it->strides[k][a], sb = it->strides[k][b];
        if (sa == 0 || sb == 0 || sa == sb)
            continue;
        return sa > sb;
    }
    return false;
}

static void swap_dims(em_iter *it, int a, int b)
{
    int64_t t = it->shape[a];
    it->shape[a] = it->shape[b];
    it->shape[b] = t;
    for (int k = 0; k < it->nops; k++) {
        t = it->strides[k][a];
        it->strides[k][a] = it->strides[k][b];
        it->strides[k][b] = t;
    }
}

void em_iter_init(em_iter *it, int ndim, const int64_t *shape, int nops, const em_arr *const *ops,
                  int flags)
{
    assert(nops >= 1 && nops <= EM_ITER_MAX_OPS && ndim >= 0 && ndim <= EM_MAX_DIMS);
    it->nops = nops;
    it->numel = 1;
    for (int k = 0; k < nops; k++) {
        it->data[k] = ops[k]->data;
        it->elsize[k] = em_dtype_size(ops[k]->dtype);
    }
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        it->numel *= shape[d];
        if (shape[d] == 1)
            continue;
        it->shape[nd] = shape[d];
        for (int k = 0; k < nops; k++)
            it->strides[k][nd] = ops[k]->strides[d];
        nd++;
    }
    if (!(flags & EM_ITER_KEEP_ORDER)) {
        /* insertion sort, outermost first; stable so ties keep row-major order */
        for (int i = 1; i < nd; i++)
            for (int j = i; j > 0 && dim_outer(it, j, j - 1); j--)
                swap_dims(it, j, j - 1);
    }
    int m = 0; /* merge dim d into the current outer one when every operand steps as one */
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int k = 0; k < nops; k++)
            merge = merge && it->strides[k][m] == it->strides[k][d] * it->shape[d];
        if (merge) {
            it->shape[m] *= it->shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][m] = it->strides[k][d];
        } else {
            m++;
            it->shape[m] = it->shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][m] = it->strides[k][d];
        }
    }
    it->ndim = nd == 0 ? 1 : m + 1;
    if (nd == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++)
            it->strides[k][0] = 0;
    }
}

void em_iter_range(const em_iter *it, char *const *data, int64_t start, int64_t end,
                   em_iter_fn fn, void *ctx)
{
    if (start >= end)
        return;
    const int nd = it->ndim, inner = nd - 1;
    int64_t idx[EM_MAX_DIMS], step[EM_ITER_MAX_OPS][EM_MAX_DIMS], istride[EM_ITER_MAX_OPS];
    char *ptr[EM_ITER_MAX_OPS];
    int64_t rest = start;
    for (int d = inner; d >= 0; d--) {
        idx[d] = rest % it->shape[d];
        rest /= it->shape[d];
    }
    for (int k = 0; k < it->nops; k++) {
        ptr[k] = data[k];
        istride[k] = it->strides[k][inner];
        for (int d = 0; d < nd; d++) {
            step[k][d] = it->strides[k][d] * (int64_t)it->elsize[k];
            ptr[k] += idx[d] * step[k][d];
        }
    }
    for (int64_t pos = start; pos < end;) {
        int64_t n = it->shape[inner] - idx[inner];
        if (n > end - pos)
            n = end - pos;
        fn(ctx, n, ptr, istride);
        pos += n;
        if (pos >= end)
            break;
        idx[inner] += n;
        for (int k = 0; k < it->nops; k++)
            ptr[k] += n * step[k][inner];
        for (int d = inner; d > 0 && idx[d] == it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < it->nops; k++)
                ptr[k] += step[k][d - 1] - it->shape[d] * step[k][d];
        }
    }
}

void em_iter_offsets(const em_iter *it, char *const *data, int64_t pos, char **ptrs)
{
    for (int k = 0; k < it->nops; k++)
        ptrs[k] = data[k];
    for (int d = it->ndim - 1; d >= 0; d--) {
        const int64_t i = pos % it->shape[d];
        pos /= it->shape[d];
        for (int k = 0; k < it->nops; k++)
            ptrs[k] += i * it->strides[k][d] * (int64_t)it->elsize[k];
    }
}

void em_iter_run(const em_iter *it, int64_t cost, em_iter_fn fn, void *ctx)
{
    const int64_t numel = it->numel;
    if (numel == 0)
        return;
    int nt = omp_get_max_threads();
    if (nt <= 1 || numel * cost < EM_CPU_PARALLEL_MIN || omp_in_parallel()) {
        em_iter_range(it, it->data, 0, numel, fn, ctx);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t chunk = (numel + T - 1) / T;
        chunk = (chunk + 63) / 64 * 64; /* whole cache lines per thread for 1-byte operands up */
        int64_t start = t * chunk, end = start + chunk;
        em_iter_range(it, it->data, start < numel ? start : numel, end < numel ? end : numel,
                      fn, ctx);
    }
}

int64_t em_arr_numel(const em_arr *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    return n;
}

bool em_arr_same_shape(const em_arr *a, const em_arr *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

bool em_dtype_is_int(em_dtype dt)
{
    return dt == EM_I8 || dt == EM_U8 || dt == EM_I32 || dt == EM_I64;
}

/* One strided conversion loop per source or destination C type. */
#define LOAD_LOOP(CT, CONV)                                                                       \
    do {                                                                                          \
        const CT *s = p;                                                                          \
        if (stride == 1) {                                                                        \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) dst[i] = CONV(s[i]);              \
        } else {                                                                                  \
            for (int64_t i = 0; i < n; i++)                                                       \
                dst[i] = CONV(s[i * stride]);                                                     \
        }                                                                                         \
    } while (0)

#define STORE_LOOP(CT, CONV)                                                                      \
    do {                                                                                          \
        CT *d = p;                                                                                \
        if (stride == 1) {                                                                        \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = CONV(src[i]);              \
        } else {                                                                                  \
            for (int64_t i = 0; i < n; i++)                                                       \
                d[i * stride] = CONV(src[i]);                                                     \
        }                                                                                         \
    } while (0)

#define AS_IS(v) (v)
#define BOOL01(v) ((v) != 0)

void em_load_f32(em_dtype dt, const void *p, int64_t stride, int64_t n, float *dst)
{
    switch (dt) {
    case EM_F32: LOAD_LOOP(float, AS_IS); break;
    case EM_F64: LOAD_LOOP(double, (float)); break;
    case EM_F16: LOAD_LOOP(uint16_t, em_f16_to_f32); break;
    case EM_BF16: LOAD_LOOP(uint16_t, em_bf16_to_f32); break;
    case EM_I8: LOAD_LOOP(int8_t, (float)); break;
    case EM_U8: LOAD_LOOP(uint8_t, (float)); break;
    case EM_I32: LOAD_LOOP(int32_t, (float)); break;
    case EM_I64: LOAD_LOOP(int64_t, (float)); break;
    case EM_BOOL: LOAD_LOOP(uint8_t, (float)BOOL01); break;
    default: assert(!"em_load_f32: invalid dtype");
    }
}

void em_load_f64(em_dtype dt, const void *p, int64_t stride, int64_t n, double *dst)
{
    switch (dt) {
    case EM_F32: LOAD_LOOP(float, (double)); break;
    case EM_F64: LOAD_LOOP(double, AS_IS); break;
    case EM_F16: LOAD_LOOP(uint16_t, (double)em_f16_to_f32); break;
    case EM_BF16: LOAD_LOOP(uint16_t, (double)em_bf16_to_f32); break;
    case EM_I8: LOAD_LOOP(int8_t, (double)); break;
    case EM_U8: LOAD_LOOP(uint8_t, (double)); break;
    case EM_I32: LOAD_LOOP(int32_t, (double)); break;
    case EM_I64: LOAD_LOOP(int64_t, (double)); break;
    case EM_BOOL: LOAD_LOOP(uint8_t, (double)BOOL01); break;
    default: assert(!"em_load_f64: invalid dtype");
    }
}

/* Floats to integers saturate (NaN reads 0), so a load never hits C's undefined conversions. */
static int64_t f64_to_i64_sat(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static int64_t f16_to_i64(uint16_t h)
{
    return f64_to_i64_sat(em_f16_to_f32(h));
}

static int64_t bf16_to_i64(uint16_t h)
{
    return f64_to_i64_sat(em_bf16_to_f32(h));
}

void em_load_i64(em_dtype dt, const void *p, int64_t stride, int64_t n, int64_t *dst)
{
    switch (dt) {
    case EM_F32: LOAD_LOOP(float, f64_to_i64_sat); break;
    case EM_F64: LOAD_LOOP(double, f64_to_i64_sat); break;
    case EM_F16: LOAD_LOOP(uint16_t, f16_to_i64); break;
    case EM_BF16: LOAD_LOOP(uint16_t, bf16_to_i64); break;
    case EM_I8: LOAD_LOOP(int8_t, (int64_t)); break;
    case EM_U8: LOAD_LOOP(uint8_t, (int64_t)); break;
    case EM_I32: LOAD_LOOP(int32_t, (int64_t)); break;
    case EM_I64: LOAD_LOOP(int64_t, AS_IS); break;
    case EM_BOOL: LOAD_LOOP(uint8_t, (int64_t)BOOL01); break;
    default: assert(!"em_load_i64: invalid dtype");
    }
}

void em_store_f32(em_dtype dt, void *p, int64_t stride, int64_t n, const float *src)
{
    switch (dt) {
    case EM_F32: STORE_LOOP(float, AS_IS); break;
    case EM_F64: STORE_LOOP(double, (double)); break;
    case EM_F16: STORE_LOOP(uint16_t, em_f32_to_f16); break;
    case EM_BF16: STORE_LOOP(uint16_t, em_f32_to_bf16); break;
    default: assert(!"em_store_f32: not a float dtype");
    }
}

void em_store_f64(em_dtype dt, void *p, int64_t stride, int64_t n, const double *src)
{
    switch (dt) {
    case EM_F32: STORE_LOOP(float, (float)); break;
    case EM_F64: STORE_LOOP(double, AS_IS); break;
    case EM_F16: STORE_LOOP(uint16_t, em_f32_to_f16); break;
    case EM_BF16: STORE_LOOP(uint16_t, em_f32_to_bf16); break;
    default: assert(!"em_store_f64: not a float dtype");
    }
}

void em_store_i64(em_dtype dt, void *p, int64_t stride, int64_t n, const int64_t *src)
{
    switch (dt) {
    case EM_I8: STORE_LOOP(int8_t, (int8_t)); break;
    case EM_U8: STORE_LOOP(uint8_t, (uint8_t)); break;
    case EM_I32: STORE_LOOP(int32_t, (int32_t)); break;
    case EM_I64: STORE_LOOP(int64_t, AS_IS); break;
    case EM_BOOL: STORE_LOOP(uint8_t, (uint8_t)BOOL01); break;
    default: assert(!"em_store_i64: not an integer dtype");
    }
}

const float *em_view_f32(em_dtype dt, const void *p, int64_t stride, int64_t n, float *buf)
{
    if (dt == EM_F32 && stride == 1)
        return p;
    em_load_f32(dt, p, stride, n, buf);
    return buf;
}

const double *em_view_f64(em_dtype dt, const void *p, int64_t stride, int64_t n, double *buf)
{
    if (dt == EM_F64 && stride == 1)
        return p;
    em_load_f64(dt, p, stride, n, buf);
    return buf;
}

const int64_t *em_view_i64(em_dtype dt, const void *p, int64_t stride, int64_t n, int64_t *buf)
{
    if (dt == EM_I64 && stride == 1)
        return p;
    em_load_i64(dt, p, stride, n, buf);
    return buf;
}
