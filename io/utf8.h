/* UTF-8 as the readers of ember's files want it (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF). Names that end up in a file (TensorBoard tags, profiler ranges, module
 * and parameter names) are checked here before anything is written, so a reader never stops at
 * a bad one. */
#ifndef EMBER_IO_UTF8_H
#define EMBER_IO_UTF8_H

#include <stddef.h>

#include "ember/tensor/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The length of the longest valid UTF-8 prefix of s[0..n): n when all of it is valid. Also cuts
 * a character that a fixed-size buffer split. */
size_t em_utf8_valid_len(const char *s, size_t n);

/* EM_OK when the string s is valid UTF-8; otherwise EM_ERR_ARG with the error
 * "FN: WHAT \"<valid start>\" is followed by byte 0xNN at offset K, which is not UTF-8". */
em_status em_utf8_check(const char *fn, const char *what, const char *s);

#ifdef __cplusplus
}
#endif

#endif
