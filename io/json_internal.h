/* ember's JSON: Debian's jansson (strict UTF-8, exact 64-bit integers, duplicate keys rejected
 * on request, objects kept in insertion order), plus the few rules ember adds: one strict way to
 * parse (here), reals without NaN or infinity and one-line output (io/json.h, public). Every JSON
 * ember writes, and every JSON it reads whole into a tree, goes through jansson and these helpers;
 * input that is hostile by nature and may be large (safetensors headers, the server's requests) is
 * read token by token under limits by io/json_reader.h, with the same grammar and messages. Not
 * installed. */
#ifndef EMBER_IO_JSON_INTERNAL_H
#define EMBER_IO_JSON_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "io/json.h"
#include "tensor/error.h"

/* n bytes of text as one JSON value: invalid UTF-8, \u0000 in a string, a duplicate key, an
 * integer beyond int64, nesting deeper than jansson's limit and bytes after the value are all
 * refused. A new reference, or NULL with an EM_ERR_IO error
 * "FN: 'WHAT': corrupt JSON at byte N: WHY". */
json_t *em_json_parse(const char *fn, const char *what, const char *text, size_t n);

#endif
