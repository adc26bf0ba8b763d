/* Containers: children reachable by dotted name, ModuleList, Sequential's Linear + ReLU as one
 * op, the Residual block (values, f64 gradients, errors, saving and loading a residual net) and
 * Concat with its U-Net skip (values, f64 gradients, errors). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "autograd/autograd_internal.h"
#include "helpers/gradcheck.h"

static em_tensor *f32(em_shape s, const double *v)
{
    em_tensor *t = em_from_data(s, EM_F64, v);
    em_tensor *c = em_to_dtype(t, EM_F32);
    em_release(t);
    return c;
}

static void set_param(em_module *m, const char *name, const double *v)
{
    em_tensor *p = em_module_find(m, name);
    cr_assert_not_null(p, "%s", name);
    em_tensor *src = em_from_data(em_shape_of(p), EM_F64, v);
    cr_assert_eq(em_copy_(p, src), EM_OK, "%s", em_error());
    em_release(src);
}

Test(nn_containers, children_by_dotted_name)
{
    em_module *net = em_sequential(2, em_linear_layer(4, 4, true),
                                   em_sequential(2, em_relu_layer(), em_linear_layer(4, 2, true)));
    em_module *fc = em_module_child(net, "1.1");
    cr_assert_not_null(fc, "%s", em_error());
    cr_assert_str_eq(fc->type->type_name, "Linear");
    cr_assert_eq(em_module_child(net, "0"), net->children[0].module);
    cr_assert_null(em_module_child(net, "1.2"));
    cr_assert_str_eq(em_error(), "em_module_child: no child \"2\" in this Sequential (looking up "
                                 "\"1.2\")");
    em_error_clear();
    cr_assert_null(em_module_child(net, "0.weight"), "a parameter is no child");
    em_error_clear();
    em_module_free(net);
}

Test(nn_containers, module_list_holds_numbered_children)
{
    em_module *blocks = em_module_list(2, em_linear_layer(3, 3, true),
                                       em_linear_layer(3, 3, false));
    blocks = em_module_list_append(blocks, em_linear_layer(3, 1, true));
    cr_assert_not_null(blocks, "%s", em_error());
    cr_assert_eq(blocks->n_children, 3);
    em_param_ref refs[8];
    cr_assert_eq(em_module_parameters(blocks, refs, 8), 5);
    cr_assert_str_eq(refs[2].name, "1.weight");
    cr_assert_str_eq(refs[4].name, "2.bias");
    cr_assert_eq(em_module_num_params(blocks), 12 + 9 + 4);

    /* no forward of its own: the owner runs the children */
    em_tensor *x = f32(EM_SHAPE(1, 3), (double[]){1, 2, 3});
    cr_assert_null(em_forward(blocks, x));
    cr_assert_str_eq(em_error(), "em_forward: ModuleList has no forward (run its children)");
    em_error_clear();
    em_tensor *h = em_retain(x);
    for (int i = 0; i < blocks->n_children; i++) {
        em_tensor *next = em_forward(em_module_child(blocks, (char[2]){(char)('0' + i), 0}), h);
        em_release(h);
        h = next;
    }
    cr_assert_not_null(h, "%s", em_error());
    cr_assert_eq(h->shape[1], 1);
    em_release(h);
    em_release(x);

    cr_assert_null(em_module_list_append(em_sequential(0), em_relu_layer()));
    cr_assert_not_null(strstr(em_error(), "module is a Sequential, not a ModuleList"), "%s",
                       em_error());
    em_error_clear();
    cr_assert_null(em_module_list_append(blocks, NULL));
    cr_assert_str_eq(em_error(), "em_module_list_append: module is NULL");
    em_error_clear();
}

/* y = W2 relu(W1 x + b1) + b2 + x, by hand */
Test(nn_containers, residual_adds_the_identity)
{
    em_module *block = em_residual(em_sequential(3, em_linear_layer(2, 2, true), em_relu_layer(),
                                                 em_linear_layer(2, 2, true)),
                                   NULL);
    set_param(block, "body.0.weight", (double[]){1, -1, 0.5, 2});
    set_param(block, "body.0.bias", (double[]){0.5, -3});
    set_param(block, "body.2.weight", (double[]){2, 1, -1, 1});
    set_param(block, "body.2.bias", (double[]){0.25, 0});
    em_tensor *x = f32(EM_SHAPE(2, 2), (double[]){1, 2, 3, -1});
    em_tensor *y = em_forward(block, x);
    cr_assert_not_null(y, "%s", em_error());
    /* row (1, 2): h = relu(1 - 2 + .5, .5 + 4 - 3) = (0, 1.5); W2 h + b2 = (1.75, 1.5) */
    /* row (3, -1): h = relu(3 + 1 + .5, 1.5 - 2 - 3) = (4.5, 0); W2 h + b2 = (9.25, -4.5) */
    double want[4] = {1.75 + 1, 1.5 + 2, 9.25 + 3, -4.5 - 1}, got[4];
    em_copy_to_host(y, EM_F64, got);
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(got[i], want[i], 1e-6, "element %d: %g", i, got[i]);
    char desc[64];
    em_module_describe(block, desc, sizeof desc);
    cr_assert_str_eq(desc, "shortcut=identity");
    em_release(y);
    em_release(x);
    em_module_free(block);
}

typedef struct {
    em_module *m;
} module_ctx;

static em_tensor *module_fn(em_tensor *const *inputs, void *ctx)
{
    return em_forward(((module_ctx *)ctx)->m, inputs[0]);
}

Test(nn_containers, residual_gradients_in_f64)
{
    /* a projection shortcut, as a ResNet block that changes width */
    em_module *block = em_residual(em_sequential(3, em_linear_layer(3, 4, true), em_tanh_layer(),
                                                 em_linear_layer(4, 2, true)),
                                   em_linear_layer(3, 2, false));
    em_tensor *leaves[8] = {em_gradcheck_leaf(EM_SHAPE(5, 3), -1, 1, 3)};
    int n = em_gradcheck_module_params(block, leaves + 1, 7, 50);
    cr_assert_eq(n, 5);
    module_ctx c = {block};
    cr_assert(em_test_gradcheck_default(module_fn, &c, leaves, 1 + n), "%s", em_error());
    for (int i = 0; i <= n; i++)
        em_release(leaves[i]);
    em_module_free(block);
}

/* ReLU then MaxPool2d inside a Sequential run as one op, relu_max_pool2d: its output equals the
 * children run one by one (max_pool2d(relu(conv(x)))), and the net's f64 gradients match finite
 * differences, odd height included (the last row falls outside every window). */
Test(nn_containers, sequential_runs_relu_then_max_pool_as_one_op)
{
    em_conv2d_layer_opts pad1 = {.padding = 1};
    em_module *net = em_sequential(3, em_conv2d_layer(2, 3, 3, pad1), em_relu_layer(),
                                   em_max_pool2d_layer(2, (em_pool2d_layer_opts){0}));
    em_tensor *leaves[4] = {em_gradcheck_leaf(EM_SHAPE(2, 2, 5, 6), -1, 1, 4)};
    int n = em_gradcheck_module_params(net, leaves + 1, 3, 60);
    cr_assert_eq(n, 2);
    em_tensor *y = em_forward(net, leaves[0]);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert_not_null(y->node);
    cr_expect_str_eq(y->node->op, "relu_max_pool2d");
    em_tensor *ref = em_forward(em_module_child(net, "2"),
                                em_forward(em_module_child(net, "1"),
                                           em_forward(em_module_child(net, "0"), leaves[0])));
    cr_assert_not_null(ref, "%s", em_error());
    cr_expect_not_null(ref->node);
    cr_expect_str_eq(ref->node->op, "max_pool2d");
    double yv[36], rv[36];
    cr_assert_eq(em_numel(y), 36);
    em_copy_to_host(y, EM_F64, yv);
    em_copy_to_host(ref, EM_F64, rv);
    for (int i = 0; i < 36; i++)
        cr_expect_eq(yv[i], rv[i], "y[%d]", i);
    module_ctx c = {net};
    cr_assert(em_test_gradcheck_default(module_fn, &c, leaves, 1 + n), "%s", em_error());
    em_release(y);
    em_release(ref);
    for (int i = 0; i <= n; i++)
        em_release(leaves[i]);
    em_module_free(net);
}

Test(nn_containers, residual_shape_mismatch_is_named)
{
    em_module *block = em_residual(em_linear_layer(3, 2, true), NULL);
    em_tensor *x = em_zeros(EM_SHAPE(4, 3), EM_F32);
    cr_assert_null(em_forward(block, x));
    cr_assert_str_eq(em_error(), "Residual: body gives [4,2], the identity gives [4,3]");
    em_error_clear();
    cr_assert_null(em_residual(NULL, em_relu_layer()));
    cr_assert_str_eq(em_error(), "em_residual: body is NULL");
    em_error_clear();
    em_release(x);
    em_module_free(block);
}

static em_module *residual_cnn(void)
{
    em_conv2d_layer_opts pad = {.padding = 1}, bare = {.no_bias = true};
    em_module *blocks = em_module_list(0);
    for (int i = 0; i < 2; i++)
        blocks = em_module_list_append(
            blocks, em_sequential(2,
                                  em_residual(em_sequential(3, em_conv2d_layer(4, 4, 3, pad),
                                                            em_relu_layer(),
                                                            em_conv2d_layer(4, 4, 3, pad)),
                                              i ? em_conv2d_layer(4, 4, 1, bare) : NULL),
                                  em_relu_layer()));
    return em_sequential(2, em_conv2d_layer(1, 4, 3, pad), blocks);
}

Test(nn_containers, residual_net_saves_and_loads_by_name)
{
    em_manual_seed(5);
    em_module *a = residual_cnn();
    em_manual_seed(6);
    em_module *b = residual_cnn();
    cr_assert_not_null(em_module_find(a, "1.1.0.shortcut.weight"));
    cr_assert_null(em_module_find(a, "1.0.0.shortcut.weight"), "block 0 has the identity");
    char path[] = "/tmp/ember_residual_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    cr_assert_eq(em_module_save(a, path, NULL, 0), EM_OK, "%s", em_error());
    cr_assert_eq(em_module_load(b, path), EM_OK, "%s", em_error());
    unlink(path);
    em_tensor *x = em_randn(EM_SHAPE(2, 1, 6, 6), EM_F32, NULL);
    em_tensor *h = em_forward(em_module_child(a, "0"), x);
    em_module *blocks = em_module_child(a, "1");
    for (int i = 0; i < blocks->n_children; i++) {
        em_tensor *next = em_forward(blocks->children[i].module, h);
        em_release(h);
        h = next;
    }
    em_tensor *hb = em_forward(em_module_child(b, "0"), x);
    for (int i = 0; i < 2; i++) {
        em_tensor *next = em_forward(em_module_child(b, i ? "1.1" : "1.0"), hb);
        em_release(hb);
        hb = next;
    }
    cr_assert_not_null(h, "%s", em_error());
    cr_assert_not_null(hb, "%s", em_error());
    cr_assert_eq(em_numel(h), 2 * 4 * 6 * 6);
    cr_assert_arr_eq(em_data_ptr(h), em_data_ptr(hb), (size_t)em_numel(h) * 4);
    em_release(h);
    em_release(hb);
    em_release(x);
    em_module_free(a);
    em_module_free(b);
}

/* What a forward hook saw: the modules in order. */
typedef struct {
    const em_module *seen[8];
    int n;
} hook_log;

static void log_module(em_module *m, const em_tensor *out, void *ctx)
{
    (void)out;
    hook_log *log = ctx;
    if (log->n < 8)
        log->seen[log->n++] = m;
}

/* Sequential runs Linear + ReLU as em_linear_relu: the same bytes as the layers one by one,
 * forward and gradients; with a forward hook set every module still runs and is seen. */
Test(nn_containers, sequential_fuses_linear_relu_to_the_same_bytes)
{
    em_manual_seed(3);
    em_module *net = em_sequential(3, em_linear_layer(12, 9, true), em_relu_layer(),
                                   em_linear_layer(9, 4, true));
    em_tensor *x = em_randn(EM_SHAPE(7, 12), EM_F32, NULL);
    em_tensor *w0 = em_module_find(net, "0.weight"), *b0 = em_module_find(net, "0.bias");
    em_tensor *w2 = em_module_find(net, "2.weight"), *b2 = em_module_find(net, "2.bias");
    em_tensor *y[3], *gw0[3];
    hook_log log = {0};
    for (int run = 0; run < 3; run++) { /* by hand, fused, hooked */
        void *prev_ctx;
        em_forward_hook prev = run == 2 ? em_set_forward_hook(log_module, &log, &prev_ctx) : NULL;
        y[run] = run == 0 ? em_linear(em_relu(em_linear(x, w0, b0)), w2, b2) : em_forward(net, x);
        if (run == 2)
            em_set_forward_hook(prev, prev_ctx, NULL);
        cr_assert_eq(em_backward(em_sum_all(em_mul(y[run], y[run]))), EM_OK, "%s", em_error());
        gw0[run] = em_retain(w0->grad);
        em_zero_grad(w0);
        em_zero_grad(b0);
        em_zero_grad(w2);
        em_zero_grad(b2);
    }
    for (int run = 1; run < 3; run++) {
        cr_assert_arr_eq(em_data_ptr(y[0]), em_data_ptr(y[run]), 28 * sizeof(float), "run %d", run);
        cr_assert_arr_eq(em_data_ptr(gw0[0]), em_data_ptr(gw0[run]), 108 * sizeof(float),
                         "run %d", run);
    }
    cr_assert_eq(log.n, 4); /* Linear, ReLU, Linear, then the Sequential itself */
    for (int i = 0; i < 3; i++)
        cr_assert_eq(log.seen[i], net->children[i].module, "module %d", i);
    for (int run = 0; run < 3; run++) {
        em_release(y[run]);
        em_release(gw0[run]);
    }
    em_release(x);
    em_module_free(net);
}

/* Concat: each branch on x, their outputs joined along dim. [W x + b, x] by hand, the setting
 * read back, and f64 gradients through a U-Net skip (cat([x, inner(x)], 1)) against finite
 * differences. */
Test(nn_containers, concat_joins_its_branches)
{
    em_module *block = em_concat(-1, 2, em_linear_layer(2, 2, true), em_identity_layer());
    cr_assert_not_null(block, "%s", em_error());
    set_param(block, "0.weight", (double[]){1, -1, 0.5, 2});
    set_param(block, "0.bias", (double[]){0.5, -3});
    em_tensor *x = f32(EM_SHAPE(2, 2), (double[]){1, 2, 3, -1});
    em_tensor *y = em_forward(block, x);
    cr_assert_not_null(y, "%s", em_error());
    cr_assert(y->shape[0] == 2 && y->shape[1] == 4);
    /* row (1, 2): (1 - 2 + .5, .5 + 4 - 3) = (-.5, 1.5); row (3, -1): (4.5, -3.5) */
    double want[8] = {-0.5, 1.5, 1, 2, 4.5, -3.5, 3, -1}, got[8];
    em_copy_to_host(y, EM_F64, got);
    for (int i = 0; i < 8; i++)
        cr_expect_float_eq(got[i], want[i], 1e-6, "element %d: %g", i, got[i]);
    em_setting_value dim;
    cr_assert_eq(em_module_setting(block, "dim", &dim), EM_OK, "%s", em_error());
    cr_expect_eq(dim.i, -1);
    char desc[64];
    em_module_describe(block, desc, sizeof desc);
    cr_expect_str_eq(desc, "dim=-1");
    em_release(y);
    em_release(x);
    em_module_free(block);

    em_module *unet = em_sequential(2, em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){
                                           .padding = 1}),
                                    em_concat_skip(em_sequential(2, em_conv2d_layer(
                                                                        3, 2, 3,
                                                                        (em_conv2d_layer_opts){
                                                                            .padding = 1}),
                                                                 em_tanh_layer()),
                                                   1));
    cr_assert_not_null(unet, "%s", em_error());
    cr_assert_str_eq(em_module_child(unet, "1.0")->type->type_name, "Identity");
    em_tensor *leaves[8] = {em_gradcheck_leaf(EM_SHAPE(2, 2, 4, 4), -1, 1, 3)};
    int n = em_gradcheck_module_params(unet, leaves + 1, 7, 50);
    cr_assert_eq(n, 4);
    module_ctx c = {unet};
    em_tensor *out = em_forward(unet, leaves[0]);
    cr_assert(out && out->shape[1] == 5, "3 channels of the skip and 2 of the inner block");
    em_release(out);
    cr_assert(em_test_gradcheck_default(module_fn, &c, leaves, 1 + n), "%s", em_error());
    for (int i = 0; i <= n; i++)
        em_release(leaves[i]);
    em_module_free(unet);
}

Test(nn_containers, concat_errors_name_what_is_wrong)
{
    cr_assert_null(em_concat(1, 0));
    cr_expect_str_eq(em_error(), "em_concat: needs at least one branch");
    em_error_clear();
    cr_assert_null(em_concat(9, 1, em_relu_layer()));
    cr_expect_str_eq(em_error(), "em_concat: setting 'dim' is 9, outside [-8, 7]");
    em_error_clear();
    cr_assert_null(em_concat_skip(NULL, 1));
    cr_expect_str_eq(em_error(), "em_concat_skip: inner is NULL");
    em_error_clear();
    em_module *block = em_concat(0, 2, em_linear_layer(3, 2, true), em_identity_layer());
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32);
    cr_assert_null(em_forward(block, x));
    cr_expect_str_eq(em_error(), "em_cat: tensor 1 [2,3] does not match tensor 0 [2,2] outside "
                                 "dim 0");
    em_error_clear();
    em_release(x);
    em_module_free(block);
}
