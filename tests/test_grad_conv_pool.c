/* Gradient checks for conv2d (stride, padding, dilation, groups, bias) and max/avg pooling, on
 * contiguous and permuted inputs. */
#include <criterion/criterion.h>

#include "helpers/gradcheck.h"

/* every tensor a test makes belongs to a scope around it, so nothing outlives the test */
TestSuite(grad_conv_pool, .init = em_scope_begin, .fini = em_scope_end);

typedef struct {
    em_conv2d_opts o;
    bool bias, permuted;
} conv_case;

static em_tensor *apply_conv(em_tensor *const *x, void *ctx)
{
    const conv_case *c = ctx;
    const em_tensor *in = c->permuted ? em_permute(x[0], (int[]){0, 3, 1, 2}) : x[0];
    return em_conv2d(in, x[1], c->bias ? x[2] : NULL, c->o);
}

Test(grad_conv_pool, conv2d)
{
    const conv_case cases[] = {
        {{.groups = 1}, true, false},
        {{.stride = {2, 1}, .padding = {1, 2}}, true, false},
        {{.dilation = {2, 1}, .padding = {1, 0}}, false, false},
        {{.groups = 2, .stride = {1, 2}}, true, false},
        {{.padding = {1, 1}}, true, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const conv_case *c = &cases[k];
        int64_t g = c->o.groups ? c->o.groups : 1;
        em_shape xs = c->permuted ? EM_SHAPE(2, 5, 4, 2) : EM_SHAPE(2, 2, 5, 4);
        em_tensor *x[3] = {em_gradcheck_leaf(xs, -1, 1, 10 + k),
                           em_gradcheck_leaf(EM_SHAPE(4, 2 / g, 3, 2), -1, 1, 20 + k),
                           em_gradcheck_leaf(EM_SHAPE(4), -1, 1, 30 + k)};
        cr_expect(em_gradcheck_default(apply_conv, (void *)c, x, 3), "case %zu", k);
        for (int i = 0; i < 3; i++)
            em_release(x[i]);
    }
}

typedef struct {
    em_pool2d_opts o;
    bool max, permuted;
} pool_case;

static em_tensor *apply_pool(em_tensor *const *x, void *ctx)
{
    const pool_case *c = ctx;
    const em_tensor *in = c->permuted ? em_transpose(x[0], 2, 3) : x[0];
    return c->max ? em_max_pool2d(in, c->o) : em_avg_pool2d(in, c->o);
}

Test(grad_conv_pool, max_and_avg_pool)
{
    const pool_case cases[] = {
        {{.kernel = {2, 2}}, true, false},
        {{.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}}, true, false},
        {{.kernel = {2, 3}, .stride = {2, 1}}, true, true},
        {{.kernel = {2, 2}}, false, false},
        {{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, false, false},
        {{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_pad = true}, false,
         true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        em_tensor *x = em_gradcheck_leaf(EM_SHAPE(2, 3, 5, 6), -1, 1, 40 + k);
        cr_expect(em_gradcheck_default(apply_pool, (void *)&cases[k], &x, 1), "case %zu", k);
        em_release(x);
    }
}
