/* Character-level text: a vocabulary of the bytes a text holds, encoding and decoding through it,
 * and windows of the encoded text as a dataset of next-character prediction samples. */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

em_char_vocab em_char_vocab_of(const char *text, size_t n)
{
    if (n > 0 && !em_present(text, "em_char_vocab_of", "text"))
        return (em_char_vocab){0};
    bool seen[256] = {false};
    for (size_t i = 0; i < n; i++)
        seen[(unsigned char)text[i]] = true;
    em_char_vocab v = {0};
    for (int c = 0; c < 256; c++) {
        v.ids[c] = -1;
        if (seen[c]) {
            v.ids[c] = (int16_t)v.size;
            v.chars[v.size++] = (unsigned char)c;
        }
    }
    return v;
}

em_status em_char_vocab_from(const char *chars, size_t n, em_char_vocab *v)
{
    if (!em_present(chars, "em_char_vocab_from", "chars") ||
        !em_present(v, "em_char_vocab_from", "v"))
        return EM_ERR_ARG;
    if (n == 0 || n > 256)
        return em_set_error(EM_ERR_ARG, "em_char_vocab_from: a vocabulary holds 1 to 256 "
                            "characters, not %zu", n);
    em_char_vocab w = em_char_vocab_of(chars, n);
    for (size_t i = 0; i < n; i++)
        if (i > 0 && (unsigned char)chars[i] <= (unsigned char)chars[i - 1])
            return em_set_error(EM_ERR_ARG, "em_char_vocab_from: characters must be distinct "
                                "and ascending; byte %zu (0x%02x) is not", i,
                                (unsigned char)chars[i]);
    *v = w;
    return EM_OK;
}

em_status em_char_vocab_encode(const em_char_vocab *v, const char *text, size_t n, uint8_t *ids)
{
    const char *fn = "em_char_vocab_encode";
    if (!em_present(v, fn, "v") || (n > 0 && (!em_present(text, fn, "text") ||
                                              !em_present(ids, fn, "ids"))))
        return EM_ERR_ARG;
    for (size_t i = 0; i < n; i++) {
        int id = v->ids[(unsigned char)text[i]];
        if (id < 0) {
            unsigned char c = (unsigned char)text[i];
            if (c >= 32 && c < 127)
                return em_set_error(EM_ERR_ARG, "character '%c' (at %zu) is not in the "
                                    "vocabulary", c, i);
            return em_set_error(EM_ERR_ARG, "character 0x%02x (at %zu) is not in the "
                                "vocabulary", c, i);
        }
        ids[i] = (uint8_t)id;
    }
    return EM_OK;
}

em_status em_char_vocab_decode(const em_char_vocab *v, const int64_t *ids, size_t n, char *text)
{
    const char *fn = "em_char_vocab_decode";
    if (!em_present(v, fn, "v") || (n > 0 && (!em_present(ids, fn, "ids") ||
                                              !em_present(text, fn, "text"))))
        return EM_ERR_ARG;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->size)
            return em_set_error(EM_ERR_ARG, "em_char_vocab_decode: id %lld (at %zu) is outside "
                                "the vocabulary of %d", (long long)ids[i], i, v->size);
        text[i] = (char)v->chars[ids[i]];
    }
    return EM_OK;
}

typedef struct {
    em_dataset base;
    uint8_t *ids; /* (n) owned */
    int64_t n, len, stride, count;
} windows_dataset;

static int64_t windows_len(const em_dataset *ds)
{
    return ((const windows_dataset *)ds)->count;
}

static em_status windows_get(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y)
{
    (void)epoch;
    const windows_dataset *w = (const windows_dataset *)ds;
    const uint8_t *at = w->ids + i * w->stride;
    int64_t *xs = x, *ys = y; // (len) each
    for (int64_t t = 0; t < w->len; t++) {
        xs[t] = at[t];
        ys[t] = at[t + 1];
    }
    return EM_OK;
}

static void windows_free(em_dataset *ds)
{
    free(((windows_dataset *)ds)->ids);
    free(ds);
}

static const em_dataset_vtable windows_vtable = {windows_len, windows_get, windows_free};

em_dataset *em_char_windows_dataset(const uint8_t *ids, int64_t n, int64_t len, int64_t stride)
{
    if (!ids || n < 0 || len < 1 || stride < 1) {
        em_set_error(EM_ERR_ARG, "em_char_windows_dataset: need ids, n >= 0, len >= 1 and "
                     "stride >= 1: n %lld, len %lld, stride %lld", (long long)n, (long long)len,
                     (long long)stride);
        return NULL;
    }
    windows_dataset *w = calloc(1, sizeof *w);
    uint8_t *copy = malloc(n > 0 ? (size_t)n : 1);
    if (!w || !copy) {
        free(w);
        free(copy);
        em_set_error(EM_ERR_MEMORY, "em_char_windows_dataset: out of memory");
        return NULL;
    }
    memcpy(copy, ids, (size_t)n);
    int64_t vocab = 0;
    for (int64_t i = 0; i < n; i++)
        vocab = ids[i] >= vocab ? ids[i] + 1 : vocab;
    *w = (windows_dataset){.ids = copy, .n = n, .len = len, .stride = stride,
                           .count = n > len ? (n - len - 1) / stride + 1 : 0};
    w->base = (em_dataset){.vt = &windows_vtable, .x_shape = EM_SHAPE(len), .x_dtype = EM_I64,
                           .y_shape = EM_SHAPE(len), .y_dtype = EM_I64, .n_classes = vocab};
    return &w->base;
}
