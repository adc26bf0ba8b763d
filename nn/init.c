/* Parameter initialisation in place, outside autograd, with torch.nn.init's formulas: fans of
 * 2-D and convolution weights, the leaky_relu gain, kaiming and xavier, uniform. */
#include <math.h>

#include "nn/nn.h"

/* fan_in = size(1) * receptive field, fan_out = size(0) * receptive field */
static em_status fans(const em_tensor *t, const char *fn, double *fan_in, double *fan_out)
{
    if (!t)
        return em_set_error(EM_ERR_ARG, "%s: tensor is NULL", fn);
    if (t->ndim < 2) {
        char buf[64];
        return em_set_error(EM_ERR_ARG, "%s: fan in and fan out need at least 2 dims: %s", fn,
                            em_shape_str(t, buf, sizeof buf));
    }
    double receptive = 1;
    for (int i = 2; i < t->ndim; i++)
        receptive *= (double)t->shape[i];
    *fan_in = (double)t->shape[1] * receptive;
    *fan_out = (double)t->shape[0] * receptive;
    if (*fan_in == 0 || *fan_out == 0)
        return em_set_error(EM_ERR_ARG, "%s: a fan is zero", fn);
    return EM_OK;
}

/* Fills t with a fresh random tensor of its shape: uniform when normal is false. */
static em_status fill_random(em_tensor *t, bool normal, double a, double b, em_generator *gen)
{
    em_scope_begin();
    em_tensor *r = normal ? em_normal(em_shape_of(t), t->dtype, a, b, gen)
                          : em_uniform(em_shape_of(t), t->dtype, a, b, gen);
    em_status st = r ? em_copy_(t, r) : em_error_status();
    em_scope_end();
    return st;
}

static em_status kaiming(em_tensor *t, double a, em_fan_mode mode, em_generator *gen,
                         bool normal, const char *fn)
{
    double fan_in, fan_out;
    em_status st = fans(t, fn, &fan_in, &fan_out);
    if (st != EM_OK)
        return st;
    double gain = sqrt(2.0 / (1.0 + a * a));
    double std = gain / sqrt(mode == EM_FAN_OUT ? fan_out : fan_in);
    return normal ? fill_random(t, true, 0.0, std, gen)
                  : fill_random(t, false, -sqrt(3.0) * std, sqrt(3.0) * std, gen);
}

em_status em_init_kaiming_uniform_(em_tensor *t, double a, em_fan_mode mode, em_generator *gen)
{
    return kaiming(t, a, mode, gen, false, "em_init_kaiming_uniform_");
}

em_status em_init_kaiming_normal_(em_tensor *t, double a, em_fan_mode mode, em_generator *gen)
{
    return kaiming(t, a, mode, gen, true, "em_init_kaiming_normal_");
}

static em_status xavier(em_tensor *t, double gain, em_generator *gen, bool normal,
                        const char *fn)
{
    double fan_in, fan_out;
    em_status st = fans(t, fn, &fan_in, &fan_out);
    if (st != EM_OK)
        return st;
    double std = (gain == 0 ? 1.0 : gain) * sqrt(2.0 / (fan_in + fan_out));
    return normal ? fill_random(t, true, 0.0, std, gen)
                  : fill_random(t, false, -sqrt(3.0) * std, sqrt(3.0) * std, gen);
}

em_status em_init_xavier_uniform_(em_tensor *t, double gain, em_generator *gen)
{
    return xavier(t, gain, gen, false, "em_init_xavier_uniform_");
}

em_status em_init_xavier_normal_(em_tensor *t, double gain, em_generator *gen)
{
    return xavier(t, gain, gen, true, "em_init_xavier_normal_");
}

em_status em_init_uniform_(em_tensor *t, double low, double high, em_generator *gen)
{
    if (!t)
        return em_set_error(EM_ERR_ARG, "em_init_uniform_: tensor is NULL");
    if (!(low <= high))
        return em_set_error(EM_ERR_ARG, "em_init_uniform_: low %g is above high %g", low, high);
    return fill_random(t, false, low, high, gen);
}
