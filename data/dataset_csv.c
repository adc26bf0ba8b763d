/* CSV files: a row per sample, chosen feature columns and target columns (class indices, class
 * names mapped to indices, or regression targets); parsed whole at open, with errors naming the
 * file, line and column. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data/data.h"
#include "io/regular_file.h"

typedef struct {
    em_dataset base;
    int64_t n, n_features, n_targets;
    float *x;       /* (n, n_features) */
    void *y;        /* (n, n_targets) i64 or f32 */
    char **classes; /* (n_classes) with class names, else NULL */
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
    size_t y_bytes = (size_t)d->n_targets * em_dtype_size(d->base.y_dtype);
    memcpy(y, (const char *)d->y + (size_t)i * y_bytes, y_bytes);
    return EM_OK;
}

static void csv_free(em_dataset *ds)
{
    csv_dataset *d = (csv_dataset *)ds;
    for (int64_t c = 0; d->classes && c < d->base.n_classes; c++)
        free(d->classes[c]);
    free(d->classes);
    free(d->x);
    free(d->y);
    free(d);
}

static const em_dataset_vtable csv_vtable = {csv_len, csv_get, csv_free};

const char *const *em_csv_classes(const em_dataset *ds)
{
    if (!ds || ds->vt != &csv_vtable)
        return NULL;
    return (const char *const *)((const csv_dataset *)ds)->classes;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = em_fopen_regular("em_csv_dataset", path, NULL);
    if (!f)
        return NULL;
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
        em_set_error(buf ? EM_ERR_IO : EM_ERR_MEMORY, "em_csv_dataset: cannot read '%s'", path);
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

static bool is_missing(const char *s)
{
    static const char *const marks[] = {"", "NA", "N/A", "NaN", "null", "?"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (!strcasecmp(s, marks[i]))
            return true;
    return false;
}

/* The file as it is being read: its rows, header and chosen columns. */
typedef struct {
    const char *path;
    em_csv_opts o;
    char delim;
    int n_cols;
    char **header;  /* (n_cols) names, or NULL without a header */
    int label;      /* the first target column */
    int n_targets;
    int *features;  /* (n_features) column numbers */
    int n_features;
} csv_layout;

/* "column 3 ('age')" or "column 3" for column c (from 0) */
static const char *column_name(const csv_layout *l, int c, char *buf, size_t n)
{
    if (l->header)
        snprintf(buf, n, "column %d ('%s')", c + 1, l->header[c]);
    else
        snprintf(buf, n, "column %d", c + 1);
    return buf;
}

/* The column a name or number stands for; -1 with an error when there is none. */
static int resolve_column(const csv_layout *l, const char *spec, const char *what)
{
    for (int c = 0; l->header && c < l->n_cols; c++)
        if (!strcmp(l->header[c], spec))
            return c;
    double v;
    if (parse_number(spec, &v) && v == floor(v) && fabs(v) <= l->n_cols) {
        int c = v < 0 ? l->n_cols + (int)v : (int)v;
        if (c >= 0 && c < l->n_cols)
            return c;
    }
    em_set_error(EM_ERR_ARG, "em_csv_dataset: '%s' has no %s column '%s' (%d columns%s)",
                 l->path, what, spec, l->n_cols, l->header ? ", named in its header" : "");
    return -1;
}

/* The targets and features of l from its options; false with an error set. */
static bool choose_columns(csv_layout *l)
{
    const em_csv_opts *o = &l->o;
    l->label = o->label ? resolve_column(l, o->label, "label")
                        : o->label_col < 0 ? l->n_cols + o->label_col : o->label_col;
    l->n_targets = o->n_targets > 0 ? o->n_targets : 1;
    if (l->label < 0 && o->label)
        return false;
    if (l->n_targets > 1 && !o->regression) {
        em_set_error(EM_ERR_ARG, "em_csv_dataset: %d target columns need regression",
                     l->n_targets);
        return false;
    }
    if (l->label < 0 || l->label + l->n_targets > l->n_cols) {
        em_set_error(EM_ERR_ARG, "em_csv_dataset: '%s' has %d columns; no room for %d target "
                     "column(s) from column %d", l->path, l->n_cols, l->n_targets,
                     o->label ? l->label : o->label_col);
        return false;
    }
    bool *used = calloc((size_t)l->n_cols, 1);
    l->features = malloc((size_t)l->n_cols * sizeof *l->features);
    if (!used || !l->features) {
        free(used);
        em_set_error(EM_ERR_MEMORY, "em_csv_dataset: out of memory");
        return false;
    }
    for (int t = 0; t < l->n_targets; t++)
        used[l->label + t] = true;
    bool ok = true;
    if (o->features) {
        for (int k = 0; ok && k < o->n_features; k++) {
            int c = resolve_column(l, o->features[k] ? o->features[k] : "", "feature");
            char name[160];
            if (c >= 0 && used[c])
                em_set_error(EM_ERR_ARG, "em_csv_dataset: '%s': %s is chosen twice or is a "
                             "target", l->path, column_name(l, c, name, sizeof name));
            ok = c >= 0 && !used[c];
            if (ok) {
                used[c] = true;
                l->features[l->n_features++] = c;
            }
        }
    } else {
        for (int c = 0; c < l->n_cols; c++)
            if (!used[c])
                l->features[l->n_features++] = c;
    }
    free(used);
    if (ok && l->n_features == 0) {
        em_set_error(EM_ERR_ARG, "em_csv_dataset: '%s': no feature columns", l->path);
        ok = false;
    }
    return ok;
}

/* Whether the first row (fields, n_cols of them) is a header under the options. */
static bool first_row_is_header(const em_csv_opts *o, char **fields, int n_cols)
{
    if (o->header != EM_CSV_HEADER_AUTO)
        return o->header == EM_CSV_HEADER_YES;
    if (o->label || o->features)
        return true;
    int label = o->label_col < 0 ? n_cols + o->label_col : o->label_col;
    for (int c = 0; c < n_cols; c++) {
        double v;
        if (c != label && !is_missing(fields[c]) && !parse_number(fields[c], &v))
            return true;
    }
    double v;
    return label >= 0 && label < n_cols && !o->class_names && !parse_number(fields[label], &v);
}

typedef struct {
    const csv_layout *l;
    int line;
} csv_where;

static bool field_error(csv_where w, int c, const char *field, const char *what)
{
    char name[160];
    em_set_error(EM_ERR_IO, "em_csv_dataset: '%s' line %d, %s: '%s' %s", w.l->path, w.line,
                 column_name(w.l, c, name, sizeof name), field, what);
    return false;
}

/* A feature value of row w into *x; false with an error set. */
static bool parse_feature(csv_where w, int c, const char *field, float *x)
{
    double v;
    if (is_missing(field)) {
        if (w.l->o.missing != EM_CSV_MISSING_FILL)
            return field_error(w, c, field, "is a missing value (em_csv_opts.missing = "
                               "EM_CSV_MISSING_FILL fills it)");
        *x = (float)w.l->o.missing_fill;
        return true;
    }
    if (!parse_number(field, &v))
        return field_error(w, c, field, "is not a number");
    if (!isfinite(v) || !isfinite((float)v))
        return field_error(w, c, field, "is not a finite f32 number");
    *x = (float)v;
    return true;
}

/* A target value of row w: an f32 target or an i64 class index into y; false with an error. */
static bool parse_target(csv_where w, int c, const char *field, void *y)
{
    double v;
    if (is_missing(field))
        return field_error(w, c, field, "is a missing target");
    bool number = parse_number(field, &v) && isfinite(v);
    if (w.l->o.regression && !number)
        return field_error(w, c, field, "is not a finite number");
    if (w.l->o.regression) {
        *(float *)y = (float)v;
        return true;
    }
    if (!number || v < 0 || v != floor(v) || v > 9.0e15)
        return field_error(w, c, field, "is not a class index (a non-negative integer; "
                           "em_csv_opts.class_names reads names)");
    *(int64_t *)y = (int64_t)v;
    return true;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* With class names: the distinct names of names (n, one per row) sorted into d->classes, and
 * each row's class index into d->y. */
static bool index_classes(csv_dataset *d, char **names, int64_t n)
{
    char **sorted = malloc((size_t)(n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return false;
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_names);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (k == 0 || strcmp(sorted[k - 1], sorted[i]))
            sorted[k++] = sorted[i];
    d->classes = calloc((size_t)(k ? k : 1), sizeof *d->classes);
    for (int64_t c = 0; d->classes && c < k; c++)
        if (!(d->classes[c] = strdup(sorted[c])))
            break;
    d->base.n_classes = k;
    bool ok = d->classes && (k == 0 || d->classes[k - 1]);
    for (int64_t i = 0; ok && i < n; i++) {
        char **at = bsearch(&names[i], sorted, (size_t)k, sizeof *sorted, compare_names);
        ((int64_t *)d->y)[i] = at - sorted;
    }
    free(sorted);
    return ok;
}

/* The data rows of text into d; false with an error set. */
static bool read_rows(csv_dataset *d, const csv_layout *l, char **lines, const int *line_no,
                      int64_t n_lines, char **fields)
{
    char **names = l->o.class_names ? malloc((size_t)(n_lines ? n_lines : 1) * sizeof *names)
                                    : NULL;
    if (l->o.class_names && !names) {
        em_set_error(EM_ERR_MEMORY, "em_csv_dataset: out of memory reading '%s'", l->path);
        return false;
    }
    bool ok = true;
    size_t y_size = em_dtype_size(d->base.y_dtype);
    for (int64_t r = 0; ok && r < n_lines; r++) {
        csv_where w = {l, line_no[r]};
        int n = split_fields(lines[r], l->delim, fields, l->n_cols);
        if (n != l->n_cols) {
            em_set_error(EM_ERR_IO, "em_csv_dataset: '%s' line %d: %d fields, expected %d",
                         l->path, w.line, n, l->n_cols);
            ok = false;
        }
        for (int k = 0; ok && k < l->n_features; k++)
            ok = parse_feature(w, l->features[k], fields[l->features[k]],
                               d->x + d->n * d->n_features + k);
        for (int t = 0; ok && t < l->n_targets; t++) {
            int c = l->label + t;
            char *y = (char *)d->y + (size_t)(d->n * l->n_targets + t) * y_size;
            if (names && is_missing(fields[c]))
                ok = field_error(w, c, fields[c], "is a missing target");
            else if (names)
                names[d->n] = fields[c];
            else
                ok = parse_target(w, c, fields[c], y);
        }
        if (ok && !l->o.regression && !names && *((int64_t *)d->y + d->n) >= d->base.n_classes)
            d->base.n_classes = *((int64_t *)d->y + d->n) + 1;
        d->n += ok;
    }
    if (ok && names && !index_classes(d, names, d->n)) {
        em_set_error(EM_ERR_MEMORY, "em_csv_dataset: out of memory reading '%s'", l->path);
        ok = false;
    }
    free(names);
    return ok;
}

/* The non-blank lines of text (split in place, trailing CRs dropped) and their numbers. */
static int64_t split_lines(char *text, size_t len, char **lines, int *line_no)
{
    int64_t n = 0;
    int number = 0;
    for (char *line = text, *next; line && line < text + len; line = next) {
        number++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t ll = strlen(line);
        if (ll > 0 && line[ll - 1] == '\r')
            line[--ll] = '\0';
        if (strspn(line, " \t") == ll)
            continue;
        lines[n] = line;
        line_no[n++] = number;
    }
    return n;
}

em_dataset *em_csv_dataset(const char *path, em_csv_opts opts)
{
    if (!path) {
        em_set_error(EM_ERR_ARG, "em_csv_dataset: NULL path");
        return NULL;
    }
    csv_layout l = {.path = path, .o = opts, .delim = opts.delimiter ? opts.delimiter : ','};
    size_t len;
    char *text = read_file(path, &len);
    if (!text)
        return NULL;
    int64_t max_rows = 1;
    for (size_t i = 0; i < len; i++)
        max_rows += text[i] == '\n';
    char **lines = malloc((size_t)max_rows * sizeof *lines);
    int *line_no = malloc((size_t)max_rows * sizeof *line_no);
    csv_dataset *d = calloc(1, sizeof *d);
    char **fields = NULL, *first = NULL;
    if (!lines || !line_no || !d)
        goto oom;
    d->base.vt = &csv_vtable;
    int64_t n_lines = split_lines(text, len, lines, line_no);
    if (n_lines == 0) {
        em_set_error(EM_ERR_IO, "em_csv_dataset: '%s' is empty", path);
        goto fail;
    }
    l.n_cols = 1;
    for (const char *c = lines[0]; *c; c++)
        l.n_cols += *c == l.delim;
    /* the first row split apart in a copy: the header's names, or a row read again below */
    fields = malloc((size_t)l.n_cols * sizeof *fields);
    l.header = malloc((size_t)l.n_cols * sizeof *l.header);
    if (!fields || !l.header || !(first = strdup(lines[0])))
        goto oom;
    split_fields(first, l.delim, l.header, l.n_cols);
    bool header = first_row_is_header(&opts, l.header, l.n_cols);
    if (!header) {
        free(l.header);
        l.header = NULL;
    }
    if (!choose_columns(&l))
        goto fail;
    d->n_features = l.n_features;
    d->n_targets = l.n_targets;
    d->base.y_dtype = opts.regression ? EM_F32 : EM_I64;
    d->x = malloc((size_t)max_rows * (size_t)l.n_features * sizeof(float));
    d->y = malloc((size_t)max_rows * (size_t)l.n_targets * 8);
    if (!d->x || !d->y)
        goto oom;
    if (!read_rows(d, &l, lines + header, line_no + header, n_lines - header, fields))
        goto fail;
    d->base.x_shape = EM_SHAPE(d->n_features);
    d->base.y_shape = l.n_targets > 1 ? EM_SHAPE(l.n_targets) : EM_SCALAR_SHAPE;
    goto done;
oom:
    em_set_error(EM_ERR_MEMORY, "em_csv_dataset: out of memory reading '%s'", path);
fail:
    if (d)
        csv_free(&d->base);
    d = NULL;
done:
    free(l.header);
    free(first);
    free(fields);
    free(l.features);
    free(line_no);
    free(lines);
    free(text);
    return d ? &d->base : NULL;
}
