/* The safetensors header: the file's dtype names, and the header's JSON read with the bounded
 * reader (io/json_reader.h) straight into a list of tensors and metadata, checked as it is read,
 * so that what a header costs is what it declares (a tensor's name, dtype, shape and offsets)
 * and never a tree of its text. Private to io/. */
#ifndef EMBER_IO_SAFETENSORS_HEADER_H
#define EMBER_IO_SAFETENSORS_HEADER_H

#include "io/safetensors.h"

/* A dtype as the file names it; dtype is EM_NDTYPES where ember has no such dtype. rank is its
 * position in the reference implementation's dtype enum, which orders a file by alignment. */
typedef struct {
    const char *name;
    int rank;
    em_dtype dtype;
    size_t size;
} em_st_dtype;

const em_st_dtype *em_st_dtype_of(em_dtype dt);        /* NULL when the format has none */
const em_st_dtype *em_st_dtype_named(const char *name); /* NULL when unknown */

/* One tensor of a header. */
typedef struct {
    char *name; /* owned */
    const em_st_dtype *dt;
    em_shape shape;
    uint64_t begin, end; /* its bytes in the data section */
} em_st_item;

typedef struct {
    em_st_item *items; /* (n_items) in data order: their offsets tile the data section */
    int n_items;
    char **meta_keys, **meta_values; /* (n_meta) owned, keys sorted */
    int n_meta;
} em_st_header;

/* Parses the n bytes of header text of the file at path, whose data section holds data_len
 * bytes, into *out: every name unique, every dtype, shape and offset checked, the offsets
 * tiling the data exactly. On failure *out is empty and the error (EM_ERR_IO, or
 * EM_ERR_UNSUPPORTED for a dtype ember lacks) names the file and the problem. Memory: the
 * items and strings the header declares, no more. */
em_status em_st_header_parse(const char *path, const char *text, size_t n, uint64_t data_len,
                             em_st_header *out);
void em_st_header_free(em_st_header *h);
/* Frees n metadata pairs and both arrays (NULL arrays are fine). */
void em_st_meta_free(char **keys, char **values, int n);

#endif
