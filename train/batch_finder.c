/* The batch-size finder: the largest batch whose training step fits a device's memory budget,
 * and the batch with the most samples/s among those tried. */
#include <inttypes.h>

#include "train/batch_finder.h"

/* One try of batch; *fits says whether it ran within memory. Errors other than memory end the
 * search. */
static em_status try_batch(em_batch_try_fn try_fn, void *ctx, em_device device, int64_t batch,
                           em_batch_search *out, bool *fits)
{
    em_memory_empty_cache(device);
    em_error_clear();
    double sps = 0;
    out->n_tries++;
    em_status st = try_fn(ctx, batch, &sps);
    *fits = st == EM_OK;
    if (st == EM_ERR_MEMORY) {
        em_error_clear();
        return EM_OK;
    }
    if (st != EM_OK)
        return em_has_error() ? em_error_status()
                              : em_set_error(st, "em_find_batch_size: the step at batch %" PRId64
                                             " failed", batch);
    if (batch > out->largest)
        out->largest = batch;
    if (out->fastest == 0 || sps > out->fastest_samples_per_s) {
        out->fastest = batch;
        out->fastest_samples_per_s = sps;
    }
    return EM_OK;
}

static em_status search(em_batch_try_fn try_fn, void *ctx, em_device device, int64_t lo,
                        int64_t hi, em_batch_search *out)
{
    bool fits;
    em_status st = try_batch(try_fn, ctx, device, lo, out, &fits);
    if (st != EM_OK)
        return st;
    if (!fits)
        return em_set_error(EM_ERR_MEMORY, "em_find_batch_size: even batch %" PRId64 " does not "
                            "fit in %zu bytes on %s", lo, em_memory_get_stats(device).budget_bytes,
                            em_device_name(device));
    int64_t good = lo, bad = hi + 1; /* the largest fit and the smallest failure so far */
    while (good < hi && bad == hi + 1) {
        int64_t next = good > hi / 2 ? hi : good * 2;
        st = try_batch(try_fn, ctx, device, next, out, &fits);
        if (st != EM_OK)
            return st;
        if (fits)
            good = next;
        else
            bad = next;
    }
    while (bad - good > 1) {
        int64_t mid = good + (bad - good) / 2;
        st = try_batch(try_fn, ctx, device, mid, out, &fits);
        if (st != EM_OK)
            return st;
        if (fits)
            good = mid;
        else
            bad = mid;
    }
    return EM_OK;
}

em_status em_find_batch_size(em_batch_try_fn try_fn, void *ctx, em_device device, int64_t lo,
                             int64_t hi, size_t budget, em_batch_search *out)
{
    if (!try_fn || !out || (unsigned)device >= EM_NDEVICES || lo < 1 || hi < lo ||
        hi == INT64_MAX)
        return em_set_error(EM_ERR_ARG, "em_find_batch_size: need a try function, an output, a "
                            "device and 1 <= lo <= hi: lo %" PRId64 ", hi %" PRId64, lo, hi);
    *out = (em_batch_search){0};
    size_t saved = em_memory_get_stats(device).budget_bytes;
    em_status st = budget ? em_memory_set_budget(device, budget) : EM_OK;
    if (st == EM_OK)
        st = search(try_fn, ctx, device, lo, hi, out);
    em_memory_set_budget(device, saved);
    em_memory_empty_cache(device);
    return st;
}
