/* Predict requests: a strict recursive-descent reader of the one JSON object the server takes
 * (bounded depth, bounded value count, numbers by the JSON grammar, no NaN or infinity), and
 * the response writers. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"

#define MAX_DEPTH EM_MAX_DIMS
#define MAX_TOKEN 64

typedef struct {
    const char *start, *p, *end;
    char *err;
    size_t n_err;
    bool failed;
    float *values; /* (cap) the input's numbers, flattened */
    int64_t n_values, cap;
    int64_t shape[MAX_DEPTH]; /* the nesting's sizes, fixed by the first array at each depth */
    int depth_seen;           /* how deep the first leaf was: the input's rank */
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

static void skip_space(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static bool expect(reader *r, char c)
{
    skip_space(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return fail(r, "expected '%c' at byte %td", c, r->p - r->start);
}

/* A JSON string (short: keys and words) into out; escapes other than \uXXXX are decoded. */
static bool read_string(reader *r, char *out, size_t n)
{
    if (!expect(r, '"'))
        return false;
    size_t k = 0;
    while (r->p < r->end && *r->p != '"') {
        char c = *r->p++;
        if ((unsigned char)c < 0x20)
            return fail(r, "control character in a string");
        if (c == '\\') {
            if (r->p >= r->end)
                break;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *hit = strchr(from, *r->p);
            if (!hit || !*r->p)
                return fail(r, "unsupported escape '\\%c' in a string", *r->p);
            c = to[hit - from];
            r->p++;
        }
        if (k + 1 >= n)
            return fail(r, "string longer than %zu bytes", n - 1);
        out[k++] = c;
    }
    if (r->p >= r->end)
        return fail(r, "unterminated string");
    r->p++;
    out[k] = '\0';
    return true;
}

/* A JSON number (-?int frac? exp?), finite, into *v. */
static bool read_number(reader *r, double *v)
{
    skip_space(r);
    char tok[MAX_TOKEN];
    size_t k = 0;
    const char *s = r->p;
    while (s < r->end && (isdigit((unsigned char)*s) || strchr("+-.eE", *s)) && *s) {
        if (k + 1 >= sizeof tok)
            return fail(r, "number longer than %d characters", MAX_TOKEN - 1);
        tok[k++] = *s++;
    }
    tok[k] = '\0';
    /* the grammar: optional minus, 0 or a digit run without leading zero, fraction, exponent */
    const char *q = tok;
    q += *q == '-';
    bool ok = isdigit((unsigned char)*q);
    if (ok && *q == '0')
        q++;
    else
        while (isdigit((unsigned char)*q))
            q++;
    if (ok && *q == '.') {
        q++;
        ok = isdigit((unsigned char)*q);
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (ok && (*q == 'e' || *q == 'E')) {
        q++;
        q += *q == '+' || *q == '-';
        ok = isdigit((unsigned char)*q);
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (!ok || *q || k == 0)
        return fail(r, "'%s' is not a JSON number", tok);
    *v = strtod(tok, NULL);
    if (!isfinite(*v) || fabs(*v) > 3.4e38)
        return fail(r, "number %s is out of the f32 range", tok);
    r->p = s;
    return true;
}

/* A nested array of numbers at depth d (0 for the outermost); rectangular. */
static bool read_array(reader *r, int d)
{
    if (d >= MAX_DEPTH)
        return fail(r, "input: nested deeper than %d", MAX_DEPTH);
    if (!expect(r, '['))
        return false;
    int64_t count = 0;
    skip_space(r);
    bool empty = r->p < r->end && *r->p == ']';
    while (!empty && !r->failed) {
        skip_space(r);
        if (r->p < r->end && *r->p == '[') {
            if (r->depth_seen && r->depth_seen <= d + 1)
                return fail(r, "input: ragged nesting at depth %d", d + 1);
            if (!read_array(r, d + 1))
                return false;
        } else {
            double v;
            if (r->depth_seen == 0)
                r->depth_seen = d + 1;
            if (r->depth_seen != d + 1)
                return fail(r, "input: a number where an array was expected (depth %d)", d + 1);
            if (!read_number(r, &v))
                return false;
            if (r->n_values >= r->cap)
                return fail(r, "input: more than %lld numbers", (long long)r->cap);
            r->values[r->n_values++] = (float)v;
        }
        count++;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        break;
    }
    if (!expect(r, ']'))
        return false;
    if (r->shape[d] == 0)
        r->shape[d] = count;
    if (r->shape[d] != count || count == 0)
        return fail(r, "input: %s array at depth %d (%lld entries, expected %lld)",
                    count ? "ragged" : "empty", d + 1, (long long)count, (long long)r->shape[d]);
    return true;
}

static bool shape_matches(const reader *r, em_shape s, int64_t numel)
{
    if (r->depth_seen == 1 && r->n_values == numel)
        return true; /* flat */
    if (r->depth_seen != s.ndim)
        return false;
    for (int i = 0; i < s.ndim; i++)
        if (r->shape[i] != s.d[i])
            return false;
    return true;
}

em_status em_predict_request_parse(const char *body, size_t n, em_shape sample,
                                   em_predict_request *out, char *err, size_t n_err)
{
    int64_t numel = 1;
    for (int i = 0; i < sample.ndim; i++)
        numel *= sample.d[i];
    reader r = {.start = body, .p = body, .end = body + n, .err = err, .n_err = n_err, .cap = numel};
    *out = (em_predict_request){.priority = EM_PRIORITY_NORMAL};
    if (numel < 1 || numel > EM_REQUEST_MAX_VALUES) {
        snprintf(err, n_err, "the model's sample has %lld values", (long long)numel);
        return EM_ERR_ARG;
    }
    r.values = malloc(sizeof *r.values * (size_t)numel);
    if (!r.values) {
        snprintf(err, n_err, "out of memory");
        return EM_ERR_MEMORY;
    }
    bool have_input = false, more = true;
    if (expect(&r, '{')) {
        skip_space(&r);
        if (r.p < r.end && *r.p == '}')
            more = false;
    }
    for (int keys = 0; more && !r.failed; keys++) {
        char key[MAX_TOKEN], word[MAX_TOKEN];
        double v;
        if (!read_string(&r, key, sizeof key) || !expect(&r, ':'))
            break;
        if (!strcmp(key, "input") && !have_input) {
            have_input = read_array(&r, 0);
        } else if (!strcmp(key, "priority") && read_string(&r, word, sizeof word)) {
            int p = em_priority_parse(word);
            if (p < 0)
                fail(&r, "priority: '%s' is not low, normal, high or critical", word);
            out->priority = p < 0 ? EM_PRIORITY_NORMAL : (em_priority)p;
        } else if (!strcmp(key, "timeout_ms") && read_number(&r, &v)) {
            if (v <= 0 || v > 3.6e6)
                fail(&r, "timeout_ms: %g is not in (0, 3600000]", v);
            out->timeout_ms = v;
        } else if (!r.failed) {
            fail(&r, "unknown or repeated key '%s' (expected input, priority, timeout_ms)", key);
        }
        skip_space(&r);
        if (r.p < r.end && *r.p == ',') {
            r.p++;
            continue;
        }
        more = false;
    }
    if (!r.failed && expect(&r, '}')) {
        skip_space(&r);
        if (r.p != r.end)
            fail(&r, "trailing bytes after the JSON object");
    }
    if (!r.failed && !have_input)
        fail(&r, "input: missing");
    if (!r.failed && !shape_matches(&r, sample, numel)) {
        char want[128] = "", got[128] = "";
        for (int i = 0; i < sample.ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
                     (long long)sample.d[i]);
        for (int i = 0; i < r.depth_seen; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)r.shape[i]);
        fail(&r, "input: shape [%s] does not match the model's sample [%s] (or %lld numbers "
             "flat)", got, want, (long long)numel);
    }
    if (!r.failed) {
        out->input = em_from_data(sample, EM_F32, r.values);
        if (!out->input)
            fail(&r, "%s", em_error());
    }
    free(r.values);
    return r.failed ? EM_ERR_ARG : EM_OK;
}

/* A growing string for the writers; NULL data after a failed allocation. */
typedef struct {
    char *data;
    size_t len, cap;
} strbuf;

static void put(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(strbuf *b, const char *fmt, ...)
{
    if (!b->data && b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            free(b->data);
            *b = (strbuf){.cap = 1};
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *em_predict_response(const em_tensor *y)
{
    int64_t n = em_numel(y);
    float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v || em_copy_to_host(y, EM_F32, v) != EM_OK) {
        free(v);
        return NULL;
    }
    strbuf b = {0};
    put(&b, "{\"output\":[");
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        put(&b, "%s%.9g", i ? "," : "", v[i]);
        best = v[i] > v[best] ? i : best;
    }
    put(&b, "],\"argmax\":%lld}", (long long)best);
    free(v);
    return b.data;
}

char *em_engine_stats_json(const em_engine_stats *s)
{
    strbuf b = {0};
    put(&b, "{\"submitted\":%lld,\"completed\":%lld,\"failed\":%lld,\"cancelled\":%lld,"
            "\"rejected\":%lld,\"cache_answered\":%lld,\"uptime_s\":%.3f,\"throughput\":%.1f,"
            "\"p50_ms\":%.3f,\"p95_ms\":%.3f,\"p99_ms\":%.3f,\"p99_ms_by_priority\":{",
        (long long)s->submitted, (long long)s->completed, (long long)s->failed,
        (long long)s->cancelled, (long long)s->rejected, (long long)s->cache_answered,
        s->uptime_s, s->throughput, s->p50_ms, s->p95_ms, s->p99_ms);
    for (int p = 0; p < EM_PRIORITY_COUNT; p++)
        put(&b, "%s\"%s\":%.3f", p ? "," : "", em_priority_name((em_priority)p),
            s->p99_ms_by_priority[p]);
    put(&b, "},\"queue_depth\":%lld,\"max_queue_depth\":%lld,\"batch_limit\":%d,\"batches\":%lld,"
            "\"batch_hist\":{",
        (long long)s->queue_depth, (long long)s->max_queue_depth, s->batch_limit,
        (long long)s->batches);
    bool first = true;
    for (int i = 1; i <= EM_ENGINE_MAX_BATCH; i++)
        if (s->batch_hist[i]) {
            put(&b, "%s\"%d\":%lld", first ? "" : ",", i, (long long)s->batch_hist[i]);
            first = false;
        }
    put(&b, "},\"cache\":{\"entries\":%lld,\"bytes\":%lld,\"hits\":%lld,\"misses\":%lld,"
            "\"evictions\":%lld}}",
        (long long)s->cache.entries, (long long)s->cache.bytes, (long long)s->cache.hits,
        (long long)s->cache.misses, (long long)s->cache.evictions);
    return b.data;
}
