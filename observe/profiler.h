/* The profiler: while it runs, every op (forward and backward apart), backward node, module
 * forward, optimizer step, loader batch and user range is recorded with its input shapes, dtype,
 * device, start, duration and the bytes it allocated. Stopping it gives a key-averages table
 * (calls, self and total time, % of the step, bottlenecks), per-module timing and a Chrome Trace
 * Event Format file that Perfetto and chrome://tracing open. Off, it costs an op one branch. */
#ifndef EMBER_OBSERVE_PROFILER_H
#define EMBER_OBSERVE_PROFILER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ember/tensor/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* Chrome trace JSON written (atomically) by em_profiler_stop; NULL: none. An unwritable
     * path fails em_profiler_start. */
    const char *trace_path;
} em_profiler_opts;

/* Starts recording, dropping what the last run recorded. EM_ERR_STATE when it already runs,
 * EM_ERR_IO when the trace file cannot be written, EM_ERR_UNSUPPORTED in a build made with
 * -DEMBER_PROFILER=OFF. */
em_status em_profiler_start(em_profiler_opts opts);
/* Stops recording, summarises the run and writes the trace. EM_ERR_STATE when not running. */
em_status em_profiler_stop(void);
bool em_profiler_running(void);
/* Marks the end of a training step (the first step starts at em_profiler_start): the table
 * gives each op's time as a share of the steps' time. */
void em_profiler_step(void);

/* A named region of the calling thread, drawn on its own track; ranges nest. A pop that does
 * not name the innermost open range is EM_ERR_STATE and closes nothing. Names are copied.
 * Ranges are checked whether or not the profiler runs; they are recorded while it does. */
em_status em_profile_range_push(const char *name);
em_status em_profile_range_pop(const char *name);

/* One row of the table: an op in one phase ("forward", "backward", "optimizer", "loader"), a
 * backward node ("linear_backward"), the optimizer step or a loader batch. */
typedef struct {
    char name[64];
    const char *phase;
    int64_t calls;
    double self_ms, total_ms;   /* summed over the calls; self excludes nested ops */
    double self_pct, total_pct; /* of the steps' time */
    double gpu_ms;              /* device time from CUDA events; 0 on the CPU */
    int64_t bytes;              /* bytes allocated during the calls */
    char shapes[96];            /* input shapes of the first call: "[64,784] x [512,784]" */
    const char *dtype, *device; /* of the first call's first input */
    bool bottleneck;            /* self time over 20% of the steps' time */
} em_profile_row;

/* A module's forward and backward time (its backward: the backward nodes of the ops it ran). */
typedef struct {
    char name[96];    /* dotted path and type: "features.0 (Conv2d)"; the root: "(Sequential)" */
    int depth;        /* 0 for the root */
    int64_t calls;
    double forward_ms, backward_ms;
    double pct;       /* (forward + backward) / the steps' time */
    bool bottleneck;  /* over 20% of the steps' time, and not the root */
} em_profile_module;

typedef struct {
    em_profile_row *rows;       /* by self time, largest first */
    int n_rows;
    em_profile_module *modules; /* in first-call order (parents before children) */
    int n_modules;
    int64_t steps;              /* em_profiler_step calls */
    double step_ms;             /* the steps' total time (the whole run when no step was marked) */
    double wall_ms;             /* start to stop */
    int64_t launches;           /* device launches queued (kernels, copies, library calls) on
                                   devices that count them (CUDA); 0 on the CPU */
    int64_t n_events;           /* recorded */
    int64_t n_dropped;          /* not kept: over a million events on one thread */
} em_profile_summary;

/* The last stopped run's summary; NULL before the first stop. Valid until the next start. */
const em_profile_summary *em_profiler_summary(void);
/* Prints the top rows (all when top <= 0) and the module table, torch.profiler style. */
void em_profiler_print(FILE *f, int top);

#ifdef __cplusplus
}
#endif

#endif
