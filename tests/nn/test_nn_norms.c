/* The group, instance and batch norms against PyTorch 2.15's numbers (computed in f64 on CPU by
 * tests/torch_ref/norm_values.py): F.group_norm, F.instance_norm with and without running
 * statistics, InstanceNorm2d tracking them, BatchNorm1d's cumulative average (momentum=None)
 * over three batches; unbatched InstanceNorm inputs; and the errors for bad arguments. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers/reference.h"
#include "nn/nn.h"

/* Values PyTorch 2.15 gives (tests/torch_ref/norm_values.py) */
static const double group_norm_affine[] = {
    -0.03645947822, 0.3193217554, 0.4171989757, 0.2111389966, 0.6373882084, -0.2504379073,
    -0.7472762879, -0.6194560797, 0.6946311198, 1.128920241, 1.470370769, 1.558393185,
    0.09450947902, 0.6734214146, 1.26290324, 1.585712441, 1.238274325, 0.4620963611,
    -0.5669147784, -1.364799076, -1.286109417, -1.142498641, -0.8683557162, -0.5926143428,
    -0.9162612718, -0.8373548893, -0.4830601855, -0.02000749551, 1.754847837, 1.918517947,
    1.430750657, 0.5209505472, 0.6269993357, 0.4353390568, 0.5084816364, 0.8120269764,
    0.3069321033, -0.1151834557, -0.2008460877, 0.09023268173, -0.3241026539, 0.5545884243,
    1.003393284, 0.8112319877, -0.8240120817, -1.092495203, -1.291946739, -1.328561516};
static const double group_norm_plain[] = {
    -1.912884805, -0.5323543628, 0.5084088201, 1.002182762, 0.8506542098, 0.08399337615,
    1.748060547, 0.8359551573, -0.0318145615, -0.6824706296, -0.9864636532, -0.8832668596,
    -1.545308367, -0.9295598625, -0.2078717026, 0.4760638177, 0.9860711725, 1.220604942,
    1.346821863, 0.9726617994, 0.3824111796, -0.3064076776, -0.9566469458, -1.438840218};
static const double instance_norm_y[] = {
    -1.04076174, -0.2087918441, -0.03745845719, -0.6306901129, 1.411369739, -0.7030247358,
    -1.002827976, 0.6938166398, 0.4792282042, 0.7734765286, 0.7945353489, 0.5296306673,
    -0.09579291373, -0.8712101648, -0.8664055623, -0.08429351353, -0.6736994743, 1.164751271,
    0.9930156598, -1.08473379, 0.7241793734, 0.4866046024, 0.5323705549, 0.8337162183};
static const double instance_norm_running_mean[] = {
    -0.001399614017, 0.03877137709, 0.0678840481};
static const double instance_norm_running_var[] = {
    1.417028828, 1.644961182, 1.510553547};
static const double instance_norm_eval[] = {
    -0.381480473, -0.06605717148, -0.001099842126, -0.2260107293, -0.226516606, -0.940983598,
    -1.04228897, -0.4689822435, 0.6900801736, 0.7912082608, 0.7984458151, 0.7074026331,
    -0.6587992883, -0.9317743376, -0.9300829429, -0.6547510816, 0.5571587043, 1.164338698,
    1.107620058, 0.4214075487, 0.5550576839, 0.470841132, 0.4870644486, 0.5938867874};
static const double instance2d_running_mean[] = {
    0.1028939969, -0.08684736297};
static const double instance2d_running_var[] = {
    0.9871724963, 0.9867956426};
/* num_batches_tracked after them: 0 */
static const double instance2d_eval[] = {
    0.3945926478, 1.067239915, 1.501765762, 1.591783108, 1.315252567, 0.7398784597,
    0.006532434175, -0.705236826, -1.221163382, 1.459579946, 1.400957619, 1.233464411,
    0.9981084999, 0.7525132222, 0.5568088669, 0.4589106855, 0.4827875672, 0.6225936186};
static const double cumulative_last_y[] = {
    0.5412553874, 0.9488360665, 1.487894999, -1.08148415, -1.295437725, -0.8409814236,
    0.8380024288, 0.8458688431, 0.09091890631, -1.330166364, -1.138851199, 0.5793298822,
    1.032392698, 0.6395840146, -1.317162364};
static const double cumulative_running_mean[] = {
    0.2448757553, 0.2469353454, 0.003436006143};
static const double cumulative_running_var[] = {
    2.551000751, 5.280720671, 2.146638516};
/* num_batches_tracked after them: 3 */
static const double cumulative_eval[] = {
    -0.153316764, 0.06200347528, 0.4872693897, 0.4302331116, 0.327521098, 0.6182744414};

/* the reference input (helpers/reference.h) in f32, for layers, whose parameters are f32 */
static em_tensor *wave32(em_shape s, double a, double b, double scale)
{
    return em_to_dtype(em_ref_wave(s, a, b, scale), EM_F32);
}

static void set_values(em_tensor *t, const double *v)
{
    em_tensor *src = em_from_data(em_shape_of(t), EM_F64, v);
    cr_assert_eq(em_copy_(t, src), EM_OK, "%s", em_error());
    em_release(src);
}

/* asserts t has shape s and holds want (row-major) within tol */
static void expect(const em_tensor *t, em_shape s, const double *want, double tol)
{
    cr_assert_not_null(t, "%s", em_error());
    em_shape got = em_shape_of(t);
    cr_assert(got.ndim == s.ndim && !memcmp(got.d, s.d, sizeof(int64_t) * (size_t)s.ndim));
    cr_assert(em_ref_close(t, want, em_shape_numel(&s), tol));
}

/* asserts y is NULL with an EM_ERR_ARG whose message holds what */
static void expect_error(const em_tensor *y, const char *what)
{
    cr_assert_null(y);
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    cr_assert(strstr(em_error(), what), "'%s' lacks '%s'", em_error(), what);
    em_error_clear();
}

static void setup(void)
{
    em_error_clear();
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
}

TestSuite(nn_norms, .init = setup, .fini = teardown);

Test(nn_norms, group_norm_matches_pytorch)
{
    em_tensor *x = em_ref_wave(EM_SHAPE(2, 6, 2, 2), 0.7, 0.3, 2);
    em_tensor *w = em_ref_wave(EM_SHAPE(6), 1.1, 0.5, 1);
    em_tensor *b = em_ref_wave(EM_SHAPE(6), 0.9, -0.2, 1);
    expect(em_group_norm(x, 3, w, b, 1e-5), EM_SHAPE(2, 6, 2, 2), group_norm_affine, 1e-8);
    em_tensor *x3 = em_ref_wave(EM_SHAPE(2, 4, 3), 0.45, 0.1, 1);
    expect(em_group_norm(x3, 2, NULL, NULL, 1e-3), EM_SHAPE(2, 4, 3), group_norm_plain, 1e-8);
    /* the same through the layer, in f32 */
    em_module *gn = em_group_norm_layer(3, 6, (em_group_norm_opts){0});
    cr_assert_not_null(gn, "%s", em_error());
    em_copy_(gn->params[0].value, w);
    em_copy_(gn->params[1].value, b);
    expect(em_forward(gn, em_to_dtype(x, EM_F32)), EM_SHAPE(2, 6, 2, 2), group_norm_affine, 1e-5);
    em_module_free(gn);
}

Test(nn_norms, instance_norm_matches_pytorch)
{
    em_tensor *x = em_ref_wave(EM_SHAPE(2, 3, 4), 0.8, 0.2, 1.5);
    em_tensor *w = em_ref_wave(EM_SHAPE(3), 1.3, 0.4, 1);
    em_tensor *b = em_ref_wave(EM_SHAPE(3), 0.6, -0.5, 1);
    em_tensor *rm = em_ref_wave(EM_SHAPE(3), 0.5, 0, 0.1);
    em_tensor *rv = em_add_scalar(em_square(em_ref_wave(EM_SHAPE(3), 0.5, 1, 1)), 1);
    expect(em_instance_norm(x, rm, rv, w, b, true, 0.2, 1e-5), EM_SHAPE(2, 3, 4),
           instance_norm_y, 1e-8);
    expect(rm, EM_SHAPE(3), instance_norm_running_mean, 1e-9);
    expect(rv, EM_SHAPE(3), instance_norm_running_var, 1e-9);
    expect(em_instance_norm(x, rm, rv, w, b, false, 0.2, 1e-5), EM_SHAPE(2, 3, 4),
           instance_norm_eval, 1e-8);
    expect(rm, EM_SHAPE(3), instance_norm_running_mean, 1e-9); /* not moved by use */
}

Test(nn_norms, instance_norm2d_tracks_running_stats_as_pytorch)
{
    em_module *in = em_instance_norm2d_layer(2, (em_instance_norm_opts){
        .affine = true, .track_running_stats = true});
    cr_assert_not_null(in, "%s", em_error());
    set_values(em_module_find(in, "weight"), (double[]){1.5, -0.5});
    set_values(em_module_find(in, "bias"), (double[]){0.25, 1.0});
    cr_assert_not_null(em_forward(in, wave32(EM_SHAPE(2, 2, 3, 3), 0.6, 0.1, 1)), "%s",
                       em_error());
    cr_assert_not_null(em_forward(in, wave32(EM_SHAPE(3, 2, 3, 3), 0.35, 0.9, 2)), "%s",
                       em_error());
    expect(em_module_find(in, "running_mean"), EM_SHAPE(2), instance2d_running_mean, 1e-6);
    expect(em_module_find(in, "running_var"), EM_SHAPE(2), instance2d_running_var, 1e-6);
    cr_assert_eq(em_item(em_module_find(in, "num_batches_tracked")), 0); /* as PyTorch keeps it */
    em_module_eval(in);
    expect(em_forward(in, wave32(EM_SHAPE(1, 2, 3, 3), 0.5, 0.2, 1)),
           EM_SHAPE(1, 2, 3, 3), instance2d_eval, 1e-5);
    /* unbatched (C, H, W): the batch of one's values */
    expect(em_forward(in, wave32(EM_SHAPE(2, 3, 3), 0.5, 0.2, 1)), EM_SHAPE(2, 3, 3),
           instance2d_eval, 1e-5);
    em_module_free(in);
}

Test(nn_norms, batch_norm_cumulative_average_matches_pytorch)
{
    em_batch_norm_opts cumulative = {.momentum = EM_BN_CUMULATIVE_AVERAGE};
    em_module *bn = em_batch_norm1d_layer(3, cumulative);
    cr_assert_not_null(bn, "%s", em_error());
    const int64_t sizes[3] = {4, 2, 5};
    em_tensor *y = NULL;
    for (int k = 0; k < 3; k++)
        y = em_forward(bn, wave32(EM_SHAPE(sizes[k], 3), 0.9 + 0.1 * k, 0.3 * k, k + 1));
    expect(y, EM_SHAPE(5, 3), cumulative_last_y, 1e-5);
    expect(em_module_find(bn, "running_mean"), EM_SHAPE(3), cumulative_running_mean, 1e-6);
    expect(em_module_find(bn, "running_var"), EM_SHAPE(3), cumulative_running_var, 1e-5);
    cr_assert_eq(em_item(em_module_find(bn, "num_batches_tracked")), 3);
    em_setting_value momentum;
    cr_assert_eq(em_module_setting(bn, "momentum", &momentum), EM_OK, "%s", em_error());
    cr_assert(momentum.none && momentum.r == EM_BN_CUMULATIVE_AVERAGE, "momentum None");
    em_module_eval(bn);
    expect(em_forward(bn, wave32(EM_SHAPE(2, 3), 0.4, 0, 1)), EM_SHAPE(2, 3),
           cumulative_eval, 1e-5);
    em_module_free(bn);
}

/* Without affine or tracking, InstanceNorm takes any channel count, as PyTorch's (which warns). */
Test(nn_norms, instance_norm1d_unbatched_and_untracked)
{
    em_module *in = em_instance_norm1d_layer(3, (em_instance_norm_opts){0});
    cr_assert_not_null(in, "%s", em_error());
    cr_assert_eq(in->n_params + in->n_buffers, 0);
    em_tensor *x = wave32(EM_SHAPE(4, 5), 0.8, 0.2, 1.5); /* (C, L), C != 3 */
    em_tensor *y = em_forward(in, x);
    em_tensor *want = em_group_norm(em_unsqueeze(x, 0), 4, NULL, NULL, 1e-5);
    double w[20];
    cr_assert_eq(em_copy_to_host(want, EM_F64, w), EM_OK, "%s", em_error());
    expect(y, EM_SHAPE(4, 5), w, 1e-6);
    em_module_free(in);
}

Test(nn_norms, bad_arguments_are_named)
{
    em_tensor *x = wave32(EM_SHAPE(2, 6, 3), 0.7, 0.3, 1);
    em_tensor *w5 = wave32(EM_SHAPE(5), 1, 0, 1);
    expect_error(em_group_norm(x, 4, NULL, NULL, 1e-5), "num_groups 4");
    expect_error(em_group_norm(x, 0, NULL, NULL, 1e-5), "num_groups 0");
    expect_error(em_group_norm(x, 3, w5, NULL, 1e-5), "weight must have shape [6]");
    expect_error(em_group_norm(x, 3, NULL, NULL, -1), "eps -1");
    expect_error(em_group_norm(wave32(EM_SHAPE(6), 1, 0, 1), 3, NULL, NULL, 1e-5),
                 "(N, C, *)");
    expect_error(em_group_norm(wave32(EM_SHAPE(2, 6, 0), 1, 0, 1), 3, NULL, NULL, 1e-5),
                 "at least one position");
    expect_error(em_instance_norm(wave32(EM_SHAPE(2, 6, 1), 1, 0, 1), NULL, NULL, NULL, NULL,
                                  true, 0.1, 1e-5), "more than 1 position");
    expect_error(em_instance_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5),
                 "expected running_mean and running_var");
    expect_error(em_instance_norm(x, NULL, NULL, NULL, NULL, true, 1.5, 1e-5), "momentum 1.5");
    expect_error(em_instance_norm(x, w5, NULL, NULL, NULL, true, 0.1, 1e-5),
                 "running_mean must have shape [6]");

    cr_assert_null(em_group_norm_layer(4, 6, (em_group_norm_opts){0}));
    cr_assert(strstr(em_error(), "channels (6) must be divisible by num_groups (4)"));
    em_error_clear();
    cr_assert_null(em_instance_norm2d_layer(0, (em_instance_norm_opts){0}));
    em_error_clear();
    cr_assert_null(em_instance_norm1d_layer(3, (em_instance_norm_opts){.momentum = -0.5}));
    em_error_clear();
    cr_assert_null(em_batch_norm1d_layer(3, (em_batch_norm_opts){.momentum = -0.5}));
    cr_assert(strstr(em_error(), "EM_BN_CUMULATIVE_AVERAGE"), "%s", em_error());
    em_error_clear();

    em_module *in1 = em_instance_norm1d_layer(3, (em_instance_norm_opts){.affine = true});
    expect_error(em_forward(in1, wave32(EM_SHAPE(2, 4, 5), 1, 0, 1)),
                 "InstanceNorm1d: expected input's size at dim=1 to match num_features (3)");
    expect_error(em_forward(in1, wave32(EM_SHAPE(2, 3, 4, 5), 1, 0, 1)),
                 "InstanceNorm1d: expected 2D or 3D input");
    em_module_free(in1);
}
