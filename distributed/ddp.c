/* DistributedDataParallel: rank 0's parameters and buffers broadcast at start, then gradients
 * averaged in buckets. Gradient-ready hooks in the autograd engine copy each parameter's
 * gradient into its bucket the moment it is complete; a full bucket is queued for allreduce on
 * the communication thread (buckets strictly in order, so every rank queues the same sequence)
 * and runs while backward goes on. When backward returns, the rest are queued, all are awaited
 * and the averages are copied back into the grads. */
#include <stdlib.h>
#include <string.h>

#include "distributed/ddp_internal.h"

#define DEFAULT_BUCKET_BYTES (25u << 20)

/* A tensor owned by the DDP object whether or not the caller is inside a scope. */
static em_tensor *own(em_tensor *t)
{
    return t ? em_retain(t) : NULL;
}

/* Parameters in reverse order (roughly the order backward completes them), cut into buckets of
 * one dtype and device and at most cap bytes each. */
static em_status plan_buckets(em_ddp *d, size_t cap)
{
    d->buckets = calloc((size_t)d->n_params + 1, sizeof *d->buckets);
    if (!d->buckets)
        return em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
    size_t bytes = 0;
    for (int i = 0; i < d->n_params; i++) {
        const em_tensor *p = d->params[i].param;
        size_t nb = (size_t)em_numel(p) * em_dtype_size(p->dtype);
        ddp_bucket *b = d->n_buckets ? &d->buckets[d->n_buckets - 1] : NULL;
        const em_tensor *head = b ? d->params[b->first].param : NULL;
        if (!b || head->dtype != p->dtype || head->device != p->device || bytes + nb > cap) {
            b = &d->buckets[d->n_buckets++];
            b->first = i;
            bytes = 0;
        }
        d->params[i].bucket = (int)(b - d->buckets);
        d->params[i].offset = b->numel;
        b->n++;
        b->numel += em_numel(p);
        bytes += nb;
    }
    return EM_OK;
}

/* Each bucket's flat buffer and, per parameter, a view of its slot with the parameter's shape. */
static em_status make_buffers(em_ddp *d)
{
    em_status st = EM_OK;
    em_scope_begin();
    for (int k = 0; k < d->n_buckets && st == EM_OK; k++) {
        ddp_bucket *b = &d->buckets[k];
        const em_tensor *head = d->params[b->first].param;
        b->flat = own(em_empty_on(EM_SHAPE(b->numel), head->dtype, head->device));
        b->pending = b->n;
        for (int i = b->first; b->flat && i < b->first + b->n; i++) {
            ddp_param *p = &d->params[i];
            em_tensor *s = em_narrow(b->flat, 0, p->offset, em_numel(p->param));
            p->slot = own(em_view(s, em_shape_of(p->param)));
            if (!p->slot)
                break;
        }
        if (!b->flat || !d->params[b->first + b->n - 1].slot)
            st = em_error_status();
    }
    em_scope_end();
    return st;
}

static int find_param(const em_ddp *d, const em_tensor *t)
{
    int lo = 0, hi = d->n_params - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const em_tensor *m = d->by_address[mid].param;
        if (m == t)
            return d->by_address[mid].index;
        if ((uintptr_t)m < (uintptr_t)t)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void launch(em_ddp *d, ddp_bucket *b)
{
    b->work = (em_dist_work){.kind = EM_DIST_WORK_ALLREDUCE, .fn = "em_ddp (bucket allreduce)",
                             .data = em_data_ptr(b->flat), .count = b->numel,
                             .dtype = b->flat->dtype, .device = b->flat->device,
                             .op = EM_DIST_AVG};
    b->launched = true;
    d->stats.allreduces++;
    if (em_dist_submit(&b->work) != EM_OK && d->status == EM_OK)
        d->status = em_error_status();
}

/* Launch, in order, every bucket whose gradients are all in. */
static void launch_ready(em_ddp *d)
{
    while (d->next_launch < d->n_buckets && d->buckets[d->next_launch].pending == 0)
        launch(d, &d->buckets[d->next_launch++]);
}

/* The pass's first error (its message is the thread's error). */
static void note_error(em_ddp *d)
{
    if (d->status == EM_OK)
        d->status = em_has_error() ? em_error_status() : EM_ERR_STATE;
}

/* Parameter i's gradient (zeros when it has none) into its bucket; its bucket then launches
 * if it was the last one missing. */
static void into_bucket(em_ddp *d, int i)
{
    ddp_param *p = &d->params[i];
    em_tensor *g = p->param->grad;
    p->ready = true;
    if ((g ? em_copy_(p->slot, g) : em_zero_(p->slot)) != EM_OK)
        note_error(d);
    d->buckets[p->bucket].pending--;
    launch_ready(d);
}

static void grad_ready(void *ctx, em_tensor *leaf)
{
    em_ddp *d = ctx;
    d->unsynced |= !d->sync;
    int i = d->sync ? find_param(d, leaf) : -1;
    if (i < 0)
        return;
    ddp_param *p = &d->params[i];
    d->in_pass = true;
    if (p->ready) {
        em_set_error(EM_ERR_STATE, "em_ddp: parameter '%s' got its gradient twice in one "
                     "backward (used inside and outside a checkpointed segment?)", p->name);
        note_error(d);
        return;
    }
    into_bucket(d, i);
}

/* Queue what is left (a parameter no gradient reached counts as zeros), wait for every bucket,
 * then copy the averages back into the grads. */
static void finish_pass(em_ddp *d, double t_backward_end)
{
    for (int i = 0; i < d->n_params && d->status == EM_OK; i++) {
        ddp_param *p = &d->params[i];
        if (!p->ready && !d->buckets[p->bucket].launched && em_zero_(p->slot) == EM_OK)
            d->buckets[p->bucket].pending--;
    }
    if (d->status == EM_OK)
        launch_ready(d);
    for (int k = 0; k < d->n_buckets; k++) {
        ddp_bucket *b = &d->buckets[k];
        if (b->launched && em_dist_wait(&b->work) != EM_OK)
            note_error(d);
        if (b->launched) {
            double until = b->work.t_end < t_backward_end ? b->work.t_end : t_backward_end;
            d->stats.comm_s += b->work.t_end - b->work.t_start;
            d->stats.overlapped_s += until > b->work.t_start ? until - b->work.t_start : 0;
        }
    }
    d->stats.wait_s += em_dist_now() - t_backward_end;
    for (int i = 0; i < d->n_params && d->status == EM_OK; i++) {
        em_tensor *leaf = d->params[i].param;
        if (leaf->grad) {
            if (em_copy_(leaf->grad, d->params[i].slot) != EM_OK)
                note_error(d);
            continue;
        }
        em_scope_begin();
        em_tensor *g = em_empty_on(em_shape_of(leaf), leaf->dtype, leaf->device);
        if (g && em_copy_(g, d->params[i].slot) == EM_OK)
            leaf->grad = em_retain(g);
        else
            note_error(d);
        em_scope_end();
    }
}

static void reset_pass(em_ddp *d)
{
    for (int i = 0; i < d->n_params; i++)
        d->params[i].ready = false;
    for (int k = 0; k < d->n_buckets; k++) {
        d->buckets[k].pending = d->buckets[k].n;
        d->buckets[k].launched = false;
    }
    d->next_launch = 0;
    d->in_pass = false;
    d->unsynced = false;
    d->status = EM_OK;
}

static em_status backward_done(void *ctx, em_status st)
{
    em_ddp *d = ctx;
    if (!d->in_pass)
        return EM_OK;
    double t_end = em_dist_now();
    if (st != EM_OK) {
        /* this rank will not queue the rest: the peers must not wait for it */
        em_dist_fail(em_error());
        note_error(d);
    }
    d->stats.syncs++;
    finish_pass(d, t_end);
    em_status result = d->status;
    if (result != EM_OK && st == EM_OK)
        em_dist_fail(em_error());
    reset_pass(d);
    return result;
}

em_status em_ddp_sync_grads(em_ddp *d)
{
    if (!d)
        return em_set_error(EM_ERR_ARG, "em_ddp_sync_grads: NULL DDP");
    if (!d->unsynced)
        return EM_OK;
    d->stats.syncs++;
    for (int i = 0; i < d->n_params && d->status == EM_OK; i++)
        into_bucket(d, i);
    finish_pass(d, em_dist_now());
    em_status st = d->status;
    if (st != EM_OK)
        em_dist_fail(em_error());
    reset_pass(d);
    return st;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const ddp_lookup *)a)->param;
    uintptr_t y = (uintptr_t)((const ddp_lookup *)b)->param;
    return x < y ? -1 : x > y;
}

/* The module's parameters in reverse order, and a sorted index of them by address. */
static em_status gather_params(em_ddp *d)
{
    int n = em_module_parameters(d->m, NULL, 0);
    em_param_ref *refs = calloc((size_t)n + 1, sizeof *refs);
    d->params = calloc((size_t)n + 1, sizeof *d->params);
    d->by_address = calloc((size_t)n + 1, sizeof *d->by_address);
    if (!refs || !d->params || !d->by_address) {
        free(refs);
        return em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
    }
    em_module_parameters(d->m, refs, n);
    d->n_params = n;
    for (int i = 0; i < n; i++) {
        d->params[i] = (ddp_param){.param = refs[n - 1 - i].value, .name = refs[n - 1 - i].name};
        d->by_address[i] = (ddp_lookup){.param = d->params[i].param, .index = i};
    }
    free(refs);
    qsort(d->by_address, (size_t)n, sizeof *d->by_address, by_address);
    return EM_OK;
}

static em_status register_hooks(em_ddp *d)
{
    em_tensor **leaves = calloc((size_t)d->n_params + 1, sizeof *leaves);
    if (!leaves)
        return em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
    for (int i = 0; i < d->n_params; i++)
        leaves[i] = d->params[i].param;
    em_status st = em_grad_hooks_add(leaves, d->n_params,
                                     (em_grad_hooks){grad_ready, backward_done, d});
    free(leaves);
    d->hooked = st == EM_OK;
    return st;
}

em_ddp *em_ddp_new(em_module *m, em_ddp_opts o)
{
    if (!m) {
        em_set_error(EM_ERR_ARG, "em_ddp_new: NULL module");
        return NULL;
    }
    if (!em_dist_initialized()) {
        em_set_error(EM_ERR_STATE, "em_ddp_new: no process group (call em_dist_init first)");
        return NULL;
    }
    em_ddp *d = calloc(1, sizeof *d);
    if (!d) {
        em_set_error(EM_ERR_MEMORY, "em_ddp_new: out of memory");
        return NULL;
    }
    d->m = m;
    d->sync = true;
    em_status st = gather_params(d);
    if (st == EM_OK)
        st = em_ddp_check_same_params(m);
    if (st == EM_OK)
        st = em_ddp_broadcast_state(m);
    if (st == EM_OK)
        st = plan_buckets(d, o.bucket_bytes ? o.bucket_bytes : DEFAULT_BUCKET_BYTES);
    if (st == EM_OK)
        st = make_buffers(d);
    if (st == EM_OK)
        st = register_hooks(d);
    if (st != EM_OK) {
        em_ddp_free(d);
        return NULL;
    }
    d->stats.n_buckets = d->n_buckets;
    return d;
}

void em_ddp_free(em_ddp *d)
{
    if (!d)
        return;
    if (d->hooked)
        em_grad_hooks_remove(d);
    for (int k = 0; k < d->n_buckets; k++) {
        if (d->buckets[k].launched)
            em_dist_wait(&d->buckets[k].work);
        em_release(d->buckets[k].flat);
    }
    for (int i = 0; i < d->n_params; i++)
        em_release(d->params[i].slot);
    free(d->buckets);
    free(d->params);
    free(d->by_address);
    free(d);
}

void em_ddp_set_sync(em_ddp *d, bool sync)
{
    if (d)
        d->sync = sync;
}

em_ddp_stats em_ddp_get_stats(const em_ddp *d)
{
    return d ? d->stats : (em_ddp_stats){0};
}
