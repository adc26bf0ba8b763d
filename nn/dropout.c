/* Dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p) in
 * training, with a Bernoulli mask from the generator; the identity in eval or when p is 0. */
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
    double p;
} dropout_layer;

static em_tensor *dropout_forward(em_module *m, const em_tensor *x)
{
    return em_dropout(x, ((dropout_layer *)m)->p, m->training, NULL);
}

static void dropout_describe(const em_module *m, char *buf, size_t n)
{
    snprintf(buf, n, "p=%g", ((const dropout_layer *)m)->p);
}

const em_module_type em_dropout_type = {"Dropout", dropout_forward, NULL, dropout_describe};

bool em_dropout_layer_p(const em_module *m, double *p)
{
    if (!m || m->type != &em_dropout_type)
        return false;
    *p = ((const dropout_layer *)m)->p;
    return true;
}

em_module *em_dropout_layer(double p)
{
    if (!(p >= 0 && p <= 1)) {
        em_set_error(EM_ERR_ARG, "em_dropout_layer: p %g is outside [0, 1]", p);
        return NULL;
    }
    dropout_layer *d = (dropout_layer *)em_module_alloc(sizeof *d, &em_dropout_type);
    if (!d)
        return NULL;
    d->p = p;
    return &d->base;
}
