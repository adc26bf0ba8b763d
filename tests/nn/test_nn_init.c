/* nn initialisation: bounds and statistics of kaiming, xavier and uniform per torch.nn.init (fans
 * of 2-D and conv weights, the leaky_relu gain), errors, and determinism under a seed. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "nn/nn.h"

typedef struct {
    double min, max, mean, std;
} stats;

static stats stats_of(const em_tensor *t)
{
    int64_t n = em_numel(t);
    static double v[1 << 16];
    cr_assert_leq(n, 1 << 16);
    cr_assert_eq(em_copy_to_host(t, EM_F64, v), EM_OK);
    stats s = {v[0], v[0], 0, 0};
    for (int64_t i = 0; i < n; i++) {
        s.min = fmin(s.min, v[i]);
        s.max = fmax(s.max, v[i]);
        s.mean += v[i] / (double)n;
    }
    for (int64_t i = 0; i < n; i++)
        s.std += (v[i] - s.mean) * (v[i] - s.mean) / (double)(n - 1);
    s.std = sqrt(s.std);
    return s;
}

static bool same_values(const em_tensor *a, const em_tensor *b)
{
    int64_t n = em_numel(a);
    float va[n], vb[n];
    em_copy_to_host(a, EM_F32, va);
    em_copy_to_host(b, EM_F32, vb);
    return n == em_numel(b) && !memcmp(va, vb, sizeof va);
}

static void setup(void)
{
    em_error_clear();
    em_manual_seed(1234);
    em_scope_begin();
}

static void teardown(void)
{
    em_scope_end();
}

TestSuite(nn_init, .init = setup, .fini = teardown);

Test(nn_init, kaiming_uniform_bound_and_spread)
{
    em_tensor *w = em_empty(EM_SHAPE(256, 128), EM_F32);
    cr_assert_eq(em_init_kaiming_uniform_(w, 0, EM_FAN_IN, NULL), EM_OK);
    double bound = sqrt(6.0 / 128);
    stats s = stats_of(w);
    cr_assert_geq(s.min, -bound - 1e-7);
    cr_assert_leq(s.max, bound + 1e-7);
    cr_assert_gt(s.max, 0.99 * bound);
    cr_assert_float_eq(s.std, bound / sqrt(3.0), 0.01 * bound);
    cr_assert_float_eq(s.mean, 0, 0.01 * bound);

    /* a = sqrt(5), the Linear default: bound 1 / sqrt(fan_in); fan_out uses size(0) */
    cr_assert_eq(em_init_kaiming_uniform_(w, sqrt(5.0), EM_FAN_OUT, NULL), EM_OK);
    s = stats_of(w);
    cr_assert_leq(s.max, 1 / sqrt(256.0) + 1e-7);
    cr_assert_gt(s.max, 0.99 / sqrt(256.0));
}

Test(nn_init, kaiming_normal_on_a_conv_weight_with_leaky_gain)
{
    /* fan_in = 8 * 3 * 3 = 72, fan_out = 16 * 3 * 3 = 144; gain sqrt(2 / (1 + a^2)) */
    em_tensor *w = em_empty(EM_SHAPE(64, 8, 3, 3), EM_F32);
    cr_assert_eq(em_init_kaiming_normal_(w, 0.2, EM_FAN_IN, NULL), EM_OK);
    double std = sqrt(2.0 / 1.04) / sqrt(72.0);
    stats s = stats_of(w);
    cr_assert_float_eq(s.std, std, 0.04 * std); /* about 4 standard errors for 4608 draws */
    cr_assert_float_eq(s.mean, 0, 0.06 * std);
    cr_assert_eq(em_init_kaiming_normal_(w, 0, EM_FAN_OUT, NULL), EM_OK);
    s = stats_of(w);
    cr_assert_float_eq(s.std, sqrt(2.0 / (64 * 9)), 0.04 * sqrt(2.0 / (64 * 9)));
}

Test(nn_init, xavier_uniform_and_normal)
{
    em_tensor *w = em_empty(EM_SHAPE(64, 32), EM_F64);
    cr_assert_eq(em_init_xavier_uniform_(w, 0, NULL), EM_OK); /* gain 1: sqrt(6 / 96) */
    stats s = stats_of(w);
    cr_assert_leq(s.max, 0.25);
    cr_assert_geq(s.min, -0.25);
    cr_assert_gt(s.max, 0.24);
    cr_assert_eq(em_init_xavier_uniform_(w, 2, NULL), EM_OK);
    s = stats_of(w);
    cr_assert_leq(s.max, 0.5);
    cr_assert_gt(s.max, 0.48);
    em_tensor *big = em_empty(EM_SHAPE(128, 128), EM_F32);
    cr_assert_eq(em_init_xavier_normal_(big, 1, NULL), EM_OK);
    cr_assert_float_eq(stats_of(big).std, sqrt(2.0 / 256), 0.02 * sqrt(2.0 / 256));
}

Test(nn_init, uniform_range)
{
    em_tensor *t = em_empty(EM_SHAPE(1000), EM_F32);
    cr_assert_eq(em_init_uniform_(t, -3, -1, NULL), EM_OK);
    stats s = stats_of(t);
    cr_assert_geq(s.min, -3);
    cr_assert_lt(s.max, -1);
    cr_assert_float_eq(s.mean, -2, 0.1);
    cr_assert_eq(em_init_uniform_(t, 1, 0, NULL), EM_ERR_ARG);
    em_error_clear();
}

Test(nn_init, fans_need_two_dims)
{
    em_tensor *b = em_zeros(EM_SHAPE(10), EM_F32);
    cr_assert_eq(em_init_kaiming_uniform_(b, 0, EM_FAN_IN, NULL), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "em_init_kaiming_uniform_: fan in and fan out need at least 2"),
              "%s", em_error());
    cr_assert_eq(em_item(em_amax(em_abs(b), NULL, 0, false)), 0);
    em_error_clear();
    cr_assert_eq(em_init_xavier_normal_(NULL, 1, NULL), EM_ERR_ARG);
    em_error_clear();
}

Test(nn_init, models_are_reproducible_under_a_seed)
{
    em_manual_seed(7);
    em_module *a = em_sequential(2, em_linear_layer(20, 10, true),
                                 em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){0}));
    em_manual_seed(7);
    em_module *b = em_sequential(2, em_linear_layer(20, 10, true),
                                 em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){0}));
    em_manual_seed(8);
    em_module *c = em_sequential(2, em_linear_layer(20, 10, true),
                                 em_conv2d_layer(2, 3, 3, (em_conv2d_layer_opts){0}));
    em_param_ref pa[4], pb[4], pc[4];
    cr_assert_eq(em_module_parameters(a, pa, 4), 4);
    em_module_parameters(b, pb, 4);
    em_module_parameters(c, pc, 4);
    for (int i = 0; i < 4; i++) {
        cr_assert(same_values(pa[i].value, pb[i].value), "%s differs", pa[i].name);
        cr_assert_not(same_values(pa[i].value, pc[i].value), "%s equal", pa[i].name);
    }
    /* weight and bias draw different numbers */
    cr_assert_neq(em_get(pa[0].value, (int64_t[]){0, 0}), em_get(pa[1].value, (int64_t[]){0}));

    em_generator g1 = em_generator_new(3), g2 = em_generator_new(3);
    em_tensor *x = em_empty(EM_SHAPE(8, 8), EM_F32), *y = em_empty(EM_SHAPE(8, 8), EM_F32);
    em_init_xavier_uniform_(x, 1, &g1);
    em_init_xavier_uniform_(y, 1, &g2);
    cr_assert(same_values(x, y));
    em_module_free(a);
    em_module_free(b);
    em_module_free(c);
}
