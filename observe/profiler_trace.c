/* The profiler's Chrome Trace Event Format output (JSON Object Format, "X" complete events in
 * microseconds), which Perfetto and chrome://tracing open. Each thread gets a track per phase
 * (forward, backward, optimizer, loader) plus one for its user ranges and one for the steps, so
 * the events of a track nest properly. Each event is a jansson object (io/json_internal.h)
 * written as it is made, so a long run's trace is never held whole in memory. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_internal.h"
#include "io/utf8.h"
#include "observe/profiler_internal.h"

enum { TRACK_RANGES = EM_PHASE_COUNT, TRACK_STEPS, TRACKS_PER_THREAD = 8 };

static int track_of(const em_prof_event *e)
{
    if (e->kind == EM_PROF_RANGE)
        return TRACK_RANGES;
    if (e->kind == EM_PROF_STEP)
        return TRACK_STEPS;
    return e->phase < EM_PHASE_COUNT ? e->phase : EM_PHASE_FORWARD;
}

static const char *category(const em_prof_event *e)
{
    static const char *names[] = {"op", "backward_node", "module", "region", "range", "step"};
    return e->kind <= EM_PROF_STEP ? names[e->kind] : "?";
}

/* s as a JSON string, cut before its first byte that is not UTF-8: a name that a fixed-size
 * buffer split mid-character loses that character, not the trace. */
static json_t *text(const char *s)
{
    return json_stringn(s, em_utf8_valid_len(s, strlen(s)));
}

/* Writes obj (a new reference, freed here) as the next element of the event list; false when
 * out of memory. */
static bool put(FILE *f, json_t *obj)
{
    char *text = obj ? em_json_dump(obj) : NULL;
    json_decref(obj);
    if (text)
        fprintf(f, ",\n%s", text);
    free(text);
    return text != NULL;
}

/* A metadata event: name ("thread_name", "thread_sort_index", ...) of track tid with args. */
static json_t *metadata(const char *name, int tid, json_t *args)
{
    return json_pack("{s:s, s:i, s:i, s:s, s:o}", "ph", "M", "pid", 1, "tid", tid, "name", name,
                     "args", args);
}

static bool write_track_names(const em_prof_run *run, FILE *f)
{
    static const char *tracks[] = {"forward", "backward", "optimizer", "loader", "ranges",
                                   "steps"};
    bool used[TRACKS_PER_THREAD] = {0}, ok = true;
    int thread = -1;
    for (int64_t i = 0; i <= run->n && ok; i++) {
        if (i == run->n || run->events[i].thread != thread) {
            for (int t = 0; thread >= 0 && t < TRACKS_PER_THREAD && ok; t++) {
                if (!used[t])
                    continue;
                int tid = thread * TRACKS_PER_THREAD + t;
                char name[96];
                const char *who = thread < run->n_threads && run->thread_names[thread]
                                      ? run->thread_names[thread] : "thread";
                snprintf(name, sizeof name, "%s: %s", who, tracks[t]);
                ok = put(f, metadata("thread_name", tid,
                                     json_pack("{s:o}", "name", text(name)))) &&
                     put(f, metadata("thread_sort_index", tid,
                                     json_pack("{s:i}", "sort_index", tid)));
                used[t] = false;
            }
            if (i == run->n)
                break;
            thread = run->events[i].thread;
        }
        used[track_of(&run->events[i])] = true;
    }
    return ok;
}

/* The event's args: phase, bytes, and where known its shapes, dtype, device, device time and
 * (a backward node) the module that ran its forward. */
static json_t *event_args(const em_prof_event *e)
{
    json_t *args = json_pack("{s:s, s:I}", "phase", em_prof_phase_name((em_prof_phase)e->phase),
                             "bytes", (json_int_t)e->bytes);
    if (!args)
        return NULL;
    int rc = 0;
    if (e->n_shapes) {
        char shapes[256];
        em_prof_shapes_str(e, shapes, sizeof shapes);
        rc |= json_object_set_new(args, "shapes", json_string(shapes));
    }
    if (e->dtype >= 0) {
        rc |= json_object_set_new(args, "dtype", json_string(em_dtype_name((em_dtype)e->dtype)));
        rc |= json_object_set_new(args, "device",
                                  json_string(em_device_name((em_device)e->device)));
    }
    if (e->gpu_ms > 0)
        rc |= em_json_set_real(args, "gpu_ms", e->gpu_ms, 6);
    if (e->kind == EM_PROF_NODE && e->detail)
        rc |= json_object_set_new(args, "module", text(e->detail));
    if (rc) {
        json_decref(args);
        return NULL;
    }
    return args;
}

static json_t *event_json(const em_prof_event *e)
{
    char name[160];
    if (e->kind == EM_PROF_NODE)
        snprintf(name, sizeof name, "%s_backward", e->name);
    else if (e->kind == EM_PROF_MODULE)
        snprintf(name, sizeof name, e->name[0] ? "%s (%s)" : "%s(%s)", e->name,
                 e->detail ? e->detail : "?");
    else if (e->kind == EM_PROF_STEP)
        snprintf(name, sizeof name, "step %" PRId64, e->arg);
    else
        snprintf(name, sizeof name, "%s", e->name ? e->name : "?");
    json_t *ev = json_pack("{s:s, s:i, s:i, s:o, s:s}", "ph", "X", "pid", 1, "tid",
                           e->thread * TRACKS_PER_THREAD + track_of(e), "name", text(name),
                           "cat", category(e));
    json_t *args = event_args(e);
    if (!ev || !args) {
        json_decref(ev);
        json_decref(args);
        return NULL;
    }
    /* nanoseconds as microseconds with three decimals: exact, so nested events stay nested */
    if (json_object_set_new(ev, "args", args) ||
        em_json_set_real(ev, "ts", (double)e->t0_ns / 1000, 3) ||
        em_json_set_real(ev, "dur", (double)e->dur_ns / 1000, 3)) {
        json_decref(ev);
        return NULL;
    }
    return ev;
}

em_status em_prof_write_trace(const em_prof_run *run, FILE *f)
{
    json_t *process = metadata("process_name", 0, json_pack("{s:s}", "name", "ember"));
    char *first = process ? em_json_dump(process) : NULL;
    json_decref(process);
    bool ok = first != NULL;
    if (ok)
        fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"ember\"},"
                "\"traceEvents\":[\n%s", first);
    free(first);
    ok = ok && write_track_names(run, f);
    for (int64_t i = 0; i < run->n && ok; i++)
        ok = put(f, event_json(&run->events[i]));
    fprintf(f, "\n]}\n");
    return ok ? EM_OK : em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory writing "
                                     "the trace");
}
