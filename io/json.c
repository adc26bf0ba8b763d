/* ember's JSON rules on top of jansson (see io/json_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/atomic_file.h"
#include "io/json_internal.h"

json_t *em_json_parse(const char *fn, const char *what, const char *text, size_t n)
{
    json_error_t err;
    json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!v)
        em_set_error(EM_ERR_IO, "%s: '%s': corrupt JSON at byte %d: %s%s", fn, what, err.position,
                     err.text, json_error_code(&err) == json_error_invalid_utf8 ? " (not UTF-8)"
                                                                               : "");
    return v;
}

int em_json_set_real(json_t *obj, const char *key, double v, int decimals)
{
    if (!isfinite(v)) {
        json_t *flags = json_object_get(obj, "non_finite");
        if (json_object_set_new(obj, key, json_null()) != 0 ||
            (!flags && json_object_set_new(obj, "non_finite", flags = json_object()) != 0))
            return -1;
        const char *what = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
        return json_object_set_new(flags, key, json_string(what));
    }
    if (decimals == 0 && fabs(v) < 9e18)
        return json_object_set_new(obj, key, json_integer((json_int_t)llround(v)));
    if (decimals > 0) {
        double scale = pow(10.0, decimals);
        double r = round(v * scale) / scale;
        v = isfinite(r) ? r : v;
    }
    return json_object_set_new(obj, key, json_real(v));
}

char *em_json_dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
}

em_status em_json_print_line(FILE *f, const json_t *v)
{
    char *s = em_json_dump(v);
    if (!s)
        return em_set_error(EM_ERR_MEMORY, "em_json_print_line: out of memory");
    int rc = fprintf(f, "%s\n", s);
    free(s);
    if (rc < 0 || fflush(f) != 0)
        return em_set_error(EM_ERR_IO, "em_json_print_line: cannot write");
    return EM_OK;
}

em_status em_json_save(const char *path, const json_t *v)
{
    em_atomic_file *af = em_atomic_file_new(path);
    if (!af)
        return em_error_status();
    if (em_json_print_line(em_atomic_file_stream(af), v) != EM_OK) {
        em_atomic_file_free(af);
        char prefix[4200];
        snprintf(prefix, sizeof prefix, "cannot write '%s'", path);
        return em_error_prefix(prefix);
    }
    return em_atomic_file_commit(af);
}
