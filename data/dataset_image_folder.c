/* Image folders: root/<class>/<image> with classes and files sorted by name; images decoded when a
 * sample is read (data/image_internal.h), so a bad file fails or skips only that sample, naming
 * it. What the listing or the decoding left out is kept for em_image_folder_skipped. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data/data.h"
#include "data/image_internal.h"
#include "io/regular_file.h"

/* "PATH: WHY" lines (or an error message that names the file), appended from any thread. */
typedef struct {
    pthread_mutex_t mu;
    char **lines;
    int64_t n, cap;
} skip_list;

typedef struct {
    em_dataset base;
    em_image_folder_opts o;
    int64_t n;
    char **paths;    /* (n) */
    int64_t *labels; /* (n) */
    char **classes;  /* (n_classes) */
    bool *bad;       /* (n): found unreadable (with EM_BAD_IMAGE_SKIP); under skipped.mu */
    skip_list skipped;
} folder_dataset;

static void skip_add(skip_list *l, const char *path, const char *why)
{
    size_t n = (path ? strlen(path) + 2 : 0) + strlen(why) + 1;
    char *line = malloc(n);
    if (!line)
        return;
    snprintf(line, n, "%s%s%s", path ? path : "", path ? ": " : "", why);
    pthread_mutex_lock(&l->mu);
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 16;
        char **grown = realloc(l->lines, (size_t)cap * sizeof *grown);
        if (grown) {
            l->lines = grown;
            l->cap = cap;
        }
    }
    if (l->n < l->cap)
        l->lines[l->n++] = line;
    else
        free(line);
    pthread_mutex_unlock(&l->mu);
}

static int64_t folder_len(const em_dataset *ds)
{
    return ((const folder_dataset *)ds)->n;
}

/* The whole file at path into a new *data (the caller frees it; NULL on failure, when nothing
 * is left to free), for the decoders. Only a regular file is opened (io/regular_file.h); one
 * larger than any image of max_pixels could be (16 bytes a pixel: 16-bit RGBA stored
 * uncompressed, with room for headers) is refused before it is read, and one that yields fewer
 * bytes than its size (it shrank, or is a sysfs file) is an error. */
static em_status read_file(const char *path, int64_t max_pixels, uint8_t **data, size_t *n)
{
    *data = NULL;
    *n = 0;
    int64_t size = 0, most;
    FILE *f = em_fopen_regular("em_image_folder", path, &size);
    if (!f)
        return em_error_status();
    em_status st = EM_OK;
    uint8_t *buf = NULL;
    size_t got = 0;
    if (!em_size_mul(max_pixels, 16, &most) || size > most + (1 << 20))
        st = em_set_error(EM_ERR_IO, "em_image_folder: '%s' has %lld bytes, more than an "
                          "image of max_pixels can need", path, (long long)size);
    else if (!(buf = malloc((size_t)size + 1)))
        st = em_set_error(EM_ERR_MEMORY, "em_image_folder: out of memory for '%s'", path);
    else if ((got = fread(buf, 1, (size_t)size, f)) != (size_t)size)
        st = ferror(f) ? em_set_error(EM_ERR_IO, "em_image_folder: cannot read '%s': %s", path,
                                      strerror(errno))
                       : em_set_error(EM_ERR_IO, "em_image_folder: cannot read '%s': it ended "
                                      "after %zu of its %lld bytes", path, got,
                                      (long long)size);
    fclose(f);
    if (st != EM_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *n = (size_t)size;
    return EM_OK;
}

static em_status load_image(const folder_dataset *d, const char *path, float *x)
{
    uint8_t *data = NULL;
    size_t n = 0;
    em_image img = {0};
    em_status st = read_file(path, d->o.max_pixels, &data, &n);
    if (st == EM_OK)
        st = em_image_decode(data, n, path, d->o.max_pixels, &img);
    free(data);
    if (st == EM_OK)
        st = em_image_sample(&img, d->o.channels, d->o.height, d->o.width, x);
    em_image_free(&img);
    return st;
}

/* With EM_BAD_IMAGE_SKIP, a sample that fails is reported once and skipped from then on; its
 * error is cleared (it is not one). */
static em_status folder_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    (void)epoch;
    folder_dataset *d = (folder_dataset *)ds;
    bool skip = d->o.on_bad_image == EM_BAD_IMAGE_SKIP;
    if (skip) {
        pthread_mutex_lock(&d->skipped.mu);
        bool bad = d->bad[i];
        pthread_mutex_unlock(&d->skipped.mu);
        if (bad)
            return EM_SKIP;
    }
    bool clean = !em_has_error();
    em_status st = load_image(d, d->paths[i], x);
    if (st == EM_OK) {
        *(int64_t *)y = d->labels[i];
        return EM_OK;
    }
    if (!skip || !clean)
        return st;
    pthread_mutex_lock(&d->skipped.mu);
    bool first = !d->bad[i];
    d->bad[i] = true;
    pthread_mutex_unlock(&d->skipped.mu);
    if (first)
        skip_add(&d->skipped, NULL, em_error());
    em_error_clear();
    return EM_SKIP;
}

static void free_names(char **names, int64_t n)
{
    for (int64_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

static void folder_free(em_dataset *ds)
{
    folder_dataset *d = (folder_dataset *)ds;
    free_names(d->paths, d->n);
    free_names(d->classes, d->base.n_classes);
    free_names(d->skipped.lines, d->skipped.n);
    pthread_mutex_destroy(&d->skipped.mu);
    free(d->labels);
    free(d->bad);
    free(d);
}

static const em_dataset_vtable folder_vtable = {folder_len, folder_get, folder_free};

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    static const char *exts[] = {".png", ".jpg", ".jpeg", ".bmp"};
    for (size_t k = 0; dot && k < sizeof exts / sizeof exts[0]; k++)
        if (strcasecmp(dot, exts[k]) == 0)
            return true;
    return false;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Whether entry `full` of a listing is taken (a class folder when want_dirs, else an image
 * file); when not, why (for the skip list). */
static bool keep_entry(const char *full, const char *name, bool want_dirs, const char **why)
{
    struct stat sb;
    if (stat(full, &sb) != 0) {
        *why = "cannot be read";
        return false;
    }
    if (want_dirs) {
        *why = "not a class folder";
        return S_ISDIR(sb.st_mode);
    }
    *why = S_ISREG(sb.st_mode) ? "not a PNG, JPEG or BMP file by its name" : "not a file";
    return S_ISREG(sb.st_mode) && is_image_name(name);
}

/* The sorted names in dir of subfolders (want_dirs) or image files; the rest (hidden entries
 * aside) go to skipped. NULL with an error. */
static char **list_dir(const char *dir, bool want_dirs, int64_t *count, skip_list *skipped)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        em_set_error(EM_ERR_IO, "em_image_folder: cannot open folder '%s': %s", dir,
                     strerror(errno));
        return NULL;
    }
    int64_t n = 0, cap = 16;
    char **names = malloc((size_t)cap * sizeof *names);
    bool oom = !names;
    for (struct dirent *e; !oom && (e = readdir(dp));) {
        if (e->d_name[0] == '.')
            continue;
        char *full = join_path(dir, e->d_name);
        const char *why = NULL;
        oom = !full;
        bool keep = full && keep_entry(full, e->d_name, want_dirs, &why);
        if (full && !keep)
            skip_add(skipped, full, why);
        free(full);
        if (!keep)
            continue;
        if (n == cap) {
            char **grown = realloc(names, (size_t)cap * 2 * sizeof *names);
            if (!(oom = !grown)) {
                names = grown;
                cap *= 2;
            }
        }
        if (!oom && !(oom = !(names[n] = strdup(e->d_name))))
            n++;
    }
    closedir(dp);
    if (oom) {
        free_names(names, n);
        em_set_error(EM_ERR_MEMORY, "em_image_folder: out of memory listing '%s'", dir);
        return NULL;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    *count = n;
    return names;
}

/* Appends class k's image files to d. */
static em_status add_class(folder_dataset *d, const char *root, int64_t k, int64_t *cap)
{
    char *sub = join_path(root, d->classes[k]);
    int64_t nf = 0;
    char **files = sub ? list_dir(sub, false, &nf, &d->skipped) : NULL;
    bool ok = files != NULL;
    if (ok && d->n + nf > *cap) {
        *cap = 2 * (d->n + nf);
        char **paths = realloc(d->paths, (size_t)*cap * sizeof *paths);
        if (paths)
            d->paths = paths;
        int64_t *labels = realloc(d->labels, (size_t)*cap * sizeof *labels);
        if (labels)
            d->labels = labels;
        ok = paths && labels;
    }
    for (int64_t j = 0; ok && j < nf; j++) {
        ok = (d->paths[d->n] = join_path(sub, files[j])) != NULL;
        d->labels[d->n] = k;
        d->n += ok;
    }
    free_names(files, nf);
    free(sub);
    if (!ok && !em_has_error())
        em_set_error(EM_ERR_MEMORY, "em_image_folder: out of memory listing '%s'", root);
    return ok ? EM_OK : em_error_status();
}

em_dataset *em_image_folder(const char *root, em_image_folder_opts opts)
{
    opts.channels = opts.channels ? opts.channels : 3;
    opts.max_pixels = opts.max_pixels ? opts.max_pixels : EM_IMAGE_DEFAULT_MAX_PIXELS;
    if (!root || opts.height <= 0 || opts.width <= 0 || (opts.channels != 1 &&
        opts.channels != 3) || opts.max_pixels < 1 || (opts.on_bad_image != EM_BAD_IMAGE_ERROR &&
        opts.on_bad_image != EM_BAD_IMAGE_SKIP)) {
        em_set_error(EM_ERR_ARG, "em_image_folder: need a root, height > 0, width > 0, "
                     "1 or 3 channels, max_pixels > 0 (0: default) and a known on_bad_image "
                     "(got %dx%d, %d "
                     "channels, max_pixels %lld, on_bad_image %d)", opts.height, opts.width,
                     opts.channels, (long long)opts.max_pixels, (int)opts.on_bad_image);
        return NULL;
    }
    folder_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        em_set_error(EM_ERR_MEMORY, "em_image_folder: out of memory");
        return NULL;
    }
    pthread_mutex_init(&d->skipped.mu, NULL);
    d->base.vt = &folder_vtable;
    d->base.x_shape = EM_SHAPE(opts.channels, opts.height, opts.width);
    d->base.y_shape = EM_SCALAR_SHAPE;
    d->base.y_dtype = EM_I64;
    d->o = opts;
    if (!(d->classes = list_dir(root, true, &d->base.n_classes, &d->skipped)))
        goto fail;
    if (d->base.n_classes == 0) {
        em_set_error(EM_ERR_IO, "em_image_folder: '%s' has no class subfolders", root);
        goto fail;
    }
    int64_t cap = 0;
    for (int64_t k = 0; k < d->base.n_classes; k++)
        if (add_class(d, root, k, &cap) != EM_OK)
            goto fail;
    if (d->n == 0) {
        em_set_error(EM_ERR_IO, "em_image_folder: no PNG, JPEG or BMP files under '%s'",
                     root);
        goto fail;
    }
    if (!(d->bad = calloc((size_t)d->n, sizeof *d->bad))) {
        em_set_error(EM_ERR_MEMORY, "em_image_folder: out of memory");
        goto fail;
    }
    return &d->base;
fail:
    folder_free(&d->base);
    return NULL;
}

const char *const *em_image_folder_classes(const em_dataset *ds)
{
    if (!ds || ds->vt != &folder_vtable)
        return NULL;
    return (const char *const *)((const folder_dataset *)ds)->classes;
}

int64_t em_image_folder_skipped(const em_dataset *ds, const char **out, int64_t max)
{
    if (!ds || ds->vt != &folder_vtable)
        return -1;
    folder_dataset *d = (folder_dataset *)ds;
    pthread_mutex_lock(&d->skipped.mu);
    int64_t n = d->skipped.n;
    for (int64_t i = 0; out && i < n && i < max; i++)
        out[i] = d->skipped.lines[i];
    pthread_mutex_unlock(&d->skipped.mu);
    return n;
}
