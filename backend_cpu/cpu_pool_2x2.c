/* f32 max pooling over 2x2 windows at stride 2 without padding — the downsampling step of most
 * CNNs — four outputs at a time in SSE lanes: the two taps of a row are split into even and odd
 * lanes by a shuffle, so no gather is needed. Same tap order, ties and NaN rule as the general
 * kernel: the first maximum wins and a NaN beats any number. */
#include "backend_cpu/cpu_dense_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>

/* take = t > best, or t is NaN while best is not */
static inline __m128 pool_take(__m128 t, __m128 best)
{
    return _mm_or_ps(_mm_cmpgt_ps(t, best), _mm_andnot_ps(_mm_cmpunord_ps(best, best),
                                                          _mm_cmpunord_ps(t, t)));
}

static inline __m128 select_ps(__m128 mask, __m128 a, __m128 b)
{
    return _mm_or_ps(_mm_and_ps(mask, a), _mm_andnot_ps(mask, b));
}

/* Outputs ow..ow+3 of one output row: r0, r1 the window rows (w); y, argmax (w_out); at0 the
 * index of r0[0] in the plane. */
static void pool_block4(const float *r0, const float *r1, int64_t w, int64_t ow, float *y,
                        int64_t *argmax, int64_t at0)
{
    const float *a = r0 + 2 * ow, *b = r1 + 2 * ow;
    __m128 a_lo = _mm_loadu_ps(a), a_hi = _mm_loadu_ps(a + 4);
    __m128 b_lo = _mm_loadu_ps(b), b_hi = _mm_loadu_ps(b + 4);
    __m128 taps[4] = {
        _mm_shuffle_ps(a_lo, a_hi, _MM_SHUFFLE(2, 0, 2, 0)), /* r0[2 ow]     */
        _mm_shuffle_ps(a_lo, a_hi, _MM_SHUFFLE(3, 1, 3, 1)), /* r0[2 ow + 1] */
        _mm_shuffle_ps(b_lo, b_hi, _MM_SHUFFLE(2, 0, 2, 0)), /* r1[2 ow]     */
        _mm_shuffle_ps(b_lo, b_hi, _MM_SHUFFLE(3, 1, 3, 1)), /* r1[2 ow + 1] */
    };
    /* each tap's offset from the window's first element, per lane (int32) */
    const __m128i offsets[4] = {_mm_setzero_si128(), _mm_set1_epi32(1),
                                _mm_set1_epi32((int32_t)w), _mm_set1_epi32((int32_t)w + 1)};
    __m128 best = taps[0];
    __m128i off = offsets[0];
    for (int t = 1; t < 4; t++) {
        __m128 take = pool_take(taps[t], best);
        __m128i take_i = _mm_castps_si128(take);
        best = select_ps(take, taps[t], best);
        off = _mm_or_si128(_mm_and_si128(take_i, offsets[t]), _mm_andnot_si128(take_i, off));
    }
    _mm_storeu_ps(y + ow, best);
    if (argmax) {
        /* window starts at0 + 2 (ow + l); indices fit int32 (the caller checks h * w) */
        __m128i start = _mm_add_epi32(_mm_set1_epi32((int32_t)(at0 + 2 * ow)),
                                      _mm_setr_epi32(0, 2, 4, 6));
        __m128i idx = _mm_add_epi32(start, off), zero = _mm_setzero_si128();
        _mm_storeu_si128((__m128i *)(argmax + ow), _mm_unpacklo_epi32(idx, zero));
        _mm_storeu_si128((__m128i *)(argmax + ow + 2), _mm_unpackhi_epi32(idx, zero));
    }
}
#endif

/* One output row: r0, r1 the window rows (w); y, argmax (w_out); at0 the index of r0[0]. */
static void pool_row_2x2(const float *r0, const float *r1, int64_t w, int64_t w_out, float *y,
                         int64_t *argmax, int64_t at0)
{
    int64_t ow = 0;
#if defined(__SSE2__)
    for (; ow + 4 <= w_out; ow += 4)
        pool_block4(r0, r1, w, ow, y, argmax, at0);
    if (ow < w_out && w_out >= 4) { /* the last four again, overlapping: same values */
        pool_block4(r0, r1, w, w_out - 4, y, argmax, at0);
        ow = w_out;
    }
#endif
    for (; ow < w_out; ow++) {
        const float taps[4] = {r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]};
        float best = taps[0];
        int tap = 0;
        for (int t = 1; t < 4; t++)
            if (taps[t] > best || (taps[t] != taps[t] && best == best)) {
                best = taps[t];
                tap = t;
            }
        y[ow] = best;
        if (argmax)
            argmax[ow] = at0 + (tap >> 1) * w + 2 * ow + (tap & 1);
    }
}

bool em_cpu_max_pool2d_2x2_applies(const em_pool2d_shape *s)
{
    return s->kernel[0] == 2 && s->kernel[1] == 2 && s->stride[0] == 2 && s->stride[1] == 2
           && s->pad[0] == 0 && s->pad[1] == 0 && s->h_out == s->h / 2 && s->w_out == s->w / 2
           && s->h * s->w < INT32_MAX;
}

void em_cpu_max_pool2d_2x2_f32(const em_pool2d_shape *s, const float *x, float *y,
                               int64_t *argmax)
{
    const int64_t hw = s->h * s->w, hwo = s->h_out * s->w_out;
    #pragma omp parallel for if (s->n * s->c * hw >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p = 0; p < s->n * s->c; p++)
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            const float *r0 = x + p * hw + 2 * oh * s->w; // window rows of output row oh
            pool_row_2x2(r0, r0 + s->w, s->w, s->w_out, y + p * hwo + oh * s->w_out,
                         argmax ? argmax + p * hwo + oh * s->w_out : NULL, 2 * oh * s->w);
        }
}
