/* Image decoding for the image-folder dataset: PNG through libpng, JPEG through libjpeg-turbo
 * (both hardened, fuzzed libraries from Debian) and BMP by ember's own strict reader. Every
 * decoder reads the image's size from its header and refuses it before decoding when it holds
 * more than max_pixels pixels, so a small hostile file cannot make ember allocate or work for
 * gigabytes. Not installed. */
#ifndef EMBER_IMAGE_INTERNAL_H
#define EMBER_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/error.h"

/* The pixel cap when a caller sets none: 8192 x 8192. */
#define EM_IMAGE_DEFAULT_MAX_PIXELS ((int64_t)1 << 26)

typedef struct {
    int width, height;
    int channels;    /* 1 (gray) or 3 (RGB): what the file holds, alpha dropped */
    uint8_t *pixels; /* (height, width, channels), malloc'd */
} em_image;

/* Decodes n bytes of PNG, JPEG or BMP (told apart by their first bytes) into *out; name is for
 * messages. EM_ERR_IO "em_image_decode: 'NAME': WHY" on anything wrong, EM_ERR_UNSUPPORTED for a
 * kind of file ember does not read (CMYK JPEG, 16-bit BMP, ...), EM_ERR_MEMORY. */
em_status em_image_decode(const uint8_t *data, size_t n, const char *name, int64_t max_pixels,
                          em_image *out);

/* One decoder per format, each in its own file. */
em_status em_image_decode_png(const uint8_t *data, size_t n, const char *name,
                              int64_t max_pixels, em_image *out);
em_status em_image_decode_jpeg(const uint8_t *data, size_t n, const char *name,
                               int64_t max_pixels, em_image *out);
em_status em_image_decode_bmp(const uint8_t *data, size_t n, const char *name,
                              int64_t max_pixels, em_image *out);

/* Checks a header's size: both sides in 1..65535 and width * height <= max_pixels; then
 * allocates out->pixels for it. For the decoders. */
em_status em_image_alloc(const char *name, int64_t width, int64_t height, int channels,
                         int64_t max_pixels, em_image *out);

void em_image_free(em_image *img);

/* The image as a sample x (channels, height, width) in [0, 1]: gray from RGB as
 * (77 R + 150 G + 29 B) / 256 (ITU-R BT.601 in 8 bits), RGB from gray by repetition, then a
 * bilinear resize when the size differs. */
em_status em_image_sample(const em_image *img, int channels, int height, int width, float *x);

#endif
