/* Bilinear image resize with half-pixel centres (align_corners=False), as the image-folder dataset
 * uses to bring every image to one size. */
#include "data/data.h"

/* Source index and weight of the second neighbour for output position o. */
static void source_coord(int o, int in, int out, int *i0, int *i1, float *lambda)
{
    float scale = (float)in / (float)out;
    float s = ((float)o + 0.5f) * scale - 0.5f;
    if (s < 0.0f)
        s = 0.0f;
    *i0 = (int)s;
    if (*i0 > in - 1)
        *i0 = in - 1;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *lambda = s - (float)*i0;
}

em_status em_resize_bilinear(const float *src, int c, int h, int w, float *dst, int oh, int ow)
{
    // src (c, h, w), dst (c, oh, ow)
    if (!src || !dst || c < 1 || h < 1 || w < 1 || oh < 1 || ow < 1)
        return em_set_error(EM_ERR_ARG, "em_resize_bilinear: sizes (%d, %d, %d) -> (%d, %d) must "
                            "be at least 1, buffers not NULL", c, h, w, oh, ow);
    for (int y = 0; y < oh; y++) {
        int y0, y1;
        float ly;
        source_coord(y, h, oh, &y0, &y1, &ly);
        for (int x = 0; x < ow; x++) {
            int x0, x1;
            float lx;
            source_coord(x, w, ow, &x0, &x1, &lx);
            for (int ch = 0; ch < c; ch++) {
                const float *p = src + (size_t)ch * h * w;
                const float *r0 = p + (size_t)y0 * w, *r1 = p + (size_t)y1 * w;
                float top = (1.0f - lx) * r0[x0] + lx * r0[x1];
                float bot = (1.0f - lx) * r1[x0] + lx * r1[x1];
                dst[((size_t)ch * oh + y) * ow + x] = (1.0f - ly) * top + ly * bot;
            }
        }
    }
    return EM_OK;
}
