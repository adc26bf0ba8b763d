/* f32 and bf16 max pooling over 2x2 windows at stride 2 without padding — the downsampling step
 * of most CNNs — sixteen outputs at a time in AVX-512 lanes (a row's tail masked) where the CPU
 * has it, else four in SSE lanes (a row's last four overlapping the ones before), bf16 widened
 * in the lanes and stored back exactly: the two taps of a row are split into even and odd lanes
 * by a shuffle, so no gather is needed (AVX-512: 32 bf16 columns in one vector, each word moved
 * into the top of its f32 lane by one word permutation). Same tap order, ties and NaN rule as
 * the general kernel: the first maximum wins and a NaN beats any number. The gradient is written
 * densely: the windows tile the plane, so each input gets its window's gradient or 0, with no
 * zero fill and scatter. Each body is written so the compiler keeps the four taps in registers
 * (a loop over an array of them went through the stack): on Zen 4, 2 threads, the CNN's
 * 64x32x28x28 relu pool, forward / gradient in us, AVX-512 f32 154 / 158 -> 107 / 85, bf16 165
 * / 148 -> 101 / 73; SSE f32 344 / 284 -> 218 / 173, bf16 390 / 393 -> 255 / 193. */

#include <string.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* take = t > best, or t is NaN while best is not: "not t <= best" (true for a NaN either side)
 * in the lanes where best is a number */
EM_AVX512 static inline __mmask16 pool_take16(__m512 t, __m512 best)
{
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), t, best,
                                   _CMP_NLE_UQ);
}

/* The mask of the first n of 16 lanes, 0 <= n <= 16. */
static inline __mmask16 first_lanes(int64_t n)
{
    return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xffff : (1u << n) - 1);
}

/* The low (half 0) or high (half 1) 16 bits of each 32-bit lane of v, in lane order. A word
 * permutation: the conversion GCC turns a narrowing and masked store into (vpmovdw to memory)
 * made the pool's stores its slowest instructions on Zen 4. */
EM_AVX512 static inline __m256i lane_halves16(__m512i v, int half)
{
    const __m512i pick = _mm512_add_epi16(
        _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30, 28, 26, 24, 22, 20,
                         18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
        _mm512_set1_epi16((short)half));
    return _mm512_castsi512_si256(_mm512_permutexvar_epi16(pick, v));
}

/* The f32 of the bf16 words of v that idx picks: word 2i + 1 of idx names lane i's (its top
 * half), the bottom halves 0. */
EM_AVX512 static inline __m512 bf16_in_tops(__m512i idx, __m512i v)
{
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaau, idx, v));
}

/* Stores the kept lanes of v at element i: f32, or bf16 exactly (v holds bf16 values: one of
 * the window's, 0 or a gradient of the bf16 input). */
EM_AVX512 static inline void store16(bool bf16, void *base, int64_t i, __mmask16 keep, __m512 v)
{
    if (!bf16) {
        _mm512_mask_storeu_ps((float *)base + i, keep, v);
        return;
    }
    _mm256_mask_storeu_epi16((uint16_t *)base + i, keep, lane_halves16(_mm512_castps_si512(v), 1));
}

/* The window maximum of taps t0..t3 in each lane (the first maximum wins, a NaN beats any
 * number) and, in tap, which of them it is. */
EM_AVX512 static inline __attribute__((always_inline)) __m512
pool_max16(__m512 t0, __m512 t1, __m512 t2, __m512 t3, __m512i *tap)
{
    __m512 best = t0;
    __m512i which = _mm512_setzero_si512();
    __mmask16 take = pool_take16(t1, best);
    best = _mm512_mask_mov_ps(best, take, t1);
    which = _mm512_mask_mov_epi32(which, take, _mm512_set1_epi32(1));
    take = pool_take16(t2, best);
    best = _mm512_mask_mov_ps(best, take, t2);
    which = _mm512_mask_mov_epi32(which, take, _mm512_set1_epi32(2));
    take = pool_take16(t3, best);
    best = _mm512_mask_mov_ps(best, take, t3);
    *tap = _mm512_mask_mov_epi32(which, take, _mm512_set1_epi32(3));
    return best;
}

/* Planes [p0, p1) of x (n*c, h, w) into y and argmax (n*c, h_out, w_out), f32 or bf16, each
 * output row 16 outputs at a time; bf16 and relu constant in each body. */
EM_AVX512 static inline __attribute__((always_inline)) void
pool_planes_avx512_of(const em_pool2d_shape *s, bool bf16, bool relu, const void *x, void *y,
                      em_pool_tap *argmax, int64_t p0, int64_t p1)
{
    /* f32: the even and odd elements of 32 in two vectors; bf16: those of 32 in one vector,
     * each moved into the top half of its f32 lane (word 2i + 1 of the result) */
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i even_words = _mm512_slli_epi32(even, 16);
    const __m512i odd_words = _mm512_slli_epi32(odd, 16);
    const int64_t w = s->w, w_out = s->w_out, h_out = s->h_out, hw = s->h * w;
    const int64_t hwo = h_out * w_out;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t p = p0; p < p1; p++)
        for (int64_t oh = 0; oh < h_out; oh++) {
            const int64_t r0 = p * hw + 2 * oh * w, r1 = r0 + w; /* the window rows */
            const int64_t yr = p * hwo + oh * w_out;
            for (int64_t ow = 0; ow < w_out; ow += 16) {
                const int64_t n = w_out - ow < 16 ? w_out - ow : 16;
                const __mmask16 lo = first_lanes(2 * n), hi = first_lanes(2 * n - 16);
                const __mmask16 keep = first_lanes(n);
                const int64_t a = r0 + 2 * ow, b = r1 + 2 * ow;
                __m512 taps[4]; /* row a's even and odd columns, then row b's */
                if (bf16) {
                    const __mmask32 both = (__mmask32)lo | (__mmask32)hi << 16;
                    const __m512i ra = _mm512_maskz_loadu_epi16(both, (const uint16_t *)x + a);
                    const __m512i rb = _mm512_maskz_loadu_epi16(both, (const uint16_t *)x + b);
                    taps[0] = bf16_in_tops(even_words, ra);
                    taps[1] = bf16_in_tops(odd_words, ra);
                    taps[2] = bf16_in_tops(even_words, rb);
                    taps[3] = bf16_in_tops(odd_words, rb);
                } else {
                    const float *xf = x;
                    const __m512 a0 = _mm512_maskz_loadu_ps(lo, xf + a);
                    const __m512 a1 = _mm512_maskz_loadu_ps(hi, xf + a + 16);
                    const __m512 b0 = _mm512_maskz_loadu_ps(lo, xf + b);
                    const __m512 b1 = _mm512_maskz_loadu_ps(hi, xf + b + 16);
                    taps[0] = _mm512_permutex2var_ps(a0, even, a1);
                    taps[1] = _mm512_permutex2var_ps(a0, odd, a1);
                    taps[2] = _mm512_permutex2var_ps(b0, even, b1);
                    taps[3] = _mm512_permutex2var_ps(b0, odd, b1);
                }
                __m512i tap;
                __m512 best = pool_max16(taps[0], taps[1], taps[2], taps[3], &tap);
                /* with relu: 0 for a negative maximum (NaN stays), no gradient unless positive */
                if (relu) {
                    const __mmask16 positive = _mm512_cmp_ps_mask(best, zero, _CMP_GT_OQ);
                    best = _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(best, zero, _CMP_LT_OQ),
                                              zero);
                    tap = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), positive, tap);
                }
                store16(bf16, y, yr + ow, keep, best);
                if (argmax)
                    _mm256_mask_storeu_epi16(argmax + yr + ow, keep, lane_halves16(tap, 0));
            }
        }
}

EM_AVX512 static void pool_planes_avx512(const em_pool2d_shape *s, bool bf16, const void *x,
                                         void *y, em_pool_tap *argmax, int64_t p0, int64_t p1)
{
    if (bf16 && s->relu)
        pool_planes_avx512_of(s, true, true, x, y, argmax, p0, p1);
    else if (bf16)
        pool_planes_avx512_of(s, true, false, x, y, argmax, p0, p1);
    else if (s->relu)
        pool_planes_avx512_of(s, false, true, x, y, argmax, p0, p1);
    else
        pool_planes_avx512_of(s, false, false, x, y, argmax, p0, p1);
}

/* Planes [p0, p1) of gx (n*c, h, w) from gy and argmax (n*c, h_out, w_out), f32 or bf16: rows
 * 2 oh and 2 oh + 1 from output row oh, 16 windows at a time; columns past 2 w_out and an odd
 * last row get 0. bf16 is constant in each body. */
EM_AVX512 static inline __attribute__((always_inline)) void
pool_grad_planes_avx512_of(const em_pool2d_shape *s, bool bf16, const void *gy,
                           const em_pool_tap *argmax, void *gx, int64_t p0, int64_t p1)
{
    /* lanes 0..15 of the interleave of a (even columns) and b (odd ones), then 16..31 */
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                         15, 31);
    /* bf16: word i of 16 into the top of lane i (bf16_in_tops); and the top words of a's and
     * b's lanes woven into 32 columns, word 2i from a (its word 2i + 1), 2i + 1 from b (word
     * 32 + 2i + 1 of the pair) */
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i spread_words = _mm512_slli_epi32(lane, 16);
    const __m512i tops_woven = _mm512_or_si512(
        _mm512_add_epi32(_mm512_slli_epi32(lane, 1), _mm512_set1_epi32(1)),
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(lane, 1), _mm512_set1_epi32(33)),
                          16));
    const int64_t w = s->w, w_out = s->w_out, h_out = s->h_out, hw = s->h * w;
    const int64_t hwo = h_out * w_out;
    const bool odd_h = s->h % 2;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t p = p0; p < p1; p++) {
        const int64_t g = p * hw; // (H, W)
        for (int64_t oh = 0; oh < h_out; oh++) {
            const int64_t gr = p * hwo + oh * w_out;
            const int64_t g0 = g + 2 * oh * w, g1 = g0 + w;
            for (int64_t ow = 0; ow < w_out; ow += 16) {
                const int64_t n = w_out - ow < 16 ? w_out - ow : 16;
                const __mmask16 keep = first_lanes(n), lo_keep = first_lanes(2 * n);
                const __mmask16 hi_keep = first_lanes(2 * n - 16);
                const __m512 gv =
                    bf16 ? bf16_in_tops(
                               spread_words, _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(
                                                 keep, (const uint16_t *)gy + gr + ow)))
                         : _mm512_maskz_loadu_ps(keep, (const float *)gy + gr + ow);
                const __m512i tap =
                    _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(keep, argmax + gr + ow));
                /* gv in the lanes whose window's maximum is tap k */
                const __m512 t0 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(tap, _mm512_setzero_si512()), gv);
                const __m512 t1 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(tap, _mm512_set1_epi32(1)), gv);
                const __m512 t2 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(tap, _mm512_set1_epi32(2)), gv);
                const __m512 t3 = _mm512_maskz_mov_ps(
                    _mm512_cmpeq_epi32_mask(tap, _mm512_set1_epi32(3)), gv);
                if (bf16) { /* 32 columns of a row in one vector of words */
                    const __mmask32 both = (__mmask32)lo_keep | (__mmask32)hi_keep << 16;
                    uint16_t *row0 = (uint16_t *)gx + g0 + 2 * ow, *row1 = row0 + w;
                    _mm512_mask_storeu_epi16(row0, both, _mm512_permutex2var_epi16(
                                                             _mm512_castps_si512(t0), tops_woven,
                                                             _mm512_castps_si512(t1)));
                    _mm512_mask_storeu_epi16(row1, both, _mm512_permutex2var_epi16(
                                                             _mm512_castps_si512(t2), tops_woven,
                                                             _mm512_castps_si512(t3)));
                    continue;
                }
                store16(false, gx, g0 + 2 * ow, lo_keep, _mm512_permutex2var_ps(t0, lo, t1));
                store16(false, gx, g0 + 2 * ow + 16, hi_keep, _mm512_permutex2var_ps(t0, hi, t1));
                store16(false, gx, g1 + 2 * ow, lo_keep, _mm512_permutex2var_ps(t2, lo, t3));
                store16(false, gx, g1 + 2 * ow + 16, hi_keep, _mm512_permutex2var_ps(t2, hi, t3));
            }
            for (int64_t col = 2 * w_out; col < w; col += 16) { /* 0 past the last window */
                store16(bf16, gx, g0 + col, first_lanes(w - col), zero);
                store16(bf16, gx, g1 + col, first_lanes(w - col), zero);
            }
        }
        for (int64_t col = 0; odd_h && col < w; col += 16) /* an odd last row */
            store16(bf16, gx, g + (s->h - 1) * w + col, first_lanes(w - col), zero);
    }
}

EM_AVX512 static void pool_grad_planes_avx512(const em_pool2d_shape *s, bool bf16,
                                              const void *gy, const em_pool_tap *argmax,
                                              void *gx, int64_t p0, int64_t p1)
{
    if (bf16)
        pool_grad_planes_avx512_of(s, true, gy, argmax, gx, p0, p1);
    else
        pool_grad_planes_avx512_of(s, false, gy, argmax, gx, p0, p1);
}

/* Stores v at element i: f32, or bf16 exactly (v holds a bf16 value, as store16's: its top
 * half). */
static inline void put_value(bool bf16, void *base, int64_t i, float v)
{
    if (!bf16) {
        ((float *)base)[i] = v;
        return;
    }
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    ((uint16_t *)base)[i] = (uint16_t)(bits >> 16);
}

/* Output ow of one output row, one window at a time: a and b the window rows' first elements
 * in x, yr the row's in y and argmax. */
static inline __attribute__((always_inline)) void
pool_one(bool bf16, const void *x, int64_t a, int64_t b, int64_t ow, void *y, int64_t yr,
         em_pool_tap *argmax, bool relu)
{
    const float taps[4] = {em_cpu_f32_or_bf16_at(bf16, x, a + 2 * ow),
                           em_cpu_f32_or_bf16_at(bf16, x, a + 2 * ow + 1),
                           em_cpu_f32_or_bf16_at(bf16, x, b + 2 * ow),
                           em_cpu_f32_or_bf16_at(bf16, x, b + 2 * ow + 1)};
    float best = taps[0];
    int tap = 0;
    for (int t = 1; t < 4; t++)
        if (taps[t] > best || (taps[t] != taps[t] && best == best)) {
            best = taps[t];
            tap = t;
        }
    put_value(bf16, y, yr + ow, relu && best < 0 ? 0 : best);
    if (argmax)
        argmax[yr + ow] = (em_pool_tap)(relu && !(best > 0) ? -1 : tap);
}

/* Window ow's gradient, dense: gy at its maximum's tap, 0 at the others (rows g0 and g1). */
static void pool_grad_one(bool bf16, const void *gy, const em_pool_tap *argmax, int64_t gr,
                          int64_t ow, void *gx, int64_t g0, int64_t g1)
{
    const float g = em_cpu_f32_or_bf16_at(bf16, gy, gr + ow);
    const int tap = argmax[gr + ow];
    put_value(bf16, gx, g0 + 2 * ow, tap == 0 ? g : 0.0f);
    put_value(bf16, gx, g0 + 2 * ow + 1, tap == 1 ? g : 0.0f);
    put_value(bf16, gx, g1 + 2 * ow, tap == 2 ? g : 0.0f);
    put_value(bf16, gx, g1 + 2 * ow + 1, tap == 3 ? g : 0.0f);
}

#if defined(__SSE2__)
/* The 4 values at element i of f32 or bf16 data (a bf16 widened: the top half of its f32). */
static inline __m128 load4(bool bf16, const void *base, int64_t i)
{
    if (!bf16)
        return _mm_loadu_ps((const float *)base + i);
    const __m128i h = _mm_loadl_epi64((const __m128i *)((const uint16_t *)base + i));
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}

/* Stores the 4 values of v at element i, as store16: a bf16's f32 has 16 zero bits below it,
 * so its top half shifted down (with its sign) packs back exactly. */
static inline void store4(bool bf16, void *base, int64_t i, __m128 v)
{
    if (!bf16) {
        _mm_storeu_ps((float *)base + i, v);
        return;
    }
    const __m128i h = _mm_srai_epi32(_mm_castps_si128(v), 16);
    _mm_storel_epi64((__m128i *)((uint16_t *)base + i), _mm_packs_epi32(h, h));
}

/* take = t > best, or t is NaN while best is not (as pool_take16) */
static inline __m128 pool_take(__m128 t, __m128 best)
{
    return _mm_and_ps(_mm_cmpnle_ps(t, best), _mm_cmpord_ps(best, best));
}

static inline __m128 select_ps(__m128 mask, __m128 a, __m128 b)
{
    return _mm_or_ps(_mm_and_ps(mask, a), _mm_andnot_ps(mask, b));
}

/* Outputs ow..ow+3 of one output row, as pool_one. */
static inline __attribute__((always_inline)) void
pool_block4(bool bf16, const void *x, int64_t a, int64_t b, int64_t ow, void *y, int64_t yr,
            em_pool_tap *argmax, bool relu)
{
    __m128 a_lo = load4(bf16, x, a + 2 * ow), a_hi = load4(bf16, x, a + 2 * ow + 4);
    __m128 b_lo = load4(bf16, x, b + 2 * ow), b_hi = load4(bf16, x, b + 2 * ow + 4);
    __m128 taps[4] = {
        _mm_shuffle_ps(a_lo, a_hi, _MM_SHUFFLE(2, 0, 2, 0)), /* row a, column 2 ow     */
        _mm_shuffle_ps(a_lo, a_hi, _MM_SHUFFLE(3, 1, 3, 1)), /* row a, column 2 ow + 1 */
        _mm_shuffle_ps(b_lo, b_hi, _MM_SHUFFLE(2, 0, 2, 0)), /* row b, column 2 ow     */
        _mm_shuffle_ps(b_lo, b_hi, _MM_SHUFFLE(3, 1, 3, 1)), /* row b, column 2 ow + 1 */
    };
    __m128 best = taps[0];
    __m128i tap = _mm_setzero_si128();
    #pragma GCC unroll 3
    for (int t = 1; t < 4; t++) {
        __m128 take = pool_take(taps[t], best);
        __m128i take_i = _mm_castps_si128(take);
        best = select_ps(take, taps[t], best);
        tap = _mm_or_si128(_mm_and_si128(take_i, _mm_set1_epi32(t)), _mm_andnot_si128(take_i, tap));
    }
    /* with relu: 0 for a negative maximum (NaN stays), no gradient unless it is positive */
    const __m128 positive = _mm_cmpgt_ps(best, _mm_setzero_ps());
    if (relu)
        best = _mm_andnot_ps(_mm_cmplt_ps(best, _mm_setzero_ps()), best);
    store4(bf16, y, yr + ow, best);
    if (argmax) {
        if (relu) {
            const __m128i keep = _mm_castps_si128(positive);
            tap = _mm_or_si128(_mm_and_si128(keep, tap),
                               _mm_andnot_si128(keep, _mm_set1_epi32(-1)));
        }
        _mm_storel_epi64((__m128i *)(argmax + yr + ow), _mm_packs_epi32(tap, tap)); /* 4 x int16 */
    }
}

/* Windows ow..ow+3 of one output row's gradient, as pool_grad_one. */
static void pool_grad_block4(bool bf16, const void *gy, const em_pool_tap *argmax, int64_t gr,
                             int64_t ow, void *gx, int64_t g0, int64_t g1)
{
    const __m128 g = load4(bf16, gy, gr + ow);
    const __m128i taps16 = _mm_loadl_epi64((const __m128i *)(argmax + gr + ow));
    const __m128i tap = _mm_srai_epi32(_mm_unpacklo_epi16(taps16, taps16), 16);
    __m128 t[4]; /* g in the lanes whose window's maximum is tap k */
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        t[k] = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(tap, _mm_set1_epi32(k))), g);
    store4(bf16, gx, g0 + 2 * ow, _mm_unpacklo_ps(t[0], t[1]));
    store4(bf16, gx, g0 + 2 * ow + 4, _mm_unpackhi_ps(t[0], t[1]));
    store4(bf16, gx, g1 + 2 * ow, _mm_unpacklo_ps(t[2], t[3]));
    store4(bf16, gx, g1 + 2 * ow + 4, _mm_unpackhi_ps(t[2], t[3]));
}
#endif

/* One output row: a and b the window rows' first elements in x, yr the row's in y and argmax;
 * four outputs at a time in SSE lanes, the last four again overlapping (the same values). */
static inline __attribute__((always_inline)) void
pool_row(bool bf16, const void *x, int64_t a, int64_t b, int64_t w_out, void *y, int64_t yr,
         em_pool_tap *argmax, bool relu)
{
    int64_t ow = 0;
#if defined(__SSE2__)
    for (; ow + 4 <= w_out; ow += 4)
        pool_block4(bf16, x, a, b, ow, y, yr, argmax, relu);
    if (ow < w_out && w_out >= 4) {
        pool_block4(bf16, x, a, b, w_out - 4, y, yr, argmax, relu);
        ow = w_out;
    }
#endif
    for (; ow < w_out; ow++)
        pool_one(bf16, x, a, b, ow, y, yr, argmax, relu);
}

/* One output row's gradient into rows g0 and g1 of gx, as pool_row. */
static void pool_grad_row(bool bf16, const void *gy, const em_pool_tap *argmax, int64_t gr,
                          int64_t w_out, void *gx, int64_t g0, int64_t g1)
{
    int64_t ow = 0;
#if defined(__SSE2__)
    for (; ow + 4 <= w_out; ow += 4)
        pool_grad_block4(bf16, gy, argmax, gr, ow, gx, g0, g1);
    if (ow < w_out && w_out >= 4) {
        pool_grad_block4(bf16, gy, argmax, gr, w_out - 4, gx, g0, g1);
        ow = w_out;
    }
#endif
    for (; ow < w_out; ow++)
        pool_grad_one(bf16, gy, argmax, gr, ow, gx, g0, g1);
}

/* Planes [p0, p1) of x into y and argmax, a row at a time (pool_planes_avx512's contract). */
static inline __attribute__((always_inline)) void
pool_planes_of(const em_pool2d_shape *s, bool bf16, const void *x, void *y, em_pool_tap *argmax,
               int64_t p0, int64_t p1)
{
    const int64_t hw = s->h * s->w, hwo = s->h_out * s->w_out;
    for (int64_t p = p0; p < p1; p++)
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            const int64_t a = p * hw + 2 * oh * s->w; // window rows of output row oh
            pool_row(bf16, x, a, a + s->w, s->w_out, y, p * hwo + oh * s->w_out, argmax,
                     s->relu);
        }
}

/* Planes [p0, p1) of gx from gy and argmax, a row at a time (pool_grad_planes_avx512's
 * contract). */
static void pool_grad_planes(const em_pool2d_shape *s, bool bf16, const void *gy,
                             const em_pool_tap *argmax, void *gx, int64_t p0, int64_t p1)
{
    const int64_t w = s->w, hw = s->h * w, hwo = s->h_out * s->w_out;
    for (int64_t p = p0; p < p1; p++) {
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            const int64_t g0 = p * hw + 2 * oh * w, g1 = g0 + w;
            pool_grad_row(bf16, gy, argmax, p * hwo + oh * s->w_out, s->w_out, gx, g0, g1);
            for (int64_t col = 2 * s->w_out; col < w; col++) { /* 0 past the last window */
                put_value(bf16, gx, g0 + col, 0.0f);
                put_value(bf16, gx, g1 + col, 0.0f);
            }
        }
        for (int64_t col = 0; s->h % 2 && col < w; col++) /* an odd last row */
            put_value(bf16, gx, p * hw + (s->h - 1) * w + col, 0.0f);
    }
}

bool em_cpu_max_pool2d_2x2_applies(const em_pool2d_shape *s)
{
    return s->kernel[0] == 2 && s->kernel[1] == 2 && s->stride[0] == 2 && s->stride[1] == 2
           && s->pad[0] == 0 && s->pad[1] == 0 && s->dilation[0] == 1 && s->dilation[1] == 1
           && s->h_out == s->h / 2 && s->w_out == s->w / 2;
}

/* The forward with bf16 a constant in each body: a test per block cost the f32 forward 16%. */
static void pool_planes(const em_pool2d_shape *s, bool bf16, const void *x, void *y,
                        em_pool_tap *argmax, int64_t p0, int64_t p1)
{
    if (bf16)
        pool_planes_of(s, true, x, y, argmax, p0, p1);
    else
        pool_planes_of(s, false, x, y, argmax, p0, p1);
}

/* Planes per task: the AVX-512 kernels' constants set up once for many rows. */
#define POOL_PLANE_BLOCK 32

/* One pass over every plane, blocks of planes over the threads, in AVX-512 lanes where the CPU
 * has them: the forward (x into y and argmax_out) or the gradient (gy and argmax_in into gx). */
static bool pool_pass(const em_pool2d_shape *s, bool grad, em_dtype dt, const void *in, void *out,
                      em_pool_tap *argmax_out, const em_pool_tap *argmax_in)
{
    if (dt != EM_F32 && dt != EM_BF16)
        return false;
    const bool bf16 = dt == EM_BF16, wide = em_cpu_use_avx512();
    const int64_t planes = s->n * s->c;
    #pragma omp parallel for if (planes * s->h * s->w >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p0 = 0; p0 < planes; p0 += POOL_PLANE_BLOCK) {
        const int64_t p1 = p0 + POOL_PLANE_BLOCK < planes ? p0 + POOL_PLANE_BLOCK : planes;
        if (grad)
            (wide ? pool_grad_planes_avx512 : pool_grad_planes)(s, bf16, in, argmax_in, out, p0,
                                                                p1);
        else
            (wide ? pool_planes_avx512 : pool_planes)(s, bf16, in, out, argmax_out, p0, p1);
    }
    return true;
}

bool em_cpu_max_pool2d_2x2(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                           em_pool_tap *argmax)
{
    return pool_pass(s, false, dt, x, y, argmax, NULL);
}

bool em_cpu_max_pool2d_2x2_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                                const em_pool_tap *argmax, void *gx)
{
    return pool_pass(s, true, dt, gy, gx, NULL, argmax);
}
