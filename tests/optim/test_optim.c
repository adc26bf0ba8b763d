/* Optimizers: SGD, Adam, AdamW and RMSprop updates against PyTorch's, parameter groups,
 * skipped parameters, and state save and load. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "ember.h"

/* The fixed problem: loss = sum(0.5 * c * p^2 + b * p), so grad = c * p + b, from p = [1,-2,3].
 * Expected values are torch 1.13's (float64), three steps of:
 *   p = torch.tensor([1., -2., 3.], requires_grad=True); opt = <optimizer>([p], ...)
 *   for _ in range(3): opt.zero_grad(); loss.backward(); opt.step(); print(p.tolist()) */
static const double C[3] = {1.0, 2.0, 0.5};
static const double B[3] = {0.1, -0.3, 0.2};
static const double P0[3] = {1.0, -2.0, 3.0};

static em_tensor *tensor_of(const double *v, int n, em_dtype dt)
{
    em_tensor *t64 = em_from_data(EM_SHAPE(n), EM_F64, v);
    if (dt == EM_F64)
        return t64;
    em_tensor *t = em_empty(EM_SHAPE(n), dt);
    cr_assert(em_copy_(t, t64) == EM_OK, "%s", em_error());
    em_release(t64);
    return t;
}

static void values_of(const em_tensor *t, double *out)
{
    cr_assert(em_copy_to_host(t, EM_F64, out) == 0, "%s", em_error());
}

/* p->grad = c * p + b, elementwise over p's entries */
static void set_grad(em_tensor *p, const double *c, const double *b)
{
    int n = (int)em_numel(p);
    double v[8], g[8];
    values_of(p, v);
    for (int i = 0; i < n; i++)
        g[i] = c[i] * v[i] + b[i];
    em_release(p->grad);
    p->grad = tensor_of(g, n, p->dtype);
}

static void assert_close(const em_tensor *t, const double *want, double rtol, int step)
{
    double v[8];
    values_of(t, v);
    for (int i = 0; i < em_numel(t); i++)
        cr_assert(fabs(v[i] - want[i]) <= rtol * fmax(1.0, fabs(want[i])),
                  "step %d, element %d: got %.17g, want %.17g", step, i, v[i], want[i]);
}

/* Three steps of o over its single parameter p against want. */
static void run_three(em_optim *o, em_tensor *p, const double want[3][3], double rtol)
{
    cr_assert(o, "%s", em_error());
    for (int s = 0; s < 3; s++) {
        set_grad(p, C, B);
        cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
        assert_close(p, want[s], rtol, s + 1);
    }
}

typedef em_optim *(*make_fn)(em_tensor *p);

/* Runs make's optimizer on the fixed problem in f64 (tight) and in f32 (float precision). */
static void check_both(make_fn make, const double want[3][3])
{
    em_dtype dts[2] = {EM_F64, EM_F32};
    double rtol[2] = {1e-12, 2e-6};
    for (int d = 0; d < 2; d++) {
        em_tensor *p = tensor_of(P0, 3, dts[d]);
        em_optim *o = make(p);
        run_three(o, p, want, rtol[d]);
        em_optim_free(o);
        em_release(p);
    }
}

static em_optim *with_group(em_optim *o, em_tensor *p)
{
    cr_assert(o, "%s", em_error());
    cr_assert_eq(em_optim_add_group(o, &p, 1, (em_group_opts){0}), 0, "%s", em_error());
    return o;
}

static em_optim *sgd_plain(em_tensor *p)
{
    return with_group(em_sgd(NULL, (em_sgd_opts){.lr = 0.1}), p);
}

static em_optim *sgd_momentum(em_tensor *p)
{
    return with_group(em_sgd(NULL, (em_sgd_opts){.lr = 0.1, .momentum = 0.9, .dampening = 0.1}),
                      p);
}

static em_optim *sgd_nesterov(em_tensor *p)
{
    return with_group(em_sgd(NULL, (em_sgd_opts){.lr = 0.1, .momentum = 0.9, .nesterov = true}),
                      p);
}

static em_optim *sgd_decay(em_tensor *p)
{
    return with_group(em_sgd(NULL, (em_sgd_opts){.lr = 0.1, .momentum = 0.5,
                                                 .weight_decay = 0.1}), p);
}

Test(sgd, plain)
{
    /* SGD(lr=0.1) */
    static const double want[3][3] = {
        {0.89, -1.57, 2.83},
        {0.791, -1.226, 2.6685},
        {0.7019000000000001, -0.9508, 2.515075},
    };
    check_both(sgd_plain, want);
}

Test(sgd, momentum_dampening)
{
    /* SGD(lr=0.1, momentum=0.9, dampening=0.1): the first step takes the gradient undamped */
    static const double want[3][3] = {
        {0.89, -1.57, 2.83},
        {0.7019, -0.8734, 2.53165},
        {0.46043899999999993, -0.06224799999999986, 2.13121075},
    };
    check_both(sgd_momentum, want);
}

Test(sgd, nesterov)
{
    /* SGD(lr=0.1, momentum=0.9, nesterov=True) */
    static const double want[3][3] = {
        {0.7909999999999999, -1.183, 2.677},
        {0.5326099999999999, -0.3281599999999999, 2.246985},
        {0.26005309999999987, 0.38295680000000015, 1.746972925},
    };
    check_both(sgd_nesterov, want);
}

Test(sgd, weight_decay)
{
    /* SGD(lr=0.1, momentum=0.5, weight_decay=0.1) */
    static const double want[3][3] = {
        {0.88, -1.55, 2.8},
        {0.7132, -0.9695, 2.512},
        {0.5413479999999999, -0.44565499999999997, 2.19728},
    };
    check_both(sgd_decay, want);
}

Test(sgd, bad_options)
{
    cr_assert_null(em_sgd(NULL, (em_sgd_opts){.nesterov = true}));
    cr_assert(strstr(em_error(), "em_sgd: nesterov"), "%s", em_error());
    em_error_clear();
    cr_assert_null(em_sgd(NULL, (em_sgd_opts){.lr = -1}));
    cr_assert(strstr(em_error(), "em_sgd"), "%s", em_error());
    em_error_clear();
}

static em_optim *adam_plain(em_tensor *p)
{
    return with_group(em_adam(NULL, (em_adam_opts){.lr = 0.1}), p);
}

static em_optim *adam_decay(em_tensor *p)
{
    return with_group(em_adam(NULL, (em_adam_opts){.lr = 0.5, .beta1 = 0.9, .beta2 = 0.5,
                                                   .weight_decay = 0.1}), p);
}

static em_optim *adam_amsgrad(em_tensor *p)
{
    return with_group(em_adam(NULL, (em_adam_opts){.lr = 0.5, .beta2 = 0.5, .weight_decay = 0.1,
                                                   .amsgrad = true}), p);
}

static em_optim *adamw_decay(em_tensor *p)
{
    return with_group(em_adamw(NULL, (em_adam_opts){.lr = 0.1, .weight_decay = 0.1}), p);
}

static em_optim *adamw_default(em_tensor *p)
{
    return with_group(em_adamw(NULL, (em_adam_opts){.lr = 0.1}), p);
}

Test(adam, plain)
{
    /* Adam(lr=0.1) */
    static const double want[3][3] = {
        {0.9000000009090909, -1.900000000232558, 2.900000000588235},
        {0.8003611627734645, -1.8001524222844993, 2.8000889376942744},
        {0.70138244621909, -1.700569748619489, 2.700329785128124},
    };
    check_both(adam_plain, want);
}

Test(adam, l2_weight_decay)
{
    /* Adam(lr=0.5, betas=(0.9, 0.5), weight_decay=0.1) */
    static const double want[3][3] = {
        {0.5000000041666666, -1.5000000011111112, 2.5000000025},
        {-0.02165097475741873, -0.9849603203058181, 1.989876133089551},
        {-0.5463939134489011, -0.4390987246186755, 1.4604367791893806},
    };
    check_both(adam_decay, want);
}

Test(adam, amsgrad)
{
    /* Adam(lr=0.5, betas=(0.9, 0.5), weight_decay=0.1, amsgrad=True): differs from the case
     * above once exp_avg_sq falls (element 0 at step 2) */
    static const double want[3][3] = {
        {0.5000000041666666, -1.5000000011111112, 2.5000000025},
        {0.03534899287371418, -0.9849603203058181, 1.989876133089551},
        {-0.30958389400735575, -0.5107657626242904, 1.4883465849597601},
    };
    check_both(adam_amsgrad, want);
}

Test(adamw, decoupled_decay)
{
    /* AdamW(lr=0.1, weight_decay=0.1) */
    static const double want[3][3] = {
        {0.8900000009090909, -1.880000000232558, 2.870000000588235},
        {0.7815122295181711, -1.7613907838648861, 2.7414205766239172},
        {0.6748629718781681, -1.6442993062622295, 2.614332792908302},
    };
    check_both(adamw_decay, want);
}

Test(adamw, default_weight_decay)
{
    /* AdamW(lr=0.1): weight_decay defaults to 0.01 */
    static const double want[3][3] = {
        {0.8990000009090909, -1.898000000232558, 2.897000000588235},
        {0.7984671369959828, -1.7962581351558768, 2.794194995745185},
        {0.698704042386194, -1.6948893775133036, 2.691649923020132},
    };
    check_both(adamw_default, want);
}

/* AdamW over 37 f32 elements (full 8-lane vectors and a tail, as the CPU kernel runs them)
 * against the same three updates in scalar f32 arithmetic in PyTorch's order of operations
 * (the first moment as a lerp): equal to the bit. */
Test(adamw, f32_vector_lanes_match_scalar_bits)
{
    enum { N = 37 };
    const double lr = 0.01, wd = 0.1, b1 = 0.9, b2 = 0.999; /* PyTorch's defaults, as doubles */
    const float w1 = (float)(1 - b1), fb2 = (float)b2, w2 = (float)(1 - b2), eps = 1e-8f;
    float want[N], m[N] = {0}, v[N] = {0}, g[N], got[N];
    double start[N];
    for (int i = 0; i < N; i++) {
        start[i] = want[i] = (float)(0.25 * sin(i + 1.0));
        g[i] = (float)(0.5 * cos(3.0 * i) + 0.01 * i);
    }
    em_tensor *p = tensor_of(start, N, EM_F32);
    em_optim *o = with_group(em_adamw(NULL, (em_adam_opts){.lr = lr, .weight_decay = wd}), p);
    for (int step = 1; step <= 3; step++) {
        em_release(p->grad);
        p->grad = em_from_data(EM_SHAPE(N), EM_F32, g);
        cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
        float step_size = (float)(lr / (1 - pow(b1, step)));
        float bc2 = (float)sqrt(1 - pow(b2, step)), decay = (float)(1 - lr * wd);
        for (int i = 0; i < N; i++) {
            m[i] = m[i] + w1 * (g[i] - m[i]);
            v[i] = v[i] * fb2 + w2 * g[i] * g[i];
            want[i] = want[i] * decay - step_size * (m[i] / (sqrtf(v[i]) / bc2 + eps));
        }
        cr_assert(em_copy_to_host(p, EM_F32, got) == EM_OK, "%s", em_error());
        for (int i = 0; i < N; i++)
            cr_assert(got[i] == want[i], "step %d, element %d: %.9g, want %.9g", step, i,
                      got[i], want[i]);
    }
    em_optim_free(o);
    em_release(p);
}

static em_optim *adamw_no_decay(em_tensor *p)
{
    return with_group(em_adamw(NULL, (em_adam_opts){.lr = 0.1, .no_weight_decay = true}), p);
}

Test(adamw, no_weight_decay_is_plain_adam)
{
    /* AdamW(lr=0.1, weight_decay=0) is Adam(lr=0.1): the same numbers as adam::plain */
    static const double want[3][3] = {
        {0.9000000009090909, -1.900000000232558, 2.900000000588235},
        {0.8003611627734645, -1.8001524222844993, 2.8000889376942744},
        {0.70138244621909, -1.700569748619489, 2.700329785128124},
    };
    check_both(adamw_no_decay, want);
}

static em_optim *rmsprop_plain(em_tensor *p)
{
    return with_group(em_rmsprop(NULL, (em_rmsprop_opts){.lr = 0.01}), p);
}

static em_optim *rmsprop_centered(em_tensor *p)
{
    return with_group(em_rmsprop(NULL, (em_rmsprop_opts){.lr = 0.01, .alpha = 0.9,
                                                         .centered = true, .momentum = 0.5,
                                                         .weight_decay = 0.1}), p);
}

Test(rmsprop, plain)
{
    /* RMSprop(lr=0.01) */
    static const double want[3][3] = {
        {0.9000000090909083, -1.9000000023255814, 2.9000000058823527},
        {0.8325478262848031, -1.8308110276302547, 2.8301724603072898},
        {0.7791114439875177, -1.7750403008312117, 2.7735507362638003},
    };
    check_both(rmsprop_plain, want);
}

Test(rmsprop, centered_momentum_decay)
{
    /* RMSprop(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.1) */
    static const double want[3][3] = {
        {0.9666666675925926, -1.9666666669135802, 2.9666666672222224},
        {0.9248880652880077, -1.9246996973559758, 2.924631142595217},
        {0.8822898659952112, -1.88161077576319, 2.8813655017613455},
    };
    check_both(rmsprop_centered, want);
}

Test(groups, own_lr_and_no_decay)
{
    /* torch.optim.SGD([{'params': [p]}, {'params': [q], 'lr': 0.05, 'weight_decay': 0.0}],
     *                 lr=0.1, momentum=0.9, weight_decay=0.1), q = [0.5, -1.5] with
     * grad 2q + 1 */
    static const double want_p[3][3] = {
        {0.88, -1.55, 2.8},
        {0.6651999999999999, -0.7895, 2.432},
        {0.38870799999999983, 0.0907450000000001, 1.93488},
    };
    static const double want_q[3][2] = {
        {0.4, -1.4},
        {0.22000000000000003, -1.22},
        {-0.013999999999999969, -0.986},
    };
    static const double cq[2] = {2, 2}, bq[2] = {1, 1}, q0[2] = {0.5, -1.5};
    em_tensor *p = tensor_of(P0, 3, EM_F64), *q = tensor_of(q0, 2, EM_F64);
    em_optim *o = em_sgd(NULL, (em_sgd_opts){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
    cr_assert_eq(em_optim_add_group(o, &p, 1, (em_group_opts){0}), 0);
    em_group_opts g1 = {.lr = 0.05, .lr_set = true, .weight_decay = 0, .weight_decay_set = true};
    cr_assert_eq(em_optim_add_group(o, &q, 1, g1), 1, "%s", em_error());
    cr_assert_eq(em_optim_num_groups(o), 2);
    cr_assert_eq(em_optim_get_lr(o, 0), 0.1);
    cr_assert_eq(em_optim_get_lr(o, 1), 0.05);
    for (int s = 0; s < 3; s++) {
        set_grad(p, C, B);
        set_grad(q, cq, bq);
        cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
        assert_close(p, want_p[s], 1e-12, s + 1);
        assert_close(q, want_q[s], 1e-12, s + 1);
    }
    em_optim_free(o);
    em_release(p);
    em_release(q);
}

Test(groups, set_lr_takes_effect)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64);
    em_optim *o = sgd_plain(p);
    em_optim_set_lr(o, 0, 0.5);
    cr_assert_eq(em_optim_get_lr(o, 0), 0.5);
    set_grad(p, C, B);
    cr_assert(em_optim_step(o) == EM_OK);
    /* p - 0.5 * (c p + b) */
    assert_close(p, (double[]){1 - 0.5 * 1.1, -2 - 0.5 * -4.3, 3 - 0.5 * 1.7}, 1e-15, 1);
    cr_assert(isnan(em_optim_get_lr(o, 3)));
    cr_assert(strstr(em_error(), "em_optim_get_lr: no group 3"), "%s", em_error());
    em_error_clear();
    em_optim_free(o);
    em_release(p);
}

Test(groups, bad_parameters_rejected)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64);
    em_tensor *i = em_zeros(EM_SHAPE(3), EM_I32);
    em_optim *o = sgd_plain(p);
    cr_assert_eq(em_optim_add_group(o, &p, 1, (em_group_opts){0}), -1);
    cr_assert(strstr(em_error(), "already in a group"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(em_optim_add_group(o, &i, 1, (em_group_opts){0}), -1);
    cr_assert(strstr(em_error(), "f32 or f64"), "%s", em_error());
    em_error_clear();
    em_tensor *twice[2] = {i, i};
    cr_assert_eq(em_optim_add_group(o, twice, 2, (em_group_opts){0}), -1);
    em_error_clear();
    cr_assert_eq(em_optim_num_groups(o), 1);
    em_optim_free(o);
    em_release(p);
    em_release(i);
}

Test(step, params_without_grad_untouched)
{
    em_tensor *p = tensor_of(P0, 3, EM_F32), *q = tensor_of(P0, 3, EM_F32);
    em_tensor *ps[2] = {p, q};
    em_optim *o = em_adam(NULL, (em_adam_opts){.lr = 0.1});
    cr_assert_eq(em_optim_add_group(o, ps, 2, (em_group_opts){0}), 0);
    for (int s = 0; s < 2; s++) {
        set_grad(p, C, B);
        cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
    }
    assert_close(q, P0, 0, 0);
    em_param_ref refs[16];
    int n = em_optim_state(o, refs, 16);
    /* step, group.0.lr, then (step, exp_avg, exp_avg_sq) per parameter */
    cr_assert_eq(n, 8);
    cr_assert_str_eq(refs[5].name, "param.1.step");
    cr_assert_eq(em_item(refs[2].value), 2);
    cr_assert_eq(em_item(refs[5].value), 0);
    cr_assert_str_eq(refs[6].name, "param.1.exp_avg");
    assert_close(refs[6].value, (double[]){0, 0, 0}, 0, 0);
    em_optim_free(o);
    em_release(p);
    em_release(q);
}

Test(step, zero_grad_drops_grads)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64);
    em_optim *o = sgd_plain(p);
    set_grad(p, C, B);
    em_optim_zero_grad(o);
    cr_assert_null(p->grad);
    cr_assert(em_optim_step(o) == EM_OK);
    assert_close(p, P0, 0, 0);
    em_optim_free(o);
    em_release(p);
}

Test(step, grad_of_wrong_shape_changes_nothing)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64), *q = tensor_of(P0, 3, EM_F64);
    em_tensor *ps[2] = {p, q};
    em_optim *o = em_sgd(NULL, (em_sgd_opts){.lr = 0.1});
    em_optim_add_group(o, ps, 2, (em_group_opts){0});
    set_grad(p, C, B);
    q->grad = em_zeros(EM_SHAPE(2), EM_F64);
    cr_assert_eq(em_optim_step(o), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "em_optim_step: the grad of parameter 1 is [2]"), "%s",
              em_error());
    em_error_clear();
    assert_close(p, P0, 0, 0);
    em_optim_free(o);
    em_release(p);
    em_release(q);
}

Test(step, non_contiguous_grad)
{
    double v[6] = {1, 2, 3, 4, 5, 6}, gt[6] = {0.5, -1, 2, 0.25, -3, 1.5};
    em_tensor *p = em_from_data(EM_SHAPE(2, 3), EM_F64, v);
    em_tensor *g = em_from_data(EM_SHAPE(3, 2), EM_F64, gt);
    p->grad = em_transpose(g, 0, 1); /* (2, 3) with strides (1, 2) */
    cr_assert(p->grad && !em_is_contiguous(p->grad), "%s", em_error());
    em_optim *o = with_group(em_sgd(NULL, (em_sgd_opts){.lr = 0.1}), p);
    cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
    double want[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = v[i * 3 + j] - 0.1 * gt[j * 2 + i];
    assert_close(p, want, 1e-15, 1);
    em_optim_free(o);
    em_release(g);
    em_release(p);
}

/* Copies of every state tensor of o, as em_param_refs naming them. */
typedef struct {
    int n;
    em_param_ref refs[32];
} snapshot;

static void take(const em_optim *o, snapshot *s)
{
    em_param_ref live[32];
    s->n = em_optim_state(o, live, 32);
    cr_assert(s->n <= 32);
    for (int i = 0; i < s->n; i++)
        s->refs[i] = (em_param_ref){.name = live[i].name, .value = em_clone(live[i].value)};
}

static void drop(snapshot *s)
{
    for (int i = 0; i < s->n; i++)
        em_release(s->refs[i].value);
}

static bool same_bytes(const em_tensor *a, const em_tensor *b)
{
    size_t n = em_numel(a) * em_dtype_size(a->dtype);
    return em_numel(a) == em_numel(b) && memcmp(em_data_ptr(a), em_data_ptr(b), n) == 0;
}

static em_optim *amsgrad_f32(em_tensor *p)
{
    return with_group(em_adam(NULL, (em_adam_opts){.lr = 0.1, .weight_decay = 0.01,
                                                   .amsgrad = true}), p);
}

Test(state, resume_is_bit_exact)
{
    make_fn makes[3] = {amsgrad_f32, rmsprop_centered, sgd_momentum};
    for (int k = 0; k < 3; k++) {
        /* uninterrupted: four steps */
        em_tensor *pa = tensor_of(P0, 3, EM_F32);
        em_optim *a = makes[k](pa);
        for (int s = 0; s < 4; s++) {
            set_grad(pa, C, B);
            em_optim_step(a);
        }
        /* two steps, save, two more steps and an lr change, restore, two steps */
        em_tensor *pb = tensor_of(P0, 3, EM_F32);
        em_optim *b = makes[k](pb);
        for (int s = 0; s < 2; s++) {
            set_grad(pb, C, B);
            em_optim_step(b);
        }
        snapshot saved;
        take(b, &saved);
        em_tensor *pb_saved = em_clone(pb);
        for (int s = 0; s < 2; s++) {
            set_grad(pb, C, B);
            em_optim_step(b);
        }
        em_optim_set_lr(b, 0, 1.0);
        cr_assert(em_copy_(pb, pb_saved) == EM_OK);
        cr_assert(em_optim_load_state(b, saved.refs, saved.n) == EM_OK, "%s", em_error());
        for (int s = 0; s < 2; s++) {
            set_grad(pb, C, B);
            em_optim_step(b);
        }
        cr_assert(same_bytes(pa, pb), "optimizer %d: resumed run differs", k);
        snapshot sa, sb;
        take(a, &sa);
        take(b, &sb);
        cr_assert_eq(sa.n, sb.n);
        for (int i = 0; i < sa.n; i++)
            cr_assert(same_bytes(sa.refs[i].value, sb.refs[i].value), "%s differs",
                      sa.refs[i].name);
        drop(&sa);
        drop(&sb);
        drop(&saved);
        em_release(pb_saved);
        em_optim_free(a);
        em_optim_free(b);
        em_release(pa);
        em_release(pb);
    }
}

Test(state, names_of_each_optimizer)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64);
    em_optim *o = rmsprop_centered(p);
    em_param_ref refs[8];
    int n = em_optim_state(o, refs, 8);
    const char *want[] = {"step", "group.0.lr", "param.0.step", "param.0.square_avg",
                          "param.0.momentum_buffer", "param.0.grad_avg"};
    cr_assert_eq(n, 6);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(refs[i].name, want[i]);
    cr_assert_eq(em_item(refs[1].value), 0.01);
    cr_assert_eq(refs[0].value->dtype, EM_I64);
    /* counting takes no array; an array of 8 given as NULL is an error, not a write to NULL */
    cr_assert_eq(em_optim_state(o, NULL, 0), 6);
    cr_assert_eq(em_optim_state(o, NULL, 8), -1);
    cr_assert_str_eq(em_error(), "em_optim_state: out is NULL with max 8");
    em_error_clear();
    em_optim_free(o);
    em_release(p);
}

static void assert_unchanged(const snapshot *before, const em_optim *o)
{
    snapshot now;
    take(o, &now);
    cr_assert_eq(now.n, before->n);
    for (int i = 0; i < now.n; i++)
        cr_assert(same_bytes(now.refs[i].value, before->refs[i].value), "%s changed",
                  now.refs[i].name);
    drop(&now);
}

Test(state, bad_load_changes_nothing)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64);
    em_optim *o = adam_plain(p);
    set_grad(p, C, B);
    em_optim_step(o);
    snapshot before, given;
    take(o, &before);
    take(o, &given);
    /* perturb every value, so a partial load would show */
    for (int i = 0; i < given.n; i++)
        em_fill_(given.refs[i].value, 7);
    /* a wrong shape, last in the list */
    em_tensor *wrong = em_zeros(EM_SHAPE(4), EM_F64);
    em_tensor *right = given.refs[given.n - 1].value;
    given.refs[given.n - 1].value = wrong;
    cr_assert_eq(em_optim_load_state(o, given.refs, given.n), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "em_optim_load_state: 'param.0.exp_avg_sq' is [4]"), "%s",
              em_error());
    em_error_clear();
    assert_unchanged(&before, o);
    given.refs[given.n - 1].value = right;
    /* a missing entry */
    cr_assert_eq(em_optim_load_state(o, given.refs, given.n - 1), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "'param.0.exp_avg_sq' is missing"), "%s", em_error());
    em_error_clear();
    /* an unknown name */
    em_param_ref extra[32];
    memcpy(extra, given.refs, given.n * sizeof *extra);
    extra[given.n] = (em_param_ref){.name = "param.1.exp_avg", .value = wrong};
    cr_assert_eq(em_optim_load_state(o, extra, given.n + 1), EM_ERR_ARG);
    cr_assert(strstr(em_error(), "unknown state 'param.1.exp_avg'"), "%s", em_error());
    em_error_clear();
    assert_unchanged(&before, o);
    /* a step count no int64 can go on from, a fraction, a negative; a NaN learning rate */
    const struct { const char *name; double value; const char *says; } bad[] = {
        {"param.0.step", 9223372036854775807.0, "'param.0.step' is 9.22337e+18"},
        {"step", 2.5, "'step' is 2.5; a step count is a whole number"},
        {"param.0.step", -1, "'param.0.step' is -1"},
        {"group.0.lr", NAN, "'group.0.lr' is nan; a learning rate must be finite"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        em_param_ref refs[32];
        memcpy(refs, given.refs, given.n * sizeof *refs);
        em_tensor *v = em_scalar(bad[b].value, EM_F64);
        for (int i = 0; i < given.n; i++)
            if (strcmp(refs[i].name, bad[b].name) == 0)
                refs[i].value = v;
        cr_assert_eq(em_optim_load_state(o, refs, given.n), EM_ERR_ARG, "%s", bad[b].name);
        cr_assert(strstr(em_error(), bad[b].says), "%s", em_error());
        em_error_clear();
        assert_unchanged(&before, o);
        em_release(v);
    }
    /* the whole set loads */
    cr_assert(em_optim_load_state(o, given.refs, given.n) == EM_OK, "%s", em_error());
    cr_assert_eq(em_optim_get_lr(o, 0), 7);
    em_release(wrong);
    drop(&before);
    drop(&given);
    em_optim_free(o);
    em_release(p);
}

Test(state, made_inside_a_scope_outlives_it)
{
    em_tensor *p = tensor_of(P0, 3, EM_F64);
    em_scope_begin();
    em_optim *o = sgd_momentum(p);
    em_scope_end();
    set_grad(p, C, B);
    cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
    assert_close(p, (double[]){0.89, -1.57, 2.83}, 1e-12, 1);
    em_optim_free(o);
    em_release(p);
}

Test(module, all_parameters_in_group_zero)
{
    em_module *m = em_linear_layer(3, 2, true);
    cr_assert(m, "%s", em_error());
    em_optim *o = em_sgd(m, (em_sgd_opts){.lr = 0.1, .momentum = 0.9});
    cr_assert(o, "%s", em_error());
    cr_assert_eq(em_optim_num_groups(o), 1);
    /* step + group lr + (step, momentum_buffer) for weight and bias */
    cr_assert_eq(em_optim_state(o, NULL, 0), 6);
    em_optim_free(o);
    em_module_free(m);
}

Test(module, no_decay_for_1d_parameters)
{
    em_module *m = em_linear_layer(3, 2, true);
    em_tensor *w = em_module_find(m, "weight"), *b = em_module_find(m, "bias");
    cr_assert(w && b, "%s", em_error());
    em_optim *o = em_sgd(NULL, (em_sgd_opts){.lr = 0.1, .weight_decay = 0.5});
    cr_assert(em_optim_add_module_no_decay_1d(o, m) == EM_OK, "%s", em_error());
    cr_assert_eq(em_optim_num_groups(o), 2);
    em_tensor *w0 = em_clone(w), *b0 = em_clone(b);
    /* zero grads: only weight decay moves the parameters, w *= 1 - lr * wd */
    w->grad = em_zeros_like(w);
    b->grad = em_zeros_like(b);
    cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
    float wv[6], w0v[6], bv[2], b0v[2];
    em_copy_to_host(w, EM_F32, wv);
    em_copy_to_host(w0, EM_F32, w0v);
    em_copy_to_host(b, EM_F32, bv);
    em_copy_to_host(b0, EM_F32, b0v);
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(wv[i], w0v[i] * 0.95f, 1e-7);
    cr_assert(memcmp(bv, b0v, sizeof bv) == 0);
    em_release(w0);
    em_release(b0);
    em_optim_free(o);
    em_module_free(m);
}

/* One gradient, then zeros for `steps` steps: each state buffer of o shrinks by its decay
 * factor every step and would pass below the smallest normal number (after about 800 f32 steps
 * at 0.9), where the CPU spends a hundred cycles and more on every operation. It is kept normal
 * or 0 instead: never subnormal, and the buffers that shrink by 0.9 a step (the first moment,
 * momentum) exactly 0 at the end; the parameter stays finite. */
static void check_state_never_subnormal(em_optim *o, em_tensor *p, em_dtype dt, int steps)
{
    const double g0[3] = {1e-3, -2e-3, 5e-4}, zero[3] = {0};
    for (int s = 0; s <= steps; s++) {
        em_release(p->grad);
        p->grad = tensor_of(s == 0 ? g0 : zero, 3, dt);
        cr_assert(em_optim_step(o) == EM_OK, "%s", em_error());
        em_param_ref refs[16];
        const int n = em_optim_state(o, refs, 16);
        for (int r = 0; r < n; r++) {
            if (!strstr(refs[r].name, "param.0.") || refs[r].value->dtype != dt)
                continue;
            double v[3];
            values_of(refs[r].value, v);
            for (int i = 0; i < 3; i++) {
                const double a = fabs(v[i]);
                const double least = dt == EM_F32 ? (double)FLT_MIN : DBL_MIN;
                const bool subnormal = a > 0 && a < least;
                cr_assert(!subnormal, "%s[%d] at step %d is subnormal: %g", refs[r].name, i, s,
                          v[i]);
                const char *last = strrchr(refs[r].name, '.');
                if (s == steps && (!strcmp(last, ".exp_avg") || !strcmp(last, ".momentum_buffer")))
                    cr_assert(v[i] == 0, "%s[%d] is %g after %d zero gradients", refs[r].name,
                              i, v[i], steps);
            }
        }
    }
    double v[3];
    values_of(p, v);
    for (int i = 0; i < 3; i++)
        cr_assert(isfinite(v[i]));
    em_optim_free(o);
    em_release(p);
}

Test(optim, state_is_kept_normal_or_zero)
{
    const em_dtype dts[2] = {EM_F32, EM_F64};
    for (int d = 0; d < 2; d++) {
        /* f32 goes below FLT_MIN in ~800 steps of 0.9, f64 below DBL_MIN in ~6,700 */
        const int steps = dts[d] == EM_F32 ? 2000 : 9000;
        em_tensor *p = tensor_of(P0, 3, dts[d]);
        check_state_never_subnormal(
            with_group(em_sgd(NULL, (em_sgd_opts){.lr = 0.1, .momentum = 0.9}), p), p, dts[d],
            steps);
        p = tensor_of(P0, 3, dts[d]);
        check_state_never_subnormal(with_group(em_adamw(NULL, (em_adam_opts){.lr = 0.01}), p),
                                    p, dts[d], steps);
        p = tensor_of(P0, 3, dts[d]);
        check_state_never_subnormal(
            with_group(em_adam(NULL, (em_adam_opts){.lr = 0.01, .amsgrad = true}), p), p, dts[d],
            steps);
        p = tensor_of(P0, 3, dts[d]);
        check_state_never_subnormal(
            with_group(em_rmsprop(NULL, (em_rmsprop_opts){.lr = 0.01, .alpha = 0.9,
                                                          .momentum = 0.9, .centered = true}),
                       p),
            p, dts[d], steps);
    }
}
