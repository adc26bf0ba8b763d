/* The AVX-512 VNNI tile of the int8 product: _mm512_dpbusd_epi32 sums four u8 x s8 products
 * into each of 16 int32 lanes (64 multiply-adds per instruction, nothing saturates); up to
 * 8 rows x 32 columns (two panels) in 16 accumulators, A's words broadcast, B's panels read
 * once per group for all rows. */
#include <immintrin.h>

#include "backend_cpu/cpu_int8_internal.h"

#define TILE_TARGET __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))
#define TILE_VEC __m512i
#define TILE_LANES 16
#define TILE_MR EM_INT8_MR_VNNI
#define TILE_LOAD(at) _mm512_loadu_si512(at)
#define TILE_SET1(word) _mm512_set1_epi32(word)
#define TILE_ZERO() _mm512_setzero_si512()
#define TILE_DOT(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)

/* Writes the 16 sums of row r from column j0, masked to the columns kept. */
TILE_TARGET static inline void store_vec(const em_int8_product *p, int64_t r, int64_t j0,
                                         __m512i sum)
{
    const em_int8_epilogue *e = p->epi;
    int cols = em_int8_out_cols(p, j0, EM_INT8_PANEL);
    if (cols == 0)
        return;
    __mmask16 keep = (__mmask16)((1u << cols) - 1);
    int64_t o = em_int8_out_index(p, r, j0);
    if (!e) {
        _mm512_mask_storeu_epi32((int32_t *)p->out + o, keep, sum);
        return;
    }
    __m512i corr = e->per_row ? _mm512_set1_epi32(e->corr[r]) : _mm512_loadu_si512(e->corr + j0);
    __m512 scale = e->per_row ? _mm512_set1_ps(e->scale[r]) : _mm512_loadu_ps(e->scale + j0);
    __m512 bias = e->per_row ? _mm512_set1_ps(e->bias[r]) : _mm512_loadu_ps(e->bias + j0);
    __m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, corr)), scale, bias);
    if (e->relu)
        y = _mm512_max_ps(y, _mm512_setzero_ps()); /* max_ps(NaN, 0) is 0 */
    _mm512_mask_storeu_ps((float *)p->out + o, keep, y);
}

#include "backend_cpu/cpu_int8_tile_impl_internal.h"

TILE_TARGET void em_int8_tile_vnni(const em_int8_product *p, int64_t r0, int mr, int64_t j0)
{
    tile_vectors(p, r0, mr, j0);
}
