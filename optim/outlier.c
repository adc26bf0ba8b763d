/* The rolling z-score outlier detector: a ring of recent values, judged against its mean and
 * population std, upward spikes only. */
#include <math.h>
#include <stdlib.h>

#include "optim/guards.h"

struct em_outlier {
    em_outlier_opts opts;
    double *ring; /* (window) */
    int count, next;
    double last_z;
};

em_outlier *em_outlier_new(em_outlier_opts o)
{
    o.window = o.window ? o.window : 100;
    o.threshold = o.threshold ? o.threshold : 6.0;
    o.warmup = o.warmup ? o.warmup : (o.window < 20 ? o.window : 20);
    if (o.window < 2 || !(o.threshold > 0) || o.warmup < 2 || o.warmup > o.window) {
        em_set_error(EM_ERR_ARG, "em_outlier_new: need window >= 2 (%d), threshold > 0 (%g) and "
                     "2 <= warmup <= window (%d)", o.window, o.threshold, o.warmup);
        return NULL;
    }
    em_outlier *d = calloc(1, sizeof *d);
    double *ring = calloc((size_t)o.window, sizeof *ring);
    if (!d || !ring) {
        free(d);
        free(ring);
        em_set_error(EM_ERR_MEMORY, "em_outlier_new: out of memory");
        return NULL;
    }
    d->opts = o;
    d->ring = ring;
    return d;
}

void em_outlier_free(em_outlier *d)
{
    if (!d)
        return;
    free(d->ring);
    free(d);
}

bool em_outlier_check(em_outlier *d, double value)
{
    if (!d)
        return false;
    if (!isfinite(value))
        return true;
    bool outlier = false;
    d->last_z = 0;
    if (d->count >= d->opts.warmup) {
        double mean = 0, var = 0;
        for (int i = 0; i < d->count; i++)
            mean += d->ring[i];
        mean /= d->count;
        for (int i = 0; i < d->count; i++)
            var += (d->ring[i] - mean) * (d->ring[i] - mean);
        double sd = sqrt(var / d->count);
        d->last_z = sd > 0 ? (value - mean) / sd : value > mean ? INFINITY : 0;
        outlier = d->last_z > d->opts.threshold;
    }
    d->ring[d->next] = value;
    d->next = (d->next + 1) % d->opts.window;
    if (d->count < d->opts.window)
        d->count++;
    return outlier;
}

double em_outlier_last_z(const em_outlier *d)
{
    return d ? d->last_z : 0;
}
