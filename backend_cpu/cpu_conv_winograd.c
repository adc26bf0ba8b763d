/* Winograd F(4x4, 3x3) f32 convolution for 3x3 stride-1 layers: every 6x6 input tile d and
 * kernel g give 4x4 outputs A^T [(G g G^T) . (B^T d B)] A, 36 products in place of 144. Summed
 * over channels, the products at each of the 36 transform points are one GEMM (OpenBLAS sgemm)
 * per chunk of 16 images, on the calling thread; cpu_winograd_tiles.c holds the transforms.
 * grad_input is the same pass over gy with the flipped, transposed kernel; grad_weight
 * multiplies the gradient of the products by the transformed inputs and maps the sums back
 * through G, and sums the bias gradient from its copy of gy. f16/bf16 images are widened a
 * chunk at a time as the chunk starts, and a chunk's output narrowed as it ends. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_conv_direct_internal.h"
#include "backend_cpu/cpu_conv_winograd_internal.h"
#include "backend_cpu/cpu_convert_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_winograd_tiles_internal.h"

#define L EM_WG_LANES
#define P EM_WG_P
/* Both sides of a layer need this many channels for the GEMMs to pay. Measured on one thread
 * against the direct kernels, batch 64 (forward, grad_input, grad_weight): 32->64 on 14x14
 * 1.6x 1.6x 1.2x faster, 64->64 on 7x7 2.0x 2.1x 1.5x, 32->32 on 14x14 1.3x 1.3x 1.2x; but
 * 16->32 on 28x28 0.94x 0.92x 0.71x, 16->16 on 14x14 1.2x 1.1x 0.82x, 1->32 0.27x. */
#define WG_MIN_CHANNELS 32
/* A chunk holds one image per lane: with fewer images the transforms and GEMMs work on empty
 * lanes (batch-1 inference of the CNN took 5.7x longer than the direct kernel). */
#define WG_MIN_BATCH EM_WG_LANES
/* grad_weight sums the chunks of the batch in this many fixed blocks (fewer for fewer chunks):
 * the same bits on any number of threads. */
#define WG_GW_BLOCKS 16

bool em_cpu_conv_winograd_can(const em_conv2d_shape *s, bool grad_input)
{
    return em_cpu_has_avx2() && s->groups == 1 && s->kh == 3 && s->kw == 3
           && s->stride[0] == 1 && s->stride[1] == 1 && s->dilation[0] == 1
           && s->dilation[1] == 1 && s->h_out >= 1 && s->w_out >= 1
           && (!grad_input || (s->pad[0] <= 2 && s->pad[1] <= 2));
}

/* EMBER_WINOGRAD: -1 unset (the measured choice), 0 never, 1 wherever the kernels can run. */
static int wg_forced(void)
{
    static int forced = -2;
    if (forced == -2) {
        const char *env = getenv("EMBER_WINOGRAD");
        forced = env && env[0] == '0' ? 0 : env && env[0] == '1' ? 1 : -1;
    }
    return forced;
}

bool em_cpu_conv_winograd_chosen(const em_conv2d_shape *s, bool grad_input)
{
    if (!em_cpu_conv_winograd_can(s, grad_input) || wg_forced() == 0)
        return false;
    return wg_forced() == 1 || (s->c_in >= WG_MIN_CHANNELS && s->c_out >= WG_MIN_CHANNELS &&
                                s->n >= WG_MIN_BATCH);
}

/* Threads for `items` chunks or blocks: one each, at most all of them. */
static int wg_threads(int64_t items)
{
    const int nt = em_cpu_threads();
    return items < nt ? (int)(items > 1 ? items : 1) : nt;
}

static int64_t wg_chunks(int64_t n)
{
    return (n + L - 1) / L;
}

/* Tiles per block: a block's transformed inputs and products (36 points x (C + M) channels x
 * 16 lanes per tile) stay within this many bytes, so that they go from one transform through
 * the GEMM to the other while they are in the core's cache (2 MB of L2 on the machine measured:
 * 32->64 on 14x14, 64 images, one thread, forward / grad_input / grad_weight 2.2 / 2.4 / 3.8 ms
 * in blocks of 4 tiles, 2.3 / 2.7 / 4.0 ms in one block of all 16). */
#define WG_BLOCK_BYTES (1 << 20)

static int64_t wg_block_tiles(const em_wg_geom *g)
{
    const int64_t per_tile = P * (g->c + g->m) * L * (int64_t)sizeof(float);
    const int64_t nb = WG_BLOCK_BYTES / per_tile;
    return nb < 1 ? 1 : nb > g->tiles ? g->tiles : nb;
}

/* One thread's buffers for a chunk of 16 images, nb = wg_block_tiles tiles at a time; the 36
 * points of v and p em_wg_point_stride apart. */
typedef struct {
    float *xt;  /* (C, Hp, Wp, 16) the interleaved, padded inputs */
    float *v;   /* (36, C, nb, 16) a block's transforms */
    float *p;   /* (36, M, nb, 16) its products, or their gradient */
    float *gyt; /* (M, 4*TH, 4*TW, 16) the interleaved output gradient (grad_weight only) */
    /* f16/bf16 images only: the chunk's (16, C, H, W) input widened, and its (16, M, H_out,
     * W_out) output before narrowing (grad_weight: its output gradient widened) */
    float *xf, *yf;
} wg_bufs;

/* Floats per lane of the output gradient's interleaved copy (grad_weight only). */
static int64_t wg_gyt_lane(const em_wg_geom *g, bool grad_weight)
{
    return grad_weight ? g->m * g->th * g->tw * EM_WG_M * EM_WG_M : 0;
}

/* Floats of one thread's buffers for images of dt. */
static int64_t wg_scratch(const em_wg_geom *g, bool grad_weight, em_dtype dt)
{
    const int64_t nb = wg_block_tiles(g);
    const int64_t half = dt == EM_F32 ? 0 : g->c * g->h * g->w + g->m * g->ho * g->wo;
    return g->c * g->hp * g->wp * L + P * (em_wg_point_stride(g->c, nb) +
                                           em_wg_point_stride(g->m, nb)) +
           (wg_gyt_lane(g, grad_weight) + half) * L;
}

static wg_bufs wg_bufs_of(const em_wg_geom *g, bool grad_weight, em_dtype dt, float *scratch)
{
    const int64_t nb = wg_block_tiles(g);
    wg_bufs b = {.xt = scratch};
    b.v = b.xt + g->c * g->hp * g->wp * L;
    b.p = b.v + P * em_wg_point_stride(g->c, nb);
    b.gyt = b.p + P * em_wg_point_stride(g->m, nb);
    if (dt != EM_F32) {
        b.xf = b.gyt + wg_gyt_lane(g, grad_weight) * L;
        b.yf = b.xf + g->c * g->h * g->w * L;
    }
    return b;
}

/* Images [n0, n0 + lanes) of t (n, per_image values) of dt as f32: in t itself, or widened
 * into buf while the chunk's work is about to read them (the same bits as widening all of t
 * first). */
static const float *wg_chunk_in(em_dtype dt, const void *t, int64_t per_image, int64_t n0,
                                int lanes, float *buf)
{
    if (dt == EM_F32)
        return (const float *)t + n0 * per_image;
    em_cpu_half_to_f32_n(dt, buf, (const uint16_t *)t + n0 * per_image, lanes * per_image);
    return buf;
}

/* The images [n0, n0 + lanes) of y (n, M, H_out, W_out) = the pass g over x (n, C, H, W) with
 * the transformed kernels u (36, M, C), block by block of tiles; x and y of dt, a half chunk's
 * output narrowed while it is in cache. */
static void wg_run_chunk(const em_wg_geom *g, em_dtype dt, const float *u, const float *bias,
                         const void *x, int64_t n0, int lanes, const wg_bufs *b, void *y)
{
    const int64_t nb = wg_block_tiles(g), y_image = g->m * g->ho * g->wo;
    const float *xc = wg_chunk_in(dt, x, g->c * g->h * g->w, n0, lanes, b->xf);
    float *yc = dt == EM_F32 ? (float *)y + n0 * y_image : b->yf;
    em_wg_interleave(xc, g->c, g->h, g->w, 0, lanes, g->ph, g->pw, g->hp, g->wp, b->xt);
    for (int64_t t0 = 0; t0 < g->tiles; t0 += nb) {
        const int64_t t1 = t0 + nb < g->tiles ? t0 + nb : g->tiles, cols = (t1 - t0) * L;
        em_wg_input_transform(g, b->xt, t0, t1, b->v);
        /* p (36, M, cols) = u (36, M, C) v (36, C, cols) */
        em_cpu_gemm(EM_F32, false, false, g->m, cols, g->c, 1.0, u, g->c, g->m * g->c, b->v,
                    cols, em_wg_point_stride(g->c, t1 - t0), 0.0, b->p, cols,
                    em_wg_point_stride(g->m, t1 - t0), P);
        em_wg_output_transform(g, b->p, t0, t1, bias, 0, lanes, yc);
    }
    if (dt != EM_F32)
        em_cpu_f32_to_half_n(dt, (uint16_t *)y + n0 * y_image, yc, lanes * y_image);
}

/* y (n, M, H_out, W_out) = the pass g over x (n, C, H, W) with kernels w, x and y of dt; chunks
 * of 16 images go to threads, each with its own buffers. */
static int wg_run(const em_wg_geom *g, int64_t n, em_dtype dt, const float *w, bool flip,
                  const float *bias, const void *x, void *y)
{
    const int64_t chunks = wg_chunks(n), per_thread = wg_scratch(g, false, dt);
    const int nt = wg_threads(chunks);
    float *u = em_cpu_scratch((size_t)(P * g->m * g->c) * sizeof(float)); /* (36, M, C) */
    float *scratch = em_cpu_scratch((size_t)(nt * per_thread) * sizeof(float));
    int rc = EM_KERNEL_FAILED;
    if (u && scratch) {
        em_wg_weights(g, w, flip, u);
        #pragma omp parallel num_threads(nt) if (nt > 1)
        {
            const wg_bufs b = wg_bufs_of(g, false, dt, scratch + omp_get_thread_num() * per_thread);
            #pragma omp for schedule(static)
            for (int64_t chunk = 0; chunk < chunks; chunk++) {
                const int64_t n0 = chunk * L;
                wg_run_chunk(g, dt, u, bias, x, n0, n - n0 < L ? (int)(n - n0) : L, &b, y);
            }
        }
        rc = EM_KERNEL_OK;
    }
    em_cpu_scratch_free(u);
    em_cpu_scratch_free(scratch);
    return rc;
}

static em_wg_geom wg_forward_geom(const em_conv2d_shape *s)
{
    return em_wg_geom_of(s->c_in, s->h, s->w, s->c_out, s->h_out, s->w_out, s->pad[0],
                         s->pad[1]);
}

int em_cpu_conv_winograd_forward(const em_conv2d_shape *s, em_dtype dt, const void *x,
                                 const float *w, const float *bias, void *y)
{
    const em_wg_geom g = wg_forward_geom(s);
    return wg_run(&g, s->n, dt, w, false, bias, x, y);
}

/* grad_input as a forward pass: gy (C_out, H_out, W_out) padded by 2 - pad into gx (C_in, H,
 * W). */
int em_cpu_conv_winograd_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                    const float *w, void *gx)
{
    const em_wg_geom g = em_wg_geom_of(s->c_out, s->h_out, s->w_out, s->c_in, s->h, s->w,
                                       2 - s->pad[0], 2 - s->pad[1]);
    return wg_run(&g, s->n, dt, w, true, NULL, gy, gx);
}

/* gu (36, M, C) = the sums over the chunks [c0, c1) of the gradient of their products
 * (36, M, tiles*16) times their transformed inputs (36, C, tiles*16) transposed, block by block
 * of tiles; gb (M), when given, += the sums of their output gradient. With C a multiple of 16
 * the inputs are transformed straight into the transposed layout (36, tiles*16, C): OpenBLAS
 * multiplies that form about twice as fast (36 products of 64 x 32 x 64, one thread: 62 instead
 * of 110 us). */
static void wg_gw_chunks(const em_wg_geom *g, int64_t n, em_dtype dt, const void *gy,
                         const void *x, int64_t c0, int64_t c1, const wg_bufs *b, float *gu,
                         double *gb)
{
    const int64_t nb = wg_block_tiles(g);
    for (int64_t chunk = c0; chunk < c1; chunk++) {
        const int64_t n0 = chunk * L;
        const int lanes = n - n0 < L ? (int)(n - n0) : L;
        const float *xc = wg_chunk_in(dt, x, g->c * g->h * g->w, n0, lanes, b->xf);
        const float *gyc = wg_chunk_in(dt, gy, g->m * g->ho * g->wo, n0, lanes, b->yf);
        em_wg_interleave(xc, g->c, g->h, g->w, 0, lanes, g->ph, g->pw, g->hp, g->wp, b->xt);
        em_wg_interleave(gyc, g->m, g->ho, g->wo, 0, lanes, 0, 0, g->th * EM_WG_M,
                         g->tw * EM_WG_M, b->gyt);
        if (gb)
            em_wg_bias_sums(g, b->gyt, gb);
        for (int64_t t0 = 0; t0 < g->tiles; t0 += nb) {
            const int64_t t1 = t0 + nb < g->tiles ? t0 + nb : g->tiles, cols = (t1 - t0) * L;
            const double beta = chunk > c0 || t0 > 0 ? 1.0 : 0.0;
            const int64_t p_step = em_wg_point_stride(g->m, t1 - t0);
            const int64_t v_step = em_wg_point_stride(g->c, t1 - t0);
            em_wg_grad_output_transform(g, b->gyt, t0, t1, b->p);
            if (g->c % L == 0) { /* gu += p vt (36 times (M, cols) (cols, C)) */
                em_wg_input_transform_t(g, b->xt, t0, t1, b->v);
                em_cpu_gemm(EM_F32, false, false, g->m, g->c, cols, 1.0, b->p, cols, p_step,
                            b->v, g->c, v_step, beta, gu, g->c, g->m * g->c, P);
            } else { /* gu += p v^T (36 times (M, cols) (C, cols)^T) */
                em_wg_input_transform(g, b->xt, t0, t1, b->v);
                em_cpu_gemm(EM_F32, false, true, g->m, g->c, cols, 1.0, b->p, cols, p_step,
                            b->v, cols, v_step, beta, gu, g->c, g->m * g->c, P);
            }
        }
    }
}

int em_cpu_conv_winograd_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                     const void *x, float *gw, float *gbias)
{
    const em_wg_geom g = wg_forward_geom(s);
    const int64_t chunks = wg_chunks(s->n), gu_n = P * g.m * g.c;
    const int64_t blocks = chunks < WG_GW_BLOCKS ? chunks : WG_GW_BLOCKS;
    const int64_t per_thread = wg_scratch(&g, true, dt);
    const int nt = wg_threads(blocks);
    float *scratch = em_cpu_scratch((size_t)(nt * per_thread) * sizeof(float));
    float *gu = em_cpu_scratch((size_t)(blocks * gu_n) * sizeof(float)); /* (blocks, 36, M, C) */
    double *gb = em_cpu_scratch((size_t)(blocks * g.m) * sizeof(double)); /* (blocks, M) */
    int rc = EM_KERNEL_FAILED;
    if (scratch && gu && gb && blocks > 0) {
        memset(gb, 0, (size_t)(blocks * g.m) * sizeof(double));
        #pragma omp parallel num_threads(nt) if (nt > 1)
        {
            const wg_bufs b = wg_bufs_of(&g, true, dt, scratch + omp_get_thread_num() * per_thread);
            #pragma omp for schedule(static)
            for (int64_t k = 0; k < blocks; k++)
                wg_gw_chunks(&g, s->n, dt, gy, x, k * chunks / blocks, (k + 1) * chunks / blocks,
                             &b, gu + k * gu_n, gbias ? gb + k * g.m : NULL);
        }
        em_cpu_sum_blocks_f32(gu, blocks, gu_n, gu);
        em_wg_weights_back(&g, gu, gw);
        for (int64_t m = 0; gbias && m < g.m; m++) {
            double sum = 0;
            for (int64_t k = 0; k < blocks; k++)
                sum += gb[k * g.m + m];
            gbias[m] = (float)sum;
        }
        rc = EM_KERNEL_OK;
    }
    em_cpu_scratch_free(scratch);
    em_cpu_scratch_free(gu);
    em_cpu_scratch_free(gb);
    return rc;
}
