/* Reading a module type's description: a setting's value in an options struct (read, written,
 * range-checked, shown), a module's settings by name, the summary's text of them, and the
 * FLOPs its type counts for one forward. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"

const void *em_module_options(const em_module *m)
{
    return m->type->options_size ? (const char *)m + m->type->options_offset : NULL;
}

const em_setting *em_type_setting(const em_module_type *t, const char *name)
{
    for (int i = 0; i < t->n_settings; i++)
        if (!strcmp(t->settings[i].name, name))
            return &t->settings[i];
    return NULL;
}

static const void *at(const void *options, size_t offset)
{
    return (const char *)options + offset;
}

static int n_choices(const em_setting *s)
{
    int n = 0;
    while (s->choices[n])
        n++;
    return n;
}

int64_t em_setting_count(const em_setting *s, const void *options)
{
    return *(const int64_t *)at(options, s->count_offset);
}

void em_setting_read(const em_setting *s, const void *options, em_setting_value *v)
{
    const void *p = at(options, s->offset);
    *v = (em_setting_value){.kind = s->kind};
    switch (s->kind) {
    case EM_SETTING_INT:
    case EM_SETTING_INT_OR_NONE:
        v->i = *(const int64_t *)p;
        v->none = s->kind == EM_SETTING_INT_OR_NONE && (double)v->i == s->none_value;
        break;
    case EM_SETTING_REAL:
    case EM_SETTING_REAL_OR_NONE:
        v->r = *(const double *)p;
        v->none = s->kind == EM_SETTING_REAL_OR_NONE && v->r == s->none_value;
        break;
    case EM_SETTING_BOOL:
        v->i = *(const bool *)p;
        break;
    case EM_SETTING_CHOICE:
        v->i = *(const int *)p;
        v->word = v->i >= 0 && v->i < n_choices(s) ? s->choices[v->i] : "?";
        break;
    case EM_SETTING_INTS:
        v->n = (int)em_setting_count(s, options);
        v->ints = p;
        break;
    }
}

void em_setting_write(const em_setting *s, void *options, const em_setting_value *v)
{
    void *p = (char *)options + s->offset;
    switch (s->kind) {
    case EM_SETTING_INT:
    case EM_SETTING_INT_OR_NONE:
        *(int64_t *)p = v->none ? (int64_t)s->none_value : v->i;
        break;
    case EM_SETTING_REAL:
    case EM_SETTING_REAL_OR_NONE:
        *(double *)p = v->none ? s->none_value : v->r;
        break;
    case EM_SETTING_BOOL:
        *(bool *)p = v->i != 0;
        break;
    case EM_SETTING_CHOICE:
        *(int *)p = (int)v->i;
        break;
    case EM_SETTING_INTS:
        memcpy(p, v->ints, sizeof(int64_t) * (size_t)v->n);
        break;
    }
}

void em_setting_default(const em_setting *s, em_setting_value *v)
{
    *v = (em_setting_value){.kind = s->kind, .i = (int64_t)s->def, .r = s->def};
    v->none = (s->kind == EM_SETTING_INT_OR_NONE || s->kind == EM_SETTING_REAL_OR_NONE) &&
              s->def == s->none_value;
}

bool em_setting_in_range(const em_setting *s, const em_setting_value *v, char *why, size_t n)
{
    if (v->none || s->kind == EM_SETTING_BOOL)
        return true;
    if (s->kind == EM_SETTING_CHOICE) {
        if (v->i >= 0 && v->i < n_choices(s))
            return true;
        snprintf(why, n, "setting '%s' is %lld, not the index of one of its %d choices",
                 s->name, (long long)v->i, n_choices(s));
        return false;
    }
    bool real = s->kind == EM_SETTING_REAL || s->kind == EM_SETTING_REAL_OR_NONE;
    for (int k = 0; k < (s->kind == EM_SETTING_INTS ? v->n : 1); k++) {
        int64_t i = s->kind == EM_SETTING_INTS ? v->ints[k] : v->i;
        bool ok = real ? v->r >= s->min && v->r <= s->max && isfinite(v->r)
                       : i >= (int64_t)s->min && i <= (int64_t)s->max;
        if (ok)
            continue;
        char name[64];
        snprintf(name, sizeof name, s->kind == EM_SETTING_INTS ? "%s_%d" : "%s", s->name, k);
        if (real)
            snprintf(why, n, "setting '%s' is %g, outside [%g, %g]", name, v->r, s->min, s->max);
        else
            snprintf(why, n, "setting '%s' is %lld, outside [%lld, %lld]", name, (long long)i,
                     (long long)s->min, (long long)s->max);
        return false;
    }
    return true;
}

bool em_check_divides(const char *name, int64_t d, const char *of, int64_t total, char *why,
                      size_t n)
{
    if (total % d == 0)
        return true;
    snprintf(why, n, "setting '%s' is %lld, which does not divide %s %lld", name, (long long)d,
             of, (long long)total);
    return false;
}

bool em_options_check(const em_module_type *t, const void *options, char *why, size_t n)
{
    for (int i = 0; i < t->n_settings; i++) {
        em_setting_value v;
        em_setting_read(&t->settings[i], options, &v);
        if (!em_setting_in_range(&t->settings[i], &v, why, n))
            return false;
    }
    return !t->check || t->check(options, why, n);
}

/* v as a summary shows it: 4, 0.5, true, 'nearest', None, (1, 2) */
static int format_value(const em_setting_value *v, char *buf, size_t n)
{
    if (v->none)
        return snprintf(buf, n, "None");
    switch (v->kind) {
    case EM_SETTING_INT:
    case EM_SETTING_INT_OR_NONE: return snprintf(buf, n, "%lld", (long long)v->i);
    case EM_SETTING_REAL:
    case EM_SETTING_REAL_OR_NONE: return snprintf(buf, n, "%g", v->r);
    case EM_SETTING_BOOL: return snprintf(buf, n, "%s", v->i ? "true" : "false");
    case EM_SETTING_CHOICE: return snprintf(buf, n, "'%s'", v->word);
    case EM_SETTING_INTS: break;
    }
    int at = snprintf(buf, n, "(");
    for (int k = 0; k < v->n && at >= 0 && (size_t)at < n; k++)
        at += snprintf(buf + at, n - (size_t)at, "%s%lld", k ? ", " : "", (long long)v->ints[k]);
    return at >= 0 && (size_t)at < n ? at + snprintf(buf + at, n - (size_t)at, ")") : at;
}

void em_describe_settings(const em_module *m, char *buf, size_t n)
{
    const em_module_type *t = m->type;
    size_t at = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < t->n_settings && at < n; i++) {
        const em_setting *s = &t->settings[i];
        em_setting_value v;
        em_setting_read(s, em_module_options(m), &v);
        if (v.none && (s->flags & EM_SETTING_NONE_OMITTED))
            continue;
        int k = snprintf(buf + at, n - at, "%s%s%s", at ? ", " : "",
                         s->flags & EM_SETTING_POSITIONAL ? "" : s->name,
                         s->flags & EM_SETTING_POSITIONAL ? "" : "=");
        if (k < 0)
            return;
        at += (size_t)k;
        if (at < n && (k = format_value(&v, buf + at, n - at)) > 0)
            at += (size_t)k;
    }
}

void em_module_describe(const em_module *m, char *buf, size_t n)
{
    if (!m || !n)
        return;
    if (m->type->describe)
        m->type->describe(m, buf, n);
    else
        em_describe_settings(m, buf, n);
}

em_status em_module_setting(const em_module *m, const char *name, em_setting_value *v)
{
    if (!m || !name || !v)
        return em_set_error(EM_ERR_ARG, "em_module_setting: module, name and value must be "
                            "given");
    const em_setting *s = em_type_setting(m->type, name);
    if (!s)
        return em_set_error(EM_ERR_ARG, "em_module_setting: a %s has no setting '%s'",
                            m->type->type_name, name);
    em_setting_read(s, em_module_options(m), v);
    return EM_OK;
}

double em_module_own_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    if (m->type->flops)
        return m->type->flops(m, x, y);
    return m->type->traits & EM_TRAIT_ELEMENTWISE ? (double)em_numel(y) : 0;
}

double em_no_flops(const em_module *m, const em_tensor *x, const em_tensor *y)
{
    (void)m, (void)x, (void)y;
    return 0;
}
