/* Resampling layers: Upsample (PyTorch's nn.Upsample: em_interpolate with fixed options) and Pad
 * (PyTorch's ZeroPad, ConstantPad, ReflectionPad and ReplicationPad in one: em_pad with fixed
 * pads and mode). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"

typedef struct {
    em_module base;
    em_interpolate_opts opts;
} upsample_layer;

static em_tensor *upsample_forward(em_module *m, const em_tensor *x)
{
    return em_interpolate(x, ((upsample_layer *)m)->opts);
}

static void upsample_describe(const em_module *m, char *buf, size_t n)
{
    const em_interpolate_opts *o = &((const upsample_layer *)m)->opts;
    static const char *const modes[] = {"nearest", "linear", "bilinear"};
    if (o->size[0])
        snprintf(buf, n, "size=(%lld, %lld), mode='%s'", (long long)o->size[0],
                 (long long)(o->size[1] ? o->size[1] : o->size[0]), modes[o->mode]);
    else
        snprintf(buf, n, "scale_factor=(%g, %g), mode='%s'", o->scale_factor[0],
                 o->scale_factor[1] ? o->scale_factor[1] : o->scale_factor[0], modes[o->mode]);
    if (o->mode != EM_INTERP_NEAREST && strlen(buf) + 1 < n)
        snprintf(buf + strlen(buf), n - strlen(buf), ", align_corners=%s",
                 o->align_corners ? "True" : "False");
}

const em_module_type em_upsample_type = {"Upsample", upsample_forward, NULL, upsample_describe};

bool em_upsample_layer_config(const em_module *m, em_interpolate_opts *o)
{
    if (!m || m->type != &em_upsample_type)
        return false;
    *o = ((const upsample_layer *)m)->opts;
    return true;
}

/* The checks em_interpolate makes that need no input: a known mode, one of size or
 * scale_factor, positive, align_corners for the linear modes only. */
static bool upsample_opts_ok(const em_interpolate_opts *o)
{
    bool by_size = o->size[0] > 0 && o->size[1] >= 0;
    bool by_scale = o->scale_factor[0] > 0 && o->scale_factor[1] >= 0 &&
                    isfinite(o->scale_factor[0]) && isfinite(o->scale_factor[1]);
    bool none_of_size = o->size[0] == 0 && o->size[1] == 0;
    bool none_of_scale = o->scale_factor[0] == 0 && o->scale_factor[1] == 0;
    return (unsigned)o->mode <= EM_INTERP_BILINEAR && ((by_size && none_of_scale &&
            !o->recompute_scale_factor) || (by_scale && none_of_size)) &&
           !(o->align_corners && o->mode == EM_INTERP_NEAREST);
}

em_module *em_upsample_layer(em_interpolate_opts o)
{
    if (!upsample_opts_ok(&o)) {
        em_set_error(EM_ERR_ARG, "em_upsample_layer: needs a known mode and a positive size or "
                     "scale_factor (not both; recompute_scale_factor with a scale only), "
                     "align_corners only for linear modes: mode %d, size (%lld, %lld), "
                     "scale_factor (%g, %g)", (int)o.mode, (long long)o.size[0],
                     (long long)o.size[1], o.scale_factor[0], o.scale_factor[1]);
        return NULL;
    }
    upsample_layer *u = (upsample_layer *)em_module_alloc(sizeof *u, &em_upsample_type);
    if (!u)
        return NULL;
    u->opts = o;
    return &u->base;
}

typedef struct {
    em_module base;
    em_pad_config config;
} pad_layer;

static em_tensor *pad_forward(em_module *m, const em_tensor *x)
{
    const em_pad_config *c = &((pad_layer *)m)->config;
    return em_pad(x, c->pads, c->n_pads, c->mode, c->value);
}

static void pad_describe(const em_module *m, char *buf, size_t n)
{
    const em_pad_config *c = &((const pad_layer *)m)->config;
    static const char *const modes[] = {"constant", "reflect", "replicate"};
    int at = snprintf(buf, n, "mode='%s', padding=(", modes[c->mode]);
    for (int i = 0; i < c->n_pads && at > 0 && (size_t)at < n; i++)
        at += snprintf(buf + at, n - (size_t)at, "%s%lld", i ? ", " : "", (long long)c->pads[i]);
    if (at > 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, c->mode ? ")" : "), value=%g", c->value);
}

const em_module_type em_pad_type = {"Pad", pad_forward, NULL, pad_describe};

bool em_pad_layer_config(const em_module *m, em_pad_config *c)
{
    if (!m || m->type != &em_pad_type)
        return false;
    *c = ((const pad_layer *)m)->config;
    return true;
}

em_module *em_pad_layer(const int64_t *pads, int n_pads, em_pad_mode mode, double value)
{
    if (!pads || n_pads < 2 || n_pads > 6 || n_pads % 2 || (unsigned)mode > EM_PAD_REPLICATE ||
        (mode != EM_PAD_CONSTANT && value != 0) || !isfinite(value)) {
        em_set_error(EM_ERR_ARG, "em_pad_layer: needs 2, 4 or 6 pads (got %d), a known mode "
                     "(got %d) and a finite value, 0 unless the mode is constant (got %g)",
                     n_pads, (int)mode, value);
        return NULL;
    }
    pad_layer *p = (pad_layer *)em_module_alloc(sizeof *p, &em_pad_type);
    if (!p)
        return NULL;
    p->config = (em_pad_config){.n_pads = n_pads, .mode = mode, .value = value};
    memcpy(p->config.pads, pads, (size_t)n_pads * sizeof *pads);
    return &p->base;
}
