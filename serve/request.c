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
    char what[32]; /* the sample being read, for messages: "input", "instances[2]" */
    float *values; /* (cap) the sample's numbers, flattened */
    int64_t n_values, cap;
    int64_t shape[EM_MAX_DIMS]; /* the nesting's sizes, fixed by the first array at each depth */
    int rank;                   /* how deep the first number was */
    char *err;
    size_t n_err;
    bool failed;
    bool out_of_memory;
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
        return fail(r, "%s: a number where an array was expected (depth %d)", r->what,
                    d + 1);
    double v = json_number_value(e);
    if (!isfinite(v) || fabs(v) > F32_MAX)
        return fail(r, "%s: number %g is out of the f32 range", r->what, v);
    if (r->n_values >= r->cap)
        return fail(r, "%s: more than %lld numbers", r->what, (long long)r->cap);
    r->values[r->n_values++] = (float)v;
    return true;
}

/* A rectangular nest of arrays of numbers; a is at depth d (0 for the outermost). */
static bool read_array(reader *r, const json_t *a, int d)
{
    if (d >= EM_MAX_DIMS)
        return fail(r, "%s: nested deeper than %d", r->what, EM_MAX_DIMS);
    int64_t count = (int64_t)json_array_size(a);
    if (count == 0)
        return fail(r, "%s: empty array at depth %d", r->what, d + 1);
    if (r->shape[d] == 0)
        r->shape[d] = count;
    if (r->shape[d] != count)
        return fail(r, "%s: ragged array at depth %d (%lld entries, expected %lld)", r->what,
                    d + 1, (long long)count, (long long)r->shape[d]);
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e) {
        bool ok;
        if (json_is_array(e))
            ok = r->rank && r->rank <= d + 1
                     ? fail(r, "%s: ragged nesting at depth %d", r->what, d + 2)
                     : read_array(r, e, d + 1);
        else if (json_is_number(e))
            ok = read_number(r, e, d);
        else
            ok = fail(r, "%s: entry %zu at depth %d is not a number or an array", r->what, i,
                      d + 1);
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

/* The request's samples: "input" (one) or "instances" (an array of them). */
typedef struct {
    const json_t *input, *instances;
} sample_keys;

/* One key of the request object into out (the samples' JSON into keys, read later). */
static bool read_key(reader *r, const char *key, const json_t *v, em_predict_request *out,
                     sample_keys *keys)
{
    if (!strcmp(key, "input")) {
        keys->input = v;
        return json_is_array(v) ? true : fail(r, "input: expected an array of numbers");
    }
    if (!strcmp(key, "instances")) {
        keys->instances = v;
        return json_is_array(v) && json_array_size(v) > 0
                   ? true : fail(r, "instances: expected a non-empty array of inputs");
    }
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
    return fail(r, "unknown key '%s' (expected input or instances, priority, timeout_ms)", key);
}

/* One sample (JSON v, named what) into dst (numel values of shape sample). */
static bool read_sample(reader *r, const json_t *v, const char *what, em_shape sample,
                        int64_t numel, float *dst)
{
    snprintf(r->what, sizeof r->what, "%s", what);
    r->values = dst;
    r->n_values = r->rank = 0;
    r->cap = numel;
    memset(r->shape, 0, sizeof r->shape);
    if (!json_is_array(v))
        return fail(r, "%s: expected an array of numbers", what);
    if (!read_array(r, v, 0))
        return false;
    if (shape_matches(r, sample, numel))
        return true;
    char want[160], got[160];
    shape_text(want, sizeof want, sample.d, sample.ndim);
    shape_text(got, sizeof got, r->shape, r->rank);
    return fail(r, "%s: shape [%s] does not match the model's sample [%s] (or %lld numbers "
                "flat)", what, got, want, (long long)numel);
}

/* The samples keys name into out->input: the sample, or (n, sample) for instances. */
static bool read_samples(reader *r, const sample_keys *keys, em_shape sample, int64_t numel,
                         em_predict_request *out)
{
    if (keys->input && keys->instances)
        return fail(r, "input and instances: give one of them");
    if (!keys->input && !keys->instances)
        return fail(r, "input: missing (or instances)");
    int64_t n = keys->instances ? (int64_t)json_array_size(keys->instances) : 1;
    if (n > EM_REQUEST_MAX_VALUES / numel)
        return fail(r, "instances: %lld samples of %lld values are more than %d values",
                    (long long)n, (long long)numel, EM_REQUEST_MAX_VALUES);
    float *values = malloc(sizeof *values * (size_t)(n * numel));
    if (!values) {
        r->out_of_memory = true;
        return fail(r, "out of memory");
    }
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++) {
        char what[32] = "input";
        if (keys->instances)
            snprintf(what, sizeof what, "instances[%lld]", (long long)i);
        ok = read_sample(r, keys->instances ? json_array_get(keys->instances, (size_t)i)
                                            : keys->input, what, sample, numel,
                         values + i * numel);
    }
    em_shape shape = sample;
    if (ok && keys->instances) { /* (n, sample...) */
        shape.ndim = sample.ndim + 1;
        shape.d[0] = n;
        memcpy(shape.d + 1, sample.d, sizeof shape.d[0] * (size_t)sample.ndim);
        out->n_instances = n;
    }
    out->input = ok ? em_from_data(shape, EM_F32, values) : NULL;
    if (ok && !out->input)
        ok = fail(r, "%s", em_error());
    free(values);
    return ok;
}

em_status em_predict_request_parse(const char *body, size_t n, em_shape sample,
                                   em_predict_request *out, char *err, size_t n_err)
{
    *out = (em_predict_request){.priority = EM_PRIORITY_NORMAL};
    int64_t numel = em_shape_numel(&sample);
    if (numel < 1 || numel > EM_REQUEST_MAX_VALUES || sample.ndim >= EM_MAX_DIMS) {
        snprintf(err, n_err, "the model's sample has %lld values in %d dims", (long long)numel,
                 sample.ndim);
        return EM_ERR_ARG;
    }
    reader r = {.err = err, .n_err = n_err};
    json_t *root = em_json_parse("predict", "request body", body, n);
    if (!root) {
        fail(&r, "%s", em_error());
        em_error_clear();
        return EM_ERR_ARG;
    }
    if (!json_is_object(root))
        fail(&r, "the body is not a JSON object");
    sample_keys keys = {0};
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (r.failed || !read_key(&r, key, v, out, &keys))
            break;
    }
    if (!r.failed)
        read_samples(&r, &keys, sample, numel, out);
    json_decref(root);
    if (r.failed) {
        em_release(out->input);
        out->input = NULL;
        out->n_instances = 0;
    }
    return !r.failed ? EM_OK : r.out_of_memory ? EM_ERR_MEMORY : EM_ERR_ARG;
}

/* v as a JSON text (malloc'd) after it is released, or NULL when out of memory. */
static char *dump_and_release(json_t *v, bool built)
{
    char *s = built ? em_json_dump(v) : NULL;
    json_decref(v);
    return s;
}

/* {"output":[...],"argmax":k} for y, or NULL when out of memory. */
static json_t *prediction(const em_tensor *y)
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
    if (!built)
        json_decref(obj);
    return built ? obj : NULL;
}

char *em_predict_response(const em_tensor *y)
{
    json_t *obj = prediction(y);
    return dump_and_release(obj, obj != NULL);
}

char *em_predict_batch_response(em_tensor *const *ys, int64_t n)
{
    json_t *obj = json_object(), *list = json_array();
    bool built = obj && list && json_object_set(obj, "predictions", list) == 0;
    for (int64_t i = 0; built && i < n; i++)
        built = json_array_append_new(list, prediction(ys[i])) == 0;
    json_decref(list);
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
