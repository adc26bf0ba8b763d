/* Image decoding shared by the formats: telling them apart, the size checks, and turning a
 * decoded image into a sample (see data/image_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "data/image_internal.h"

em_status em_image_decode(const uint8_t *data, size_t n, const char *name, int64_t max_pixels,
                          em_image *out)
{
    *out = (em_image){0};
    if (n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8))
        return em_image_decode_png(data, n, name, max_pixels, out);
    if (n >= 3 && !memcmp(data, "\xff\xd8\xff", 3))
        return em_image_decode_jpeg(data, n, name, max_pixels, out);
    if (n >= 2 && !memcmp(data, "BM", 2))
        return em_image_decode_bmp(data, n, name, max_pixels, out);
    return em_set_error(EM_ERR_IO, "em_image_decode: '%s': not a PNG, JPEG or BMP file", name);
}

em_status em_image_alloc(const char *name, int64_t width, int64_t height, int channels,
                         int64_t max_pixels, em_image *out)
{
    if (width < 1 || height < 1 || width > 65535 || height > 65535)
        return em_set_error(EM_ERR_IO, "em_image_decode: '%s': its header says %lld x %lld "
                            "pixels", name, (long long)width, (long long)height);
    int64_t pixels = width * height, bytes;
    if (pixels > max_pixels)
        return em_set_error(EM_ERR_IO, "em_image_decode: '%s' is %lld x %lld = %lld pixels, more "
                            "than the %lld allowed (max_pixels)", name, (long long)width,
                            (long long)height, (long long)pixels, (long long)max_pixels);
    if (!em_size_mul(pixels, channels, &bytes) || !(out->pixels = malloc((size_t)bytes)))
        return em_set_error(EM_ERR_MEMORY, "em_image_decode: '%s': out of memory for %lld x %lld "
                            "pixels", name, (long long)width, (long long)height);
    out->width = (int)width;
    out->height = (int)height;
    out->channels = channels;
    return EM_OK;
}

void em_image_free(em_image *img)
{
    free(img->pixels);
    *img = (em_image){0};
}

/* The image's pixels as planes (channels, h, w) in [0, 1]. */
static void to_planes(const em_image *img, int channels, float *planes)
{
    size_t hw = (size_t)img->height * (size_t)img->width;
    const uint8_t *p = img->pixels;
    for (size_t k = 0; k < hw; k++) {
        const uint8_t *px = p + k * (size_t)img->channels;
        if (channels == 1) {
            unsigned v = img->channels == 1 ? px[0]
                                            : (77u * px[0] + 150u * px[1] + 29u * px[2]) >> 8;
            planes[k] = (float)v / 255.0f;
        } else {
            for (int c = 0; c < 3; c++)
                planes[c * hw + k] = (float)px[img->channels == 1 ? 0 : c] / 255.0f;
        }
    }
}

em_status em_image_sample(const em_image *img, int channels, int height, int width, float *x)
{
    if (img->width == width && img->height == height) {
        to_planes(img, channels, x);
        return EM_OK;
    }
    int64_t n;
    float *planes = NULL;
    if (!em_size_mul((int64_t)img->width * img->height, channels, &n) ||
        !em_size_mul(n, (int64_t)sizeof(float), &n) || !(planes = malloc((size_t)n)))
        return em_set_error(EM_ERR_MEMORY, "em_image_sample: out of memory for a %d x %d image",
                            img->width, img->height);
    to_planes(img, channels, planes);
    em_status st = em_resize_bilinear(planes, channels, img->height, img->width, x, height, width);
    free(planes);
    return st;
}
