/* The tensor struct's lifetime: building new and aliasing tensors, retain and release. Each
 * tensor lives in a box beside what only this layer writes: its reference count and the slot its
 * scope bookkeeping needs. */
#include <stdlib.h>

#include "tensor/core_internal.h"

void (*em_tensor_node_release_hook)(struct em_node *node) = NULL;

typedef struct {
    em_tensor t; /* first: a tensor pointer is its box's pointer */
    int refcount;
    em_scope_slot slot;
} tensor_box;

static tensor_box *box_of(const em_tensor *t)
{
    return (tensor_box *)t;
}

em_scope_slot *em_tensor_scope_slot(em_tensor *t)
{
    return &box_of(t)->slot;
}

/* dtype valid and ndim in range; false with an error naming fn otherwise. */
static bool check_dtype_ndim(const char *fn, const em_shape *shape, em_dtype dtype)
{
    if (!em_dtype_valid(dtype)) {
        em_set_error(EM_ERR_ARG, "%s: dtype invalid", fn);
        return false;
    }
    if (shape->ndim < 0 || shape->ndim > EM_MAX_DIMS) {
        em_set_error(EM_ERR_ARG, "%s: ndim out of range: %d (at most %d)", fn, shape->ndim,
                     EM_MAX_DIMS);
        return false;
    }
    return true;
}

bool em_tensor_check_shape(const char *fn, const em_shape *shape, em_dtype dtype)
{
    int64_t numel;
    return check_dtype_ndim(fn, shape, dtype) &&
           em_shape_elements(fn, shape->d, shape->ndim, dtype, &numel);
}

em_tensor *em_tensor_wrap(const char *fn, em_storage *s, em_dtype dtype, int ndim,
                          const int64_t *shape, const int64_t *strides, int64_t offset)
{
    tensor_box *box = calloc(1, sizeof *box);
    if (!box) {
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    em_tensor *t = &box->t;
    t->dtype = dtype;
    t->device = s->device;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
    t->offset = offset;
    t->storage = s;
    box->refcount = 1;
    em_storage_retain(s);
    em_scope_register(t);
    return t;
}

em_tensor *em_tensor_new(const char *fn, const em_shape *shape, em_dtype dtype, em_device device)
{
    if ((unsigned)device >= EM_NDEVICES) {
        em_set_error(EM_ERR_ARG, "%s: device invalid", fn);
        return NULL;
    }
    int64_t numel;
    if (!check_dtype_ndim(fn, shape, dtype) ||
        !em_checked_elements(fn, shape->d, shape->ndim, dtype, device, &numel))
        return NULL;
    int64_t strides[EM_MAX_DIMS];
    em_contiguous_strides(shape, strides);
    size_t nbytes = (size_t)numel * em_dtype_size(dtype);
    em_storage *s = em_storage_new(fn, device, nbytes);
    if (!s)
        return NULL;
    em_tensor *t = em_tensor_wrap(fn, s, dtype, shape->ndim, shape->d, strides, 0);
    em_storage_release(s);
    return t;
}

em_tensor *em_retain(em_tensor *t)
{
    if (t)
        __atomic_add_fetch(&box_of(t)->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void em_release(em_tensor *t)
{
    if (!t || __atomic_sub_fetch(&box_of(t)->refcount, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    em_scope_forget(t);
    em_release(t->grad);
    if (t->node && em_tensor_node_release_hook)
        em_tensor_node_release_hook(t->node);
    em_storage_release(t->storage);
    free(box_of(t));
}

int em_tensor_refcount(const em_tensor *t)
{
    return __atomic_load_n(&box_of(t)->refcount, __ATOMIC_RELAXED);
}

bool em_tensor_exclusive(const em_tensor *t)
{
    return em_tensor_refcount(t) == 1 && t->storage->refcount == 1 && em_is_contiguous(t);
}
