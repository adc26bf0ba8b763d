/* Windows over a time series, for sequence models: sample i is `length` steps of every column
 * from step i * stride on, its target the next `horizon` steps of the target columns. Over a
 * tensor, or over the columns of a CSV file (read by em_csv_dataset). */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

typedef struct {
    em_dataset base;
    float *series;   /* (n, cols) owned: every column of every step */
    int *targets;    /* (n_targets) owned: the columns forecast */
    int64_t n, cols, n_targets, length, horizon, stride, count;
} time_windows;

static int64_t time_windows_len(const em_dataset *ds)
{
    return ((const time_windows *)ds)->count;
}

static em_status time_windows_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x,
                                  void *y)
{
    (void)epoch;
    const time_windows *w = (const time_windows *)ds;
    const float *start = w->series + i * w->stride * w->cols; // (length + horizon, cols)
    memcpy(x, start, (size_t)(w->length * w->cols) * sizeof(float)); // x: (length, cols)
    float *out = y;                                                    // (horizon, n_targets)
    const float *after = start + w->length * w->cols;
    for (int64_t h = 0; h < w->horizon; h++)
        for (int64_t k = 0; k < w->n_targets; k++)
            out[h * w->n_targets + k] = after[h * w->cols + w->targets[k]];
    return EM_OK;
}

static void time_windows_free(em_dataset *ds)
{
    time_windows *w = (time_windows *)ds;
    free(w->series);
    free(w->targets);
    free(w);
}

static const em_dataset_vtable time_windows_vtable = {time_windows_len, time_windows_get,
                                                      time_windows_free};

/* The window sizes and target columns checked against a series of n steps of cols columns. */
static em_status check_windows(const char *fn, int64_t n, int64_t cols, em_time_windows_opts *o)
{
    o->horizon = o->horizon ? o->horizon : 1;
    o->stride = o->stride ? o->stride : 1;
    if (o->length < 1 || o->horizon < 1 || o->stride < 1 || o->n_targets < 0
        || (o->n_targets && !o->targets))
        return em_set_error(EM_ERR_ARG, "%s: need length >= 1, horizon and stride >= 0 and "
                            "n_targets >= 0 (with targets): length %lld, horizon %lld, stride "
                            "%lld, n_targets %d", fn, (long long)o->length,
                            (long long)o->horizon, (long long)o->stride, o->n_targets);
    if (o->length > n || o->horizon > n - o->length)
        return em_set_error(EM_ERR_ARG, "%s: a series of %lld steps holds no window of %lld "
                            "steps and a horizon of %lld", fn, (long long)n,
                            (long long)o->length, (long long)o->horizon);
    for (int k = 0; k < o->n_targets; k++)
        if (o->targets[k] < -cols || o->targets[k] >= cols)
            return em_set_error(EM_ERR_ARG, "%s: target column %d is outside the series' %lld "
                                "columns", fn, o->targets[k], (long long)cols);
    return EM_OK;
}

/* The dataset over series (n, cols), which it takes over (freed on failure too). */
static em_dataset *windows_new(const char *fn, float *series, int64_t n, int64_t cols,
                               em_time_windows_opts o)
{
    time_windows *w = calloc(1, sizeof *w);
    int64_t n_targets = o.n_targets ? o.n_targets : cols;
    int *targets = malloc((size_t)n_targets * sizeof *targets);
    if (!w || !targets) {
        free(series);
        free(w);
        free(targets);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    for (int64_t k = 0; k < n_targets; k++) {
        int c = o.n_targets ? o.targets[k] : (int)k;
        targets[k] = c < 0 ? (int)cols + c : c;
    }
    *w = (time_windows){.series = series, .targets = targets, .n = n, .cols = cols,
                        .n_targets = n_targets, .length = o.length, .horizon = o.horizon,
                        .stride = o.stride,
                        .count = (n - o.length - o.horizon) / o.stride + 1};
    w->base = (em_dataset){.vt = &time_windows_vtable, .x_shape = EM_SHAPE(o.length, cols),
                           .x_dtype = EM_F32, .y_shape = EM_SHAPE(o.horizon, n_targets),
                           .y_dtype = EM_F32};
    return &w->base;
}

em_dataset *em_time_windows_dataset(const em_tensor *series, em_time_windows_opts opts)
{
    const char *fn = "em_time_windows_dataset";
    if (!series) {
        if (!em_has_error())
            em_set_error(EM_ERR_ARG, "%s: series is NULL", fn);
        return NULL;
    }
    if (series->ndim < 1 || series->ndim > 2) {
        char s[64];
        em_set_error(EM_ERR_ARG, "%s: the series must be (steps) or (steps, columns), not %s",
                     fn, em_shape_str(series, s, sizeof s));
        return NULL;
    }
    int64_t n = series->shape[0], cols = series->ndim == 2 ? series->shape[1] : 1;
    if (check_windows(fn, n, cols, &opts) != EM_OK)
        return NULL;
    float *copy = em_copy_to_host_new(series, EM_F32);
    if (!copy) {
        em_error_prefix(fn);
        return NULL;
    }
    return windows_new(fn, copy, n, cols, opts);
}

/* Every row of a CSV dataset as one step: its features, then its targets. */
static float *csv_series(const em_dataset *csv, int64_t n, int64_t n_features, int64_t n_targets)
{
    int64_t cols = n_features + n_targets;
    float *series = malloc((size_t)(n * cols) * sizeof *series + 1);
    if (!series) {
        em_set_error(EM_ERR_MEMORY, "em_csv_time_windows_dataset: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (em_dataset_get(csv, i, series + i * cols, series + i * cols + n_features) != EM_OK) {
            free(series);
            return NULL;
        }
    return series;
}

em_dataset *em_csv_time_windows_dataset(const char *path, em_csv_opts csv,
                                        em_time_windows_opts opts)
{
    const char *fn = "em_csv_time_windows_dataset";
    if (opts.targets || opts.n_targets) {
        em_set_error(EM_ERR_ARG, "%s: the CSV options choose the target columns (label, "
                     "n_targets), not targets", fn);
        return NULL;
    }
    csv.regression = true;
    em_dataset *rows = em_csv_dataset(path, csv);
    if (!rows)
        return NULL;
    int64_t n = em_dataset_len(rows), n_features = em_shape_numel(&rows->x_shape);
    int64_t n_targets = em_shape_numel(&rows->y_shape);
    int *targets = malloc((size_t)n_targets * sizeof *targets);
    for (int64_t k = 0; targets && k < n_targets; k++)
        targets[k] = (int)(n_features + k);
    opts.targets = targets;
    opts.n_targets = (int)n_targets;
    em_dataset *w = NULL;
    if (!targets)
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    else if (check_windows(fn, n, n_features + n_targets, &opts) == EM_OK) {
        float *series = csv_series(rows, n, n_features, n_targets);
        w = series ? windows_new(fn, series, n, n_features + n_targets, opts) : NULL;
    }
    free(targets);
    em_dataset_free(rows);
    return w;
}
