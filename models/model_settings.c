/* A module's construction settings in a whole-model file: set while saving, read with range
 * checks while loading, every error naming the file, the module, the key and the value. */
#include <math.h>

#include "models/model_file_internal.h"

static em_status set(em_model_settings *s, const char *key, json_t *v)
{
    if (!s || !key || json_object_set_new(s->obj, key, v))
        return em_set_error(EM_ERR_MEMORY, "em_model_save: setting '%s' of %s could not be "
                            "stored", key ? key : "(null)", s ? s->type : "(null)");
    return EM_OK;
}

em_status em_model_settings_set_int(em_model_settings *s, const char *key, int64_t v)
{
    return set(s, key, json_integer(v));
}

em_status em_model_settings_set_real(em_model_settings *s, const char *key, double v)
{
    if (!isfinite(v))
        return em_set_error(EM_ERR_ARG, "em_model_save: setting '%s' of %s is %g; it must be "
                            "finite", key, s ? s->type : "(null)", v);
    return set(s, key, json_real(v));
}

em_status em_model_settings_set_bool(em_model_settings *s, const char *key, bool v)
{
    return set(s, key, json_boolean(v));
}

bool em_model_settings_has(const em_model_settings *s, const char *key)
{
    return s && key && json_object_get(s->obj, key);
}

/* The value of key, or NULL with an error saying it is missing. */
static json_t *get(const em_model_settings *s, const char *key)
{
    json_t *v = s && key ? json_object_get(s->obj, key) : NULL;
    if (!v)
        em_set_error(EM_ERR_IO, "em_model_load: %s: %s '%s' has no setting '%s'",
                     s ? s->file : "(null)", s ? s->type : "(null)",
                     em_model_module_name(s ? s->module : ""),
                     key ? key : "(null)");
    return v;
}

static em_status bad(const em_model_settings *s, const char *key, const char *what)
{
    return em_set_error(EM_ERR_IO, "em_model_load: %s: %s '%s': setting '%s' %s", s->file,
                        s->type, em_model_module_name(s->module), key, what);
}

em_status em_model_settings_int(const em_model_settings *s, const char *key, int64_t min,
                                int64_t max, int64_t *v)
{
    json_t *j = get(s, key);
    if (!j)
        return em_error_status();
    if (!json_is_integer(j))
        return bad(s, key, "is not an integer");
    int64_t x = json_integer_value(j);
    if (x < min || x > max) {
        char what[128];
        snprintf(what, sizeof what, "is %lld, outside [%lld, %lld]", (long long)x,
                 (long long)min, (long long)max);
        return bad(s, key, what);
    }
    *v = x;
    return EM_OK;
}

em_status em_model_settings_real(const em_model_settings *s, const char *key, double min,
                                 double max, double *v)
{
    json_t *j = get(s, key);
    if (!j)
        return em_error_status();
    if (!json_is_number(j))
        return bad(s, key, "is not a number");
    double x = json_number_value(j);
    if (!(x >= min && x <= max)) {
        char what[128];
        snprintf(what, sizeof what, "is %g, outside [%g, %g]", x, min, max);
        return bad(s, key, what);
    }
    *v = x;
    return EM_OK;
}

em_status em_model_settings_set_none(em_model_settings *s, const char *key)
{
    return set(s, key, json_null());
}

em_status em_model_settings_real_or_none(const em_model_settings *s, const char *key,
                                         double min, double max, double *v, bool *none)
{
    json_t *j = s && key ? json_object_get(s->obj, key) : NULL;
    *none = json_is_null(j);
    return *none ? EM_OK : em_model_settings_real(s, key, min, max, v);
}

em_status em_model_settings_bool(const em_model_settings *s, const char *key, bool *v)
{
    json_t *j = get(s, key);
    if (!j)
        return em_error_status();
    if (!json_is_boolean(j))
        return bad(s, key, "is not true or false");
    *v = json_is_true(j);
    return EM_OK;
}
