/* The profiler's tables: events grouped by name and phase, with self time (the nested ops taken
 * out), shares of the steps' time and the bottlenecks, as torch.profiler's key_averages(); and
 * each module's forward and backward time (the backward nodes of the ops it ran). */
#include <stdlib.h>
#include <string.h>

#include "observe/profiler_internal.h"

#define BOTTLENECK_PCT 20.0

const char *em_prof_phase_name(em_prof_phase phase)
{
    static const char *names[] = {"forward", "backward", "optimizer", "loader"};
    return phase < EM_PHASE_COUNT ? names[phase] : "?";
}

void em_prof_shapes_str(const em_prof_event *e, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < e->n_shapes && len + 1 < n; k++) {
        len += (size_t)snprintf(buf + len, n - len, "%s[", k ? " x " : "");
        for (int d = 0; d < e->ndim[k] && len + 1 < n; d++)
            len += d < 4 ? (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "",
                                            (long long)e->shape[k][d])
                         : (size_t)snprintf(buf + len, n - len, ",...");
        if (len + 1 < n)
            len += (size_t)snprintf(buf + len, n - len, "]");
    }
}

/* Rows of `size` bytes, each starting with its key (char[KEY_LEN]), found by an open-addressing
 * hash of the key. */
#define KEY_LEN 128

typedef struct {
    char *rows;
    size_t size;
    int n, cap;
    int *slots; /* (n_slots): row index + 1, 0 empty */
    int n_slots;
} keyed_rows;

static uint64_t hash_text(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int *slot_of(int *slots, int n_slots, const keyed_rows *t, const char *key)
{
    int j = (int)(hash_text(key) & (uint64_t)(n_slots - 1));
    while (slots[j] && strcmp(t->rows + (size_t)(slots[j] - 1) * t->size, key))
        j = (j + 1) & (n_slots - 1);
    return &slots[j];
}

/* The row for key, made (zeroed, key copied) when new; NULL when out of memory. */
static void *find_or_add(keyed_rows *t, const char *key)
{
    if (2 * (t->n + 1) > t->n_slots) {
        int n_slots = t->n_slots ? 2 * t->n_slots : 256;
        int *slots = calloc((size_t)n_slots, sizeof *slots);
        if (!slots)
            return NULL;
        for (int i = 0; i < t->n; i++)
            *slot_of(slots, n_slots, t, t->rows + (size_t)i * t->size) = i + 1;
        free(t->slots);
        t->slots = slots;
        t->n_slots = n_slots;
    }
    int *slot = slot_of(t->slots, t->n_slots, t, key);
    if (*slot)
        return t->rows + (size_t)(*slot - 1) * t->size;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char *rows = realloc(t->rows, (size_t)cap * t->size);
        if (!rows)
            return NULL;
        t->rows = rows;
        t->cap = cap;
    }
    char *row = t->rows + (size_t)t->n * t->size;
    memset(row, 0, t->size);
    snprintf(row, KEY_LEN, "%s", key);
    *slot = ++t->n;
    return row;
}

/* ---- the op table ---- */

typedef struct {
    char key[KEY_LEN]; /* name + '\t' + phase */
    em_profile_row row;
    int64_t self_ns, total_ns;
} op_acc;

static bool counts_as_op(const em_prof_event *e)
{
    return e->kind == EM_PROF_OP || e->kind == EM_PROF_NODE || e->kind == EM_PROF_REGION;
}

/* self[i]: event i's duration less its direct children's (ops, nodes, regions on its thread). */
static void self_times(const em_prof_run *run, int64_t *self)
{
    int64_t *stack = malloc((size_t)(run->n ? run->n : 1) * sizeof *stack);
    int64_t top = 0;
    for (int64_t i = 0; i < run->n; i++) {
        const em_prof_event *e = &run->events[i];
        self[i] = e->dur_ns;
        if (!counts_as_op(e) || !stack)
            continue;
        while (top > 0) {
            const em_prof_event *p = &run->events[stack[top - 1]];
            if (p->thread == e->thread && p->t0_ns + p->dur_ns > e->t0_ns)
                break;
            top--;
        }
        if (top > 0)
            self[stack[top - 1]] -= e->dur_ns;
        stack[top++] = i;
    }
    free(stack);
}

static void op_name(const em_prof_event *e, char *buf, size_t n)
{
    snprintf(buf, n, e->kind == EM_PROF_NODE ? "%s_backward" : "%s", e->name ? e->name : "?");
}

static int by_self_time(const void *pa, const void *pb)
{
    const op_acc *a = pa, *b = pb;
    return a->self_ns != b->self_ns ? (a->self_ns > b->self_ns ? -1 : 1) : strcmp(a->key, b->key);
}

static em_status op_rows(const em_prof_run *run, const int64_t *self, double step_ns,
                         em_profile_summary *out)
{
    keyed_rows t = {.size = sizeof(op_acc)};
    em_status st = EM_OK;
    for (int64_t i = 0; i < run->n && st == EM_OK; i++) {
        const em_prof_event *e = &run->events[i];
        if (!counts_as_op(e))
            continue;
        char name[64], key[KEY_LEN];
        op_name(e, name, sizeof name);
        snprintf(key, sizeof key, "%s\t%s", name, em_prof_phase_name(e->phase));
        op_acc *r = find_or_add(&t, key);
        if (!r) {
            st = em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory summarising");
            break;
        }
        if (r->row.calls == 0) {
            snprintf(r->row.name, sizeof r->row.name, "%s", name);
            r->row.phase = em_prof_phase_name(e->phase);
            em_prof_shapes_str(e, r->row.shapes, sizeof r->row.shapes);
            r->row.dtype = e->dtype >= 0 ? em_dtype_name((em_dtype)e->dtype) : "";
            r->row.device = e->device >= 0 ? em_device_name((em_device)e->device) : "";
        }
        r->row.calls++;
        r->self_ns += self[i];
        r->total_ns += e->dur_ns;
        r->row.bytes += e->bytes;
        r->row.gpu_ms += e->gpu_ms;
    }
    free(t.slots);
    op_acc *rows = (op_acc *)t.rows;
    if (st == EM_OK && !(out->rows = calloc((size_t)(t.n ? t.n : 1), sizeof *out->rows)))
        st = em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory summarising");
    if (st == EM_OK) {
        if (t.n)
            qsort(rows, (size_t)t.n, sizeof *rows, by_self_time);
        for (int i = 0; i < t.n; i++) {
            em_profile_row *r = &out->rows[i];
            *r = rows[i].row;
            r->self_ms = (double)rows[i].self_ns / 1e6;
            r->total_ms = (double)rows[i].total_ns / 1e6;
            r->self_pct = 100.0 * (double)rows[i].self_ns / step_ns;
            r->total_pct = 100.0 * (double)rows[i].total_ns / step_ns;
            r->bottleneck = r->self_pct > BOTTLENECK_PCT;
        }
        out->n_rows = t.n;
    }
    free(rows);
    return st;
}

/* ---- the module table ---- */

typedef struct {
    char key[KEY_LEN]; /* path + '\t' + type */
    em_profile_module m;
    const char *path;
    int64_t first_t0, forward_ns, backward_ns;
} module_acc;

/* path is prefix itself or lies under it ("features" covers "features.0"); "" covers all. */
#define MAX_MODULE_DEPTH 64

static bool covers(const char *prefix, const char *path)
{
    size_t n = strlen(prefix);
    return n == 0 || (!strncmp(prefix, path, n) && (path[n] == '\0' || path[n] == '.'));
}

static int by_first_call(const void *pa, const void *pb)
{
    const module_acc *a = pa, *b = pb;
    if (a->first_t0 != b->first_t0)
        return a->first_t0 < b->first_t0 ? -1 : 1;
    return a->m.depth - b->m.depth;
}

/* Counts module event e (a forward), depth modules deep, into t. */
static em_status add_module(keyed_rows *t, const em_prof_event *e, int depth)
{
    char key[KEY_LEN];
    const char *type = e->detail ? e->detail : "?";
    snprintf(key, sizeof key, "%s\t%s", e->name, type);
    module_acc *r = find_or_add(t, key);
    if (!r)
        return em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory summarising");
    if (r->m.calls == 0) {
        r->path = e->name;
        r->first_t0 = e->t0_ns;
        if (e->name[0]) {
            snprintf(r->m.name, sizeof r->m.name, "%s (%s)", e->name, type);
            r->m.depth = depth;
        } else {
            snprintf(r->m.name, sizeof r->m.name, "(%s)", type);
        }
    }
    r->m.calls++;
    r->forward_ns += e->dur_ns;
    return EM_OK;
}

static em_status module_rows(const em_prof_run *run, double step_ns, em_profile_summary *out)
{
    keyed_rows t = {.size = sizeof(module_acc)};
    em_status st = EM_OK;
    int64_t open_ends[MAX_MODULE_DEPTH]; /* the enclosing forwards on this thread */
    int n_open = 0;
    int32_t open_thread = -1;
    for (int64_t i = 0; i < run->n && st == EM_OK; i++) {
        const em_prof_event *e = &run->events[i];
        if (e->kind != EM_PROF_MODULE || e->phase != EM_PHASE_FORWARD || !e->name)
            continue;
        if (e->thread != open_thread) {
            open_thread = e->thread;
            n_open = 0;
        }
        while (n_open > 0 && open_ends[n_open - 1] <= e->t0_ns)
            n_open--;
        st = add_module(&t, e, n_open);
        if (n_open < MAX_MODULE_DEPTH)
            open_ends[n_open++] = e->t0_ns + e->dur_ns;
    }
    free(t.slots);
    module_acc *rows = (module_acc *)t.rows;
    for (int64_t i = 0; i < run->n && st == EM_OK; i++) {
        const em_prof_event *e = &run->events[i];
        if (e->kind != EM_PROF_NODE || !e->detail)
            continue;
        for (int k = 0; k < t.n; k++)
            if (covers(rows[k].path, e->detail))
                rows[k].backward_ns += e->dur_ns;
    }
    if (st == EM_OK && !(out->modules = calloc((size_t)(t.n ? t.n : 1), sizeof *out->modules)))
        st = em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory summarising");
    if (st == EM_OK) {
        if (t.n)
            qsort(rows, (size_t)t.n, sizeof *rows, by_first_call);
        for (int k = 0; k < t.n; k++) {
            em_profile_module *m = &out->modules[k];
            *m = rows[k].m;
            m->forward_ms = (double)rows[k].forward_ns / 1e6;
            m->backward_ms = (double)rows[k].backward_ns / 1e6;
            m->pct = 100.0 * (double)(rows[k].forward_ns + rows[k].backward_ns) / step_ns;
            m->bottleneck = m->depth > 0 && m->pct > BOTTLENECK_PCT;
        }
        out->n_modules = t.n;
    }
    free(rows);
    return st;
}

em_status em_prof_summarise(const em_prof_run *run, em_profile_summary *out)
{
    *out = (em_profile_summary){.wall_ms = (double)run->wall_ns / 1e6, .n_events = run->n,
                                .n_dropped = run->n_dropped, .launches = run->launches};
    int64_t step_ns = 0;
    for (int64_t i = 0; i < run->n; i++) {
        if (run->events[i].kind == EM_PROF_STEP) {
            out->steps++;
            step_ns += run->events[i].dur_ns;
        }
    }
    if (step_ns <= 0)
        step_ns = run->wall_ns > 0 ? run->wall_ns : 1;
    out->step_ms = (double)step_ns / 1e6;
    int64_t *self = malloc((size_t)(run->n ? run->n : 1) * sizeof *self);
    if (!self)
        return em_set_error(EM_ERR_MEMORY, "em_profiler_stop: out of memory summarising");
    self_times(run, self);
    em_status st = op_rows(run, self, (double)step_ns, out);
    free(self);
    if (st == EM_OK)
        st = module_rows(run, (double)step_ns, out);
    if (st != EM_OK)
        em_prof_summary_free(out);
    return st;
}

void em_prof_summary_free(em_profile_summary *s)
{
    free(s->rows);
    free(s->modules);
    *s = (em_profile_summary){0};
}

/* ---- printing ---- */

static const char *bytes_str(int64_t b, char *buf, size_t n)
{
    double v = (double)(b < 0 ? -b : b);
    const char *sign = b < 0 ? "-" : "";
    if (v >= 1 << 20)
        snprintf(buf, n, "%s%.1f MB", sign, v / (1 << 20));
    else if (v >= 1 << 10)
        snprintf(buf, n, "%s%.1f KB", sign, v / (1 << 10));
    else
        snprintf(buf, n, "%s%.0f B", sign, v);
    return buf;
}

void em_profiler_print(FILE *f, int top)
{
    const em_profile_summary *s = em_profiler_summary();
    if (!s) {
        fprintf(f, "ember profiler: nothing recorded yet\n");
        return;
    }
    double per_step = s->steps ? s->step_ms / (double)s->steps : s->step_ms;
    fprintf(f, "ember profiler: %lld steps, %.2f ms per step, %lld events, %.1f ms recorded\n",
            (long long)s->steps, per_step, (long long)s->n_events, s->wall_ms);
    if (s->n_dropped)
        fprintf(f, "  (%lld events over the per-thread cap were not kept)\n",
                (long long)s->n_dropped);
    if (s->launches)
        fprintf(f, "device launches: %.0f per step (%lld kernels, copies and library calls "
                "queued)\n", (double)s->launches / (double)(s->steps ? s->steps : 1),
                (long long)s->launches);
    bool gpu = false;
    for (int i = 0; i < s->n_rows; i++)
        gpu = gpu || s->rows[i].gpu_ms > 0;
    fprintf(f, "%-28s %-9s %7s %10s %6s %10s %6s %9s%s %9s  %s\n", "Name", "Phase", "Calls",
            "Self ms", "Self%", "Total ms", "Total%", "Avg us", gpu ? "    GPU ms" : "", "Alloc",
            "Input shapes");
    int n = top > 0 && top < s->n_rows ? top : s->n_rows;
    for (int i = 0; i < n; i++) {
        const em_profile_row *r = &s->rows[i];
        char b[32], g[16] = "";
        if (gpu)
            snprintf(g, sizeof g, " %9.2f", r->gpu_ms);
        fprintf(f, "%-28.28s %-9s %7lld %10.2f %5.1f%% %10.2f %5.1f%% %9.1f%s %9s  %s%s\n",
                r->name, r->phase, (long long)r->calls, r->self_ms, r->self_pct, r->total_ms,
                r->total_pct, 1000.0 * r->total_ms / (double)r->calls, g,
                bytes_str(r->bytes, b, sizeof b), r->shapes,
                r->bottleneck ? "  <-- bottleneck" : "");
    }
    if (n < s->n_rows)
        fprintf(f, "... %d more rows\n", s->n_rows - n);
    if (!s->n_modules)
        return;
    fprintf(f, "\nLayer-wise time (forward, and backward of the ops each layer ran)\n");
    fprintf(f, "%-40s %7s %10s %10s %7s\n", "Module", "Calls", "Fwd ms", "Bwd ms", "% step");
    for (int k = 0; k < s->n_modules; k++) {
        const em_profile_module *m = &s->modules[k];
        char name[128];
        snprintf(name, sizeof name, "%*s%s", 2 * m->depth, "", m->name);
        fprintf(f, "%-40.40s %7lld %10.2f %10.2f %6.1f%%%s\n", name, (long long)m->calls,
                m->forward_ms, m->backward_ms, m->pct, m->bottleneck ? "  <-- bottleneck" : "");
    }
}
