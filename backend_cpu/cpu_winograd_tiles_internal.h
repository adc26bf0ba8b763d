/* The tile transforms of the Winograd F(4x4, 3x3) convolution (cpu_winograd_tiles.c) that
 * cpu_conv_winograd.c strings together around its GEMMs. Images are handled 16 at a time, one per
 * SIMD lane: every buffer below ends in an axis of 16 lanes. */
#ifndef EMBER_CPU_WINOGRAD_TILES_INTERNAL_H
#define EMBER_CPU_WINOGRAD_TILES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#define EM_WG_LANES 16 /* images transformed together, one per lane */
#define EM_WG_M 4      /* outputs per tile side */
#define EM_WG_A 6      /* input tile side EM_WG_M + 2: transform points per side */
#define EM_WG_P 36     /* transform points EM_WG_A * EM_WG_A */

/* One pass of the convolution: input (C, H, W) padded by (ph, pw) into output (M, H_out, W_out)
 * with 3x3 taps. Outputs are cut into TH x TW tiles of 4x4 (the last ones reach past the edge);
 * a chunk of images is copied lane-interleaved into zero-bordered planes (C, Hp, Wp, 16),
 * Hp = 4*TH + 2 and Wp = 4*TW + 2, which every tile reads without a bounds check. */
typedef struct {
    int64_t c, h, w, m, ho, wo, ph, pw;
    int64_t th, tw, tiles; /* tile rows, columns, TH*TW */
    int64_t hp, wp;        /* padded plane rows and row width */
} em_wg_geom;

em_wg_geom em_wg_geom_of(int64_t c, int64_t h, int64_t w, int64_t m, int64_t ho, int64_t wo,
                         int64_t ph, int64_t pw);

/* u (36, M, C) = G g G^T for every kernel g (3, 3) of w (M, C, 3, 3), in double; with `flip`, w
 * is the (C, M, 3, 3) weight whose grad_input this pass computes, read transposed and rotated by
 * 180 degrees. */
void em_wg_weights(const em_wg_geom *g, const float *w, bool flip, float *u);
/* gw (M, C, 3, 3) = G^T gu G for every (m, c) of gu (36, M, C), in double. */
void em_wg_weights_back(const em_wg_geom *g, const float *gu, float *gw);

/* gb (M) += the sums of one chunk's output gradient, read off its interleaved copy gyt
 * (M, 4*TH, 4*TW, 16) (zero past the plane and in empty lanes), in double, one sum per lane added
 * in order, then the lanes: the f32 results are those of summing gy in order in double (but for
 * a sum on a rounding boundary), so the bias learns as without Winograd. */
void em_wg_bias_sums(const em_wg_geom *g, const float *gyt, double *gb);
/* xt (planes, hp, wp, 16) = images [n0, n0 + lanes) of x (n, planes, h, w) at offset (ph, pw)
 * inside zeros, the lanes past `lanes` zero; what falls outside hp x wp is left out. */
void em_wg_interleave(const float *x, int64_t planes, int64_t h, int64_t w, int64_t n0,
                      int lanes, int64_t ph, int64_t pw, int64_t hp, int64_t wp, float *xt);

/* Floats from one transform point to the next in a block's buffers (36, rows, nt, 16) and
 * (36, nt*16, rows): one vector more than rows*nt*16. A point's matrix is often a multiple of
 * 4 KB (32 channels x 4 tiles x 16 lanes is 8 KB), and the 36 points of a tile, that far apart,
 * would all fall in one set of the L1 cache; the extra vector puts each in the next set. */
static inline int64_t em_wg_point_stride(int64_t rows, int64_t nt)
{
    return rows * nt * EM_WG_LANES + EM_WG_LANES;
}

/* The transforms work on the tiles [t0, t1) (row-major over TH x TW), nt = t1 - t0 of them.
 * v (36, C, nt, 16) = B^T d B for each 6x6 tile d of the interleaved planes xt (C, Hp, Wp, 16),
 * points em_wg_point_stride(C, nt) apart (as every buffer of points below). */
void em_wg_input_transform(const em_wg_geom *g, const float *xt, int64_t t0, int64_t t1,
                           float *v);
/* vt (36, nt*16, C): the same transforms with each point's (C, nt*16) matrix transposed, C a
 * multiple of 16. */
void em_wg_input_transform_t(const em_wg_geom *g, const float *xt, int64_t t0, int64_t t1,
                             float *vt);
/* Images [n0, n0 + lanes) of y (n, M, H_out, W_out) = bias + A^T p A for each tile of p
 * (36, M, nt, 16), the outputs past the edge dropped. */
void em_wg_output_transform(const em_wg_geom *g, const float *p, int64_t t0, int64_t t1,
                            const float *bias, int64_t n0, int lanes, float *y);
/* gp (36, M, nt, 16) = A gy A^T for each 4x4 tile of gyt (M, 4*TH, 4*TW, 16): the gradient of
 * the products p from that of the outputs. */
void em_wg_grad_output_transform(const em_wg_geom *g, const float *gyt, int64_t t0, int64_t t1,
                                 float *gp);

#endif
