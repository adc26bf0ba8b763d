/* Subsets of a dataset (sample k of a subset is sample indices[k] of its parent) and PyTorch's
 * random_split over them, with the split order fixed by a seed. */
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
