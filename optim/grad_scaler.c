/* The grad scaler: scale the loss, unscale and check the grads with the backend's fused kernel,
 * skip the update on inf/NaN and adapt the scale (PyTorch's _amp_update_scale_, in f32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/grad_scaler.h"
#include "optim/guards_internal.h"
#include "optim/optim_internal.h"
#include "tensor/tensor_internal.h"

typedef enum { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage;

/* What this step has done for one optimizer. */
typedef struct {
    em_optim *optim;
    stage stage;
    bool found_inf;
} optim_record;

struct em_grad_scaler {
    em_grad_scaler_opts opts;
    em_tensor *scale;          /* f32 0-d on the CPU */
    em_tensor *growth_tracker; /* i64 0-d on the CPU */
    int n_records, cap_records;
    optim_record *records;
    int64_t skipped;
};

em_grad_scaler *em_grad_scaler_new(em_grad_scaler_opts o)
{
    static const char *fn = "em_grad_scaler_new";
    o.init_scale = o.init_scale ? o.init_scale : 65536.0;
    o.growth_factor = o.growth_factor ? o.growth_factor : 2.0;
    o.backoff_factor = o.backoff_factor ? o.backoff_factor : 0.5;
    o.growth_interval = o.growth_interval ? o.growth_interval : 2000;
    if (!(o.init_scale > 0) || !isfinite((float)o.init_scale) || !(o.growth_factor > 1) ||
        !(o.backoff_factor > 0 && o.backoff_factor < 1) || o.growth_interval < 1) {
        em_set_error(EM_ERR_ARG, "%s: need init_scale > 0 (%g), growth_factor > 1 (%g), "
                     "0 < backoff_factor < 1 (%g) and growth_interval >= 1 (%lld)", fn,
                     o.init_scale, o.growth_factor, o.backoff_factor,
                     (long long)o.growth_interval);
        return NULL;
    }
    em_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    s->opts = o;
    s->scale = em_optim_own(em_scalar((float)o.init_scale, EM_F32));
    s->growth_tracker = em_optim_own(em_scalar(0, EM_I64));
    if (!s->scale || !s->growth_tracker) {
        em_grad_scaler_free(s);
        return NULL;
    }
    return s;
}

void em_grad_scaler_free(em_grad_scaler *s)
{
    if (!s)
        return;
    em_release(s->scale);
    em_release(s->growth_tracker);
    free(s->records);
    free(s);
}

static float *scale_ptr(const em_grad_scaler *s)
{
    return em_data_ptr(s->scale);
}

static int64_t *tracker_ptr(const em_grad_scaler *s)
{
    return em_data_ptr(s->growth_tracker);
}

/* o's record for this step, made on first use; NULL + error when out of memory. */
static optim_record *record_of(em_grad_scaler *s, em_optim *o, const char *fn)
{
    for (int i = 0; i < s->n_records; i++)
        if (s->records[i].optim == o)
            return &s->records[i];
    if (s->n_records == s->cap_records) {
        int cap = s->cap_records ? 2 * s->cap_records : 2;
        optim_record *r = realloc(s->records, (size_t)cap * sizeof *r);
        if (!r) {
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
            return NULL;
        }
        s->records = r;
        s->cap_records = cap;
    }
    s->records[s->n_records] = (optim_record){.optim = o};
    return &s->records[s->n_records++];
}

em_tensor *em_grad_scaler_scale(em_grad_scaler *s, const em_tensor *loss)
{
    if (!s) {
        em_set_error(EM_ERR_ARG, "em_grad_scaler_scale: NULL scaler");
        return NULL;
    }
    return em_mul_scalar(loss, s->opts.disabled ? 1.0 : (double)*scale_ptr(s));
}

/* Every grad of params (n) on device dev in dtype dt *= inv_scale in place, in one launch of the
 * backend's kernel; *flag (a 0-d f32 on dev) becomes 1 when an element was inf or NaN. */
static em_status unscale_launch(em_tensor *const *params, int n, em_device dev, em_dtype dt,
                                double inv_scale, em_tensor *flag)
{
    static const char *fn = "em_grad_scaler_unscale";
    const em_backend *be = em_tensor_backend(flag, fn);
    if (!be->unscale_check)
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported on %s", fn,
                            em_device_name(dev));
    em_grad_list l;
    em_status st = em_grad_list_make(fn, params, n, dev, dt, &l);
    if (st == EM_OK && l.n > 0) {
        em_array_list arrays = em_grad_list_arrays(&l);
        st = em_kernel_status(be->unscale_check(dt, inv_scale, &arrays, em_data_ptr(flag)), fn,
                              flag);
    }
    if (st == EM_OK)
        st = em_grad_list_write_back(&l, params);
    em_grad_list_free(&l);
    return st;
}

/* Unscales every grad of o, one launch per device and dtype; *found says whether one held an
 * inf or NaN (one read of each device's flag). */
static em_status unscale_all(em_grad_scaler *s, em_optim *o, bool *found)
{
    /* PyTorch's inverse: the f32 reciprocal of the scale taken in double */
    double inv_scale = (float)(1.0 / (double)*scale_ptr(s));
    em_tensor *flags[EM_NDEVICES] = {0};
    bool launched[EM_NDEVICES][EM_NDTYPES] = {{false}};
    em_tensor **params = malloc((size_t)(o->n_params > 0 ? o->n_params : 1) * sizeof *params);
    em_status st = params ? EM_OK : em_set_error(EM_ERR_MEMORY, "em_grad_scaler_unscale: out of memory");
    for (int i = 0; params && i < o->n_params; i++)
        params[i] = o->params[i].param;
    for (int i = 0; i < o->n_params && st == EM_OK; i++) {
        em_tensor *g = o->params[i].param->grad;
        if (!g || launched[g->device][g->dtype])
            continue;
        if (!flags[g->device]) {
            flags[g->device] = em_empty_on(EM_SCALAR_SHAPE, EM_F32, g->device);
            st = flags[g->device] ? em_zero_(flags[g->device]) : em_error_status();
        }
        if (st == EM_OK)
            st = unscale_launch(params, o->n_params, g->device, g->dtype, inv_scale,
                                flags[g->device]);
        launched[g->device][g->dtype] = true;
    }
    *found = false;
    for (int d = 0; d < EM_NDEVICES; d++) {
        if (flags[d] && st == EM_OK)
            *found |= em_item(flags[d]) != 0;
        em_release(flags[d]);
    }
    free(params);
    return st;
}

/* What unscale and mark_inf start with: o's record of this step, or NULL with *st an error, or
 * EM_OK when the scaler is disabled (nothing to do). */
static optim_record *record_to_check(em_grad_scaler *s, em_optim *o, const char *fn,
                                     em_status *st)
{
    *st = EM_OK;
    if (!s || !o)
        *st = em_set_error(EM_ERR_ARG, "%s: NULL scaler or optimizer", fn);
    if (!s || !o || s->opts.disabled)
        return NULL;
    optim_record *r = record_of(s, o, fn);
    if (!r)
        *st = em_error_status();
    return r;
}

em_status em_grad_scaler_unscale(em_grad_scaler *s, em_optim *o)
{
    static const char *fn = "em_grad_scaler_unscale";
    em_status st;
    optim_record *r = record_to_check(s, o, fn, &st);
    if (!r)
        return st;
    if (r->stage == STAGE_UNSCALED)
        return em_set_error(EM_ERR_STATE, "%s: already called for this optimizer since the last "
                            "em_grad_scaler_update", fn);
    if (r->stage == STAGE_STEPPED)
        return em_set_error(EM_ERR_STATE, "%s: called after em_grad_scaler_step", fn);
    bool found;
    st = unscale_all(s, o, &found);
    if (st != EM_OK)
        return st;
    r->found_inf = found;
    r->stage = STAGE_UNSCALED;
    return EM_OK;
}

em_status em_grad_scaler_step(em_grad_scaler *s, em_optim *o, bool *stepped)
{
    static const char *fn = "em_grad_scaler_step";
    if (stepped)
        *stepped = false;
    if (!s || !o)
        return em_set_error(EM_ERR_ARG, "%s: NULL scaler or optimizer", fn);
    if (s->opts.disabled) {
        em_status st = em_optim_step(o);
        if (stepped)
            *stepped = st == EM_OK;
        return st;
    }
    optim_record *r = record_of(s, o, fn);
    if (!r)
        return em_error_status();
    if (r->stage == STAGE_STEPPED)
        return em_set_error(EM_ERR_STATE, "%s: already called since the last em_grad_scaler_update",
                            fn);
    if (r->stage == STAGE_READY) {
        em_status st = em_grad_scaler_unscale(s, o);
        if (st != EM_OK)
            return st;
        r = record_of(s, o, fn);
    }
    r->stage = STAGE_STEPPED;
    if (r->found_inf) {
        s->skipped++;
        return EM_OK;
    }
    em_status st = em_optim_step(o);
    if (stepped)
        *stepped = st == EM_OK;
    return st;
}

em_status em_grad_scaler_mark_inf(em_grad_scaler *s, em_optim *o)
{
    static const char *fn = "em_grad_scaler_mark_inf";
    em_status st;
    optim_record *r = record_to_check(s, o, fn, &st);
    if (!r)
        return st;
    if (r->stage != STAGE_UNSCALED)
        return em_set_error(EM_ERR_STATE, "%s: em_grad_scaler_unscale has not run for this optimizer "
                            "since the last em_grad_scaler_update (or the step was taken)", fn);
    r->found_inf = true;
    return EM_OK;
}

em_status em_grad_scaler_update(em_grad_scaler *s)
{
    static const char *fn = "em_grad_scaler_update";
    if (!s)
        return em_set_error(EM_ERR_ARG, "%s: NULL scaler", fn);
    if (s->opts.disabled)
        return EM_OK;
    bool checked = false, found = false;
    for (int i = 0; i < s->n_records; i++) {
        checked |= s->records[i].stage != STAGE_READY;
        found |= s->records[i].found_inf;
    }
    if (!checked)
        return em_set_error(EM_ERR_STATE, "%s: no inf checks were recorded since the last update "
                            "(call em_grad_scaler_unscale or em_grad_scaler_step first)", fn);
    float *scale = scale_ptr(s);
    int64_t *tracker = tracker_ptr(s);
    if (found) {
        *scale = *scale * (float)s->opts.backoff_factor;
        *tracker = 0;
    } else if (*tracker + 1 >= s->opts.growth_interval) {
        float grown = *scale * (float)s->opts.growth_factor;
        if (isfinite(grown))
            *scale = grown;
        *tracker = 0;
    } else {
        (*tracker)++;
    }
    s->n_records = 0;
    return EM_OK;
}

double em_grad_scaler_get_scale(const em_grad_scaler *s)
{
    return !s || s->opts.disabled ? 1.0 : (double)*scale_ptr(s);
}

int64_t em_grad_scaler_growth_tracker(const em_grad_scaler *s)
{
    return s ? *tracker_ptr(s) : 0;
}

bool em_grad_scaler_found_inf(const em_grad_scaler *s)
{
    for (int i = 0; s && i < s->n_records; i++)
        if (s->records[i].found_inf)
            return true;
    return false;
}

int64_t em_grad_scaler_skipped_steps(const em_grad_scaler *s)
{
    return s ? s->skipped : 0;
}

int em_grad_scaler_state(const em_grad_scaler *s, em_param_ref *out, int max)
{
    if (!s)
        return 0;
    if (!em_array_present(out, max, "em_grad_scaler_state", "out", "max"))
        return -1;
    if (max > 0)
        out[0] = (em_param_ref){.name = "scale", .value = s->scale};
    if (max > 1)
        out[1] = (em_param_ref){.name = "growth_tracker", .value = s->growth_tracker};
    return 2;
}

em_status em_grad_scaler_load_state(em_grad_scaler *s, const em_param_ref *in, int n)
{
    static const char *fn = "em_grad_scaler_load_state";
    if (!s || n < 0 || (n > 0 && !in))
        return em_set_error(EM_ERR_ARG, "%s: NULL scaler or state, or n < 0 (%d)", fn, n);
    em_tensor *mine[2] = {s->scale, s->growth_tracker};
    const char *names[2] = {"scale", "growth_tracker"};
    const em_tensor *src[2] = {NULL, NULL};
    for (int i = 0; i < n; i++) {
        int j = !in[i].name ? -1 : !strcmp(in[i].name, names[0]) ? 0
                               : !strcmp(in[i].name, names[1]) ? 1 : -1;
        if (j < 0 || !in[i].value)
            return em_set_error(EM_ERR_ARG, "%s: unknown or empty entry '%s'", fn,
                                in[i].name ? in[i].name : "(null)");
        if (in[i].value->ndim != 0 || em_numel(in[i].value) != 1) {
            char b[64];
            return em_set_error(EM_ERR_ARG, "%s: '%s' is %s, not 0-d", fn, names[j],
                                em_shape_str(in[i].value, b, sizeof b));
        }
        src[j] = in[i].value;
    }
    for (int j = 0; j < 2; j++)
        if (!src[j])
            return em_set_error(EM_ERR_ARG, "%s: '%s' is missing", fn, names[j]);
    double scale = em_item(src[0]);
    if (!(scale > 0) || !isfinite(scale))
        return em_set_error(EM_ERR_ARG, "%s: scale must be finite and > 0, got %g", fn, scale);
    if (em_optim_check_count(fn, names[1], em_item(src[1])) != EM_OK)
        return EM_ERR_ARG;
    em_status st = em_copy_(mine[0], src[0]);
    return st == EM_OK ? em_copy_(mine[1], src[1]) : st;
}
