/* The fused CUDA kernels, each at the launch count it exists to reach (em_device_counts) and
 * against the CPU's kernel on the same data, at sizes the op-case table does not reach: layer
 * norm over 600 rows (three chunks of the weight and bias sums) in 1 launch forward and 3
 * backward; a Linear with its bias in 1 (cuBLASLt's bias epilogue) and its gradients with the
 * bias's in 2 in bf16 (the BGRADB epilogue); SGD over 60 arrays in 1 launch and over 700 in 2;
 * clipping by norm on the device in 3 launches with no wait for the device, the norm and the
 * grads as the host's clipping gives them. Skipped where no GPU is present. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "ember.h"

TestSuite(cuda_launches, .init = em_scope_begin, .fini = em_scope_end);

static const em_backend *cuda_or_skip(void)
{
    em_tensor *probe = em_empty_on(EM_SHAPE(1), EM_F32, EM_CUDA);
    if (!probe)
        cr_skip_test("no CUDA device (or ember built without CUDA): CUDA test skipped");
    em_release(probe);
    return em_backend_get(EM_CUDA);
}

static uint64_t launches(const em_backend *be)
{
    em_device_counts c;
    be->counts(&c);
    return c.launches;
}

/* n random values in [-1, 1) of dtype dt (f32 or bf16 bits) on the host and the device. */
static void *uploaded(const em_backend *be, em_dtype dt, int64_t n, uint64_t seed, void **host)
{
    em_generator g = em_generator_new(seed);
    em_tensor *t = em_rand(EM_SHAPE(n), EM_F32, &g);
    em_tensor *c = em_to_dtype(em_add_scalar(em_mul_scalar(t, 2), -1), dt);
    size_t bytes = (size_t)n * em_dtype_size(dt);
    *host = malloc(bytes);
    memcpy(*host, em_data_ptr(c), bytes);
    void *dev = be->alloc(bytes);
    cr_assert(dev && be->copy_from_host(dev, *host, bytes) == EM_KERNEL_OK);
    return dev;
}

/* n values of dtype dt at host as f64 (malloc'd). */
static double *as_f64(em_dtype dt, const void *host, int64_t n)
{
    em_tensor *t = em_to_dtype(em_from_data(EM_SHAPE(n), dt, host), EM_F64);
    double *v = malloc((size_t)n * sizeof *v);
    memcpy(v, em_data_ptr(t), (size_t)n * sizeof *v);
    return v;
}

/* The worst of |got - want| / (|want| + mean |want|) over n values, got of dtype dt on the
 * device, want f64 on the host. */
static double worst_f64(const em_backend *be, em_dtype dt, const void *dev, const double *want,
                        int64_t n)
{
    size_t bytes = (size_t)n * em_dtype_size(dt);
    void *got_host = malloc(bytes);
    cr_assert_eq(be->copy_to_host(got_host, dev, bytes), EM_KERNEL_OK);
    double *got = as_f64(dt, got_host, n), scale = 0, err = 0;
    for (int64_t i = 0; i < n; i++)
        scale += fabs(want[i]) / (double)n;
    for (int64_t i = 0; i < n; i++)
        err = fmax(err, fabs(got[i] - want[i]) / (fabs(want[i]) + scale));
    free(got_host);
    free(got);
    return err;
}

/* The same, want of dtype dt on the host. */
static double worst(const em_backend *be, em_dtype dt, const void *dev, const void *want_host,
                    int64_t n)
{
    double *want = as_f64(dt, want_host, n);
    double err = worst_f64(be, dt, dev, want, n);
    free(want);
    return err;
}

Test(cuda_launches, layer_norm_is_one_launch_forward_and_three_backward)
{
    const em_backend *be = cuda_or_skip(), *cpu = em_backend_get(EM_CPU);
    const int64_t rows = 600, cols = 200;
    void *hx, *hw, *hb, *hg;
    void *x = uploaded(be, EM_F32, rows * cols, 1, &hx), *w = uploaded(be, EM_F32, cols, 2, &hw);
    void *b = uploaded(be, EM_F32, cols, 3, &hb), *gy = uploaded(be, EM_F32, rows * cols, 4, &hg);
    size_t n = (size_t)(rows * cols) * sizeof(float), v = (size_t)cols * sizeof(float);
    size_t st = (size_t)rows * 2 * sizeof(double);
    void *y = be->alloc(n), *gx = be->alloc(n), *gw = be->alloc(v), *gb = be->alloc(v);
    double *stats = be->alloc(st);
    float *cy = malloc(n), *cgx = malloc(n), *cgw = malloc(v), *cgb = malloc(v);
    double *cstats = malloc(st);
    uint64_t l0 = launches(be);
    cr_assert_eq(be->layer_norm(EM_F32, rows, cols, x, w, b, 1e-5, y, stats), EM_KERNEL_OK);
    uint64_t l1 = launches(be);
    cr_assert_eq(be->layer_norm_grad(EM_F32, rows, cols, x, w, stats, gy, gx, gw, gb),
                 EM_KERNEL_OK);
    uint64_t l2 = launches(be);
    cr_assert_eq(l1 - l0, 1, "forward: %llu launches", (unsigned long long)(l1 - l0));
    cr_assert_eq(l2 - l1, 3, "backward: %llu launches", (unsigned long long)(l2 - l1));
    cr_assert_eq(cpu->layer_norm(EM_F32, rows, cols, hx, hw, hb, 1e-5, cy, cstats),
                 EM_KERNEL_OK);
    cr_assert_eq(cpu->layer_norm_grad(EM_F32, rows, cols, hx, hw, cstats, hg, cgx, cgw, cgb),
                 EM_KERNEL_OK);
    const char *names[4] = {"y", "gx", "gw", "gb"};
    const void *devs[4] = {y, gx, gw, gb}, *hosts[4] = {cy, cgx, cgw, cgb};
    const int64_t counts[4] = {rows * cols, rows * cols, cols, cols};
    for (int i = 0; i < 4; i++) {
        double e = worst(be, EM_F32, devs[i], hosts[i], counts[i]);
        cr_assert_leq(e, 1e-5, "%s differs from the cpu's by %g", names[i], e);
    }
    void *ptrs[] = {x, w, b, gy, y, gx, gw, gb, stats};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        be->free(ptrs[i]);
    free(hx), free(hw), free(hb), free(hg), free(cy), free(cgx), free(cgw), free(cgb);
    free(cstats);
}

/* A Linear (m, k) -> (m, n) with its bias in dtype dt: forward in 1 launch; the gradients with
 * the bias's in *grad_launches; each within tol of the same products in f64 on the host. */
static void linear_case(em_dtype dt, double tol, uint64_t *grad_launches)
{
    const em_backend *be = em_backend_get(EM_CUDA);
    const int64_t m = 70, n = 40, k = 33;
    size_t es = em_dtype_size(dt);
    void *hx, *hw, *hb, *hg;
    void *x = uploaded(be, dt, m * k, 5, &hx), *w = uploaded(be, dt, n * k, 6, &hw);
    void *b = uploaded(be, dt, n, 7, &hb), *g = uploaded(be, dt, m * n, 8, &hg);
    void *y = be->alloc((size_t)(m * n) * es), *gx = be->alloc((size_t)(m * k) * es);
    void *gw = be->alloc((size_t)(n * k) * es), *gb = be->alloc((size_t)n * es);
    uint64_t l0 = launches(be);
    cr_assert_eq(be->linear(dt, m, n, k, x, k, w, k, b, y, n), EM_KERNEL_OK,
                 "cuBLASLt's bias epilogue declined %s", em_dtype_name(dt));
    uint64_t l1 = launches(be);
    cr_assert_eq(l1 - l0, 1, "%s forward: %llu launches", em_dtype_name(dt),
                 (unsigned long long)(l1 - l0));
    em_linear_grads a = {.m = m, .n = k, .k = n, .g = g, .w = w, .x = x, .ldg = n, .ldw = k,
                         .ldx = k, .gx = gx, .gb = gb, .gw = gw, .ldgx = k, .ldgw = k};
    cr_assert_eq(be->linear_grad(dt, &a), EM_KERNEL_OK);
    *grad_launches = launches(be) - l1;
    double *dx = as_f64(dt, hx, m * k), *dw = as_f64(dt, hw, n * k), *db = as_f64(dt, hb, n);
    double *dg = as_f64(dt, hg, m * n);
    double *ry = calloc((size_t)(m * n), sizeof(double)), *rgx = calloc((size_t)(m * k), 8);
    double *rgw = calloc((size_t)(n * k), 8), *rgb = calloc((size_t)n, 8);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            ry[i * n + j] = db[j];
            rgb[j] += dg[i * n + j];
            for (int64_t t = 0; t < k; t++) {
                ry[i * n + j] += dx[i * k + t] * dw[j * k + t];  /* y = x w^T + b */
                rgx[i * k + t] += dg[i * n + j] * dw[j * k + t]; /* gx = g w */
                rgw[j * k + t] += dg[i * n + j] * dx[i * k + t]; /* gw = g^T x */
            }
        }
    const char *names[4] = {"y", "gx", "gw", "gb"};
    const void *devs[4] = {y, gx, gw, gb};
    const double *refs[4] = {ry, rgx, rgw, rgb};
    const int64_t counts[4] = {m * n, m * k, n * k, n};
    for (int i = 0; i < 4; i++) {
        double e = worst_f64(be, dt, devs[i], refs[i], counts[i]);
        cr_assert_leq(e, tol, "%s %s differs from f64 by %g", em_dtype_name(dt), names[i], e);
    }
    void *ptrs[] = {x, w, b, g, y, gx, gw, gb};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        be->free(ptrs[i]);
    void *host[] = {hx, hw, hb, hg, dx, dw, db, dg, ry, rgx, rgw, rgb};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
}

Test(cuda_launches, a_linear_with_its_bias_is_one_launch_and_its_gradients_two)
{
    cuda_or_skip();
    em_set_tf32(false);
    uint64_t f32_grads, bf16_grads;
    linear_case(EM_F32, 1e-5, &f32_grads);
    linear_case(EM_BF16, 2.0 / 128, &bf16_grads);
    cr_assert_eq(bf16_grads, 2, "bf16 gradients: %llu launches", (unsigned long long)bf16_grads);
    /* f32: 2 where cuBLASLt sums the bias gradient in f32 too, else gx, gw and the column sums */
    cr_assert(f32_grads == 2 || f32_grads == 3 || f32_grads == 4, "f32 gradients: %llu launches",
              (unsigned long long)f32_grads);
}

/* SGD with momentum over n arrays of 100 f32 on the GPU and the CPU. */
static void sgd_case(int n, uint64_t want_launches)
{
    const em_backend *be = em_backend_get(EM_CUDA), *cpu = em_backend_get(EM_CPU);
    const int64_t len = 100;
    int64_t *numel = malloc((size_t)n * sizeof *numel);
    void **p = malloc((size_t)n * sizeof *p), **g = malloc((size_t)n * sizeof *g);
    void **m = malloc((size_t)n * sizeof *m), **hp = malloc((size_t)n * sizeof *hp);
    void **hg = malloc((size_t)n * sizeof *hg), **hm = malloc((size_t)n * sizeof *hm);
    for (int i = 0; i < n; i++) {
        numel[i] = len;
        p[i] = uploaded(be, EM_F32, len, 100 + (uint64_t)i, &hp[i]);
        g[i] = uploaded(be, EM_F32, len, 5000 + (uint64_t)i, &hg[i]);
        m[i] = uploaded(be, EM_F32, len, 9000 + (uint64_t)i, &hm[i]);
    }
    em_sgd_hparams h = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
    em_array_list l = {.n = n, .numel = numel, .data = p, .grad = (const void *const *)g,
                       .state = {m}};
    em_array_list hl = {.n = n, .numel = numel, .data = hp, .grad = (const void *const *)hg,
                        .state = {hm}};
    uint64_t l0 = launches(be);
    cr_assert_eq(be->sgd_update(EM_F32, &h, &l), EM_KERNEL_OK);
    cr_assert_eq(launches(be) - l0, want_launches, "%d arrays: %llu launches", n,
                 (unsigned long long)(launches(be) - l0));
    cr_assert_eq(cpu->sgd_update(EM_F32, &h, &hl), EM_KERNEL_OK);
    for (int i = 0; i < n; i++) {
        cr_assert_leq(worst(be, EM_F32, p[i], hp[i], len), 1e-6, "parameter %d", i);
        cr_assert_leq(worst(be, EM_F32, m[i], hm[i], len), 1e-6, "momentum %d", i);
        be->free(p[i]), be->free(g[i]), be->free(m[i]);
        free(hp[i]), free(hg[i]), free(hm[i]);
    }
    free(numel), free(p), free(g), free(m), free(hp), free(hg), free(hm);
}

Test(cuda_launches, a_parameter_group_is_one_update_launch)
{
    cuda_or_skip();
    sgd_case(60, 1);
    sgd_case(700, 2);
}

/* The same grads clipped on the GPU and on the CPU. */
Test(cuda_launches, clipping_on_the_device_is_three_launches_and_no_wait)
{
    const em_backend *be = cuda_or_skip();
    em_manual_seed(3);
    em_module *gpu = em_sequential(3, em_linear_layer(30, 50, true), em_relu_layer(),
                                   em_linear_layer(50, 7, true));
    em_manual_seed(3);
    em_module *host = em_sequential(3, em_linear_layer(30, 50, true), em_relu_layer(),
                                    em_linear_layer(50, 7, true));
    cr_assert_eq(em_module_to(gpu, EM_CUDA), EM_OK, "%s", em_error());
    em_optim *og = em_sgd(gpu, (em_sgd_opts){0}), *oh = em_sgd(host, (em_sgd_opts){0});
    em_param_ref rg[4], rh[4];
    cr_assert_eq(em_module_parameters(gpu, rg, 4), 4);
    em_module_parameters(host, rh, 4);
    em_generator gen = em_generator_new(21);
    for (int i = 0; i < 4; i++) {
        em_tensor *grad = em_mul_scalar(em_randn(em_shape_of(rh[i].value), EM_F32, &gen), 3);
        rh[i].value->grad = em_retain(em_to_dtype(grad, EM_F32)); /* the scope's and the grad's */
        rg[i].value->grad = em_retain(em_to_device(grad, EM_CUDA));
    }
    em_device_counts c0, c1;
    be->counts(&c0);
    em_tensor *total = NULL;
    cr_assert_eq(em_clip_grad_norm_optim_device(og, 1.5, 2.0, &total), EM_OK, "%s", em_error());
    be->counts(&c1);
    cr_assert_eq(c1.launches - c0.launches, 3, "%llu launches",
                 (unsigned long long)(c1.launches - c0.launches));
    cr_assert_eq(c1.host_waits, c0.host_waits, "the host did not wait for the device");
    double want = em_clip_grad_norm_optim(oh, 1.5, 2.0, false);
    cr_assert(total && total->device == EM_CUDA);
    cr_assert_float_eq(em_item(total), want, 1e-12 * want, "the norm: %.17g vs %.17g",
                       em_item(total), want);
    for (int i = 0; i < 4; i++) {
        em_tensor *back = em_to_device(rg[i].value->grad, EM_CPU);
        const float *a = em_data_ptr(back), *b = em_data_ptr(rh[i].value->grad);
        for (int64_t j = 0; j < em_numel(back); j++)
            cr_assert_float_eq(a[j], b[j], 1e-6 * fabsf(b[j]) + 1e-12, "%s[%lld]", rh[i].name,
                               (long long)j);
    }
    em_release(total);
    em_optim_free(og);
    em_optim_free(oh);
    em_module_free(gpu);
    em_module_free(host);
}
