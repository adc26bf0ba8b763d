/* Predict requests read token by token by ember's bounded JSON reader (io/json_reader.h),
 * straight into the samples' numbers and checked against the model's sample shape as they are
 * read, within a request's limits and the server's budget (serve/request_budget.c); the
 * responses and statistics written through ember's JSON module. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"
#include "io/json_internal.h"
#include "io/json_reader.h"
#include "serve/request_budget.h"

#define F32_MAX 3.4028234663852886e38
/* the longest key or string a request has a use for (the keys, the priorities' names) */
#define MAX_STRING 256
/* a request's JSON values: its numbers, as many arrays (none is empty), a few keys */
#define MAX_JSON_VALUES (2 * (int64_t)EM_REQUEST_MAX_VALUES + 64)

typedef struct {
    em_json_reader json;
    em_request_budget held; /* what this parse holds of the server's budget */
    em_shape sample;
    int64_t numel;          /* the sample's */
    char what[32];          /* the sample being read, for messages: "input", "instances[2]" */
    float *values;          /* (cap) the samples' numbers, flattened, one sample after another */
    int64_t n_values, cap;
    int64_t sample_end;     /* where the sample being read ends in values */
    int64_t shape[EM_MAX_DIMS]; /* the nesting's sizes, fixed by the first array at each depth */
    int rank;                   /* how deep the sample's first number was */
    char *err;
    size_t n_err;
    em_status status; /* EM_OK until the first failure */
} reader;

static bool fail_with(reader *r, em_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail_with(reader *r, em_status st, const char *fmt, ...)
{
    if (r->status == EM_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->n_err, fmt, ap);
        va_end(ap);
        r->status = st;
    }
    return false;
}

/* A body that does not say what the server needs: 400. */
#define fail(r, ...) fail_with(r, EM_ERR_ARG, __VA_ARGS__)

/* The pending error (the JSON reader's or the budget's) as the parse's: malformed text 400, over
 * a request's limits 413 (EM_ERR_MEMORY), the budget spent 503 (EM_ERR_BUSY). */
static bool fail_pending(reader *r)
{
    em_status st = r->json.over_limit ? EM_ERR_MEMORY
                   : em_error_status() == EM_ERR_IO ? EM_ERR_ARG : em_error_status();
    fail_with(r, st, "%s", em_error());
    em_error_clear();
    return false;
}

/* The next token, with the values read so far held in the server's budget. */
static em_json_token next(reader *r)
{
    em_json_token t = em_json_next(&r->json);
    if (t == EM_JSON_ERROR ||
        em_request_budget_take_values(&r->held, r->json.values) != EM_OK) {
        fail_pending(r);
        return EM_JSON_ERROR;
    }
    return t;
}

static bool read_number(reader *r, int d)
{
    if (r->rank == 0)
        r->rank = d + 1;
    if (r->rank != d + 1)
        return fail(r, "%s: a number where an array was expected (depth %d)", r->what, d + 1);
    double v = r->json.real;
    if (!isfinite(v) || fabs(v) > F32_MAX)
        return fail(r, "%s: number %g is out of the f32 range", r->what, v);
    if (r->n_values >= r->sample_end)
        return fail(r, "%s: more than %lld numbers", r->what, (long long)r->numel);
    r->values[r->n_values++] = (float)v;
    return true;
}

/* A rectangular nest of arrays of numbers; its '[' was read, at depth d (0 the outermost). */
static bool read_array(reader *r, int d)
{
    int64_t count = 0;
    for (em_json_token t; (t = next(r)) != EM_JSON_ARRAY_END; count++) {
        bool ok;
        if (t == EM_JSON_ERROR)
            return false;
        if (t == EM_JSON_ARRAY)
            ok = r->rank && r->rank <= d + 1 ? fail(r, "%s: ragged nesting at depth %d", r->what,
                                                    d + 2)
                 : d + 1 >= EM_MAX_DIMS ? fail(r, "%s: nested deeper than %d", r->what,
                                               EM_MAX_DIMS)
                                        : read_array(r, d + 1);
        else if (t == EM_JSON_INTEGER || t == EM_JSON_REAL)
            ok = read_number(r, d);
        else
            ok = fail(r, "%s: entry %lld at depth %d is not a number or an array", r->what,
                      (long long)count, d + 1);
        if (!ok)
            return false;
    }
    if (count == 0)
        return fail(r, "%s: empty array at depth %d", r->what, d + 1);
    if (r->shape[d] == 0)
        r->shape[d] = count;
    if (r->shape[d] != count)
        return fail(r, "%s: ragged array at depth %d (%lld entries, expected %lld)", r->what,
                    d + 1, (long long)count, (long long)r->shape[d]);
    return true;
}

static bool shape_matches(const reader *r)
{
    if (r->rank == 1 && r->shape[0] == r->numel)
        return true; /* flat */
    if (r->rank != r->sample.ndim)
        return false;
    for (int i = 0; i < r->sample.ndim; i++)
        if (r->shape[i] != r->sample.d[i])
            return false;
    return true;
}

static void shape_text(char *out, size_t n, const int64_t *d, int ndim)
{
    out[0] = '\0';
    for (int i = 0; i < ndim; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%lld", i ? "," : "", (long long)d[i]);
}

/* Room for one more sample's numbers (the budget holding their bytes). */
static bool sample_room(reader *r)
{
    if (r->n_values + r->numel > EM_REQUEST_MAX_VALUES)
        return fail_with(r, EM_ERR_MEMORY, "instances: more than %d values (samples of %lld)",
                         EM_REQUEST_MAX_VALUES, (long long)r->numel);
    if (r->n_values + r->numel <= r->cap)
        return true;
    int64_t cap = r->cap ? r->cap : r->numel;
    while (cap < r->n_values + r->numel)
        cap *= 2;
    cap = cap < EM_REQUEST_MAX_VALUES ? cap : EM_REQUEST_MAX_VALUES;
    float *v;
    if (em_request_budget_take_bytes(&r->held, (cap - r->cap) * (int64_t)sizeof *v) != EM_OK)
        return fail_pending(r);
    if (!(v = realloc(r->values, (size_t)cap * sizeof *v)))
        return fail_with(r, EM_ERR_MEMORY, "out of memory");
    r->values = v;
    r->cap = cap;
    return true;
}

/* One sample (its first token t read), named what, after the numbers read so far. */
static bool read_sample(reader *r, em_json_token t, const char *what)
{
    snprintf(r->what, sizeof r->what, "%s", what);
    if (t != EM_JSON_ARRAY)
        return t == EM_JSON_ERROR ? false : fail(r, "%s: expected an array of numbers", what);
    if (!sample_room(r))
        return false;
    int64_t start = r->n_values;
    r->sample_end = start + r->numel;
    r->rank = 0;
    memset(r->shape, 0, sizeof r->shape);
    if (!read_array(r, 0))
        return false;
    if (r->n_values == r->sample_end && shape_matches(r))
        return true;
    char want[160], got[160];
    shape_text(want, sizeof want, r->sample.d, r->sample.ndim);
    shape_text(got, sizeof got, r->shape, r->rank);
    return fail(r, "%s: shape [%s] does not match the model's sample [%s] (or %lld numbers "
                "flat)", what, got, want, (long long)r->numel);
}

/* "instances": an array of samples (its first token t read). */
static bool read_instances(reader *r, em_json_token t, em_predict_request *out)
{
    if (t != EM_JSON_ARRAY)
        return t == EM_JSON_ERROR ? false
                                  : fail(r, "instances: expected a non-empty array of inputs");
    int64_t n = 0;
    while ((t = next(r)) != EM_JSON_ARRAY_END) {
        char what[32];
        snprintf(what, sizeof what, "instances[%lld]", (long long)n);
        if (!read_sample(r, t, what))
            return false;
        n++;
    }
    if (n == 0)
        return fail(r, "instances: expected a non-empty array of inputs");
    out->n_instances = n;
    return true;
}

/* The request's keys, each once. */
enum { KEY_INPUT, KEY_INSTANCES, KEY_PRIORITY, KEY_TIMEOUT, N_KEYS };
static const char *const key_names[N_KEYS] = {"input", "instances", "priority", "timeout_ms"};

/* The value of key k (its first token t read) into out. */
static bool read_value(reader *r, int k, em_json_token t, em_predict_request *out)
{
    if (t == EM_JSON_ERROR)
        return false;
    if (k == KEY_INPUT)
        return t == EM_JSON_ARRAY ? read_sample(r, t, "input")
                                  : fail(r, "input: expected an array of numbers");
    if (k == KEY_INSTANCES)
        return read_instances(r, t, out);
    if (k == KEY_PRIORITY) {
        if (t != EM_JSON_STRING)
            return fail(r, "priority: expected a string: low, normal, high or critical");
        int p = em_priority_parse(r->json.str);
        if (p < 0)
            return fail(r, "priority: '%s' is not low, normal, high or critical", r->json.str);
        out->priority = (em_priority)p;
        return true;
    }
    if (t != EM_JSON_INTEGER && t != EM_JSON_REAL)
        return fail(r, "timeout_ms: expected a number of milliseconds");
    out->timeout_ms = r->json.real;
    return out->timeout_ms > 0 && out->timeout_ms <= 3.6e6
               ? true
               : fail(r, "timeout_ms: %g is not in (0, 3600000]", out->timeout_ms);
}

/* The body: one object of known keys, then nothing. */
static bool read_body(reader *r, em_predict_request *out)
{
    em_json_token t = next(r);
    if (t != EM_JSON_OBJECT)
        return t == EM_JSON_ERROR ? false : fail(r, "the body is not a JSON object");
    bool seen[N_KEYS] = {false};
    while ((t = next(r)) == EM_JSON_KEY) {
        int k = 0;
        while (k < N_KEYS && strcmp(r->json.str, key_names[k]))
            k++;
        if (k == N_KEYS)
            return fail(r, "unknown key '%s' (expected input or instances, priority, "
                        "timeout_ms)", r->json.str);
        if (seen[k]) {
            em_json_reader_fail(&r->json, "duplicate object key");
            return fail_pending(r);
        }
        seen[k] = true;
        if (seen[KEY_INPUT] && seen[KEY_INSTANCES])
            return fail(r, "input and instances: give one of them");
        if (!read_value(r, k, next(r), out))
            return false;
    }
    if (t == EM_JSON_ERROR || next(r) != EM_JSON_END)
        return false;
    return seen[KEY_INPUT] || seen[KEY_INSTANCES] ? true
                                                  : fail(r, "input: missing (or instances)");
}

em_status em_predict_request_parse(const char *body, size_t n, em_shape sample,
                                   em_predict_request *out, char *err, size_t n_err)
{
    const char *fn = "em_predict_request_parse";
    if (!em_present(out, fn, "out") || (n_err > 0 && !em_present(err, fn, "err")))
        return EM_ERR_ARG;
    *out = (em_predict_request){.priority = EM_PRIORITY_NORMAL};
    if (n > 0 && !em_present(body, fn, "body")) {
        snprintf(err, n_err, "%s", em_error());
        return EM_ERR_ARG;
    }
    int64_t numel = em_shape_numel(&sample);
    if (numel < 1 || numel > EM_REQUEST_MAX_VALUES || sample.ndim >= EM_MAX_DIMS) {
        snprintf(err, n_err, "the model's sample has %lld values in %d dims", (long long)numel,
                 sample.ndim);
        return EM_ERR_ARG;
    }
    reader r = {.sample = sample, .numel = numel, .err = err, .n_err = n_err};
    /* a sample nests at most EM_MAX_DIMS deep, inside the body and the instances' array, and
     * one deeper is read to be named */
    em_json_reader_init(&r.json, "predict", "request body", body, n,
                        (em_json_limits){.max_depth = EM_MAX_DIMS + 3,
                                         .max_values = MAX_JSON_VALUES,
                                         .max_string = MAX_STRING});
    if (n > (size_t)EM_REQUEST_MAX_BYTES)
        fail_with(&r, EM_ERR_MEMORY, "a body of %zu bytes is more than a request may be (%lld)",
                  n, (long long)EM_REQUEST_MAX_BYTES);
    else if (em_request_budget_take_bytes(&r.held, (int64_t)n) != EM_OK)
        fail_pending(&r);
    else if (read_body(&r, out)) {
        em_shape shape = sample;
        if (out->n_instances) { /* (n, sample...) */
            shape.ndim = sample.ndim + 1;
            shape.d[0] = out->n_instances;
            memcpy(shape.d + 1, sample.d, sizeof shape.d[0] * (size_t)sample.ndim);
        }
        if (!(out->input = em_from_data(shape, EM_F32, r.values)))
            fail_pending(&r);
    }
    em_json_reader_free(&r.json);
    em_request_budget_give_back(&r.held);
    free(r.values);
    if (r.status != EM_OK) {
        out->n_instances = 0;
        out->priority = EM_PRIORITY_NORMAL;
        out->timeout_ms = 0;
    }
    return r.status;
}

unsigned em_predict_http_status(em_status parsed)
{
    return parsed == EM_OK ? 200 : parsed == EM_ERR_ARG ? 400 : parsed == EM_ERR_MEMORY ? 413
           : parsed == EM_ERR_BUSY ? 503 : 500;
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
    if (!em_array_present(ys, n, "em_predict_batch_response", "ys", "n"))
        return NULL;
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
