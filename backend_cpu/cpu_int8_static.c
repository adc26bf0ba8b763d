/* Static (calibrated) int8 kernels. Linear quantizes its input with fixed parameters. Conv2d
 * quantizes its input once into planes bordered with the zero point, then per block of output
 * rows gathers the patches straight into panels and runs the product with the weights as A
 * (output channels as rows), so that the epilogue writes NCHW rows with the fused ReLU. */
#include <emmintrin.h>
#include <omp.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_int8_internal.h"

/* output columns a conv task aims at (its patches stay within the L1 cache) */
#define BLOCK_COLS 64

int em_cpu_qlinear_static(int64_t m, int64_t n, int64_t k, const float *x, float x_scale,
                          int32_t x_zero_point, const void *packed, const float *w_scale,
                          int64_t n_scales, const float *bias, bool relu, float *y)
{
    if (!(x_scale > 0) || x_zero_point < 0 || x_zero_point > EM_CPU_U7_MAX)
        return EM_KERNEL_UNSUPPORTED;
    return em_int8_qlinear(em_cpu_int8_best_path(), m, n, k, x, false, x_scale, x_zero_point,
                           packed, w_scale, n_scales, bias, relu, y);
}

/* How a conv is laid out: the quantized input planes (ph, pw), bordered with the zero point
 * and wide enough that every tap of a padded output row reads inside its plane; each output
 * row is wpad product columns (a multiple of the panel); a task covers block_rows output rows,
 * its patches a whole number of tiles of kg groups. */
typedef struct {
    int64_t ph, pw, wpad, block_rows, blocks, kg, block_bytes;
} conv_plan;

static conv_plan plan_conv(const em_conv2d_shape *s)
{
    conv_plan c = {.wpad = em_int8_round_up(s->w_out, EM_INT8_PANEL),
                   .kg = em_int8_groups(s->c_in * s->kh * s->kw)};
    int64_t rows_need = (s->h_out - 1) * s->stride[0] + (s->kh - 1) * s->dilation[0] + 1;
    int64_t cols_need = (c.wpad - 1) * s->stride[1] + (s->kw - 1) * s->dilation[1] + 1;
    c.ph = s->h + 2 * s->pad[0] > rows_need ? s->h + 2 * s->pad[0] : rows_need;
    c.pw = s->w + 2 * s->pad[1] > cols_need ? s->w + 2 * s->pad[1] : cols_need;
    c.block_rows = BLOCK_COLS / c.wpad > 1 ? BLOCK_COLS / c.wpad : 1;
    c.blocks = (s->h_out + c.block_rows - 1) / c.block_rows;
    c.block_bytes = em_int8_round_up(c.block_rows * c.wpad, EM_INT8_TILE_COLS) /
                    EM_INT8_PANEL * c.kg * EM_INT8_GROUP_BYTES;
    return c;
}

/* xq (N, C_in, ph, pw): x quantized, the border at the zero point; each plane is quantized
 * whole into x8 (N, C_in, H, W), then its rows are moved into place. */
static void quantize_planes(const em_conv2d_shape *s, const conv_plan *c, bool avx2,
                            const float *x, float scale, int32_t zp, uint8_t *x8, uint8_t *xq)
{
    int64_t hw = s->h * s->w;
    #pragma omp parallel for schedule(static) num_threads(em_cpu_threads())
    for (int64_t plane = 0; plane < s->n * s->c_in; plane++) {
        uint8_t *q = xq + plane * c->ph * c->pw;
        em_int8_quantize_fixed(avx2, hw, x + plane * hw, scale, zp, x8 + plane * hw);
        memset(q, zp, (size_t)(c->ph * c->pw));
        for (int64_t iy = 0; iy < s->h; iy++)
            memcpy(q + (s->pad[0] + iy) * c->pw + s->pad[1], x8 + plane * hw + iy * s->w,
                   (size_t)s->w);
    }
}

/* One panel group (64 bytes: 16 pixels x taps 4g .. 4g + 3) from the 16 pixels whose first
 * tap reads src; tap t reads src + tap[t] and then every sx bytes. */
static void gather_group(const uint8_t *src, const int64_t *tap, int64_t taps, int64_t g,
                         int64_t sx, uint8_t *dst)
{
    __m128i t[EM_INT8_KGROUP];
    for (int q = 0; q < EM_INT8_KGROUP; q++) {
        int64_t i = g * EM_INT8_KGROUP + q;
        uint8_t run[EM_INT8_PANEL];
        if (i >= taps) {
            t[q] = _mm_setzero_si128();
        } else if (sx == 1) {
            t[q] = _mm_loadu_si128((const __m128i *)(src + tap[i]));
        } else {
            for (int px = 0; px < EM_INT8_PANEL; px++)
                run[px] = src[tap[i] + px * sx];
            t[q] = _mm_loadu_si128((const __m128i *)run);
        }
    }
    /* 4 runs of 16 bytes -> 16 pixels of 4 bytes */
    __m128i lo01 = _mm_unpacklo_epi8(t[0], t[1]), hi01 = _mm_unpackhi_epi8(t[0], t[1]);
    __m128i lo23 = _mm_unpacklo_epi8(t[2], t[3]), hi23 = _mm_unpackhi_epi8(t[2], t[3]);
    _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(lo01, lo23));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(lo01, lo23));
    _mm_storeu_si128((__m128i *)(dst + 32), _mm_unpacklo_epi16(hi01, hi23));
    _mm_storeu_si128((__m128i *)(dst + 48), _mm_unpackhi_epi16(hi01, hi23));
}

/* The patches of output rows oy0 .. oy0 + rows - 1 of one image as B panels (columns
 * (oy - oy0) * wpad + ox); the panels past the last row, up to a tile, are zero. */
static void gather_patches(const em_conv2d_shape *s, const conv_plan *c, const uint8_t *xq,
                           const int64_t *tap, int64_t oy0, int64_t rows, uint8_t *b)
{
    int64_t taps = s->c_in * s->kh * s->kw, panel = c->kg * EM_INT8_GROUP_BYTES;
    int64_t panels = rows * c->wpad / EM_INT8_PANEL;
    for (int64_t pn = 0; pn < panels; pn++) {
        int64_t oy = oy0 + pn * EM_INT8_PANEL / c->wpad, ox = pn * EM_INT8_PANEL % c->wpad;
        const uint8_t *src = xq + oy * s->stride[0] * c->pw + ox * s->stride[1];
        for (int64_t g = 0; g < c->kg; g++)
            gather_group(src, tap, taps, g, s->stride[1],
                         b + pn * panel + g * EM_INT8_GROUP_BYTES);
    }
    int64_t used = panels * panel;
    memset(b + used, 0, (size_t)(em_int8_round_up(rows * c->wpad, EM_INT8_TILE_COLS) /
                                 EM_INT8_PANEL * panel - used));
}

/* tap[i] (C_in * KH * KW): the offset in the planes of tap i = (ci, ky, kx). */
static void tap_offsets(const em_conv2d_shape *s, const conv_plan *c, int64_t *tap)
{
    for (int64_t ci = 0, i = 0; ci < s->c_in; ci++)
        for (int64_t ky = 0; ky < s->kh; ky++)
            for (int64_t kx = 0; kx < s->kw; kx++, i++)
                tap[i] = (ci * c->ph + ky * s->dilation[0]) * c->pw + kx * s->dilation[1];
}

/* y's blocks: each gathers its patches into its thread's b (threads x block_bytes) and runs the product on them. */
static void conv_blocks(em_cpu_int8_path path, const em_conv2d_shape *s, const conv_plan *c,
                        const uint8_t *xq, const int64_t *tap, const void *packed,
                        const em_int8_epilogue *epi, int threads, uint8_t *b, float *y)
{
    int64_t hw = s->h_out * s->w_out, cp = em_int8_round_up(s->c_out, EM_INT8_TILE_COLS);
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < s->n * c->blocks; t++) {
        int64_t img = t / c->blocks, oy0 = t % c->blocks * c->block_rows;
        int64_t rows = s->h_out - oy0 < c->block_rows ? s->h_out - oy0 : c->block_rows;
        uint8_t *bt = b + omp_get_thread_num() * c->block_bytes;
        gather_patches(s, c, xq + img * s->c_in * c->ph * c->pw, tap, oy0, rows, bt);
        em_int8_product p = {.m = s->c_out, .n = rows * c->wpad, .k = c->kg * EM_INT8_KGROUP,
                             .a = (const uint8_t *)((const int32_t *)packed + cp),
                             .a_signed = true, .b = (const int8_t *)bt,
                             .b_panel = c->kg * EM_INT8_GROUP_BYTES, .epi = epi,
                             .out = y + img * s->c_out * hw + oy0 * s->w_out, .ldo = hw,
                             .seg = c->wpad, .seg_valid = s->w_out};
        em_int8_product_run(path, &p, false);
    }
}

int em_cpu_qconv2d_static_path(em_cpu_int8_path path, const em_conv2d_shape *s, const float *x,
                               float x_scale, int32_t x_zero_point, const void *packed,
                               const float *w_scale, int64_t n_scales, const float *bias,
                               bool relu, float *y)
{
    if (s->groups != 1 || !(x_scale > 0) || x_zero_point < 0 || x_zero_point > EM_CPU_U7_MAX ||
        (n_scales != 1 && n_scales != s->c_out) || !em_cpu_int8_path_supported(path))
        return EM_KERNEL_UNSUPPORTED;
    if (s->n * s->c_out * s->h_out * s->w_out == 0)
        return EM_KERNEL_OK;
    conv_plan c = plan_conv(s);
    int threads = em_cpu_threads();
    int64_t taps = s->c_in * s->kh * s->kw, n_tap = taps * (int64_t)sizeof(int64_t);
    int64_t n_b = threads * c.block_bytes, n_q = s->n * s->c_in * c.ph * c.pw;
    uint8_t *work = em_cpu_scratch((size_t)(n_tap + n_b + n_q + s->n * s->c_in * s->h * s->w));
    int64_t *tap = (int64_t *)work;    // (taps)
    uint8_t *b = work + n_tap;         // (threads, block_bytes)
    uint8_t *xq = b + n_b;             // (N, C_in, ph, pw)
    uint8_t *x8 = xq + n_q;            // (N, C_in, H, W)
    em_int8_epilogue epi;
    void *arrays = work ? em_int8_epilogue_init(&epi, s->c_out, packed, x_scale, x_zero_point,
                                                w_scale, n_scales, bias)
                        : NULL;
    if (arrays) {
        epi.per_row = true;
        epi.relu = relu;
        quantize_planes(s, &c, path != EM_CPU_INT8_PORTABLE && em_cpu_has_avx2(), x, x_scale,
                        x_zero_point, x8, xq);
        tap_offsets(s, &c, tap);
        conv_blocks(path, s, &c, xq, tap, packed, &epi, threads, b, y);
    }
    em_cpu_scratch_free(work);
    em_cpu_scratch_free(arrays);
    return arrays ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}

int em_cpu_qconv2d_static(const em_conv2d_shape *s, const float *x, float x_scale,
                          int32_t x_zero_point, const void *packed, const float *w_scale,
                          int64_t n_scales, const float *bias, bool relu, float *y)
{
    return em_cpu_qconv2d_static_path(em_cpu_int8_best_path(), s, x, x_scale, x_zero_point,
                                      packed, w_scale, n_scales, bias, relu, y);
}
