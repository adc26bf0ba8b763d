/* Whole-model file types of nn/'s normalisation layers: BatchNorm1d/2d, LayerNorm, GroupNorm
 * and InstanceNorm1d/2d, with the settings each is made with (PyTorch's names; BatchNorm's
 * cumulative average is momentum null, PyTorch's None), the constructor that rebuilds it, and
 * the tensor elements that constructor makes. */
#include "models/model_file_internal.h"
#include "nn/nn_internal.h"

#define SIZE(s, key, v) em_model_settings_int(s, key, 1, EM_MODEL_MAX_SIZE, v)

/* ---- BatchNorm1d and BatchNorm2d ---- */
static em_status save_batch_norm(const em_module *m, em_model_settings *s)
{
    double eps, momentum;
    em_status st = em_batch_norm_layer_config(m, &eps, &momentum);
    st = st ? st : em_model_settings_set_int(s, "num_features", m->params[0].value->shape[0]);
    st = st ? st : em_model_settings_set_real(s, "eps", eps);
    if (st || momentum == EM_BN_CUMULATIVE_AVERAGE)
        return st ? st : em_model_settings_set_none(s, "momentum");
    return em_model_settings_set_real(s, "momentum", momentum);
}

static em_status read_batch_norm(const em_model_settings *s, int64_t *f, double *eps,
                                 double *momentum)
{
    bool none = false;
    em_status st = SIZE(s, "num_features", f);
    st = st ? st : em_model_settings_real(s, "eps", 0, 1, eps);
    st = st ? st : em_model_settings_real_or_none(s, "momentum", 0, 1, momentum, &none);
    if (none)
        *momentum = EM_BN_CUMULATIVE_AVERAGE;
    return st;
}

static em_module *build_batch_norm(const em_model_settings *s, bool two_d)
{
    int64_t f;
    double eps, momentum;
    if (read_batch_norm(s, &f, &eps, &momentum))
        return NULL;
    return two_d ? em_batch_norm2d_layer(f, eps, momentum)
                 : em_batch_norm1d_layer(f, eps, momentum);
}

static em_module *build_batch_norm1d(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_batch_norm(s, false);
}

static em_module *build_batch_norm2d(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_batch_norm(s, true);
}

static double batch_norm_elements(const em_model_settings *s)
{
    int64_t f;
    double eps, momentum;
    /* weight, bias, running mean and variance, and the batch count */
    return read_batch_norm(s, &f, &eps, &momentum) ? -1 : 4.0 * (double)f + 1;
}

static const em_model_type batch_norm1d = {&em_batch_norm1d_type, save_batch_norm,
                                           build_batch_norm1d, batch_norm_elements, false};
static const em_model_type batch_norm2d = {&em_batch_norm2d_type, save_batch_norm,
                                           build_batch_norm2d, batch_norm_elements, false};

/* ---- LayerNorm ---- */
static em_status save_layer_norm(const em_module *m, em_model_settings *s)
{
    double eps = 0;
    em_layer_norm_layer_eps(m, &eps);
    em_status st = em_model_settings_set_int(s, "normalized_shape", m->params[0].value->shape[0]);
    return st ? st : em_model_settings_set_real(s, "eps", eps);
}

static em_status read_layer_norm(const em_model_settings *s, int64_t *size, double *eps)
{
    em_status st = SIZE(s, "normalized_shape", size);
    return st ? st : em_model_settings_real(s, "eps", 0, 1, eps);
}

static em_module *build_layer_norm(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    int64_t size;
    double eps;
    return read_layer_norm(s, &size, &eps) ? NULL : em_layer_norm_layer(size, eps);
}

static double layer_norm_elements(const em_model_settings *s)
{
    int64_t size;
    double eps;
    return read_layer_norm(s, &size, &eps) ? -1 : 2.0 * (double)size;
}

static const em_model_type layer_norm = {&em_layer_norm_type, save_layer_norm, build_layer_norm,
                                         layer_norm_elements, false};

/* ---- GroupNorm ---- */
typedef struct {
    int64_t groups, channels;
    double eps;
    bool affine;
} group_settings;

static em_status save_group_norm(const em_module *m, em_model_settings *s)
{
    group_settings g;
    em_group_norm_layer_config(m, &g.groups, &g.channels, &g.eps, &g.affine);
    em_status st = em_model_settings_set_int(s, "num_groups", g.groups);
    st = st ? st : em_model_settings_set_int(s, "num_channels", g.channels);
    st = st ? st : em_model_settings_set_real(s, "eps", g.eps);
    return st ? st : em_model_settings_set_bool(s, "affine", g.affine);
}

static em_status read_group_norm(const em_model_settings *s, group_settings *g)
{
    em_status st = SIZE(s, "num_groups", &g->groups);
    st = st ? st : SIZE(s, "num_channels", &g->channels);
    st = st ? st : em_model_settings_real(s, "eps", 0, 1, &g->eps);
    return st ? st : em_model_settings_bool(s, "affine", &g->affine);
}

static em_module *build_group_norm(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    group_settings g;
    return read_group_norm(s, &g) ? NULL
                                  : em_group_norm_layer(g.groups, g.channels, g.eps, g.affine);
}

static double group_norm_elements(const em_model_settings *s)
{
    group_settings g;
    return read_group_norm(s, &g) ? -1 : 2.0 * (double)g.channels * g.affine;
}

static const em_model_type group_norm = {&em_group_norm_type, save_group_norm, build_group_norm,
                                         group_norm_elements, false};

/* ---- InstanceNorm1d and InstanceNorm2d ---- */
static em_status save_instance_norm(const em_module *m, em_model_settings *s)
{
    int64_t f;
    em_instance_norm_opts o;
    em_instance_norm_layer_config(m, &f, &o);
    em_status st = em_model_settings_set_int(s, "num_features", f);
    st = st ? st : em_model_settings_set_real(s, "eps", o.eps);
    st = st ? st : em_model_settings_set_real(s, "momentum", o.momentum);
    st = st ? st : em_model_settings_set_bool(s, "affine", o.affine);
    return st ? st : em_model_settings_set_bool(s, "track_running_stats", o.track_running_stats);
}

static em_status read_instance_norm(const em_model_settings *s, int64_t *f,
                                    em_instance_norm_opts *o)
{
    em_status st = SIZE(s, "num_features", f);
    st = st ? st : em_model_settings_real(s, "eps", 0, 1, &o->eps);
    st = st ? st : em_model_settings_real(s, "momentum", 0, 1, &o->momentum);
    st = st ? st : em_model_settings_bool(s, "affine", &o->affine);
    return st ? st : em_model_settings_bool(s, "track_running_stats", &o->track_running_stats);
}

static em_module *build_instance_norm(const em_model_settings *s, bool two_d)
{
    int64_t f;
    em_instance_norm_opts o;
    if (read_instance_norm(s, &f, &o))
        return NULL;
    return two_d ? em_instance_norm2d_layer(f, o) : em_instance_norm1d_layer(f, o);
}

static em_module *build_instance_norm1d(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_instance_norm(s, false);
}

static em_module *build_instance_norm2d(const em_model_settings *s, em_module **kids, int n)
{
    (void)kids, (void)n;
    return build_instance_norm(s, true);
}

static double instance_norm_elements(const em_model_settings *s)
{
    int64_t f;
    em_instance_norm_opts o;
    if (read_instance_norm(s, &f, &o))
        return -1;
    /* weight and bias when affine; running mean and variance and the batch count when tracking */
    return 2.0 * (double)f * o.affine + (2.0 * (double)f + 1) * o.track_running_stats;
}

static const em_model_type instance_norm1d = {&em_instance_norm1d_type, save_instance_norm,
                                              build_instance_norm1d, instance_norm_elements,
                                              false};
static const em_model_type instance_norm2d = {&em_instance_norm2d_type, save_instance_norm,
                                              build_instance_norm2d, instance_norm_elements,
                                              false};

const em_model_type *const em_model_norm_types[] = {
    &batch_norm1d, &batch_norm2d, &layer_norm, &group_norm, &instance_norm1d, &instance_norm2d};
const int em_model_norm_type_count =
    (int)(sizeof em_model_norm_types / sizeof *em_model_norm_types);
