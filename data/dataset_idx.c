/* IDX files (the MNIST format), gzipped or raw through zlib: u8 images (N, H, W) and u8 labels (N),
 * held in memory as bytes and scaled to [0, 1] when a sample is read. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"
#include "io/regular_file.h"

typedef struct {
    em_dataset base;
    int64_t n, sample_numel;
    uint8_t *pixels; /* (n, sample_numel) */
    uint8_t *labels; /* (n) */
} idx_dataset;

/* Reads up to n bytes; the count read, or -1 on a zlib error. */
static int64_t read_some(gzFile f, void *dst, size_t n)
{
    uint8_t *p = dst;
    size_t done = 0;
    while (done < n) {
        unsigned chunk = n - done > (1u << 30) ? (1u << 30) : (unsigned)(n - done);
        int got = gzread(f, p + done, chunk);
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        done += (size_t)got;
    }
    return (int64_t)done;
}

static bool read_exact(gzFile f, void *dst, size_t n)
{
    return read_some(f, dst, n) == (int64_t)n;
}

/* deflate never packs more than 1032 bytes into one: a gzip file of n bytes holds fewer than
 * 1032 * n, so a header claiming more is a lie found before anything is allocated */
#define DEFLATE_MAX_RATIO 1032
#define GROW_STEP ((size_t)64 << 20)

/* The size the header's dims claim, checked against what the file of file_size bytes can
 * hold. */
static em_status claimed_bytes(const char *path, gzFile f, int64_t file_size, const int64_t *dims,
                               int ndim, int64_t *total)
{
    *total = 1;
    for (int d = 0; d < ndim; d++)
        if (!em_size_mul(*total, dims[d], total))
            return em_set_error(EM_ERR_IO, "em_idx_dataset: '%s': the header's dims overflow "
                                "a size", path);
    int64_t body = file_size - 4 - 4 * ndim, most;
    if (gzdirect(f) && *total > body)
        return em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' is truncated: its header claims "
                            "%lld data bytes, the file holds %lld", path, (long long)*total,
                            (long long)body);
    if (!gzdirect(f) && (!em_size_mul(file_size, DEFLATE_MAX_RATIO, &most) || *total > most))
        return em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' is corrupt: its header claims %lld "
                            "data bytes, more than %lld gzipped bytes can hold", path,
                            (long long)*total, (long long)file_size);
    return EM_OK;
}

/* The payload of `total` bytes, into a buffer grown as the data really arrives (a truncated
 * file never makes ember allocate what its header claims). */
static em_status read_payload(const char *path, gzFile f, int64_t total, uint8_t **data)
{
    size_t cap = 0, have = 0, want = (size_t)total;
    uint8_t *buf = NULL;
    do {
        size_t next = cap == 0 ? GROW_STEP : 2 * cap;
        next = next < want ? next : want;
        uint8_t *grown = realloc(buf, next ? next : 1);
        if (!grown) {
            free(buf);
            return em_set_error(EM_ERR_MEMORY, "em_idx_dataset: out of memory for '%s' "
                                "(%zu bytes)", path, next);
        }
        buf = grown;
        cap = next;
        int64_t got = read_some(f, buf + have, cap - have);
        if (got >= 0)
            have += (size_t)got;
        if (have < cap) {
            free(buf);
            return em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' is truncated or corrupt "
                                "(expected %lld data bytes)", path, (long long)total);
        }
    } while (cap < want);
    uint8_t extra;
    if (gzread(f, &extra, 1) != 0) {
        free(buf);
        return em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' has bytes past its %lld data "
                            "bytes", path, (long long)total);
    }
    *data = buf;
    return EM_OK;
}

/* The u8 payload of an IDX file with ndim dims into *data; dims (up to 4) into dims. */
static em_status read_idx(const char *path, int want_ndim, int64_t *dims, uint8_t **data)
{
    int64_t file_size = 0;
    int fd = em_open_regular("em_idx_dataset", path, &file_size);
    if (fd < 0)
        return em_error_status();
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return em_set_error(EM_ERR_MEMORY, "em_idx_dataset: out of memory opening '%s'", path);
    }
    uint8_t magic[4], be[4];
    em_status st = EM_OK;
    int64_t total = 0;
    if (!read_exact(f, magic, 4)) {
        st = em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' is truncated (no IDX header)", path);
        goto done;
    }
    if (magic[0] != 0 || magic[1] != 0 || magic[3] != want_ndim) {
        st = em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' is not an IDX file with %d dims "
                          "(magic %02x %02x %02x %02x)", path, want_ndim, magic[0], magic[1],
                          magic[2], magic[3]);
        goto done;
    }
    if (magic[2] != 0x08) {
        st = em_set_error(EM_ERR_UNSUPPORTED, "em_idx_dataset: '%s' holds IDX element type 0x%02x;"
                          " only unsigned bytes (0x08) are supported", path, magic[2]);
        goto done;
    }
    for (int d = 0; d < want_ndim; d++) {
        if (!read_exact(f, be, 4)) {
            st = em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' is truncated in its header", path);
            goto done;
        }
        dims[d] = ((int64_t)be[0] << 24) | ((int64_t)be[1] << 16) | ((int64_t)be[2] << 8) | be[3];
    }
    st = claimed_bytes(path, f, file_size, dims, want_ndim, &total);
    if (st == EM_OK)
        st = read_payload(path, f, total, data);
done:
    gzclose(f);
    return st;
}

static int64_t idx_len(const em_dataset *ds)
{
    return ((const idx_dataset *)ds)->n;
}

/* x (n) = px (n) / 255, in vector lanes: a division per pixel, exact as one at a time (a
 * multiplication by 1/255 differs in 126 of the 256 values), 8 lanes at once where the CPU has
 * AVX2: 64 images in 16 us instead of 28 us through a table of the 256 values. */
__attribute__((target_clones("avx2", "default"))) static void pixels_to_levels(
    const uint8_t *px, float *x, int64_t n)
{
    #pragma omp simd
    for (int64_t k = 0; k < n; k++)
        x[k] = (float)px[k] / 255.0f;
}

static em_status idx_get(const em_dataset *ds, int64_t i, int64_t epoch, void *xv, void *y)
{
    (void)epoch;
    const idx_dataset *d = (const idx_dataset *)ds;
    pixels_to_levels(d->pixels + i * d->sample_numel, xv, d->sample_numel);
    *(int64_t *)y = d->labels[i];
    return EM_OK;
}

static void idx_free(em_dataset *ds)
{
    idx_dataset *d = (idx_dataset *)ds;
    free(d->pixels);
    free(d->labels);
    free(d);
}

static const em_dataset_vtable idx_vtable = {idx_len, idx_get, idx_free};

em_dataset *em_idx_dataset(const char *images_path, const char *labels_path, em_idx_opts opts)
{
    if (!images_path || !labels_path) {
        em_set_error(EM_ERR_ARG, "em_idx_dataset: NULL path");
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
        em_set_error(EM_ERR_IO, "em_idx_dataset: '%s' holds %lld images but '%s' %lld labels",
                     images_path, (long long)idims[0], labels_path, (long long)ldims[0]);
        free(pixels);
        free(labels);
        return NULL;
    }
    idx_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        free(pixels);
        free(labels);
        em_set_error(EM_ERR_MEMORY, "em_idx_dataset: out of memory");
        return NULL;
    }
    d->base.vt = &idx_vtable;
    d->pixels = pixels;
    d->labels = labels;
    d->n = idims[0];
    if (!em_size_mul(idims[1], idims[2], &d->sample_numel)) {
        em_set_error(EM_ERR_IO, "em_idx_dataset: '%s': %lld x %lld pixels overflow a size",
                     images_path, (long long)idims[1], (long long)idims[2]);
        idx_free(&d->base);
        return NULL;
    }
    d->base.x_shape = opts.flat ? EM_SHAPE(d->sample_numel) : EM_SHAPE(1, idims[1], idims[2]);
    d->base.y_shape = EM_SCALAR_SHAPE;
    d->base.y_dtype = EM_I64;
    for (int64_t i = 0; i < d->n; i++)
        if (labels[i] + 1 > d->base.n_classes)
            d->base.n_classes = labels[i] + 1;
    return &d->base;
}
