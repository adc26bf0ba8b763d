/* Random numbers: the Philox known answer, the counter layout, pinned values, independence from
 * the thread count, generator offsets, and loose moments of each distribution. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/philox.h"
#include "tensor/tensor.h"

static float *host_f32(const em_tensor *t)
{
    float *v = malloc((size_t)em_numel(t) * sizeof *v);
    cr_assert_eq(em_copy_to_host(t, EM_F32, v), EM_OK);
    return v;
}

static double *host_f64(const em_tensor *t)
{
    double *v = malloc((size_t)em_numel(t) * sizeof *v);
    cr_assert_eq(em_copy_to_host(t, EM_F64, v), EM_OK);
    return v;
}

Test(rng, philox_known_answer)
{
    em_philox_block b = em_philox4x32_10(0, 0);
    cr_assert_eq(b.v[0], 0x6627e8d5u);
    cr_assert_eq(b.v[1], 0xe169c58du);
    cr_assert_eq(b.v[2], 0xbc57ac4cu);
    cr_assert_eq(b.v[3], 0x9b00dbd8u);
}

Test(rng, rand_pinned_values_and_layout)
{
    em_generator g = em_generator_new(42);
    em_tensor *t = em_rand(EM_SHAPE(6), EM_F32, &g);
    float *v = host_f32(t);
    static const float pinned[6] = {0x1.39d5ep-1f,  0x1.dfd524p-2f, 0x1.2bf5p-4f,
                                    0x1.5d0accp-2f, 0x1.f9b642p-1f, 0x1.4ee9bp-2f};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(v[i], pinned[i], "element %d: %a", i, v[i]);
        /* element i: block offset + i / 4, lane i % 4 */
        em_philox_block b = em_philox4x32_10((uint64_t)i / 4, 42);
        cr_assert_eq(v[i], em_philox_uniform(b.v[i % 4]));
    }
    cr_assert_eq(g.offset, 2); /* ceil(6 / 4) counters taken */
    free(v);
    em_release(t);
}

Test(rng, offsets_continue_the_stream)
{
    em_generator g1 = em_generator_new(7), g2 = em_generator_new(7);
    em_tensor *a = em_rand(EM_SHAPE(8), EM_F32, &g1);
    em_tensor *b = em_rand(EM_SHAPE(8), EM_F32, &g1);
    em_tensor *ab = em_rand(EM_SHAPE(16), EM_F32, &g2);
    float *va = host_f32(a), *vb = host_f32(b), *vab = host_f32(ab);
    cr_assert(memcmp(va, vab, 8 * sizeof(float)) == 0);
    cr_assert(memcmp(vb, vab + 8, 8 * sizeof(float)) == 0);
    cr_assert(memcmp(va, vb, 8 * sizeof(float)) != 0);
    cr_assert_eq(em_generator_advance(&g1, 5), 4);
    cr_assert_eq(g1.offset, 9);
    free(va);
    free(vb);
    free(vab);
    em_release(a);
    em_release(b);
    em_release(ab);
}

Test(rng, global_generator_reseeds)
{
    em_manual_seed(123);
    em_tensor *a = em_randn(EM_SHAPE(5), EM_F64, NULL);
    cr_assert_eq(em_default_generator()->offset, 2);
    em_manual_seed(123);
    em_tensor *b = em_randn(EM_SHAPE(5), EM_F64, NULL);
    double *va = host_f64(a), *vb = host_f64(b);
    cr_assert(memcmp(va, vb, 5 * sizeof(double)) == 0);
    free(va);
    free(vb);
    em_release(a);
    em_release(b);
}

/* Every distribution, large enough to run threaded, made with n threads. */
static void make_all(int threads, em_tensor **out)
{
    omp_set_num_threads(threads);
    em_generator g = em_generator_new(2024);
    em_shape s = EM_SHAPE(100003);
    out[0] = em_rand(s, EM_F32, &g);
    out[1] = em_randn(s, EM_F32, &g);
    out[2] = em_normal(s, EM_BF16, 3, 2, &g);
    out[3] = em_randint(s, EM_I64, -5, 17, &g);
    out[4] = em_bernoulli(s, EM_U8, 0.3, &g);
    out[5] = em_uniform(s, EM_F64, -2, 6, &g);
}

Test(rng, same_seed_any_thread_count)
{
    em_tensor *one[6], *two[6];
    make_all(1, one);
    make_all(2, two);
    for (int k = 0; k < 6; k++) {
        size_t nbytes = (size_t)em_numel(one[k]) * em_dtype_size(one[k]->dtype);
        cr_assert(memcmp(em_data_ptr(one[k]), em_data_ptr(two[k]), nbytes) == 0, "tensor %d", k);
        em_release(one[k]);
        em_release(two[k]);
    }
}

static void moments(const double *v, int64_t n, double *mean, double *var)
{
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++)
        s2 += (v[i] - *mean) * (v[i] - *mean);
    *var = s2 / (double)(n - 1);
}

Test(rng, distributions)
{
    const int64_t n = 100000;
    em_generator g = em_generator_new(99);
    double mean, var;

    em_tensor *u = em_rand(EM_SHAPE(n), EM_F32, &g);
    double *v = host_f64(u);
    moments(v, n, &mean, &var);
    cr_assert(fabs(mean - 0.5) < 0.01, "mean %g", mean);
    cr_assert(fabs(var - 1.0 / 12) < 0.003, "var %g", var);
    for (int64_t i = 0; i < n; i++)
        cr_assert(v[i] >= 0 && v[i] < 1);
    free(v);

    em_tensor *z = em_randn(EM_SHAPE(n), EM_F32, &g);
    v = host_f64(z);
    moments(v, n, &mean, &var);
    cr_assert(fabs(mean) < 0.02, "mean %g", mean);
    cr_assert(fabs(sqrt(var) - 1) < 0.02, "std %g", sqrt(var));
    free(v);

    em_tensor *w = em_normal(EM_SHAPE(n), EM_F64, 10, 0.5, &g);
    v = host_f64(w);
    moments(v, n, &mean, &var);
    cr_assert(fabs(mean - 10) < 0.01 && fabs(sqrt(var) - 0.5) < 0.01);
    free(v);

    em_tensor *r = em_randint(EM_SHAPE(n), EM_I32, -3, 4, &g);
    v = host_f64(r);
    int64_t counts[7] = {0};
    for (int64_t i = 0; i < n; i++) {
        cr_assert(v[i] >= -3 && v[i] < 4 && v[i] == floor(v[i]), "%g", v[i]);
        counts[(int)v[i] + 3]++;
    }
    for (int k = 0; k < 7; k++)
        cr_assert(fabs((double)counts[k] / (double)n - 1.0 / 7) < 0.01, "value %d", k - 3);
    free(v);

    em_tensor *bern = em_bernoulli(EM_SHAPE(n), EM_BOOL, 0.25, &g);
    v = host_f64(bern);
    moments(v, n, &mean, &var);
    cr_assert(fabs(mean - 0.25) < 0.01, "rate %g", mean);
    free(v);

    em_tensor *un = em_uniform(EM_SHAPE(n), EM_F32, -4, -2, &g);
    v = host_f64(un);
    moments(v, n, &mean, &var);
    cr_assert(fabs(mean + 3) < 0.02);
    for (int64_t i = 0; i < n; i++)
        cr_assert(v[i] >= -4 && v[i] <= -2);
    free(v);

    em_tensor *all[] = {u, z, w, r, bern, un};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        em_release(all[k]);
}

Test(rng, argument_errors)
{
    em_error_clear();
    cr_assert_null(em_rand(EM_SHAPE(3), EM_I32, NULL));
    cr_assert_str_eq(em_error(), "em_rand: dtype must be floating: i32");
    em_error_clear();
    cr_assert_null(em_randint(EM_SHAPE(3), EM_I32, 5, 5, NULL));
    cr_assert_str_eq(em_error(), "em_randint: low must be below high: 5, 5");
    em_error_clear();
    cr_assert_null(em_bernoulli(EM_SHAPE(3), EM_F32, 1.5, NULL));
    cr_assert_str_eq(em_error(), "em_bernoulli: p must be in [0, 1]: 1.5");
    em_error_clear();
    cr_assert_null(em_normal(EM_SHAPE(3), EM_F32, 0, -1, NULL));
    cr_assert_eq(em_error_status(), EM_ERR_ARG);
    em_error_clear();
}
