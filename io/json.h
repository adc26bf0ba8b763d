/* ember's rules for the JSON it writes, on top of jansson's values (<jansson.h>): reals without
 * NaN or infinity, one-line output, files written atomically. ember's summary lines and files
 * follow them, and a program building its own JSON with jansson can too; this header names
 * jansson's json_t without needing jansson's headers. */
#ifndef EMBER_IO_JSON_H
#define EMBER_IO_JSON_H

#include <stdio.h>

#include "ember/tensor/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_t; /* jansson's value: json_t */

/* obj[key] = v rounded to `decimals` places (an integer when decimals is 0; v as it is when
 * negative). JSON has no NaN or infinity: a non-finite v is written as null, and
 * obj["non_finite"][key] says what it was ("nan", "inf" or "-inf"). 0, or -1 out of memory. */
int em_json_set_real(struct json_t *obj, const char *key, double v, int decimals);

/* v on one line without spaces, reals to 15 significant digits; a new string (free it) or
 * NULL. */
char *em_json_dump(const struct json_t *v);

/* v as em_json_dump writes it, then a newline, to f; EM_ERR_IO or EM_ERR_MEMORY on failure. */
em_status em_json_print_line(FILE *f, const struct json_t *v);

/* v as one line in the file at path, written atomically: on any failure the error names path
 * and nothing is left there (no partial file, no temporary). */
em_status em_json_save(const char *path, const struct json_t *v);

#ifdef __cplusplus
}
#endif

#endif
