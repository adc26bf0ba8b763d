/* libFuzzer target: IDX image and label files (MNIST's format), raw or gzipped, read by
 * em_idx_dataset and every sample read back. The input is one flags byte, one byte L, then L
 * bytes of the labels file and the rest the images file; flag bits gzip either file in the
 * harness (so mutations reach the header inside a valid gzip stream; the raw bytes may be gzip
 * too) and ask for flat samples. Any input must load or fail with a message, never crash, leak,
 * hang or allocate what the file cannot hold. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "harness.h"

enum { GZIP_IMAGES = 1, GZIP_LABELS = 2, FLAT = 4 };

/* data as a gzip stream in a new buffer of *n bytes */
static uint8_t *gzip(const uint8_t *data, size_t size, size_t *n)
{
    z_stream z = {0};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)
        != Z_OK)
        abort();
    size_t cap = deflateBound(&z, size) + 32;
    uint8_t *out = malloc(cap);
    assert(out);
    z.next_in = (uint8_t *)data;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    *n = z.total_out;
    deflateEnd(&z);
    return out;
}

/* file `slot` holding data, gzipped first when asked */
static const char *file(int slot, const uint8_t *data, size_t size, bool gzipped)
{
    if (!gzipped)
        return fuzz_input_file(slot, data, size);
    size_t n;
    uint8_t *z = gzip(data, size, &n);
    const char *path = fuzz_input_file(slot, z, n);
    free(z);
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned flags = data[0];
    size_t labels_size = data[1] < size - 2 ? data[1] : size - 2;
    const uint8_t *labels = data + 2, *images = labels + labels_size;
    const char *labels_path = file(0, labels, labels_size, flags & GZIP_LABELS);
    const char *images_path = file(1, images, size - 2 - labels_size, flags & GZIP_IMAGES);
    em_error_clear();
    em_dataset *ds = em_idx_dataset(images_path, labels_path, (em_idx_opts){.flat = flags & FLAT});
    if (ds)
        fuzz_read_samples(ds, 64);
    else
        assert(em_error()[0]);
    em_error_clear();
    return 0;
}
