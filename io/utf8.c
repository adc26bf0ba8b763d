/* Strict UTF-8 validation (see io/utf8.h). */
#include "io/utf8.h"

#include <stdint.h>
#include <string.h>

/* The length of the valid character at s (at most n bytes), or 0 when the bytes there are not
 * one. The second byte's range rules out overlong forms, surrogates and code points past
 * U+10FFFF (RFC 3629's table). */
static size_t char_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

size_t em_utf8_valid_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t at = 0;
    while (at < n) {
        size_t len = char_len(u + at, n - at);
        if (!len)
            break;
        at += len;
    }
    return at;
}

em_status em_utf8_check(const char *fn, const char *what, const char *s)
{
    size_t n = strlen(s), ok = em_utf8_valid_len(s, n);
    if (ok == n)
        return EM_OK;
    return em_set_error(EM_ERR_ARG, "%s: %s \"%.*s\" is followed by byte 0x%02x at offset %zu, "
                        "which is not UTF-8", fn, what, (int)ok, s, (unsigned char)s[ok], ok);
}
