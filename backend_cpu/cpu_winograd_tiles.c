/* The tile transforms of the Winograd F(4x4, 3x3) convolution (Lavin & Gray): weights G g G^T,
 * input tiles B^T d B, outputs A^T p A, and for the gradients A gy A^T and G^T gu G. Every
 * transform is two passes of a small constant matrix over vectors of 16 lanes (16 images), on
 * AVX-512 where the CPU has it, else AVX2 (cpu_winograd_tiles_impl_internal.h); B^T, A^T and A
 * are written out there as sums sharing their terms, G here. */
#include <string.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"
#include "backend_cpu/cpu_simd_internal.h"
#include "backend_cpu/cpu_winograd_tiles_internal.h"

#define L EM_WG_LANES

static const double wg_g[EM_WG_A * 3] = { /* G (6, 3) */
    1.0 / 4, 0, 0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
    1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0, 0, 1,
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

/* 16 lanes, one per image; loads and stores through it need no alignment. */
typedef float wg_vec __attribute__((vector_size(L * sizeof(float)), aligned(4)));
/* 16 lanes of double, for the kernel transforms */
typedef double wg_dvec __attribute__((vector_size(L * sizeof(double)), aligned(8)));
/* Four lanes, one group of a 16-lane vector: WG_GROUP(v, q) is lanes 4q..4q+3 of v (q a
 * constant). */
typedef float wg_four __attribute__((vector_size(4 * sizeof(float)), aligned(4)));
#define WG_GROUP(v, q) __builtin_shufflevector(v, v, 4 * (q), 4 * (q) + 1, 4 * (q) + 2, 4 * (q) + 3)
/* the four floats at `at`, as initialisers of a vector */
#define WG_FOUR(at) (at)[0], (at)[1], (at)[2], (at)[3]

/* Lane indices of the transposes inside groups of 4 lanes (cpu_winograd_tiles_impl_internal.h):
 * element pairs of two vectors, then pairs of pairs. */
#define WG_UNPACK_LO 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29
#define WG_UNPACK_HI 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31
#define WG_PAIRS_LO 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define WG_PAIRS_HI 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
/* and of the 4-lane groups among vectors: groups 0 and 2, or 1 and 3, of two vectors in turn;
 * the low or high halves of two */
#define WG_GROUPS_EVEN 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define WG_GROUPS_ODD 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define WG_HALVES_LO 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define WG_HALVES_HI 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31

#define WG_TARGET EM_AVX2
#define WG_FN(name) wg_##name##_avx2
#include "backend_cpu/cpu_winograd_tiles_impl_internal.h"
#undef WG_TARGET
#undef WG_FN

#define WG_TARGET EM_AVX512
#define WG_FN(name) wg_##name##_avx512
#include "backend_cpu/cpu_winograd_tiles_impl_internal.h"
#undef WG_TARGET
#undef WG_FN

/* The body for this CPU's vector width: AVX-512 where em_cpu_use_avx512, else AVX2. */
#define WG_CALL(name, ...)                                                                    \
    (em_cpu_use_avx512() ? wg_##name##_avx512(__VA_ARGS__) : wg_##name##_avx2(__VA_ARGS__))

void em_wg_weights(const em_wg_geom *g, const float *w, bool flip, float *u)
{
    WG_CALL(weights, g, w, flip, u);
}

void em_wg_weights_back(const em_wg_geom *g, const float *gu, float *gw)
{
    WG_CALL(weights_back, g, gu, gw);
}

void em_wg_bias_sums(const em_wg_geom *g, const float *gyt, double *gb)
{
    WG_CALL(bias_sums, g, gyt, gb);
}

void em_wg_interleave(const float *x, int64_t planes, int64_t h, int64_t w, int64_t n0,
                      int lanes, int64_t ph, int64_t pw, int64_t hp, int64_t wp, float *xt)
{
    WG_CALL(interleave, x, planes, h, w, n0, lanes, ph, pw, hp, wp, xt);
}

void em_wg_input_transform(const em_wg_geom *g, const float *xt, int64_t t0, int64_t t1,
                           float *v)
{
    WG_CALL(input_transform, g, xt, t0, t1, v);
}

void em_wg_input_transform_t(const em_wg_geom *g, const float *xt, int64_t t0, int64_t t1,
                             float *vt)
{
    WG_CALL(input_transform_t, g, xt, t0, t1, vt);
}

void em_wg_output_transform(const em_wg_geom *g, const float *p, int64_t t0, int64_t t1,
                            const float *bias, int64_t n0, int lanes, float *y)
{
    WG_CALL(output_transform, g, p, t0, t1, bias, n0, lanes, y);
}

void em_wg_grad_output_transform(const em_wg_geom *g, const float *gyt, int64_t t0, int64_t t1,
                                 float *gp)
{
    WG_CALL(grad_output_transform, g, gyt, t0, t1, gp);
}
