/* CUDA kernels against the CPU's where the op-case table cannot look: copy conversions bit for
 * bit over every pair of dtypes (NaN payloads, infinities, halfway cases, subnormals, integers out
 * of range) and every kind of run (contiguous, strided, misaligned), fills, random draws bit for
 * bit at odd sizes and offsets, reductions giving the same bits twice, every binary op and its
 * gradients by the formulas of backend/binary_ops_internal.h that the CPU runs too, and an index
 * outside its dimension reported by the next copy to the host with the kernel's name, nothing
 * written for it. Where no GPU is present every test reports itself skipped. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "ember.h"

static const em_backend *cuda_or_skip(void)
{
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, EM_CUDA);
    if (!probe)
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    em_release(probe);
    return em_backend_get(EM_CUDA);
}

static em_arr arr1(void *data, em_dtype dt, int64_t n, int64_t stride)
{
    em_arr a = {.data = data, .dtype = dt, .ndim = 1, .shape = {n}, .strides = {stride}};
    return a;
}

/* A device copy of nbytes of host. */
static void *upload(const em_backend *be, const void *host, size_t nbytes)
{
    void *dev = be->alloc(nbytes);
    cr_assert(dev, "device allocation of %zu bytes failed", nbytes);
    cr_assert_eq(be->copy_from_host(dev, host, nbytes), EM_KERNEL_OK);
    return dev;
}

static void download(const em_backend *be, void *host, const void *dev, size_t nbytes)
{
    cr_assert_eq(be->copy_to_host(host, dev, nbytes), EM_KERNEL_OK);
}

/* ---- copy: every dtype pair, bit for bit ---- */

/* Values for the float and bool sources (converted from f64 by the CPU): signed zeros, halfway
 * cases of f16, bf16 and f32 rounding (and just off them), the f16 range's edges and subnormals,
 * f32 and f64 subnormals, overflow, integers' edges for the truncating casts, inf and NaN. */
static const double float_values[] = {
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 0.1, -7.75,
    1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8,
    1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-24, 1.0 + 3 * 0x1p-24, 1.0 + 0x1p-24 + 0x1p-50,
    65504.0, 65519.99, 65520.0, 65536.0, -1e5, 0x1p-24, 0x1p-25, 3 * 0x1p-25, 0x1p-26, 6e-5,
    -0x1.ff8p-15, 1e-40, -1e-45, 1e-310, 3.4028234663852886e38, 3.5e38, 1e300, -1e300,
    127.5, 128.4, 255.9, 256.1, -128.6, -129.2, 2147483647.5, 2147483648.5, -2147483649.0,
    9.3e18, -9.3e18, 0x1p63, -0x1p63, INFINITY, -INFINITY, NAN, -NAN};

/* Values for the integer sources (converted from i64 by the CPU, wrapping): the edges of every
 * integer dtype, and integers that round in f16, bf16, f32 and f64. */
static const int64_t int_values[] = {
    0, 1, -1, 127, 128, -128, -129, 255, 256, 2049, 2051, 65519, 65520, 65536, -70000,
    16777217, 16777219, 2147483647, -2147483648LL, 2147483648LL, (1LL << 53) + 1,
    INT64_MAX, INT64_MIN, 0x0101010101010101LL};

/* Raw NaN, subnormal and edge patterns of the float dtypes, appended to their sources. */
static int64_t append_patterns(em_dtype dt, char *p)
{
    static const uint32_t f32[] = {0x7fc00001u, 0xff800001u, 0x7fbfffffu, 0x00000001u,
                                   0x807fffffu};
    static const uint64_t f64[] = {0x7ff0000000000001ull, 0xfff8000000000123ull,
                                   0x7ff7ffffffffffffull, 0x0000000000000001ull};
    static const uint16_t f16[] = {0x7c01, 0xfe01, 0x7dff, 0x0001, 0x83ff, 0x7bff, 0xfbff};
    static const uint16_t bf16[] = {0x7f81, 0xffc1, 0x7fbf, 0x0001, 0x807f, 0x7f7f};
    switch (dt) {
    case EM_F32: memcpy(p, f32, sizeof f32); return sizeof f32 / sizeof f32[0];
    case EM_F64: memcpy(p, f64, sizeof f64); return sizeof f64 / sizeof f64[0];
    case EM_F16: memcpy(p, f16, sizeof f16); return sizeof f16 / sizeof f16[0];
    case EM_BF16: memcpy(p, bf16, sizeof bf16); return sizeof bf16 / sizeof bf16[0];
    default: return 0;
    }
}

/* The source values of dtype dt, packed into buf (>= 128 elements); returns their count. */
static int64_t make_source(em_dtype dt, char *buf)
{
    const em_backend *cpu = em_backend_get(EM_CPU);
    const bool from_float = em_dtype_is_float(dt) || dt == EM_BOOL;
    const int64_t n = from_float ? (int64_t)(sizeof float_values / sizeof float_values[0])
                                 : (int64_t)(sizeof int_values / sizeof int_values[0]);
    em_arr src = from_float ? arr1((void *)float_values, EM_F64, n, 1)
                            : arr1((void *)int_values, EM_I64, n, 1);
    em_arr dst = arr1(buf, dt, n, 1);
    cr_assert_eq(cpu->copy(&dst, &src), EM_KERNEL_OK);
    return n + append_patterns(dt, buf + n * (int64_t)em_dtype_size(dt));
}

/* The ways a copy runs: strides of source and destination, and a first element one element
 * past the buffer's (aligned) start. */
typedef struct {
    const char *name;
    int64_t src_stride, dst_stride, skip;
} copy_layout;

static const copy_layout layouts[] = {
    {"contiguous", 1, 1, 0},
    {"strided source", 3, 1, 0},
    {"strided destination", 1, 2, 0},
    {"misaligned", 1, 1, 1},
};

/* src (n values of s, packed) copied to d on the CPU and on the device in layout l: the whole
 * destination buffers, untouched gaps included, must hold the same bytes. */
static void check_copy(const em_backend *cu, em_dtype s, em_dtype d, const char *src, int64_t n,
                       const copy_layout *l)
{
    const em_backend *cpu = em_backend_get(EM_CPU);
    const size_t ss = em_dtype_size(s), ds = em_dtype_size(d);
    const size_t sbytes = (size_t)(n * l->src_stride + l->skip) * ss;
    const size_t dbytes = (size_t)(n * l->dst_stride + l->skip) * ds;
    char *hs = calloc(1, sbytes), *want = malloc(dbytes), *got = malloc(dbytes);
    for (int64_t i = 0; i < n; i++)
        memcpy(hs + (l->skip + i * l->src_stride) * ss, src + i * ss, ss);
    memset(want, 0xa5, dbytes);
    char *dsrc = upload(cu, hs, sbytes), *ddst = upload(cu, want, dbytes);
    em_arr a = arr1(want + l->skip * ds, d, n, l->dst_stride);
    em_arr b = arr1(hs + l->skip * ss, s, n, l->src_stride);
    cr_assert_eq(cpu->copy(&a, &b), EM_KERNEL_OK);
    a.data = ddst + l->skip * ds;
    b.data = dsrc + l->skip * ss;
    cr_assert_eq(cu->copy(&a, &b), EM_KERNEL_OK);
    download(cu, got, ddst, dbytes);
    for (size_t i = 0; i < dbytes; i++)
        cr_assert_eq(got[i], want[i], "copy %s -> %s (%s): byte %zu is %02x, the cpu gives %02x",
                     em_dtype_name(s), em_dtype_name(d), l->name, i, (unsigned char)got[i],
                     (unsigned char)want[i]);
    cu->free(dsrc);
    cu->free(ddst);
    free(hs), free(want), free(got);
}

Test(cuda_kernels, copy_converts_every_dtype_pair_as_the_cpu)
{
    const em_backend *cu = cuda_or_skip();
    char src[128 * 8];
    for (int s = 0; s < EM_NDTYPES; s++) {
        const int64_t n = make_source((em_dtype)s, src);
        for (int d = 0; d < EM_NDTYPES; d++)
            for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++)
                check_copy(cu, (em_dtype)s, (em_dtype)d, src, n, &layouts[k]);
    }
}

Test(cuda_kernels, fill_stores_the_cpus_bits_in_every_dtype)
{
    const em_backend *cu = cuda_or_skip();
    const em_backend *cpu = em_backend_get(EM_CPU);
    const double values[] = {-0.0, 1.0 + 0x1p-11, 65520.0, -129.7, 1e300, 0x1p63, NAN, -INFINITY};
    for (int dt = 0; dt < EM_NDTYPES; dt++)
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            const size_t es = em_dtype_size((em_dtype)dt), n = 37, bytes = 2 * n * es;
            char *want = malloc(bytes), *got = malloc(bytes);
            memset(want, 0x5a, bytes);
            char *dev = upload(cu, want, bytes);
            em_arr a = arr1(want, (em_dtype)dt, (int64_t)n, 2); /* every second element */
            cr_assert_eq(cpu->fill(&a, values[v]), EM_KERNEL_OK);
            a.data = dev;
            cr_assert_eq(cu->fill(&a, values[v]), EM_KERNEL_OK);
            download(cu, got, dev, bytes);
            cr_assert(memcmp(got, want, bytes) == 0, "fill %s with %g differs from the cpu",
                      em_dtype_name((em_dtype)dt), values[v]);
            cu->free(dev);
            free(want), free(got);
        }
}

/* ---- random draws ---- */

typedef struct {
    em_rng_dist dist;
    em_rng_params p;
} draw_kind;

/* n draws of kind k into dtype dt at (seed, offset), on the cpu and the device; the device's
 * first element skip elements into its buffer (skip 1: not vector-aligned). */
static void draws(const em_backend *cu, draw_kind k, em_dtype dt, int64_t n, uint64_t seed,
                  uint64_t offset, int64_t skip, char *want, char *got)
{
    const em_backend *cpu = em_backend_get(EM_CPU);
    const size_t es = em_dtype_size(dt), bytes = (size_t)(n + skip) * es;
    em_arr a = arr1(want, dt, n, 1);
    cr_assert_eq(cpu->rng_fill(k.dist, &k.p, seed, offset, &a), EM_KERNEL_OK);
    char *dev = cu->alloc(bytes);
    cr_assert(dev);
    a.data = dev + skip * (int64_t)es;
    cr_assert_eq(cu->rng_fill(k.dist, &k.p, seed, offset, &a), EM_KERNEL_OK);
    download(cu, got, dev + skip * (int64_t)es, (size_t)n * es);
    cu->free(dev);
}

static const int64_t draw_sizes[] = {1, 3, 5, 4097, 65539};
static const uint64_t draw_seeds[][2] = {{1, 0}, {12345, 7}, {0xffffffffffffull, (1ull << 32) + 3}};

Test(cuda_kernels, uniform_randint_bernoulli_draws_are_the_cpus_bits)
{
    const em_backend *cu = cuda_or_skip();
    const draw_kind kinds[] = {{EM_RNG_UNIFORM, {.low = -3.0, .high = 5.5}},
                               {EM_RNG_RANDINT, {.low = -7.0, .high = 1000.0}},
                               {EM_RNG_BERNOULLI, {.p = 0.3}}};
    char *want = malloc(65539 * 8), *got = malloc(65539 * 8);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int dt = 0; dt < EM_NDTYPES; dt++)
            for (size_t s = 0; s < sizeof draw_sizes / sizeof draw_sizes[0]; s++)
                for (size_t q = 0; q < sizeof draw_seeds / sizeof draw_seeds[0]; q++) {
                    const int64_t n = draw_sizes[s];
                    draws(cu, kinds[k], (em_dtype)dt, n, draw_seeds[q][0], draw_seeds[q][1],
                          (int64_t)(q % 2), want, got);
                    cr_assert(memcmp(got, want, (size_t)n * em_dtype_size((em_dtype)dt)) == 0,
                              "draw %zu in %s, %lld elements, seed %llu: differs from the cpu", k,
                              em_dtype_name((em_dtype)dt), (long long)n,
                              (unsigned long long)draw_seeds[q][0]);
                }
    free(want), free(got);
}

/* Box-Muller through the device's log, sin and cos: the cpu's values to within their last bits
 * (f64), and to one rounding of f32. */
Test(cuda_kernels, normal_draws_match_the_cpu_to_the_last_bits)
{
    const em_backend *cu = cuda_or_skip();
    const draw_kind normal = {EM_RNG_NORMAL, {.mean = 0.5, .std = 2.0}};
    char *want = malloc(65539 * 8), *got = malloc(65539 * 8);
    for (int t = 0; t < 2; t++) {
        const em_dtype dt = t == 0 ? EM_F64 : EM_F32;
        const double tol = t == 0 ? 1e-13 : 0x1p-22;
        draws(cu, normal, dt, 65539, 99, 5, 1, want, got);
        for (int64_t i = 0; i < 65539; i++) {
            const double w = dt == EM_F64 ? ((double *)want)[i] : ((float *)want)[i];
            const double g = dt == EM_F64 ? ((double *)got)[i] : ((float *)got)[i];
            cr_assert(fabs(g - w) <= tol * (1 + fabs(w)),
                      "normal %s element %lld: %.17g, cpu %.17g", em_dtype_name(dt), (long long)i,
                      g, w);
        }
    }
    free(want), free(got);
}

/* ---- reductions: the same bits on every run, the cpu's values ---- */

typedef struct {
    const char *name;
    em_reduce_op op;
    em_reduce_params p;
    int ndim;
    int64_t in[2], out[2];
} reduction;

Test(cuda_kernels, reductions_give_the_same_bits_twice_and_the_cpus_values)
{
    const em_backend *cu = cuda_or_skip();
    const em_backend *cpu = em_backend_get(EM_CPU);
    const int64_t N = 3000001;
    const reduction cases[] = {
        {"sum of all", EM_REDUCE_SUM, {0}, 1, {N}, {1}},
        {"sum over rows", EM_REDUCE_SUM, {0}, 2, {N / 7, 7}, {1, 7}},
        {"mean of each row", EM_REDUCE_MEAN, {0}, 2, {7, N / 7}, {7, 1}},
        {"var of all", EM_REDUCE_VAR, {.correction = 1}, 1, {N}, {1}},
        {"amax of each column", EM_REDUCE_MAX, {0}, 2, {N / 7, 7}, {1, 7}},
        {"argmin of all", EM_REDUCE_ARGMIN, {0}, 1, {N}, {1}},
    };
    float *x_dev = cu->alloc((size_t)N * sizeof(float)), *x = malloc((size_t)N * sizeof(float));
    em_arr all = arr1(x_dev, EM_F32, N, 1);
    const em_rng_params minus_one_to_one = {.low = -1, .high = 1};
    cr_assert_eq(cu->rng_fill(EM_RNG_UNIFORM, &minus_one_to_one, 2024, 0, &all), EM_KERNEL_OK);
    download(cu, x, x_dev, (size_t)N * sizeof(float));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const reduction *r = &cases[c];
        const bool arg = r->op == EM_REDUCE_ARGMIN;
        const em_dtype odt = arg ? EM_I64 : EM_F32;
        em_arr in = {.data = x_dev, .dtype = EM_F32, .ndim = r->ndim};
        em_arr out = {.dtype = odt, .ndim = r->ndim};
        int64_t nout = 1;
        for (int d = r->ndim - 1; d >= 0; d--) {
            in.shape[d] = r->in[d];
            in.strides[d] = d == r->ndim - 1 ? 1 : r->in[d + 1];
            out.shape[d] = r->out[d];
            out.strides[d] = d == r->ndim - 1 ? 1 : r->out[d + 1];
            nout *= r->out[d];
        }
        const size_t bytes = (size_t)nout * 8;
        char first[64], second[64], want[64];
        void *o = cu->alloc(bytes);
        for (int run = 0; run < 2; run++) {
            out.data = o;
            cr_assert_eq(cu->reduce(r->op, &r->p, &out, &in), EM_KERNEL_OK, "%s", r->name);
            download(cu, run ? second : first, o, bytes);
        }
        cr_assert(memcmp(first, second, (size_t)nout * em_dtype_size(odt)) == 0,
                  "%s: two runs differ", r->name);
        in.data = x;
        out.data = want;
        cr_assert_eq(cpu->reduce(r->op, &r->p, &out, &in), EM_KERNEL_OK);
        for (int64_t i = 0; i < nout; i++) {
            if (arg) {
                cr_assert_eq(((int64_t *)first)[i], ((int64_t *)want)[i], "%s", r->name);
                continue;
            }
            const double g = ((float *)first)[i], w = ((float *)want)[i];
            cr_assert(fabs(g - w) <= 1e-5 * fabs(w) + 1e-6, "%s[%lld]: %.9g, cpu %.9g", r->name,
                      (long long)i, g, w);
        }
        cu->free(o);
    }
    cu->free(x_dev);
    free(x);
}

/* ---- binary ops and their gradients ---- */

/* n values of v as dt (f32 or f64), in host memory the caller frees. */
static void *host_as(em_dtype dt, const double *v, int64_t n)
{
    void *p = malloc((size_t)n * em_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        if (dt == EM_F32)
            ((float *)p)[i] = (float)v[i];
        else
            ((double *)p)[i] = v[i];
    }
    return p;
}

static double host_at(em_dtype dt, const void *p, int64_t i)
{
    return dt == EM_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

/* out, and the gradients by a and by b, of every op on a (R, C), b a broadcast row and g one
 * broadcast element, on CUDA and on the CPU: equal up to the last bits of pow and log. */
Test(cuda_kernels, binary_ops_and_gradients_run_the_cpus_formulas)
{
    const em_backend *cu = cuda_or_skip();
    const em_backend *cpu = em_backend_get(EM_CPU);
    enum { R = 37, C = 129, N = R * C };
    static double av[N], bv[C];
    const double gv = -1.5;
    for (int c = 0; c < C; c++)
        bv[c] = 0.5 + (c * 7 % 13) / 8.0;
    for (int i = 0; i < N; i++) /* positive (pow), with ties to b */
        av[i] = (i / C + i % C) % 11 == 0 ? bv[i % C] : 0.25 + (i * 37 % 23) / 8.0;
    const em_dtype dts[2] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++) {
        const em_dtype dt = dts[t];
        const size_t es = em_dtype_size(dt);
        void *ah = host_as(dt, av, N), *bh = host_as(dt, bv, C), *gh = host_as(dt, &gv, 1);
        void *ad = upload(cu, ah, N * es), *bd = upload(cu, bh, C * es), *gd = upload(cu, gh, es);
        void *yd = cu->alloc(N * es), *gxd = cu->alloc(N * es);
        void *yh = malloc(N * es), *gxh = malloc(N * es), *got = malloc(N * es);
        const em_arr a_host = {ah, dt, 2, {R, C}, {C, 1}}, a_dev = {ad, dt, 2, {R, C}, {C, 1}};
        const em_arr b_host = {bh, dt, 2, {R, C}, {0, 1}}, b_dev = {bd, dt, 2, {R, C}, {0, 1}};
        const em_arr g_host = {gh, dt, 2, {R, C}, {0, 0}}, g_dev = {gd, dt, 2, {R, C}, {0, 0}};
        const double tol = dt == EM_F32 ? 1e-6 : 4e-15; /* pow and log: a few ulp apart */
        for (int op = 0; op < EM_BINARY_COUNT; op++) {
            const em_dtype odt = em_binary_is_compare(op) ? EM_BOOL : dt;
            const size_t oes = em_dtype_size(odt);
            em_arr y_host = {yh, odt, 2, {R, C}, {C, 1}}, y_dev = {yd, odt, 2, {R, C}, {C, 1}};
            cr_assert_eq(cu->binary(op, &y_dev, &a_dev, &b_dev), EM_KERNEL_OK, "op %d", op);
            cr_assert_eq(cpu->binary(op, &y_host, &a_host, &b_host), EM_KERNEL_OK);
            download(cu, got, yd, N * oes);
            for (int64_t i = 0; i < N; i++) {
                if (odt == EM_BOOL) {
                    cr_assert_eq(((uint8_t *)got)[i], ((uint8_t *)yh)[i], "op %d at %lld", op,
                                 (long long)i);
                    continue;
                }
                const double gw = host_at(dt, got, i), w = host_at(dt, yh, i);
                cr_assert(fabs(gw - w) <= tol * fabs(w), "dt %d op %d at %lld: %.17g, cpu %.17g",
                          dt, op, (long long)i, gw, w);
            }
            if (em_binary_is_compare(op))
                continue;
            em_arr gx_host = {gxh, dt, 2, {R, C}, {C, 1}}, gx_dev = {gxd, dt, 2, {R, C}, {C, 1}};
            for (int wrt_b = 0; wrt_b < 2; wrt_b++) {
                cr_assert_eq(cu->binary_grad(op, wrt_b, &gx_dev, &g_dev, &a_dev, &b_dev, &y_dev),
                             EM_KERNEL_OK, "op %d by %d", op, wrt_b);
                cr_assert_eq(cpu->binary_grad(op, wrt_b, &gx_host, &g_host, &a_host, &b_host,
                                              &y_host), EM_KERNEL_OK);
                download(cu, got, gxd, N * es);
                for (int64_t i = 0; i < N; i++) {
                    const double gw = host_at(dt, got, i), w = host_at(dt, gxh, i);
                    cr_assert(fabs(gw - w) <= 2 * tol * fabs(w), "dt %d op %d by %d at %lld: "
                              "%.17g, cpu %.17g", dt, op, wrt_b, (long long)i, gw, w);
                }
            }
        }
        cu->free(ad);
        cu->free(bd);
        cu->free(gd);
        cu->free(yd);
        cu->free(gxd);
        free(ah);
        free(bh);
        free(gh);
        free(yh);
        free(gxh);
        free(got);
    }
}

/* ---- an index outside its dimension ---- */

Test(cuda_kernels, bad_index_is_reported_by_the_next_copy_naming_the_kernel)
{
    cuda_or_skip();
    em_tensor *x = em_to_device(em_reshape(em_arange(0, 15, 1, EM_F32), EM_SHAPE(5, 3)), EM_CUDA);
    em_tensor *idx = em_to_device(em_from_data(EM_SHAPE(3), EM_I64, (int64_t[]){0, 7, 2}),
                                  EM_CUDA);
    cr_assert(x && idx, "%s", em_error());
    em_error_clear();
    em_tensor *y = em_index_select(x, 0, idx); /* the device checks the index, later */
    cr_assert(y, "%s", em_error());
    float out[9];
    cr_assert_neq(em_copy_to_host(y, EM_F32, out), EM_OK);
    cr_assert(strstr(em_error(), "index_select") && strstr(em_error(), "out of range"),
              "the error names neither the kernel nor the fault: %s", em_error());
    em_error_clear();
    cr_assert_eq(em_copy_to_host(y, EM_F32, out), EM_OK, "the flag was not cleared: %s",
                 em_error());
    for (int j = 0; j < 3; j++) {
        cr_assert_eq(out[j], (float)j);
        cr_assert_eq(out[6 + j], (float)(6 + j));
    }
    em_release(y), em_release(idx), em_release(x);
}

/* The fused cross entropy on rows longer than a warp serves (a block per row), forward and
 * backward, next to the CPU's; then a target outside the classes is reported by the next copy
 * naming the kernel. */
Test(cuda_kernels, cross_entropy_long_rows_and_a_bad_target)
{
    cuda_or_skip();
    const int64_t rows = 3, cols = 2000;
    em_manual_seed(5);
    em_scope_begin();
    em_tensor *x = em_requires_grad_(em_randn(EM_SHAPE(rows, cols), EM_F32, NULL), true);
    em_tensor *t = em_from_data(EM_SHAPE(rows), EM_I64, (int64_t[]){0, 1999, 733});
    em_tensor *xd = em_requires_grad_(em_to_device(x, EM_CUDA), true);
    em_tensor *td = em_to_device(t, EM_CUDA);
    em_tensor *l = em_cross_entropy_rows(x, t), *ld = em_cross_entropy_rows(xd, td);
    cr_assert(l && ld, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(l)), EM_OK, "%s", em_error());
    cr_assert_eq(em_backward(em_sum_all(ld)), EM_OK, "%s", em_error());
    float loss[3], dloss[3], *g = malloc(sizeof(float) * rows * cols);
    float *dg = malloc(sizeof(float) * rows * cols);
    cr_assert_eq(em_copy_to_host(l, EM_F32, loss), EM_OK);
    cr_assert_eq(em_copy_to_host(ld, EM_F32, dloss), EM_OK, "%s", em_error());
    cr_assert_eq(em_copy_to_host(x->grad, EM_F32, g), EM_OK);
    cr_assert_eq(em_copy_to_host(xd->grad, EM_F32, dg), EM_OK, "%s", em_error());
    for (int i = 0; i < rows; i++)
        cr_expect(fabsf(loss[i] - dloss[i]) <= 1e-5f * fabsf(loss[i]), "loss %d: %.9g, cpu %.9g",
                  i, dloss[i], loss[i]);
    for (int64_t i = 0; i < rows * cols; i++)
        cr_assert(fabsf(g[i] - dg[i]) <= 1e-5f * fabsf(g[i]) + 1e-9f, "grad %lld: %.9g, cpu %.9g",
                  (long long)i, dg[i], g[i]);
    free(g);
    free(dg);
    em_tensor *bad = em_to_device(em_from_data(EM_SHAPE(rows), EM_I64, (int64_t[]){0, 2000, 1}),
                                  EM_CUDA);
    em_tensor *lb = em_cross_entropy_rows(xd, bad);
    cr_assert(lb, "%s", em_error());
    cr_assert_neq(em_copy_to_host(lb, EM_F32, dloss), EM_OK);
    cr_expect(strstr(em_error(), "cross_entropy") && strstr(em_error(), "out of range"),
              "the error names neither the kernel nor the fault: %s", em_error());
    em_error_clear();
    em_scope_end();
}

/* out (4, 3) f32 on the device, every element 99 */
static float *nines(const em_backend *cu)
{
    float h[12];
    for (int i = 0; i < 12; i++)
        h[i] = 99;
    return upload(cu, h, sizeof h);
}

static em_arr mat(void *data, em_dtype dt, int64_t rows, int64_t cols)
{
    em_arr a = {.data = data, .dtype = dt, .ndim = 2, .shape = {rows, cols}, .strides = {cols, 1}};
    return a;
}

/* The kernel's bad index: reported once by synchronize with its name, then no more. */
static void expect_reported(const em_backend *cu, const char *kernel)
{
    cr_assert_eq(cu->synchronize(), EM_KERNEL_BAD_INDEX, "%s: bad index not reported", kernel);
    cr_assert_eq(cu->synchronize(), EM_KERNEL_OK, "%s: reported twice", kernel);
    cr_assert(cu->bad_index_kernel && strcmp(cu->bad_index_kernel(), kernel) == 0);
}

Test(cuda_kernels, bad_indices_write_nothing_and_the_good_ones_land)
{
    const em_backend *cu = cuda_or_skip();
    const float x[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; /* (4, 3) */
    const int64_t rows[3] = {2, -1, 2};                          /* (3): -1 is bad */
    const int64_t cols[12] = {0, 1, 2, 2, 3, 0, 1, 1, 1, 0, 0, 0}; /* (4, 3): 3 is bad */
    float *dx = upload(cu, x, sizeof x);
    int64_t *drows = upload(cu, rows, sizeof rows), *dcols = upload(cu, cols, sizeof cols);
    em_arr in = mat(dx, EM_F32, 4, 3), r = arr1(drows, EM_I64, 3, 1);
    em_arr c = mat(dcols, EM_I64, 4, 3);
    float got[12];

    float *o = nines(cu); /* index_select rows 2, -1, 2 of x: row 1 stays 99 */
    em_arr out = mat(o, EM_F32, 3, 3);
    cr_assert_eq(cu->index_select(&out, &in, 0, &r), EM_KERNEL_OK);
    expect_reported(cu, "index_select");
    download(cu, got, o, 9 * sizeof(float));
    const float sel[9] = {6, 7, 8, 99, 99, 99, 6, 7, 8};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(got[i], sel[i], "index_select element %d", i);
    cu->free(o);

    o = nines(cu); /* gather along dim 1 by cols: the element with index 3 stays 99 */
    out = mat(o, EM_F32, 4, 3);
    cr_assert_eq(cu->gather(&out, &in, 1, &c), EM_KERNEL_OK);
    expect_reported(cu, "gather");
    download(cu, got, o, sizeof got);
    const float gat[12] = {0, 1, 2, 5, 99, 3, 7, 7, 7, 9, 9, 9};
    for (int i = 0; i < 12; i++)
        cr_assert_eq(got[i], gat[i], "gather element %d", i);
    cu->free(o);

    o = nines(cu); /* index_add rows 0 and 2 of src (3, 3) into row 2: 99 + 0 + 6, ... */
    out = mat(o, EM_F32, 4, 3);
    em_arr src = mat(dx, EM_F32, 3, 3);
    cr_assert_eq(cu->index_add(&out, 0, &r, &src), EM_KERNEL_OK);
    expect_reported(cu, "index_add");
    download(cu, got, o, sizeof got);
    const float add[12] = {99, 99, 99, 99, 99, 99, 105, 107, 109, 99, 99, 99};
    for (int i = 0; i < 12; i++)
        cr_assert_eq(got[i], add[i], "index_add element %d", i);
    cu->free(o);

    o = nines(cu); /* scatter_add x along dim 1 by cols into (4, 3): index 3 adds nothing */
    out = mat(o, EM_F32, 4, 3);
    cr_assert_eq(cu->scatter_add(&out, 1, &c, &in), EM_KERNEL_OK);
    expect_reported(cu, "scatter_add");
    download(cu, got, o, sizeof got);
    const float sca[12] = {99, 100, 101, 99 + 5, 99, 99 + 3, 99, 99 + 6 + 7 + 8, 99,
                           99 + 9 + 10 + 11, 99, 99};
    for (int i = 0; i < 12; i++)
        cr_assert_eq(got[i], sca[i], "scatter_add element %d", i);
    cu->free(o);
    cu->free(dx), cu->free(drows), cu->free(dcols);
}
