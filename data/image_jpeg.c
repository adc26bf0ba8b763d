/* JPEG through libjpeg-turbo: 8-bit gray or RGB, the size checked from the frame header before
 * decoding, a bound on progressive scans and on the decoder's memory, and any warning about
 * corrupt data treated as an error (a damaged file never passes as a good sample). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

#include "data/image_internal.h"

#define MAX_SCANS 256 /* real progressive files have about 10; thousands only waste time */

typedef struct {
    struct jpeg_error_mgr base; /* first: libjpeg's err pointer is this struct's */
    jmp_buf jump;
    char why[JMSG_LENGTH_MAX]; /* the first error or warning */
} jpeg_errors;

static void on_error(j_common_ptr c)
{
    jpeg_errors *e = (jpeg_errors *)c->err;
    if (!e->why[0])
        c->err->format_message(c, e->why);
    longjmp(e->jump, 1);
}

/* Warnings (level -1) are kept: a file with any is refused after decoding. */
static void on_message(j_common_ptr c, int level)
{
    jpeg_errors *e = (jpeg_errors *)c->err;
    if (level < 0 && !e->why[0])
        c->err->format_message(c, e->why);
    if (level < 0)
        c->err->num_warnings++;
}

static void on_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    jpeg_errors *e = (jpeg_errors *)c->err;
    if (d->input_scan_number > MAX_SCANS) {
        snprintf(e->why, sizeof e->why, "more than %d scans", MAX_SCANS);
        longjmp(e->jump, 1);
    }
}

/* Decodes into out; 0, 1 after a libjpeg error or warning, -1 after one of ember's. */
static int decode(j_decompress_ptr d, jpeg_errors *err, const uint8_t *data, size_t n,
                  const char *name, int64_t max_pixels, em_image *out)
{
    if (setjmp(err->jump))
        return 1;
    jpeg_mem_src(d, data, (unsigned long)n);
    jpeg_read_header(d, TRUE);
    if (d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK) {
        em_set_error(EM_ERR_UNSUPPORTED, "em_image_decode: '%s': CMYK JPEG is not supported",
                     name);
        return -1;
    }
    int channels = d->jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
    d->out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    if (em_image_alloc(name, d->image_width, d->image_height, channels, max_pixels, out) != EM_OK)
        return -1;
    d->mem->max_memory_to_use = 16L * out->width * out->height + (64L << 20);
    jpeg_start_decompress(d);
    if (d->output_width != (JDIMENSION)out->width || d->output_height != (JDIMENSION)out->height
        || d->output_components != channels) {
        snprintf(err->why, sizeof err->why, "unexpected output size");
        return 1;
    }
    while (d->output_scanline < d->output_height) {
        JSAMPROW row = out->pixels + (size_t)d->output_scanline * (size_t)out->width * channels;
        jpeg_read_scanlines(d, &row, 1);
    }
    jpeg_finish_decompress(d);
    return err->base.num_warnings ? 1 : 0;
}

em_status em_image_decode_jpeg(const uint8_t *data, size_t n, const char *name,
                               int64_t max_pixels, em_image *out)
{
    struct jpeg_decompress_struct d = {0};
    jpeg_errors err = {0};
    struct jpeg_progress_mgr progress = {.progress_monitor = on_progress};
    d.err = jpeg_std_error(&err.base);
    err.base.error_exit = on_error;
    err.base.emit_message = on_message;
    int rc = 1;
    if (!setjmp(err.jump)) { /* creating can fail too (out of memory) */
        jpeg_create_decompress(&d);
        d.progress = &progress;
        rc = decode(&d, &err, data, n, name, max_pixels, out);
    }
    jpeg_destroy_decompress(&d);
    if (rc == 0)
        return EM_OK;
    em_image_free(out);
    return rc < 0 ? em_error_status()
                  : em_set_error(EM_ERR_IO, "em_image_decode: '%s': corrupt JPEG: %s", name,
                                 err.why);
}
