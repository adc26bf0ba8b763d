/* ember's JSON: Debian's jansson (strict UTF-8, exact 64-bit integers, duplicate keys rejected
 * on request, objects kept in insertion order), plus the few rules ember adds: one strict way to
 * parse, reals without NaN or infinity, one-line output. Every JSON ember writes, and every JSON
 * it reads whole into a tree, goes through jansson and these helpers; input that is hostile by
 * nature and may be large (safetensors headers, the server's requests) is read token by token
 * under limits by io/json_reader.h, with the same grammar and messages. */
#ifndef EMBER_IO_JSON_INTERNAL_H
#define EMBER_IO_JSON_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "tensor/error.h"

/* n bytes of text as one JSON value: invalid UTF-8, \u0000 in a string, a duplicate key, an
 * integer beyond int64, nesting deeper than jansson's limit and bytes after the value are all
 * refused. A new reference, or NULL with an EM_ERR_IO error
 * "FN: 'WHAT': corrupt JSON at byte N: WHY". */
json_t *em_json_parse(const char *fn, const char *what, const char *text, size_t n);

/* obj[key] = v rounded to `decimals` places (an integer when decimals is 0; v as it is when
 * negative). JSON has no NaN or infinity: a non-finite v is written as null, and
 * obj["non_finite"][key] says what it was ("nan", "inf" or "-inf"). 0, or -1 out of memory. */
int em_json_set_real(json_t *obj, const char *key, double v, int decimals);

/* v on one line without spaces, reals to 15 significant digits; a new string (free it) or
 * NULL. */
char *em_json_dump(const json_t *v);

/* v as em_json_dump writes it, then a newline, to f; EM_ERR_IO or EM_ERR_MEMORY on failure. */
em_status em_json_print_line(FILE *f, const json_t *v);

/* v as one line in the file at path, written atomically: on any failure the error names path
 * and nothing is left there (no partial file, no temporary). */
em_status em_json_save(const char *path, const json_t *v);

#endif
