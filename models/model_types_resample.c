/* Whole-model file types of the resampling layers (Upsample, Pad): the settings each is made
 * with and the constructor that rebuilds it; neither holds a tensor. */
#include <float.h>

#include "models/model_file_internal.h"
#include "nn/nn_internal.h"

#define MAX_SCALE 1e6 /* the largest scale_factor a file may hold */

static const char *const size_keys[2] = {"size_0", "size_1"};
static const char *const scale_keys[2] = {"scale_factor_0", "scale_factor_1"};
static const char *const pad_keys[6] = {"pad_0", "pad_1", "pad_2", "pad_3", "pad_4", "pad_5"};

static em_status save_upsample(const em_module *m, em_model_settings *s)
{
    em_interpolate_opts o;
    em_upsample_layer_config(m, &o);
    em_status st = em_model_settings_set_int(s, "mode", o.mode);
    for (int i = 0; i < 2; i++) {
        st = st ? st : em_model_settings_set_int(s, size_keys[i], o.size[i]);
        st = st ? st : em_model_settings_set_real(s, scale_keys[i], o.scale_factor[i]);
    }
    st = st ? st : em_model_settings_set_bool(s, "align_corners", o.align_corners);
    return st ? st : em_model_settings_set_bool(s, "recompute_scale_factor",
                                                o.recompute_scale_factor);
}

static em_module *build_upsample(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    em_interpolate_opts o = {0};
    int64_t mode;
    em_status st = em_model_settings_int(s, "mode", EM_INTERP_NEAREST, EM_INTERP_BILINEAR, &mode);
    for (int i = 0; i < 2; i++) {
        st = st ? st : em_model_settings_int(s, size_keys[i], 0, EM_MODEL_MAX_SIZE, &o.size[i]);
        st = st ? st : em_model_settings_real(s, scale_keys[i], 0, MAX_SCALE, &o.scale_factor[i]);
    }
    st = st ? st : em_model_settings_bool(s, "align_corners", &o.align_corners);
    st = st ? st : em_model_settings_bool(s, "recompute_scale_factor", &o.recompute_scale_factor);
    o.mode = (em_interp_mode)mode;
    return st ? NULL : em_upsample_layer(o);
}

static em_status save_pad(const em_module *m, em_model_settings *s)
{
    em_pad_config c;
    em_pad_layer_config(m, &c);
    em_status st = em_model_settings_set_int(s, "mode", c.mode);
    st = st ? st : em_model_settings_set_int(s, "n_pads", c.n_pads);
    for (int i = 0; i < c.n_pads; i++)
        st = st ? st : em_model_settings_set_int(s, pad_keys[i], c.pads[i]);
    return st ? st : em_model_settings_set_real(s, "value", c.value);
}

static em_module *build_pad(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t mode, n_pads, pads[6];
    double value;
    em_status st = em_model_settings_int(s, "mode", EM_PAD_CONSTANT, EM_PAD_REPLICATE, &mode);
    st = st ? st : em_model_settings_int(s, "n_pads", 2, 6, &n_pads);
    for (int i = 0; i < n_pads && !st; i++)
        st = em_model_settings_int(s, pad_keys[i], -EM_MODEL_MAX_SIZE, EM_MODEL_MAX_SIZE,
                                   &pads[i]);
    st = st ? st : em_model_settings_real(s, "value", -DBL_MAX, DBL_MAX, &value);
    return st ? NULL : em_pad_layer(pads, (int)n_pads, (em_pad_mode)mode, value);
}

static const em_model_type upsample = {&em_upsample_type, save_upsample, build_upsample, NULL,
                                       false};
static const em_model_type pad = {&em_pad_type, save_pad, build_pad, NULL, false};

const em_model_type *const em_model_resample_types[] = {&upsample, &pad};
const int em_model_resample_type_count =
    (int)(sizeof em_model_resample_types / sizeof *em_model_resample_types);
