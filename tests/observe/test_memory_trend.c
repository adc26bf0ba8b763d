/* Memory over time: per-step live, peak and reserved bytes, and the leak check (a steady loop,
 * a loop that keeps 4 KiB a step, one lasting jump). */
#include <criterion/criterion.h>
#include <string.h>

#include "ember.h"

Test(memory_trend, a_step_peak_counts_its_temporaries)
{
    em_memtrend *m = em_memtrend_new((em_memtrend_opts){0});
    cr_assert_not_null(m, "%s", em_error());
    cr_assert_eq(em_memtrend_sample(m, 0), EM_OK);
    size_t base = em_memory_get_stats(EM_CPU).live_bytes;
    em_tensor *t = em_empty(EM_SHAPE(1 << 18), EM_F32); /* 1 MiB, given back within the step */
    em_release(t);
    cr_assert_eq(em_memtrend_sample(m, 1), EM_OK);
    em_mem_sample s = em_memtrend_last(m, EM_CPU);
    cr_expect_eq(s.step, 1);
    cr_expect_eq(s.live_bytes, base);
    cr_expect_eq(s.peak_bytes, base + (1 << 20));
    cr_expect_geq(s.reserved_bytes, s.live_bytes);
    cr_assert_eq(em_memtrend_sample(m, 2), EM_OK);
    cr_expect_eq(em_memtrend_last(m, EM_CPU).peak_bytes, base, "a new window each step");
    em_memtrend_free(m);
}

/* Runs `steps` steps, each keeping keep_bytes (when non-zero) and, at jump_step, 1 MiB once;
 * returns whether the tracker calls it a leak, with the slope in *slope. */
static bool run(int steps, int64_t keep_floats, int jump_step, double *slope)
{
    em_memtrend *m = em_memtrend_new((em_memtrend_opts){.window = 20});
    cr_assert_not_null(m);
    em_tensor *kept[64];
    int n_kept = 0;
    for (int step = 0; step < steps; step++) {
        em_scope_begin();
        em_tensor *tmp = em_ones(EM_SHAPE(4096), EM_F32); /* a temporary of the step */
        cr_assert_not_null(tmp);
        if (keep_floats)
            kept[n_kept++] = em_keep(em_zeros(EM_SHAPE(keep_floats), EM_F32));
        if (step == jump_step)
            kept[n_kept++] = em_keep(em_zeros(EM_SHAPE(1 << 18), EM_F32));
        em_scope_end();
        cr_assert_eq(em_memtrend_sample(m, step), EM_OK);
    }
    bool leaking = em_memtrend_leaking(m, EM_CPU, slope);
    em_memtrend_free(m);
    for (int i = 0; i < n_kept; i++)
        em_release(kept[i]);
    return leaking;
}

Test(memory_trend, leak_check)
{
    double slope;
    cr_expect(!run(30, 0, -1, &slope), "a steady loop");
    cr_expect_eq(slope, 0.0);
    cr_expect(run(30, 1024, -1, &slope), "4 KiB kept every step");
    cr_expect_eq(slope, 4096.0, "%g bytes per step", slope);
    cr_expect(!run(30, 0, 20, &slope), "one lasting jump is no leak");
    cr_expect_gt(slope, 1024.0, "though its slope is steep: %g", slope);
    cr_expect(!run(10, 1024, -1, &slope), "not before a full window");
}

Test(memory_trend, bad_options)
{
    cr_expect_null(em_memtrend_new((em_memtrend_opts){.window = 1}));
    cr_expect(strstr(em_error(), "em_memtrend_new: window must be 0 or at least 2") != NULL,
              "%s", em_error());
    em_error_clear();
    cr_expect_null(em_memtrend_new((em_memtrend_opts){.min_slope_bytes = -1}));
    em_error_clear();
    cr_expect_eq(em_memtrend_sample(NULL, 0), EM_ERR_ARG);
    em_error_clear();
}
