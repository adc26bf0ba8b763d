/* The loader's device feed: each batch is copied from the loader's page-locked host slot into one
 * of two device buffer pairs on the device's copy queue, beside the kernels of the step before
 * (PyTorch's pin_memory + non_blocking prefetch). A pair is reused once the device has passed
 * the step that used it, and replaced by a fresh one while a caller still holds its tensors. */
#include "data/data.h"
#include "data/loader_feed_internal.h"
#include "tensor/core_internal.h"

void em_feed_init(em_feed *f, em_device device)
{
    *f = (em_feed){.device = device, .held_slot = -1};
}

static em_shape batch_shape(int64_t rows, const em_shape *sample)
{
    em_shape s = {.ndim = sample->ndim + 1, .d = {rows}};
    for (int d = 0; d < sample->ndim; d++)
        s.d[d + 1] = sample->d[d];
    return s;
}

static void pair_drop(em_feed *f, em_feed_pair *p)
{
    em_release(p->x);
    em_release(p->y);
    em_event_free(f->device, p->consumed);
    *p = (em_feed_pair){0};
}

/* p ready for the next batch: kept when only the feed holds it, else a fresh pair. */
static em_status pair_ready(em_feed *f, em_feed_pair *p, const em_feed_rows *r)
{
    bool shared = p->x && (p->x->storage->refcount > 1 || p->y->storage->refcount > 1);
    if (shared)
        pair_drop(f, p);
    if (p->x)
        return EM_OK;
    em_shape xs = batch_shape(r->batch_size, &r->x_shape);
    em_shape ys = batch_shape(r->batch_size, &r->y_shape);
    p->x = em_empty_on(xs, r->x_dtype, f->device);
    p->y = p->x ? em_empty_on(ys, r->y_dtype, f->device) : NULL;
    if (!p->y) {
        pair_drop(f, p);
        return em_error_status();
    }
    em_scope_forget(p->x); /* the feed's own, whatever scope the caller is in */
    em_scope_forget(p->y);
    return EM_OK;
}

/* The first rows of t as a new view outside autograd (the caller's reference). */
static em_tensor *rows_of(em_tensor *t, int64_t rows)
{
    int64_t shape[EM_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        shape[d] = d ? t->shape[d] : rows;
    return em_tensor_alias(t, t->ndim, shape, t->strides, 0);
}

em_status em_feed_batch(em_feed *f, const em_feed_rows *r, int slot, em_batch *out)
{
    /* the caller has queued the step of the previous batch by now: mark where it ends */
    em_feed_pair *prev = &f->pairs[(f->handed + 1) % 2], *p = &f->pairs[f->handed % 2];
    if (prev->x && !prev->consumed && em_device_mark(f->device, &prev->consumed) != EM_OK)
        return em_error_status();
    if (pair_ready(f, p, r) != EM_OK)
        return em_error_status();
    size_t xb = (size_t)(r->rows * em_shape_numel(&r->x_shape)) * em_dtype_size(r->x_dtype);
    size_t yb = (size_t)(r->rows * em_shape_numel(&r->y_shape)) * em_dtype_size(r->y_dtype);
    em_status st = em_copy_from_host_async(p->x, r->x, xb, p->consumed, &f->done[0]);
    if (st == EM_OK)
        st = em_copy_from_host_async(p->y, r->y, yb, p->consumed, &f->done[1]);
    em_event_free(f->device, p->consumed);
    p->consumed = NULL;
    f->held_slot = slot;
    if (st != EM_OK)
        return st;
    out->x = rows_of(p->x, r->rows);
    out->y = out->x ? rows_of(p->y, r->rows) : NULL;
    if (!out->y) {
        em_release(out->x);
        out->x = NULL;
        return em_error_status();
    }
    f->handed++;
    return EM_OK;
}

int em_feed_release(em_feed *f)
{
    int slot = f->held_slot;
    for (int k = 0; k < 2; k++) {
        em_event_wait(f->device, f->done[k]);
        f->done[k] = NULL;
    }
    f->held_slot = -1;
    return slot;
}

void em_feed_free(em_feed *f)
{
    em_feed_release(f);
    for (int k = 0; k < 2; k++)
        pair_drop(f, &f->pairs[k]);
}
