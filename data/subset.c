/* Datasets made of others: subsets (sample k of a subset is sample indices[k] of its parent),
 * PyTorch's random_split over them, with the split order fixed by a seed, and ConcatDataset
 * (the parts' samples one after the other). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "data/data_internal.h"

typedef struct {
    em_dataset base;
    const em_dataset *parent;
    int64_t n;
    int64_t *indices; /* (n): the parent's sample of each of ours */
} subset_dataset;

static int64_t subset_len(const em_dataset *ds)
{
    return ((const subset_dataset *)ds)->n;
}

static em_status subset_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    const subset_dataset *d = (const subset_dataset *)ds;
    return d->parent->vt->get(d->parent, d->indices[i], epoch, x, y);
}

static void subset_free(em_dataset *ds)
{
    subset_dataset *d = (subset_dataset *)ds;
    free(d->indices);
    free(d);
}

static const em_dataset_vtable subset_vtable = {subset_len, subset_get, subset_free};

em_dataset *em_subset(const em_dataset *ds, const int64_t *indices, int64_t n)
{
    const char *fn = "em_subset";
    if (!ds || n < 0 || (n > 0 && !indices)) {
        em_set_error(EM_ERR_ARG, "%s: NULL dataset or indices, or %lld indices", fn,
                     (long long)n);
        return NULL;
    }
    int64_t len = ds->vt->len(ds);
    for (int64_t k = 0; k < n; k++)
        if (indices[k] < 0 || indices[k] >= len) {
            em_set_error(EM_ERR_ARG, "%s: index %lld (entry %lld) out of range [0, %lld)", fn,
                         (long long)indices[k], (long long)k, (long long)len);
            return NULL;
        }
    subset_dataset *d = calloc(1, sizeof *d);
    int64_t *copy = malloc((size_t)n * sizeof *copy + 1);
    if (!d || !copy) {
        free(d);
        free(copy);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory for %lld indices", fn, (long long)n);
        return NULL;
    }
    if (n > 0)
        memcpy(copy, indices, (size_t)n * sizeof *copy);
    d->base = *ds;
    d->base.vt = &subset_vtable;
    d->parent = ds;
    d->n = n;
    d->indices = copy;
    return &d->base;
}

em_status em_random_split(const em_dataset *ds, const int64_t *lengths, int n, uint64_t seed,
                          em_dataset **out)
{
    const char *fn = "em_random_split";
    if (!ds || !lengths || !out || n < 1)
        return em_set_error(EM_ERR_ARG, "%s: NULL dataset, lengths or out, or %d subsets", fn, n);
    int64_t len = ds->vt->len(ds), total = 0;
    for (int k = 0; k < n; k++) {
        if (lengths[k] < 0)
            return em_set_error(EM_ERR_ARG, "%s: length %d is %lld", fn, k,
                                (long long)lengths[k]);
        total += lengths[k];
    }
    if (total != len)
        return em_set_error(EM_ERR_ARG, "%s: the lengths add up to %lld, the dataset holds %lld",
                            fn, (long long)total, (long long)len);
    int64_t *perm = malloc((size_t)len * sizeof *perm + 1);
    if (!perm)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    em_data_permutation(em_data_key(seed, 0, EM_DATA_STREAM_SPLIT), len, perm);
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        out[k] = em_subset(ds, perm + at, lengths[k]);
        if (!out[k]) {
            for (int j = 0; j < k; j++) {
                em_dataset_free(out[j]);
                out[j] = NULL;
            }
            free(perm);
            return em_error_status();
        }
        at += lengths[k];
    }
    free(perm);
    return EM_OK;
}

em_status em_split_lengths(int64_t total, const double *fractions, int n, int64_t *lengths)
{
    const char *fn = "em_split_lengths";
    if (!fractions || !lengths || n < 1 || total < 0)
        return em_set_error(EM_ERR_ARG, "%s: NULL fractions or lengths, %d subsets, total %lld",
                            fn, n, (long long)total);
    double sum = 0;
    for (int k = 0; k < n; k++) {
        if (!(fractions[k] >= 0 && fractions[k] <= 1))
            return em_set_error(EM_ERR_ARG, "%s: fraction %d is %g, not in [0, 1]", fn, k,
                                fractions[k]);
        sum += fractions[k];
    }
    if (fabs(sum - 1) > 1e-6)
        return em_set_error(EM_ERR_ARG, "%s: the fractions add up to %g, not 1", fn, sum);
    int64_t given = 0;
    for (int k = 0; k < n; k++)
        given += lengths[k] = (int64_t)floor((double)total * fractions[k]);
    for (int64_t r = 0; r < total - given; r++)
        lengths[r % n]++;
    return EM_OK;
}

/* ---- concatenation ---- */

typedef struct {
    em_dataset base;
    int n;
    const em_dataset **parts; /* (n) borrowed */
    int64_t *ends;            /* (n): the samples of parts 0..k, PyTorch's cumulative_sizes */
} concat_dataset;

static int64_t concat_len(const em_dataset *ds)
{
    const concat_dataset *d = (const concat_dataset *)ds;
    return d->ends[d->n - 1];
}

/* the part holding sample i (the first whose end is past it) and i's place in it */
static em_status concat_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    const concat_dataset *d = (const concat_dataset *)ds;
    int lo = 0, hi = d->n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (d->ends[mid] > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    int64_t start = lo > 0 ? d->ends[lo - 1] : 0;
    return d->parts[lo]->vt->get(d->parts[lo], i - start, epoch, x, y);
}

static void concat_free(em_dataset *ds)
{
    concat_dataset *d = (concat_dataset *)ds;
    free(d->parts);
    free(d->ends);
    free(d);
}

static const em_dataset_vtable concat_vtable = {concat_len, concat_get, concat_free};

static bool same_shape(const em_shape *a, const em_shape *b)
{
    return a->ndim == b->ndim && !memcmp(a->d, b->d, sizeof a->d[0] * (size_t)a->ndim);
}

/* Whether a's samples have b's shapes and dtypes; else false with an error naming part k. */
static bool same_samples(const em_dataset *a, const em_dataset *b, int k)
{
    if (same_shape(&a->x_shape, &b->x_shape) && same_shape(&a->y_shape, &b->y_shape) &&
        a->x_dtype == b->x_dtype && a->y_dtype == b->y_dtype)
        return true;
    char xa[96], xb[96], ya[96], yb[96];
    em_set_error(EM_ERR_ARG, "em_concat_dataset: part %d's samples are x %s %s, y %s %s; part 0's "
                 "x %s %s, y %s %s", k, em_dtype_name(b->x_dtype),
                 em_shape_fmt(&b->x_shape, xb, sizeof xb), em_dtype_name(b->y_dtype),
                 em_shape_fmt(&b->y_shape, yb, sizeof yb), em_dtype_name(a->x_dtype),
                 em_shape_fmt(&a->x_shape, xa, sizeof xa), em_dtype_name(a->y_dtype),
                 em_shape_fmt(&a->y_shape, ya, sizeof ya));
    return false;
}

em_dataset *em_concat_dataset(const em_dataset *const *parts, int n)
{
    const char *fn = "em_concat_dataset";
    if (!parts || n < 1) {
        em_set_error(EM_ERR_ARG, "%s: needs at least one dataset", fn);
        return NULL;
    }
    for (int k = 0; k < n; k++)
        if (!parts[k] || !same_samples(parts[0], parts[k], k)) {
            if (!parts[k])
                em_set_error(EM_ERR_ARG, "%s: part %d is NULL", fn, k);
            return NULL;
        }
    concat_dataset *d = calloc(1, sizeof *d);
    const em_dataset **copy = malloc((size_t)n * sizeof *copy);
    int64_t *ends = malloc((size_t)n * sizeof *ends);
    if (!d || !copy || !ends) {
        free(d);
        free(copy);
        free(ends);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    d->base = *parts[0];
    d->base.vt = &concat_vtable;
    for (int k = 0; k < n; k++) {
        copy[k] = parts[k];
        ends[k] = (k ? ends[k - 1] : 0) + parts[k]->vt->len(parts[k]);
        if (parts[k]->n_classes > d->base.n_classes)
            d->base.n_classes = parts[k]->n_classes;
    }
    d->n = n;
    d->parts = copy;
    d->ends = ends;
    return &d->base;
}
