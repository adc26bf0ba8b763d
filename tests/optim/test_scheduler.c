/* Learning-rate schedulers: lr sequences against PyTorch's, resume by last step, bad input. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ember.h"

/* Every sequence is over an SGD optimizer with two groups of base lr 0.1 and 0.02; row t is the
 * groups' lrs at step t (row 0 right after construction), from torch 1.13:
 *   opt = SGD([{'params': [p], 'lr': 0.1}, {'params': [q], 'lr': 0.02}], lr=0.1)
 *   s = <scheduler>(opt, ...); for _ in range(10): opt.step(); s.step() */
#define N_STEPS 10

typedef struct {
    em_tensor *p, *q;
    em_optim *o;
} setup;

static setup make_setup(void)
{
    setup s = {.p = em_zeros(EM_SHAPE(1), EM_F32), .q = em_zeros(EM_SHAPE(1), EM_F32)};
    s.o = em_sgd(NULL, (em_sgd_opts){.lr = 0.1});
    cr_assert(s.o, "%s", em_error());
    em_optim_add_group(s.o, &s.p, 1, (em_group_opts){0});
    em_optim_add_group(s.o, &s.q, 1, (em_group_opts){.lr = 0.02, .lr_set = true});
    return s;
}

static void free_setup(setup *s)
{
    em_optim_free(s->o);
    em_release(s->p);
    em_release(s->q);
}

static void assert_lrs(const em_optim *o, const double want[2], int t)
{
    for (int g = 0; g < 2; g++) {
        double lr = em_optim_get_lr(o, g);
        cr_assert(fabs(lr - want[g]) <= 1e-13 * fabs(want[g]) + 1e-18,
                  "step %d, group %d: lr %.17g, want %.17g", t, g, lr, want[g]);
    }
}

/* Checks the sequence, then that a fresh scheduler set to each step gives the same lrs. */
static void check_sequence(em_scheduler *(*make)(em_optim *), const double want[][2])
{
    setup s = make_setup();
    em_scheduler *sch = make(s.o);
    cr_assert(sch, "%s", em_error());
    cr_assert_eq(em_scheduler_last_step(sch), 0);
    assert_lrs(s.o, want[0], 0);
    for (int t = 1; t <= N_STEPS; t++) {
        em_scheduler_step(sch);
        cr_assert_eq(em_scheduler_last_step(sch), t);
        assert_lrs(s.o, want[t], t);
    }
    em_scheduler_free(sch);
    free_setup(&s);

    for (int t = 0; t <= N_STEPS; t++) {
        setup r = make_setup();
        em_scheduler *resumed = make(r.o);
        cr_assert(em_scheduler_set_last_step(resumed, t) == EM_OK, "%s", em_error());
        cr_assert_eq(em_scheduler_last_step(resumed), t);
        assert_lrs(r.o, want[t], t);
        em_scheduler_free(resumed);
        free_setup(&r);
    }
}

static em_scheduler *step_lr(em_optim *o)
{
    return em_step_lr(o, 3, 0.5);
}

Test(scheduler, step_lr)
{
    /* StepLR(opt, step_size=3, gamma=0.5) */
    static const double want[N_STEPS + 1][2] = {
        {0.1, 0.02}, {0.1, 0.02}, {0.1, 0.02},
        {0.05, 0.01}, {0.05, 0.01}, {0.05, 0.01},
        {0.025, 0.005}, {0.025, 0.005}, {0.025, 0.005},
        {0.0125, 0.0025}, {0.0125, 0.0025},
    };
    check_sequence(step_lr, want);
}

static em_scheduler *multistep_lr(em_optim *o)
{
    static const int64_t milestones[4] = {2, 5, 5, 8};
    return em_multistep_lr(o, milestones, 4, 0.1);
}

Test(scheduler, multistep_lr)
{
    /* MultiStepLR(opt, milestones=[2, 5, 5, 8], gamma=0.1): a repeated milestone counts twice */
    static const double want[N_STEPS + 1][2] = {
        {0.1, 0.02},
        {0.1, 0.02},
        {0.010000000000000002, 0.002},
        {0.010000000000000002, 0.002},
        {0.010000000000000002, 0.002},
        {0.00010000000000000005, 2.0000000000000005e-05},
        {0.00010000000000000005, 2.0000000000000005e-05},
        {0.00010000000000000005, 2.0000000000000005e-05},
        {1.0000000000000006e-05, 2.0000000000000008e-06},
        {1.0000000000000006e-05, 2.0000000000000008e-06},
        {1.0000000000000006e-05, 2.0000000000000008e-06},
    };
    check_sequence(multistep_lr, want);
}

static em_scheduler *exponential_lr(em_optim *o)
{
    return em_exponential_lr(o, 0.9);
}

Test(scheduler, exponential_lr)
{
    /* ExponentialLR(opt, gamma=0.9) */
    static const double want[N_STEPS + 1][2] = {
        {0.1, 0.02},
        {0.09000000000000001, 0.018000000000000002},
        {0.08100000000000002, 0.016200000000000003},
        {0.07290000000000002, 0.014580000000000003},
        {0.06561000000000002, 0.013122000000000003},
        {0.05904900000000002, 0.011809800000000004},
        {0.05314410000000002, 0.010628820000000004},
        {0.04782969000000002, 0.009565938000000005},
        {0.043046721000000024, 0.008609344200000004},
        {0.03874204890000002, 0.007748409780000004},
        {0.03486784401000002, 0.006973568802000004},
    };
    check_sequence(exponential_lr, want);
}

static em_scheduler *cosine_lr(em_optim *o)
{
    return em_cosine_annealing_lr(o, 10, 0.001);
}

Test(scheduler, cosine_annealing_lr)
{
    /* CosineAnnealingLR(opt, T_max=10, eta_min=0.001) */
    static const double want[N_STEPS + 1][2] = {
        {0.1, 0.02},
        {0.09757729755661011, 0.01953503690480396},
        {0.0905463412215599, 0.018185661446562},
        {0.07959536998847742, 0.016083959896778494},
        {0.0657963412215599, 0.013435661446561997},
        {0.0505, 0.010499999999999995},
        {0.03520365877844011, 0.007564338553437996},
        {0.02140463001152259, 0.004916040103221504},
        {0.010453658778440109, 0.0028143385534379994},
        {0.0034227024433899004, 0.0014649630951960413},
        {0.001, 0.001},
    };
    check_sequence(cosine_lr, want);
}

static em_scheduler *warmup_cosine_lr(em_optim *o)
{
    return em_warmup_cosine_lr(o, 3, 10, 0.001);
}

Test(scheduler, warmup_cosine_lr)
{
    /* warmup 3, total 10, eta_min 0.001: the header's formula evaluated in Python */
    static const double want[N_STEPS + 1][2] = {
        {0.03333333333333333, 0.006666666666666667},
        {0.06666666666666667, 0.013333333333333334},
        {0.10000000000000002, 0.02},
        {0.1, 0.02},
        {0.09509795896116975, 0.019059204245072982},
        {0.08136274519200731, 0.01642315311765797},
        {0.061514786230837566, 0.012613948872584987},
        {0.03948521376916244, 0.008386051127415015},
        {0.019637254807992693, 0.004576846882342032},
        {0.005902041038830258, 0.0019407957549270193},
        {0.001, 0.001},
    };
    check_sequence(warmup_cosine_lr, want);
}

static em_scheduler *one_cycle_lr(em_optim *o)
{
    return em_one_cycle_lr(o, (em_one_cycle_opts){.max_lr = 0.5, .total_steps = 10});
}

Test(scheduler, one_cycle_lr)
{
    /* OneCycleLR(opt, max_lr=0.5, total_steps=10, cycle_momentum=False); the other options
     * default (pct_start 0.3, div_factor 25, final_div_factor 1e4, cos, two phases) */
    static const double want[N_STEPS + 1][2] = {
        {0.020000000000000018, 0.020000000000000018},
        {0.26, 0.26},
        {0.5, 0.5},
        {0.47524231600673683, 0.47524231600673683},
        {0.40587282697488153, 0.40587282697488153},
        {0.30563101096814466, 0.30563101096814466},
        {0.19437098903185537, 0.19437098903185537},
        {0.09412917302511849, 0.09412917302511849},
        {0.024759683993263143, 0.024759683993263143},
        {2e-06, 2e-06},
        {0.024759683993263115, 0.024759683993263115},
    };
    check_sequence(one_cycle_lr, want);
}

Test(scheduler, one_cycle_past_the_end_is_an_error)
{
    setup s = make_setup();
    em_scheduler *sch = one_cycle_lr(s.o);
    cr_assert(em_scheduler_set_last_step(sch, 10) == EM_OK);
    double lr = em_optim_get_lr(s.o, 0);
    em_scheduler_step(sch);
    cr_assert(strstr(em_error(), "past the one-cycle schedule's total_steps (10)"), "%s",
              em_error());
    em_error_clear();
    cr_assert_eq(em_scheduler_last_step(sch), 10);
    cr_assert_eq(em_optim_get_lr(s.o, 0), lr);
    em_scheduler_free(sch);
    free_setup(&s);
}

Test(scheduler, bad_arguments)
{
    setup s = make_setup();
    cr_assert_null(em_step_lr(s.o, 0, 0.5));
    cr_assert(strstr(em_error(), "em_step_lr: step_size (0)"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_warmup_cosine_lr(s.o, 10, 10, 0));
    cr_assert(strstr(em_error(), "em_warmup_cosine_lr"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_one_cycle_lr(s.o, (em_one_cycle_opts){.max_lr = 0.1, .total_steps = 2}));
    cr_assert(strstr(em_error(), "em_one_cycle_lr"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_cosine_annealing_lr(NULL, 10, 0));
    em_error_clear();
    /* nothing was changed by the failed constructors */
    cr_assert_eq(em_optim_get_lr(s.o, 0), 0.1);
    free_setup(&s);
}

/* ReduceLROnPlateau: rows of (group 0 lr, group 1 lr, best, num_bad_epochs, cooldown_counter)
 * after each s.step(metric), from torch 1.13 over the two-group setup above. */
typedef struct {
    double lr0, lr1, best;
    int64_t bad, cooldown;
} plateau_row;

static void check_plateau(em_plateau_opts p, const double *metrics, const plateau_row *want,
                          int n)
{
    setup s = make_setup();
    em_scheduler *sch = em_reduce_lr_on_plateau(s.o, p);
    cr_assert(sch, "%s", em_error());
    cr_assert(em_scheduler_wants_metric(sch));
    em_param_ref state[3];
    cr_assert_eq(em_scheduler_state(sch, state, 3), 3);
    for (int t = 0; t < n; t++) {
        cr_assert_eq(em_scheduler_step_metric(sch, metrics[t]), EM_OK, "%s", em_error());
        assert_lrs(s.o, (double[2]){want[t].lr0, want[t].lr1}, t);
        cr_assert_eq(em_item(state[0].value), want[t].best, "step %d best", t);
        cr_assert_eq(em_item(state[1].value), (double)want[t].bad, "step %d num_bad_epochs", t);
        cr_assert_eq(em_item(state[2].value), (double)want[t].cooldown, "step %d cooldown", t);
    }
    cr_assert_eq(em_scheduler_last_step(sch), n);
    em_scheduler_free(sch);
    free_setup(&s);
}

Test(scheduler, reduce_lr_on_plateau_min_rel_with_cooldown_and_min_lr)
{
    /* ReduceLROnPlateau(opt, mode='min', factor=0.5, patience=2, threshold=0.1,
     *                   threshold_mode='rel', cooldown=1, min_lr=0.004) */
    static const double metrics[] = {1.0, 0.95, 0.94, 0.93, 0.5, 0.49, 0.6, 0.7, 0.8, 0.9,
                                     0.45, 0.44, 0.43, 0.42, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    static const plateau_row want[] = {
        {0.1, 0.02, 1, 0, 0}, {0.1, 0.02, 1, 1, 0}, {0.1, 0.02, 1, 2, 0},
        {0.05, 0.01, 1, 0, 1}, {0.05, 0.01, 0.5, 0, 0}, {0.05, 0.01, 0.5, 1, 0},
        {0.05, 0.01, 0.5, 2, 0}, {0.025, 0.005, 0.5, 0, 1}, {0.025, 0.005, 0.5, 0, 0},
        {0.025, 0.005, 0.5, 1, 0}, {0.025, 0.005, 0.5, 2, 0}, {0.025, 0.005, 0.44, 0, 0},
        {0.025, 0.005, 0.44, 1, 0}, {0.025, 0.005, 0.44, 2, 0}, {0.0125, 0.004, 0.44, 0, 1},
        {0.0125, 0.004, 0.44, 0, 0}, {0.0125, 0.004, 0.44, 1, 0}, {0.0125, 0.004, 0.44, 2, 0},
        {0.00625, 0.004, 0.44, 0, 1}, {0.00625, 0.004, 0.44, 0, 0},
    };
    check_plateau((em_plateau_opts){.factor = 0.5, .patience = 2, .threshold = 0.1,
                                    .cooldown = 1, .min_lr = 0.004},
                  metrics, want, 20);
}

Test(scheduler, reduce_lr_on_plateau_max_abs_without_patience)
{
    /* ReduceLROnPlateau(opt, mode='max', factor=0.1, patience=0, threshold=0.05,
     *                   threshold_mode='abs') */
    static const double metrics[] = {0.5, 0.6, 0.6, 0.61, 0.8, 0.79, 0.78, 0.9, 0.9, 0.9};
    static const plateau_row want[] = {
        {0.1, 0.02, 0.5, 0, 0}, {0.1, 0.02, 0.6, 0, 0},
        {0.010000000000000002, 0.002, 0.6, 0, 0},
        {0.0010000000000000002, 0.00020000000000000001, 0.6, 0, 0},
        {0.0010000000000000002, 0.00020000000000000001, 0.8, 0, 0},
        {0.00010000000000000003, 2.0000000000000002e-05, 0.8, 0, 0},
        {1.0000000000000004e-05, 2.0000000000000003e-06, 0.8, 0, 0},
        {1.0000000000000004e-05, 2.0000000000000003e-06, 0.9, 0, 0},
        {1.0000000000000004e-06, 2.0000000000000004e-07, 0.9, 0, 0},
        {1.0000000000000005e-07, 2.0000000000000007e-08, 0.9, 0, 0},
    };
    check_plateau((em_plateau_opts){.maximize = true, .factor = 0.1, .patience = -1,
                                    .threshold = 0.05, .threshold_abs = true},
                  metrics, want, 10);
}

Test(scheduler, reduce_lr_on_plateau_state_round_trip_and_misuse)
{
    setup s = make_setup();
    em_scheduler *a = em_reduce_lr_on_plateau(s.o, (em_plateau_opts){.patience = 1,
                                                                      .cooldown = 2});
    em_scheduler *b = em_reduce_lr_on_plateau(s.o, (em_plateau_opts){.patience = 1,
                                                                      .cooldown = 2});
    cr_assert(a && b, "%s", em_error());
    static const double metrics[] = {1, 2, 3}; /* best 1, then two bad: a cut, cooldown 2 */
    for (int t = 0; t < 3; t++)
        em_scheduler_step_metric(a, metrics[t]);
    em_param_ref state[3];
    cr_assert_eq(em_scheduler_state(a, state, 3), 3);
    cr_assert_eq(em_scheduler_load_state(b, state, 3), EM_OK, "%s", em_error());
    em_param_ref got[3];
    em_scheduler_state(b, got, 3);
    cr_assert_eq(em_item(got[0].value), 1.0);
    cr_assert_eq(em_item(got[2].value), 2.0);
    /* a misnamed entry changes nothing */
    em_param_ref bad[3] = {state[0], state[1], {"cooldown", state[2].value}};
    em_scheduler *c = em_reduce_lr_on_plateau(s.o, (em_plateau_opts){0});
    cr_assert_eq(em_scheduler_load_state(c, bad, 3), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "'cooldown' is unknown"), "%s", em_error());
    em_scheduler_state(c, got, 3);
    cr_assert_eq(em_item(got[0].value), INFINITY);
    em_error_clear();
    cr_assert_eq(em_scheduler_state(c, NULL, 3), -1);
    cr_assert_str_eq(em_error(), "em_scheduler_state: out is NULL with max 3");
    em_error_clear();
    /* a plateau scheduler needs its metric; the closed-form ones take none */
    em_scheduler_step(c);
    cr_assert(strstr(em_error(), "steps with a metric"), "%s", em_error());
    cr_assert_eq(em_scheduler_last_step(c), 0);
    em_error_clear();
    em_scheduler *step = em_step_lr(s.o, 2, 0.5);
    cr_assert_eq(em_scheduler_step_metric(step, 1.0), EM_ERR_STATE);
    cr_assert_eq(em_scheduler_state(step, got, 3), 0);
    em_error_clear();
    cr_assert_null(em_reduce_lr_on_plateau(s.o, (em_plateau_opts){.factor = 1.5}));
    cr_assert(strstr(em_error(), "0 < factor < 1 (1.5)"), "%s", em_error());
    em_error_clear();
    em_scheduler_free(step);
    em_scheduler_free(c);
    em_scheduler_free(b);
    em_scheduler_free(a);
    free_setup(&s);
}

/* Steps read back on resume are counts that can still be incremented: past 2^53 (INT64_MAX from
 * a damaged checkpoint) is refused, and stepping from 2^53 is an error, not an overflow. */
Test(scheduler, a_step_past_2_53_is_refused)
{
    setup s = make_setup();
    em_scheduler *c = em_cosine_annealing_lr(s.o, 10, 0);
    cr_assert_eq(em_scheduler_set_last_step(c, INT64_MAX), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "step (9223372036854775807) outside [0, 2^53]"), "%s",
              em_error());
    em_error_clear();
    cr_assert_eq(em_scheduler_last_step(c), 0);
    cr_assert_eq(em_scheduler_set_last_step(c, EM_MAX_STEP_COUNT), EM_OK, "%s", em_error());
    em_scheduler_step(c);
    cr_assert(strstr(em_error(), "step (9007199254740993) outside [0, 2^53]"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_scheduler_last_step(c), EM_MAX_STEP_COUNT);
    em_scheduler_free(c);
    free_setup(&s);
}

/* A plateau scheduler's counters from a file are counts too, and its best is a number. */
Test(scheduler, plateau_state_with_a_bad_counter_is_refused)
{
    setup s = make_setup();
    em_scheduler *p = em_reduce_lr_on_plateau(s.o, (em_plateau_opts){0});
    em_param_ref state[3];
    cr_assert_eq(em_scheduler_state(p, state, 3), 3);
    em_tensor *huge = em_full(EM_SCALAR_SHAPE, EM_I64, 0);
    *(int64_t *)em_data_ptr(huge) = INT64_MAX;
    em_tensor *nan = em_scalar(NAN, EM_F64);
    const struct { int k; em_tensor *v; const char *says; } bad[] = {
        {1, huge, "'num_bad_epochs' is 9.22337e+18; a step count is a whole number in [0, 2^53]"},
        {2, huge, "'cooldown_counter' is 9.22337e+18"},
        {0, nan, "'best' is NaN"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        em_param_ref in[3] = {state[0], state[1], state[2]};
        in[bad[b].k].value = bad[b].v;
        cr_assert_eq(em_scheduler_load_state(p, in, 3), EM_ERR_ARG, "case %zu", b);
        cr_expect(strstr(em_error(), bad[b].says), "%s", em_error());
        em_error_clear();
        cr_expect_eq(em_item(state[1].value), 0, "nothing changed");
    }
    /* stepping at the largest count a file may hold goes on without overflow */
    em_param_ref ok[3] = {state[0], state[1], state[2]};
    em_tensor *most = em_full(EM_SCALAR_SHAPE, EM_I64, 0);
    *(int64_t *)em_data_ptr(most) = EM_MAX_STEP_COUNT;
    ok[1].value = most;
    cr_assert_eq(em_scheduler_load_state(p, ok, 3), EM_OK, "%s", em_error());
    cr_assert_eq(em_scheduler_step_metric(p, 1e9), EM_OK, "%s", em_error());
    em_release(most);
    em_release(huge);
    em_release(nan);
    em_scheduler_free(p);
    free_setup(&s);
}
