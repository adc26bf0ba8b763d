/* The safetensors file format: the header built in the reference implementation's order and
 * parsed back strictly (both through ember's JSON, io/json_internal.h), full validation, and
 * atomic writes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/json_internal.h"
#include "io/regular_file.h"
#include "io/safetensors.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian; this host would need byte swapping");

#define MAX_HEADER_BYTES 100000000u

/* ---- dtypes: the file's names and the reference implementation's order ---- */

typedef struct {
    const char *name;
    int rank;       /* position in the reference dtype enum (sorts by alignment) */
    em_dtype dtype; /* EM_NDTYPES where ember has no such dtype */
    size_t size;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"BOOL", 0, EM_BOOL, 1},        {"U8", 1, EM_U8, 1},
    {"I8", 2, EM_I8, 1},            {"F8_E5M2", 3, EM_NDTYPES, 1},
    {"F8_E4M3", 4, EM_NDTYPES, 1},  {"I16", 5, EM_NDTYPES, 2},
    {"U16", 6, EM_NDTYPES, 2},      {"F16", 7, EM_F16, 2},
    {"BF16", 8, EM_BF16, 2},        {"I32", 9, EM_I32, 4},
    {"U32", 10, EM_NDTYPES, 4},     {"F32", 11, EM_F32, 4},
    {"F64", 12, EM_F64, 8},         {"I64", 13, EM_I64, 8},
    {"U64", 14, EM_NDTYPES, 8},
};
#define N_ST_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static const st_dtype *dtype_of(em_dtype dt)
{
    for (int k = 0; k < N_ST_DTYPES; k++)
        if (st_dtypes[k].dtype == dt)
            return &st_dtypes[k];
    return NULL;
}

static const st_dtype *dtype_named(const char *name)
{
    for (int k = 0; k < N_ST_DTYPES; k++)
        if (strcmp(st_dtypes[k].name, name) == 0)
            return &st_dtypes[k];
    return NULL;
}

/* ---- writing ---- */

typedef struct {
    const em_st_entry *e;
    const st_dtype *dt;
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

/* Check the arguments before anything touches the disk (UTF-8 is checked as the header is
 * built). */
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
        if (!dtype_of(tensors[i].tensor->dtype))
            return em_set_error(EM_ERR_UNSUPPORTED, "em_safetensors_save: tensor '%s' has dtype "
                                "%s", name, em_dtype_name(tensors[i].tensor->dtype));
        for (int j = 0; j < i; j++)
            if (strcmp(tensors[j].name, name) == 0)
                return em_set_error(EM_ERR_ARG, "em_safetensors_save: name '%s' appears twice",
                                    name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata entry %d is NULL", i);
        for (int j = 0; j < i; j++)
            if (strcmp(meta[j].key, meta[i].key) == 0)
                return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata key '%s' appears "
                                    "twice", meta[i].key);
    }
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
        items[i] = (save_item){&tensors[i], dtype_of(t->dtype), (uint64_t)nbytes};
    }
    json_t *root = NULL;
    char *hdr = NULL;
    size_t hdr_len = 0;
    if (st == EM_OK) {
        qsort(items, (size_t)n, sizeof *items, cmp_save);
        if (n_meta)
            memcpy(sorted_meta, meta, (size_t)n_meta * sizeof *meta);
        qsort(sorted_meta, (size_t)n_meta, sizeof *sorted_meta, cmp_meta);
        st = build_header(items, n, sorted_meta, n_meta, &root);
    }
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

typedef struct {
    const char *name;
    const st_dtype *dt;
    em_shape shape;
    uint64_t begin, end;
} load_item;

static int cmp_load(const void *a, const void *b)
{
    const load_item *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* A JSON integer >= 0 as u64; false for anything else (reals, negatives, other types). */
static bool json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Fill item from the header entry for one tensor; an error naming the problem otherwise. */
static em_status parse_tensor_info(const char *path, const char *name, const json_t *v,
                                   load_item *item)
{
    const json_t *dtype = NULL, *shape = NULL, *offs = NULL;
    if (!json_is_object(v))
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': entry '%s' is not an object",
                            path, name);
    const char *k;
    const json_t *field;
    json_object_foreach((json_t *)v, k, field) {
        const json_t **slot = strcmp(k, "dtype") == 0 ? &dtype : strcmp(k, "shape") == 0 ? &shape
                            : strcmp(k, "data_offsets") == 0 ? &offs : NULL;
        if (!slot)
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' has unknown "
                                "field '%s'", path, name, k);
        *slot = field;
    }
    if (!json_is_string(dtype) || !json_is_array(shape) || json_array_size(offs) != 2 ||
        !json_u64(json_array_get(offs, 0), &item->begin) ||
        !json_u64(json_array_get(offs, 1), &item->end))
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' needs a dtype "
                            "string, a shape array and two data_offsets", path, name);
    item->name = name;
    item->dt = dtype_named(json_string_value(dtype));
    if (!item->dt)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' has unknown "
                            "dtype '%s'", path, name, json_string_value(dtype));
    if (item->dt->dtype == EM_NDTYPES)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_safetensors_load: '%s': tensor '%s' has "
                            "dtype %s, which ember does not support", path, name,
                            item->dt->name);
    if (json_array_size(shape) > EM_MAX_DIMS)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_safetensors_load: '%s': tensor '%s' has %zu "
                            "dims (at most %d)", path, name, json_array_size(shape), EM_MAX_DIMS);
    item->shape.ndim = (int)json_array_size(shape);
    for (int d = 0; d < item->shape.ndim; d++) {
        uint64_t dim;
        if (!json_u64(json_array_get(shape, (size_t)d), &dim))
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' has a shape "
                                "entry that is not a non-negative integer", path, name);
        item->shape.d[d] = (int64_t)dim;
    }
    char sh[160];
    int64_t numel = em_shape_numel(&item->shape), need;
    if (numel < 0 || !em_size_mul(numel, (int64_t)item->dt->size, &need))
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s': shape %s of %s "
                            "overflows a size", path, name,
                            em_shape_fmt(&item->shape, sh, sizeof sh), item->dt->name);
    if (item->end < item->begin || item->end - item->begin != (uint64_t)need)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s': dtype %s and its "
                            "shape need %lld bytes but data_offsets [%llu, %llu] disagree", path,
                            name, item->dt->name, (long long)need,
                            (unsigned long long)item->begin, (unsigned long long)item->end);
    return EM_OK;
}

/* Check the offsets tile [0, data_len) exactly, in order. */
static em_status check_layout(const char *path, load_item *items, int n, uint64_t data_len)
{
    qsort(items, (size_t)n, sizeof *items, cmp_load);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].begin != at)
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' %s at byte "
                                "%llu of the data section, where byte %llu was expected", path,
                                items[i].name, items[i].begin < at ? "overlaps another" : "leaves "
                                "a gap", (unsigned long long)items[i].begin,
                                (unsigned long long)at);
        at = items[i].end;
    }
    if (at != data_len)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': the tensors cover %llu bytes "
                            "but the data section holds %llu (truncated or corrupt file)", path,
                            (unsigned long long)at, (unsigned long long)data_len);
    return EM_OK;
}

void em_safetensors_free(em_safetensors *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_tensors; i++) {
        free(st->names[i]);
        em_release(st->tensors[i]);
    }
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->names);
    free(st->tensors);
    free(st->meta_keys);
    free(st->meta_values);
    free(st);
}

static int cmp_str_pairs(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Copy the header's metadata object into st (keys sorted). */
static em_status take_metadata(const char *path, const json_t *m, em_safetensors *st)
{
    if (json_is_null(m))
        return EM_OK;
    if (!json_is_object(m))
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': __metadata__ is not an "
                            "object", path);
    size_t n = json_object_size(m);
    const char **pairs = malloc((n + 1) * 2 * sizeof *pairs);
    st->meta_keys = malloc((n + 1) * sizeof(char *));
    st->meta_values = malloc((n + 1) * sizeof(char *));
    if (!pairs || !st->meta_keys || !st->meta_values) {
        free(pairs);
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    }
    size_t i = 0;
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)m, key, value) {
        if (!json_is_string(value)) {
            free(pairs);
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': metadata '%s' is not a "
                                "string", path, key);
        }
        pairs[2 * i] = key;
        pairs[2 * i + 1] = json_string_value(value);
        i++;
    }
    qsort(pairs, n, 2 * sizeof *pairs, cmp_str_pairs);
    for (i = 0; i < n; i++) {
        st->meta_keys[i] = strdup(pairs[2 * i]);
        st->meta_values[i] = strdup(pairs[2 * i + 1]);
        st->n_meta = (int)i + 1;
        if (!st->meta_keys[i] || !st->meta_values[i]) {
            free(pairs);
            return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
        }
    }
    free(pairs);
    return EM_OK;
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

/* Parse and validate the header; items point into root's strings. */
static em_status parse_header(const char *path, const char *h, uint64_t n, uint64_t data_len,
                              json_t **root, load_item **items_out, int *n_items,
                              const json_t **meta)
{
    *root = em_json_parse("em_safetensors_load", path, h, n);
    if (!*root)
        return em_error_status();
    if (!json_is_object(*root))
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': the header is not a JSON "
                            "object", path);
    load_item *items = calloc(json_object_size(*root) + 1, sizeof *items);
    if (!items)
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    int k = 0;
    em_status st = EM_OK;
    const char *key;
    const json_t *value;
    json_object_foreach(*root, key, value) {
        if (strcmp(key, "__metadata__") == 0)
            *meta = value;
        else if ((st = parse_tensor_info(path, key, value, &items[k++])) != EM_OK)
            break;
    }
    if (st == EM_OK)
        st = check_layout(path, items, k, data_len);
    if (st != EM_OK) {
        free(items);
        return st;
    }
    *items_out = items;
    *n_items = k;
    return EM_OK;
}

/* Read each tensor's bytes (items sorted by offset; f positioned at the data section). */
static em_status read_tensors(const char *path, FILE *f, const load_item *items, int n,
                              em_safetensors *st)
{
    st->names = calloc((size_t)n + 1, sizeof *st->names);
    st->tensors = calloc((size_t)n + 1, sizeof *st->tensors);
    if (!st->names || !st->tensors)
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    for (int i = 0; i < n; i++) {
        em_tensor *t = em_empty(items[i].shape, items[i].dt->dtype);
        if (!t)
            return em_error_status();
        st->tensors[i] = t;
        st->names[i] = strdup(items[i].name);
        st->n_tensors = i + 1;
        if (!st->names[i])
            return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
        size_t nbytes = (size_t)(items[i].end - items[i].begin);
        if (fread(em_data_ptr(t), 1, nbytes, f) != nbytes)
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': cannot read tensor '%s': "
                                "%s", path, items[i].name, feof(f) ? "file ended early"
                                                                   : strerror(errno));
    }
    return EM_OK;
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
    json_t *root = NULL;
    load_item *items = NULL;
    int n_items = 0;
    const json_t *meta = NULL;
    em_safetensors *st = NULL;
    em_status rc = read_header(path, f, (uint64_t)size, &hdr, &hdr_len);
    if (rc == EM_OK)
        rc = parse_header(path, hdr, hdr_len, (uint64_t)size - 8 - hdr_len, &root, &items,
                          &n_items, &meta);
    if (rc == EM_OK && !(st = calloc(1, sizeof *st)))
        rc = em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    if (rc == EM_OK && meta)
        rc = take_metadata(path, meta, st);
    if (rc == EM_OK && with_tensors)
        rc = read_tensors(path, f, items, n_items, st);
    fclose(f);
    free(items);
    json_decref(root);
    free(hdr);
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
    for (int i = 0; st && name && i < st->n_tensors; i++)
        if (strcmp(st->names[i], name) == 0)
            return st->tensors[i];
    return NULL;
}

const char *em_safetensors_meta(const em_safetensors *st, const char *key)
{
    for (int i = 0; st && key && i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0)
            return st->meta_values[i];
    return NULL;
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
