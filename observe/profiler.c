/* The profiler's recording: one event buffer per thread, made of chunks that never move, so the
 * stopping thread reads what the others have published while they go on; each thread's op marks,
 * regions and user ranges; start, step and stop. profiler_table.c and profiler_trace.c turn a
 * stopped run into the table and the Chrome trace. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend_internal.h"
#include "io/atomic_file.h"
#include "io/utf8.h"
#include "observe/profiler_internal.h"

#define CHUNK_EVENTS 1024
#define MAX_EVENTS_PER_THREAD ((int64_t)1 << 20) /* of 184 bytes; later ones are counted, not kept */
#define TEXT_BLOCK 16384
#define MAX_OPEN 64 /* op marks, regions and ranges open at once on a thread */

typedef struct chunk {
    struct chunk *next;
    em_prof_event ev[CHUNK_EVENTS];
} chunk;

typedef struct text_block {
    struct text_block *next;
    size_t used;
    char data[TEXT_BLOCK];
} text_block;

/* A thread's events of one run. Only its thread writes; count publishes them (release). */
typedef struct thread_buf {
    struct thread_buf *next;  /* the registry */
    _Atomic uint32_t session; /* the run its events belong to */
    _Atomic int64_t count;
    int64_t dropped;
    int32_t index;            /* the thread's index in that run */
    chunk *chunks, *tail;     /* tail holds event tail_base .. tail_base + CHUNK_EVENTS - 1 */
    int64_t tail_base;
    text_block *text;         /* copies of names, freed when a new run starts */
    char name[64];
    atomic_bool dead;         /* the thread has exited: freed at the next start */
} thread_buf;

atomic_bool em_prof_active;
static _Atomic uint32_t session;
static int64_t start_ns;
static int64_t start_launches;
static _Atomic int64_t last_step_ns, n_steps;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_buf *registry;
static int32_t n_threads;          /* in this run, under registry_lock */
static thread_buf *control_thread; /* the one that started the run: "main" */
static em_atomic_file *trace; /* the run's trace file, when one is wanted */
static em_profile_summary summary;
static bool have_summary;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

typedef struct {
    const char *op;
    int depth;
    uint32_t session;
    int8_t device;
    int64_t t0, bytes0;
    void *gpu_timer;
} op_mark;

typedef struct {
    em_prof_kind kind;
    em_prof_phase prev_phase;
    const char *name, *detail;
    char *owned_name; /* a range's copy of its name */
    uint32_t session;
    int8_t device;
    int64_t t0, bytes0;
    void *gpu_timer;
    em_prof_event shapes; /* dtype, device, n_shapes, ndim and shape filled at begin */
} region;

static _Thread_local thread_buf *tbuf;
static _Thread_local op_mark marks[MAX_OPEN];
static _Thread_local int n_marks;
static _Thread_local region regions[MAX_OPEN], ranges[MAX_OPEN];
static _Thread_local int n_regions, n_ranges;
static _Thread_local em_prof_phase cur_phase;
static _Thread_local char thread_name[64];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t allocated_bytes(int device)
{
    return device >= 0 ? (int64_t)em_memory_get_stats((em_device)device).allocated_bytes : 0;
}

/* A device timer started now on device's backend, where it has them (CUDA events); else NULL. */
static void *gpu_timer_start(int device)
{
    const em_backend *be = device >= 0 ? em_backend_get((em_device)device) : NULL;
    return be && be->timer_start ? be->timer_start() : NULL;
}

static void gpu_timer_stop(int device, void *timer)
{
    if (timer)
        em_backend_get((em_device)device)->timer_stop(timer);
}

/* Reads (ms non-NULL) and frees a timer of device's backend. */
static void gpu_timer_read(int device, void *timer, double *ms)
{
    if (timer)
        em_backend_get((em_device)device)->timer_read(timer, ms);
}

/* Launches queued so far on every device that counts them. */
static int64_t device_launches(void)
{
    int64_t n = 0;
    for (int d = 0; d < EM_NDEVICES; d++) {
        const em_backend *be = em_backend_get((em_device)d);
        em_device_counts c;
        if (be && be->counts) {
            be->counts(&c);
            n += (int64_t)c.launches;
        }
    }
    return n;
}

static void mark_exited(void *b)
{
    atomic_store(&((thread_buf *)b)->dead, true);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, mark_exited);
}

static void free_text(text_block *t)
{
    while (t) {
        text_block *next = t->next;
        free(t);
        t = next;
    }
}

/* This thread's buffer, made and registered on first use; NULL when out of memory. */
static thread_buf *my_buf(void)
{
    if (tbuf)
        return tbuf;
    pthread_once(&exit_key_once, make_exit_key);
    thread_buf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_setspecific(exit_key, b);
    pthread_mutex_lock(&registry_lock);
    b->next = registry;
    registry = b;
    pthread_mutex_unlock(&registry_lock);
    return tbuf = b;
}

/* Points b at run s: its old events and names are dropped, chunks kept for reuse. */
static void join_run(thread_buf *b, uint32_t s)
{
    free_text(b->text);
    b->text = NULL;
    b->tail = b->chunks;
    b->tail_base = 0;
    b->dropped = 0;
    snprintf(b->name, sizeof b->name, "%s", thread_name);
    atomic_store_explicit(&b->count, 0, memory_order_relaxed);
    pthread_mutex_lock(&registry_lock);
    b->index = n_threads++;
    pthread_mutex_unlock(&registry_lock);
    atomic_store_explicit(&b->session, s, memory_order_release);
}

/* This thread's buffer, in run s; NULL when out of memory. */
static thread_buf *run_buf(uint32_t s)
{
    thread_buf *b = my_buf();
    if (b && atomic_load_explicit(&b->session, memory_order_relaxed) != s)
        join_run(b, s);
    return b;
}

/* The slot for this thread's next event in run s, or NULL (out of memory, or over the cap);
 * publish() makes it visible. */
static em_prof_event *next_slot(uint32_t s)
{
    thread_buf *b = run_buf(s);
    if (!b)
        return NULL;
    int64_t n = atomic_load_explicit(&b->count, memory_order_relaxed);
    if (n >= MAX_EVENTS_PER_THREAD) {
        b->dropped++;
        return NULL;
    }
    if (!b->tail || n >= b->tail_base + CHUNK_EVENTS) {
        chunk *c = b->tail ? b->tail->next : b->chunks;
        if (!c && !(c = calloc(1, sizeof *c)))
            return NULL;
        if (!b->chunks)
            b->chunks = c;
        else if (b->tail && !b->tail->next)
            b->tail->next = c;
        b->tail_base = b->tail ? b->tail_base + CHUNK_EVENTS : 0;
        b->tail = c;
    }
    em_prof_event *e = &b->tail->ev[n - b->tail_base];
    memset(e, 0, sizeof *e);
    e->thread = b->index;
    return e;
}

static void publish(void)
{
    atomic_fetch_add_explicit(&tbuf->count, 1, memory_order_release);
}

/* A copy of s that lives until the next run starts; s itself when out of memory. */
static const char *copy_text(const char *s)
{
    thread_buf *b = run_buf(atomic_load_explicit(&session, memory_order_relaxed));
    size_t n = strnlen(s, 255);
    if (!b)
        return s;
    if (!b->text || b->text->used + n + 1 > TEXT_BLOCK) {
        text_block *t = malloc(sizeof *t);
        if (!t)
            return s;
        t->next = b->text;
        t->used = 0;
        b->text = t;
    }
    char *out = b->text->data + b->text->used;
    memcpy(out, s, n);
    out[n] = '\0';
    b->text->used += n + 1;
    return out;
}

static void record_shapes(em_prof_event *e, const em_tensor *const *ts, int n)
{
    e->dtype = e->device = -1;
    for (int i = 0; i < n && e->n_shapes < EM_PROF_MAX_SHAPES; i++) {
        const em_tensor *t = ts[i];
        if (!t)
            continue;
        if (e->dtype < 0) {
            e->dtype = (int8_t)t->dtype;
            e->device = (int8_t)t->device;
        }
        int k = e->n_shapes++;
        e->ndim[k] = (int8_t)t->ndim;
        for (int d = 0; d < t->ndim && d < 4; d++)
            e->shape[k][d] = t->shape[d];
    }
}

static bool running(uint32_t s)
{
    return atomic_load_explicit(&em_prof_active, memory_order_acquire) &&
           atomic_load_explicit(&session, memory_order_relaxed) == s;
}

/* ---- hooks ---- */

/* Forgets the innermost mark (of an op that failed before recording). */
static void drop_mark(void)
{
    op_mark *m = &marks[--n_marks];
    gpu_timer_read(m->device, m->gpu_timer, NULL);
}

void em_prof_op_begin(const char *op, const em_tensor *x)
{
    int depth = em_scope_depth();
    while (n_marks > 0 && marks[n_marks - 1].depth > depth)
        drop_mark();
    if (n_marks == MAX_OPEN) { /* marks of failed ops at this depth: forget the oldest */
        gpu_timer_read(marks[0].device, marks[0].gpu_timer, NULL);
        memmove(marks, marks + 1, (MAX_OPEN - 1) * sizeof *marks);
        n_marks--;
    }
    op_mark *m = &marks[n_marks++];
    m->op = op;
    m->depth = depth;
    m->session = atomic_load_explicit(&session, memory_order_relaxed);
    m->device = x ? (int8_t)x->device : -1;
    m->bytes0 = allocated_bytes(m->device);
    m->gpu_timer = gpu_timer_start(m->device);
    m->t0 = now_ns();
}

void em_prof_op_end(const char *op, em_tensor *const *inputs, int n_inputs)
{
    int depth = em_scope_depth();
    while (n_marks > 0 && marks[n_marks - 1].depth > depth) /* ops that failed before recording */
        drop_mark();
    if (n_marks == 0 || marks[n_marks - 1].depth != depth || strcmp(marks[n_marks - 1].op, op))
        return;
    op_mark *m = &marks[--n_marks];
    int64_t t1 = now_ns();
    gpu_timer_stop(m->device, m->gpu_timer);
    em_prof_event *e = running(m->session) ? next_slot(m->session) : NULL;
    if (!e) {
        gpu_timer_read(m->device, m->gpu_timer, NULL);
        return;
    }
    e->gpu_timer = m->gpu_timer;
    e->timer_device = m->device;
    e->name = op;
    e->kind = EM_PROF_OP;
    e->phase = (uint8_t)cur_phase;
    e->t0_ns = m->t0 - start_ns;
    e->dur_ns = t1 - m->t0;
    e->bytes = allocated_bytes(m->device) - m->bytes0;
    record_shapes(e, (const em_tensor *const *)inputs, n_inputs);
    publish();
}

/* Opens an entry on stack (regions or ranges) at now; false when too many are open. */
static region *open_entry(region *stack, int *n, em_prof_kind kind, const char *name,
                          const char *detail, em_prof_phase phase, const em_tensor *const *ts,
                          int n_ts)
{
    if (*n >= MAX_OPEN)
        return NULL;
    region *r = &stack[(*n)++];
    uint32_t s = atomic_load_explicit(&session, memory_order_relaxed);
    *r = (region){.kind = kind, .prev_phase = cur_phase, .name = name, .detail = detail,
                  .session = atomic_load(&em_prof_active) ? s : 0};
    record_shapes(&r->shapes, ts, n_ts);
    r->device = r->shapes.device;
    if (phase != EM_PHASE_INHERIT)
        cur_phase = phase;
    r->bytes0 = allocated_bytes(r->device);
    r->gpu_timer = kind == EM_PROF_NODE ? gpu_timer_start(r->device) : NULL;
    r->t0 = now_ns();
    return r;
}

/* Closes entry r: restores the phase and records it if its run is still going. */
static void close_entry(region *r)
{
    int64_t t1 = now_ns();
    gpu_timer_stop(r->device, r->gpu_timer);
    em_prof_phase phase = cur_phase;
    cur_phase = r->prev_phase;
    em_prof_event *e = r->session && running(r->session) ? next_slot(r->session) : NULL;
    if (!e) {
        gpu_timer_read(r->device, r->gpu_timer, NULL);
        return;
    }
    int32_t thread = e->thread;
    *e = r->shapes;
    e->thread = thread;
    e->gpu_timer = r->gpu_timer;
    e->timer_device = r->device;
    e->name = r->owned_name ? copy_text(r->owned_name) : r->name;
    e->detail = r->detail;
    e->kind = (uint8_t)r->kind;
    e->phase = (uint8_t)phase;
    e->t0_ns = (r->t0 > start_ns ? r->t0 : start_ns) - start_ns;
    e->dur_ns = t1 - start_ns - e->t0_ns;
    e->bytes = allocated_bytes(r->device) - r->bytes0;
    publish();
}

bool em_prof_begin(em_prof_kind kind, const char *name, const char *detail, bool copy,
                   em_prof_phase phase, const em_tensor *const *ts, int n)
{
    if (copy) {
        name = name ? copy_text(name) : NULL;
        detail = detail ? copy_text(detail) : NULL;
    }
    return open_entry(regions, &n_regions, kind, name, detail, phase, ts, n) != NULL;
}

void em_prof_end(void)
{
    if (n_regions > 0)
        close_entry(&regions[--n_regions]);
}

const char *em_prof_current_module(uint32_t *s)
{
    for (int i = n_regions - 1; i >= 0; i--) {
        if (regions[i].kind == EM_PROF_MODULE && regions[i].session) {
            *s = regions[i].session;
            return regions[i].name;
        }
    }
    return NULL;
}

uint32_t em_prof_session(void)
{
    return atomic_load_explicit(&session, memory_order_relaxed);
}

void em_prof_name_thread(const char *name)
{
    snprintf(thread_name, sizeof thread_name, "%s", name);
}

/* ---- the public calls ---- */

em_status em_profile_range_push(const char *name)
{
    if (!name || !*name)
        return em_set_error(EM_ERR_ARG, "em_profile_range_push: the range needs a name");
    if (em_utf8_check("em_profile_range_push", "range name", name) != EM_OK)
        return EM_ERR_ARG; /* the trace is JSON, which holds only UTF-8 */
    char *copy = strdup(name);
    if (!copy)
        return em_set_error(EM_ERR_MEMORY, "em_profile_range_push: out of memory");
    region *r = open_entry(ranges, &n_ranges, EM_PROF_RANGE, copy, NULL, EM_PHASE_INHERIT,
                           NULL, 0);
    if (!r) {
        free(copy);
        return em_set_error(EM_ERR_STATE, "em_profile_range_push: more than %d ranges open "
                            "(\"%s\")", MAX_OPEN, name);
    }
    r->owned_name = copy;
    return EM_OK;
}

em_status em_profile_range_pop(const char *name)
{
    if (n_ranges == 0)
        return em_set_error(EM_ERR_STATE, "em_profile_range_pop: no range is open (\"%s\")",
                            name ? name : "(null)");
    region *r = &ranges[n_ranges - 1];
    if (!name || strcmp(name, r->owned_name))
        return em_set_error(EM_ERR_STATE, "em_profile_range_pop: \"%s\" closed out of order: "
                            "the innermost open range is \"%s\"", name ? name : "(null)",
                            r->owned_name);
    n_ranges--;
    close_entry(r);
    free(r->owned_name);
    r->owned_name = NULL;
    return EM_OK;
}

bool em_profiler_running(void)
{
    return atomic_load(&em_prof_active);
}

void em_profiler_step(void)
{
    if (!atomic_load(&em_prof_active))
        return;
    uint32_t s = atomic_load(&session);
    em_prof_event *e = next_slot(s);
    int64_t t1 = now_ns(), t0 = atomic_exchange(&last_step_ns, t1);
    if (!e)
        return;
    e->name = "step";
    e->kind = EM_PROF_STEP;
    e->t0_ns = t0 - start_ns;
    e->dur_ns = t1 - t0;
    e->arg = atomic_fetch_add(&n_steps, 1);
    e->dtype = e->device = -1;
    publish();
}

#ifndef EMBER_NO_PROFILER
static void free_buf(thread_buf *b)
{
    for (chunk *c = b->chunks; c;) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    free_text(b->text);
    free(b);
}

/* Frees what threads that have exited left behind (their runs are over). */
static void free_dead_buffers(void)
{
    pthread_mutex_lock(&registry_lock);
    for (thread_buf **p = &registry; *p;) {
        thread_buf *b = *p;
        if (atomic_load(&b->dead)) {
            *p = b->next;
            free_buf(b);
        } else {
            p = &b->next;
        }
    }
    n_threads = 0;
    pthread_mutex_unlock(&registry_lock);
}
#endif

em_status em_profiler_start(em_profiler_opts opts)
{
#ifdef EMBER_NO_PROFILER
    (void)opts;
    return em_set_error(EM_ERR_UNSUPPORTED, "em_profiler_start: ember was built without the "
                        "profiler (-DEMBER_PROFILER=OFF)");
#else
    if (atomic_load(&em_prof_active))
        return em_set_error(EM_ERR_STATE, "em_profiler_start: the profiler is already running");
    if (opts.trace_path) {
        bool earlier = em_has_error();
        if (!(trace = em_atomic_file_new(opts.trace_path)))
            return earlier ? em_error_status() : em_error_prefix("em_profiler_start: trace file");
    }
    if (have_summary)
        em_prof_summary_free(&summary);
    have_summary = false;
    free_dead_buffers();
    control_thread = my_buf();
    start_ns = now_ns();
    start_launches = device_launches();
    atomic_store(&last_step_ns, start_ns);
    atomic_store(&n_steps, 0);
    atomic_fetch_add(&session, 1);
    atomic_store_explicit(&em_prof_active, true, memory_order_release);
    return EM_OK;
#endif
}

static int by_thread_then_time(const void *pa, const void *pb)
{
    const em_prof_event *a = pa, *b = pb;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    if (a->t0_ns != b->t0_ns)
        return a->t0_ns < b->t0_ns ? -1 : 1;
    if (a->dur_ns != b->dur_ns) /* the enclosing event first */
        return a->dur_ns > b->dur_ns ? -1 : 1;
    return 0;
}

/* Copies every published event of run s, sorted, and the threads' names; EM_ERR_MEMORY. */
static em_status collect(uint32_t s, em_prof_run *run)
{
    em_status st = EM_OK;
    pthread_mutex_lock(&registry_lock);
    int64_t total = 0;
    for (thread_buf *b = registry; b; b = b->next)
        if (atomic_load_explicit(&b->session, memory_order_acquire) == s)
            total += atomic_load_explicit(&b->count, memory_order_acquire);
    run->n_threads = n_threads;
    run->events = malloc((size_t)(total ? total : 1) * sizeof *run->events);
    run->thread_names = calloc((size_t)(n_threads ? n_threads : 1), sizeof *run->thread_names);
    if (!run->events || !run->thread_names)
        st = em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory for %lld events",
                          (long long)total);
    for (thread_buf *b = registry; b && st == EM_OK; b = b->next) {
        if (atomic_load_explicit(&b->session, memory_order_acquire) != s)
            continue;
        int64_t n = atomic_load_explicit(&b->count, memory_order_acquire), i = 0;
        run->n_dropped += b->dropped;
        for (chunk *c = b->chunks; c && i < n; c = c->next) {
            for (int k = 0; k < CHUNK_EVENTS && i < n && run->n < total; k++, i++) {
                em_prof_event *e = &run->events[run->n++];
                *e = c->ev[k];
                gpu_timer_read(e->timer_device, e->gpu_timer, &e->gpu_ms); /* waits for it */
                e->gpu_timer = c->ev[k].gpu_timer = NULL;
            }
        }
        char name[64];
        if (b->name[0])
            snprintf(name, sizeof name, "%s", b->name);
        else
            snprintf(name, sizeof name, b == control_thread ? "main" : "thread %d", b->index);
        if (b->index < n_threads && !(run->thread_names[b->index] = strdup(name)))
            st = em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory");
    }
    pthread_mutex_unlock(&registry_lock);
    if (st == EM_OK)
        qsort(run->events, (size_t)run->n, sizeof *run->events, by_thread_then_time);
    return st;
}

static void run_free(em_prof_run *run)
{
    for (int i = 0; run->thread_names && i < run->n_threads; i++)
        free(run->thread_names[i]);
    free(run->thread_names);
    free(run->events);
}

/* Writes the trace into af and puts it in place (af freed either way). */
static em_status write_trace(em_atomic_file *af, const em_prof_run *run)
{
    if (em_prof_write_trace(run, em_atomic_file_stream(af)) != EM_OK) {
        em_atomic_file_free(af);
        return em_error_status();
    }
    bool earlier = em_has_error();
    if (em_atomic_file_commit(af) == EM_OK || earlier)
        return em_error_status();
    return em_error_prefix("em_profiler_stop: trace file");
}

em_status em_profiler_stop(void)
{
    if (!atomic_load(&em_prof_active))
        return em_set_error(EM_ERR_STATE, "em_profiler_stop: the profiler is not running "
                            "(em_profiler_start first)");
    atomic_store_explicit(&em_prof_active, false, memory_order_release);
    em_prof_run run = {.wall_ns = now_ns() - start_ns,
                       .launches = device_launches() - start_launches};
    em_status st = collect(atomic_load(&session), &run);
    if (st == EM_OK)
        st = em_prof_summarise(&run, &summary);
    have_summary = st == EM_OK;
    if (trace)
        st = st == EM_OK ? write_trace(trace, &run) : (em_atomic_file_free(trace), st);
    trace = NULL;
    run_free(&run);
    return st;
}

const em_profile_summary *em_profiler_summary(void)
{
    return have_summary ? &summary : NULL;
}
