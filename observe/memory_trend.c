/* Per-step memory samples in a ring of one window per device, and the leak check over it. */
#include <stdlib.h>

#include "observe/memory_trend.h"

#define DEFAULT_WINDOW 50
#define DEFAULT_MIN_SLOPE 1024.0

struct em_memtrend {
    em_memtrend_opts o;
    em_mem_sample *ring[EM_NDEVICES]; /* (window) each */
    int64_t n[EM_NDEVICES];           /* samples taken */
};

em_memtrend *em_memtrend_new(em_memtrend_opts opts)
{
    if (opts.window < 0 || opts.window == 1 || !(opts.min_slope_bytes >= 0)) {
        em_set_error(EM_ERR_ARG, "em_memtrend_new: window must be 0 or at least 2 and "
                     "min_slope_bytes >= 0 (got %d and %g)", opts.window, opts.min_slope_bytes);
        return NULL;
    }
    em_memtrend *m = calloc(1, sizeof *m);
    if (m) {
        m->o = opts;
        m->o.window = opts.window ? opts.window : DEFAULT_WINDOW;
        m->o.min_slope_bytes = opts.min_slope_bytes ? opts.min_slope_bytes : DEFAULT_MIN_SLOPE;
    }
    for (int d = 0; m && d < EM_NDEVICES; d++) {
        if (!(m->ring[d] = calloc((size_t)m->o.window, sizeof *m->ring[d]))) {
            em_memtrend_free(m);
            m = NULL;
        }
    }
    if (!m)
        em_set_error(EM_ERR_MEMORY, "em_memtrend_new: out of memory");
    return m;
}

em_status em_memtrend_sample(em_memtrend *m, int64_t step)
{
    if (!m)
        return em_set_error(EM_ERR_ARG, "em_memtrend_sample: NULL tracker");
    for (int d = 0; d < EM_NDEVICES; d++) {
        em_memory_stats s = em_memory_get_stats((em_device)d);
        m->ring[d][m->n[d]++ % m->o.window] = (em_mem_sample){
            .step = step,
            .live_bytes = s.live_bytes,
            .peak_bytes = em_memory_take_window_peak((em_device)d),
            .reserved_bytes = s.reserved_bytes,
        };
    }
    return EM_OK;
}

em_mem_sample em_memtrend_last(const em_memtrend *m, em_device device)
{
    if (!m || (unsigned)device >= EM_NDEVICES || m->n[device] == 0)
        return (em_mem_sample){0};
    return m->ring[device][(m->n[device] - 1) % m->o.window];
}

bool em_memtrend_leaking(const em_memtrend *m, em_device device, double *bytes_per_step)
{
    *bytes_per_step = 0;
    if (!m || (unsigned)device >= EM_NDEVICES || m->n[device] < m->o.window)
        return false;
    int w = m->o.window;
    int64_t first = m->n[device] - w;
    double mean_x = (w - 1) / 2.0, mean_y = 0, sxy = 0, sxx = 0;
    int rises = 0;
    for (int i = 0; i < w; i++)
        mean_y += (double)m->ring[device][(first + i) % w].live_bytes / w;
    for (int i = 0; i < w; i++) {
        const em_mem_sample *s = &m->ring[device][(first + i) % w];
        sxy += (i - mean_x) * ((double)s->live_bytes - mean_y);
        sxx += (i - mean_x) * (i - mean_x);
        rises += i > 0 && s->live_bytes > m->ring[device][(first + i - 1) % w].live_bytes;
    }
    *bytes_per_step = sxy / sxx;
    return *bytes_per_step > m->o.min_slope_bytes && 2 * rises >= w - 1;
}

void em_memtrend_free(em_memtrend *m)
{
    if (!m)
        return;
    for (int d = 0; d < EM_NDEVICES; d++)
        free(m->ring[d]);
    free(m);
}
