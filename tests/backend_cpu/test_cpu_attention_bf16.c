/* The bf16 attention kernels on the CPU's bf16 dot products against attention computed in double
 * from the same bf16 operands: forward output and log-sum-exp, and the three gradients, within
 * bf16's rounding (the weights and score gradients are rounded to bf16 before their products);
 * ragged lengths, strided (packed) rows, causal or not, head dims below a vector. Calls the
 * kernel does not take (a mask, dropout, an odd head dim) are refused, nothing done. One skip
 * line on a CPU without AVX512_BF16. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;
static float uniform(void) /* in [-1, 1] */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

/* A (B, H, L, X) bf16 array whose rows are ld elements apart (ld >= X), its values random. */
typedef struct {
    em_arr a;
    uint16_t *data;
} array;

static array make(int64_t b, int64_t h, int64_t l, int64_t x, int64_t ld, bool fill)
{
    array r = {.data = calloc((size_t)(b * h * l * ld), sizeof(uint16_t))};
    for (int64_t i = 0; fill && i < b * h * l * ld; i++)
        r.data[i] = em_f32_to_bf16(uniform());
    r.a = (em_arr){.data = r.data, .dtype = EM_BF16, .ndim = 4, .shape = {b, h, l, x},
                   .strides = {h * l * ld, l * ld, ld, 1}};
    return r;
}

static double at(const array *r, int64_t b, int64_t h, int64_t i, int64_t x)
{
    return em_bf16_to_f32(r->data[b * r->a.strides[0] + h * r->a.strides[1] +
                                  i * r->a.strides[2] + x]);
}

typedef struct {
    int64_t b, h, lq, lk, d, dv, pad; /* pad: extra elements between rows */
    bool causal;
} shape;

/* want[name] values of output (b, h, i, x) */
static void expect_close(const char *what, const shape *s, const array *got, const double *want,
                         int64_t l, int64_t x)
{
    double amax = 0, dmax = 0;
    for (int64_t bh = 0; bh < s->b * s->h; bh++)
        for (int64_t i = 0; i < l; i++)
            for (int64_t y = 0; y < x; y++) {
                double w = want[(bh * l + i) * x + y];
                amax = fmax(amax, fabs(w));
                dmax = fmax(dmax, fabs(at(got, bh / s->h, bh % s->h, i, y) - w));
            }
    cr_expect(dmax <= 1e-2 * amax, "lq %lld lk %lld d %lld dv %lld causal %d: %s max |diff| %g "
              "of max %g", (long long)s->lq, (long long)s->lk, (long long)s->d,
              (long long)s->dv, s->causal, what, dmax, amax);
}

static void check(shape s)
{
    const double scale = 1 / sqrt((double)s.d);
    array q = make(s.b, s.h, s.lq, s.d, s.d + s.pad, true);
    array k = make(s.b, s.h, s.lk, s.d, s.d + s.pad, true);
    array v = make(s.b, s.h, s.lk, s.dv, s.dv + s.pad, true);
    array go = make(s.b, s.h, s.lq, s.dv, s.dv, true);
    array out = make(s.b, s.h, s.lq, s.dv, s.dv, false), gq = make(s.b, s.h, s.lq, s.d, s.d, false);
    array gk = make(s.b, s.h, s.lk, s.d, s.d, false), gv = make(s.b, s.h, s.lk, s.dv, s.dv, false);
    float *lse = calloc((size_t)(s.b * s.h * s.lq), sizeof(float));
    em_arr lse_a = {.data = lse, .dtype = EM_F32, .ndim = 3, .shape = {s.b, s.h, s.lq},
                    .strides = {s.h * s.lq, s.lq, 1}};
    em_attention_params p = {.scale = scale, .causal = s.causal};
    cr_assert_eq(em_cpu_attention_bf16(&p, s.b, s.h, s.lq, s.lk, s.d, s.dv, &q.a, &k.a, &v.a,
                                       NULL, &out.a, &lse_a, NULL, NULL, NULL, NULL),
                 EM_KERNEL_OK);
    cr_assert_eq(em_cpu_attention_bf16(&p, s.b, s.h, s.lq, s.lk, s.d, s.dv, &q.a, &k.a, &v.a,
                                       NULL, &out.a, &lse_a, &go.a, &gq.a, &gk.a, &gv.a),
                 EM_KERNEL_OK);
    const int64_t nbh = s.b * s.h;
    double *w_out = calloc((size_t)(nbh * s.lq * s.dv), sizeof(double));
    double *w_gq = calloc((size_t)(nbh * s.lq * s.d), sizeof(double));
    double *w_gk = calloc((size_t)(nbh * s.lk * s.d), sizeof(double));
    double *w_gv = calloc((size_t)(nbh * s.lk * s.dv), sizeof(double));
    double *pr = malloc(sizeof(double) * (size_t)s.lk), *dp = malloc(sizeof(double) * (size_t)s.lk);
    for (int64_t bh = 0; bh < nbh; bh++) {
        const int64_t b = bh / s.h, h = bh % s.h;
        for (int64_t i = 0; i < s.lq; i++) {
            const int64_t seen = s.causal ? (i + 1 < s.lk ? i + 1 : s.lk) : s.lk;
            double mx = -INFINITY, sum = 0, delta = 0;
            for (int64_t j = 0; j < seen; j++) {
                double dot = 0;
                for (int64_t x = 0; x < s.d; x++)
                    dot += at(&q, b, h, i, x) * at(&k, b, h, j, x);
                pr[j] = dot * scale;
                mx = fmax(mx, pr[j]);
            }
            for (int64_t j = 0; j < seen; j++)
                sum += (pr[j] = exp(pr[j] - mx));
            cr_expect(fabs(lse[bh * s.lq + i] - (mx + log(sum))) <= 1e-4 * (1 + fabs(mx)),
                      "lse[%lld] %g, want %g", (long long)i, lse[bh * s.lq + i], mx + log(sum));
            for (int64_t j = 0; j < seen; j++) {
                pr[j] /= sum;
                for (int64_t y = 0; y < s.dv; y++)
                    w_out[(bh * s.lq + i) * s.dv + y] += pr[j] * at(&v, b, h, j, y);
            }
            for (int64_t y = 0; y < s.dv; y++)
                delta += at(&go, b, h, i, y) * w_out[(bh * s.lq + i) * s.dv + y];
            for (int64_t j = 0; j < seen; j++) {
                double g = 0;
                for (int64_t y = 0; y < s.dv; y++) {
                    g += at(&go, b, h, i, y) * at(&v, b, h, j, y);
                    w_gv[(bh * s.lk + j) * s.dv + y] += pr[j] * at(&go, b, h, i, y);
                }
                dp[j] = pr[j] * (g - delta) * scale; /* the score's gradient, times the scale */
                for (int64_t x = 0; x < s.d; x++) {
                    w_gq[(bh * s.lq + i) * s.d + x] += dp[j] * at(&k, b, h, j, x);
                    w_gk[(bh * s.lk + j) * s.d + x] += dp[j] * at(&q, b, h, i, x);
                }
            }
        }
    }
    expect_close("out", &s, &out, w_out, s.lq, s.dv);
    expect_close("gq", &s, &gq, w_gq, s.lq, s.d);
    expect_close("gk", &s, &gk, w_gk, s.lk, s.d);
    expect_close("gv", &s, &gv, w_gv, s.lk, s.dv);
    void *bufs[] = {q.data, k.data, v.data, go.data, out.data, gq.data, gk.data, gv.data, lse,
                    w_out, w_gq, w_gk, w_gv, pr, dp};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
}

Test(cpu_attention_bf16, matches_attention_in_double_within_bf16_rounding)
{
    if (!em_cpu_has_avx512_bf16())
        cr_skip_test("no AVX512_BF16 on this CPU: bf16 attention runs on f32 copies");
    check((shape){2, 2, 70, 70, 32, 32, 0, true});     /* the gpt's heads, ragged length */
    check((shape){1, 3, 128, 128, 32, 32, 64, true});  /* rows of a packed projection */
    check((shape){2, 1, 33, 100, 16, 8, 2, false});    /* cross attention, narrow heads */
    check((shape){1, 2, 130, 65, 24, 40, 0, true});    /* more queries than keys */
}

Test(cpu_attention_bf16, refuses_what_it_does_not_take)
{
    array q = make(1, 1, 4, 6, 6, true), k = make(1, 1, 4, 6, 6, true);
    array v = make(1, 1, 4, 6, 6, true), out = make(1, 1, 4, 6, 6, false);
    float lse[4] = {0};
    em_arr lse_a = {.data = lse, .dtype = EM_F32, .ndim = 3, .shape = {1, 1, 4},
                    .strides = {4, 4, 1}};
    em_attention_params p = {.scale = 0.5};
    bool keep[16] = {true};
    em_arr mask = {.data = keep, .dtype = EM_BOOL, .ndim = 4, .shape = {1, 1, 4, 4},
                   .strides = {16, 16, 4, 1}};
    cr_expect_eq(em_cpu_attention_bf16(&p, 1, 1, 4, 4, 6, 6, &q.a, &k.a, &v.a, &mask, &out.a,
                                       &lse_a, NULL, NULL, NULL, NULL),
                 EM_KERNEL_UNSUPPORTED, "a mask");
    p.dropout_p = 0.1;
    cr_expect_eq(em_cpu_attention_bf16(&p, 1, 1, 4, 4, 6, 6, &q.a, &k.a, &v.a, NULL, &out.a,
                                       &lse_a, NULL, NULL, NULL, NULL),
                 EM_KERNEL_UNSUPPORTED, "dropout");
    p.dropout_p = 0;
    q.a.shape[3] = k.a.shape[3] = 5;
    cr_expect_eq(em_cpu_attention_bf16(&p, 1, 1, 4, 4, 5, 6, &q.a, &k.a, &v.a, NULL, &out.a,
                                       &lse_a, NULL, NULL, NULL, NULL),
                 EM_KERNEL_UNSUPPORTED, "an odd head dim");
    for (int i = 0; i < 24; i++)
        cr_expect_eq(out.data[i], 0, "nothing written");
    free(q.data);
    free(k.data);
    free(v.data);
    free(out.data);
}
