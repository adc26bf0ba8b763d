/* Memory over time: each device's live, peak and reserved bytes sampled once per training step,
 * and a rising-trend (leak) check over a window of steps. A loop whose scopes give back what they
 * made holds the same live bytes at the end of every step; one that keeps something each step
 * climbs. */
#ifndef EMBER_OBSERVE_MEMORY_TREND_H
#define EMBER_OBSERVE_MEMORY_TREND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/tensor/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int window;             /* steps the trend is fitted over; 0: 50 */
    double min_slope_bytes; /* a leak grows by more than this per step; 0: 1024 */
} em_memtrend_opts;

typedef struct {
    int64_t step;
    size_t live_bytes;     /* at the end of the step */
    size_t peak_bytes;     /* the most live bytes during the step */
    size_t reserved_bytes; /* held from the device at the end of the step (cache included) */
} em_mem_sample;

typedef struct em_memtrend em_memtrend;

em_memtrend *em_memtrend_new(em_memtrend_opts opts); /* NULL + error on a bad option */
/* Samples every device at the end of step; a step's peak is the allocator's window peak, which
 * this call restarts (em_memory_take_window_peak). */
em_status em_memtrend_sample(em_memtrend *m, int64_t step);
/* The last sample of device (all zero before the first). */
em_mem_sample em_memtrend_last(const em_memtrend *m, em_device device);
/* True once a full window of device's samples rises: the least-squares slope of live bytes over
 * the window exceeds min_slope_bytes per step and live bytes grew in at least half of its steps
 * (so one lasting jump, a cache or a new buffer, is no leak). *bytes_per_step gets the slope. */
bool em_memtrend_leaking(const em_memtrend *m, em_device device, double *bytes_per_step);
void em_memtrend_free(em_memtrend *m);

#ifdef __cplusplus
}
#endif

#endif
