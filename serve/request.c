/* Predict requests read through ember's JSON module (jansson under ember's strict rules) and
 * checked against the model's sample shape; the responses and statistics written with it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"
#include "io/json_internal.h"

#define F32_MAX 3.4028234663852886e38

typedef struct {
    float *values; /* (cap) the input's numbers, flattened */
    int64_t n_values, cap;
    int64_t shape[EM_MAX_DIMS]; /* the nesting's sizes, fixed by the first array at each depth */
    int rank;                   /* how deep the first number was */
    char *err;
    size_t n_err;
    bool failed;
} reader;

static bool fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(reader *r, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->n_err, fmt, ap);
        va_end(ap);
        r->failed = true;
    }
    return false;
}

static bool read_number(reader *r, const json_t *e, int d)
{
    if (r->rank == 0)
        r->rank = d + 1;
    if (r->rank != d + 1)
        return fail(r, "input: a number where an array was expected (depth %d)", d + 1);
    double v = json_number_value(e);
    if (!isfinite(v) || fabs(v) > F32_MAX)
        return fail(r, "input: number %g is out of the f32 range", v);
    if (r->n_values >= r->cap)
        return fail(r, "input: more than %lld numbers", (long long)r->cap);
    r->values[r->n_values++] = (float)v;
    return true;
}

/* A rectangular nest of arrays of numbers; a is at depth d (0 for the outermost). */
static bool read_array(reader *r, const json_t *a, int d)
{
    if (d >= EM_MAX_DIMS)
        return fail(r, "input: nested deeper than %d", EM_MAX_DIMS);
    int64_t count = (int64_t)json_array_size(a);
    if (count == 0)
        return fail(r, "input: empty array at depth %d", d + 1);
    if (r->shape[d] == 0)
        r->shape[d] = count;
    if (r->shape[d] != count)
        return fail(r, "input: ragged array at depth %d (%lld entries, expected %lld)", d + 1,
                    (long long)count, (long long)r->shape[d]);
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e) {
        bool ok;
        if (json_is_array(e))
            ok = r->rank && r->rank <= d + 1
                     ? fail(r, "input: ragged nesting at depth %d", d + 2)
                     : read_array(r, e, d + 1);
        else if (json_is_number(e))
            ok = read_number(r, e, d);
        else
            ok = fail(r, "input: entry %zu at depth %d is not a number or an array", i, d + 1);
        if (!ok)
            return false;
    }
    return true;
}

static bool shape_matches(const reader *r, em_shape s, int64_t numel)
{
    if (r->rank == 1 && r->n_values == numel)
        return true; /* flat */
    if (r->rank != s.ndim)
        return false;
    for (int i = 0; i < s.ndim; i++)
        if (r->shape[i] != s.d[i])
            return false;
    return true;
}

static void shape_text(char *out, size_t n, const int64_t *d, int ndim)
{
    out[0] = '\0';
    for (int i = 0; i < ndim; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%lld", i ? "," : "", (long long)d[i]);
}

/* One key of the request object into out (the input's numbers into r). */
static bool read_key(reader *r, const char *key, const json_t *v, em_predict_request *out)
{
    if (!strcmp(key, "input"))
        return json_is_array(v) ? read_array(r, v, 0)
                                : fail(r, "input: expected an array of numbers");
    if (!strcmp(key, "priority")) {
        if (!json_is_string(v))
            return fail(r, "priority: expected a string: low, normal, high or critical");
        int p = em_priority_parse(json_string_value(v));
        if (p < 0)
            return fail(r, "priority: '%s' is not low, normal, high or critical",
                        json_string_value(v));
        out->priority = (em_priority)p;
        return true;
    }
    if (!strcmp(key, "timeout_ms")) {
        if (!json_is_number(v))
            return fail(r, "timeout_ms: expected a number of milliseconds");
        out->timeout_ms = json_number_value(v);
        return out->timeout_ms > 0 && out->timeout_ms <= 3.6e6
                   ? true
                   : fail(r, "timeout_ms: %g is not in (0, 3600000]", out->timeout_ms);
    }
    return fail(r, "unknown key '%s' (expected input, priority, timeout_ms)", key);
}

em_status em_predict_request_parse(const char *body, size_t n, em_shape sample,
                                   em_predict_request *out, char *err, size_t n_err)
{
    *out = (em_predict_request){.priority = EM_PRIORITY_NORMAL};
    int64_t numel = em_shape_numel(&sample);
    if (numel < 1 || numel > EM_REQUEST_MAX_VALUES) {
        snprintf(err, n_err, "the model's sample has %lld values", (long long)numel);
        return EM_ERR_ARG;
    }
    reader r = {.cap = numel, .err = err, .n_err = n_err};
    json_t *root = em_json_parse("predict", "request body", body, n);
    if (!root) {
        fail(&r, "%s", em_error());
        em_error_clear();
        return EM_ERR_ARG;
    }
    r.values = malloc(sizeof *r.values * (size_t)numel);
    if (!r.values) {
        json_decref(root);
        snprintf(err, n_err, "out of memory");
        return EM_ERR_MEMORY;
    }
    if (!json_is_object(root))
        fail(&r, "the body is not a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (r.failed || !read_key(&r, key, v, out))
            break;
    }
    if (!r.failed && !json_object_get(root, "input"))
        fail(&r, "input: missing");
    if (!r.failed && !shape_matches(&r, sample, numel)) {
        char want[160], got[160];
        shape_text(want, sizeof want, sample.d, sample.ndim);
        shape_text(got, sizeof got, r.shape, r.rank);
        fail(&r, "input: shape [%s] does not match the model's sample [%s] (or %lld numbers "
             "flat)", got, want, (long long)numel);
    }
    if (!r.failed) {
        out->input = em_from_data(sample, EM_F32, r.values);
        if (!out->input)
            fail(&r, "%s", em_error());
    }
    json_decref(root);
    free(r.values);
    return r.failed ? EM_ERR_ARG : EM_OK;
}

/* v as a JSON text (malloc'd) after it is released, or NULL when out of memory. */
static char *dump_and_release(json_t *v, bool built)
{
    char *s = built ? em_json_dump(v) : NULL;
    json_decref(v);
    return s;
}

char *em_predict_response(const em_tensor *y)
{
    int64_t n = em_numel(y);
    float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    json_t *obj = json_object(), *output = json_array();
    bool built = v && obj && output && em_copy_to_host(y, EM_F32, v) == EM_OK &&
                 json_object_set(obj, "output", output) == 0;
    int64_t best = 0, non_finite = 0;
    for (int64_t i = 0; built && i < n; i++) {
        /* an f32 to its 9 significant digits; JSON has no NaN or infinity: null */
        char digits[32];
        snprintf(digits, sizeof digits, "%.9g", v[i]);
        non_finite += !isfinite(v[i]);
        built = json_array_append_new(output, isfinite(v[i]) ? json_real(strtod(digits, NULL))
                                                             : json_null()) == 0;
        best = v[i] > v[best] ? i : best;
    }
    built = built && json_object_set_new(obj, "argmax", json_integer(best)) == 0 &&
            (!non_finite || json_object_set_new(obj, "non_finite", json_integer(non_finite)) == 0);
    json_decref(output);
    free(v);
    return dump_and_release(obj, built);
}

static bool set_int(json_t *obj, const char *key, int64_t v)
{
    return json_object_set_new(obj, key, json_integer(v)) == 0;
}

char *em_engine_stats_json(const em_engine_stats *s)
{
    json_t *o = json_object(), *by_priority = json_object(), *hist = json_object(),
           *cache = json_object();
    bool built = o && by_priority && hist && cache && set_int(o, "submitted", s->submitted) &&
                 set_int(o, "completed", s->completed) && set_int(o, "failed", s->failed) &&
                 set_int(o, "cancelled", s->cancelled) && set_int(o, "rejected", s->rejected) &&
                 set_int(o, "cache_answered", s->cache_answered) &&
                 em_json_set_real(o, "uptime_s", s->uptime_s, 3) == 0 &&
                 em_json_set_real(o, "throughput", s->throughput, 1) == 0 &&
                 em_json_set_real(o, "p50_ms", s->p50_ms, 3) == 0 &&
                 em_json_set_real(o, "p95_ms", s->p95_ms, 3) == 0 &&
                 em_json_set_real(o, "p99_ms", s->p99_ms, 3) == 0;
    for (int p = 0; built && p < EM_PRIORITY_COUNT; p++)
        built = em_json_set_real(by_priority, em_priority_name((em_priority)p),
                                 s->p99_ms_by_priority[p], 3) == 0;
    for (int i = 1; built && i <= EM_ENGINE_MAX_BATCH; i++) {
        char size[16];
        snprintf(size, sizeof size, "%d", i);
        built = !s->batch_hist[i] || set_int(hist, size, s->batch_hist[i]);
    }
    built = built && json_object_set(o, "p99_ms_by_priority", by_priority) == 0 &&
            set_int(o, "queue_depth", s->queue_depth) &&
            set_int(o, "max_queue_depth", s->max_queue_depth) &&
            set_int(o, "batch_limit", s->batch_limit) && set_int(o, "batches", s->batches) &&
            json_object_set(o, "batch_hist", hist) == 0 &&
            set_int(cache, "entries", s->cache.entries) &&
            set_int(cache, "bytes", s->cache.bytes) && set_int(cache, "hits", s->cache.hits) &&
            set_int(cache, "misses", s->cache.misses) &&
            set_int(cache, "evictions", s->cache.evictions) &&
            set_int(cache, "discarded", s->cache.discarded) &&
            json_object_set(o, "cache", cache) == 0;
    json_decref(by_priority);
    json_decref(hist);
    json_decref(cache);
    return dump_and_release(o, built);
}
