/* The optimizer's shared machinery: parameter groups with their own lr and weight decay,
 * per-parameter state made when a group is added, the step loop over the backend's fused
 * updates (inside a captured graph: their constants in device memory, written before each
 * replay), zero_grad and the lr accessors. The update rules are in sgd.c, adam.c, rmsprop.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autocast_copies_internal.h"
#include "optim/optim_internal.h"
#include "observe/profiler_internal.h"
#include "tensor/device_graph_internal.h"
#include "tensor/tensor_internal.h"

em_tensor *em_optim_own(em_tensor *t)
{
    if (t && em_scope_depth() > 0)
        em_retain(t); /* the scope releases its reference; this one stays with the optimizer */
    return t;
}

static char *name_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *name_printf(const char *fmt, ...)
{
    char buf[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

em_optim *em_optim_new(const em_optim_rule *rule, double lr, double weight_decay)
{
    em_optim *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->rule = rule;
    o->lr = lr;
    o->weight_decay = weight_decay;
    o->step = em_optim_own(em_scalar(0, EM_I64));
    if (!o->step) {
        free(o);
        return NULL;
    }
    return o;
}

em_optim *em_optim_init_module(em_optim *o, em_module *m, const char *fn)
{
    if (!o) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    if (!m)
        return o;
    int n = em_module_parameters(m, NULL, 0);
    em_param_ref *refs = calloc(n > 0 ? n : 1, sizeof *refs);
    em_tensor **ts = calloc(n > 0 ? n : 1, sizeof *ts);
    bool ok = refs && ts;
    if (ok) {
        em_module_parameters(m, refs, n);
        for (int i = 0; i < n; i++)
            ts[i] = refs[i].value;
        ok = em_optim_add_group(o, ts, n, (em_group_opts){0}) >= 0;
    } else {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    }
    free(refs);
    free(ts);
    if (!ok) {
        em_optim_free(o);
        return NULL;
    }
    return o;
}

static void param_clear(em_optim_param *p)
{
    if (p->param)
        em_autocast_copy_drop(p->param);
    em_release(p->step);
    for (int k = 0; k < p->n_state; k++)
        em_release(p->state[k]);
    for (int k = 0; k < 1 + EM_OPTIM_MAX_STATE; k++)
        free(p->names[k]);
    memset(p, 0, sizeof *p);
}

/* Drops groups from index group on and parameters from index param on. */
static void truncate_groups(em_optim *o, int group, int param)
{
    for (int i = param; i < o->n_params; i++)
        param_clear(&o->params[i]);
    for (int i = group; i < o->n_groups; i++) {
        em_release(o->groups[i].lr);
        free(o->groups[i].lr_name);
    }
    o->n_params = param < o->n_params ? param : o->n_params;
    o->n_groups = group < o->n_groups ? group : o->n_groups;
}

static void detach_captures(em_optim *o);

void em_optim_free(em_optim *o)
{
    if (!o)
        return;
    detach_captures(o);
    truncate_groups(o, 0, 0);
    em_release(o->step);
    free(o->groups);
    free(o->params);
    free(o);
}

static bool in_optimizer(const em_optim *o, const em_tensor *t)
{
    for (int i = 0; i < o->n_params; i++)
        if (o->params[i].param == t)
            return true;
    return false;
}

static em_status check_new_params(const em_optim *o, em_tensor *const *params, int n)
{
    static const char *fn = "em_optim_add_group";
    for (int i = 0; i < n; i++) {
        const em_tensor *t = params[i];
        if (!t)
            return em_set_error(EM_ERR_ARG, "%s: parameter %d is NULL", fn, i);
        if (t->dtype != EM_F32 && t->dtype != EM_F64)
            return em_set_error(EM_ERR_UNSUPPORTED,
                                "%s: parameter %d is %s; optimizers update f32 or f64 parameters",
                                fn, i, em_dtype_name(t->dtype));
        if (!em_is_contiguous(t)) {
            char s[64];
            return em_set_error(EM_ERR_ARG, "%s: parameter %d %s is not contiguous", fn, i,
                                em_shape_str(t, s, sizeof s));
        }
        bool dup = in_optimizer(o, t);
        for (int j = 0; j < i && !dup; j++)
            dup = params[j] == t;
        if (dup)
            return em_set_error(EM_ERR_ARG, "%s: parameter %d is already in a group", fn, i);
    }
    return EM_OK;
}

static em_status param_init(em_optim *o, em_optim_param *p, em_tensor *t, int group, int index)
{
    if (em_autocast_copy_register(t) != EM_OK)
        return EM_ERR_MEMORY;
    p->param = t;
    p->group = group;
    p->step = em_optim_own(em_scalar(0, EM_I64));
    p->names[0] = name_printf("param.%d.step", index);
    if (!p->step || !p->names[0])
        return EM_ERR_MEMORY;
    const char *names[EM_OPTIM_MAX_STATE];
    int n = o->rule->state_names(o, names);
    for (int k = 0; k < n; k++) {
        p->state[k] = em_optim_own(em_zeros_like(t));
        p->n_state = k + 1;
        p->names[1 + k] = name_printf("param.%d.%s", index, names[k]);
        if (!p->state[k] || !p->names[1 + k])
            return EM_ERR_MEMORY;
    }
    return EM_OK;
}

int em_optim_add_group(em_optim *o, em_tensor *const *params, int n, em_group_opts g)
{
    static const char *fn = "em_optim_add_group";
    if (!o || n < 0 || (n > 0 && !params)) {
        em_set_error(EM_ERR_ARG, "%s: NULL optimizer or parameters, or n < 0 (%d)", fn, n);
        return -1;
    }
    double lr = g.lr_set ? g.lr : o->lr;
    double wd = g.weight_decay_set ? g.weight_decay : o->weight_decay;
    if (!(lr >= 0) || !(wd >= 0)) {
        em_set_error(EM_ERR_ARG, "%s: lr (%g) and weight_decay (%g) must be >= 0", fn, lr, wd);
        return -1;
    }
    if (check_new_params(o, params, n) != EM_OK)
        return -1;
    em_optim_group *groups = realloc(o->groups, (o->n_groups + 1) * sizeof *groups);
    if (groups)
        o->groups = groups;
    em_optim_param *ps = realloc(o->params, (o->n_params + n + 1) * sizeof *ps);
    if (ps)
        o->params = ps;
    if (!groups || !ps) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return -1;
    }
    int gi = o->n_groups, first = o->n_params;
    em_optim_group *grp = &o->groups[o->n_groups++];
    *grp = (em_optim_group){
        .lr = em_optim_own(em_scalar(lr, EM_F64)),
        .weight_decay = wd,
        .lr_name = name_printf("group.%d.lr", gi),
    };
    bool ok = grp->lr && grp->lr_name;
    for (int i = 0; i < n && ok; i++) {
        em_optim_param *p = &o->params[o->n_params++];
        memset(p, 0, sizeof *p);
        ok = param_init(o, p, params[i], gi, first + i) == EM_OK;
    }
    if (!ok) {
        truncate_groups(o, gi, first);
        em_set_error(EM_ERR_MEMORY, "%s: out of memory for the state of %d parameters", fn, n);
        return -1;
    }
    return gi;
}

em_status em_optim_add_module_no_decay_1d(em_optim *o, em_module *m)
{
    static const char *fn = "em_optim_add_module_no_decay_1d";
    if (!o || !m)
        return em_set_error(EM_ERR_ARG, "%s: NULL optimizer or module", fn);
    int n = em_module_parameters(m, NULL, 0);
    em_param_ref *refs = calloc(n > 0 ? n : 1, sizeof *refs);
    em_tensor **decay = calloc(n > 0 ? n : 1, sizeof *decay);
    em_tensor **no_decay = calloc(n > 0 ? n : 1, sizeof *no_decay);
    em_status st = EM_OK;
    if (!refs || !decay || !no_decay) {
        st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    } else {
        em_module_parameters(m, refs, n);
        int nd = 0, nn = 0;
        for (int i = 0; i < n; i++) {
            if (refs[i].value->ndim < 2)
                no_decay[nn++] = refs[i].value;
            else
                decay[nd++] = refs[i].value;
        }
        int g0 = o->n_groups, p0 = o->n_params;
        em_group_opts off = {.weight_decay = 0, .weight_decay_set = true};
        if (em_optim_add_group(o, decay, nd, (em_group_opts){0}) < 0 ||
            em_optim_add_group(o, no_decay, nn, off) < 0) {
            truncate_groups(o, g0, p0);
            st = em_error_status();
        }
    }
    free(refs);
    free(decay);
    free(no_decay);
    return st;
}

/* The checks of one parameter's update, before any parameter changes. */
static em_status check_update(const em_optim *o, const em_optim_param *p, int index)
{
    static const char *fn = "em_optim_step";
    const em_tensor *t = p->param, *g = t->grad;
    const em_backend *be = em_tensor_backend(t, fn);
    if (!be)
        return em_error_status();
    if (!o->rule->supported(be))
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: not supported on %s", fn,
                            em_device_name(t->device));
    for (int k = 0; k < p->n_state; k++)
        if (p->state[k]->device != t->device)
            return em_set_error(EM_ERR_ARG, "%s: parameter %d is on %s but its optimizer state "
                                "on %s: build the optimizer after em_module_to", fn, index,
                                em_device_name(t->device), em_device_name(p->state[k]->device));
    if (!em_same_shape(t, g) || g->dtype != t->dtype || g->device != t->device) {
        char s1[64], s2[64];
        return em_set_error(EM_ERR_ARG,
                            "%s: the grad of parameter %d is %s %s on %s, the parameter %s %s "
                            "on %s", fn, index, em_shape_str(g, s1, sizeof s1),
                            em_dtype_name(g->dtype), em_device_name(g->device),
                            em_shape_str(t, s2, sizeof s2), em_dtype_name(t->dtype),
                            em_device_name(t->device));
    }
    return EM_OK;
}

static int64_t step_of(const em_optim_param *p)
{
    return *(const int64_t *)em_data_ptr(p->step);
}

/* Parameters one fused launch updates together: one group, dtype, device and step count. */
static bool same_launch(const em_optim_param *a, const em_optim_param *b)
{
    return a->group == b->group && a->param->dtype == b->param->dtype &&
           a->param->device == b->param->device && step_of(a) == step_of(b);
}

/* The host lists of one fused launch over n parameters, and their autocast copies. */
typedef struct {
    int64_t *numel;
    void **data;
    const void **grad;
    void **state[EM_OPTIM_MAX_STATE];
    void **low;
    em_tensor **copy;
} launch_lists;

static bool lists_new(launch_lists *ls, int n)
{
    size_t m = (size_t)(n > 0 ? n : 1);
    *ls = (launch_lists){.numel = malloc(m * sizeof *ls->numel), .data = malloc(m * sizeof(void *)),
                         .grad = malloc(m * sizeof(void *)), .low = malloc(m * sizeof(void *)),
                         .copy = malloc(m * sizeof(em_tensor *))};
    bool ok = ls->numel && ls->data && ls->grad && ls->low && ls->copy;
    for (int k = 0; k < EM_OPTIM_MAX_STATE; k++)
        ok &= (ls->state[k] = malloc(m * sizeof(void *))) != NULL;
    return ok;
}

static void lists_free(launch_lists *ls)
{
    free(ls->numel);
    free(ls->data);
    free(ls->grad);
    free(ls->low);
    free(ls->copy);
    for (int k = 0; k < EM_OPTIM_MAX_STATE; k++)
        free(ls->state[k]);
}

/* The autocast copies of the launch's n parameters into ls->copy (NULL where none is to be
 * written) and l's low list (NULL where there is none, or they are of more than one dtype). */
static void launch_copies(em_optim *o, const int *idx, int n, launch_lists *ls,
                          em_array_list *l)
{
    em_dtype dt = EM_F32;
    bool any = false, one_dtype = true;
    for (int c = 0; c < n; c++) {
        em_tensor *copy = em_autocast_copy_to_write(o->params[idx[c]].param);
        ls->copy[c] = copy;
        ls->low[c] = copy ? em_data_ptr(copy) : NULL;
        one_dtype = one_dtype && (!copy || !any || copy->dtype == dt);
        dt = copy && !any ? copy->dtype : dt;
        any = any || copy;
    }
    if (any && one_dtype) {
        l->low = ls->low;
        l->low_dtype = dt;
    }
}

/* ---- updates inside a captured graph ---- */

/* A fused update recorded inside a captured step: the parameters it updates, the device memory
 * its launch reads its constants from, and the constants last written there. */
typedef struct {
    int *idx, n;
    em_tensor *consts; /* EM_UPDATE_CONSTS_BYTES bytes on the parameters' device */
    double lr, weight_decay;
    int64_t step;
    bool fresh; /* the capture's own constants: the first replay runs the captured step itself,
                   whose counts em_optim_step advanced already */
} captured_update;

/* The updates of one captured graph, in launch order; one of the optimizer's list. */
struct em_optim_capture {
    em_optim *optim; /* NULL once the optimizer was freed */
    em_device_graph *graph;
    captured_update *u;
    int n, cap;
    em_optim_capture *next;
};

/* Before each replay: every update's constants for this step into its device memory, and the
 * step counts advanced as em_optim_step advances them (the first replay's were already). */
static em_status replay_updates(void *ctx)
{
    static const char *fn = "em_optim_step (a graph's replay)";
    em_optim_capture *c = ctx;
    em_optim *o = c->optim;
    if (!o)
        return em_set_error(EM_ERR_STATE, "%s: the optimizer was freed before the graph", fn);
    bool advanced = false;
    for (int i = 0; i < c->n; i++) {
        captured_update *u = &c->u[i];
        const em_optim_param *first = &o->params[u->idx[0]];
        const em_optim_group *g = &o->groups[first->group];
        if (!u->fresh) {
            u->step = *(const int64_t *)em_data_ptr(first->step) + 1;
            u->lr = *(const double *)em_data_ptr(g->lr);
            u->weight_decay = g->weight_decay;
        }
        em_array_list none = {0};
        int rc = o->rule->update(o, em_tensor_backend(first->param, fn), first->param->dtype,
                                 u->lr, u->weight_decay, u->step, &none,
                                 (em_update_consts){em_data_ptr(u->consts), true});
        if (em_kernel_status(rc, fn, first->param) != EM_OK)
            return em_error_status();
        for (int k = 0; !u->fresh && k < u->n; k++)
            (*(int64_t *)em_data_ptr(o->params[u->idx[k]].step))++;
        advanced |= !u->fresh;
        u->fresh = false;
    }
    if (advanced)
        (*(int64_t *)em_data_ptr(o->step))++;
    return EM_OK;
}

static void drop_capture(void *ctx)
{
    em_optim_capture *c = ctx;
    for (int i = 0; i < c->n; i++) {
        free(c->u[i].idx);
        em_release(c->u[i].consts);
    }
    for (em_optim_capture **p = c->optim ? &c->optim->captures : NULL; p && *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    free(c->u);
    free(c);
}

static void detach_captures(em_optim *o)
{
    for (em_optim_capture *c = o->captures; c; c = c->next)
        c->optim = NULL;
    o->captures = NULL;
}

/* A new record, inside the capture of graph g on dev, of the update of the n parameters at idx:
 * NULL + error when out of memory. */
static captured_update *capture_update(em_optim *o, em_device_graph *g, em_device dev,
                                       const int *idx, int n)
{
    static const char *fn = "em_optim_step";
    em_optim_capture *c = o->captures;
    while (c && c->graph != g)
        c = c->next;
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) {
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
            return NULL;
        }
        *c = (em_optim_capture){.optim = o, .graph = g, .next = o->captures};
        if (em_device_graph_on_replay(g, replay_updates, drop_capture, c) != EM_OK) {
            free(c);
            return NULL;
        }
        o->captures = c;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        captured_update *u = realloc(c->u, (size_t)cap * sizeof *u);
        if (!u) {
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
            return NULL;
        }
        c->u = u;
        c->cap = cap;
    }
    captured_update *u = &c->u[c->n];
    *u = (captured_update){.idx = malloc((size_t)n * sizeof *u->idx), .n = n,
                           .consts = em_optim_own(em_empty_on(EM_SHAPE(EM_UPDATE_CONSTS_BYTES),
                                                              EM_U8, dev))};
    if (!u->idx || !u->consts) {
        free(u->idx);
        em_release(u->consts);
        if (!u->idx)
            em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    memcpy(u->idx, idx, (size_t)n * sizeof *idx);
    c->n++;
    return u;
}

/* One fused update of the n parameters at idx (one launch's worth), their grads made contiguous
 * inside the caller's scope, their autocast copies written in the same pass (or cast after it
 * where the backend cannot); each parameter's step count advances on success. */
static em_status update_launch(em_optim *o, const int *idx, int n, launch_lists *ls)
{
    static const char *fn = "em_optim_step";
    const em_optim_param *first = &o->params[idx[0]];
    for (int c = 0; c < n; c++) {
        const em_optim_param *p = &o->params[idx[c]];
        em_tensor *g = p->param->grad;
        if (!em_is_contiguous(g) && !(g = em_tensor_contiguous_raw(g)))
            return em_error_status();
        ls->numel[c] = em_numel(p->param);
        ls->data[c] = em_data_ptr(p->param);
        ls->grad[c] = em_data_ptr(g);
        for (int k = 0; k < p->n_state; k++)
            ls->state[k][c] = em_data_ptr(p->state[k]);
    }
    em_array_list l = {.n = n, .numel = ls->numel, .data = ls->data, .grad = ls->grad};
    for (int k = 0; k < first->n_state; k++)
        l.state[k] = ls->state[k];
    launch_copies(o, idx, n, ls, &l);
    const em_optim_group *g = &o->groups[first->group];
    int64_t step = step_of(first) + 1;
    const em_backend *be = em_tensor_backend(first->param, fn);
    double lr = *(double *)em_data_ptr(g->lr);
    em_device_graph *graph = em_device_graph_capturing(first->param->device);
    captured_update *u = graph ? capture_update(o, graph, first->param->device, idx, n) : NULL;
    if (graph && !u)
        return em_error_status();
    em_update_consts at = {u ? em_data_ptr(u->consts) : NULL, false};
    int rc = o->rule->update(o, be, first->param->dtype, lr, g->weight_decay, step, &l, at);
    if (rc == EM_KERNEL_UNSUPPORTED && l.low) { /* the backend cannot write the copies */
        l.low = NULL;
        rc = o->rule->update(o, be, first->param->dtype, lr, g->weight_decay, step, &l, at);
    }
    em_status st = em_kernel_status(rc, fn, first->param);
    if (u) {
        u->lr = lr;
        u->weight_decay = g->weight_decay;
        u->step = step;
        u->fresh = true;
    }
    for (int c = 0; st == EM_OK && c < n; c++) {
        em_tensor *param = o->params[idx[c]].param, *copy = ls->copy[c];
        em_storage_touch(param->storage);
        if (copy && !l.low) /* not written by the update */
            st = em_copy_(copy, param);
        if (copy && st == EM_OK)
            em_autocast_copy_written(param);
        (*(int64_t *)em_data_ptr(o->params[idx[c]].step))++;
    }
    return st;
}

/* Every parameter with a grad, in as few fused launches as their groups, dtypes, devices and
 * step counts allow. */
static em_status update_all(em_optim *o)
{
    int *idx = malloc((size_t)(o->n_params > 0 ? o->n_params : 1) * sizeof *idx);
    bool *done = calloc((size_t)(o->n_params > 0 ? o->n_params : 1), sizeof *done);
    launch_lists ls = {0};
    em_status st = idx && done && lists_new(&ls, o->n_params)
                       ? EM_OK : em_set_error(EM_ERR_MEMORY, "em_optim_step: out of memory");
    em_scope_begin();
    for (int i = 0; i < o->n_params && st == EM_OK; i++) {
        if (done[i] || !o->params[i].param->grad)
            continue;
        int n = 0;
        for (int j = i; j < o->n_params; j++)
            if (!done[j] && o->params[j].param->grad &&
                same_launch(&o->params[i], &o->params[j])) {
                idx[n++] = j;
                done[j] = true;
            }
        st = update_launch(o, idx, n, &ls);
    }
    em_scope_end();
    lists_free(&ls);
    free(idx);
    free(done);
    return st;
}

static em_status step_all(em_optim *o)
{
    for (int i = 0; i < o->n_params; i++) {
        if (o->params[i].param->grad) {
            em_status st = check_update(o, &o->params[i], i);
            if (st != EM_OK)
                return st;
        }
    }
    em_status st = update_all(o);
    if (st == EM_OK)
        (*(int64_t *)em_data_ptr(o->step))++;
    return st;
}

em_status em_optim_step(em_optim *o)
{
    if (!o)
        return em_set_error(EM_ERR_ARG, "em_optim_step: NULL optimizer");
    bool profiled = EM_PROFILING() && em_prof_begin(EM_PROF_REGION, "optimizer.step", NULL, false,
                                                    EM_PHASE_OPTIMIZER, NULL, 0);
    em_status st = step_all(o);
    if (profiled)
        em_prof_end();
    return st;
}

void em_optim_zero_grad(em_optim *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->n_params; i++)
        em_zero_grad(o->params[i].param);
}

int em_optim_num_groups(const em_optim *o)
{
    return o ? o->n_groups : 0;
}

double em_optim_get_lr(const em_optim *o, int group)
{
    if (!o || group < 0 || group >= o->n_groups) {
        em_set_error(EM_ERR_ARG, "em_optim_get_lr: no group %d (the optimizer has %d)", group,
                     o ? o->n_groups : 0);
        return NAN;
    }
    return *(const double *)em_data_ptr(o->groups[group].lr);
}

void em_optim_set_lr(em_optim *o, int group, double lr)
{
    if (!o || group < 0 || group >= o->n_groups) {
        em_set_error(EM_ERR_ARG, "em_optim_set_lr: no group %d (the optimizer has %d)", group,
                     o ? o->n_groups : 0);
        return;
    }
    if (!(lr >= 0)) {
        em_set_error(EM_ERR_ARG, "em_optim_set_lr: lr must be >= 0, got %g", lr);
        return;
    }
    *(double *)em_data_ptr(o->groups[group].lr) = lr;
}
