/* The safetensors file format: the header built in the reference implementation's order
 * (through ember's JSON, io/json_internal.h) and read back strictly by the bounded header reader
 * (io/safetensors_header.h), full validation, names found through a hash table, and atomic
 * writes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/json_internal.h"
#include "io/name_table.h"
#include "io/regular_file.h"
#include "io/safetensors.h"
#include "io/safetensors_header.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian; this host would need byte swapping");

#define MAX_HEADER_BYTES 100000000u

/* ---- writing ---- */

typedef struct {
    const em_st_entry *e;
    const em_st_dtype *dt;
    uint64_t nbytes;
} save_item;

static int cmp_save(const void *a, const void *b)
{
    const save_item *x = a, *y = b;
    if (x->dt->rank != y->dt->rank)
        return y->dt->rank - x->dt->rank;
    return strcmp(x->e->name, y->e->name);
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const em_st_meta *)a)->key, ((const em_st_meta *)b)->key);
}

/* n names, each stride bytes after the last (the name fields of an array of structs), into a
 * new table mapping each to its position; NULL with an error naming a name given twice, or
 * when out of memory. */
static em_name_table *index_names(const char *fn, const char *const *names, size_t stride, int n)
{
    em_name_table *t = em_name_table_new((size_t)n);
    for (int i = 0; t && i < n; i++) {
        const char *name = *(const char *const *)((const char *)names + (size_t)i * stride);
        int added = em_name_table_add(t, name, i, NULL);
        if (added <= 0) {
            em_name_table_free(t);
            t = NULL;
            if (added == 0)
                em_set_error(EM_ERR_ARG, "%s: name '%s' appears twice", fn, name);
        }
    }
    if (!t && !em_has_error())
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    return t;
}

/* Check the arguments before anything touches the disk (UTF-8 is checked as the header is
 * built, metadata keys given twice once they are sorted). */
static em_status check_save_args(const char *path, const em_st_entry *tensors, int n,
                                 const em_st_meta *meta, int n_meta)
{
    if (!path || n < 0 || n_meta < 0 || (n && !tensors) || (n_meta && !meta))
        return em_set_error(EM_ERR_ARG, "em_safetensors_save: NULL path or bad counts (%d tensors,"
                            " %d metadata entries)", n, n_meta);
    for (int i = 0; i < n; i++) {
        const char *name = tensors[i].name;
        if (!name || !*name || !tensors[i].tensor)
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: entry %d has no name or tensor",
                                i);
        if (strcmp(name, "__metadata__") == 0)
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: entry %d: invalid name '%s'",
                                i, name);
        if (!em_st_dtype_of(tensors[i].tensor->dtype))
            return em_set_error(EM_ERR_UNSUPPORTED, "em_safetensors_save: tensor '%s' has dtype "
                                "%s", name, em_dtype_name(tensors[i].tensor->dtype));
    }
    for (int i = 0; i < n_meta; i++)
        if (!meta[i].key || !meta[i].value)
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata entry %d is NULL", i);
    em_name_table *names = index_names("em_safetensors_save", n ? &tensors[0].name : NULL,
                                       sizeof *tensors, n);
    em_name_table_free(names);
    return names ? EM_OK : em_error_status();
}

/* The sorted metadata's keys, each once. */
static em_status check_meta_keys(const em_st_meta *sorted, int n_meta)
{
    for (int i = 1; i < n_meta; i++)
        if (strcmp(sorted[i - 1].key, sorted[i].key) == 0)
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata key '%s' appears "
                                "twice", sorted[i].key);
    return EM_OK;
}

/* The header object for items (already in file order) and sorted metadata: jansson keeps the
 * insertion order, so the bytes are the reference implementation's. */
static em_status build_header(const save_item *items, int n, const em_st_meta *meta, int n_meta,
                              json_t **out)
{
    json_t *root = json_object(), *m = n_meta ? json_object() : NULL;
    bool ok = root && (!n_meta || (m && json_object_set_new(root, "__metadata__", m) == 0));
    for (int i = 0; ok && i < n_meta; i++)
        if (json_object_set_new(m, meta[i].key, json_string(meta[i].value)) != 0) {
            json_decref(root);
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata entry '%s' is not "
                                "UTF-8", meta[i].key);
        }
    uint64_t offset = 0;
    for (int i = 0; ok && i < n; i++) {
        const em_tensor *t = items[i].e->tensor;
        json_t *shape = json_array();
        for (int d = 0; shape && d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *entry = json_pack("{s:s, s:o, s:[I,I]}", "dtype", items[i].dt->name, "shape",
                                  shape, "data_offsets", (json_int_t)offset,
                                  (json_int_t)(offset + items[i].nbytes));
        offset += items[i].nbytes;
        if (entry && json_object_set_new(root, items[i].e->name, entry) != 0) {
            json_decref(root);
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: name '%s' is not UTF-8",
                                items[i].e->name);
        }
        ok = entry != NULL;
    }
    if (!ok) {
        json_decref(root);
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_save: out of memory");
    }
    *out = root;
    return EM_OK;
}

/* The header's JSON padded with spaces to a multiple of 8 bytes; a new string or NULL. */
static char *header_text(const json_t *root, size_t *len)
{
    char *text = em_json_dump(root);
    size_t n = text ? strlen(text) : 0, padded = (n + 7) / 8 * 8;
    char *p = text ? realloc(text, padded + 1) : NULL;
    if (!p) {
        free(text);
        return NULL;
    }
    memset(p + n, ' ', padded - n);
    p[padded] = '\0';
    *len = padded;
    return p;
}

static em_status write_tensor_data(FILE *f, const char *path, const save_item *it)
{
    void *buf = malloc(it->nbytes ? it->nbytes : 1);
    if (!buf)
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_save: out of memory for '%s'",
                            it->e->name);
    em_status st = EM_OK;
    if (em_copy_to_host(it->e->tensor, it->e->tensor->dtype, buf) != EM_OK)
        st = em_has_error() ? em_error_status()
                            : em_set_error(EM_ERR_IO, "em_safetensors_save: cannot read tensor "
                                           "'%s'", it->e->name);
    else if (fwrite(buf, 1, it->nbytes, f) != it->nbytes)
        st = em_set_error(EM_ERR_IO, "em_safetensors_save: cannot write '%s': %s", path,
                          strerror(errno));
    free(buf);
    return st;
}

/* The header length (8 bytes, little-endian), the header, then each tensor's bytes. */
static em_status write_file(const char *path, const char *hdr, size_t hdr_len,
                            const save_item *items, int n)
{
    em_atomic_file *af = em_atomic_file_new(path);
    if (!af)
        return em_error_status();
    FILE *f = em_atomic_file_stream(af);
    unsigned char len_le[8];
    for (int k = 0; k < 8; k++)
        len_le[k] = (unsigned char)((uint64_t)hdr_len >> (8 * k));
    em_status st = EM_OK;
    if (fwrite(len_le, 1, 8, f) != 8 || fwrite(hdr, 1, hdr_len, f) != hdr_len)
        st = em_set_error(EM_ERR_IO, "em_safetensors_save: cannot write '%s': %s", path,
                          strerror(errno));
    for (int i = 0; st == EM_OK && i < n; i++)
        st = write_tensor_data(f, path, &items[i]);
    if (st == EM_OK)
        return em_atomic_file_commit(af);
    em_atomic_file_free(af);
    return st;
}

em_status em_safetensors_save(const char *path, const em_st_entry *tensors, int n,
                              const em_st_meta *meta, int n_meta)
{
    em_status st = check_save_args(path, tensors, n, meta, n_meta);
    if (st != EM_OK)
        return st;
    save_item *items = malloc(((size_t)n + 1) * sizeof *items);
    em_st_meta *sorted_meta = malloc(((size_t)n_meta + 1) * sizeof *sorted_meta);
    if (!items || !sorted_meta)
        st = em_set_error(EM_ERR_MEMORY, "em_safetensors_save: out of memory");
    for (int i = 0; st == EM_OK && i < n; i++) {
        const em_tensor *t = tensors[i].tensor;
        int64_t nbytes;
        if (!em_size_mul(em_numel(t), (int64_t)em_dtype_size(t->dtype), &nbytes))
            st = em_set_error(EM_ERR_ARG, "em_safetensors_save: tensor '%s' is too large",
                              tensors[i].name);
        items[i] = (save_item){&tensors[i], em_st_dtype_of(t->dtype), (uint64_t)nbytes};
    }
    json_t *root = NULL;
    char *hdr = NULL;
    size_t hdr_len = 0;
    if (st == EM_OK) {
        qsort(items, (size_t)n, sizeof *items, cmp_save);
        if (n_meta)
            memcpy(sorted_meta, meta, (size_t)n_meta * sizeof *meta);
        qsort(sorted_meta, (size_t)n_meta, sizeof *sorted_meta, cmp_meta);
        st = check_meta_keys(sorted_meta, n_meta);
    }
    if (st == EM_OK)
        st = build_header(items, n, sorted_meta, n_meta, &root);
    if (st == EM_OK && !(hdr = header_text(root, &hdr_len)))
        st = em_set_error(EM_ERR_MEMORY, "em_safetensors_save: out of memory");
    if (st == EM_OK)
        st = write_file(path, hdr, hdr_len, items, n);
    json_decref(root);
    free(hdr);
    free(items);
    free(sorted_meta);
    return st;
}

/* ---- reading ---- */

/* A loaded file and what only this file writes: its names hashed (NULL: searched in order). */
typedef struct {
    em_safetensors st; /* first: the caller's pointer is the box's */
    em_name_table *name_index;
} loaded_file;

static loaded_file *box_of(const em_safetensors *st)
{
    return (loaded_file *)st;
}

void em_safetensors_free(em_safetensors *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_tensors; i++) {
        free(st->names[i]);
        em_release(st->tensors[i]);
    }
    free(st->names);
    free(st->tensors);
    em_st_meta_free(st->meta_keys, st->meta_values, st->n_meta);
    em_name_table_free(box_of(st)->name_index);
    free(box_of(st));
}

/* Read the header of f (size file_size) into *hdr and *hdr_len. */
static em_status read_header(const char *path, FILE *f, uint64_t file_size, char **hdr,
                             uint64_t *hdr_len)
{
    unsigned char len_le[8];
    if (file_size < 8 || fread(len_le, 1, 8, f) != 8)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': file too short for a header "
                            "(%llu bytes)", path, (unsigned long long)file_size);
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--)
        n = (n << 8) | len_le[k];
    if (n > MAX_HEADER_BYTES || n > file_size - 8)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': header length %llu does not "
                            "fit the file's %llu bytes", path, (unsigned long long)n,
                            (unsigned long long)file_size);
    char *h = malloc(n + 1);
    if (!h)
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    if (fread(h, 1, n, f) != n) {
        free(h);
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': cannot read the header: %s",
                            path, strerror(errno));
    }
    *hdr = h;
    *hdr_len = n;
    return EM_OK;
}

/* The header's metadata into st (its strings taken). */
static void take_metadata(em_st_header *h, em_safetensors *st)
{
    st->meta_keys = h->meta_keys;
    st->meta_values = h->meta_values;
    st->n_meta = h->n_meta;
    h->meta_keys = h->meta_values = NULL;
    h->n_meta = 0;
}

/* The header's tensors into st (their names taken), each tensor's bytes read from f (positioned
 * at the data section), and the names' index. */
static em_status read_tensors(const char *path, FILE *f, em_st_header *h, em_safetensors *st)
{
    int n = h->n_items;
    st->names = calloc((size_t)n + 1, sizeof *st->names);
    st->tensors = calloc((size_t)n + 1, sizeof *st->tensors);
    if (!st->names || !st->tensors)
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    for (int i = 0; i < n; i++) {
        const em_st_item *it = &h->items[i];
        em_tensor *t = em_empty(it->shape, it->dt->dtype);
        if (!t)
            return em_error_status();
        st->tensors[i] = t;
        st->names[i] = it->name;
        h->items[i].name = NULL;
        st->n_tensors = i + 1;
        size_t nbytes = (size_t)(it->end - it->begin);
        if (fread(em_data_ptr(t), 1, nbytes, f) != nbytes)
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': cannot read tensor '%s': "
                                "%s", path, st->names[i], feof(f) ? "file ended early"
                                                                  : strerror(errno));
    }
    loaded_file *box = box_of(st);
    box->name_index = index_names("em_safetensors_load", (const char *const *)st->names,
                                  sizeof *st->names, n);
    return box->name_index ? EM_OK : em_error_status();
}

/* The file into a new *out: its metadata, and its tensors when with_tensors (the header is
 * checked whole either way). */
static em_status load(const char *path, bool with_tensors, em_safetensors **out)
{
    if (!path || !out)
        return em_set_error(EM_ERR_ARG, "em_safetensors_load: NULL path or output");
    int64_t size = 0;
    FILE *f = em_fopen_regular("em_safetensors_load", path, &size);
    if (!f)
        return em_error_status();
    char *hdr = NULL;
    uint64_t hdr_len = 0;
    em_st_header h = {0};
    em_safetensors *st = NULL;
    em_status rc = read_header(path, f, (uint64_t)size, &hdr, &hdr_len);
    if (rc == EM_OK)
        rc = em_st_header_parse(path, hdr, hdr_len, (uint64_t)size - 8 - hdr_len, &h);
    free(hdr);
    loaded_file *box = rc == EM_OK ? calloc(1, sizeof *box) : NULL;
    if (box)
        st = &box->st;
    else if (rc == EM_OK)
        rc = em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    if (rc == EM_OK)
        take_metadata(&h, st);
    if (rc == EM_OK && with_tensors)
        rc = read_tensors(path, f, &h, st);
    fclose(f);
    em_st_header_free(&h);
    if (rc != EM_OK) {
        em_safetensors_free(st);
        return rc;
    }
    *out = st;
    return EM_OK;
}

em_status em_safetensors_load(const char *path, em_safetensors **out)
{
    return load(path, true, out);
}

em_status em_safetensors_load_meta(const char *path, em_safetensors **out)
{
    return load(path, false, out);
}

em_tensor *em_safetensors_get(const em_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    int64_t i;
    const em_name_table *index = box_of(st)->name_index;
    if (index)
        return em_name_table_get(index, name, &i) ? st->tensors[i] : NULL;
    for (i = 0; i < st->n_tensors; i++)
        if (strcmp(st->names[i], name) == 0)
            return st->tensors[i];
    return NULL;
}

static int cmp_key(const void *key, const void *entry)
{
    return strcmp(key, *(char *const *)entry);
}

const char *em_safetensors_meta(const em_safetensors *st, const char *key)
{
    if (!st || !key || !st->n_meta)
        return NULL;
    char **at = bsearch(key, st->meta_keys, (size_t)st->n_meta, sizeof *st->meta_keys, cmp_key);
    return at ? st->meta_values[at - st->meta_keys] : NULL;
}

bool em_safetensors_meta_u64(const em_safetensors *st, const char *key, uint64_t *v)
{
    const char *s = em_safetensors_meta(st, key);
    char *end = NULL;
    if (s)
        *v = strtoull(s, &end, 10);
    return s && end != s && !*end;
}

em_status em_safetensors_load_into(const char *path, const em_st_entry *dst, int n)
{
    if (n < 0 || (n && !dst))
        return em_set_error(EM_ERR_ARG, "em_safetensors_load_into: bad destination list");
    for (int i = 0; i < n; i++)
        if (!dst[i].name || !dst[i].tensor)
            return em_set_error(EM_ERR_ARG, "em_safetensors_load_into: entry %d has no name or "
                                "tensor", i);
    em_safetensors *st = NULL;
    em_status rc = em_safetensors_load(path, &st);
    for (int i = 0; rc == EM_OK && i < n; i++) {
        const em_tensor *src = em_safetensors_get(st, dst[i].name);
        if (!src) {
            rc = em_set_error(EM_ERR_IO, "em_safetensors_load_into: '%s' has no tensor '%s'",
                              path, dst[i].name);
        } else if (!em_same_shape(src, dst[i].tensor)) {
            char a[96], b[96];
            rc = em_set_error(EM_ERR_ARG, "em_safetensors_load_into: '%s': tensor '%s' is %s in "
                              "the file but %s here", path, dst[i].name,
                              em_shape_str(src, a, sizeof a),
                              em_shape_str(dst[i].tensor, b, sizeof b));
        }
    }
    for (int i = 0; rc == EM_OK && i < n; i++)
        rc = em_copy_(dst[i].tensor, em_safetensors_get(st, dst[i].name));
    em_safetensors_free(st);
    return rc;
}
