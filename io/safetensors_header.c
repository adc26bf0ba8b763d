/* The safetensors header read token by token (see io/safetensors_header.h): the top-level
 * object's keys are tensor names (unique: a name table) or __metadata__; each tensor's object
 * has exactly dtype, shape and data_offsets; nothing nests deeper than the shape's array. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_reader.h"
#include "io/name_table.h"
#include "io/safetensors_header.h"

static const em_st_dtype st_dtypes[] = {
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

const em_st_dtype *em_st_dtype_of(em_dtype dt)
{
    for (int k = 0; k < N_ST_DTYPES; k++)
        if (st_dtypes[k].dtype == dt)
            return &st_dtypes[k];
    return NULL;
}

const em_st_dtype *em_st_dtype_named(const char *name)
{
    for (int k = 0; k < N_ST_DTYPES; k++)
        if (strcmp(st_dtypes[k].name, name) == 0)
            return &st_dtypes[k];
    return NULL;
}

#define FN "em_safetensors_load"

/* The parse: the reader, the header being filled, the names seen. */
typedef struct {
    const char *path;
    em_json_reader r;
    em_st_header *h;
    int cap_items, cap_meta;
    em_name_table *names;
} parse;

/* Status of a failed step: the reader's or the caller's error (an allocation recorded none). */
static em_status failed(void)
{
    return em_has_error() ? em_error_status()
                          : em_set_error(EM_ERR_MEMORY, FN ": out of memory");
}

/* Room for one more entry in *array of *cap (each size bytes), grown by half. */
static bool room(void **array, int *cap, int count, size_t size)
{
    if (count < *cap)
        return true;
    if (*cap > (INT32_MAX - 16) / 3 * 2)
        return false;
    int more = *cap + *cap / 2 + 16;
    void *a = realloc(*array, (size_t)more * size);
    if (!a)
        return false;
    *array = a;
    *cap = more;
    return true;
}

/* The next token must be `want`; else the error names the tensor. */
static bool expect(parse *p, em_json_token want, const char *name)
{
    em_json_token t = em_json_next(&p->r);
    if (t == want)
        return true;
    if (t != EM_JSON_ERROR)
        em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' needs a dtype string, a shape array and "
                     "two data_offsets", p->path, name);
    return false;
}

/* The shape array's entries (its '[' read). */
static em_status read_shape(parse *p, em_st_item *it)
{
    for (;;) {
        em_json_token t = em_json_next(&p->r);
        if (t == EM_JSON_ARRAY_END)
            return EM_OK;
        if (t == EM_JSON_ERROR)
            return failed();
        if (t != EM_JSON_INTEGER || p->r.integer < 0)
            return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' has a shape entry that is not "
                                "a non-negative integer", p->path, it->name);
        if (it->shape.ndim == EM_MAX_DIMS)
            return em_set_error(EM_ERR_UNSUPPORTED, FN ": '%s': tensor '%s' has more than %d dims",
                                p->path, it->name, EM_MAX_DIMS);
        it->shape.d[it->shape.ndim++] = p->r.integer;
    }
}

/* data_offsets: two integers >= 0 (its '[' read). */
static em_status read_offsets(parse *p, em_st_item *it)
{
    uint64_t v[2];
    for (int k = 0; k < 2; k++) {
        if (!expect(p, EM_JSON_INTEGER, it->name))
            return failed();
        if (p->r.integer < 0)
            return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' needs a dtype string, a shape "
                                "array and two data_offsets", p->path, it->name);
        v[k] = (uint64_t)p->r.integer;
    }
    if (!expect(p, EM_JSON_ARRAY_END, it->name))
        return failed();
    it->begin = v[0];
    it->end = v[1];
    return EM_OK;
}

/* The dtype's name: known, and one ember has. */
static em_status read_dtype(parse *p, em_st_item *it)
{
    if (!expect(p, EM_JSON_STRING, it->name))
        return failed();
    it->dt = em_st_dtype_named(p->r.str);
    if (!it->dt)
        return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' has unknown dtype '%.32s'",
                            p->path, it->name, p->r.str);
    if (it->dt->dtype == EM_NDTYPES)
        return em_set_error(EM_ERR_UNSUPPORTED, FN ": '%s': tensor '%s' has dtype %s, which "
                            "ember does not support", p->path, it->name, it->dt->name);
    return EM_OK;
}

/* What the dtype and shape need against what the offsets give. */
static em_status check_item(parse *p, const em_st_item *it)
{
    char sh[160];
    int64_t numel = em_shape_numel(&it->shape), need;
    if (numel < 0 || !em_size_mul(numel, (int64_t)it->dt->size, &need))
        return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s': shape %s of %s overflows a size",
                            p->path, it->name, em_shape_fmt(&it->shape, sh, sizeof sh),
                            it->dt->name);
    if (it->end < it->begin || it->end - it->begin != (uint64_t)need)
        return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s': dtype %s and its shape need %lld "
                            "bytes but data_offsets [%llu, %llu] disagree", p->path, it->name,
                            it->dt->name, (long long)need, (unsigned long long)it->begin,
                            (unsigned long long)it->end);
    return EM_OK;
}

/* One tensor's object (its name read, the item started). */
static em_status read_tensor(parse *p, em_st_item *it)
{
    em_json_token t = em_json_next(&p->r);
    if (t != EM_JSON_OBJECT)
        return t == EM_JSON_ERROR ? failed()
                                  : em_set_error(EM_ERR_IO, FN ": '%s': entry '%s' is not an "
                                                 "object", p->path, it->name);
    bool seen[3] = {false, false, false}; /* dtype, shape, data_offsets */
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    while ((t = em_json_next(&p->r)) == EM_JSON_KEY) {
        int f = 0;
        while (f < 3 && strcmp(p->r.str, fields[f]))
            f++;
        if (f == 3)
            return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' has unknown field '%.64s'",
                                p->path, it->name, p->r.str);
        if (seen[f]) {
            em_json_reader_fail(&p->r, "duplicate object key");
            return failed();
        }
        seen[f] = true;
        em_status st = f == 0 ? read_dtype(p, it)
                       : !expect(p, EM_JSON_ARRAY, it->name) ? failed()
                       : f == 1 ? read_shape(p, it) : read_offsets(p, it);
        if (st != EM_OK)
            return st;
    }
    if (t == EM_JSON_ERROR)
        return failed();
    if (!seen[0] || !seen[1] || !seen[2])
        return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' needs a dtype string, a shape "
                            "array and two data_offsets", p->path, it->name);
    return check_item(p, it);
}

/* Room for one more metadata pair: the keys' and values' arrays grown together. */
static bool meta_room(parse *p)
{
    em_st_header *h = p->h;
    int cap = p->cap_meta;
    if (!room((void **)&h->meta_keys, &cap, h->n_meta, sizeof(char *)))
        return false;
    if (cap == p->cap_meta)
        return true;
    char **values = realloc(h->meta_values, (size_t)cap * sizeof(char *));
    if (!values)
        return false;
    h->meta_values = values;
    p->cap_meta = cap;
    return true;
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the metadata by key (the values alongside); a key given twice is an error. */
static em_status sort_metadata(parse *p)
{
    em_st_header *h = p->h;
    char **pairs = malloc(((size_t)h->n_meta + 1) * 2 * sizeof *pairs);
    if (!pairs)
        return failed();
    for (int i = 0; i < h->n_meta; i++) {
        pairs[2 * i] = h->meta_keys[i];
        pairs[2 * i + 1] = h->meta_values[i];
    }
    qsort(pairs, (size_t)h->n_meta, 2 * sizeof *pairs, cmp_keys);
    for (int i = 0; i < h->n_meta; i++) {
        h->meta_keys[i] = pairs[2 * i];
        h->meta_values[i] = pairs[2 * i + 1];
    }
    free(pairs);
    for (int i = 1; i < h->n_meta; i++)
        if (!strcmp(h->meta_keys[i - 1], h->meta_keys[i]))
            return em_set_error(EM_ERR_IO, FN ": '%s': corrupt JSON: duplicate object key '%.64s' "
                                "in __metadata__", p->path, h->meta_keys[i]);
    return EM_OK;
}

/* __metadata__: an object of strings, or null (its key read). */
static em_status read_metadata(parse *p)
{
    em_json_token t = em_json_next(&p->r);
    if (t == EM_JSON_NULL)
        return EM_OK;
    if (t != EM_JSON_OBJECT)
        return t == EM_JSON_ERROR ? failed()
                                  : em_set_error(EM_ERR_IO, FN ": '%s': __metadata__ is not an "
                                                 "object", p->path);
    em_st_header *h = p->h;
    while ((t = em_json_next(&p->r)) == EM_JSON_KEY) {
        char *key;
        if (!meta_room(p) || !(key = strdup(p->r.str)))
            return failed();
        h->meta_keys[h->n_meta] = key;
        h->meta_values[h->n_meta++] = NULL;
        if ((t = em_json_next(&p->r)) != EM_JSON_STRING)
            return t == EM_JSON_ERROR ? failed()
                                      : em_set_error(EM_ERR_IO, FN ": '%s': metadata '%.64s' is "
                                                     "not a string", p->path, key);
        if (!(h->meta_values[h->n_meta - 1] = strdup(p->r.str)))
            return failed();
    }
    return t == EM_JSON_OBJECT_END ? sort_metadata(p) : failed();
}

/* One key of the top-level object (a tensor's name, or __metadata__) and its value. */
static em_status read_entry(parse *p)
{
    static const char meta_key[] = "__metadata__";
    bool meta = !strcmp(p->r.str, meta_key);
    em_st_header *h = p->h;
    em_st_item *it = NULL;
    if (!meta) {
        if (!room((void **)&h->items, &p->cap_items, h->n_items, sizeof *h->items))
            return failed();
        it = &h->items[h->n_items];
        *it = (em_st_item){.name = strdup(p->r.str)};
        if (!it->name)
            return failed();
        h->n_items++;
    }
    int added = em_name_table_add(p->names, meta ? meta_key : it->name, 0, NULL);
    if (added == 0)
        em_json_reader_fail(&p->r, "duplicate object key");
    if (added <= 0)
        return failed();
    return meta ? read_metadata(p) : read_tensor(p, it);
}

static int cmp_offsets(const void *a, const void *b)
{
    const em_st_item *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* The offsets tile [0, data_len) exactly, in order (items sorted here). */
static em_status check_layout(const char *path, em_st_item *items, int n, uint64_t data_len)
{
    if (n > 0)
        qsort(items, (size_t)n, sizeof *items, cmp_offsets);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].begin != at)
            return em_set_error(EM_ERR_IO, FN ": '%s': tensor '%s' %s at byte %llu of the data "
                                "section, where byte %llu was expected", path, items[i].name,
                                items[i].begin < at ? "overlaps another" : "leaves a gap",
                                (unsigned long long)items[i].begin, (unsigned long long)at);
        at = items[i].end;
    }
    if (at != data_len)
        return em_set_error(EM_ERR_IO, FN ": '%s': the tensors cover %llu bytes but the data "
                            "section holds %llu (truncated or corrupt file)", path,
                            (unsigned long long)at, (unsigned long long)data_len);
    return EM_OK;
}

void em_st_meta_free(char **keys, char **values, int n)
{
    for (int i = 0; i < n; i++) {
        free(keys[i]);
        free(values[i]);
    }
    free(keys);
    free(values);
}

void em_st_header_free(em_st_header *h)
{
    for (int i = 0; i < h->n_items; i++)
        free(h->items[i].name);
    free(h->items);
    em_st_meta_free(h->meta_keys, h->meta_values, h->n_meta);
    *h = (em_st_header){0};
}

em_status em_st_header_parse(const char *path, const char *text, size_t n, uint64_t data_len,
                             em_st_header *out)
{
    *out = (em_st_header){0};
    /* depth 3: the header, a tensor's object, its shape; one string is at most the text */
    parse p = {.path = path, .h = out, .names = em_name_table_new(n / 64)};
    em_json_reader_init(&p.r, FN, path, text, n,
                        (em_json_limits){.max_depth = 3, .max_values = INT64_MAX,
                                         .max_string = n});
    em_status st = p.names ? EM_OK : failed();
    em_json_token t = st == EM_OK ? em_json_next(&p.r) : EM_JSON_ERROR;
    if (st == EM_OK && t != EM_JSON_OBJECT)
        st = t == EM_JSON_ERROR ? failed()
                                : em_set_error(EM_ERR_IO, FN ": '%s': the header is not a JSON "
                                               "object", path);
    while (st == EM_OK && (t = em_json_next(&p.r)) == EM_JSON_KEY)
        st = read_entry(&p);
    if (st == EM_OK && (t != EM_JSON_OBJECT_END || em_json_next(&p.r) != EM_JSON_END))
        st = failed();
    if (st == EM_OK)
        st = check_layout(path, out->items, out->n_items, data_len);
    em_json_reader_free(&p.r);
    em_name_table_free(p.names);
    if (st != EM_OK)
        em_st_header_free(out);
    return st;
}
