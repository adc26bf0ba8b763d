/* Custom autograd functions: a user's forward and backward take part in the tape (hand-computed
 * values, the library's em_gradcheck), params and needs_input_grad reach them, a wrong backward
 * is caught by em_gradcheck and a wrong-shaped gradient by em_backward, and they work under
 * autocast (backward under forward's region, declared input dtypes, against PyTorch's
 * custom_fwd and custom_bwd), inside em_checkpoint, with the output saved, and with grad mode
 * off. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ember.h"
#include "tensor/tensor_internal.h"

static void setup(void)
{
    em_error_clear();
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
}

TestSuite(function, .init = setup, .fini = teardown);

/* ---- y = x^3, dy/dx = 3 x^2 ---- */
static em_tensor *cube_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    cr_assert_eq(n, 1);
    cr_assert_not(em_grad_enabled(), "forward runs with grad mode off");
    em_function_save(ctx, in[0]);
    return em_pow_scalar(in[0], 3);
}

static em_status cube_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    em_tensor *x = em_function_saved(ctx, 0);
    gin[0] = em_mul(g, em_mul_scalar(em_mul(x, x), 3));
    return gin[0] ? EM_OK : em_error_status();
}

static const em_function cube = {.name = "cube", .forward = cube_forward,
                                 .backward = cube_backward};

static em_tensor *apply_cube(em_tensor *const *in, void *ctx)
{
    (void)ctx;
    return em_function_apply(&cube, NULL, 0, in, 1);
}

Test(function, values_and_gradients_by_hand)
{
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(3), EM_F32,
                                                  (float[]){1, -2, 0.5f}), true);
    em_tensor *y = apply_cube((em_tensor *[]){x}, NULL);
    cr_assert_not_null(y, "%s", em_error());
    const float *v = em_data_ptr(y);
    cr_expect(v[0] == 1 && v[1] == -8 && v[2] == 0.125f);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    const float *g = em_data_ptr(x->grad); /* 3 x^2 */
    cr_expect(g[0] == 3 && g[1] == 12 && g[2] == 0.75f, "%g %g %g", g[0], g[1], g[2]);
}

Test(function, gradcheck_passes_through_it)
{
    em_generator gen = em_generator_new(7);
    em_tensor *x = em_requires_grad_(em_uniform(EM_SHAPE(2, 3), EM_F64, -2, 2, &gen), true);
    cr_expect_eq(em_gradcheck(apply_cube, NULL, (em_tensor *[]){x}, 1, (em_gradcheck_opts){0}),
                 EM_OK, "%s", em_error());
}

/* ---- y = scale * a * b with params, backward skipping what needs no gradient ---- */
typedef struct {
    double scale;
    int backward_calls; /* counted in the context's copy */
} scaled_params;

static em_tensor *scaled_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    cr_assert_eq(n, 2);
    scaled_params *p = em_function_params(ctx);
    em_function_save(ctx, in[0]);
    em_function_save(ctx, in[1]);
    return em_mul_scalar(em_mul(in[0], in[1]), p->scale);
}

static struct {
    int calls;
    bool asked[2];
} seen; /* what backward saw (the context is freed with the graph) */

static em_status scaled_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    scaled_params *p = em_function_params(ctx);
    seen.calls = ++p->backward_calls;
    for (int i = 0; i < 2; i++) {
        seen.asked[i] = em_function_needs_input_grad(ctx, i);
        if (seen.asked[i])
            gin[i] = em_mul_scalar(em_mul(g, em_function_saved(ctx, 1 - i)), p->scale);
    }
    return EM_OK;
}

static const em_function scaled = {.name = "scaled_product", .forward = scaled_forward,
                                   .backward = scaled_backward};

Test(function, params_and_needs_input_grad_reach_backward)
{
    em_tensor *a = em_from_data(EM_SHAPE(2), EM_F32, (float[]){2, 3});
    em_tensor *b = em_requires_grad_(em_from_data(EM_SHAPE(2), EM_F32, (float[]){5, 7}), true);
    scaled_params p = {.scale = 0.5};
    em_tensor *y = em_function_apply(&scaled, &p, sizeof p, (em_tensor *[]){a, b}, 2);
    cr_assert_not_null(y, "%s", em_error());
    const float *v = em_data_ptr(y);
    cr_expect(v[0] == 5 && v[1] == 10.5f);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    cr_expect_eq(seen.calls, 1);
    cr_expect(!seen.asked[0] && seen.asked[1]);
    cr_expect_eq(p.backward_calls, 0, "the context holds its own copy of the params");
    const float *g = em_data_ptr(b->grad); /* scale * a */
    cr_expect(g[0] == 1 && g[1] == 1.5f);
    cr_expect_null(a->grad);
}

/* ---- a backward that is wrong: em_gradcheck says where ---- */
static em_status wrong_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    em_tensor *x = em_function_saved(ctx, 0); /* 2 x^2 instead of 3 x^2 */
    gin[0] = em_mul(g, em_mul_scalar(em_mul(x, x), 2));
    return EM_OK;
}

static const em_function wrong_cube = {.name = "wrong_cube", .forward = cube_forward,
                                       .backward = wrong_backward};

static em_tensor *apply_wrong(em_tensor *const *in, void *ctx)
{
    (void)ctx;
    return em_function_apply(&wrong_cube, NULL, 0, in, 1);
}

Test(function, gradcheck_finds_a_wrong_backward)
{
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(2), EM_F64, (double[]){1, 2}), true);
    cr_assert_eq(em_gradcheck(apply_wrong, NULL, (em_tensor *[]){x}, 1, (em_gradcheck_opts){0}),
                 EM_ERR_NUMERIC);
    cr_expect(strstr(em_error(), "em_gradcheck: input 0 element 0: analytic"), "%s", em_error());
    em_error_clear();
    /* the input is left as it was */
    cr_expect(((double *)em_data_ptr(x))[0] == 1 && ((double *)em_data_ptr(x))[1] == 2);
}

/* ---- a gradient of the wrong shape ---- */
static em_status transposed_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    (void)ctx;
    gin[0] = em_transpose(g, 0, 1);
    return EM_OK;
}

static em_tensor *copy_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)ctx;
    (void)n;
    return em_clone(in[0]);
}

static const em_function transposing = {.name = "transposing", .forward = copy_forward,
                                        .backward = transposed_backward};

Test(function, a_wrong_shaped_gradient_is_an_error_naming_the_function)
{
    em_generator gen = em_generator_new(1);
    em_tensor *x = em_requires_grad_(em_uniform(EM_SHAPE(2, 3), EM_F32, 0, 1, &gen), true);
    em_tensor *y = em_function_apply(&transposing, NULL, 0, (em_tensor *[]){x}, 1);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "em_function transposing: backward gave input 0 a gradient of "
                                 "shape [3,2]; the input is [2,3]"), "%s", em_error());
    em_error_clear();
}

/* ---- y = x @ w through a function: under bf16 autocast the product runs in bf16 and the f32
 * leaves get f32 gradients (the function's gradient is cast back to the input's dtype) ---- */
static em_tensor *mm_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)n;
    em_function_save(ctx, in[0]);
    em_function_save(ctx, in[1]);
    return em_matmul(in[0], in[1]);
}

static em_status mm_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    em_tensor *x = em_function_saved(ctx, 0), *w = em_function_saved(ctx, 1);
    gin[0] = em_matmul(g, em_transpose(em_to_dtype(w, g->dtype), 0, 1));
    gin[1] = em_matmul(em_transpose(em_to_dtype(x, g->dtype), 0, 1), g);
    return gin[0] && gin[1] ? EM_OK : em_error_status();
}

static const em_function mm = {.name = "mm", .forward = mm_forward, .backward = mm_backward};

Test(function, under_autocast_it_runs_low_and_hands_back_f32_gradients)
{
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(1, 2), EM_F32, (float[]){1, 2}),
                                     true);
    em_tensor *w = em_requires_grad_(em_from_data(EM_SHAPE(2, 2), EM_F32,
                                                  (float[]){0.5f, 1, 2, 4}), true);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *y = em_function_apply(&mm, NULL, 0, (em_tensor *[]){x, w}, 2);
    em_autocast_end();
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->dtype, EM_BF16);
    cr_assert_eq(em_backward(em_sum_all(em_to_dtype(y, EM_F32))), EM_OK, "%s", em_error());
    cr_assert_eq(x->grad->dtype, EM_F32);
    cr_assert_eq(w->grad->dtype, EM_F32);
    const float *gx = em_data_ptr(x->grad), *gw = em_data_ptr(w->grad); /* exact in bf16 */
    cr_expect(gx[0] == 1.5f && gx[1] == 6, "%g %g", gx[0], gx[1]);
    cr_expect(gw[0] == 1 && gw[1] == 1 && gw[2] == 2 && gw[3] == 2);
}

/* ---- under autocast, PyTorch's custom_fwd and custom_bwd. References from PyTorch 2.15, the
 * same functions written with torch.amp.custom_fwd(device_type='cpu') (cast_inputs=torch.float32
 * for mm32) and custom_bwd, on xb = x.bfloat16() with x below, run under
 * torch.autocast('cpu', torch.bfloat16); (out * tensor([1., 2., 3.])).sum().backward() ---- */
static const float fn_x[12] = {0.3f, -1.2f, 2.5f, 1.7f, 0.4f, -0.9f,
                               -2.2f, 0.8f, 1.1f, 0.05f, -0.6f, 1.9f}; /* (4, 3) */

/* y = x * w, x (4, 3) a bf16 activation and w (3) an f32 weight: the product promotes to f32 in
 * forward, and in backward, which runs under forward's autocast, g * x meets x as it did */
static em_tensor *scale_cols_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)n;
    em_function_save(ctx, in[0]);
    em_function_save(ctx, in[1]);
    return em_mul(in[0], in[1]);
}

static em_status scale_cols_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    em_tensor *x = em_function_saved(ctx, 0), *w = em_function_saved(ctx, 1);
    gin[0] = em_mul(g, w);
    gin[1] = em_sum(em_mul(g, x), (int[]){0}, 1, false);
    return gin[0] && gin[1] ? EM_OK : em_error_status();
}

static const em_function scale_cols = {.name = "scale_cols", .forward = scale_cols_forward,
                                       .backward = scale_cols_backward};

/* y = x @ m declared to run in f32 (cast_inputs): under bf16 autocast the bf16 x is cast up and
 * the product runs in f32, its gradient coming back to x in bf16 */
static em_tensor *mm32_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)n;
    cr_assert_eq(em_autocast_dtype(), EM_F32, "a cast_inputs function runs with autocast off");
    cr_assert(in[0]->dtype == EM_F32 && in[1]->dtype == EM_F32);
    em_function_save(ctx, in[0]);
    em_function_save(ctx, in[1]);
    return em_matmul(in[0], in[1]);
}

static em_status mm32_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    cr_assert_eq(em_autocast_dtype(), EM_F32, "and so does its backward");
    em_tensor *x = em_function_saved(ctx, 0), *m = em_function_saved(ctx, 1);
    gin[0] = em_matmul(g, em_transpose(m, 0, 1));
    gin[1] = em_matmul(em_transpose(x, 0, 1), g);
    return gin[0] && gin[1] ? EM_OK : em_error_status();
}

static const em_function mm32 = {.name = "mm32", .forward = mm32_forward,
                                 .backward = mm32_backward, .cast_inputs = true};

/* out (4, 3) of fn on (bf16 x, param) under bf16 autocast, checked against PyTorch's out and
 * the gradients of (out * [1, 2, 3]).sum() */
static void check_under_autocast(const em_function *fn, em_tensor *param, const double *want_y,
                                 const double *want_gx, const double *want_gp, int n_param)
{
    em_tensor *x = em_requires_grad_(
        em_to_dtype(em_from_data(EM_SHAPE(4, 3), EM_F32, fn_x), EM_BF16), true);
    cr_assert_eq(em_autocast_begin(EM_BF16), EM_OK);
    em_tensor *y = em_function_apply(fn, NULL, 0, (em_tensor *[]){x, param}, 2);
    em_autocast_end();
    cr_assert_not_null(y, "%s", em_error());
    cr_expect_eq(y->dtype, EM_F32);
    em_tensor *wt = em_from_data(EM_SHAPE(3), EM_F32, (float[]){1, 2, 3});
    cr_assert_eq(em_backward(em_sum_all(em_mul(y, wt))), EM_OK, "%s: %s", fn->name, em_error());
    cr_assert_eq(x->grad->dtype, EM_BF16, "x's gradient comes back in x's dtype");
    cr_assert_eq(param->grad->dtype, EM_F32);
    double got_y[12], got_gx[12], got_gp[9];
    em_copy_to_host(y, EM_F64, got_y);
    em_copy_to_host(x->grad, EM_F64, got_gx);
    em_copy_to_host(param->grad, EM_F64, got_gp);
    for (int i = 0; i < 12; i++) {
        cr_expect(fabs(got_y[i] - want_y[i]) <= 1e-6 * (1 + fabs(want_y[i])),
                  "%s: y[%d] %.9g, PyTorch %.9g", fn->name, i, got_y[i], want_y[i]);
        cr_expect_eq(got_gx[i], want_gx[i], "%s: x.grad[%d] %.9g, PyTorch %.9g", fn->name, i,
                     got_gx[i], want_gx[i]);
    }
    for (int i = 0; i < n_param; i++)
        cr_expect(fabs(got_gp[i] - want_gp[i]) <= 1e-6 * (1 + fabs(want_gp[i])),
                  "%s: param.grad[%d] %.9g, PyTorch %.9g", fn->name, i, got_gp[i], want_gp[i]);
}

/* Its backward failed before: "em_mul: dtypes differ: f32 [4,3] and bf16 [4,3]" */
Test(function, backward_runs_under_forwards_autocast_as_custom_bwd)
{
    em_tensor *w = em_requires_grad_(em_from_data(EM_SHAPE(3), EM_F32,
                                                  (float[]){0.7f, -1.3f, 2.1f}), true);
    const double y[12] = {0.21054686605930328, 1.564062476158142, 5.25, 1.1921874284744263,
                          -0.5205078125, -1.8867186307907104, -1.5421874523162842,
                          -1.041015625, 2.3132810592651367, 0.0350341796875, 0.782031238079071,
                          3.9867186546325684};
    const double gx[12] = {0.69921875, -2.59375, 6.3125, 0.69921875, -2.59375, 6.3125,
                           0.69921875, -2.59375, 6.3125, 0.69921875, -2.59375, 6.3125};
    const double gw[3] = {-0.149169921875, -1.20703125, 13.8046875};
    check_under_autocast(&scale_cols, w, y, gx, gw, 3);
}

Test(function, cast_inputs_runs_it_in_f32_and_casts_gradients_back)
{
    em_tensor *m = em_requires_grad_(em_from_data(EM_SHAPE(3, 3), EM_F32, (float[]){
        1.5f, -0.25f, 0.75f, 0.5f, 2.0f, -1.0f, -0.125f, 0.375f, 1.25f}), true);
    const double y[12] = {-0.462890625, -1.5439453125, 4.5537109375, 2.8671875, 0.0380859375,
                          -0.24609375, -3.0419921875, 2.5654296875, -1.076171875,
                          -0.4630126953125, -0.50372314453125, 3.01214599609375};
    const double gx[12] = {3.25, 1.5, 4.375, 3.25, 1.5, 4.375, 3.25, 1.5, 4.375, 3.25, 1.5, 4.375};
    const double gm[9] = {-0.149169921875, -0.29833984375, -0.447509765625, -0.603515625,
                          -1.20703125, -1.810546875, 4.6015625, 9.203125, 13.8046875};
    check_under_autocast(&mm32, m, y, gx, gm, 9);
}

/* ---- inside em_checkpoint: recomputed in backward, the same gradients ---- */
static em_tensor *cube_segment(void *ctx, em_tensor *const *in, int n)
{
    (void)ctx;
    (void)n;
    em_scope_begin();
    em_tensor *y = em_function_apply(&cube, NULL, 0, in, 1);
    em_tensor *out = em_keep(em_tanh(y));
    em_scope_end();
    return out;
}

Test(function, inside_a_checkpoint_the_gradients_match)
{
    double xs[] = {0.3, -0.7, 1.1};
    em_tensor *x1 = em_requires_grad_(em_from_data(EM_SHAPE(3), EM_F64, xs), true);
    em_tensor *x2 = em_requires_grad_(em_from_data(EM_SHAPE(3), EM_F64, xs), true);
    cr_assert_eq(em_backward(em_sum_all(cube_segment(NULL, (em_tensor *[]){x1}, 1))), EM_OK);
    em_tensor *y = em_checkpoint(cube_segment, NULL, (em_tensor *[]){x2}, 1);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    cr_expect_eq(memcmp(em_data_ptr(x1->grad), em_data_ptr(x2->grad), sizeof xs), 0);
}

/* ---- saving the output (no cycle: the sanitizer build checks for leaks); grad mode off ---- */
static em_tensor *exp_forward(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)n;
    em_tensor *y = em_exp(in[0]);
    em_function_save(ctx, y);
    return y;
}

static em_status exp_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    gin[0] = em_mul(g, em_function_saved(ctx, 0));
    return EM_OK;
}

static const em_function exp_fn = {.name = "exp_saving_output", .forward = exp_forward,
                                   .backward = exp_backward};

Test(function, the_output_can_be_saved_and_grad_mode_off_records_nothing)
{
    em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(2), EM_F64, (double[]){0, 1}), true);
    em_tensor *y = em_function_apply(&exp_fn, NULL, 0, (em_tensor *[]){x}, 1);
    cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
    const double *g = em_data_ptr(x->grad);
    cr_expect(g[0] == 1 && g[1] == exp(1.0));
    bool was = em_set_grad_enabled(false);
    em_tensor *z = em_function_apply(&exp_fn, NULL, 0, (em_tensor *[]){x}, 1);
    em_set_grad_enabled(was);
    cr_expect(z && !z->requires_grad && !z->node);
}

Test(function, bad_calls_are_clear_errors)
{
    em_tensor *x = em_zeros(EM_SHAPE(2), EM_F32);
    const em_function nameless = {.name = NULL, .forward = cube_forward, .backward = cube_backward};
    cr_expect_null(em_function_apply(&nameless, NULL, 0, (em_tensor *[]){x}, 1));
    cr_expect(strstr(em_error(), "needs a name, a forward and a backward"), "%s", em_error());
    em_error_clear();
    cr_expect_null(em_function_apply(&cube, NULL, 0, (em_tensor *[]){NULL}, 1));
    cr_expect(strstr(em_error(), "em_function_apply: cube: input 0 is NULL"), "%s", em_error());
    em_error_clear();
}

/* ---- forward handing back its input ---- */
static em_tensor *identity_unretained(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)ctx, (void)n;
    return in[0]; /* the caller's reference, not a new one */
}

static em_tensor *identity_retained(em_function_ctx *ctx, em_tensor *const *in, int n)
{
    (void)ctx, (void)n;
    return em_retain(in[0]);
}

static em_status identity_backward(em_function_ctx *ctx, const em_tensor *g, em_tensor **gin)
{
    (void)ctx;
    gin[0] = em_mul_scalar(g, 1);
    return gin[0] ? EM_OK : em_error_status();
}

static const em_function borrow = {.name = "borrow", .forward = identity_unretained,
                                   .backward = identity_backward};
static const em_function lend = {.name = "lend", .forward = identity_retained,
                                 .backward = identity_backward};

/* An input handed back without em_retain would be released as if it were the output: refused,
 * naming the function, whether or not a node is recorded, and the caller's tensor lives on. */
Test(function, forward_returning_its_input_unretained_is_refused)
{
    for (int grad = 0; grad < 2; grad++) {
        em_tensor *x = em_requires_grad_(em_from_data(EM_SHAPE(2), EM_F32, (float[]){1, 2}),
                                         grad);
        em_tensor *other = em_zeros(EM_SHAPE(2), EM_F32);
        int refs = em_tensor_refcount(x);
        cr_assert_null(em_function_apply(&borrow, NULL, 0, (em_tensor *[]){other, x}, 2));
        cr_assert_null(em_function_apply(&borrow, NULL, 0, (em_tensor *[]){x}, 1));
        cr_assert_eq(em_error_status(), EM_ERR_STATE);
        cr_assert(strstr(em_error(), "em_function borrow: forward returned input 0 itself without "
                                     "em_retain"), "%s", em_error());
        em_error_clear();
        cr_assert_eq(em_tensor_refcount(x), refs, "the caller's references are untouched");
        cr_assert_float_eq(em_item(em_sum_all(x)), 3, 0);
        /* retained, the same input is a fine output, and its gradient flows back */
        em_tensor *y = em_function_apply(&lend, NULL, 0, (em_tensor *[]){x}, 1);
        cr_assert_not_null(y, "%s", em_error());
        if (grad) {
            cr_assert_eq(em_backward(em_sum_all(y)), EM_OK, "%s", em_error());
            cr_assert_float_eq(((const float *)em_data_ptr(x->grad))[1], 1, 0);
        }
        else
            cr_assert(y == x && em_tensor_refcount(x) == refs + 1,
                      "no node: x itself, one more reference");
        em_release(y);
    }
}

Test(function, params_null_with_a_size_is_an_error)
{
    em_tensor *x = em_zeros(EM_SHAPE(2), EM_F32);
    cr_assert_null(em_function_apply(&cube, NULL, 16, (em_tensor *[]){x}, 1));
    cr_assert_str_eq(em_error(), "em_function_apply: cube: params is NULL but params_size is 16");
    em_error_clear();
}

Test(function, inputs_null_with_a_count_is_an_error)
{
    cr_assert_null(em_function_apply(&cube, NULL, 0, NULL, 16));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_function_apply: cube: inputs is NULL with n 16");
    em_error_clear();
    em_tensor *x = em_zeros(EM_SHAPE(2), EM_F32);
    cr_assert_null(em_function_apply(&cube, NULL, 0, (em_tensor *[]){x}, -1));
    cr_assert_str_eq(em_error(), "em_function_apply: cube: n is -1, negative");
    em_error_clear();
}
