/* Kernel tests for the CPU unary, unary_grad, binary, binary_grad and where kernels: the
 * registries' formulas (backend/unary_ops_internal.h, backend/binary_ops_internal.h) as the
 * reference, finite differences, naive broadcast loops, strided inputs, integer wrapping and
 * unsupported dtypes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

/* A contiguous view of data with the given shape. */
static em_arr arr_of(void *data, em_dtype dt, int ndim, const int64_t *shape)
{
    em_arr a = {.data = data, .dtype = dt, .ndim = ndim};
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        a.shape[d] = shape[d];
        a.strides[d] = step;
        step *= shape[d];
    }
    return a;
}

static em_arr vec_of(void *data, em_dtype dt, int64_t n)
{
    return arr_of(data, dt, 1, &n);
}

static bool close_to(double got, double want, double rtol, double atol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* ---- unary forward against the formulas (backend/unary_ops_internal.h) in f64 ---- */

static const em_unary_params no_params;

static const double general_pts[] = {-3.7, -1.2, -0.4, 0.0, 0.25, 0.9, 2.6, 5.5};
static const double positive_pts[] = {0.1, 0.5, 1.0, 1.7, 2.5, 4.0, 7.25, 30.0};
static const double log1p_pts[] = {-0.9, -0.5, -0.1, 0.0, 0.3, 1.0, 4.0, 100.0};
static const double smooth_pts[] = {-2.1, -0.7, -0.3, 0.4, 1.3, 2.2, 3.1, 0.05};
#define NPTS 8

/* Test points and parameters of each op (domain-restricted where needed). */
static const double *op_points(em_unary_op op, bool for_grad)
{
    switch (op) {
    case EM_UNARY_LOG: case EM_UNARY_SQRT: case EM_UNARY_RSQRT: case EM_UNARY_POW_SCALAR:
        return positive_pts;
    case EM_UNARY_LOG1P:
        return log1p_pts;
    default:
        return for_grad ? smooth_pts : general_pts;
    }
}

static em_unary_params op_params(em_unary_op op)
{
    switch (op) {
    case EM_UNARY_LEAKY_RELU: return (em_unary_params){.negative_slope = 0.1};
    case EM_UNARY_CLAMP: return (em_unary_params){.min = -1.0, .max = 1.5};
    case EM_UNARY_ADD_SCALAR: return (em_unary_params){.scalar = 2.5};
    case EM_UNARY_MUL_SCALAR: return (em_unary_params){.scalar = -3.0};
    case EM_UNARY_POW_SCALAR: return (em_unary_params){.exponent = 2.5};
    case EM_UNARY_SOFTPLUS: return (em_unary_params){.beta = 1.5, .threshold = 3};
    case EM_UNARY_HARDTANH: return (em_unary_params){.min = -1.0, .max = 1.5};
    case EM_UNARY_ELU: return (em_unary_params){.alpha = 0.7};
    default: return no_params;
    }
}

Test(cpu_unary, every_op_f64_matches_libm)
{
    for (int op = 0; op < EM_UNARY_COUNT; op++) {
        const double *pts = op_points(op, false);
        const em_unary_params p = op_params(op);
        double y[NPTS];
        em_arr ao = vec_of(y, EM_F64, NPTS), ai = vec_of((void *)pts, EM_F64, NPTS);
        cr_assert_eq(em_cpu_unary(op, &p, &ao, &ai), EM_KERNEL_OK, "op %d", op);
        for (int i = 0; i < NPTS; i++)
            cr_assert(close_to(y[i], em_unary_value_f64(op, pts[i], &p), 1e-14, 1e-15),
                      "op %d x=%g: got %.17g want %.17g", op, pts[i], y[i],
                      em_unary_value_f64(op, pts[i], &p));
    }
}

Test(cpu_unary, every_op_f32_matches_libm)
{
    for (int op = 0; op < EM_UNARY_COUNT; op++) {
        const double *pts = op_points(op, false);
        const em_unary_params p = op_params(op);
        float x[NPTS], y[NPTS];
        for (int i = 0; i < NPTS; i++)
            x[i] = (float)pts[i];
        em_arr ao = vec_of(y, EM_F32, NPTS), ai = vec_of(x, EM_F32, NPTS);
        cr_assert_eq(em_cpu_unary(op, &p, &ao, &ai), EM_KERNEL_OK, "op %d", op);
        for (int i = 0; i < NPTS; i++) {
            double want = em_unary_value_f64(op, x[i], &p);
            cr_assert(close_to(y[i], want, 1e-5, 1e-6), "op %d x=%g: got %.9g want %.9g", op,
                      x[i], y[i], want);
        }
    }
}

Test(cpu_unary, edge_values)
{
    double x[] = {-INFINITY, -1000.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1000.0, INFINITY, NAN};
    const int n = sizeof x / sizeof x[0];
    double y[10];
    em_arr ao = vec_of(y, EM_F64, n), ai = vec_of(x, EM_F64, n);

    em_cpu_unary(EM_UNARY_ROUND, &no_params, &ao, &ai); /* half to even */
    cr_assert(y[3] == 0.0 && y[4] == 2.0 && y[5] == 2.0 && y[6] == -2.0);
    em_cpu_unary(EM_UNARY_SIGMOID, &no_params, &ao, &ai);
    cr_assert(y[0] == 0.0 && y[1] == 0.0 && y[7] == 1.0 && y[8] == 1.0 && isnan(y[9]));
    em_cpu_unary(EM_UNARY_SILU, &no_params, &ao, &ai);
    cr_assert(y[1] == 0.0 && y[7] == 1000.0 && isnan(y[9]));
    em_cpu_unary(EM_UNARY_RELU, &no_params, &ao, &ai);
    cr_assert(y[0] == 0.0 && y[1] == 0.0 && y[8] == INFINITY && isnan(y[9]));
    em_cpu_unary(EM_UNARY_CLAMP, &(em_unary_params){.min = -1, .max = 1}, &ao, &ai);
    cr_assert(y[0] == -1.0 && y[7] == 1.0 && y[3] == 0.5 && isnan(y[9]));
    em_cpu_unary(EM_UNARY_CLAMP, &(em_unary_params){.min = -INFINITY}, &ao, &ai);
    cr_assert(y[0] == -INFINITY && y[1] == -1000.0 && y[7] == 0.0);
    em_cpu_unary(EM_UNARY_SIGN, &no_params, &ao, &ai);
    cr_assert(y[0] == -1.0 && y[2] == 0.0 && y[8] == 1.0 && isnan(y[9]));
    em_cpu_unary(EM_UNARY_EXP, &no_params, &ao, &ai);
    cr_assert(y[0] == 0.0 && y[8] == INFINITY);
    em_cpu_unary(EM_UNARY_TANH, &no_params, &ao, &ai);
    cr_assert(y[1] == -1.0 && y[7] == 1.0);
    em_cpu_unary(EM_UNARY_GELU, &no_params, &ao, &ai);
    cr_assert(y[1] == -0.0 && y[7] == 1000.0);
}

/* Strided input (a transposed 3x4 view) and a large run that takes the threaded path. */
Test(cpu_unary, strided_and_threaded)
{
    double src[12], y[12];
    for (int i = 0; i < 12; i++)
        src[i] = i - 5.5;
    em_arr ai = {.data = src, .dtype = EM_F64, .ndim = 2, .shape = {4, 3}, .strides = {1, 4}};
    em_arr ao = arr_of(y, EM_F64, 2, (int64_t[]){4, 3});
    cr_assert_eq(em_cpu_unary(EM_UNARY_SQUARE, &no_params, &ao, &ai), EM_KERNEL_OK);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++)
            cr_assert_eq(y[r * 3 + c], src[c * 4 + r] * src[c * 4 + r]);

    const int64_t n = 100003;
    float *x = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i % 17) - 8.0f;
    em_arr bo = vec_of(z, EM_F32, n), bi = vec_of(x, EM_F32, n);
    cr_assert_eq(em_cpu_unary(EM_UNARY_RELU, &no_params, &bo, &bi), EM_KERNEL_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(z[i], x[i] > 0 ? x[i] : 0.0f);
    cr_assert_eq(em_cpu_unary(EM_UNARY_ADD_SCALAR, &(em_unary_params){.scalar = 0.5}, &bi, &bi),
                 EM_KERNEL_OK); /* in place */
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(x[i], (float)(i % 17) - 7.5f);
    free(x);
    free(z);
}

Test(cpu_unary, f16_bf16_compute_in_f32)
{
    const em_dtype dts[] = {EM_F16, EM_BF16};
    const em_unary_op ops[] = {EM_UNARY_EXP, EM_UNARY_GELU, EM_UNARY_TANH, EM_UNARY_NEG};
    for (int t = 0; t < 2; t++) {
        uint16_t x[NPTS], y[NPTS];
        for (int i = 0; i < NPTS; i++)
            x[i] = dts[t] == EM_F16 ? em_f32_to_f16((float)general_pts[i])
                                    : em_f32_to_bf16((float)general_pts[i]);
        for (int k = 0; k < 4; k++) {
            em_arr ao = vec_of(y, dts[t], NPTS), ai = vec_of(x, dts[t], NPTS);
            cr_assert_eq(em_cpu_unary(ops[k], &no_params, &ao, &ai), EM_KERNEL_OK);
            for (int i = 0; i < NPTS; i++) {
                float xf = dts[t] == EM_F16 ? em_f16_to_f32(x[i]) : em_bf16_to_f32(x[i]);
                float yf = dts[t] == EM_F16 ? em_f16_to_f32(y[i]) : em_bf16_to_f32(y[i]);
                double want = em_unary_value_f64(ops[k], xf, &no_params);
                double tol = dts[t] == EM_F16 ? 1e-3 : 8e-3;
                cr_assert(close_to(yf, want, tol, 1e-4), "dt %d op %d: %g vs %g", dts[t],
                          ops[k], yf, want);
            }
        }
    }
}

Test(cpu_unary, integer_ops_wrap)
{
    int8_t x8[] = {-128, -5, 0, 7, 127};
    int8_t y8[5];
    em_arr o8 = vec_of(y8, EM_I8, 5), i8 = vec_of(x8, EM_I8, 5);
    cr_assert_eq(em_cpu_unary(EM_UNARY_NEG, &no_params, &o8, &i8), EM_KERNEL_OK);
    cr_assert(y8[0] == -128 && y8[1] == 5 && y8[2] == 0 && y8[3] == -7 && y8[4] == -127);
    em_cpu_unary(EM_UNARY_ABS, &no_params, &o8, &i8);
    cr_assert(y8[0] == -128 && y8[1] == 5 && y8[4] == 127);
    em_cpu_unary(EM_UNARY_SIGN, &no_params, &o8, &i8);
    cr_assert(y8[0] == -1 && y8[2] == 0 && y8[3] == 1);
    em_cpu_unary(EM_UNARY_SQUARE, &no_params, &o8, &i8);
    cr_assert(y8[1] == 25 && y8[3] == 49 && y8[4] == 1); /* 127^2 = 16129 wraps to 1 */
    em_cpu_unary(EM_UNARY_CLAMP, &(em_unary_params){.min = -2.5, .max = 6.5}, &o8, &i8);
    cr_assert(y8[0] == -2 && y8[1] == -2 && y8[2] == 0 && y8[3] == 6 && y8[4] == 6);
    em_cpu_unary(EM_UNARY_RELU, &no_params, &o8, &i8);
    cr_assert(y8[0] == 0 && y8[3] == 7);

    uint8_t xu[] = {0, 3, 200};
    uint8_t yu[3];
    em_arr ou = vec_of(yu, EM_U8, 3), iu = vec_of(xu, EM_U8, 3);
    em_cpu_unary(EM_UNARY_ADD_SCALAR, &(em_unary_params){.scalar = 100}, &ou, &iu);
    cr_assert(yu[0] == 100 && yu[1] == 103 && yu[2] == 44);
    em_cpu_unary(EM_UNARY_NEG, &no_params, &ou, &iu);
    cr_assert(yu[0] == 0 && yu[1] == 253 && yu[2] == 56);

    int32_t x32[] = {INT32_MAX, -3, 4};
    int32_t y32[3];
    em_arr o32 = vec_of(y32, EM_I32, 3), i32 = vec_of(x32, EM_I32, 3);
    em_cpu_unary(EM_UNARY_MUL_SCALAR, &(em_unary_params){.scalar = 2}, &o32, &i32);
    cr_assert(y32[0] == -2 && y32[1] == -6 && y32[2] == 8);

    int64_t x64[] = {INT64_MIN, -9, 1LL << 40};
    int64_t y64[3];
    em_arr o64 = vec_of(y64, EM_I64, 3), i64 = vec_of(x64, EM_I64, 3);
    em_cpu_unary(EM_UNARY_ADD_SCALAR, &(em_unary_params){.scalar = -1}, &o64, &i64);
    cr_assert(y64[0] == INT64_MAX && y64[1] == -10 && y64[2] == (1LL << 40) - 1);
    em_cpu_unary(EM_UNARY_ABS, &no_params, &o64, &i64);
    cr_assert(y64[0] == INT64_MIN && y64[1] == 9);
}

Test(cpu_unary, unsupported_combinations)
{
    int32_t xi[4] = {1, 2, 3, 4}, yi[4];
    float xf[4] = {1, 2, 3, 4};
    double yd[4];
    uint8_t xb[4] = {0, 1, 0, 1}, yb[4];
    em_arr oi = vec_of(yi, EM_I32, 4), ii = vec_of(xi, EM_I32, 4);
    em_arr of = vec_of(xf, EM_F32, 4), od = vec_of(yd, EM_F64, 4);
    em_arr ob = vec_of(yb, EM_BOOL, 4), ib = vec_of(xb, EM_BOOL, 4);
    cr_assert_eq(em_cpu_unary(EM_UNARY_EXP, &no_params, &oi, &ii), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_unary(EM_UNARY_SQRT, &no_params, &oi, &ii), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_unary(EM_UNARY_NEG, &no_params, &od, &of), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_unary(EM_UNARY_NEG, &no_params, &ob, &ib), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_unary((em_unary_op)EM_UNARY_COUNT, &no_params, &of, &of),
                 EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_unary_grad(EM_UNARY_NEG, &no_params, &oi, &ii, &ii, &ii),
                 EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_unary_grad(EM_UNARY_LOG, &no_params, &of, &of, NULL, &of),
                 EM_KERNEL_UNSUPPORTED);
}

/* ---- unary gradients against central differences of the forward kernel ---- */

static bool zero_grad_op(em_unary_op op)
{
    return op == EM_UNARY_SIGN || op == EM_UNARY_FLOOR || op == EM_UNARY_CEIL ||
           op == EM_UNARY_ROUND;
}

static void forward_f64(em_unary_op op, const em_unary_params *p, const double *x, double *y)
{
    em_arr ao = vec_of(y, EM_F64, NPTS), ai = vec_of((void *)x, EM_F64, NPTS);
    cr_assert_eq(em_cpu_unary(op, p, &ao, &ai), EM_KERNEL_OK);
}

Test(cpu_unary_grad, every_op_f64_matches_finite_differences)
{
    const double h = 1e-6;
    for (int op = 0; op < EM_UNARY_COUNT; op++) {
        const double *pts = op_points(op, true);
        const em_unary_params p = op_params(op);
        double y[NPTS], xp[NPTS], xm[NPTS], yp[NPTS], ym[NPTS], gy[NPTS], gx[NPTS];
        for (int i = 0; i < NPTS; i++) {
            xp[i] = pts[i] + h;
            xm[i] = pts[i] - h;
            gy[i] = 0.7 - 0.3 * i;
        }
        forward_f64(op, &p, pts, y);
        forward_f64(op, &p, xp, yp);
        forward_f64(op, &p, xm, ym);
        em_arr agx = vec_of(gx, EM_F64, NPTS), agy = vec_of(gy, EM_F64, NPTS);
        em_arr ax = vec_of((void *)pts, EM_F64, NPTS), ay = vec_of(y, EM_F64, NPTS);
        for (int with_y = 0; with_y < 2; with_y++) { /* y given, and x alone */
            memset(gx, 0xff, sizeof gx);
            cr_assert_eq(em_cpu_unary_grad(op, &p, &agx, &agy, &ax, with_y ? &ay : NULL),
                         EM_KERNEL_OK, "op %d", op);
            for (int i = 0; i < NPTS; i++) {
                double want = zero_grad_op(op) ? 0.0 : gy[i] * (yp[i] - ym[i]) / (2 * h);
                cr_assert(close_to(gx[i], want, 1e-6, 1e-7), "op %d x=%g y? %d: %.12g vs %.12g",
                          op, pts[i], with_y, gx[i], want);
            }
        }
    }
}

Test(cpu_unary_grad, f32_matches_f64)
{
    for (int op = 0; op < EM_UNARY_COUNT; op++) {
        const double *pts = op_points(op, true);
        const em_unary_params p = op_params(op);
        double xd[NPTS], yd[NPTS], gyd[NPTS], gxd[NPTS];
        float xf[NPTS], yf[NPTS], gyf[NPTS], gxf[NPTS];
        for (int i = 0; i < NPTS; i++) {
            xf[i] = (float)pts[i];
            xd[i] = xf[i];
            gyf[i] = (float)(1.25 - 0.25 * i);
            gyd[i] = gyf[i];
        }
        forward_f64(op, &p, xd, yd);
        em_arr ao = vec_of(yf, EM_F32, NPTS), ai = vec_of(xf, EM_F32, NPTS);
        em_cpu_unary(op, &p, &ao, &ai);
        em_arr g64 = vec_of(gxd, EM_F64, NPTS), gy64 = vec_of(gyd, EM_F64, NPTS);
        em_arr x64 = vec_of(xd, EM_F64, NPTS), y64 = vec_of(yd, EM_F64, NPTS);
        em_arr g32 = vec_of(gxf, EM_F32, NPTS), gy32 = vec_of(gyf, EM_F32, NPTS);
        cr_assert_eq(em_cpu_unary_grad(op, &p, &g64, &gy64, &x64, &y64), EM_KERNEL_OK);
        cr_assert_eq(em_cpu_unary_grad(op, &p, &g32, &gy32, &ai, &ao), EM_KERNEL_OK);
        for (int i = 0; i < NPTS; i++)
            cr_assert(close_to(gxf[i], gxd[i], 1e-5, 1e-6), "op %d: %g vs %g", op, gxf[i],
                      gxd[i]);
    }
}

Test(cpu_unary_grad, kinks_follow_pytorch)
{
    double x[] = {0.0, -1.0, 1.5, 2.0, -2.0};
    double gy[] = {1, 1, 1, 1, 1}, gx[5];
    em_arr agx = vec_of(gx, EM_F64, 5), agy = vec_of(gy, EM_F64, 5), ax = vec_of(x, EM_F64, 5);
    em_cpu_unary_grad(EM_UNARY_RELU, &no_params, &agx, &agy, &ax, NULL);
    cr_assert(gx[0] == 0 && gx[1] == 0 && gx[2] == 1);
    em_cpu_unary_grad(EM_UNARY_ABS, &no_params, &agx, &agy, &ax, NULL);
    cr_assert(gx[0] == 0 && gx[1] == -1 && gx[2] == 1);
    em_cpu_unary_grad(EM_UNARY_CLAMP, &(em_unary_params){.min = -1.0, .max = 1.5}, &agx, &agy, &ax,
                      NULL); /* 0 at the bounds, as PyTorch 2.x's */
    cr_assert(gx[0] == 1 && gx[1] == 0 && gx[2] == 0 && gx[3] == 0 && gx[4] == 0);
    em_cpu_unary_grad(EM_UNARY_LEAKY_RELU, &(em_unary_params){.negative_slope = 0.2}, &agx, &agy,
                      &ax, NULL);
    cr_assert(gx[0] == 0.2 && gx[1] == 0.2 && gx[2] == 1);
    em_cpu_unary_grad(EM_UNARY_POW_SCALAR, &(em_unary_params){.exponent = 0.0}, &agx, &agy, &ax,
                      NULL);
    cr_assert(gx[0] == 0 && gx[1] == 0);
    gy[0] = INFINITY;
    em_cpu_unary_grad(EM_UNARY_FLOOR, &no_params, &agx, &agy, &ax, NULL);
    cr_assert(gx[0] == 0 && gx[3] == 0);
    gy[0] = 1;
    em_cpu_unary_grad(EM_UNARY_SOFTSIGN, &no_params, &agx, &agy, &ax, NULL); /* 1 / (1 + |x|)^2 */
    cr_assert(gx[0] == 1 && gx[1] == 0.25 && gx[2] == 1 / 6.25 && gx[3] == 1 / 9.0);
    /* x = 0, -1, 1.5, 2, -2: hardtanh stops at its bounds, as clamp does (above) */
    em_cpu_unary_grad(EM_UNARY_HARDTANH, &(em_unary_params){.min = -1.0, .max = 1.5}, &agx, &agy,
                      &ax, NULL);
    cr_assert(gx[0] == 1 && gx[1] == 0 && gx[2] == 0 && gx[3] == 0 && gx[4] == 0);
    em_cpu_unary_grad(EM_UNARY_ELU, &(em_unary_params){.alpha = 0.7}, &agx, &agy, &ax, NULL);
    cr_assert(gx[0] == 0.7 && fabs(gx[1] - 0.7 * exp(-1.0)) < 1e-15 && gx[2] == 1); /* at 0: alpha */
    em_cpu_unary_grad(EM_UNARY_SELU, &no_params, &agx, &agy, &ax, NULL); /* scale alpha at 0 */
    cr_assert(fabs(gx[0] - EM_SELU_SCALE * EM_SELU_ALPHA) < 1e-15 && gx[2] == EM_SELU_SCALE);
    /* softplus at beta x = threshold exactly (1.5 * 2 = 3) still takes the smooth branch */
    em_cpu_unary_grad(EM_UNARY_SOFTPLUS, &(em_unary_params){.beta = 1.5, .threshold = 3}, &agx,
                      &agy, &ax, NULL);
    cr_assert(gx[0] == 0.5 && fabs(gx[3] - 1 / (1 + exp(-3.0))) < 1e-15);
    double kinks[] = {-3.0, 3.0, -3.5, 0.0, 1.0}; /* hardswish: x / 3 + 1/2 on (-3, 3) */
    em_arr ak = vec_of(kinks, EM_F64, 5);
    em_cpu_unary_grad(EM_UNARY_HARDSWISH, &no_params, &agx, &agy, &ak, NULL);
    cr_assert(gx[0] == 0 && gx[1] == 1 && gx[2] == 0 && gx[3] == 0.5 && gx[4] == 0.5 + 1 / 3.0);
}

Test(cpu_unary_grad, broadcast_gy_and_bf16)
{
    double x[6] = {-1, 0.5, 2, 3, -0.25, 1}, gy = 2.0, gx[6];
    em_arr agx = vec_of(gx, EM_F64, 6), ax = vec_of(x, EM_F64, 6);
    em_arr agy = {.data = &gy, .dtype = EM_F64, .ndim = 1, .shape = {6}, .strides = {0}};
    cr_assert_eq(em_cpu_unary_grad(EM_UNARY_SQUARE, &no_params, &agx, &agy, &ax, NULL),
                 EM_KERNEL_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(gx[i], 4 * x[i]);

    uint16_t xb[6], gyb[6], gxb[6];
    for (int i = 0; i < 6; i++) {
        xb[i] = em_f32_to_bf16((float)x[i]);
        gyb[i] = em_f32_to_bf16(1.0f);
    }
    em_arr bgx = vec_of(gxb, EM_BF16, 6), bgy = vec_of(gyb, EM_BF16, 6), bx = vec_of(xb, EM_BF16, 6);
    cr_assert_eq(em_cpu_unary_grad(EM_UNARY_SIGMOID, &no_params, &bgx, &bgy, &bx, NULL),
                 EM_KERNEL_OK);
    for (int i = 0; i < 6; i++) {
        double s = 1 / (1 + exp(-x[i]));
        cr_assert(close_to(em_bf16_to_f32(gxb[i]), s * (1 - s), 8e-3, 1e-4));
    }
}

/* ---- binary against the formulas (backend/binary_ops_internal.h, checked in
 * tests/backend/test_op_formulas.c) ---- */

/* Value of a broadcast operand for output (r, c): b_kind 0 full (N,C), 1 row (C), 2 column
 * (N,1), 3 scalar; 4 full but stored transposed. */
static em_arr operand(int kind, double *store, int64_t N, int64_t C)
{
    em_arr a = {.data = store, .dtype = EM_F64, .ndim = 2, .shape = {N, C}};
    const int64_t st[5][2] = {{C, 1}, {0, 1}, {1, 0}, {0, 0}, {1, N}};
    a.strides[0] = st[kind][0];
    a.strides[1] = st[kind][1];
    return a;
}

static double operand_at(const em_arr *a, int64_t r, int64_t c)
{
    return ((const double *)a->data)[r * a->strides[0] + c * a->strides[1]];
}

Test(cpu_binary, every_op_with_broadcasting_and_strides)
{
    const int64_t sizes[][2] = {{7, 5}, {300, 130}}; /* the second runs threaded */
    for (int sz = 0; sz < 2; sz++) {
        const int64_t N = sizes[sz][0], C = sizes[sz][1];
        double *sa = malloc(N * C * sizeof(double)), *sb = malloc(N * C * sizeof(double));
        double *y = malloc(N * C * sizeof(double));
        uint8_t *yb = malloc(N * C);
        for (int64_t i = 0; i < N * C; i++) {
            sa[i] = 0.25 + (double)((i * 37) % 23) / 7.0;
            sb[i] = 0.5 + (double)((i * 11) % 19) / 5.0;
        }
        sb[3] = sa[3];      /* equal pairs for the comparisons */
        sa[N * C - 1] = NAN; /* NaN for maximum/minimum */
        for (int op = 0; op < EM_BINARY_COUNT; op++)
            for (int ka = 0; ka < 5; ka++)
                for (int kb = 0; kb < 5; kb++) {
                    em_arr a = operand(ka, sa, N, C), b = operand(kb, sb, N, C);
                    bool cmp = em_binary_is_compare(op);
                    em_arr o = arr_of(cmp ? (void *)yb : y, cmp ? EM_BOOL : EM_F64, 2,
                                      (int64_t[]){N, C});
                    cr_assert_eq(em_cpu_binary(op, &o, &a, &b), EM_KERNEL_OK);
                    for (int64_t r = 0; r < N; r++)
                        for (int64_t c = 0; c < C; c++) {
                            double want = em_binary_value_f64(op, operand_at(&a, r, c),
                                                              operand_at(&b, r, c));
                            double got = cmp ? yb[r * C + c] : y[r * C + c];
                            cr_assert(close_to(got, want, 1e-15, 0),
                                      "op %d kinds %d/%d at (%ld,%ld): %g vs %g", op, ka, kb,
                                      (long)r, (long)c, got, want);
                        }
                }
        free(sa);
        free(sb);
        free(y);
        free(yb);
    }
}

Test(cpu_binary, f32_bias_add_and_scalar)
{
    const int64_t N = 400, C = 96;
    float *x = malloc(N * C * sizeof(float)), *y = malloc(N * C * sizeof(float));
    float bias[96], s = 3.0f;
    for (int64_t i = 0; i < N * C; i++)
        x[i] = (float)(i % 101) * 0.5f;
    for (int c = 0; c < C; c++)
        bias[c] = (float)c - 40.0f;
    em_arr o = arr_of(y, EM_F32, 2, (int64_t[]){N, C}), a = arr_of(x, EM_F32, 2, (int64_t[]){N, C});
    em_arr b = {.data = bias, .dtype = EM_F32, .ndim = 2, .shape = {N, C}, .strides = {0, 1}};
    cr_assert_eq(em_cpu_binary(EM_BINARY_ADD, &o, &a, &b), EM_KERNEL_OK);
    for (int64_t i = 0; i < N * C; i++)
        cr_assert_eq(y[i], x[i] + bias[i % C]);
    em_arr sc = {.data = &s, .dtype = EM_F32, .ndim = 2, .shape = {N, C}, .strides = {0, 0}};
    cr_assert_eq(em_cpu_binary(EM_BINARY_DIV, &o, &sc, &a), EM_KERNEL_OK);
    for (int64_t i = 0; i < N * C; i++)
        cr_assert_eq(y[i], s / x[i]);
    cr_assert_eq(em_cpu_binary(EM_BINARY_MUL, &a, &a, &sc), EM_KERNEL_OK); /* in place */
    for (int64_t i = 0; i < N * C; i++)
        cr_assert_eq(x[i], (float)(i % 101) * 0.5f * 3.0f);
    free(x);
    free(y);
}

Test(cpu_binary, integers_wrap_and_compare)
{
    int8_t a8[] = {100, -100, 5, -128}, b8[] = {100, -100, -7, 1}, y8[4];
    em_arr o = vec_of(y8, EM_I8, 4), a = vec_of(a8, EM_I8, 4), b = vec_of(b8, EM_I8, 4);
    em_cpu_binary(EM_BINARY_ADD, &o, &a, &b);
    cr_assert(y8[0] == -56 && y8[1] == 56 && y8[2] == -2 && y8[3] == -127);
    em_cpu_binary(EM_BINARY_SUB, &o, &a, &b);
    cr_assert(y8[2] == 12 && y8[3] == 127);
    em_cpu_binary(EM_BINARY_MUL, &o, &a, &b);
    cr_assert(y8[0] == 16 && y8[2] == -35);
    em_cpu_binary(EM_BINARY_MAXIMUM, &o, &a, &b);
    cr_assert(y8[2] == 5 && y8[3] == 1);
    em_cpu_binary(EM_BINARY_MINIMUM, &o, &a, &b);
    cr_assert(y8[2] == -7 && y8[3] == -128);
    uint8_t r[4];
    em_arr ob = vec_of(r, EM_BOOL, 4);
    cr_assert_eq(em_cpu_binary(EM_BINARY_GE, &ob, &a, &b), EM_KERNEL_OK);
    cr_assert(r[0] == 1 && r[1] == 1 && r[2] == 1 && r[3] == 0);

    int64_t a64[] = {INT64_MAX, 3}, b64[] = {1, -3}, y64[2];
    em_arr o64 = vec_of(y64, EM_I64, 2), x64 = vec_of(a64, EM_I64, 2), z64 = vec_of(b64, EM_I64, 2);
    em_cpu_binary(EM_BINARY_ADD, &o64, &x64, &z64);
    cr_assert(y64[0] == INT64_MIN && y64[1] == 0);

    uint8_t ba[] = {0, 1, 1, 0}, bb[] = {0, 1, 0, 1};
    em_arr xa = vec_of(ba, EM_BOOL, 4), xb = vec_of(bb, EM_BOOL, 4);
    cr_assert_eq(em_cpu_binary(EM_BINARY_EQ, &ob, &xa, &xb), EM_KERNEL_OK);
    cr_assert(r[0] == 1 && r[1] == 1 && r[2] == 0 && r[3] == 0);
    cr_assert_eq(em_cpu_binary(EM_BINARY_ADD, &xa, &xa, &xb), EM_KERNEL_UNSUPPORTED);

    float nan_a[] = {NAN, 1.0f}, nan_b[] = {NAN, NAN};
    em_arr fa = vec_of(nan_a, EM_F32, 2), fb = vec_of(nan_b, EM_F32, 2), o2 = vec_of(r, EM_BOOL, 2);
    em_cpu_binary(EM_BINARY_EQ, &o2, &fa, &fb);
    cr_assert(r[0] == 0 && r[1] == 0);
    em_cpu_binary(EM_BINARY_NE, &o2, &fa, &fb);
    cr_assert(r[0] == 1 && r[1] == 1);
}

Test(cpu_binary, low_precision_and_unsupported)
{
    uint16_t a[5], b[5], y[5];
    const float av[] = {1.5f, -2.25f, 1000.0f, 0.1f, 3.0f}, bv[] = {0.5f, 4.0f, 0.125f, 0.2f, 3.0f};
    for (int t = 0; t < 2; t++) {
        em_dtype dt = t ? EM_BF16 : EM_F16;
        uint16_t (*to)(float) = t ? em_f32_to_bf16 : em_f32_to_f16;
        float (*from)(uint16_t) = t ? em_bf16_to_f32 : em_f16_to_f32;
        for (int i = 0; i < 5; i++) {
            a[i] = to(av[i]);
            b[i] = to(bv[i]);
        }
        em_arr o = vec_of(y, dt, 5), xa = vec_of(a, dt, 5), xb = vec_of(b, dt, 5);
        cr_assert_eq(em_cpu_binary(EM_BINARY_MUL, &o, &xa, &xb), EM_KERNEL_OK);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(y[i], to(from(a[i]) * from(b[i])));
        uint8_t r[5];
        em_arr ob = vec_of(r, EM_BOOL, 5);
        cr_assert_eq(em_cpu_binary(EM_BINARY_LT, &ob, &xa, &xb), EM_KERNEL_OK);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(r[i], from(a[i]) < from(b[i]));
    }
    int32_t i1[2] = {6, 3}, i2[2] = {2, 2}, iy[2];
    float f1[2] = {1, 2};
    em_arr oi = vec_of(iy, EM_I32, 2), x1 = vec_of(i1, EM_I32, 2), x2 = vec_of(i2, EM_I32, 2);
    em_arr xf = vec_of(f1, EM_F32, 2);
    cr_assert_eq(em_cpu_binary(EM_BINARY_DIV, &oi, &x1, &x2), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary(EM_BINARY_POW, &oi, &x1, &x2), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary(EM_BINARY_ADD, &oi, &x1, &xf), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary(EM_BINARY_EQ, &oi, &x1, &x2), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary(EM_BINARY_ADD, &xf, &x1, &x2), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary((em_binary_op)EM_BINARY_COUNT, &xf, &xf, &xf),
                 EM_KERNEL_UNSUPPORTED);
}

/* ---- binary gradients against central differences of the forward kernel ---- */

/* Points where every op is smooth: a, b > 0 (pow) and a != b (maximum, minimum). */
static const double grad_pts_a[NPTS] = {0.7, 1.9, 2.6, 0.3, 3.3, 1.1, 0.45, 2.2};
static const double grad_pts_b[NPTS] = {1.3, 0.6, 2.9, 1.7, 0.8, 2.4, 1.5, 0.25};

static void binary_f64(em_binary_op op, const double *a, const double *b, double *y)
{
    em_arr o = vec_of(y, EM_F64, NPTS), xa = vec_of((void *)a, EM_F64, NPTS),
           xb = vec_of((void *)b, EM_F64, NPTS);
    cr_assert_eq(em_cpu_binary(op, &o, &xa, &xb), EM_KERNEL_OK);
}

/* gx of op by a or b (wrt_b) at the NPTS points a, b, with y = a op b; contiguous f64. */
static void binary_grad_f64(em_binary_op op, bool wrt_b, const double *g, const double *a,
                            const double *b, double *gx)
{
    double y[NPTS];
    binary_f64(op, a, b, y);
    em_arr agx = vec_of(gx, EM_F64, NPTS), ag = vec_of((void *)g, EM_F64, NPTS),
           aa = vec_of((void *)a, EM_F64, NPTS), ab = vec_of((void *)b, EM_F64, NPTS),
           ay = vec_of(y, EM_F64, NPTS);
    cr_assert_eq(em_cpu_binary_grad(op, wrt_b, &agx, &ag, &aa, &ab, &ay), EM_KERNEL_OK,
                 "op %d", op);
}

Test(cpu_binary_grad, every_op_f64_matches_finite_differences)
{
    const double h = 1e-6;
    double g[NPTS];
    for (int i = 0; i < NPTS; i++)
        g[i] = 0.7 - 0.3 * i;
    for (int op = 0; op < EM_BINARY_COUNT; op++) {
        if (em_binary_is_compare(op))
            continue;
        for (int wrt_b = 0; wrt_b < 2; wrt_b++) {
            const double *x = wrt_b ? grad_pts_b : grad_pts_a;
            double xp[NPTS], xm[NPTS], yp[NPTS], ym[NPTS], gx[NPTS];
            for (int i = 0; i < NPTS; i++) {
                xp[i] = x[i] + h;
                xm[i] = x[i] - h;
            }
            binary_f64(op, wrt_b ? grad_pts_a : xp, wrt_b ? xp : grad_pts_b, yp);
            binary_f64(op, wrt_b ? grad_pts_a : xm, wrt_b ? xm : grad_pts_b, ym);
            binary_grad_f64(op, wrt_b, g, grad_pts_a, grad_pts_b, gx);
            for (int i = 0; i < NPTS; i++) {
                const double want = g[i] * (yp[i] - ym[i]) / (2 * h);
                cr_assert(close_to(gx[i], want, 1e-6, 1e-7), "op %d by %c at %d: %.12g vs %.12g",
                          op, wrt_b ? 'b' : 'a', i, gx[i], want);
                if (em_binary_grad_is_g(op, wrt_b)) /* the rule that skips the kernel */
                    cr_assert_eq(gx[i], g[i], "op %d by %c", op, wrt_b ? 'b' : 'a');
            }
        }
    }
}

/* PyTorch's rules where a derivative has none: pow's by a is 0 at b = 0, by b 0 at a = 0 <= b
 * (and y log a at a = 0 > b); maximum/minimum split g on a tie and give it to b where a is NaN. */
Test(cpu_binary_grad, kinks_follow_pytorch)
{
    const double g[NPTS] = {1, 1, 1, 1, 2, 2, 2, 2};
    const double pa[NPTS] = {0, 0, 0, 2, 1.5, NAN, 3, 1}, pb[NPTS] = {0, 2, -1, 0, 1.5, 1, 1, 4};
    double ga[NPTS], gb[NPTS];
    binary_grad_f64(EM_BINARY_POW, false, g, pa, pb, ga);
    binary_grad_f64(EM_BINARY_POW, true, g, pa, pb, gb);
    cr_assert(ga[0] == 0 && ga[1] == 0 && ga[3] == 0, "pow by a at b = 0, 0^1: %g %g %g", ga[0],
              ga[1], ga[3]);
    cr_assert(gb[0] == 0 && gb[1] == 0 && gb[2] == -INFINITY && gb[3] == log(2.0),
              "pow by b: %g %g %g %g", gb[0], gb[1], gb[2], gb[3]);
    binary_grad_f64(EM_BINARY_MAXIMUM, false, g, pa, pb, ga);
    binary_grad_f64(EM_BINARY_MAXIMUM, true, g, pa, pb, gb);
    cr_assert(ga[4] == 1 && gb[4] == 1 && ga[5] == 0 && gb[5] == 2 && ga[6] == 2 && gb[6] == 0 &&
              ga[7] == 0 && gb[7] == 2);
    binary_grad_f64(EM_BINARY_MINIMUM, false, g, pa, pb, ga);
    binary_grad_f64(EM_BINARY_MINIMUM, true, g, pa, pb, gb);
    cr_assert(ga[4] == 1 && gb[4] == 1 && ga[5] == 0 && gb[5] == 2 && ga[6] == 0 && gb[6] == 2 &&
              ga[7] == 2 && gb[7] == 0);
    binary_grad_f64(EM_BINARY_DIV, true, g, grad_pts_a, grad_pts_b, gb); /* -g y / b */
    for (int i = 0; i < NPTS; i++)
        cr_assert_eq(gb[i], -(g[i] * (grad_pts_a[i] / grad_pts_b[i]) / grad_pts_b[i]));
}

Test(cpu_binary_grad, f32_matches_f64)
{
    for (int op = 0; op < EM_BINARY_COUNT; op++) {
        if (em_binary_is_compare(op))
            continue;
        for (int wrt_b = 0; wrt_b < 2; wrt_b++) {
            float af[NPTS], bf[NPTS], gf[NPTS], yf[NPTS], gxf[NPTS];
            double ad[NPTS], bd[NPTS], gd[NPTS], gxd[NPTS];
            for (int i = 0; i < NPTS; i++) {
                af[i] = (float)grad_pts_a[i];
                bf[i] = (float)grad_pts_b[i];
                gf[i] = (float)(1.25 - 0.25 * i);
                ad[i] = af[i];
                bd[i] = bf[i];
                gd[i] = gf[i];
            }
            em_arr o = vec_of(yf, EM_F32, NPTS), xa = vec_of(af, EM_F32, NPTS),
                   xb = vec_of(bf, EM_F32, NPTS), ag = vec_of(gf, EM_F32, NPTS),
                   agx = vec_of(gxf, EM_F32, NPTS);
            cr_assert_eq(em_cpu_binary(op, &o, &xa, &xb), EM_KERNEL_OK);
            cr_assert_eq(em_cpu_binary_grad(op, wrt_b, &agx, &ag, &xa, &xb, &o), EM_KERNEL_OK);
            binary_grad_f64(op, wrt_b, gd, ad, bd, gxd);
            for (int i = 0; i < NPTS; i++)
                cr_assert(close_to(gxf[i], gxd[i], 1e-5, 1e-6), "op %d by %d: %g vs %g", op,
                          wrt_b, gxf[i], gxd[i]);
        }
    }
}

/* Broadcast, transposed and threaded operands, f64 and bf16 (staged in f32 blocks): each element
 * the formula's value at its operands, the bf16 one rounded once from f32. Layouts: a dense g, a
 * transposed and b a row; then g one element (a sum's gradient), a dense and b a column. */
Test(cpu_binary_grad, broadcast_strided_threaded_and_bf16)
{
    const int64_t N = 300, C = 130; /* threaded */
    double *a = malloc(N * C * sizeof(double)), *g = malloc(N * C * sizeof(double));
    double *y = malloc(N * C * sizeof(double)), *gx = malloc(N * C * sizeof(double));
    double b[300], g1 = -1.75;
    for (int64_t i = 0; i < N * C; i++) {
        a[i] = 0.25 + (double)((i * 37) % 23) / 7.0;
        g[i] = (double)((i * 11) % 19) / 5.0 - 1.5;
    }
    for (int r = 0; r < N; r++)
        b[r] = 0.5 + r % 7;
    const em_arr layouts[2][3] = {
        {arr_of(g, EM_F64, 2, (int64_t[]){N, C}),
         {.data = a, .dtype = EM_F64, .ndim = 2, .shape = {N, C}, .strides = {1, N}},
         {.data = b, .dtype = EM_F64, .ndim = 2, .shape = {N, C}, .strides = {0, 1}}},
        {{.data = &g1, .dtype = EM_F64, .ndim = 2, .shape = {N, C}, .strides = {0, 0}},
         arr_of(a, EM_F64, 2, (int64_t[]){N, C}),
         {.data = b, .dtype = EM_F64, .ndim = 2, .shape = {N, C}, .strides = {1, 0}}}};
    em_arr ay = arr_of(y, EM_F64, 2, (int64_t[]){N, C});
    em_arr agx = arr_of(gx, EM_F64, 2, (int64_t[]){N, C});
    const em_binary_op ops[] = {EM_BINARY_MUL, EM_BINARY_DIV, EM_BINARY_POW, EM_BINARY_MAXIMUM};
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 4; k++)
            for (int wrt_b = 0; wrt_b < 2; wrt_b++) {
                const em_arr *ag = &layouts[l][0], *aa = &layouts[l][1], *ab = &layouts[l][2];
                cr_assert_eq(em_cpu_binary(ops[k], &ay, aa, ab), EM_KERNEL_OK);
                cr_assert_eq(em_cpu_binary_grad(ops[k], wrt_b, &agx, ag, aa, ab, &ay),
                             EM_KERNEL_OK);
                for (int64_t r = 0; r < N; r++)
                    for (int64_t c = 0; c < C; c++) {
                        const double want = em_binary_grad_value_f64(
                            ops[k], wrt_b, operand_at(ag, r, c), operand_at(aa, r, c),
                            operand_at(ab, r, c), y[r * C + c]);
                        cr_assert_eq(gx[r * C + c], want, "layout %d op %d by %d at (%ld, %ld)",
                                     l, ops[k], wrt_b, (long)r, (long)c);
                    }
            }

    uint16_t ab16[6], bb16, gb16[6], yb16[6], gxb16[6];
    const float av[6] = {0.5f, -1.25f, 3.0f, 2.0f, -0.75f, 1.5f};
    for (int i = 0; i < 6; i++) {
        ab16[i] = em_f32_to_bf16(av[i]);
        gb16[i] = em_f32_to_bf16(1.0f - 0.375f * (float)i);
    }
    bb16 = em_f32_to_bf16(1.5f);
    em_arr xa = vec_of(ab16, EM_BF16, 6), xg = vec_of(gb16, EM_BF16, 6),
           xy = vec_of(yb16, EM_BF16, 6), xgx = vec_of(gxb16, EM_BF16, 6);
    em_arr xb = {.data = &bb16, .dtype = EM_BF16, .ndim = 1, .shape = {6}, .strides = {0}};
    const em_binary_op half_ops[] = {EM_BINARY_DIV, EM_BINARY_MINIMUM};
    for (int k = 0; k < 2; k++)
        for (int wrt_b = 0; wrt_b < 2; wrt_b++) {
            cr_assert_eq(em_cpu_binary(half_ops[k], &xy, &xa, &xb), EM_KERNEL_OK);
            cr_assert_eq(em_cpu_binary_grad(half_ops[k], wrt_b, &xgx, &xg, &xa, &xb, &xy),
                         EM_KERNEL_OK);
            for (int i = 0; i < 6; i++) {
                float want = em_binary_grad_value_f32(
                    half_ops[k], wrt_b, em_bf16_to_f32(gb16[i]), em_bf16_to_f32(ab16[i]),
                    em_bf16_to_f32(bb16), em_bf16_to_f32(yb16[i]));
                cr_assert_eq(gxb16[i], em_f32_to_bf16(want), "op %d by %d at %d",
                             half_ops[k], wrt_b, i);
            }
        }
    free(a);
    free(g);
    free(y);
    free(gx);
}

Test(cpu_binary_grad, unsupported_combinations)
{
    float f[4] = {1, 2, 3, 4}, gxf[4];
    double d[4] = {1, 2, 3, 4};
    int32_t i[4] = {1, 2, 3, 4}, gxi[4];
    em_arr af = vec_of(f, EM_F32, 4), agx = vec_of(gxf, EM_F32, 4), ad = vec_of(d, EM_F64, 4);
    em_arr ai = vec_of(i, EM_I32, 4), agxi = vec_of(gxi, EM_I32, 4), short_f = vec_of(f, EM_F32, 3);
    cr_assert_eq(em_cpu_binary_grad(EM_BINARY_MUL, false, &agx, &af, &af, &af, &af), EM_KERNEL_OK);
    cr_assert_eq(em_cpu_binary_grad(EM_BINARY_LT, false, &agx, &af, &af, &af, &af),
                 EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary_grad(EM_BINARY_MUL, false, &agxi, &ai, &ai, &ai, &ai),
                 EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary_grad(EM_BINARY_MUL, true, &agx, &af, &ad, &af, &af),
                 EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary_grad(EM_BINARY_MUL, true, &agx, &af, &af, &short_f, &af),
                 EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_binary_grad((em_binary_op)EM_BINARY_COUNT, true, &agx, &af, &af, &af,
                                    &af), EM_KERNEL_UNSUPPORTED);
}

/* ---- where ---- */

Test(cpu_where, selects_with_broadcast_condition)
{
    const int64_t N = 3, C = 4;
    uint8_t cond[4] = {1, 0, 0, 1};
    double a[12], b = -1.0, y[12];
    for (int i = 0; i < 12; i++)
        a[i] = i;
    em_arr o = arr_of(y, EM_F64, 2, (int64_t[]){N, C});
    em_arr ac = {.data = cond, .dtype = EM_BOOL, .ndim = 2, .shape = {N, C}, .strides = {0, 1}};
    em_arr aa = {.data = a, .dtype = EM_F64, .ndim = 2, .shape = {N, C}, .strides = {1, 3}};
    em_arr ab = {.data = &b, .dtype = EM_F64, .ndim = 2, .shape = {N, C}, .strides = {0, 0}};
    cr_assert_eq(em_cpu_where(&o, &ac, &aa, &ab), EM_KERNEL_OK);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++)
            cr_assert_eq(y[r * C + c], cond[c] ? a[r + 3 * c] : -1.0);

    int32_t dummy[2] = {0};
    uint8_t bc[3] = {1, 0, 1}, ba[3] = {1, 1, 0}, bb[3] = {0, 0, 1}, by[3];
    em_arr oc = vec_of(bc, EM_BOOL, 3), oa = vec_of(ba, EM_BOOL, 3), obb = vec_of(bb, EM_BOOL, 3);
    em_arr oy = vec_of(by, EM_BOOL, 3);
    cr_assert_eq(em_cpu_where(&oy, &oc, &oa, &obb), EM_KERNEL_OK);
    cr_assert(by[0] == 1 && by[1] == 0 && by[2] == 0);

    const int64_t n = 70000; /* threaded, 4-byte and 8-byte elements */
    int32_t *xi = malloc(n * 4), *zi = malloc(n * 4);
    int64_t *wl = malloc(n * 8);
    uint8_t *cc = malloc(n);
    for (int64_t i = 0; i < n; i++) {
        xi[i] = (int32_t)i;
        cc[i] = i % 3 == 0;
        wl[i] = -i;
    }
    int32_t zero = 0;
    em_arr yo = vec_of(zi, EM_I32, n), yc = vec_of(cc, EM_BOOL, n), ya = vec_of(xi, EM_I32, n);
    em_arr yz = {.data = &zero, .dtype = EM_I32, .ndim = 1, .shape = {n}, .strides = {0}};
    cr_assert_eq(em_cpu_where(&yo, &yc, &ya, &yz), EM_KERNEL_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(zi[i], i % 3 == 0 ? i : 0);
    em_arr wo = vec_of(wl, EM_I64, n);
    cr_assert_eq(em_cpu_where(&wo, &yc, &wo, &wo), EM_KERNEL_OK);
    cr_assert_eq(wl[n - 1], -(n - 1));

    em_arr bad = vec_of(dummy, EM_I32, 2);
    em_arr notbool = vec_of(xi, EM_I32, 3);
    cr_assert_eq(em_cpu_where(&oy, &notbool, &oa, &obb), EM_KERNEL_UNSUPPORTED);
    cr_assert_eq(em_cpu_where(&oy, &oc, &oa, &bad), EM_KERNEL_UNSUPPORTED);
    free(xi);
    free(zi);
    free(wl);
    free(cc);
}

/* The AVX2 GELU keeps f32 accuracy across the range, the negative tail included, against the
 * f64 formula written with erfc (1 + erf cancels there): within 4 ulp (the erfc fit's 1.1e-7
 * and the vector exp's 2 ulp), growing with x^2 (x^2 / 2 rounded in f32), and for the gradient
 * 1e-7 absolute near its zero. */
Test(cpu_unary, gelu_avx2_keeps_f32_accuracy)
{
    enum { N = 4001 };
    float x[N], y[N], g[N], ones[N];
    for (int i = 0; i < N; i++) {
        x[i] = -10.0f + 20.0f * (float)i / (N - 1);
        ones[i] = 1;
    }
    if (!em_cpu_gelu_f32(N, y, x) || !em_cpu_gelu_grad_f32(N, g, ones, x))
        cr_skip_test("no AVX2+FMA on this CPU");
    for (int i = 0; i < N; i++) {
        double v = x[i], cdf = 0.5 * erfc(-v / sqrt(2.0));
        double want = v * cdf, dwant = cdf + v * exp(-v * v / 2) / sqrt(2 * M_PI);
        double tol = 5e-7 * (1 + v * v);
        cr_assert(fabs(y[i] - want) <= tol * fabs(want), "gelu(%.9g) = %.9g, want %.9g", v, y[i],
                  want);
        cr_assert(fabs(g[i] - dwant) <= tol * fabs(dwant) + 1e-7, "gelu'(%.9g) = %.9g, want %.9g",
                  v, g[i], dwant);
    }
    /* runs shorter than a block of 32 and ones ending inside a block: the same values, nothing
     * written past their end */
    const int64_t lens[] = {1, 7, 31, 33, 64, 95};
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        const int64_t n = lens[t], at = 1234;
        float py[100], pg[100];
        py[n] = pg[n] = 42.0f;
        em_cpu_gelu_f32(n, py, x + at);
        em_cpu_gelu_grad_f32(n, pg, ones, x + at);
        for (int64_t i = 0; i < n; i++)
            cr_assert(py[i] == y[at + i] && pg[i] == g[at + i], "run of %ld, element %ld",
                      (long)n, (long)i);
        cr_assert(py[n] == 42.0f && pg[n] == 42.0f, "run of %ld: written past its end", (long)n);
    }
}

/* GELU and its gradient in AVX-512 lanes give the AVX2 kernels' bits (a NaN is NaN, its sign
 * the compiler's), on every magnitude (the exp's clamps, tiny and huge inputs), infinities and
 * NaN, and on runs of every length to 40. */
static bool same_bits(float a, float b)
{
    return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

Test(cpu_unary, gelu_avx512_gives_the_avx2_bits)
{
    if (!em_cpu_has_avx512())
        cr_skip_test("no AVX-512 on this CPU");
    enum { N = 6000 };
    float x[N], gy[N], y[2][N], g[2][N];
    for (int i = 0; i < N; i++) {
        const float mag = ldexpf(1.0f + (float)(i % 97) / 97.0f, i % 61 - 40); /* 2^-40 .. 2^21 */
        x[i] = i % 2 ? -mag : mag;
        gy[i] = (float)(i % 13) - 6.0f;
    }
    x[0] = INFINITY, x[1] = -INFINITY, x[2] = NAN, x[3] = 0, x[4] = -0.0f, x[5] = 1e-45f;
    for (int wide = 0; wide < 2; wide++) {
        em_cpu_set_avx512(wide);
        cr_assert(em_cpu_gelu_f32(N, y[wide], x) && em_cpu_gelu_grad_f32(N, g[wide], gy, x));
    }
    em_cpu_set_avx512(true);
    for (int i = 0; i < N; i++) {
        cr_assert(same_bits(y[0][i], y[1][i]), "gelu(%.9g): avx2 %.9g, avx512 %.9g", x[i],
                  y[0][i], y[1][i]);
        cr_assert(same_bits(g[0][i], g[1][i]), "gelu'(%.9g): avx2 %.9g, avx512 %.9g", x[i],
                  g[0][i], g[1][i]);
    }
    for (int64_t n = 1; n <= 40; n++) {
        float py[41], pg[41];
        py[n] = pg[n] = 42.0f;
        em_cpu_gelu_f32(n, py, x + 100);
        em_cpu_gelu_grad_f32(n, pg, gy + 100, x + 100);
        for (int64_t i = 0; i < n; i++)
            cr_assert(py[i] == y[1][100 + i] && pg[i] == g[1][100 + i], "run of %ld, [%ld]",
                      (long)n, (long)i);
        cr_assert(py[n] == 42.0f && pg[n] == 42.0f, "run of %ld: written past its end", (long)n);
    }
}
