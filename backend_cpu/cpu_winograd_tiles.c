/* The tile transforms of the Winograd F(4x4, 3x3) convolution (Lavin & Gray): weights G g G^T,
 * input tiles B^T d B, outputs A^T p A, and for the gradients A gy A^T and G^T gu G. Every
 * transform is two passes of a small constant matrix over vectors of 16 lanes (16 images). */
#include <string.h>

#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"
#include "backend_cpu/cpu_winograd_tiles_internal.h"

#define L EM_WG_LANES

static const float wg_bt[EM_WG_A * EM_WG_A] = { /* B^T (6, 6) */
    4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
    0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1,
};
static const double wg_g[EM_WG_A * 3] = { /* G (6, 3) */
    1.0 / 4, 0, 0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
    1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0, 0, 1,
};
static const float wg_at[EM_WG_M * EM_WG_A] = { /* A^T (4, 6) */
    1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1,
};
static const float wg_a[EM_WG_A * EM_WG_M] = { /* A (6, 4) */
    1, 0, 0, 0, 1, 1, 1, 1, 1, -1, 1, -1, 1, 2, 4, 8, 1, -2, 4, -8, 0, 0, 0, 1,
};

em_wg_geom em_wg_geom_of(int64_t c, int64_t h, int64_t w, int64_t m, int64_t ho, int64_t wo,
                         int64_t ph, int64_t pw)
{
    em_wg_geom g = {.c = c, .h = h, .w = w, .m = m, .ho = ho, .wo = wo, .ph = ph, .pw = pw};
    g.th = (ho + EM_WG_M - 1) / EM_WG_M;
    g.tw = (wo + EM_WG_M - 1) / EM_WG_M;
    g.tiles = g.th * g.tw;
    g.hp = g.th * EM_WG_M + 2;
    g.wp = g.tw * EM_WG_M + 2;
    return g;
}

void em_wg_weights(const em_wg_geom *g, const float *w, bool flip, float *u)
{
    #pragma omp parallel for if (g->m * g->c * EM_WG_P >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t mc = 0; mc < g->m * g->c; mc++) {
        const int64_t m = mc / g->c, c = mc % g->c;
        double k[9], gk[EM_WG_A * 3]; /* the kernel (3, 3); G k (6, 3) */
        for (int t = 0; t < 9; t++)
            k[t] = flip ? w[(c * g->m + m) * 9 + 8 - t] : w[mc * 9 + t];
        for (int i = 0; i < EM_WG_A; i++)
            for (int b = 0; b < 3; b++)
                gk[i * 3 + b] = wg_g[i * 3] * k[b] + wg_g[i * 3 + 1] * k[3 + b]
                                + wg_g[i * 3 + 2] * k[6 + b];
        for (int i = 0; i < EM_WG_A; i++)
            for (int j = 0; j < EM_WG_A; j++) {
                const double *r = gk + i * 3, *gj = wg_g + j * 3;
                u[((int64_t)(i * EM_WG_A + j) * g->m + m) * g->c + c] =
                    (float)(r[0] * gj[0] + r[1] * gj[1] + r[2] * gj[2]);
            }
    }
}

void em_wg_weights_back(const em_wg_geom *g, const float *gu, float *gw)
{
    const int64_t mc_n = g->m * g->c;
    #pragma omp parallel for if (mc_n * EM_WG_P >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t mc = 0; mc < mc_n; mc++) {
        double ug[EM_WG_A * 3] = {0}; /* gu G (6, 3) */
        for (int i = 0; i < EM_WG_A; i++)
            for (int j = 0; j < EM_WG_A; j++)
                for (int b = 0; b < 3; b++)
                    ug[i * 3 + b] += gu[(i * EM_WG_A + j) * mc_n + mc] * wg_g[j * 3 + b];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                double sum = 0;
                for (int i = 0; i < EM_WG_A; i++)
                    sum += wg_g[i * 3 + a] * ug[i * 3 + b];
                gw[mc * 9 + a * 3 + b] = (float)sum;
            }
    }
}

void em_wg_interleave(const float *x, int64_t planes, int64_t h, int64_t w, int64_t n0,
                      int lanes, int64_t ph, int64_t pw, int64_t hp, int64_t wp, float *xt)
{
    const int64_t rows = h < hp - ph ? h : hp - ph, cols = w < wp - pw ? w : wp - pw;
    for (int64_t c = 0; c < planes; c++) {
        float *plane = xt + c * hp * wp * L;
        memset(plane, 0, (size_t)(hp * wp * L) * sizeof(float));
        for (int l = 0; l < lanes; l++) {
            const float *src = x + ((n0 + l) * planes + c) * h * w;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t col = 0; col < cols; col++)
                    plane[((r + ph) * wp + col + pw) * L + l] = src[r * w + col];
        }
    }
}

/* 16 lanes, one per image; loads and stores through it need no alignment. */
typedef float wg_vec __attribute__((vector_size(L * sizeof(float)), aligned(4)));

/* out[r][s] = sum over k of mat (R, K) [r][k] times in[k][s], for r < R and s < S, each entry a
 * vector of 16 lanes; in and out are addressed by their own strides (floats) for the two axes.
 * Inlined with constant sizes and matrices, the zero entries of mat drop out at compile time. */
EM_AVX2 __attribute__((always_inline)) static inline void
wg_apply(int rn, int kn, const float *mat, int sn, const float *in, int64_t in_k, int64_t in_s,
         float *out, int64_t out_r, int64_t out_s)
{
    #pragma GCC unroll 6
    for (int r = 0; r < rn; r++)
        #pragma GCC unroll 6
        for (int s = 0; s < sn; s++) {
            wg_vec acc = {0};
            #pragma GCC unroll 6
            for (int k = 0; k < kn; k++)
                if (mat[r * kn + k] != 0)
                    acc += mat[r * kn + k] * *(const wg_vec *)(in + k * in_k + s * in_s);
            *(wg_vec *)(out + r * out_r + s * out_s) = acc;
        }
}

EM_AVX2 void em_wg_input_transform(const em_wg_geom *g, const float *xt, float *v)
{
    const int64_t vstride = g->c * g->tiles * L, row = g->wp * L;
    for (int64_t ct = 0; ct < g->c * g->tiles; ct++) {
        const int64_t c = ct / g->tiles, t = ct % g->tiles;
        const float *d = xt + ((c * g->hp + t / g->tw * EM_WG_M) * g->wp + t % g->tw * EM_WG_M) * L;
        float tmp[EM_WG_P * L]; /* B^T d (6, 6, 16) */
        wg_apply(EM_WG_A, EM_WG_A, wg_bt, EM_WG_A, d, row, L, tmp, EM_WG_A * L, L);
        wg_apply(EM_WG_A, EM_WG_A, wg_bt, EM_WG_A, tmp, L, EM_WG_A * L, v + ct * L, vstride,
                 EM_WG_A * vstride);
    }
}

EM_AVX2 void em_wg_output_transform(const em_wg_geom *g, const float *p, const float *bias,
                                    int64_t n0, int lanes, float *y)
{
    const int64_t pstride = g->m * g->tiles * L, hwo = g->ho * g->wo;
    for (int64_t mt = 0; mt < g->m * g->tiles; mt++) {
        const int64_t m = mt / g->tiles, t = mt % g->tiles;
        const int64_t oh0 = t / g->tw * EM_WG_M, ow0 = t % g->tw * EM_WG_M;
        float tmp[EM_WG_M * EM_WG_A * L]; /* A^T p (4, 6, 16) */
        float out[EM_WG_M * EM_WG_M * L]; /* A^T p A (4, 4, 16) */
        wg_apply(EM_WG_M, EM_WG_A, wg_at, EM_WG_A, p + mt * L, EM_WG_A * pstride, pstride, tmp,
                 EM_WG_A * L, L);
        wg_apply(EM_WG_M, EM_WG_A, wg_at, EM_WG_M, tmp, L, EM_WG_A * L, out, L, EM_WG_M * L);
        const float b = bias ? bias[m] : 0.0f;
        for (int i = 0; i < EM_WG_M && oh0 + i < g->ho; i++)
            for (int j = 0; j < EM_WG_M && ow0 + j < g->wo; j++) {
                float *dst = y + (n0 * g->m + m) * hwo + (oh0 + i) * g->wo + ow0 + j;
                for (int l = 0; l < lanes; l++)
                    dst[l * g->m * hwo] = out[(i * EM_WG_M + j) * L + l] + b;
            }
    }
}

EM_AVX2 void em_wg_grad_output_transform(const em_wg_geom *g, const float *gyt, float *gp)
{
    const int64_t pstride = g->m * g->tiles * L, row = g->tw * EM_WG_M * L;
    for (int64_t mt = 0; mt < g->m * g->tiles; mt++) {
        const int64_t m = mt / g->tiles, t = mt % g->tiles;
        const int64_t oh0 = t / g->tw * EM_WG_M, ow0 = t % g->tw * EM_WG_M;
        const float *d = gyt + ((m * g->th * EM_WG_M + oh0) * g->tw * EM_WG_M + ow0) * L;
        float tmp[EM_WG_A * EM_WG_M * L]; /* A gy (6, 4, 16) */
        wg_apply(EM_WG_A, EM_WG_M, wg_a, EM_WG_M, d, row, L, tmp, EM_WG_M * L, L);
        wg_apply(EM_WG_A, EM_WG_M, wg_a, EM_WG_A, tmp, L, EM_WG_M * L, gp + mt * L, pstride,
                 EM_WG_A * pstride);
    }
}
