/* Dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p) in
 * training, with a Bernoulli mask from the generator; the identity in eval or when p is 0. */
#include <stddef.h>
#include <stdio.h>

#include "nn/nn_internal.h"

em_tensor *em_dropout(const em_tensor *x, double p, bool training, em_generator *gen)
{
    if (!em_present(x, "em_dropout", "x"))
        return NULL;
    if (!(p >= 0 && p <= 1) || !em_dtype_is_float(x->dtype)) {
        char buf[64];
        em_set_error(EM_ERR_ARG, "em_dropout: need p in [0, 1] and floating point x: p %g, "
                     "x %s %s", p, em_dtype_name(x->dtype), em_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    if (!training || p == 0)
        return em_reshape(x, em_shape_of(x));
    if (p == 1)
        return em_mul_scalar(x, 0.0);
    em_scope_begin();
    em_tensor *mask = em_empty_on(em_shape_of(x), x->dtype, x->device); /* drawn on x's device */
    if (mask && em_bernoulli_(mask, 1.0 - p, gen) != EM_OK)
        mask = NULL;
    em_tensor *y = em_keep(em_mul(x, em_mul_scalar(mask, 1.0 / (1.0 - p))));
    em_scope_end();
    return y;
}

typedef struct {
    em_module base;
    em_dropout_options o;
} dropout_layer;

static em_tensor *dropout_forward(em_module *m, const em_tensor *x)
{
    return em_dropout(x, ((dropout_layer *)m)->o.p, m->training, NULL);
}

/* the mask's multiply in training; nothing in eval */
static double dropout_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    return m->training && ((const dropout_layer *)m)->o.p > 0 ? (double)em_numel(y) : 0;
}

static em_module *dropout_build(const em_module_type *type, const void *options,
                                em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    return em_dropout_layer(((const em_dropout_options *)options)->p);
}

static const em_setting dropout_settings[] = {EM_REAL_SETTING(em_dropout_options, p, 0, 1, 0.5)};

EM_MODULE_TYPE(em_dropout_type) = {
    .type_name = "Dropout",
    .forward = dropout_forward,
    EM_SETTINGS(dropout_settings),
    .options_offset = offsetof(dropout_layer, o),
    .options_size = sizeof(em_dropout_options),
    .traits = EM_TRAIT_ELEMENTWISE,
    .build = dropout_build,
    .flops = dropout_flops,
};

em_module *em_dropout_layer(double p)
{
    if (!(p >= 0 && p <= 1)) {
        em_set_error(EM_ERR_ARG, "em_dropout_layer: p %g is outside [0, 1]", p);
        return NULL;
    }
    dropout_layer *d = (dropout_layer *)em_module_alloc(sizeof *d, &em_dropout_type);
    if (!d)
        return NULL;
    d->o.p = p;
    return &d->base;
}
