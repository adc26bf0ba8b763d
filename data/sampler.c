/* Samplers: the dataset indices each epoch visits. Sequential, random (a Philox-keyed permutation,
 * the loader's shuffle, or uniform draws with replacement) and weighted; every one a pure function
 * of (sampler, seed, epoch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "data/data_internal.h"

/* A uniform integer in [0, n) from 64 random bits (multiply-shift). */
static int64_t below(uint64_t bits, int64_t n)
{
    return (int64_t)(((unsigned __int128)bits * (uint64_t)n) >> 64);
}

void em_data_permutation(uint64_t key, int64_t n, int64_t *perm)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        em_philox_block r = em_philox4x32_10((uint64_t)i, key);
        int64_t j = below(((uint64_t)r.v[1] << 32) | r.v[0], i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* 64 random bits number i of a stream. */
static uint64_t bits64(uint64_t key, uint64_t i)
{
    em_philox_block r = em_philox4x32_10(i, key);
    return ((uint64_t)r.v[1] << 32) | r.v[0];
}

/* A double in (0, 1) from 64 random bits (53 of them, never 0). */
static double open_unit(uint64_t bits)
{
    return ((double)(bits >> 11) + 0.5) * 0x1.0p-53;
}

/* ---- sequential and random ---- */

typedef struct {
    em_sampler base;
    int64_t n;           /* the dataset's length */
    int64_t num_samples; /* indices per epoch */
    bool random, replacement;
} uniform_sampler;

static int64_t uniform_len(const em_sampler *s)
{
    return ((const uniform_sampler *)s)->num_samples;
}

static em_status uniform_indices(const em_sampler *s, uint64_t seed, int64_t epoch, int64_t *out)
{
    const uniform_sampler *u = (const uniform_sampler *)s;
    if (!u->random) {
        for (int64_t i = 0; i < u->n; i++)
            out[i] = i;
        return EM_OK;
    }
    if (u->replacement) {
        uint64_t key = em_data_key(seed, (uint64_t)epoch, EM_DATA_STREAM_DRAWS);
        for (int64_t i = 0; i < u->num_samples; i++)
            out[i] = below(bits64(key, (uint64_t)i), u->n);
        return EM_OK;
    }
    /* whole permutations one after another (the first is the loader's shuffle), the last one
     * cut short */
    bool partial = u->n > 0 && u->num_samples % u->n != 0;
    int64_t *perm = partial ? malloc((size_t)u->n * sizeof *perm) : NULL;
    if (partial && !perm)
        return em_set_error(EM_ERR_MEMORY, "em_sampler_indices: out of memory");
    for (int64_t at = 0, k = 0; at < u->num_samples; at += u->n, k++) {
        uint64_t stream = k == 0 ? EM_DATA_STREAM_SHUFFLE : EM_DATA_STREAM_DRAWS + (uint64_t)k;
        int64_t take = u->num_samples - at < u->n ? u->num_samples - at : u->n;
        int64_t *dst = take == u->n ? out + at : perm;
        em_data_permutation(em_data_key(seed, (uint64_t)epoch, stream), u->n, dst);
        if (dst == perm)
            memcpy(out + at, perm, (size_t)take * sizeof *perm);
    }
    free(perm);
    return EM_OK;
}

static void sampler_free(em_sampler *s)
{
    free(s);
}

static const em_sampler_vtable uniform_vtable = {uniform_len, uniform_indices, sampler_free};

static em_sampler *uniform_new(const char *fn, int64_t n, int64_t num_samples, bool random,
                               bool replacement)
{
    if (n < 0 || num_samples < 0 || (replacement && n == 0 && num_samples > 0)) {
        em_set_error(EM_ERR_ARG, "%s: %lld samples from a dataset of %lld", fn,
                     (long long)num_samples, (long long)n);
        return NULL;
    }
    uniform_sampler *u = calloc(1, sizeof *u);
    if (!u) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    *u = (uniform_sampler){.base.vt = &uniform_vtable, .n = n,
                           .num_samples = num_samples ? num_samples : n, .random = random,
                           .replacement = replacement};
    return &u->base;
}

em_sampler *em_sequential_sampler(int64_t n)
{
    return uniform_new("em_sequential_sampler", n, n, false, false);
}

em_sampler *em_random_sampler(int64_t n, em_random_sampler_opts opts)
{
    return uniform_new("em_random_sampler", n, opts.num_samples, true, opts.replacement);
}

/* ---- weighted ---- */

typedef struct {
    em_sampler base;
    int64_t n, num_samples;
    bool replacement;
    double *weights; /* (n) */
    double *cdf;     /* (n): running sums of weights */
} weighted_sampler;

static int64_t weighted_len(const em_sampler *s)
{
    return ((const weighted_sampler *)s)->num_samples;
}

typedef struct {
    double key;
    int64_t index;
} keyed_index;

static int by_key_descending(const void *a, const void *b)
{
    const keyed_index *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return (x->index > y->index) - (x->index < y->index);
}

/* With replacement: inverse CDF of a uniform draw. Without: Efraimidis-Spirakis keys
 * log(u) / w, the num_samples largest in order, which draws as successive weighted picks do. */
static em_status weighted_indices(const em_sampler *s, uint64_t seed, int64_t epoch, int64_t *out)
{
    const weighted_sampler *w = (const weighted_sampler *)s;
    uint64_t key = em_data_key(seed, (uint64_t)epoch, EM_DATA_STREAM_DRAWS);
    if (w->replacement) {
        double total = w->cdf[w->n - 1];
        for (int64_t i = 0; i < w->num_samples; i++) {
            double u = open_unit(bits64(key, (uint64_t)i)) * total;
            int64_t lo = 0, hi = w->n - 1;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (w->cdf[mid] > u)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            out[i] = lo;
        }
        return EM_OK;
    }
    keyed_index *k = malloc((size_t)w->n * sizeof *k);
    if (!k)
        return em_set_error(EM_ERR_MEMORY, "em_sampler_indices: out of memory");
    for (int64_t i = 0; i < w->n; i++)
        k[i] = (keyed_index){w->weights[i] > 0 ? log(open_unit(bits64(key, (uint64_t)i))) /
                                                     w->weights[i]
                                               : -INFINITY,
                             i};
    qsort(k, (size_t)w->n, sizeof *k, by_key_descending);
    for (int64_t i = 0; i < w->num_samples; i++)
        out[i] = k[i].index;
    free(k);
    return EM_OK;
}

static void weighted_free(em_sampler *s)
{
    weighted_sampler *w = (weighted_sampler *)s;
    free(w->weights);
    free(w->cdf);
    free(w);
}

static const em_sampler_vtable weighted_vtable = {weighted_len, weighted_indices, weighted_free};

em_sampler *em_weighted_random_sampler(const double *weights, int64_t n, int64_t num_samples,
                                       bool replacement)
{
    const char *fn = "em_weighted_random_sampler";
    if (!weights || n <= 0 || num_samples < 0) {
        em_set_error(EM_ERR_ARG, "%s: %lld weights, %lld samples", fn, (long long)n,
                     (long long)num_samples);
        return NULL;
    }
    int64_t positive = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(weights[i]) || weights[i] < 0) {
            em_set_error(EM_ERR_ARG, "%s: weight %lld is %g; weights must be finite and >= 0", fn,
                         (long long)i, weights[i]);
            return NULL;
        }
        positive += weights[i] > 0;
    }
    if (positive == 0 || (!replacement && num_samples > positive)) {
        em_set_error(EM_ERR_ARG, "%s: %lld samples without replacement from %lld positive "
                     "weights", fn, (long long)num_samples, (long long)positive);
        return NULL;
    }
    weighted_sampler *w = calloc(1, sizeof *w);
    double *ws = malloc((size_t)n * sizeof *ws), *cdf = malloc((size_t)n * sizeof *cdf);
    if (!w || !ws || !cdf) {
        free(w);
        free(ws);
        free(cdf);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        ws[i] = weights[i];
        cdf[i] = sum += weights[i];
    }
    *w = (weighted_sampler){.base.vt = &weighted_vtable, .n = n, .num_samples = num_samples,
                            .replacement = replacement, .weights = ws, .cdf = cdf};
    return &w->base;
}

/* ---- the interface's checked entry points ---- */

int64_t em_sampler_len(const em_sampler *s)
{
    if (!s) {
        em_set_error(EM_ERR_ARG, "em_sampler_len: sampler is NULL");
        return -1;
    }
    return s->vt->len(s);
}

em_status em_sampler_indices(const em_sampler *s, uint64_t seed, int64_t epoch, int64_t *out)
{
    if (!s || (!out && s->vt->len(s) > 0) || epoch < 0)
        return em_set_error(EM_ERR_ARG, "em_sampler_indices: NULL sampler or buffer, or epoch "
                            "%lld < 0", (long long)epoch);
    return s->vt->indices(s, seed, epoch, out);
}

void em_sampler_free(em_sampler *s)
{
    if (s)
        s->vt->free(s);
}
