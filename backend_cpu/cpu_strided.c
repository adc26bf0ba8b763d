/* N-d strided iteration shared by the CPU kernels (dim merging, run walking, thread splitting)
 * and the staging loads/stores that move strided values of any dtype to compute buffers. */
#include "backend_cpu/cpu_strided_internal.h"

#include <assert.h>
#include <omp.h>
#include <string.h>

#include "backend/convert_internal.h"
#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

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
    int nt = em_cpu_threads();
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
    case EM_F16:
    case EM_BF16:
        if (stride == 1)
            em_cpu_half_to_f32_n(dt, dst, p, n);
        else if (dt == EM_F16)
            LOAD_LOOP(uint16_t, em_f16_to_f32);
        else
            LOAD_LOOP(uint16_t, em_bf16_to_f32);
        break;
    case EM_I8: LOAD_LOOP(int8_t, (float)); break;
    case EM_U8: LOAD_LOOP(uint8_t, (float)); break;
    case EM_I32: LOAD_LOOP(int32_t, (float)); break;
    case EM_I64: LOAD_LOOP(int64_t, (float)); break;
    case EM_BOOL: LOAD_LOOP(uint8_t, (float)BOOL01); break;
    default: assert(!"em_load_f32: invalid dtype");
    }
}

/* n contiguous half values widened to f64, through the bulk f32 converter a block at a time */
static void load_half_f64(em_dtype dt, const uint16_t *src, int64_t n, double *dst)
{
    enum { BLOCK = 256 };
    float f[BLOCK];
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t m = n - i < BLOCK ? n - i : BLOCK;
        em_cpu_half_to_f32_n(dt, f, src + i, m);
        for (int64_t j = 0; j < m; j++)
            dst[i + j] = f[j];
    }
}

void em_load_f64(em_dtype dt, const void *p, int64_t stride, int64_t n, double *dst)
{
    switch (dt) {
    case EM_F32: LOAD_LOOP(float, (double)); break;
    case EM_F64: LOAD_LOOP(double, AS_IS); break;
    case EM_F16:
    case EM_BF16:
        if (stride == 1)
            load_half_f64(dt, p, n, dst);
        else if (dt == EM_F16)
            LOAD_LOOP(uint16_t, (double)em_f16_to_f32);
        else
            LOAD_LOOP(uint16_t, (double)em_bf16_to_f32);
        break;
    case EM_I8: LOAD_LOOP(int8_t, (double)); break;
    case EM_U8: LOAD_LOOP(uint8_t, (double)); break;
    case EM_I32: LOAD_LOOP(int32_t, (double)); break;
    case EM_I64: LOAD_LOOP(int64_t, (double)); break;
    case EM_BOOL: LOAD_LOOP(uint8_t, (double)BOOL01); break;
    default: assert(!"em_load_f64: invalid dtype");
    }
}

/* Floats to integers saturate (NaN reads 0), so a load never hits C's undefined conversions. */
static int64_t f16_to_i64(uint16_t h)
{
    return em_f64_to_i64(em_f16_to_f32(h));
}

static int64_t bf16_to_i64(uint16_t h)
{
    return em_f64_to_i64(em_bf16_to_f32(h));
}

void em_load_i64(em_dtype dt, const void *p, int64_t stride, int64_t n, int64_t *dst)
{
    switch (dt) {
    case EM_F32: LOAD_LOOP(float, em_f64_to_i64); break;
    case EM_F64: LOAD_LOOP(double, em_f64_to_i64); break;
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
    case EM_F16:
    case EM_BF16:
        if (stride == 1)
            em_cpu_f32_to_half_n(dt, p, src, n);
        else if (dt == EM_F16)
            STORE_LOOP(uint16_t, em_f32_to_f16);
        else
            STORE_LOOP(uint16_t, em_f32_to_bf16);
        break;
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
