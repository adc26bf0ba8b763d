/* What autograd/ and the other upper layers need from the tensor layer beyond its public calls:
 * aliases over shared storage, kernel views, broadcasting and backend lookup. Not installed. */
#ifndef EMBER_TENSOR_INTERNAL_H
#define EMBER_TENSOR_INTERNAL_H

#include "backend/backend_internal.h"
#include "tensor/tensor.h"

/* Refcounted bytes on one device; be is the backend that owns them (alloc, free, kernels). */
struct em_storage {
    void *data;
    size_t nbytes;
    em_device device;
    const em_backend *be;
    int refcount;
    /* Changes whenever the bytes are written in place (em_copy_, em_fill_, the random fills,
     * optimizer updates: em_storage_touch), and no two storages ever share a value, so a copy
     * made of the bytes knows whether it is still theirs. */
    uint64_t version;
};

/* Marks s's bytes as written: a new version. */
void em_storage_touch(em_storage *s);
/* t's references (tensor/tensor.c keeps the count beside the public struct), and whether nobody
 * else can see t's elements (its one reference, its storage's only tensor, contiguous), so that
 * adding into it in place is safe. */
int em_tensor_refcount(const em_tensor *t);
bool em_tensor_exclusive(const em_tensor *t);

/* A new tensor over t's storage with the given geometry; no autograd state. */
em_tensor *em_tensor_alias(const em_tensor *t, int ndim, const int64_t *shape,
                           const int64_t *strides, int64_t offset);
/* t itself (one more reference) when contiguous, else a contiguous copy; no autograd state. */
em_tensor *em_tensor_contiguous_raw(const em_tensor *t);
/* A contiguous copy of t converted to dtype; no autograd state. */
em_tensor *em_tensor_cast_raw(const em_tensor *t, em_dtype dtype);

/* The kernel's view of t, optionally broadcast to shape (stride 0 on expanded dims). */
em_arr em_tensor_arr(const em_tensor *t);
em_arr em_tensor_arr_broadcast(const em_tensor *t, const em_shape *shape);

/* ---- sizes an op derives from its arguments (output sizes, scale factors, pads, counts) ----
 * The elements of a tensor of sizes[0..n) and dtype into *out: false with "fn: negative
 * dimension: [3,-1]" or "fn: shape too large: [2^62,4]" when a size is negative, or the product
 * of the sizes (or of the nonzero ones: the strides) overflows, or the elements' bytes do. */
bool em_shape_elements(const char *fn, const int64_t *sizes, int n, em_dtype dtype, int64_t *out);
/* em_shape_elements, and the bytes must fit what one tensor on device can take
 * (em_memory_capacity): else false with "fn: shape [4,4,268435456,268435456] of f32 needs N
 * bytes, more than cpu holds (its physical memory: M bytes)" (EM_ERR_MEMORY). Every op that
 * derives an output size from its arguments calls it on that size before it allocates anything,
 * its own scratch included; em_empty and every new tensor go through it too. */
bool em_checked_elements(const char *fn, const int64_t *sizes, int n, em_dtype dtype,
                         em_device device, int64_t *out);

/* out = the broadcast of a and b (PyTorch's rules); false when they do not broadcast. */
bool em_broadcast_shapes(const em_shape *a, const em_shape *b, em_shape *out);
void em_contiguous_strides(const em_shape *s, int64_t *strides);

/* The backend of t's device, or NULL with an error naming fn. */
const em_backend *em_tensor_backend(const em_tensor *t, const char *fn);
/* Turn a kernel's return code into a status, recording "fn: not supported for dtype on device". */
em_status em_kernel_status(int rc, const char *fn, const em_tensor *t);

/* ---- feeding a device without waiting (tensor/host_transfer.c; data/loader.c uses them) ---- */
/* Host memory for fast copies to device: page-locked where the device has such memory. */
void *em_host_alloc(em_device device, size_t nbytes);
void em_host_free(em_device device, void *ptr);
/* nbytes of page-locked host memory into the start of t (contiguous), on a separate queue once
 * t's device has passed `after` (NULL: at once), without waiting; later kernels see the bytes.
 * *done is for em_event_wait (the host memory may be reused after it); NULL where the device
 * copies synchronously. */
em_status em_copy_from_host_async(em_tensor *t, const void *host, size_t nbytes, void *after,
                                  void **done);
/* *ev marks how far the device's queued kernels have got (NULL on a device without marks). */
em_status em_device_mark(em_device device, void **ev);
em_status em_event_wait(em_device device, void *ev); /* waits, then frees ev; NULL is fine */
void em_event_free(em_device device, void *ev);       /* NULL is fine */

/* Called with a dying tensor's node (t->node != NULL when its last reference goes). The tensor
 * layer cannot include autograd headers, so autograd sets this to em_node_release before it
 * attaches the first node; NULL until then. */
extern void (*em_tensor_node_release_hook)(struct em_node *node);

#endif
