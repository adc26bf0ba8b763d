/* Image decoding (data/image_internal.h) and the image-folder dataset's handling of bad files:
 * PNG and JPEG written by libpng and libjpeg themselves decode to the right pixels; the files
 * that broke the old decoder (a 0-pixel-wide BMP, a JPEG whose Huffman table counts overflow, a
 * tiny header claiming a huge image) are clear errors; the pixel cap is checked from the header;
 * with EM_BAD_IMAGE_SKIP one bad file costs only its own sample and is reported. */
#include <criterion/criterion.h>
#include <jpeglib.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/image_internal.h"
#include "ember.h"
#include "helpers/files.h"

static char dir[64];

static void make_dir(void)
{
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_images_"));
    em_error_clear();
}

static void cleanup(void)
{
    em_test_remove_tree(dir);
}

TestSuite(image_decode, .init = make_dir, .fini = cleanup);

static em_status decode(const void *data, size_t n, em_image *img)
{
    return em_image_decode(data, n, "test.img", EM_IMAGE_DEFAULT_MAX_PIXELS, img);
}

/* ---- fixtures made by the real libraries ---- */

typedef struct {
    uint8_t *p;
    size_t n;
} buffer;

static void png_write_to(png_structp png, png_bytep data, size_t len)
{
    buffer *b = png_get_io_ptr(png);
    b->p = realloc(b->p, b->n + len);
    memcpy(b->p + b->n, data, len);
    b->n += len;
}

static void png_flush_none(png_structp png)
{
    (void)png;
}

/* A PNG of w x h pixels from rows of the given color type and bit depth (16-bit big-endian). */
static buffer make_png(int w, int h, int color, int depth, const uint8_t *pixels,
                       const png_color *palette, int n_palette)
{
    buffer b = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    cr_assert(png && info && !setjmp(png_jmpbuf(png)));
    png_set_write_fn(png, &b, png_write_to, png_flush_none);
    png_set_IHDR(png, info, w, h, depth, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette)
        png_set_PLTE(png, info, palette, n_palette);
    png_write_info(png, info);
    size_t row = png_get_rowbytes(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, pixels + y * row);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return b;
}

static buffer make_jpeg(int w, int h, int channels, const uint8_t *pixels)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &out, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 100, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)pixels + c.next_scanline * (size_t)w * channels;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return (buffer){out, n};
}

static void expect_pixels(const em_image *img, int w, int h, int channels, const uint8_t *want,
                          int tolerance)
{
    cr_assert(img->width == w && img->height == h && img->channels == channels,
              "%d x %d x %d", img->width, img->height, img->channels);
    for (int k = 0; k < w * h * channels; k++)
        cr_assert(abs(img->pixels[k] - want[k]) <= tolerance, "byte %d: %d, want %d", k,
                  img->pixels[k], want[k]);
}

Test(image_decode, png_kinds_come_out_as_8_bit_gray_or_rgb)
{
    const uint8_t rgba[2 * 4] = {10, 20, 30, 0, 200, 150, 100, 255};
    buffer b = make_png(2, 1, PNG_COLOR_TYPE_RGBA, 8, rgba, NULL, 0);
    em_image img;
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    expect_pixels(&img, 2, 1, 3, (const uint8_t[]){10, 20, 30, 200, 150, 100}, 0);
    em_image_free(&img);
    free(b.p);

    const uint8_t rgb16[2 * 6] = {0x12, 0x34, 0xab, 0xcd, 0xff, 0xff, 0, 1, 0x80, 0, 0x7f, 0xff};
    b = make_png(2, 1, PNG_COLOR_TYPE_RGB, 16, rgb16, NULL, 0);
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    expect_pixels(&img, 2, 1, 3, (const uint8_t[]){0x12, 0xab, 0xff, 0, 0x80, 0x7f}, 0);
    em_image_free(&img);
    free(b.p);

    const png_color pal[3] = {{1, 2, 3}, {4, 5, 6}, {250, 251, 252}};
    const uint8_t idx[3] = {2, 0, 1};
    b = make_png(3, 1, PNG_COLOR_TYPE_PALETTE, 8, idx, pal, 3);
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    expect_pixels(&img, 3, 1, 3, (const uint8_t[]){250, 251, 252, 1, 2, 3, 4, 5, 6}, 0);
    em_image_free(&img);
    free(b.p);

    const uint8_t bits[1] = {0xa0}; /* 1-bit gray: 1 0 1 */
    b = make_png(3, 1, PNG_COLOR_TYPE_GRAY, 1, bits, NULL, 0);
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    expect_pixels(&img, 3, 1, 1, (const uint8_t[]){255, 0, 255}, 0);
    em_image_free(&img);
    free(b.p);
}

Test(image_decode, jpeg_from_libjpeg_decodes_close_to_its_source)
{
    uint8_t rgb[8 * 8 * 3], gray[8 * 8];
    for (int k = 0; k < 64; k++) {
        gray[k] = (uint8_t)(k * 3);
        for (int c = 0; c < 3; c++)
            rgb[3 * k + c] = (uint8_t)(40 + 2 * k + 30 * c);
    }
    em_image img;
    buffer b = make_jpeg(8, 8, 3, rgb);
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    expect_pixels(&img, 8, 8, 3, rgb, 4); /* quality 100 with 4:2:0 chroma: within 4 levels */
    em_image_free(&img);
    free(b.p);
    b = make_jpeg(8, 8, 1, gray);
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    expect_pixels(&img, 8, 8, 1, gray, 2);
    em_image_free(&img);
    /* the same file cut short is an error, not a gray-filled image */
    em_error_clear();
    cr_assert_eq(decode(b.p, b.n - 20, &img), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), "corrupt JPEG"), "%s", em_error());
    free(b.p);
}

/* ffd8 ffc4 0013 00 + ff x 16: a DHT whose 16 counts sum far past 256 (stb_image 2.27 wrote out
 * of bounds on it). */
Test(image_decode, jpeg_huffman_counts_past_256)
{
    uint8_t data[23] = {0xff, 0xd8, 0xff, 0xc4, 0x00, 0x13, 0x00};
    memset(data + 7, 0xff, 16);
    em_image img;
    cr_assert_eq(decode(data, sizeof data, &img), EM_ERR_IO);
    cr_assert(strncmp(em_error(), "em_image_decode: 'test.img': corrupt JPEG: ", 43) == 0, "%s",
              em_error());
    cr_assert_null(img.pixels);
}

/* A JPEG frame header claiming 8208 x 63247 pixels is refused before anything is decoded. */
Test(image_decode, jpeg_claiming_a_huge_frame)
{
    const uint8_t data[] = {
        0xff, 0xd8, /* SOI, then SOF0 63247 x 8208, then SOS */
        0xff, 0xc0, 0x00, 0x11, 0x08, 0xf7, 0x0f, 0x20, 0x10, 0x03,
        0x01, 0x11, 0x00, 0x02, 0x11, 0x00, 0x03, 0x11, 0x00,
        0xff, 0xda, 0x00, 0x0c, 0x03, 0x01, 0x00, 0x02, 0x11, 0x03, 0x11, 0x00, 0x3f, 0x00,
    };
    em_image img;
    cr_assert_eq(decode(data, sizeof data, &img), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "em_image_decode: 'test.img' is 8208 x 63247 = 519131376 "
                                 "pixels, more than the 67108864 allowed (max_pixels)");
}

Test(image_decode, png_claiming_a_huge_image)
{
    const uint8_t one[1] = {0};
    buffer b = make_png(1, 1, PNG_COLOR_TYPE_GRAY, 8, one, NULL, 0);
    /* IHDR width and height at bytes 16..23; the CRC must follow the change */
    const uint8_t wh[8] = {0, 0, 0xea, 0x60, 0, 0, 0xea, 0x60}; /* 60000 x 60000 */
    memcpy(b.p + 16, wh, 8);
    uLong crc = crc32(0, b.p + 12, 17);
    for (int k = 0; k < 4; k++)
        b.p[29 + k] = (uint8_t)(crc >> (24 - 8 * k));
    em_image img;
    cr_assert_eq(decode(b.p, b.n, &img), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "em_image_decode: 'test.img' is 60000 x 60000 = 3600000000 "
                                 "pixels, more than the 67108864 allowed (max_pixels)");
    free(b.p);
}

/* A 24-bit BMP header of w x h with the pixel rows (zeros) after it. */
static buffer make_bmp(int32_t w, int32_t h, size_t pixel_bytes)
{
    buffer b = {calloc(1, 54 + pixel_bytes), 54 + pixel_bytes};
    uint32_t f[6] = {(uint32_t)b.n, 0, 54, 40, (uint32_t)w, (uint32_t)h};
    b.p[0] = 'B';
    b.p[1] = 'M';
    memcpy(b.p + 2, &f[0], 4);
    memcpy(b.p + 10, &f[2], 4);
    memcpy(b.p + 14, &f[3], 4);
    memcpy(b.p + 18, &f[4], 4);
    memcpy(b.p + 22, &f[5], 4);
    b.p[26] = 1;
    b.p[28] = 24;
    return b;
}

Test(image_decode, bmp_with_no_pixels_or_too_few_bytes)
{
    em_image img;
    buffer b = make_bmp(0, 2, 16); /* accepted by stb_image, then read before its buffer */
    cr_assert_eq(decode(b.p, b.n, &img), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "em_image_decode: 'test.img': its header says 0 x 2 pixels");
    free(b.p);
    em_error_clear();
    b = make_bmp(4, -3, 3 * 12 - 1); /* top-down 4 x 3: 36 bytes needed */
    cr_assert_eq(decode(b.p, b.n, &img), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "em_image_decode: 'test.img': corrupt BMP: the pixel rows do "
                                 "not fit in the file");
    free(b.p);
    em_error_clear();
    b = make_bmp(4, -3, 36);
    cr_assert_eq(decode(b.p, b.n, &img), EM_OK, "%s", em_error());
    cr_assert(img.width == 4 && img.height == 3);
    em_image_free(&img);
    free(b.p);
}

Test(image_decode, the_pixel_cap_is_configurable)
{
    buffer b = make_bmp(4, 3, 36);
    em_image img;
    cr_assert_eq(em_image_decode(b.p, b.n, "small.bmp", 11, &img), EM_ERR_IO);
    cr_assert_str_eq(em_error(), "em_image_decode: 'small.bmp' is 4 x 3 = 12 pixels, more than "
                                 "the 11 allowed (max_pixels)");
    em_error_clear();
    cr_assert_eq(em_image_decode(b.p, b.n, "small.bmp", 12, &img), EM_OK, "%s", em_error());
    em_image_free(&img);
    free(b.p);
}

Test(image_decode, resize_refuses_empty_sizes)
{
    float src[4] = {0}, dst[4];
    cr_assert_eq(em_resize_bilinear(src, 1, 2, 0, dst, 2, 2), EM_ERR_ARG);
    em_error_clear();
    cr_assert_eq(em_resize_bilinear(src, 1, 2, 2, dst, 0, 2), EM_ERR_ARG);
}

/* ---- the dataset ---- */

static void write_buffer(const char *path, buffer b)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b.p, 1, b.n, f), b.n);
    fclose(f);
    free(b.p);
}

/* root/a/{0,1,2}.bmp (2 x 2), root/a/3.png (not a PNG), root/a/notes.txt, root/readme */
static const char *make_folder(void)
{
    static char root[128];
    snprintf(root, sizeof root, "%s/root", dir);
    char p[256];
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/a", root);
    mkdir(p, 0755);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/a/%d.bmp", root, i);
        write_buffer(p, make_bmp(2, 2, 16));
    }
    const char *text[][2] = {{"a/3.png", "not a png"}, {"a/notes.txt", "n"}, {"readme", "r"}};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", root, text[i][0]);
        FILE *f = fopen(p, "w");
        fputs(text[i][1], f);
        fclose(f);
    }
    return root;
}

Test(image_decode, a_bad_file_costs_only_its_sample_when_skipping)
{
    const char *root = make_folder();
    em_dataset *ds = em_image_folder(root, (em_image_folder_opts){
                                               .height = 2, .width = 2,
                                               .on_bad_image = EM_BAD_IMAGE_SKIP});
    cr_assert_not_null(ds, "%s", em_error());
    cr_assert_eq(em_dataset_len(ds), 4);
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4, .num_workers = 2});
    em_batch b;
    em_scope_begin();
    cr_assert_eq(em_loader_next(dl, &b), EM_OK, "%s", em_error());
    cr_assert_eq(em_size(b.x, 0), 3, "the three good images make the batch");
    em_scope_end();
    cr_assert_eq(em_loader_next(dl, &b), EM_END);
    cr_assert_eq(em_error_status(), EM_OK, "a skipped sample is not an error: %s", em_error());
    em_loader_free(dl);
    const char *lines[8];
    int64_t n = em_image_folder_skipped(ds, lines, 8);
    cr_assert_eq(n, 3);
    char want[3][256];
    snprintf(want[0], 256, "%s/readme: not a class folder", root);
    snprintf(want[1], 256, "%s/a/notes.txt: not a PNG, JPEG or BMP file by its name", root);
    snprintf(want[2], 256, "em_image_decode: '%s/a/3.png': not a PNG, JPEG or BMP file", root);
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(lines[i], want[i]);
    em_dataset_free(ds);
}

Test(image_decode, a_bad_file_fails_its_batch_by_default)
{
    const char *root = make_folder();
    em_dataset *ds = em_image_folder(root, (em_image_folder_opts){.height = 2, .width = 2});
    em_loader *dl = em_loader_new(ds, (em_loader_opts){.batch_size = 4});
    em_batch b;
    em_scope_begin();
    cr_assert_eq(em_loader_next(dl, &b), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), "a/3.png"), "%s", em_error());
    em_scope_end();
    em_loader_free(dl);
    cr_assert_eq(em_image_folder_skipped(ds, NULL, 0), 2, "the listing's two");
    em_dataset_free(ds);
}
