/* Resampling layers: Upsample (PyTorch's nn.Upsample: em_interpolate with fixed options) and Pad
 * (PyTorch's ZeroPad, ConstantPad, ReflectionPad and ReplicationPad in one: em_pad with fixed
 * pads and mode). */
#include <float.h>
#include <math.h>
#include <stddef.h>
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

/* nearest copies; linear blends 2 values per output (a subtract, a multiply and an add), bilinear
 * 3 such blends */
static double upsample_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)x;
    static const double per_output[] = {0, 3, 9};
    return per_output[((const upsample_layer *)m)->opts.mode] * (double)em_numel(y);
}

static bool upsample_check(const void *options, char *why, size_t n)
{
    if (upsample_opts_ok(options))
        return true;
    snprintf(why, n, "settings 'size_0' ... 'scale_factor_1' must give a size or a scale (not "
             "both; recompute_scale_factor with a scale only), align_corners only for the "
             "linear modes");
    return false;
}

static em_module *upsample_build(const em_module_type *type, const void *options,
                                 em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    return em_upsample_layer(*(const em_interpolate_opts *)options);
}

static const char *const interp_modes[] = {"nearest", "linear", "bilinear", NULL};

#define MAX_SCALE 1e6 /* the largest scale_factor */
#define UPSAMPLE_SIZE(key, i)                                                                \
    {.name = key, .kind = EM_SETTING_INT, .offset = offsetof(em_interpolate_opts, size[i]),   \
     .max = EM_MAX_SIZE}
#define UPSAMPLE_SCALE(key, i)                                                               \
    {.name = key, .kind = EM_SETTING_REAL,                                                   \
     .offset = offsetof(em_interpolate_opts, scale_factor[i]), .max = MAX_SCALE}
static const em_setting upsample_settings[] = {
    {.name = "mode", .kind = EM_SETTING_CHOICE, .offset = offsetof(em_interpolate_opts, mode),
     .choices = interp_modes},
    UPSAMPLE_SIZE("size_0", 0),
    UPSAMPLE_SCALE("scale_factor_0", 0),
    UPSAMPLE_SIZE("size_1", 1),
    UPSAMPLE_SCALE("scale_factor_1", 1),
    EM_BOOL_SETTING(em_interpolate_opts, align_corners, 0),
    EM_BOOL_SETTING(em_interpolate_opts, recompute_scale_factor, 0),
};

EM_MODULE_TYPE(em_upsample_type) = {
    .type_name = "Upsample",
    .forward = upsample_forward,
    .describe = upsample_describe,
    EM_SETTINGS(upsample_settings),
    .options_offset = offsetof(upsample_layer, opts),
    .options_size = sizeof(em_interpolate_opts),
    .build = upsample_build,
    .check = upsample_check,
    .flops = upsample_flops,
};

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
    em_pad_options o;
} pad_layer;

static em_tensor *pad_forward(em_module *m, const em_tensor *x)
{
    const em_pad_options *o = &((pad_layer *)m)->o;
    return em_pad(x, o->pads, (int)o->n_pads, o->mode, o->value);
}

static void pad_describe(const em_module *m, char *buf, size_t n)
{
    const em_pad_options *o = &((const pad_layer *)m)->o;
    static const char *const modes[] = {"constant", "reflect", "replicate"};
    int at = snprintf(buf, n, "mode='%s', padding=(", modes[o->mode]);
    for (int i = 0; i < o->n_pads && at > 0 && (size_t)at < n; i++)
        at += snprintf(buf + at, n - (size_t)at, "%s%lld", i ? ", " : "", (long long)o->pads[i]);
    if (at > 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, o->mode ? ")" : "), value=%g", o->value);
}

/* The checks em_pad_layer makes that the settings' ranges do not: pads in pairs, a value only
 * for constant padding; false with why. */
static bool pad_check(const void *options, char *why, size_t n)
{
    const em_pad_options *o = options;
    if (o->n_pads % 2)
        snprintf(why, n, "setting 'n_pads' is %lld; pads come in pairs", (long long)o->n_pads);
    else if (o->mode != EM_PAD_CONSTANT && o->value != 0)
        snprintf(why, n, "setting 'value' is %g; only constant padding has one", o->value);
    else
        return true;
    return false;
}

static em_module *pad_build(const em_module_type *type, const void *options,
                            em_module **children, int n)
{
    (void)type, (void)children, (void)n;
    const em_pad_options *o = options;
    return em_pad_layer(o->pads, (int)o->n_pads, o->mode, o->value);
}

static const char *const pad_modes[] = {"constant", "reflect", "replicate", NULL};

static const em_setting pad_settings[] = {
    {.name = "mode", .kind = EM_SETTING_CHOICE, .offset = offsetof(em_pad_options, mode),
     .choices = pad_modes},
    {.name = "n_pads", .kind = EM_SETTING_INT, .offset = offsetof(em_pad_options, n_pads),
     .min = 2, .max = 6},
    {.name = "pad", .kind = EM_SETTING_INTS, .offset = offsetof(em_pad_options, pads),
     .min = -EM_MAX_SIZE, .max = EM_MAX_SIZE, .count_offset = offsetof(em_pad_options, n_pads),
     },
    {.name = "value", .kind = EM_SETTING_REAL, .offset = offsetof(em_pad_options, value),
     .min = -DBL_MAX, .max = DBL_MAX},
};

EM_MODULE_TYPE(em_pad_type) = {
    .type_name = "Pad",
    .forward = pad_forward,
    .describe = pad_describe,
    EM_SETTINGS(pad_settings),
    .options_offset = offsetof(pad_layer, o),
    .options_size = sizeof(em_pad_options),
    .build = pad_build,
    .check = pad_check,
    .flops = em_no_flops,
};

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
    p->o = (em_pad_options){.n_pads = n_pads, .mode = mode, .value = value};
    memcpy(p->o.pads, pads, (size_t)n_pads * sizeof *pads);
    return &p->base;
}
