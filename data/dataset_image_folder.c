/* Image folders: root/<class>/<image> with classes and files sorted by name; PNG, JPEG and BMP are
 * decoded by stb_image when a sample is read (so a bad file fails that sample, naming it). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data/data.h"

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
/* stb declares a few static functions it never defines; that warning fires at the end of the
 * file, so it stays off for the whole file. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb_image.h>
#pragma GCC diagnostic pop

typedef struct {
    em_dataset base;
    int height, width, channels;
    int64_t n;
    char **paths;    /* (n) */
    int64_t *labels; /* (n) */
    char **classes;  /* (n_classes) */
} folder_dataset;

static int64_t folder_len(const em_dataset *ds)
{
    return ((const folder_dataset *)ds)->n;
}

static em_status folder_get(const em_dataset *ds, int64_t i, int64_t epoch, void *xv, void *y)
{
    (void)epoch;
    float *x = xv;
    const folder_dataset *d = (const folder_dataset *)ds;
    const char *path = d->paths[i];
    FILE *f = fopen(path, "rb");
    if (!f)
        return em_set_error(EM_ERR_IO, "em_dataset_image_folder: cannot open '%s': %s", path,
                            strerror(errno));
    int w, h, comp, c = d->channels;
    uint8_t *img = stbi_load_from_file(f, &w, &h, &comp, c);
    fclose(f);
    if (!img)
        return em_set_error(EM_ERR_IO, "em_dataset_image_folder: cannot decode '%s': %s", path,
                            stbi_failure_reason());
    float *planes = (w == d->width && h == d->height) ? x : malloc((size_t)c * h * w * 4);
    if (!planes) {
        stbi_image_free(img);
        return em_set_error(EM_ERR_MEMORY, "em_dataset_image_folder: out of memory for '%s'",
                            path);
    }
    for (int ch = 0; ch < c; ch++)
        for (size_t p = 0; p < (size_t)h * w; p++)
            planes[ch * (size_t)h * w + p] = (float)img[p * c + ch] / 255.0f;
    stbi_image_free(img);
    if (planes != x) {
        em_resize_bilinear(planes, c, h, w, x, d->height, d->width);
        free(planes);
    }
    *(int64_t *)y = d->labels[i];
    return EM_OK;
}

static void free_names(char **names, int64_t n)
{
    for (int64_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

static void folder_close(em_dataset *ds)
{
    folder_dataset *d = (folder_dataset *)ds;
    free_names(d->paths, d->n);
    free_names(d->classes, d->base.n_classes);
    free(d->labels);
    free(d);
}

static const em_dataset_vtable folder_vtable = {folder_len, folder_get, folder_close};

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

/* The sorted names in dir of subfolders (want_dirs) or image files; NULL with an error. */
static char **list_dir(const char *dir, bool want_dirs, int64_t *count)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        em_set_error(EM_ERR_IO, "em_dataset_image_folder: cannot open folder '%s': %s", dir,
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
        struct stat sb;
        oom = !full;
        bool keep = full && stat(full, &sb) == 0 &&
                    (want_dirs ? S_ISDIR(sb.st_mode)
                               : S_ISREG(sb.st_mode) && is_image_name(e->d_name));
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
        em_set_error(EM_ERR_MEMORY, "em_dataset_image_folder: out of memory listing '%s'", dir);
        return NULL;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    *count = n;
    return names;
}

em_dataset *em_dataset_image_folder(const char *root, em_image_folder_opts opts)
{
    int c = opts.channels ? opts.channels : 3;
    if (!root || opts.height <= 0 || opts.width <= 0 || (c != 1 && c != 3)) {
        em_set_error(EM_ERR_ARG, "em_dataset_image_folder: need a root, height > 0, width > 0 "
                     "and 1 or 3 channels (got %dx%d, %d channels)", opts.height, opts.width,
                     opts.channels);
        return NULL;
    }
    folder_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        em_set_error(EM_ERR_MEMORY, "em_dataset_image_folder: out of memory");
        return NULL;
    }
    d->base.vt = &folder_vtable;
    d->base.x_shape = EM_SHAPE(c, opts.height, opts.width);
    d->base.y_shape = EM_SCALAR_SHAPE;
    d->base.y_dtype = EM_I64;
    d->height = opts.height;
    d->width = opts.width;
    d->channels = c;
    if (!(d->classes = list_dir(root, true, &d->base.n_classes)))
        goto fail;
    if (d->base.n_classes == 0) {
        em_set_error(EM_ERR_IO, "em_dataset_image_folder: '%s' has no class subfolders", root);
        goto fail;
    }
    int64_t cap = 0;
    for (int64_t k = 0; k < d->base.n_classes; k++) {
        char *sub = join_path(root, d->classes[k]);
        int64_t nf = 0;
        char **files = sub ? list_dir(sub, false, &nf) : NULL;
        bool ok = files != NULL;
        if (ok && d->n + nf > cap) {
            cap = 2 * (d->n + nf);
            char **paths = realloc(d->paths, (size_t)cap * sizeof *paths);
            if (paths)
                d->paths = paths;
            int64_t *labels = realloc(d->labels, (size_t)cap * sizeof *labels);
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
        if (!ok && !em_has_error())
            em_set_error(EM_ERR_MEMORY, "em_dataset_image_folder: out of memory listing '%s'",
                         root);
        free(sub);
        if (!ok)
            goto fail;
    }
    if (d->n == 0) {
        em_set_error(EM_ERR_IO, "em_dataset_image_folder: no PNG, JPEG or BMP files under '%s'",
                     root);
        goto fail;
    }
    return &d->base;
fail:
    folder_close(&d->base);
    return NULL;
}

const char *const *em_image_folder_classes(const em_dataset *ds)
{
    if (!ds || ds->vt != &folder_vtable)
        return NULL;
    return (const char *const *)((const folder_dataset *)ds)->classes;
}
