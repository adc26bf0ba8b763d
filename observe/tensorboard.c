/* TensorBoard's event file writer. Event {wall_time 1: double, step 2: int64, file_version 3:
 * string, summary 5: Summary, session_log 7: SessionLog}; SessionLog {status 1: enum, START 1};
 * Summary {value 1: repeated Value}; Value {tag 1: string,
 * simple_value 2: float, histo 5: HistogramProto}; HistogramProto {min 1, max 2, num 3, sum 4,
 * sum_squares 5: double, bucket_limit 6, bucket 7: packed repeated double}. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/protobuf_internal.h"
#include "observe/tensorboard.h"
#include "io/tfrecord_internal.h"
#include "io/utf8.h"

#define DEFAULT_BINS 30

struct em_tb_writer {
    FILE *f;
    char *path;
    int64_t records;
};

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mkdir -p: every missing directory along path. */
static em_status make_dirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return em_set_error(EM_ERR_MEMORY, "em_tb_writer_new: out of memory");
    em_status st = EM_OK;
    for (char *c = p + 1; st == EM_OK; c++) {
        bool end = *c == '\0';
        if (*c != '/' && !end)
            continue;
        *c = '\0';
        struct stat sb;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            st = em_set_error(EM_ERR_IO, "em_tb_writer_new: cannot create log directory '%s': %s", p,
                              strerror(errno));
        else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            st = em_set_error(EM_ERR_IO, "em_tb_writer_new: log directory '%s' is not a directory", p);
        if (end)
            break;
        *c = '/';
    }
    free(p);
    return st;
}

em_status em_tb_writer_check(const char *logdir)
{
    if (!logdir || !*logdir)
        return em_set_error(EM_ERR_ARG, "em_tb_writer_check: no log directory given");
    char *p = strdup(logdir);
    if (!p)
        return em_set_error(EM_ERR_MEMORY, "em_tb_writer_check: out of memory");
    struct stat sb;
    while (stat(p, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR) && strcmp(p, ".")
           && strcmp(p, "/")) { /* up to what exists */
        char *slash = strrchr(p, '/');
        if (!slash)
            strcpy(p, ".");
        else
            slash[slash == p] = '\0'; /* "/x" leaves "/" */
    }
    em_status st = EM_OK;
    if (stat(p, &sb) != 0)
        st = em_set_error(EM_ERR_IO, "em_tb_writer_check: cannot use log directory '%s': %s", p,
                          strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        st = em_set_error(EM_ERR_IO, "em_tb_writer_check: log directory '%s': '%s' is not a directory",
                          logdir, p);
    else if (access(p, W_OK | X_OK) != 0)
        st = em_set_error(EM_ERR_IO, "em_tb_writer_check: log directory '%s': cannot write into '%s': "
                          "%s", logdir, p, strerror(errno));
    free(p);
    return st;
}

/* Writes an Event {wall_time, step, <the fields in body>} as one record; body is freed. */
static em_status write_event(em_tb_writer *w, int64_t step, em_pb *body, const char *fn)
{
    em_pb ev = {0};
    em_pb_double(&ev, 1, wall_time());
    em_pb_int(&ev, 2, step);
    em_pb_append(&ev, body);
    em_status st = ev.failed ? em_set_error(EM_ERR_MEMORY, "%s: out of memory encoding an event",
                                            fn)
                             : em_tfrecord_write(w->f, ev.data, ev.len, fn, w->path);
    em_pb_free(&ev);
    if (st == EM_OK)
        w->records++;
    return st;
}

/* Writes an event at step whose summary holds one value: tag and the fields in value (freed). */
static em_status write_value(em_tb_writer *w, int64_t step, const char *tag, em_pb *value,
                             const char *fn)
{
    em_pb v = {0}, summary = {0}, body = {0};
    em_pb_string(&v, 1, tag);
    em_pb_append(&v, value);
    em_pb_message(&summary, 1, &v);
    em_pb_message(&body, 5, &summary);
    return write_event(w, step, &body, fn);
}

/* An event at step holding file_version "brain.Event:2" (the version readers purge by), with
 * fn naming it in errors */
static em_status write_version(em_tb_writer *w, int64_t step, const char *fn)
{
    em_pb body = {0};
    em_pb_string(&body, 3, "brain.Event:2");
    return write_event(w, step, &body, fn);
}

em_tb_writer *em_tb_writer_new(const char *logdir)
{
    static atomic_int opened;
    if (!logdir || !*logdir) {
        em_set_error(EM_ERR_ARG, "em_tb_writer_new: no log directory given");
        return NULL;
    }
    if (make_dirs(logdir) != EM_OK)
        return NULL;
    em_tb_writer *w = calloc(1, sizeof *w);
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    size_t n = strlen(logdir) + sizeof host + 96;
    if (!w || !(w->path = malloc(n))) {
        free(w);
        em_set_error(EM_ERR_MEMORY, "em_tb_writer_new: out of memory");
        return NULL;
    }
    snprintf(w->path, n, "%s/events.out.tfevents.%lld.%s.%d.%d", logdir,
             (long long)time(NULL), host, (int)getpid(), atomic_fetch_add(&opened, 1));
    w->f = fopen(w->path, "wbx");
    if (!w->f) {
        em_set_error(EM_ERR_IO, "em_tb_writer_new: cannot create '%s': %s", w->path, strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    if (write_version(w, 0, "em_tb_writer_new") != EM_OK) {
        em_tb_writer_free(w);
        return NULL;
    }
    return w;
}

em_status em_tb_writer_purge(em_tb_writer *w, int64_t step)
{
    const char *fn = "em_tb_writer_purge";
    if (!w || step < 0)
        return em_set_error(EM_ERR_ARG, "%s: %s", fn, w ? "negative step" : "NULL writer");
    em_status st = write_version(w, step, fn);
    em_pb log = {0}, body = {0};
    em_pb_int(&log, 1, 1); /* SessionLog.START */
    em_pb_message(&body, 7, &log);
    return st == EM_OK ? write_event(w, step, &body, fn) : st;
}

static bool check(const em_tb_writer *w, const char *tag, const char *fn)
{
    if (!w || !tag || !*tag) {
        em_set_error(EM_ERR_ARG, "%s: %s", fn, w ? "empty tag" : "NULL writer");
        return false;
    }
    /* TensorBoard's reader stops at the first record whose tag is not UTF-8 */
    return em_utf8_check(fn, "tag", tag) == EM_OK;
}

em_status em_tb_writer_add_scalar(em_tb_writer *w, const char *tag, double value, int64_t step)
{
    if (!check(w, tag, "em_tb_writer_add_scalar"))
        return EM_ERR_ARG;
    em_pb v = {0};
    em_pb_float(&v, 2, (float)value);
    return write_value(w, step, tag, &v, "em_tb_writer_add_scalar");
}

/* The histogram of x (n finite values) with bins equal-width buckets, as HistogramProto. */
static void histogram(const double *x, int64_t n, int bins, em_pb *out)
{
    double lo = x[0], hi = x[0], sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sum += x[i];
        sum_sq += x[i] * x[i];
    }
    if (hi == lo)
        bins = 1;
    double *limit = calloc((size_t)bins, sizeof *limit), *count = calloc((size_t)bins,
                                                                          sizeof *count);
    if (!limit || !count) {
        out->failed = true;
    } else {
        double width = (hi - lo) / bins;
        for (int b = 0; b < bins; b++)
            limit[b] = b == bins - 1 ? hi : lo + (b + 1) * width;
        for (int64_t i = 0; i < n; i++) {
            int64_t b = width > 0 ? (int64_t)((x[i] - lo) / width) : 0;
            count[b < bins ? b : bins - 1]++;
        }
        em_pb_double(out, 1, lo);
        em_pb_double(out, 2, hi);
        em_pb_double(out, 3, (double)n);
        em_pb_double(out, 4, sum);
        em_pb_double(out, 5, sum_sq);
        em_pb_packed_doubles(out, 6, limit, (size_t)bins);
        em_pb_packed_doubles(out, 7, count, (size_t)bins);
    }
    free(limit);
    free(count);
}

em_status em_tb_writer_add_histogram(em_tb_writer *w, const char *tag, const em_tensor *t,
                              int64_t step, int bins)
{
    const char *fn = "em_tb_writer_add_histogram";
    if (!check(w, tag, fn))
        return EM_ERR_ARG;
    if (!t)
        return em_has_error() ? em_error_status()
                              : em_set_error(EM_ERR_ARG, "%s: '%s': NULL tensor", fn, tag);
    if (bins < 0 || !em_dtype_is_float(t->dtype) || em_numel(t) == 0) {
        char b[128];
        return em_set_error(EM_ERR_ARG, "%s: '%s': expected a non-empty float tensor and bins "
                            ">= 0, got %s %s and %d bins", fn, tag, em_dtype_name(t->dtype),
                            em_shape_str(t, b, sizeof b), bins);
    }
    int64_t n = em_numel(t), bad = 0;
    double *x = malloc((size_t)n * sizeof *x);
    if (!x)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory for %lld values", fn, (long long)n);
    em_status st = (em_status)em_copy_to_host(t, EM_F64, x);
    for (int64_t i = 0; st == EM_OK && i < n; i++)
        bad += !isfinite(x[i]);
    if (st == EM_OK && bad)
        st = em_set_error(EM_ERR_NUMERIC, "%s: '%s' holds %lld NaN or Inf values of %lld", fn,
                          tag, (long long)bad, (long long)n);
    if (st == EM_OK) {
        em_pb histo = {0}, v = {0};
        histogram(x, n, bins ? bins : DEFAULT_BINS, &histo);
        em_pb_message(&v, 5, &histo);
        st = write_value(w, step, tag, &v, fn);
    }
    free(x);
    return st;
}

const char *em_tb_writer_path(const em_tb_writer *w)
{
    return w ? w->path : NULL;
}

int64_t em_tb_writer_records(const em_tb_writer *w)
{
    return w ? w->records : 0;
}

em_status em_tb_writer_free(em_tb_writer *w)
{
    if (!w)
        return EM_OK;
    em_status st = fclose(w->f) == 0 ? EM_OK
                                     : em_set_error(EM_ERR_IO, "em_tb_writer_free: cannot close '%s': %s",
                                                    w->path, strerror(errno));
    free(w->path);
    free(w);
    return st;
}
