/* The safetensors file format: header building in the reference implementation's order, a small
 * strict JSON parser for reading headers back, full validation, and atomic writes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tensor/atomic_file.h"
#include "tensor/safetensors.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian; this host would need byte swapping");

#define MAX_HEADER_BYTES 100000000u
#define MAX_JSON_DEPTH 32

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

/* ---- UTF-8 ---- */

static bool utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + (size_t)len > n)
            return false;
        uint32_t cp = len == 1 ? c : c & (0x3Fu >> (len - 1));
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += (size_t)len;
    }
    return true;
}

/* ---- a growable byte buffer for the header ---- */

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* s as a JSON string, escaped the way serde_json escapes. */
static void sb_json_str(strbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': sb_str(b, "\\\""); break;
        case '\\': sb_str(b, "\\\\"); break;
        case '\b': sb_str(b, "\\b"); break;
        case '\f': sb_str(b, "\\f"); break;
        case '\n': sb_str(b, "\\n"); break;
        case '\r': sb_str(b, "\\r"); break;
        case '\t': sb_str(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                sb_str(b, esc);
            } else {
                sb_put(b, (const char *)p, 1);
            }
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(strbuf *b, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    sb_str(b, num);
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

/* Check the arguments before anything touches the disk. */
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
        if (strcmp(name, "__metadata__") == 0 || !utf8_valid((const void *)name, strlen(name)))
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
        const char *k = meta[i].key, *v = meta[i].value;
        if (!k || !v || !utf8_valid((const void *)k, strlen(k)) ||
            !utf8_valid((const void *)v, strlen(v)))
            return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata entry %d: NULL or not "
                                "UTF-8", i);
        for (int j = 0; j < i; j++)
            if (strcmp(meta[j].key, k) == 0)
                return em_set_error(EM_ERR_ARG, "em_safetensors_save: metadata key '%s' appears "
                                    "twice", k);
    }
    return EM_OK;
}

/* The padded JSON header for items (already in file order) and sorted metadata. */
static void build_header(strbuf *b, const save_item *items, int n, const em_st_meta *meta,
                         int n_meta)
{
    sb_str(b, "{");
    if (n_meta) {
        sb_str(b, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i)
                sb_str(b, ",");
            sb_json_str(b, meta[i].key);
            sb_str(b, ":");
            sb_json_str(b, meta[i].value);
        }
        sb_str(b, "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const em_tensor *t = items[i].e->tensor;
        if (i || n_meta)
            sb_str(b, ",");
        sb_json_str(b, items[i].e->name);
        sb_str(b, ":{\"dtype\":\"");
        sb_str(b, items[i].dt->name);
        sb_str(b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d)
                sb_str(b, ",");
            sb_u64(b, (uint64_t)t->shape[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        sb_u64(b, offset);
        sb_str(b, ",");
        offset += items[i].nbytes;
        sb_u64(b, offset);
        sb_str(b, "]}");
    }
    sb_str(b, "}");
    while (b->len % 8)
        sb_str(b, " ");
}

static em_status write_tensor_data(em_atomic_file *af, const save_item *it)
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
    else if (fwrite(buf, 1, it->nbytes, af->f) != it->nbytes)
        st = em_set_error(EM_ERR_IO, "em_safetensors_save: cannot write '%s': %s", af->path,
                          strerror(errno));
    free(buf);
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
    strbuf hdr = {0};
    if (!items || !sorted_meta)
        goto oom;
    for (int i = 0; i < n; i++) {
        const em_tensor *t = tensors[i].tensor;
        items[i] = (save_item){&tensors[i], dtype_of(t->dtype),
                               (uint64_t)em_numel(t) * em_dtype_size(t->dtype)};
    }
    qsort(items, (size_t)n, sizeof *items, cmp_save);
    if (n_meta)
        memcpy(sorted_meta, meta, (size_t)n_meta * sizeof *meta);
    qsort(sorted_meta, (size_t)n_meta, sizeof *sorted_meta, cmp_meta);
    build_header(&hdr, items, n, sorted_meta, n_meta);
    if (hdr.oom)
        goto oom;

    em_atomic_file af;
    st = em_atomic_open(&af, path);
    if (st == EM_OK) {
        unsigned char len_le[8];
        for (int k = 0; k < 8; k++)
            len_le[k] = (unsigned char)((uint64_t)hdr.len >> (8 * k));
        if (fwrite(len_le, 1, 8, af.f) != 8 || fwrite(hdr.p, 1, hdr.len, af.f) != hdr.len)
            st = em_set_error(EM_ERR_IO, "em_safetensors_save: cannot write '%s': %s", path,
                              strerror(errno));
        for (int i = 0; st == EM_OK && i < n; i++)
            st = write_tensor_data(&af, &items[i]);
        if (st == EM_OK)
            st = em_atomic_commit(&af);
        else
            em_atomic_abort(&af);
    }
    free(items);
    free(sorted_meta);
    free(hdr.p);
    return st;
oom:
    free(items);
    free(sorted_meta);
    free(hdr.p);
    return em_set_error(EM_ERR_MEMORY, "em_safetensors_save: out of memory");
}

/* ---- a strict JSON parser ---- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype type;
    char *str;         /* J_STR: decoded, NUL-terminated */
    bool is_uint;      /* J_NUM: a non-negative integer that fits in u64 */
    uint64_t u;
    int n;             /* J_ARR, J_OBJ */
    struct jval *items;
    char **keys;       /* J_OBJ */
} jval;

typedef struct {
    const char *s, *end;
    const char *err; /* first problem found */
    size_t err_at;
    const char *start;
} jparser;

static bool jfail(jparser *p, const char *msg)
{
    if (!p->err) {
        p->err = msg;
        p->err_at = (size_t)(p->s - p->start);
    }
    return false;
}

static void jskip_ws(jparser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static void jfree(jval *v)
{
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    *v = (jval){0};
}

static int hex4(const char *s)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static void put_utf8(strbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sb_put(b, u, n);
}

/* A string at p->s (on the opening quote) into a new NUL-terminated buffer. */
static bool jparse_str(jparser *p, char **out)
{
    strbuf b = {0};
    sb_put(&b, "", 0);
    p->s++;
    for (;;) {
        if (p->s >= p->end) {
            free(b.p);
            return jfail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') {
            p->s++;
            break;
        }
        if (c < 0x20) {
            free(b.p);
            return jfail(p, "control character in a string");
        }
        if (c != '\\') {
            sb_put(&b, p->s++, 1);
            continue;
        }
        if (p->s + 1 >= p->end) {
            free(b.p);
            return jfail(p, "unterminated escape");
        }
        char e = p->s[1];
        p->s += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            sb_put(&b, &repl[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        int hi = (e == 'u' && p->end - p->s >= 4) ? hex4(p->s) : -1;
        if (hi < 0) {
            free(b.p);
            return jfail(p, "bad escape in a string");
        }
        p->s += 4;
        uint32_t cp = (uint32_t)hi;
        if (hi >= 0xD800 && hi <= 0xDBFF) {
            int lo = (p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') ? hex4(p->s + 2)
                                                                               : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                free(b.p);
                return jfail(p, "unpaired surrogate in a string");
            }
            p->s += 6;
            cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
        } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
            free(b.p);
            return jfail(p, "unpaired surrogate in a string");
        }
        if (cp == 0) {
            free(b.p);
            return jfail(p, "NUL character in a string");
        }
        put_utf8(&b, cp);
    }
    if (b.oom) {
        free(b.p);
        return jfail(p, "out of memory");
    }
    *out = b.p;
    return true;
}

static bool jparse_num(jparser *p, jval *v)
{
    const char *s = p->s;
    bool neg = s < p->end && *s == '-', frac = false;
    if (neg)
        s++;
    if (s >= p->end || *s < '0' || *s > '9')
        return jfail(p, "bad number");
    bool overflow = false;
    uint64_t u = 0;
    if (*s == '0') {
        s++;
    } else {
        for (; s < p->end && *s >= '0' && *s <= '9'; s++) {
            overflow |= u > (UINT64_MAX - (uint64_t)(*s - '0')) / 10;
            u = u * 10 + (uint64_t)(*s - '0');
        }
    }
    if (s < p->end && *s == '.') {
        frac = true;
        if (++s >= p->end || *s < '0' || *s > '9')
            return jfail(p, "bad number");
        while (s < p->end && *s >= '0' && *s <= '9')
            s++;
    }
    if (s < p->end && (*s == 'e' || *s == 'E')) {
        frac = true;
        s++;
        if (s < p->end && (*s == '+' || *s == '-'))
            s++;
        if (s >= p->end || *s < '0' || *s > '9')
            return jfail(p, "bad number");
        while (s < p->end && *s >= '0' && *s <= '9')
            s++;
    }
    v->type = J_NUM;
    v->is_uint = !neg && !frac && !overflow;
    v->u = u;
    p->s = s;
    return true;
}

static bool jparse_value(jparser *p, jval *v, int depth);

/* An array or object at p->s (on the bracket). */
static bool jparse_container(jparser *p, jval *v, int depth, bool object)
{
    char close = object ? '}' : ']';
    v->type = object ? J_OBJ : J_ARR;
    p->s++;
    jskip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return true;
    }
    int cap = 0;
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 4;
            jval *items = realloc(v->items, (size_t)cap * sizeof *items);
            if (items)
                v->items = items;
            char **keys = object ? realloc(v->keys, (size_t)cap * sizeof *keys) : NULL;
            if (keys)
                v->keys = keys;
            if (!items || (object && !keys))
                return jfail(p, "out of memory");
        }
        jval *item = &v->items[v->n];
        *item = (jval){0};
        if (object) {
            jskip_ws(p);
            if (p->s >= p->end || *p->s != '"')
                return jfail(p, "expected a string key");
            if (!jparse_str(p, &v->keys[v->n]))
                return false;
            for (int i = 0; i < v->n; i++)
                if (strcmp(v->keys[i], v->keys[v->n]) == 0) {
                    free(v->keys[v->n]);
                    return jfail(p, "duplicate key");
                }
            jskip_ws(p);
            if (p->s >= p->end || *p->s != ':') {
                free(v->keys[v->n]);
                return jfail(p, "expected ':'");
            }
            p->s++;
        }
        bool ok = jparse_value(p, item, depth + 1);
        v->n++;
        if (!ok)
            return false;
        jskip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            return true;
        }
        return jfail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool jparse_literal(jparser *p, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
        return jfail(p, "unexpected character");
    p->s += n;
    return true;
}

static bool jparse_value(jparser *p, jval *v, int depth)
{
    if (depth > MAX_JSON_DEPTH)
        return jfail(p, "nested too deeply");
    jskip_ws(p);
    if (p->s >= p->end)
        return jfail(p, "unexpected end");
    switch (*p->s) {
    case '{': return jparse_container(p, v, depth, true);
    case '[': return jparse_container(p, v, depth, false);
    case '"':
        v->type = J_STR;
        return jparse_str(p, &v->str);
    case 't': v->type = J_BOOL; return jparse_literal(p, "true");
    case 'f': v->type = J_BOOL; return jparse_literal(p, "false");
    case 'n': v->type = J_NULL; return jparse_literal(p, "null");
    default: return jparse_num(p, v);
    }
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

/* Fill item from the header entry for one tensor; an error naming the problem otherwise. */
static em_status parse_tensor_info(const char *path, const char *name, const jval *v,
                                   load_item *item)
{
    const jval *dtype = NULL, *shape = NULL, *offs = NULL;
    if (v->type != J_OBJ)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': entry '%s' is not an object",
                            path, name);
    for (int i = 0; i < v->n; i++) {
        const char *k = v->keys[i];
        const jval **slot = strcmp(k, "dtype") == 0 ? &dtype : strcmp(k, "shape") == 0 ? &shape
                          : strcmp(k, "data_offsets") == 0 ? &offs : NULL;
        if (!slot)
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' has unknown "
                                "field '%s'", path, name, k);
        *slot = &v->items[i];
    }
    if (!dtype || dtype->type != J_STR || !shape || shape->type != J_ARR || !offs ||
        offs->type != J_ARR || offs->n != 2 || !offs->items[0].is_uint || !offs->items[1].is_uint)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' needs a dtype "
                            "string, a shape array and two data_offsets", path, name);
    item->name = name;
    item->dt = dtype_named(dtype->str);
    if (!item->dt)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' has unknown "
                            "dtype '%s'", path, name, dtype->str);
    if (item->dt->dtype == EM_NDTYPES)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_safetensors_load: '%s': tensor '%s' has "
                            "dtype %s, which ember does not support", path, name, dtype->str);
    if (shape->n > EM_MAX_DIMS)
        return em_set_error(EM_ERR_UNSUPPORTED, "em_safetensors_load: '%s': tensor '%s' has %d "
                            "dims (at most %d)", path, name, shape->n, EM_MAX_DIMS);
    item->shape.ndim = shape->n;
    uint64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < shape->n; d++) {
        const jval *e = &shape->items[d];
        if (!e->is_uint || e->u > (uint64_t)INT64_MAX)
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s' has a shape "
                                "entry that is not a non-negative integer", path, name);
        item->shape.d[d] = (int64_t)e->u;
        if (e->u && numel > UINT64_MAX / e->u)
            overflow = true;
        numel *= e->u;
    }
    item->begin = offs->items[0].u;
    item->end = offs->items[1].u;
    uint64_t need = numel * item->dt->size;
    if (overflow || numel > UINT64_MAX / item->dt->size || item->end < item->begin ||
        item->end - item->begin != need)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': tensor '%s': dtype %s and its "
                            "shape need %llu bytes but data_offsets [%llu, %llu] disagree", path,
                            name, item->dt->name, (unsigned long long)need,
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
static em_status take_metadata(const char *path, const jval *m, em_safetensors *st)
{
    if (m->type == J_NULL)
        return EM_OK;
    if (m->type != J_OBJ)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': __metadata__ is not an "
                            "object", path);
    char **pairs = malloc(((size_t)m->n + 1) * 2 * sizeof *pairs);
    st->meta_keys = malloc(((size_t)m->n + 1) * sizeof(char *));
    st->meta_values = malloc(((size_t)m->n + 1) * sizeof(char *));
    if (!pairs || !st->meta_keys || !st->meta_values) {
        free(pairs);
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    }
    for (int i = 0; i < m->n; i++) {
        if (m->items[i].type != J_STR) {
            free(pairs);
            return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': metadata '%s' is not a "
                                "string", path, m->keys[i]);
        }
        pairs[2 * i] = m->keys[i];
        pairs[2 * i + 1] = m->items[i].str;
    }
    qsort(pairs, (size_t)m->n, 2 * sizeof *pairs, cmp_str_pairs);
    for (int i = 0; i < m->n; i++) {
        st->meta_keys[i] = strdup(pairs[2 * i]);
        st->meta_values[i] = strdup(pairs[2 * i + 1]);
        st->n_meta = i + 1;
        if (!st->meta_keys[i] || !st->meta_values[i]) {
            free(pairs);
            return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
        }
    }
    free(pairs);
    return EM_OK;
}

/* Read the header of f (size file_size) into *hdr (NUL-terminated) and *hdr_len. */
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
    h[n] = '\0';
    if (!utf8_valid((const unsigned char *)h, n)) {
        free(h);
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': header is not UTF-8", path);
    }
    *hdr = h;
    *hdr_len = n;
    return EM_OK;
}

/* Parse and validate the header; items point into root's strings. */
static em_status parse_header(const char *path, const char *h, uint64_t n, uint64_t data_len,
                              jval *root, load_item **items_out, int *n_items,
                              const jval **meta)
{
    jparser p = {.s = h, .end = h + n, .start = h};
    jskip_ws(&p);
    if (p.s >= p.end || *p.s != '{')
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': header does not start with "
                            "'{'", path);
    bool ok = jparse_value(&p, root, 0);
    jskip_ws(&p);
    if (ok && p.s != p.end)
        jfail(&p, "trailing characters after the header object");
    if (!ok || p.err)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: '%s': corrupt header JSON at byte "
                            "%zu: %s", path, p.err_at, p.err);
    load_item *items = calloc((size_t)root->n + 1, sizeof *items);
    if (!items)
        return em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    int k = 0;
    em_status st = EM_OK;
    for (int i = 0; st == EM_OK && i < root->n; i++) {
        if (strcmp(root->keys[i], "__metadata__") == 0)
            *meta = &root->items[i];
        else
            st = parse_tensor_info(path, root->keys[i], &root->items[i], &items[k++]);
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

em_status em_safetensors_load(const char *path, em_safetensors **out)
{
    if (!path || !out)
        return em_set_error(EM_ERR_ARG, "em_safetensors_load: NULL path or output");
    FILE *f = fopen(path, "rb");
    if (!f)
        return em_set_error(EM_ERR_IO, "em_safetensors_load: cannot open '%s': %s", path,
                            strerror(errno));
    struct stat sb;
    char *hdr = NULL;
    uint64_t hdr_len = 0;
    jval root = {0};
    load_item *items = NULL;
    int n_items = 0;
    const jval *meta = NULL;
    em_safetensors *st = NULL;
    em_status rc = fstat(fileno(f), &sb) != 0
                       ? em_set_error(EM_ERR_IO, "em_safetensors_load: cannot stat '%s': %s",
                                      path, strerror(errno))
                       : read_header(path, f, (uint64_t)sb.st_size, &hdr, &hdr_len);
    if (rc == EM_OK)
        rc = parse_header(path, hdr, hdr_len, (uint64_t)sb.st_size - 8 - hdr_len, &root, &items,
                          &n_items, &meta);
    if (rc == EM_OK && !(st = calloc(1, sizeof *st)))
        rc = em_set_error(EM_ERR_MEMORY, "em_safetensors_load: out of memory");
    if (rc == EM_OK && meta)
        rc = take_metadata(path, meta, st);
    if (rc == EM_OK)
        rc = read_tensors(path, f, items, n_items, st);
    fclose(f);
    free(items);
    jfree(&root);
    free(hdr);
    if (rc != EM_OK) {
        em_safetensors_free(st);
        return rc;
    }
    *out = st;
    return EM_OK;
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
