/* The CUDA backend against the CPU: memory round trips, cuBLAS GEMM in f32/f64 and the
 * profiler's CUDA-event timing. Runs where a GPU is present; elsewhere every test reports itself
 * skipped (and ctest counts it as skipped). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "ember.h"

static const em_backend *cuda_or_skip(void)
{
    const em_backend *be = em_backend_get(EM_CUDA);
    if (!be)
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    return be;
}

Test(cuda, tensor_round_trip)
{
    cuda_or_skip();
    float host[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    em_tensor *a = em_from_data(EM_SHAPE(2, 3), EM_F32, host);
    em_tensor *d = em_to_device(a, EM_CUDA);
    cr_assert(d, "%s", em_error());
    cr_assert_eq(d->device, EM_CUDA);
    em_tensor *back = em_to_device(d, EM_CPU);
    float out[6];
    cr_assert_eq(em_copy_to_host(back, EM_F32, out), EM_OK, "%s", em_error());
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], host[i]);
    em_release(back);
    em_release(d);
    em_release(a);
}

/* C (m, n) = A (m, k) @ B^T with B (n, k), on the device and by a host loop. */
static void check_gemm(const em_backend *be, em_dtype dt, double tol)
{
    const int m = 37, n = 19, k = 53;
    size_t es = em_dtype_size(dt);
    double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * n * k);
    void *ha = malloc(es * m * k), *hb = malloc(es * n * k), *hc = malloc(es * m * n);
    for (int i = 0; i < m * k; i++)
        a[i] = sin(i * 0.37);
    for (int i = 0; i < n * k; i++)
        b[i] = cos(i * 0.11);
    for (int i = 0; i < m * k; i++)
        dt == EM_F32 ? (((float *)ha)[i] = (float)a[i]) : (((double *)ha)[i] = a[i]);
    for (int i = 0; i < n * k; i++)
        dt == EM_F32 ? (((float *)hb)[i] = (float)b[i]) : (((double *)hb)[i] = b[i]);
    void *da = be->alloc(es * m * k), *db = be->alloc(es * n * k), *dc = be->alloc(es * m * n);
    cr_assert(da && db && dc);
    be->copy_from_host(da, ha, es * m * k);
    be->copy_from_host(db, hb, es * n * k);
    cr_assert_eq(be->gemm(dt, false, true, m, n, k, 1.0, da, k, 0, db, k, 0, 0.0, dc, n, 0, 1),
                 EM_KERNEL_OK);
    be->copy_to_host(hc, dc, es * m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double want = 0;
            for (int p = 0; p < k; p++)
                want += a[i * k + p] * b[j * k + p];
            double got = dt == EM_F32 ? ((float *)hc)[i * n + j] : ((double *)hc)[i * n + j];
            cr_assert(fabs(got - want) <= tol * (1 + fabs(want)), "C[%d,%d] = %g, want %g", i, j,
                      got, want);
        }
    be->free(da);
    be->free(db);
    be->free(dc);
    free(a), free(b), free(ha), free(hb), free(hc);
}

Test(cuda, gemm_matches_host_loop)
{
    const em_backend *be = cuda_or_skip();
    check_gemm(be, EM_F32, 1e-4);
    check_gemm(be, EM_F64, 1e-12);
}

/* A device table without a kernel: the op names itself and the device instead of crashing. */
Test(cuda, missing_kernel_is_a_clear_error)
{
    const em_backend *be = cuda_or_skip();
    static em_backend without_unary;
    without_unary = *be;
    without_unary.unary = NULL;
    em_backend_register(&without_unary);
    em_tensor *a = em_to_device(em_ones(EM_SHAPE(4), EM_F32), EM_CUDA);
    cr_assert(a, "%s", em_error());
    em_error_clear();
    em_tensor *e = em_exp(a);
    em_backend_register(be);
    cr_assert_null(e);
    cr_assert_str_eq(em_error(), "em_exp: not supported on cuda");
    em_error_clear();
}

Test(cuda, profiler_times_device_ops_with_cuda_events)
{
    cuda_or_skip();
    em_tensor *a = em_to_device(em_ones(EM_SHAPE(256, 256), EM_F32), EM_CUDA);
    cr_assert(a, "%s", em_error());
    cr_assert_eq(em_profiler_start((em_profiler_opts){0}), EM_OK, "%s", em_error());
    em_tensor *c = em_matmul(a, a);
    cr_assert(c, "%s", em_error());
    cr_assert_eq(em_profiler_stop(), EM_OK, "%s", em_error());
    const em_profile_summary *s = em_profiler_summary();
    bool found = false;
    for (int i = 0; i < s->n_rows; i++) {
        if (strcmp(s->rows[i].name, "matmul"))
            continue;
        found = true;
        cr_expect_str_eq(s->rows[i].device, "cuda");
        cr_expect_gt(s->rows[i].gpu_ms, 0, "a 256^3 product takes device time");
    }
    cr_expect(found, "a matmul row");
    em_release(c);
    em_release(a);
}

/* got (on any device) against want (on the CPU): |got - want| <= tol * (1 + |want|) */
static void expect_close_to_cpu(const em_tensor *got, const em_tensor *want, double tol,
                                const char *what)
{
    cr_assert(got && want, "%s: %s", what, em_error());
    int64_t n = em_numel(want);
    cr_assert_eq(em_numel(got), n, "%s: element count", what);
    double *g = malloc((size_t)n * sizeof *g), *w = malloc((size_t)n * sizeof *w);
    cr_assert_eq(em_copy_to_host(got, EM_F64, g), EM_OK, "%s", em_error());
    cr_assert_eq(em_copy_to_host(want, EM_F64, w), EM_OK, "%s", em_error());
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(g[i] - w[i]) <= tol * (1 + fabs(w[i])), "%s [%lld]: cuda %.9g, cpu %.9g",
                  what, (long long)i, g[i], w[i]);
    free(g);
    free(w);
}

/* Each int8 layer (static conv with fused ReLU, strided and padded; static conv; static linear
 * with fused ReLU; dynamic linear) on CUDA against the same layer on the CPU, fed the same
 * input: the integer products are the same, the epilogues differ by an fma's rounding. */
Test(cuda, int8_layers_match_the_cpu)
{
    cuda_or_skip();
    em_manual_seed(11);
    em_scope_begin();
    em_module *m = em_sequential(
        6, em_conv2d_layer(3, 8, 3, (em_conv2d_layer_opts){.stride = 2, .padding = 1}),
        em_relu_layer(), em_conv2d_layer(8, 4, 3, (em_conv2d_layer_opts){0}), em_flatten_layer(),
        em_linear_layer(4 * 3 * 3, 5, true), em_relu_layer());
    em_module *dyn = em_sequential(1, em_linear_layer(36, 7, true));
    em_tensor *calib[2];
    for (int i = 0; i < 2; i++)
        calib[i] = em_randn(EM_SHAPE(4, 3, 9, 9), EM_F32, NULL);
    cr_assert_eq(em_quantize_static_(m, calib, 2, (em_static_quant_opts){0}), EM_OK, "%s",
                 em_error());
    cr_assert_eq(em_quantize_dynamic_(dyn, (em_quantize_opts){0}), EM_OK, "%s", em_error());
    em_module_eval(m);
    em_module_eval(dyn);
    bool grad = em_set_grad_enabled(false);
    /* the CPU's input of every layer, and its outputs */
    em_tensor *in[4], *want[4];
    in[0] = em_randn(EM_SHAPE(3, 3, 9, 9), EM_F32, NULL);
    want[0] = em_forward(m->children[0].module, in[0]);
    in[1] = want[0];
    want[1] = em_forward(m->children[2].module, in[1]);
    in[2] = em_flatten(want[1], 1, -1);
    want[2] = em_forward(m->children[4].module, in[2]);
    in[3] = in[2];
    want[3] = em_forward(dyn, in[3]);
    cr_assert(want[3], "%s", em_error());
    cr_assert_eq(em_module_to(m, EM_CUDA), EM_OK, "%s", em_error());
    cr_assert_eq(em_module_to(dyn, EM_CUDA), EM_OK, "%s", em_error());
    cr_assert_eq(em_quantize_repack(m), EM_OK, "%s", em_error());
    cr_assert_eq(em_quantize_repack(dyn), EM_OK, "%s", em_error());
    em_module *layer[4] = {m->children[0].module, m->children[2].module, m->children[4].module,
                           dyn};
    const char *what[4] = {"static conv + relu", "static conv", "static linear + relu",
                           "dynamic linear"};
    for (int i = 0; i < 4; i++)
        expect_close_to_cpu(em_forward(layer[i], em_to_device(in[i], EM_CUDA)), want[i], 1e-5,
                            what[i]);
    em_set_grad_enabled(grad);
    em_scope_end();
    em_module_free(m);
    em_module_free(dyn);
}
