/* The profiler's hooks for the layers above (ops, the backward engine, modules, optimizers, the
 * loader) and the event records its own files share. Each hook sits behind EM_PROFILING(), one
 * predictable branch on a global flag; a -DEMBER_PROFILER=OFF build compiles them out. Not
 * installed. */
#ifndef EMBER_OBSERVE_PROFILER_INTERNAL_H
#define EMBER_OBSERVE_PROFILER_INTERNAL_H

#include <stdatomic.h>

#include "observe/profiler.h"
#include "tensor/tensor.h"

extern atomic_bool em_prof_active;

#ifdef EMBER_NO_PROFILER
#define EM_PROFILING() false
#else
#define EM_PROFILING() \
    __builtin_expect(atomic_load_explicit(&em_prof_active, memory_order_relaxed), 0)
#endif

/* The part of a step an event belongs to; each has its own track per thread in the trace. */
typedef enum {
    EM_PHASE_FORWARD,
    EM_PHASE_BACKWARD,
    EM_PHASE_OPTIMIZER,
    EM_PHASE_LOADER,
    EM_PHASE_COUNT,
    EM_PHASE_INHERIT = EM_PHASE_COUNT /* em_prof_begin: keep the thread's current phase */
} em_prof_phase;

typedef enum {
    EM_PROF_OP,     /* an op's forward work (autograd/ ops), in whatever phase runs it */
    EM_PROF_NODE,   /* a backward node's rule; detail: the module whose forward made it */
    EM_PROF_MODULE, /* a module's forward; name: its dotted path, detail: its type */
    EM_PROF_REGION, /* the optimizer step, a loader batch */
    EM_PROF_RANGE,  /* a user range (its own track) */
    EM_PROF_STEP,   /* a training step (its own track) */
} em_prof_kind;

/* ---- hooks ---- */
/* An op starts its work; x is its first input (device and dtype). em_prof_op_end, called by
 * em_record at the same scope depth with the same op name, ends it; a mark whose op failed
 * before em_record is dropped at the next end. */
void em_prof_op_begin(const char *op, const em_tensor *x);
void em_prof_op_end(const char *op, em_tensor *const *inputs, int n_inputs);
/* A region of kind (NODE, MODULE, REGION) on this thread; true when it was opened, and then
 * the caller ends it with em_prof_end (so a profiler started or stopped meanwhile leaves no
 * region open). Regions nest with the user's ranges. phase (not INHERIT) is the thread's phase
 * until the end. name and detail are copied when copy is set; ts (n of them, NULL entries
 * skipped) give the shapes. */
bool em_prof_begin(em_prof_kind kind, const char *name, const char *detail, bool copy,
                   em_prof_phase phase, const em_tensor *const *ts, int n);
void em_prof_end(void);
/* The innermost module whose forward runs on this thread (a copy the run keeps), or NULL;
 * *session tells the run it belongs to. A backward node keeps both. */
const char *em_prof_current_module(uint32_t *session);
/* The current (or last) run's number. */
uint32_t em_prof_session(void);
/* Names this thread's tracks ("loader worker 0"); copied. */
void em_prof_name_thread(const char *name);

/* ---- the records, for the profiler's own files ---- */
#define EM_PROF_MAX_SHAPES 3

typedef struct {
    const char *name;   /* the op, node, module path, region or range */
    const char *detail; /* a node's module, a module's type, or NULL */
    int64_t t0_ns;      /* since em_profiler_start */
    int64_t dur_ns;
    int64_t bytes;      /* allocated on the event's device while it ran */
    int64_t arg;        /* a step's index */
    uint8_t kind;       /* em_prof_kind */
    uint8_t phase;      /* em_prof_phase */
    int8_t dtype, device; /* of the first input, -1 when none */
    int8_t n_shapes;
    int8_t ndim[EM_PROF_MAX_SHAPES];
    int32_t thread;     /* the recording thread's index */
    void *gpu_timer;    /* the timer of device timer_device around the event, read at stop */
    int8_t timer_device;
    double gpu_ms;      /* what it read */
    int64_t shape[EM_PROF_MAX_SHAPES][4]; /* the first four dims of each (more print as "...") */
} em_prof_event;

typedef struct {
    em_prof_event *events; /* by thread, then start time; a parent before its children */
    int64_t n;
    char **thread_names;   /* (n_threads) */
    int n_threads;
    int64_t wall_ns;
    int64_t n_dropped;     /* events past a thread's cap, not kept */
    int64_t launches;      /* device launches queued while it ran (em_device_counts) */
} em_prof_run;

/* "[64,784] x [512,784]" of an event's shapes into buf. */
void em_prof_shapes_str(const em_prof_event *e, char *buf, size_t n);
const char *em_prof_phase_name(em_prof_phase phase);
/* profiler_table.c: the summary of a run (its rows and modules malloc'd); EM_ERR_MEMORY. */
em_status em_prof_summarise(const em_prof_run *run, em_profile_summary *out);
void em_prof_summary_free(em_profile_summary *s);
/* profiler_trace.c: the run as Chrome Trace Event JSON on f; EM_ERR_MEMORY. */
em_status em_prof_write_trace(const em_prof_run *run, FILE *f);

#endif
