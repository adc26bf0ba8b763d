/* A module's settings in a whole-model file, written and read through its type's description:
 * one JSON value per setting (an INTS setting's values as NAME_0, NAME_1, ...; None as null, or
 * left out where the type says so). Reading checks every key, kind and range and the type's own
 * check, each error naming the file, the module, the key and the value. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/model_file_internal.h"
#include "nn/nn_internal.h"

/* The key of an INTS setting's value k: "pad_0" */
static void value_key(const em_setting *s, int k, char *key, size_t n)
{
    snprintf(key, n, s->kind == EM_SETTING_INTS ? "%s_%d" : "%s", s->name, k);
}

static em_status stored(const em_module_type *t, const char *key, int failed)
{
    if (failed)
        return em_set_error(EM_ERR_MEMORY, "em_model_save: setting '%s' of %s could not be "
                            "stored", key, t->type_name);
    return EM_OK;
}

em_status em_model_settings_write(const em_module_type *t, const void *options, json_t *obj,
                                  em_model_place at)
{
    for (int i = 0; i < t->n_settings; i++) {
        const em_setting *s = &t->settings[i];
        em_setting_value v;
        em_setting_read(s, options, &v);
        if (v.none && (s->flags & EM_SETTING_NONE_OMITTED))
            continue;
        bool real = s->kind == EM_SETTING_REAL || s->kind == EM_SETTING_REAL_OR_NONE;
        if (real && !v.none && !isfinite(v.r))
            return em_set_error(EM_ERR_ARG, "em_model_save: %s: %s '%s': setting '%s' is %g; "
                                "it must be finite", at.file, t->type_name,
                                em_model_module_name(at.path), s->name, v.r);
        em_status st = EM_OK;
        for (int k = 0; k < (s->kind == EM_SETTING_INTS ? v.n : 1) && st == EM_OK; k++) {
            char key[64];
            value_key(s, k, key, sizeof key);
            json_t *j = v.none ? json_null()
                        : s->kind == EM_SETTING_INTS ? json_integer(v.ints[k])
                        : s->kind == EM_SETTING_BOOL ? json_boolean(v.i)
                        : real ? json_real(v.r) : json_integer(v.i);
            st = stored(t, key, json_object_set_new(obj, key, j));
        }
        if (st != EM_OK)
            return st;
    }
    return EM_OK;
}

/* An error about the module at `at`: "em_model_load: FILE: TYPE 'PATH': what" */
static em_status refuse(const em_module_type *t, em_model_place at, const char *what)
{
    return em_set_error(EM_ERR_IO, "em_model_load: %s: %s '%s': %s", at.file, t->type_name,
                        em_model_module_name(at.path), what);
}

/* JSON value j of setting s (key names it) into v; false with why. */
static bool parse(const em_setting *s, const char *key, const json_t *j, em_setting_value *v,
                  char *why, size_t n)
{
    bool optional = s->kind == EM_SETTING_INT_OR_NONE || s->kind == EM_SETTING_REAL_OR_NONE;
    bool real = s->kind == EM_SETTING_REAL || s->kind == EM_SETTING_REAL_OR_NONE;
    v->none = optional && json_is_null(j);
    if (v->none)
        return true;
    const char *want = s->kind == EM_SETTING_BOOL ? (json_is_boolean(j) ? NULL : "true or false")
                       : real ? (json_is_number(j) ? NULL : "a number")
                              : (json_is_integer(j) ? NULL : "an integer");
    if (want) {
        snprintf(why, n, "setting '%s' is not %s", key, want);
        return false;
    }
    if (s->kind == EM_SETTING_BOOL)
        v->i = json_is_true(j);
    else if (real)
        v->r = json_number_value(j);
    else
        v->i = json_integer_value(j);
    return true;
}

#define MAX_INTS 16 /* the most values an INTS setting holds */

/* Setting s's value from obj (its default when obj leaves out one added later, or a None that
 * files leave out) into options; false with why, and *missing when obj leaves it out. */
static bool read_setting(const em_setting *s, const json_t *obj, void *options, char *why,
                         size_t n, bool *missing)
{
    em_setting_value v;
    em_setting_default(s, &v);
    int64_t ints[MAX_INTS];
    int64_t count = s->kind == EM_SETTING_INTS ? em_setting_count(s, options) : 1;
    if (count > MAX_INTS) {
        snprintf(why, n, "setting '%s' holds %lld values, more than %d", s->name,
                 (long long)count, MAX_INTS);
        return false;
    }
    if (s->kind == EM_SETTING_INTS) {
        v.n = (int)count;
        v.ints = ints;
    }
    for (int k = 0; k < count; k++) {
        char key[64];
        value_key(s, k, key, sizeof key);
        const json_t *j = json_object_get(obj, key);
        if (!j && !(s->flags & (EM_SETTING_ADDED_LATER | EM_SETTING_NONE_OMITTED))) {
            snprintf(why, n, "has no setting '%s'", key);
            *missing = true;
            return false;
        }
        em_setting_value one = v;
        if (j && !parse(s, key, j, &one, why, n))
            return false;
        if (s->kind == EM_SETTING_INTS)
            ints[k] = one.i;
        else
            v = one;
    }
    if (!em_setting_in_range(s, &v, why, n))
        return false;
    em_setting_write(s, options, &v);
    return true;
}

/* Whether key names one of t's settings (an INTS setting's NAME_k for k below its count). */
static bool known_key(const em_module_type *t, const void *options, const char *key)
{
    for (int i = 0; i < t->n_settings; i++) {
        const em_setting *s = &t->settings[i];
        if (s->kind != EM_SETTING_INTS && !strcmp(key, s->name))
            return true;
        for (int k = 0; s->kind == EM_SETTING_INTS && k < em_setting_count(s, options); k++) {
            char name[64];
            value_key(s, k, name, sizeof name);
            if (!strcmp(key, name))
                return true;
        }
    }
    return false;
}

/* "in_features, out_features, bias": t's setting names, for errors */
static void setting_names(const em_module_type *t, char *buf, size_t n)
{
    int at = snprintf(buf, n, "%s", t->n_settings ? "" : "none");
    for (int i = 0; i < t->n_settings && at >= 0 && (size_t)at < n; i++)
        at += snprintf(buf + at, n - (size_t)at, "%s%s%s", i ? ", " : "", t->settings[i].name,
                       t->settings[i].kind == EM_SETTING_INTS ? "_N" : "");
}

em_status em_model_settings_read(const em_module_type *t, const json_t *obj, void *options,
                                 em_model_place at)
{
    char why[256];
    for (int i = 0; i < t->n_settings; i++) {
        bool missing = false;
        if (read_setting(&t->settings[i], obj, options, why, sizeof why, &missing))
            continue;
        if (missing) /* "Linear '0' has no setting 'in_features'" */
            return em_set_error(EM_ERR_IO, "em_model_load: %s: %s '%s' %s", at.file,
                                t->type_name, em_model_module_name(at.path), why);
        return refuse(t, at, why);
    }
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        if (known_key(t, options, key))
            continue;
        char names[192], what[320];
        setting_names(t, names, sizeof names);
        snprintf(what, sizeof what, "setting '%.64s' is not one of a %s's (%s)", key,
                 t->type_name, names);
        return refuse(t, at, what);
    }
    if (t->check && !t->check(options, why, sizeof why))
        return refuse(t, at, why);
    return EM_OK;
}
