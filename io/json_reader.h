/* A bounded JSON reader: the text is read token by token, nothing is built, and limits on
 * nesting, values and the bytes of one string are checked as it goes. For input that is hostile
 * by nature (safetensors headers, the server's request bodies), where a tree of the whole text
 * (em_json_parse) would take tens of times the text's size before anything could be checked.
 * The grammar is jansson's as em_json_parse uses it: strict UTF-8, no \u0000 in a string,
 * integers within int64, reals finite, nothing after the value. Duplicate keys are the caller's
 * to find (em_json_reader_fail with "duplicate object key"), as only it knows which it keeps. */
#ifndef EMBER_IO_JSON_READER_H
#define EMBER_IO_JSON_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/tensor/error.h"

/* the most any reader nests: a whole-model file's tree takes two levels a module, 64 modules
 * deep, and its settings */
#define EM_JSON_MAX_DEPTH 160

typedef enum {
    EM_JSON_ERROR,      /* the text is not JSON or broke a limit: the error is recorded */
    EM_JSON_END,        /* the value is whole and only whitespace followed it */
    EM_JSON_OBJECT,     /* { */
    EM_JSON_OBJECT_END, /* } */
    EM_JSON_ARRAY,      /* [ */
    EM_JSON_ARRAY_END,  /* ] */
    EM_JSON_KEY,        /* an object's key: str, str_len */
    EM_JSON_STRING,     /* str, str_len */
    EM_JSON_INTEGER,    /* integer (and real, the same value) */
    EM_JSON_REAL,       /* real */
    EM_JSON_TRUE,
    EM_JSON_FALSE,
    EM_JSON_NULL
} em_json_token;

typedef struct {
    int max_depth;     /* arrays and objects open at once, at most EM_JSON_MAX_DEPTH */
    int64_t max_values; /* values read (each array, object and scalar; keys not counted) */
    size_t max_string; /* the decoded bytes of one key or string */
} em_json_limits;

typedef struct {
    /* the last token's value (read only) */
    const char *str; /* KEY, STRING: the decoded text, NUL-terminated, valid until the next call */
    size_t str_len;
    int64_t integer;
    double real;
    size_t at;      /* the byte where the last token began */
    int depth;      /* arrays and objects open */
    int64_t values; /* values read so far */
    bool over_limit; /* the error was a limit, not malformed text */
    /* the reader's own */
    const char *fn, *what, *text;
    size_t n, pos;
    em_json_limits limits;
    char *buf;
    size_t cap;
    unsigned char stack[EM_JSON_MAX_DEPTH]; /* '{' or '[' per open level */
    int state;
} em_json_reader;

/* Starts reading n bytes of text (not NUL-terminated). Errors read
 * "FN: 'WHAT': corrupt JSON at byte N: WHY" (EM_ERR_IO), as em_json_parse writes them. */
void em_json_reader_init(em_json_reader *r, const char *fn, const char *what, const char *text,
                         size_t n, em_json_limits limits);
/* The next token; EM_JSON_ERROR (and every call after it) once the text is wrong. */
em_json_token em_json_next(em_json_reader *r);
/* Records "corrupt JSON at byte N: WHY", N where the last token began, and returns
 * EM_JSON_ERROR: the caller's own rules (a duplicate key, a value of the wrong kind). */
em_json_token em_json_reader_fail(em_json_reader *r, const char *why);
void em_json_reader_free(em_json_reader *r); /* its string buffer */

#endif
