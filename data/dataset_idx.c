/* IDX files (the MNIST format), gzipped or raw through zlib: u8 images (N, H, W) and u8 labels (N),
 * held in memory as bytes and scaled to [0, 1] when a sample is read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data.h"

typedef struct {
    em_dataset base;
    int64_t n, sample_numel;
    uint8_t *pixels; /* (n, sample_numel) */
    uint8_t *labels; /* (n) */
} idx_dataset;

/* Read exactly n bytes; false on a short read or a zlib error. */
static bool read_exact(gzFile f, void *dst, size_t n)
{
    uint8_t *p = dst;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got <= 0)
            return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
}

/* The u8 payload of an IDX file with ndim dims into *data; dims (up to 4) into dims. */
static em_status read_idx(const char *path, int want_ndim, int64_t *dims, uint8_t **data)
{
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return em_set_error(EM_ERR_IO, "em_dataset_idx: cannot open '%s': %s", path,
                            strerror(errno ? errno : ENOENT));
    uint8_t magic[4], be[4];
    em_status st = EM_OK;
    uint8_t *buf = NULL;
    if (!read_exact(f, magic, 4)) {
        st = em_set_error(EM_ERR_IO, "em_dataset_idx: '%s' is truncated (no IDX header)", path);
        goto done;
    }
    if (magic[0] != 0 || magic[1] != 0 || magic[3] != want_ndim) {
        st = em_set_error(EM_ERR_IO, "em_dataset_idx: '%s' is not an IDX file with %d dims "
                          "(magic %02x %02x %02x %02x)", path, want_ndim, magic[0], magic[1],
                          magic[2], magic[3]);
        goto done;
    }
    if (magic[2] != 0x08) {
        st = em_set_error(EM_ERR_UNSUPPORTED, "em_dataset_idx: '%s' holds IDX element type 0x%02x;"
                          " only unsigned bytes (0x08) are supported", path, magic[2]);
        goto done;
    }
    size_t total = 1;
    for (int d = 0; d < want_ndim; d++) {
        if (!read_exact(f, be, 4)) {
            st = em_set_error(EM_ERR_IO, "em_dataset_idx: '%s' is truncated in its header", path);
            goto done;
        }
        dims[d] = ((int64_t)be[0] << 24) | (be[1] << 16) | (be[2] << 8) | be[3];
        total *= (size_t)dims[d];
    }
    buf = malloc(total ? total : 1);
    if (!buf) {
        st = em_set_error(EM_ERR_MEMORY, "em_dataset_idx: out of memory for '%s' (%zu bytes)",
                          path, total);
        goto done;
    }
    uint8_t extra;
    if (!read_exact(f, buf, total)) {
        st = em_set_error(EM_ERR_IO, "em_dataset_idx: '%s' is truncated or corrupt "
                          "(expected %zu data bytes)", path, total);
    } else if (gzread(f, &extra, 1) != 0) {
        st = em_set_error(EM_ERR_IO, "em_dataset_idx: '%s' has bytes past its %zu data bytes",
                          path, total);
    }
done:
    gzclose(f);
    if (st != EM_OK)
        free(buf);
    else
        *data = buf;
    return st;
}

static int64_t idx_len(const em_dataset *ds)
{
    return ((const idx_dataset *)ds)->n;
}

static em_status idx_get(const em_dataset *ds, int64_t i, int64_t epoch, void *xv, void *y)
{
    (void)epoch;
    const idx_dataset *d = (const idx_dataset *)ds;
    float *x = xv;
    const uint8_t *px = d->pixels + i * d->sample_numel;
    for (int64_t k = 0; k < d->sample_numel; k++)
        x[k] = (float)px[k] / 255.0f;
    *(int64_t *)y = d->labels[i];
    return EM_OK;
}

static void idx_close(em_dataset *ds)
{
    idx_dataset *d = (idx_dataset *)ds;
    free(d->pixels);
    free(d->labels);
    free(d);
}

static const em_dataset_vtable idx_vtable = {idx_len, idx_get, idx_close};

em_dataset *em_dataset_idx(const char *images_path, const char *labels_path, em_idx_opts opts)
{
    if (!images_path || !labels_path) {
        em_set_error(EM_ERR_ARG, "em_dataset_idx: NULL path");
        return NULL;
    }
    int64_t idims[3], ldims[1];
    uint8_t *pixels = NULL, *labels = NULL;
    if (read_idx(images_path, 3, idims, &pixels) != EM_OK)
        return NULL;
    if (read_idx(labels_path, 1, ldims, &labels) != EM_OK) {
        free(pixels);
        return NULL;
    }
    if (ldims[0] != idims[0]) {
        em_set_error(EM_ERR_IO, "em_dataset_idx: '%s' holds %lld images but '%s' %lld labels",
                     images_path, (long long)idims[0], labels_path, (long long)ldims[0]);
        free(pixels);
        free(labels);
        return NULL;
    }
    idx_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        free(pixels);
        free(labels);
        em_set_error(EM_ERR_MEMORY, "em_dataset_idx: out of memory");
        return NULL;
    }
    d->base.vt = &idx_vtable;
    d->n = idims[0];
    d->sample_numel = idims[1] * idims[2];
    d->base.x_shape = opts.flat ? EM_SHAPE(d->sample_numel) : EM_SHAPE(1, idims[1], idims[2]);
    d->base.y_shape = EM_SCALAR_SHAPE;
    d->base.y_dtype = EM_I64;
    for (int64_t i = 0; i < d->n; i++)
        if (labels[i] + 1 > d->base.n_classes)
            d->base.n_classes = labels[i] + 1;
    d->pixels = pixels;
    d->labels = labels;
    return &d->base;
}
