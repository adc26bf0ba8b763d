/* PNG through libpng: 8-bit gray or RGB out of every PNG kind (palette expanded, 16-bit cut to
 * its high byte, alpha dropped), the size checked from IHDR before any pixel is decoded. */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "data/image_internal.h"

typedef struct {
    const uint8_t *data;
    size_t n, at;
    char why[200]; /* libpng's first error */
} png_source;

static void read_bytes(png_structp png, png_bytep out, size_t len)
{
    png_source *src = png_get_io_ptr(png);
    if (len > src->n - src->at)
        png_error(png, "the file ends early");
    memcpy(out, src->data + src->at, len);
    src->at += len;
}

static void on_error(png_structp png, png_const_charp msg)
{
    png_source *src = png_get_error_ptr(png);
    snprintf(src->why, sizeof src->why, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png, (void)msg; /* ancillary trouble; the pixels are still right */
}

/* Sets libpng's transforms to 8-bit gray or RGB without alpha; the channel count out. */
static int set_transforms(png_structp png, png_infop info)
{
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (depth == 16)
        png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (color & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    return color & PNG_COLOR_MASK_COLOR ? 3 : 1;
}

/* Decodes into out (its pixels freed by the caller on failure); 0, or 1 after a libpng error,
 * or -1 after an error of ember's (already recorded). */
static int decode(png_structp png, png_infop info, png_source *src, const char *name,
                  int64_t max_pixels, em_image *out, png_bytep **rows)
{
    if (setjmp(png_jmpbuf(png)))
        return 1;
    png_set_read_fn(png, src, read_bytes);
    png_set_user_limits(png, 65535, 65535);
    png_set_chunk_malloc_max(png, (png_alloc_size_t)8 << 20);
    png_read_info(png, info);
    int channels = set_transforms(png, info);
    if (em_image_alloc(name, png_get_image_width(png, info), png_get_image_height(png, info),
                       channels, max_pixels, out) != EM_OK)
        return -1;
    size_t row = (size_t)out->width * (size_t)channels;
    if (png_get_rowbytes(png, info) != row)
        png_error(png, "unexpected row size after the transforms");
    if (!(*rows = malloc((size_t)out->height * sizeof **rows))) {
        em_set_error(EM_ERR_MEMORY, "em_image_decode: '%s': out of memory", name);
        return -1;
    }
    for (int y = 0; y < out->height; y++)
        (*rows)[y] = out->pixels + (size_t)y * row;
    png_read_image(png, *rows);
    png_read_end(png, NULL);
    return 0;
}

em_status em_image_decode_png(const uint8_t *data, size_t n, const char *name,
                              int64_t max_pixels, em_image *out)
{
    png_source src = {.data = data, .n = n};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return em_set_error(EM_ERR_MEMORY, "em_image_decode: '%s': out of memory", name);
    }
    png_bytep *rows = NULL;
    int rc = decode(png, info, &src, name, max_pixels, out, &rows);
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    if (rc == 0)
        return EM_OK;
    em_image_free(out);
    return rc < 0 ? em_error_status()
                  : em_set_error(EM_ERR_IO, "em_image_decode: '%s': corrupt PNG: %s", name,
                                 src.why);
}
