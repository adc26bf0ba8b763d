/* Direct f32 convolution for stride-1 layers on AVX2+FMA: each image is copied into
 * zero-bordered planes and every tap of the kernel reads a shifted run of them in place of an
 * im2col matrix. Forward tiles hold 6 output channels x 16 columns (32 on AVX-512) of one output
 * row in registers (cpu_conv_direct_tile_impl_internal.h); grad_input is the forward pass over
 * gy with the flipped, transposed weights; grad_weight tiles hold 4 output channels x 3 taps
 * summed over a block of images. Images stored as f16/bf16 are widened row by row as they are
 * copied into the planes (and gy into its grid), and each image's output is narrowed while it
 * is still in cache: the same bits as widening the whole batch first and narrowing the whole
 * output after, without those two passes over memory. */
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_conv_direct_internal.h"
#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

#define DCONV_TARGET __attribute__((target("avx2,fma,f16c")))
/* The packed weight panel of one tile, MR x C*KH*KW floats, stays in L1 below this. */
#define DCONV_MAX_TAPS 1152

/* A direct convolution seen as its forward pass: input (C, H, W) read through taps (KH, KW)
 * with dilation and padding into output (M, H_out, W_out), stride 1. The input is copied into
 * zero-bordered planes (C, Hp, Wp), Hp = H_out + (KH-1)*dh and Wp = W_out + (KW-1)*dw, followed
 * by `slack` zeros: output (oh, ow) reads tap (c, i, j) at c*plane + (oh + i*dh)*Wp + ow + j*dw,
 * and a whole vector load (8 or 16 lanes) past the last output column of a row reads the next
 * row or the slack (lanes that are never kept). Planes start an odd number of cache lines apart,
 * so the same row of many planes does not crowd one cache set. */
typedef struct {
    int64_t c, h, w;
    int64_t m, ho, wo;
    int64_t kh, kw, dh, dw, ph, pw;
    int64_t hp, wp, plane; /* padded plane rows, row width, stride of planes */
    int64_t slack;         /* zeros after the last plane */
    int64_t k;             /* taps C*KH*KW */
} dconv_geom;

static dconv_geom dconv_geom_of(int64_t c, int64_t h, int64_t w, int64_t m, int64_t ho,
                                int64_t wo, const em_conv2d_shape *s, int64_t ph, int64_t pw)
{
    dconv_geom g = {.c = c, .h = h, .w = w, .m = m, .ho = ho, .wo = wo, .kh = s->kh,
                    .kw = s->kw, .dh = s->dilation[0], .dw = s->dilation[1], .ph = ph, .pw = pw};
    g.hp = ho + (g.kh - 1) * g.dh;
    g.wp = wo + (g.kw - 1) * g.dw;
    g.plane = (g.hp * g.wp + 15) / 16 * 16;
    if (g.plane / 16 % 2 == 0)
        g.plane += 16;
    g.slack = (g.kw - 1) * g.dw + 32;
    g.k = c * g.kh * g.kw;
    return g;
}

/* Floats of one image's padded planes and slack. */
static int64_t dconv_padded(const dconv_geom *g)
{
    return g->c * g->plane + g->slack;
}

/* The forward pass of s itself. */
static dconv_geom dconv_forward_geom(const em_conv2d_shape *s)
{
    return dconv_geom_of(s->c_in, s->h, s->w, s->c_out, s->h_out, s->w_out, s, s->pad[0],
                         s->pad[1]);
}

/* grad_input as a forward pass: gy (C_out, H_out, W_out) padded by (K-1)*dilation - pad into
 * gx (C_in, H, W). */
static dconv_geom dconv_grad_input_geom(const em_conv2d_shape *s)
{
    return dconv_geom_of(s->c_out, s->h_out, s->w_out, s->c_in, s->h, s->w, s,
                         (s->kh - 1) * s->dilation[0] - s->pad[0],
                         (s->kw - 1) * s->dilation[1] - s->pad[1]);
}

static bool dconv_geom_ok(const dconv_geom *g)
{
    return g->wo >= 8 && g->ho >= 1 && g->k <= DCONV_MAX_TAPS && g->ph >= 0 && g->pw >= 0
           && g->ph + g->h <= g->hp && g->pw + g->w <= g->wp;
}

bool em_cpu_conv_direct_fits(const em_conv2d_shape *s)
{
    const dconv_geom g = dconv_forward_geom(s);
    return em_cpu_has_avx2() && s->groups == 1 && s->stride[0] == 1 && s->stride[1] == 1
           && s->kh * s->kw > 1 && dconv_geom_ok(&g);
}

bool em_cpu_conv_direct_grad_input_fits(const em_conv2d_shape *s)
{
    const dconv_geom g = dconv_grad_input_geom(s);
    return em_cpu_conv_direct_fits(s) && dconv_geom_ok(&g);
}

/* Element i of an image tensor stored as dt. */
static const void *dconv_at(em_dtype dt, const void *base, int64_t i)
{
    return (const char *)base + i * (int64_t)em_dtype_size(dt);
}

/* Eight values of dt (f32, or f16/bf16 widened) from element j of src. */
DCONV_TARGET __attribute__((always_inline)) static inline __m256
dconv_load8(em_dtype dt, const void *src, int64_t j)
{
    if (dt == EM_F32)
        return _mm256_loadu_ps((const float *)src + j);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)src + j));
    if (dt == EM_BF16) /* a bf16 is the top half of its f32 */
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* dst (n) = src (n) of dt, in 8-lane blocks, the last one overlapping the one before when n is
 * not a multiple of 8 (one value at a time below 8). */
DCONV_TARGET __attribute__((always_inline)) static inline void
dconv_copy_row(float *dst, em_dtype dt, const void *src, int64_t n)
{
    if (n < 8) {
        const uint16_t *half = src;
        for (int64_t j = 0; j < n; j++)
            dst[j] = dt == EM_F32    ? ((const float *)src)[j]
                     : dt == EM_BF16 ? em_bf16_to_f32(half[j])
                                     : em_f16_to_f32(half[j]);
        return;
    }
    for (int64_t j = 0; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, dconv_load8(dt, src, j));
    _mm256_storeu_ps(dst + n - 8, dconv_load8(dt, src, n - 8));
}

/* xp (C, Hp, Wp) + slack = x (C, H, W) of dt inside a zero border. */
DCONV_TARGET static void dconv_pad(const dconv_geom *g, em_dtype dt, const void *x, float *xp)
{
    memset(xp, 0, (size_t)dconv_padded(g) * sizeof(float));
    for (int64_t c = 0; c < g->c; c++)
        for (int64_t r = 0; r < g->h; r++)
            dconv_copy_row(xp + c * g->plane + (r + g->ph) * g->wp + g->pw, dt,
                           dconv_at(dt, x, (c * g->h + r) * g->w), g->w);
}

/* off (K): where tap (c, i, j) starts, relative to its output position, in the padded planes. */
static void dconv_offsets(const dconv_geom *g, int64_t *off)
{
    for (int64_t c = 0; c < g->c; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++)
                off[(c * g->kh + i) * g->kw + j] = c * g->plane + i * g->dh * g->wp + j * g->dw;
}

/* Output channels per forward tile from m0 on: 6, with the last 7 to 11 split in two. */
static int dconv_rows(int64_t m, int64_t m0)
{
    const int64_t rem = m - m0;
    if (rem <= 6)
        return (int)rem;
    return rem >= 12 ? 6 : (int)(rem + 1) / 2;
}

/* a (M*K): tile by tile, the tile's weights tap-major, MR per tap. With `flip`, w is the
 * (C, M, KH, KW) weight of the convolution whose grad_input this forward pass computes, read
 * transposed and rotated by 180 degrees. */
static void dconv_pack(const dconv_geom *g, const float *w, bool flip, float *a)
{
    const int64_t taps = g->kh * g->kw;
    for (int64_t m0 = 0; m0 < g->m;) {
        const int mr = dconv_rows(g->m, m0);
        float *panel = a + m0 * g->k;
        for (int r = 0; r < mr; r++) { /* a row of w at a time, read in order */
            const int64_t m = m0 + r;
            if (!flip) {
                for (int64_t k = 0; k < g->k; k++)
                    panel[k * mr + r] = w[m * g->k + k];
                continue;
            }
            for (int64_t c = 0, k = 0; c < g->c; c++) /* tap k = (c, t) */
                for (int64_t t = 0; t < taps; t++, k++)
                    panel[k * mr + r] = w[(c * g->m + m) * taps + taps - 1 - t];
        }
        m0 += mr;
    }
}

DCONV_TARGET static inline __m256i dconv_mask(int lanes)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

typedef void (*dconv_tile_fn)(int64_t k, const float *a, const float *xb, const int64_t *off,
                              const float *bias, float *y, int64_t ystride, int tail);

/* The forward tiles, once per vector width: 8 lanes on AVX2, 16 on AVX-512 (the same sums in
 * the same order in every lane, so the same bits). */
#define DT_TARGET DCONV_TARGET
#define DT_LANES 8
#define DT_FN(name) name##_avx2
#define DT_SET1(x) _mm256_set1_ps(x)
#define DT_STORE_TAIL(row, v, n) _mm256_maskstore_ps(row, dconv_mask(n), (__m256)(v))
#include "backend_cpu/cpu_conv_direct_tile_impl_internal.h"
#undef DT_TARGET
#undef DT_LANES
#undef DT_FN
#undef DT_SET1
#undef DT_STORE_TAIL

#define DT_TARGET EM_AVX512
#define DT_LANES 16
#define DT_FN(name) name##_avx512
#define DT_SET1(x) _mm512_set1_ps(x)
#define DT_STORE_TAIL(row, v, n)                                                              \
    _mm512_mask_storeu_ps(row, (__mmask16)((1u << (n)) - 1), (__m512)(v))
#include "backend_cpu/cpu_conv_direct_tile_impl_internal.h"
#undef DT_TARGET
#undef DT_LANES
#undef DT_FN
#undef DT_SET1
#undef DT_STORE_TAIL

/* Output rows [oh0, oh1) of one image: y (M, H_out, W_out) from its padded planes xp. */
static void dconv_image_rows(const dconv_geom *g, const float *a, const int64_t *off,
                             const float *bias, const float *xp, float *y, int64_t oh0,
                             int64_t oh1)
{
    const int64_t hwo = g->ho * g->wo;
    const bool wide = em_cpu_use_avx512();
    const int lanes = wide ? 16 : 8; /* a tile's columns: two vectors of them */
    for (int64_t m0 = 0; m0 < g->m;) {
        const int mr = dconv_rows(g->m, m0);
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow0 = 0; ow0 < g->wo; ow0 += 2 * lanes) {
                const int64_t rem = g->wo - ow0;
                const int nv = rem > lanes ? 2 : 1;
                const int tail = rem >= 2 * lanes ? lanes : (int)(rem - lanes * (nv - 1));
                (wide ? dconv_tiles_avx512 : dconv_tiles_avx2)[mr][nv](
                    g->k, a + m0 * g->k, xp + oh * g->wp + ow0, off, bias ? bias + m0 : NULL,
                    y + (m0 * g->ho + oh) * g->wo + ow0, hwo, tail);
            }
        m0 += mr;
    }
}

static int dconv_threads(int64_t items)
{
    const int nt = em_cpu_threads();
    return items < nt ? (int)(items > 1 ? items : 1) : nt;
}

/* y (n, M, H_out, W_out) = the forward pass g over x (n, C, H, W), both of dt, weights packed in
 * a. Images go to threads; a batch smaller than the thread count is padded first and split by
 * rows. A half y is computed in f32 (yf: an image per thread, or the small batch) and narrowed
 * image by image. */
static int dconv_run(const dconv_geom *g, int64_t n, const float *a, const int64_t *off,
                     const float *bias, em_dtype dt, const void *x, void *y)
{
    const int64_t xs = g->c * g->h * g->w, ys = g->m * g->ho * g->wo, ps = dconv_padded(g);
    const int nt = em_cpu_threads();
    const bool by_image = n >= nt, half = dt != EM_F32;
    const int64_t bufs = by_image ? nt : n;
    float *xp = em_cpu_scratch((size_t)(bufs > 0 ? bufs * (ps + (half ? ys : 0)) : 1) *
                               sizeof(float));
    if (!xp)
        return EM_KERNEL_FAILED;
    float *yf = half ? xp + bufs * ps : y; // (bufs, M, H_out, W_out) where half
    if (by_image) {
        #pragma omp parallel num_threads(nt) if (nt > 1)
        {
            float *mine = xp + omp_get_thread_num() * ps;
            float *out = half ? yf + omp_get_thread_num() * ys : NULL;
            #pragma omp for schedule(static)
            for (int64_t i = 0; i < n; i++) {
                dconv_pad(g, dt, dconv_at(dt, x, i * xs), mine);
                dconv_image_rows(g, a, off, bias, mine, half ? out : yf + i * ys, 0, g->ho);
                if (half)
                    em_cpu_f32_to_half_n(dt, (uint16_t *)y + i * ys, out, ys);
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            dconv_pad(g, dt, dconv_at(dt, x, i * xs), xp + i * ps);
        #pragma omp parallel for num_threads(dconv_threads(n * g->ho)) schedule(static)
        for (int64_t r = 0; r < n * g->ho; r++)
            dconv_image_rows(g, a, off, bias, xp + r / g->ho * ps, yf + r / g->ho * ys,
                             r % g->ho, r % g->ho + 1);
        if (half)
            em_cpu_f32_to_half_n(dt, y, yf, n * ys);
    }
    em_cpu_scratch_free(xp);
    return EM_KERNEL_OK;
}

/* Packs the weights and offsets of g, then runs it. */
static int dconv_forward_pass(const dconv_geom *g, int64_t n, const float *w, bool flip,
                              const float *bias, em_dtype dt, const void *x, void *y)
{
    float *a = em_cpu_scratch((size_t)(g->m * g->k) * sizeof(float));
    int64_t *off = em_cpu_scratch((size_t)g->k * sizeof(int64_t));
    int rc = EM_KERNEL_FAILED;
    if (a && off) {
        dconv_pack(g, w, flip, a);
        dconv_offsets(g, off);
        rc = dconv_run(g, n, a, off, bias, dt, x, y);
    }
    em_cpu_scratch_free(a);
    em_cpu_scratch_free(off);
    return rc;
}

int em_cpu_conv_direct_forward(const em_conv2d_shape *s, em_dtype dt, const void *x,
                               const float *w, const float *bias, void *y)
{
    const dconv_geom g = dconv_forward_geom(s);
    return dconv_forward_pass(&g, s->n, w, false, bias, dt, x, y);
}

int em_cpu_conv_direct_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                  const float *w, void *gx)
{
    const dconv_geom g = dconv_grad_input_geom(s);
    return dconv_forward_pass(&g, s->n, w, true, NULL, dt, gy, gx);
}

DCONV_TARGET static inline float dconv_hsum(__m256 v)
{
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

/* gw (MR rows ldw apart, NT taps from off) = the sum over `images` images and their output
 * grids of gyp (images, MR, G) times each tap's run of the padded planes xp (images, padded). */
DCONV_TARGET __attribute__((always_inline)) static inline void
dconv_gw_tile(int mr, int nt, int64_t images, const float *gyp, int64_t gstride,
              const float *xp, int64_t ps, const int64_t *off, float *gw, int64_t ldw)
{
    __m256 acc[4][3];
    #pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
        #pragma GCC unroll 3
        for (int t = 0; t < nt; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < images; i++) {
        const float *gi = gyp + i * mr * gstride, *xi = xp + i * ps;
        const float *x0 = xi + off[0], *x1 = xi + off[nt > 1], *x2 = xi + off[nt > 2 ? 2 : 0];
        for (int64_t p = 0; p < gstride; p += 8) {
            const __m256 xt[3] = {_mm256_loadu_ps(x0 + p), _mm256_loadu_ps(x1 + p),
                                  _mm256_loadu_ps(x2 + p)};
            #pragma GCC unroll 4
            for (int r = 0; r < mr; r++) {
                const __m256 gv = _mm256_loadu_ps(gi + r * gstride + p);
                #pragma GCC unroll 3
                for (int t = 0; t < nt; t++)
                    acc[r][t] = _mm256_fmadd_ps(gv, xt[t], acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
        #pragma GCC unroll 3
        for (int t = 0; t < nt; t++)
            gw[r * ldw + t] = dconv_hsum(acc[r][t]);
}

typedef void (*dconv_gw_fn)(int64_t images, const float *gyp, int64_t gstride, const float *xp,
                            int64_t ps, const int64_t *off, float *gw, int64_t ldw);

#define DCONV_GW_TILE(mr, nt)                                                                 \
    DCONV_TARGET static void dconv_gw_tile_##mr##_##nt(int64_t images, const float *gyp,       \
                                                       int64_t gstride, const float *xp,      \
                                                       int64_t ps, const int64_t *off,        \
                                                       float *gw, int64_t ldw)                \
    {                                                                                         \
        dconv_gw_tile(mr, nt, images, gyp, gstride, xp, ps, off, gw, ldw);                    \
    }
DCONV_GW_TILE(1, 1)
DCONV_GW_TILE(1, 2)
DCONV_GW_TILE(1, 3)
DCONV_GW_TILE(2, 1)
DCONV_GW_TILE(2, 2)
DCONV_GW_TILE(2, 3)
DCONV_GW_TILE(3, 1)
DCONV_GW_TILE(3, 2)
DCONV_GW_TILE(3, 3)
DCONV_GW_TILE(4, 1)
DCONV_GW_TILE(4, 2)
DCONV_GW_TILE(4, 3)
#undef DCONV_GW_TILE

static const dconv_gw_fn dconv_gw_tiles[5][4] = {
    [1] = {NULL, dconv_gw_tile_1_1, dconv_gw_tile_1_2, dconv_gw_tile_1_3},
    [2] = {NULL, dconv_gw_tile_2_1, dconv_gw_tile_2_2, dconv_gw_tile_2_3},
    [3] = {NULL, dconv_gw_tile_3_1, dconv_gw_tile_3_2, dconv_gw_tile_3_3},
    [4] = {NULL, dconv_gw_tile_4_1, dconv_gw_tile_4_2, dconv_gw_tile_4_3},
};

/* Floats of one channel's output grid: H_out rows of Wp, rounded up to whole 8-lane steps. */
static int64_t dconv_grid(const dconv_geom *g)
{
    return (g->ho * g->wp + 7) / 8 * 8;
}

/* The sum of grid (n floats, a multiple of 8): four sums of 8 lanes each taking every fourth
 * block (independent adds), then added together and across the lanes. */
DCONV_TARGET static float dconv_grid_sum(const float *grid, int64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t p = 0;
    for (; p + 32 <= n; p += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(grid + p));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(grid + p + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(grid + p + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(grid + p + 24));
    }
    for (; p < n; p += 8)
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(grid + p));
    return dconv_hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* gyp (images, MR, G) = channels [m0, m0+MR) of gy (images, M, H_out, W_out) of dt on the
 * output grid, 0 in the spare columns and past the last row; gb (MR) = their sums over the
 * images, each plane summed off its grid in SIMD lanes and the planes in double, in image
 * order. */
DCONV_TARGET static void dconv_spread(const dconv_geom *g, int64_t images, em_dtype dt,
                                      const void *gy, int64_t m0, int mr, float *gyp, double *gb)
{
    const int64_t hwo = g->ho * g->wo, gstride = dconv_grid(g);
    for (int r = 0; r < mr; r++)
        gb[r] = 0;
    for (int64_t i = 0; i < images; i++)
        for (int r = 0; r < mr; r++) {
            const int64_t src = (i * g->m + m0 + r) * hwo; /* the plane's first element */
            float *dst = gyp + (i * mr + r) * gstride;
            for (int64_t oh = 0; oh < g->ho; oh++) {
                dconv_copy_row(dst + oh * g->wp, dt, dconv_at(dt, gy, src + oh * g->wo), g->wo);
                for (int64_t ow = g->wo; ow < g->wp; ow++)
                    dst[oh * g->wp + ow] = 0;
            }
            for (int64_t p = g->ho * g->wp; p < gstride; p++)
                dst[p] = 0;
            gb[r] += dconv_grid_sum(dst, gstride);
        }
}

/* gw (M, K) and gb (M) = the sums over `images` images of gy (images, M, H_out, W_out) against
 * their padded inputs xp, and of gy, for the channel tiles [t0, t1) of 4 channels each; gyp
 * holds one tile's spread gy. */
static void dconv_gw_block(const dconv_geom *g, int64_t images, em_dtype dt, const void *gy,
                           const float *xp, const int64_t *off, float *gw, double *gb,
                           int64_t t0, int64_t t1, float *gyp)
{
    const int64_t gstride = dconv_grid(g), ps = dconv_padded(g);
    for (int64_t m0 = t0 * 4; m0 < t1 * 4 && m0 < g->m; m0 += 4) {
        const int mr = g->m - m0 < 4 ? (int)(g->m - m0) : 4;
        dconv_spread(g, images, dt, gy, m0, mr, gyp, gb + m0);
        for (int64_t k0 = 0; k0 < g->k; k0 += 3) {
            const int nt = g->k - k0 < 3 ? (int)(g->k - k0) : 3;
            dconv_gw_tiles[mr][nt](images, gyp, gstride, xp, ps, off + k0,
                                   gw + m0 * g->k + k0, g->k);
        }
    }
}

/* Elements of out per task of em_cpu_sum_blocks_f32: 4 KB of each block. */
#define SUM_RUN 1024

/* out[0, len) = the sum of the runs of `blocks` blocks n apart from part, in block order; out may
 * be the first run. A whole run is added at a time, in the widest vectors. */
EM_WIDEST_LANES static void sum_run_f32(const float *part, int64_t blocks, int64_t n,
                                        int64_t len, float *out)
{
    if (out != part)
        memcpy(out, part, (size_t)len * sizeof(float));
    for (int64_t b = 1; b < blocks; b++) {
        const float *run = part + b * n;
        #pragma omp simd
        for (int64_t i = 0; i < len; i++)
            out[i] += run[i];
    }
}

void em_cpu_sum_blocks_f32(const float *part, int64_t blocks, int64_t n, float *out)
{
    #pragma omp parallel for if (blocks * n >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t i0 = 0; i0 < n; i0 += SUM_RUN)
        sum_run_f32(part + i0, blocks, n, n - i0 < SUM_RUN ? n - i0 : SUM_RUN, out + i0);
}

int em_cpu_conv_direct_grad_weight(const em_conv2d_shape *s, int64_t blocks, em_dtype dt,
                                   const void *gy, const void *x, float *gw, float *gbias)
{
    const dconv_geom g = dconv_forward_geom(s);
    const int64_t xs = g.c * g.h * g.w, ys = g.m * g.ho * g.wo, ps = dconv_padded(&g);
    const int64_t gw_n = g.m * g.k, per_block = (s->n + blocks - 1) / blocks;
    const int64_t tiles = (g.m + 3) / 4, gys = per_block * 4 * dconv_grid(&g);
    const int nt = em_cpu_threads();
    const bool by_block = blocks >= nt;
    float *xp = em_cpu_scratch((size_t)((by_block ? nt : 1) * per_block * ps) * sizeof(float));
    float *gyp = em_cpu_scratch((size_t)(nt * gys) * sizeof(float));
    float *part = blocks > 1 ? em_cpu_scratch((size_t)(blocks * gw_n) * sizeof(float)) : gw;
    double *gb = em_cpu_scratch((size_t)(blocks * g.m) * sizeof(double));
    int64_t *off = em_cpu_scratch((size_t)g.k * sizeof(int64_t));
    int rc = EM_KERNEL_FAILED;
    if (!xp || !gyp || !part || !gb || !off)
        goto done;
    dconv_offsets(&g, off);
    if (by_block) {
        #pragma omp parallel num_threads(nt) if (nt > 1)
        {
            float *mine = xp + omp_get_thread_num() * per_block * ps;
            float *spread = gyp + omp_get_thread_num() * gys;
            #pragma omp for schedule(static)
            for (int64_t b = 0; b < blocks; b++) {
                const int64_t n0 = b * s->n / blocks, n1 = (b + 1) * s->n / blocks;
                for (int64_t i = n0; i < n1; i++)
                    dconv_pad(&g, dt, dconv_at(dt, x, i * xs), mine + (i - n0) * ps);
                dconv_gw_block(&g, n1 - n0, dt, dconv_at(dt, gy, n0 * ys), mine, off,
                               part + b * gw_n, gb + b * g.m, 0, tiles, spread);
            }
        }
    } else {
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * s->n / blocks, n1 = (b + 1) * s->n / blocks;
            for (int64_t i = n0; i < n1; i++)
                dconv_pad(&g, dt, dconv_at(dt, x, i * xs), xp + (i - n0) * ps);
            #pragma omp parallel for num_threads(dconv_threads(tiles)) schedule(static)
            for (int64_t t = 0; t < tiles; t++)
                dconv_gw_block(&g, n1 - n0, dt, dconv_at(dt, gy, n0 * ys), xp, off,
                               part + b * gw_n, gb + b * g.m, t, t + 1,
                               gyp + omp_get_thread_num() * gys);
        }
    }
    if (part != gw)
        em_cpu_sum_blocks_f32(part, blocks, gw_n, gw);
    for (int64_t m = 0; gbias && m < g.m; m++) {
        double sum = 0;
        for (int64_t b = 0; b < blocks; b++)
            sum += gb[b * g.m + m];
        gbias[m] = (float)sum;
    }
    rc = EM_KERNEL_OK;
done:
    em_cpu_scratch_free(xp);
    em_cpu_scratch_free(gyp);
    if (part != gw)
        em_cpu_scratch_free(part);
    em_cpu_scratch_free(gb);
    em_cpu_scratch_free(off);
    return rc;
}
