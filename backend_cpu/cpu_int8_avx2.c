/* The AVX2 tile of the int8 product: _mm256_maddubs_epi16 (u8 x s8 pairs to s16, exact for u7
 * activations) then _mm256_madd_epi16 by ones (to s32); up to 4 rows x one panel (16 columns,
 * two vectors) at a time. */
#include "backend_cpu/cpu_int8_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

#define TILE_TARGET EM_AVX2
#define TILE_VEC __m256i
#define TILE_LANES 8
#define TILE_MR EM_INT8_MR_AVX2
#define TILE_LOAD(at) _mm256_loadu_si256((const __m256i *)(at))
#define TILE_SET1(word) _mm256_set1_epi32(word)
#define TILE_ZERO() _mm256_setzero_si256()
#define TILE_DOT(acc, u, s)                                                                   \
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))

/* Writes the 8 sums of row r from column j0. */
EM_AVX2 static inline void store_vec(const em_int8_product *p, int64_t r, int64_t j0, __m256i sum)
{
    const em_int8_epilogue *e = p->epi;
    if (em_int8_out_cols(p, j0, 8) < 8) {
        int32_t s[8];
        _mm256_storeu_si256((__m256i *)s, sum);
        em_int8_store_row(p, r, j0, s, 8);
        return;
    }
    int64_t o = em_int8_out_index(p, r, j0);
    if (!e) {
        _mm256_storeu_si256((__m256i *)((int32_t *)p->out + o), sum);
        return;
    }
    __m256i corr = e->per_row ? _mm256_set1_epi32(e->corr[r])
                              : _mm256_loadu_si256((const __m256i *)(e->corr + j0));
    __m256 scale = e->per_row ? _mm256_set1_ps(e->scale[r]) : _mm256_loadu_ps(e->scale + j0);
    __m256 bias = e->per_row ? _mm256_set1_ps(e->bias[r]) : _mm256_loadu_ps(e->bias + j0);
    __m256 y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum, corr)), scale, bias);
    if (e->relu)
        y = _mm256_max_ps(y, _mm256_setzero_ps()); /* max_ps(NaN, 0) is 0 */
    _mm256_storeu_ps((float *)p->out + o, y);
}

#include "backend_cpu/cpu_int8_tile_impl_internal.h"

EM_AVX2 void em_int8_tile_avx2(const em_int8_product *p, int64_t r0, int mr, int64_t j0)
{
    for (int64_t j = j0; j < j0 + EM_INT8_TILE_COLS && j < p->n; j += EM_INT8_PANEL)
        tile_vectors(p, r0, mr, j);
}
