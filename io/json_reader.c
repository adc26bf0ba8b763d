/* The bounded JSON reader (see io/json_reader.h): a state machine over the text with a stack of
 * the open arrays and objects, one reusable buffer for decoded strings and numbers. */
#define _GNU_SOURCE /* strtod_l: reals read the same whatever the program's locale */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_reader.h"
#include "io/utf8.h"

/* What the next token may be. */
enum {
    EXPECT_VALUE,          /* the top-level value, after ':' or after ',' in an array */
    EXPECT_VALUE_OR_CLOSE, /* just after '[' */
    EXPECT_KEY,            /* after ',' in an object */
    EXPECT_KEY_OR_CLOSE,   /* just after '{' */
    EXPECT_NEXT,           /* after a value: ',', the closing bracket, or the end at depth 0 */
    FINISHED,
    FAILED
};

void em_json_reader_init(em_json_reader *r, const char *fn, const char *what, const char *text,
                         size_t n, em_json_limits limits)
{
    *r = (em_json_reader){.fn = fn, .what = what, .text = text, .n = n, .limits = limits,
                          .state = EXPECT_VALUE};
    if (r->limits.max_depth > EM_JSON_MAX_DEPTH || r->limits.max_depth < 1)
        r->limits.max_depth = EM_JSON_MAX_DEPTH;
}

void em_json_reader_free(em_json_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}

/* Records "corrupt JSON at byte <at>: why" and fails the reader. */
static em_json_token fail_at(em_json_reader *r, size_t at, const char *why)
{
    if (r->state != FAILED)
        em_set_error(EM_ERR_IO, "%s: '%s': corrupt JSON at byte %zu: %s", r->fn, r->what, at,
                     why);
    r->state = FAILED;
    return EM_JSON_ERROR;
}

em_json_token em_json_reader_fail(em_json_reader *r, const char *why)
{
    return fail_at(r, r->at, why);
}

static em_json_token over_limit(em_json_reader *r, const char *why)
{
    r->over_limit = true;
    return fail_at(r, r->pos, why);
}

static void skip_space(em_json_reader *r)
{
    while (r->pos < r->n && (r->text[r->pos] == ' ' || r->text[r->pos] == '\t' ||
                             r->text[r->pos] == '\n' || r->text[r->pos] == '\r'))
        r->pos++;
}

/* Room for `more` bytes and a NUL after the buffer's len bytes, within the string limit. */
static bool reserve(em_json_reader *r, size_t len, size_t more)
{
    if (len + more > r->limits.max_string) {
        char why[96];
        snprintf(why, sizeof why, "a string longer than %zu bytes", r->limits.max_string);
        over_limit(r, why);
        return false;
    }
    if (len + more + 1 <= r->cap)
        return true;
    size_t cap = r->cap ? r->cap : 64;
    while (cap < len + more + 1)
        cap *= 2;
    char *b = realloc(r->buf, cap);
    if (!b) {
        em_set_error(EM_ERR_MEMORY, "%s: '%s': out of memory", r->fn, r->what);
        r->state = FAILED;
        return false;
    }
    r->buf = b;
    r->cap = cap;
    return true;
}

/* Four hex digits at text[at] into *v; false when they are not there. */
static bool hex4(const em_json_reader *r, size_t at, unsigned *v)
{
    *v = 0;
    for (size_t i = at; i < at + 4; i++) {
        if (i >= r->n)
            return false;
        char c = r->text[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return false;
        *v = *v * 16 + (unsigned)d;
    }
    return true;
}

/* The code point of the \u escape at text[pos] (the backslash), a surrogate pair taken whole;
 * pos moves past it. 0 when the escape is wrong (U+0000 is refused too). */
static unsigned unicode_escape(em_json_reader *r)
{
    unsigned hi, lo;
    if (!hex4(r, r->pos + 2, &hi))
        return 0;
    r->pos += 6;
    if (hi >= 0xDC00 && hi <= 0xDFFF)
        return 0;
    if (hi < 0xD800 || hi > 0xDBFF)
        return hi;
    if (r->pos + 1 >= r->n || r->text[r->pos] != '\\' || r->text[r->pos + 1] != 'u' ||
        !hex4(r, r->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return 0;
    r->pos += 6;
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
}

/* cp as UTF-8 into out; its length. */
static size_t utf8_encode(unsigned cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The byte a one-letter escape stands for (\n: newline), or -1 when e is no such letter. */
static int simple_escape(char e)
{
    switch (e) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    }
    return -1;
}

/* The string whose opening quote is at pos, decoded into the buffer (str, str_len). */
static bool read_string(em_json_reader *r)
{
    size_t start = r->pos++, len = 0;
    for (;;) {
        if (r->pos >= r->n) {
            fail_at(r, r->pos, "premature end of input in a string");
            return false;
        }
        unsigned char c = (unsigned char)r->text[r->pos];
        if (c == '"')
            break;
        if (c < 0x20) {
            fail_at(r, r->pos, "control character in a string");
            return false;
        }
        char bytes[4]; /* what this character or escape stands for */
        size_t k = 1;
        char e = c == '\\' && r->pos + 1 < r->n ? r->text[r->pos + 1] : '\0';
        if (c != '\\') {
            bytes[0] = (char)c;
            r->pos++;
        } else if (simple_escape(e) >= 0) {
            bytes[0] = (char)simple_escape(e);
            r->pos += 2;
        } else if (e == 'u') {
            size_t at = r->pos;
            unsigned cp = unicode_escape(r);
            if (!cp) {
                fail_at(r, at, "invalid \\u escape (a lone surrogate, or \\u0000)");
                return false;
            }
            k = utf8_encode(cp, bytes);
        } else {
            fail_at(r, r->pos, "invalid escape in a string");
            return false;
        }
        if (!reserve(r, len, k))
            return false;
        memcpy(r->buf + len, bytes, k);
        len += k;
    }
    r->pos++;
    if (!reserve(r, len, 0))
        return false;
    r->buf[len] = '\0';
    if (em_utf8_valid_len(r->buf, len) != len) {
        fail_at(r, start, "a string that is not UTF-8");
        return false;
    }
    r->str = r->buf;
    r->str_len = len;
    return true;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static bool is_digit(const em_json_reader *r, size_t at)
{
    return at < r->n && r->text[at] >= '0' && r->text[at] <= '9';
}

/* The number at pos (JSON's grammar: no leading zeros, no bare '.', no '+'). */
static em_json_token read_number(em_json_reader *r)
{
    size_t start = r->pos;
    bool negative = r->text[r->pos] == '-', real = false;
    r->pos += negative;
    if (!is_digit(r, r->pos))
        return fail_at(r, start, "invalid token (a '-' without digits)");
    if (r->text[r->pos] == '0')
        r->pos++;
    else
        while (is_digit(r, r->pos))
            r->pos++;
    if (r->pos < r->n && r->text[r->pos] == '.') {
        real = true;
        if (!is_digit(r, ++r->pos))
            return fail_at(r, r->pos, "invalid token (no digits after '.')");
        while (is_digit(r, r->pos))
            r->pos++;
    }
    if (r->pos < r->n && (r->text[r->pos] == 'e' || r->text[r->pos] == 'E')) {
        real = true;
        r->pos++;
        if (r->pos < r->n && (r->text[r->pos] == '+' || r->text[r->pos] == '-'))
            r->pos++;
        if (!is_digit(r, r->pos))
            return fail_at(r, r->pos, "invalid token (no digits in the exponent)");
        while (is_digit(r, r->pos))
            r->pos++;
    }
    if (!real) { /* accumulated negatively: INT64_MIN fits */
        int64_t v = 0;
        for (size_t i = start + negative; i < r->pos; i++)
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_sub_overflow(v, r->text[i] - '0', &v))
                return fail_at(r, start, negative ? "too big negative integer" : "too big integer");
        if (!negative && v == INT64_MIN)
            return fail_at(r, start, "too big integer");
        r->integer = negative ? v : -v;
        r->real = (double)r->integer;
        return EM_JSON_INTEGER;
    }
    size_t len = r->pos - start;
    if (!reserve(r, 0, len))
        return EM_JSON_ERROR;
    memcpy(r->buf, r->text + start, len);
    r->buf[len] = '\0';
    pthread_once(&c_locale_once, make_c_locale);
    r->real = c_locale ? strtod_l(r->buf, NULL, c_locale) : strtod(r->buf, NULL);
    if (!isfinite(r->real))
        return fail_at(r, start, "real number overflow");
    return EM_JSON_REAL;
}

/* true, false or null at pos; anything else is an invalid token named by its first letters. */
static em_json_token read_literal(em_json_reader *r)
{
    static const struct {
        const char *word;
        em_json_token token;
    } words[] = {{"true", EM_JSON_TRUE}, {"false", EM_JSON_FALSE}, {"null", EM_JSON_NULL}};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(words[i].word);
        if (r->n - r->pos >= len && !memcmp(r->text + r->pos, words[i].word, len)) {
            r->pos += len;
            return words[i].token;
        }
    }
    size_t len = 0;
    while (len < 16 && r->pos + len < r->n &&
           ((r->text[r->pos + len] >= 'a' && r->text[r->pos + len] <= 'z') ||
            (r->text[r->pos + len] >= 'A' && r->text[r->pos + len] <= 'Z')))
        len++;
    char why[48];
    snprintf(why, sizeof why, "invalid token near '%.*s'", (int)(len ? len : 1),
             r->pos < r->n ? r->text + r->pos : "");
    return fail_at(r, r->pos, why);
}

/* A value starting at pos (whitespace skipped). */
static em_json_token read_value(em_json_reader *r)
{
    if (r->pos >= r->n)
        return fail_at(r, r->pos, r->depth ? "premature end of input" : "no value (empty input)");
    if (r->values >= r->limits.max_values) {
        char why[96];
        snprintf(why, sizeof why, "more than %lld values", (long long)r->limits.max_values);
        return over_limit(r, why);
    }
    r->values++;
    char c = r->text[r->pos];
    if (c == '{' || c == '[') {
        if (r->depth >= r->limits.max_depth) {
            char why[64];
            snprintf(why, sizeof why, "nested deeper than %d", r->limits.max_depth);
            return over_limit(r, why);
        }
        r->stack[r->depth++] = (unsigned char)c;
        r->pos++;
        r->state = c == '{' ? EXPECT_KEY_OR_CLOSE : EXPECT_VALUE_OR_CLOSE;
        return c == '{' ? EM_JSON_OBJECT : EM_JSON_ARRAY;
    }
    r->state = EXPECT_NEXT;
    if (c == '"')
        return read_string(r) ? EM_JSON_STRING : EM_JSON_ERROR;
    if (c == '-' || (c >= '0' && c <= '9'))
        return read_number(r);
    return read_literal(r);
}

/* An object's key at pos and the ':' after it. */
static em_json_token read_key(em_json_reader *r)
{
    if (r->pos >= r->n)
        return fail_at(r, r->pos, "premature end of input");
    if (r->text[r->pos] != '"')
        return fail_at(r, r->pos, "string or '}' expected");
    if (!read_string(r))
        return EM_JSON_ERROR;
    skip_space(r);
    if (r->pos >= r->n || r->text[r->pos] != ':')
        return fail_at(r, r->pos, "':' expected");
    r->pos++;
    r->state = EXPECT_VALUE;
    return EM_JSON_KEY;
}

/* The closing bracket at pos, when it closes the innermost open value. */
static bool closes(em_json_reader *r)
{
    char c = r->pos < r->n ? r->text[r->pos] : '\0';
    return r->depth > 0 && ((c == '}' && r->stack[r->depth - 1] == '{') ||
                            (c == ']' && r->stack[r->depth - 1] == '['));
}

static em_json_token close_value(em_json_reader *r)
{
    char c = r->text[r->pos++];
    r->depth--;
    r->state = EXPECT_NEXT;
    return c == '}' ? EM_JSON_OBJECT_END : EM_JSON_ARRAY_END;
}

em_json_token em_json_next(em_json_reader *r)
{
    if (r->state == FAILED)
        return EM_JSON_ERROR;
    if (r->state == FINISHED)
        return EM_JSON_END;
    skip_space(r);
    r->at = r->pos;
    if (r->state == EXPECT_VALUE)
        return read_value(r);
    if (r->state == EXPECT_VALUE_OR_CLOSE)
        return closes(r) ? close_value(r) : read_value(r);
    if (r->state == EXPECT_KEY)
        return read_key(r);
    if (r->state == EXPECT_KEY_OR_CLOSE)
        return closes(r) ? close_value(r) : read_key(r);
    /* EXPECT_NEXT */
    if (r->depth == 0) {
        if (r->pos < r->n)
            return fail_at(r, r->pos, "end of file expected");
        r->state = FINISHED;
        return EM_JSON_END;
    }
    if (closes(r))
        return close_value(r);
    if (r->pos >= r->n)
        return fail_at(r, r->pos, "premature end of input");
    bool object = r->stack[r->depth - 1] == '{';
    if (r->text[r->pos] != ',')
        return fail_at(r, r->pos, object ? "',' or '}' expected" : "',' or ']' expected");
    r->pos++;
    skip_space(r);
    r->at = r->pos;
    return object ? read_key(r) : read_value(r);
}
