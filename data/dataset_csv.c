/* Numeric CSV files: a row per sample, one label column (class index or float target), every
 * other column a feature; parsed whole at open, with errors naming the file, line and column. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

typedef struct {
    em_dataset base;
    int64_t n, n_features;
    float *x;  /* (n, n_features) */
    void *y;   /* (n) i64 or f32 */
} csv_dataset;

static int64_t csv_len(const em_dataset *ds)
{
    return ((const csv_dataset *)ds)->n;
}

static em_status csv_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    (void)epoch;
    const csv_dataset *d = (const csv_dataset *)ds;
    memcpy(x, d->x + i * d->n_features, (size_t)d->n_features * sizeof(float));
    if (d->base.y_dtype == EM_I64)
        *(int64_t *)y = ((const int64_t *)d->y)[i];
    else
        *(float *)y = ((const float *)d->y)[i];
    return EM_OK;
}

static void csv_close(em_dataset *ds)
{
    csv_dataset *d = (csv_dataset *)ds;
    free(d->x);
    free(d->y);
    free(d);
}

static const em_dataset_vtable csv_vtable = {csv_len, csv_get, csv_close};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        em_set_error(EM_ERR_IO, "em_dataset_csv: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        char *grown = realloc(buf, cap + 1);
        if (!grown)
            free(buf);
        buf = grown;
    }
    bool failed = buf && ferror(f);
    fclose(f);
    if (!buf || failed) {
        free(buf);
        em_set_error(buf ? EM_ERR_IO : EM_ERR_MEMORY, "em_dataset_csv: cannot read '%s'", path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Split line (NUL-terminated, modified in place) at delim; trims blanks and one pair of quotes. */
static int split_fields(char *line, char delim, char **fields, int max)
{
    int n = 0;
    for (char *p = line;;) {
        char *end = strchr(p, delim);
        if (end)
            *end = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            p[--len] = '\0';
        if (len >= 2 && p[0] == '"' && p[len - 1] == '"') {
            p[len - 1] = '\0';
            p++;
        }
        if (n < max)
            fields[n] = p;
        n++;
        if (!end)
            return n;
        p = end + 1;
    }
}

static bool parse_number(const char *s, double *v)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *end == '\0' && errno != ERANGE;
}

typedef struct {
    const char *path;
    int line;
} csv_where;

/* Parse one data row into x and y; false with an error set. */
static bool parse_row(char **fields, int n_fields, int label_col, bool regression, csv_where w,
                      float *x, void *y)
{
    int k = 0;
    for (int c = 0; c < n_fields; c++) {
        double v;
        if (!parse_number(fields[c], &v)) {
            em_set_error(EM_ERR_IO, "em_dataset_csv: '%s' line %d, column %d: '%s' is not a number",
                         w.path, w.line, c + 1, fields[c]);
            return false;
        }
        if (c != label_col) {
            x[k++] = (float)v;
        } else if (regression) {
            *(float *)y = (float)v;
        } else if (v < 0 || v != floor(v) || v > 9.0e15) {
            em_set_error(EM_ERR_IO, "em_dataset_csv: '%s' line %d, column %d: class label '%s' "
                         "is not a non-negative integer", w.path, w.line, c + 1, fields[c]);
            return false;
        } else {
            *(int64_t *)y = (int64_t)v;
        }
    }
    return true;
}

static bool row_is_numeric(char **fields, int n)
{
    for (int c = 0; c < n; c++) {
        double v;
        if (!parse_number(fields[c], &v))
            return false;
    }
    return true;
}

em_dataset *em_dataset_csv(const char *path, em_csv_opts opts)
{
    if (!path) {
        em_set_error(EM_ERR_ARG, "em_dataset_csv: NULL path");
        return NULL;
    }
    char delim = opts.delimiter ? opts.delimiter : ',';
    size_t len;
    char *text = read_file(path, &len);
    if (!text)
        return NULL;
    int64_t max_rows = 1;
    for (size_t i = 0; i < len; i++)
        max_rows += text[i] == '\n';

    csv_dataset *d = calloc(1, sizeof *d);
    char **fields = NULL;
    int n_cols = 0, label_col = 0;
    bool first = true;
    csv_where w = {path, 0};
    if (!d)
        goto oom;
    d->base.vt = &csv_vtable;
    for (char *line = text, *next; line && line < text + len; line = next) {
        w.line++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t ll = strlen(line);
        if (ll > 0 && line[ll - 1] == '\r')
            line[--ll] = '\0';
        if (strspn(line, " \t") == ll)
            continue;
        if (first) {
            int n = 1;
            for (const char *c = line; *c; c++)
                n += *c == delim;
            fields = malloc((size_t)n * sizeof *fields);
            if (!fields)
                goto oom;
            split_fields(line, delim, fields, n);
            n_cols = n;
            label_col = opts.label_col < 0 ? n + opts.label_col : opts.label_col;
            if (n < 2 || label_col < 0 || label_col >= n) {
                em_set_error(EM_ERR_ARG, "em_dataset_csv: '%s' has %d columns; label column %d "
                             "and at least one feature needed", path, n, opts.label_col);
                goto fail;
            }
            d->n_features = n - 1;
            d->x = malloc((size_t)max_rows * (size_t)d->n_features * sizeof(float));
            d->y = malloc((size_t)max_rows * 8);
            if (!d->x || !d->y)
                goto oom;
            first = false;
            bool header = opts.header == EM_CSV_HEADER_YES ||
                          (opts.header == EM_CSV_HEADER_AUTO && !row_is_numeric(fields, n));
            if (header)
                continue;
        } else {
            int n = split_fields(line, delim, fields, n_cols);
            if (n != n_cols) {
                em_set_error(EM_ERR_IO, "em_dataset_csv: '%s' line %d: %d fields, expected %d",
                             path, w.line, n, n_cols);
                goto fail;
            }
        }
        void *y = opts.regression ? (void *)((float *)d->y + d->n)
                                  : (void *)((int64_t *)d->y + d->n);
        if (!parse_row(fields, n_cols, label_col, opts.regression, w,
                       d->x + d->n * d->n_features, y))
            goto fail;
        if (!opts.regression && ((int64_t *)d->y)[d->n] + 1 > d->base.n_classes)
            d->base.n_classes = ((int64_t *)d->y)[d->n] + 1;
        d->n++;
    }
    if (first) {
        em_set_error(EM_ERR_IO, "em_dataset_csv: '%s' is empty", path);
        goto fail;
    }
    free(fields);
    free(text);
    d->base.x_shape = EM_SHAPE(d->n_features);
    d->base.y_shape = EM_SCALAR_SHAPE;
    d->base.y_dtype = opts.regression ? EM_F32 : EM_I64;
    return &d->base;
oom:
    em_set_error(EM_ERR_MEMORY, "em_dataset_csv: out of memory reading '%s'", path);
fail:
    free(fields);
    free(text);
    if (d)
        csv_close(&d->base);
    return NULL;
}
