/* The tensor layer's own plumbing: storages, building tensor structs, scope bookkeeping and
 * single-element reads. Upper layers may use em_tensor_new to make outputs that name their op in
 * errors. Not installed. */
#ifndef EMBER_CORE_INTERNAL_H
#define EMBER_CORE_INTERNAL_H

#include "tensor/tensor_internal.h"

/* storage.c: refcounted bytes from the accounting allocator. em_storage_new returns refcount 1,
 * or NULL with "fn: out of memory ..." / "fn: cuda backend not available". */
em_storage *em_storage_new(const char *fn, em_device device, size_t nbytes);
void em_storage_retain(em_storage *s);
void em_storage_release(em_storage *s);

/* tensor.c: a new contiguous tensor, registered with the current scope (see em_scope_register);
 * NULL with "fn: ..." on a bad shape, dtype or device, or when out of memory. */
em_tensor *em_tensor_new(const char *fn, const em_shape *shape, em_dtype dtype, em_device device);
/* A new tensor struct over storage s (retained) with the given geometry, registered likewise. */
em_tensor *em_tensor_wrap(const char *fn, em_storage *s, em_dtype dtype, int ndim,
                          const int64_t *shape, const int64_t *strides, int64_t offset);
/* Checks a shape and dtype for fn; false with "fn: negative dimension: [3,-1]" and the like. A
 * view's check: nothing is allocated, so no limit on bytes (em_tensor_new has one). */
bool em_tensor_check_shape(const char *fn, const em_shape *shape, em_dtype dtype);

/* scope.c: a scope holds the reference a creating call hands out. The slot beside each tensor
 * (kept by tensor.c) says which scope holds it and where; a tensor that dies while a scope holds
 * it has its entry cleared, so code that releases a temporary it made and shared with no one is
 * correct inside and outside scopes alike. */
typedef struct em_scope_slot {
    struct em_scope *scope; /* NULL when no scope holds t */
    int64_t index;
} em_scope_slot;
em_scope_slot *em_tensor_scope_slot(em_tensor *t);
void em_scope_register(em_tensor *t); /* the current scope, if any, takes t's creation reference */
/* Clear t's scope entry, if any: the caller takes over the creation reference the scope held
 * (tensor.c calls it as t dies; a module adopting a parameter calls it too). */
void em_scope_forget(em_tensor *t);

/* inspect.c: the element at index (ndim entries, in range) converted to dtype into dst. */
em_status em_copy_element(const char *fn, const em_tensor *t, const int64_t *index, em_dtype dtype,
                          void *dst);

/* inspect.c: 64-bit FNV-1a over n bytes at p, continuing from h (EM_FNV1A_START to begin); what
 * em_tensor_hash is made of. */
#define EM_FNV1A_START 1469598103934665603ULL
uint64_t em_fnv1a(uint64_t h, const void *p, size_t n);

#endif
