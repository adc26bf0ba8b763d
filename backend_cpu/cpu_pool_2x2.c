/* f32 and bf16 max pooling over 2x2 windows at stride 2 without padding — the downsampling step
 * of most CNNs — sixteen outputs at a time in AVX-512 lanes (a row's tail masked) where the CPU
 * has it, else four in SSE lanes (a row's last four overlapping the ones before), bf16 widened
 * in the lanes and stored back exactly: the two taps of a row are split into even and odd lanes
 * by a shuffle, so no gather is needed. Same tap order, ties and NaN rule as the general kernel:
 * the first maximum wins and a NaN beats any number. The gradient is written densely: the
 * windows tile the plane, so each input gets its window's gradient or 0, with no zero fill and
 * scatter. */

#include <string.h>

#include "backend_cpu/cpu_dense_internal.h"
#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_simd_internal.h"

/* take = t > best, or t is NaN while best is not */
EM_AVX512 static inline __mmask16 pool_take16(__m512 t, __m512 best)
{
    return _mm512_cmp_ps_mask(t, best, _CMP_GT_OQ) |
           (_mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q) & ~_mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q));
}

/* The mask of the first n of 16 lanes, 0 <= n <= 16. */
static inline __mmask16 first_lanes(int64_t n)
{
    return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xffff : (1u << n) - 1);
}

/* The 16 values at element i of a plane of f32 or bf16 (widened: a bf16 is the top half of its
 * f32), lanes outside keep 0. */
EM_AVX512 static inline __m512 load16(bool bf16, const void *base, int64_t i, __mmask16 keep)
{
    if (!bf16)
        return _mm512_maskz_loadu_ps(keep, (const float *)base + i);
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(keep,
                                                                     (const uint16_t *)base + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

/* Stores the kept lanes of v at element i: f32, or bf16 exactly (v holds bf16 values: one of
 * the window's, 0 or a gradient of the bf16 input). */
EM_AVX512 static inline void store16(bool bf16, void *base, int64_t i, __mmask16 keep, __m512 v)
{
    if (!bf16) {
        _mm512_mask_storeu_ps((float *)base + i, keep, v);
        return;
    }
    const __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));
    _mm256_mask_storeu_epi16((uint16_t *)base + i, keep, h);
}

/* Planes [p0, p1) of x (n*c, h, w) into y and argmax (n*c, h_out, w_out), f32 or bf16, each
 * output row 16 outputs at a time. */
EM_AVX512 static void pool_planes_avx512(const em_pool2d_shape *s, bool bf16, const void *x,
                                         void *y, em_pool_tap *argmax, int64_t p0, int64_t p1)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const int64_t w = s->w, w_out = s->w_out, hw = s->h * w, hwo = s->h_out * w_out;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t p = p0; p < p1; p++)
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            const int64_t r0 = p * hw + 2 * oh * w, r1 = r0 + w; /* the window rows */
            const int64_t yr = p * hwo + oh * w_out;
            em_pool_tap *ar = argmax ? argmax + yr : NULL;
            for (int64_t ow = 0; ow < w_out; ow += 16) {
                const int64_t n = w_out - ow < 16 ? w_out - ow : 16;
                const __mmask16 lo = first_lanes(2 * n), hi = first_lanes(2 * n - 16);
                const __mmask16 keep = first_lanes(n);
                const int64_t a = r0 + 2 * ow, b = r1 + 2 * ow;
                const __m512 a0 = load16(bf16, x, a, lo);
                const __m512 a1 = load16(bf16, x, a + 16, hi);
                const __m512 b0 = load16(bf16, x, b, lo);
                const __m512 b1 = load16(bf16, x, b + 16, hi);
                const __m512 taps[4] = {_mm512_permutex2var_ps(a0, even, a1),
                                        _mm512_permutex2var_ps(a0, odd, a1),
                                        _mm512_permutex2var_ps(b0, even, b1),
                                        _mm512_permutex2var_ps(b0, odd, b1)};
                __m512 best = taps[0];
                __m512i tap = _mm512_setzero_si512();
                for (int t = 1; t < 4; t++) {
                    const __mmask16 take = pool_take16(taps[t], best);
                    best = _mm512_mask_mov_ps(best, take, taps[t]);
                    tap = _mm512_mask_mov_epi32(tap, take, _mm512_set1_epi32(t));
                }
                /* with relu: 0 for a negative maximum (NaN stays), no gradient unless positive */
                const __mmask16 positive = _mm512_cmp_ps_mask(best, zero, _CMP_GT_OQ);
                if (s->relu)
                    best = _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(best, zero, _CMP_LT_OQ),
                                              zero);
                store16(bf16, y, yr + ow, keep, best);
                if (!ar)
                    continue;
                if (s->relu)
                    tap = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), positive, tap);
                _mm512_mask_cvtepi32_storeu_epi16(ar + ow, keep, tap);
            }
        }
}

/* Planes [p0, p1) of gx (n*c, h, w) from gy and argmax (n*c, h_out, w_out), f32 or bf16: rows
 * 2 oh and 2 oh + 1 from output row oh, 16 windows at a time; columns past 2 w_out and an odd
 * last row get 0. */
EM_AVX512 static void pool_grad_planes_avx512(const em_pool2d_shape *s, bool bf16,
                                              const void *gy, const em_pool_tap *argmax,
                                              void *gx, int64_t p0, int64_t p1)
{
    /* lanes 0..15 of the interleave of a (even columns) and b (odd ones), then 16..31 */
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                         15, 31);
    const int64_t w = s->w, w_out = s->w_out, hw = s->h * w, hwo = s->h_out * w_out;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t p = p0; p < p1; p++) {
        const int64_t g = p * hw; // (H, W)
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            const int64_t gr = p * hwo + oh * w_out;
            const em_pool_tap *ar = argmax + gr;
            const int64_t g0 = g + 2 * oh * w, g1 = g0 + w;
            for (int64_t ow = 0; ow < w_out; ow += 16) {
                const int64_t n = w_out - ow < 16 ? w_out - ow : 16;
                const __mmask16 keep = first_lanes(n), lo_keep = first_lanes(2 * n);
                const __mmask16 hi_keep = first_lanes(2 * n - 16);
                const __m512 gv = load16(bf16, gy, gr + ow, keep);
                const __m512i tap = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(keep, ar + ow));
                __m512 t[4]; /* gv in the lanes whose window's maximum is tap k */
                for (int k = 0; k < 4; k++)
                    t[k] = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(tap, _mm512_set1_epi32(k)),
                                               gv);
                store16(bf16, gx, g0 + 2 * ow, lo_keep, _mm512_permutex2var_ps(t[0], lo, t[1]));
                store16(bf16, gx, g0 + 2 * ow + 16, hi_keep,
                        _mm512_permutex2var_ps(t[0], hi, t[1]));
                store16(bf16, gx, g1 + 2 * ow, lo_keep, _mm512_permutex2var_ps(t[2], lo, t[3]));
                store16(bf16, gx, g1 + 2 * ow + 16, hi_keep,
                        _mm512_permutex2var_ps(t[2], hi, t[3]));
            }
            for (int64_t col = 2 * w_out; col < w; col += 16) { /* 0 past the last window */
                store16(bf16, gx, g0 + col, first_lanes(w - col), zero);
                store16(bf16, gx, g1 + col, first_lanes(w - col), zero);
            }
        }
        for (int64_t col = 0; s->h % 2 && col < w; col += 16) /* an odd last row */
            store16(bf16, gx, g + (s->h - 1) * w + col, first_lanes(w - col), zero);
    }
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
/* The 4 values at element i of f32 or bf16 data, as load16's. */
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
