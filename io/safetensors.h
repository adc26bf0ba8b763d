/* Named tensors in the safetensors format: an 8-byte little-endian header length N, N bytes of
 * JSON (names, dtypes, shapes, data offsets, optional string metadata), then raw little-endian
 * data. Writing is atomic; reading validates everything and reports the file and the problem. */
#ifndef EMBER_IO_SAFETENSORS_H
#define EMBER_IO_SAFETENSORS_H

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;
    em_tensor *tensor; /* any dtype, device or layout; written row-major */
} em_st_entry;

typedef struct {
    const char *key;
    const char *value;
} em_st_meta;

/* A loaded file: tensors in data order, CPU and contiguous, owned by this struct. */
typedef struct {
    int n_tensors;
    char **names;        /* (n_tensors) */
    em_tensor **tensors; /* (n_tensors) */
    int n_meta;
    char **meta_keys;   /* (n_meta), sorted */
    char **meta_values; /* (n_meta) */
} em_safetensors;

/* Write the tensors (names unique and non-empty) and metadata to path, replacing it atomically.
 * The header lists __metadata__ (keys sorted) first, then the tensors ordered as the reference
 * implementation orders them: by dtype, widest alignment first, then by name. */
em_status em_safetensors_save(const char *path, const em_st_entry *tensors, int n,
                              const em_st_meta *meta, int n_meta);

/* Read the whole file into a new *out. On failure *out is untouched and the status is EM_ERR_IO
 * (or EM_ERR_UNSUPPORTED for a dtype ember lacks) with a message naming the file and problem. */
em_status em_safetensors_load(const char *path, em_safetensors **out);
/* Read the file's header alone into a new *out: its metadata, no tensors (n_tensors 0), from
 * a file checked as em_safetensors_load checks its header, without reading its data. */
em_status em_safetensors_load_meta(const char *path, em_safetensors **out);
/* Copy the file's tensors into existing ones by name (shapes must match; dtypes convert). Every
 * name, shape and the file are checked before any tensor is written: on failure none is. */
em_status em_safetensors_load_into(const char *path, const em_st_entry *dst, int n);

/* The tensor named name (borrowed), or NULL; a hash lookup. */
em_tensor *em_safetensors_get(const em_safetensors *st, const char *name);
/* The metadata value of key, or NULL; a binary search of the sorted keys. */
const char *em_safetensors_meta(const em_safetensors *st, const char *key);
/* The metadata value of key read as a whole unsigned number (a negative one, as written from an
 * int64_t, wraps); false when the key is missing or its value is not a number. */
bool em_safetensors_meta_u64(const em_safetensors *st, const char *key, uint64_t *v);
void em_safetensors_free(em_safetensors *st); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
