/* BMP by ember's own strict reader: uncompressed 8-bit (palette), 24-bit and 32-bit images
 * (BI_RGB, or BI_BITFIELDS with the usual masks), bottom-up or top-down, every field checked
 * against the file before a pixel is read. */
#include <string.h>

#include "data/image_internal.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

typedef struct {
    int64_t width, height; /* height > 0 here; top_down says the order */
    bool top_down;
    int bpp;
    uint32_t data_at;      /* the pixel array's offset in the file */
    const uint8_t *palette; /* 8 bpp: n_colors entries of B, G, R, 0 */
    uint32_t n_colors;
} bmp_header;

static em_status bad(const char *name, const char *why)
{
    return em_set_error(EM_ERR_IO, "em_image_decode: '%s': corrupt BMP: %s", name, why);
}

/* 32-bit BI_BITFIELDS: only the masks of plain BGRA (right after the 40-byte header) are read. */
static bool usual_masks(const uint8_t *data, size_t n)
{
    if (n < 14 + 40 + 12)
        return false;
    const uint8_t *m = data + 14 + 40;
    return le32(m) == 0x00FF0000 && le32(m + 4) == 0x0000FF00 && le32(m + 8) == 0x000000FF;
}

static em_status parse_header(const uint8_t *data, size_t n, const char *name, bmp_header *h)
{
    if (n < 14 + 40)
        return bad(name, "the file is shorter than its headers");
    uint32_t header_size = le32(data + 14);
    if (header_size != 40 && header_size != 52 && header_size != 56 && header_size != 108 &&
        header_size != 124)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_image_decode: '%s': BMP info header of %u "
                            "bytes is not supported", name, (unsigned)header_size);
    if (14 + (size_t)header_size > n)
        return bad(name, "the file is shorter than its headers");
    int32_t w = (int32_t)le32(data + 18), hh = (int32_t)le32(data + 22);
    uint32_t compression = le32(data + 30);
    h->bpp = le16(data + 28);
    h->data_at = le32(data + 10);
    h->width = w;
    h->top_down = hh < 0;
    h->height = hh < 0 ? -(int64_t)hh : hh;
    if (le16(data + 26) != 1)
        return bad(name, "planes is not 1");
    bool rgb = compression == 0, fields = compression == 3 && h->bpp == 32;
    if (!(h->bpp == 8 || h->bpp == 24 || h->bpp == 32) || !(rgb || fields) ||
        (fields && !usual_masks(data, n)))
        return em_set_error(EM_ERR_UNSUPPORTED, "em_image_decode: '%s': BMP with %d bits per "
                            "pixel and compression %u is not supported (8, 24 or 32 bits, "
                            "uncompressed)", name, h->bpp, (unsigned)compression);
    if (h->bpp == 8) {
        uint32_t used = le32(data + 46);
        h->n_colors = used ? used : 256;
        size_t at = 14 + (size_t)header_size;
        if (h->n_colors > 256 || at + 4 * (size_t)h->n_colors > n ||
            at + 4 * (size_t)h->n_colors > h->data_at)
            return bad(name, "the palette does not fit");
        h->palette = data + at;
    }
    return EM_OK;
}

em_status em_image_decode_bmp(const uint8_t *data, size_t n, const char *name,
                              int64_t max_pixels, em_image *out)
{
    bmp_header h = {0};
    em_status st = parse_header(data, n, name, &h);
    if (st == EM_OK)
        st = em_image_alloc(name, h.width, h.height, 3, max_pixels, out);
    if (st != EM_OK)
        return st;
    size_t row = ((size_t)out->width * (size_t)h.bpp + 31) / 32 * 4;
    if (h.data_at > n || row * (size_t)out->height > n - h.data_at) {
        em_image_free(out);
        return bad(name, "the pixel rows do not fit in the file");
    }
    for (int y = 0; y < out->height; y++) {
        int file_row = h.top_down ? y : out->height - 1 - y;
        const uint8_t *src = data + h.data_at + row * (size_t)file_row;
        uint8_t *dst = out->pixels + (size_t)y * (size_t)out->width * 3;
        for (int x = 0; x < out->width; x++, dst += 3) {
            if (h.bpp == 8 && src[x] >= h.n_colors) {
                em_image_free(out);
                return bad(name, "a pixel's palette index is past the palette");
            }
            const uint8_t *bgr = h.bpp == 8 ? h.palette + 4 * (size_t)src[x]
                                            : src + (size_t)x * (size_t)(h.bpp / 8);
            dst[0] = bgr[2];
            dst[1] = bgr[1];
            dst[2] = bgr[0];
        }
    }
    return EM_OK;
}
