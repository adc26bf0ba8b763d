/* The bounded JSON reader: the tokens of a document with their decoded values, jansson's strict
 * grammar (each malformed text refused with the byte and the reason), and the limits on nesting,
 * values and string bytes checked as the text is read. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/json_reader.h"

static const em_json_limits roomy = {.max_depth = 16, .max_values = 1000, .max_string = 1000};

TestSuite(json_reader, .init = em_error_clear);

static void start(em_json_reader *r, const char *text, em_json_limits limits)
{
    em_json_reader_init(r, "test", "doc", text, strlen(text), limits);
}

Test(json_reader, tokens_and_values_of_a_document)
{
    const char *text = " {\"a\" : [1, -2, 3.5e1, \"x\\u00e9\\ud83d\\ude00\\n\", true, false, null],"
                       "\"b\":{}, \"\":-9223372036854775808}\n";
    em_json_reader r;
    start(&r, text, roomy);
    const em_json_token want[] = {
        EM_JSON_OBJECT, EM_JSON_KEY, EM_JSON_ARRAY, EM_JSON_INTEGER, EM_JSON_INTEGER,
        EM_JSON_REAL, EM_JSON_STRING, EM_JSON_TRUE, EM_JSON_FALSE, EM_JSON_NULL,
        EM_JSON_ARRAY_END, EM_JSON_KEY, EM_JSON_OBJECT, EM_JSON_OBJECT_END, EM_JSON_KEY,
        EM_JSON_INTEGER, EM_JSON_OBJECT_END, EM_JSON_END, EM_JSON_END};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        em_json_token t = em_json_next(&r);
        cr_assert_eq(t, want[i], "token %zu: %d, not %d (%s)", i, t, want[i], em_error());
        if (i == 1)
            cr_assert(r.str_len == 1 && !strcmp(r.str, "a") && r.depth == 1);
        if (i == 3 || i == 4)
            cr_assert(r.integer == (i == 3 ? 1 : -2) && r.real == (double)r.integer);
        if (i == 5)
            cr_assert_eq(r.real, 35.0);
        if (i == 6) /* x, e acute, U+1F600 from a surrogate pair, a newline */
            cr_assert(r.str_len == 8 && !memcmp(r.str, "x\xc3\xa9\xf0\x9f\x98\x80\n", 8));
        if (i == 14)
            cr_assert(r.str_len == 0 && r.str[0] == '\0');
        if (i == 15)
            cr_assert_eq(r.integer, INT64_MIN);
    }
    cr_assert_eq(r.values, 11, "%lld values", (long long)r.values);
    cr_assert_not(em_has_error());
    em_json_reader_free(&r);
}

/* Reads text to its end; the error, or "" when it is valid. */
static const char *outcome(const char *text, size_t n, em_json_limits limits, bool *over_limit)
{
    em_json_reader r;
    em_json_reader_init(&r, "test", "doc", text, n, limits);
    em_json_token t;
    while ((t = em_json_next(&r)) != EM_JSON_END && t != EM_JSON_ERROR)
        ;
    if (over_limit)
        *over_limit = r.over_limit;
    em_json_reader_free(&r);
    cr_assert_eq(t == EM_JSON_ERROR, em_has_error());
    return em_error();
}

Test(json_reader, malformed_text_is_refused_with_byte_and_reason)
{
    const char *cases[][2] = {
        {"", "corrupt JSON at byte 0: no value"},
        {"{\"input\":[1,2", "corrupt JSON at byte 13: "},
        {"{", "corrupt JSON at byte 1: "},
        {"[1,]", "at byte 3: invalid token"},
        {"[01]", "at byte 2: ',' or ']' expected"},
        {"[1e999]", "at byte 1: real number overflow"},
        {"[-1e999]", "real number overflow"},
        {"[NaN]", "invalid token near 'NaN'"},
        {"[Infinity]", "invalid token near 'Infinity'"},
        {"[tru]", "invalid token near 'tru'"},
        {"{\"a\":1} x", "at byte 8: end of file expected"},
        {"[1 2]", "',' or ']' expected"},
        {"{\"a\" 1}", "':' expected"},
        {"{1:2}", "string or '}' expected"},
        {"{\"a\":1,}", "string or '}' expected"},
        {"[1]]", "end of file expected"},
        {"[1}", "',' or ']' expected"},
        {"[-]", "a '-' without digits"},
        {"[1.]", "no digits after '.'"},
        {"[.5]", "invalid token"},
        {"[1e]", "no digits in the exponent"},
        {"[+1]", "invalid token"},
        {"[9223372036854775808]", "too big integer"},
        {"[-9223372036854775809]", "too big negative integer"},
        {"[\"\\u0000\"]", "\\u0000"},
        {"[\"\\ud800\"]", "a lone surrogate"},
        {"[\"\\udc00\\ud800\"]", "a lone surrogate"},
        {"[\"\\ud800\\u0041\"]", "a lone surrogate"},
        {"[\"\\u12\"]", "invalid \\u escape"},
        {"[\"\\x\"]", "invalid escape"},
        {"[\"a\x01\"]", "at byte 3: control character"},
        {"[\"a\xff\"]", "at byte 1: a string that is not UTF-8"},
        {"[\"\xc0\xaf\"]", "not UTF-8"},
        {"[\"\xed\xa0\x80\"]", "not UTF-8"},
        {"[\"abc", "premature end of input in a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool over = true;
        const char *err = outcome(cases[i][0], strlen(cases[i][0]), roomy, &over);
        cr_assert(strstr(err, "test: 'doc': corrupt JSON at byte "), "case %zu: '%s'", i, err);
        cr_assert(strstr(err, cases[i][1]), "case %zu (%s): '%s' lacks '%s'", i, cases[i][0], err,
                  cases[i][1]);
        cr_assert_not(over, "case %zu is malformed, not over a limit", i);
        em_error_clear();
    }
    /* the length given is the text: a NUL or bytes past it are not read */
    cr_assert_str_eq(outcome("[1]", 2, roomy, NULL), "test: 'doc': corrupt JSON at byte 2: "
                                                     "premature end of input");
    em_error_clear();
    cr_assert_str_eq(outcome("[1]xyz", 3, roomy, NULL), "");
    cr_assert_str_eq(outcome("[\"a\\u00e9\"]", 11, roomy, NULL), "");
}

Test(json_reader, limits_are_checked_as_the_text_is_read)
{
    const struct {
        const char *text;
        em_json_limits limits;
        const char *why;
    } cases[] = {
        {"[[[]]]", {.max_depth = 2, .max_values = 10, .max_string = 10}, "nested deeper than 2"},
        {"{\"a\":{\"b\":[]}}", {.max_depth = 2, .max_values = 10, .max_string = 10},
         "at byte 10: nested deeper than 2"},
        {"[1,2,3]", {.max_depth = 2, .max_values = 3, .max_string = 10},
         "at byte 5: more than 3 values"},
        {"[{},{},{},{}]", {.max_depth = 2, .max_values = 4, .max_string = 10},
         "more than 4 values"},
        {"[\"abcde\"]", {.max_depth = 2, .max_values = 10, .max_string = 4},
         "a string longer than 4 bytes"},
        {"{\"abcde\":1}", {.max_depth = 2, .max_values = 10, .max_string = 4},
         "a string longer than 4 bytes"},
        {"[1.00000]", {.max_depth = 2, .max_values = 10, .max_string = 4},
         "a string longer than 4 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool over = false;
        const char *err = outcome(cases[i].text, strlen(cases[i].text), cases[i].limits, &over);
        cr_assert(strstr(err, cases[i].why), "case %zu: '%s' lacks '%s'", i, err, cases[i].why);
        cr_assert(over, "case %zu is over a limit", i);
        em_error_clear();
    }
    /* exactly at the limits is fine */
    em_json_limits exact = {.max_depth = 2, .max_values = 4, .max_string = 4};
    cr_assert_str_eq(outcome("[[\"abcd\"],1]", 12, exact, NULL), "");
    /* a depth beyond the reader's own stack is held to it */
    char deep[2 * EM_JSON_MAX_DEPTH + 3];
    memset(deep, '[', EM_JSON_MAX_DEPTH + 1);
    memset(deep + EM_JSON_MAX_DEPTH + 1, ']', EM_JSON_MAX_DEPTH + 1);
    char want[64];
    snprintf(want, sizeof want, "nested deeper than %d", EM_JSON_MAX_DEPTH);
    cr_assert(strstr(outcome(deep, 2 * EM_JSON_MAX_DEPTH + 2,
                             (em_json_limits){.max_depth = 1000, .max_values = 1000,
                                              .max_string = 10}, NULL),
                     want), "%s", em_error());
}

Test(json_reader, a_caller_rule_fails_at_the_last_token)
{
    em_json_reader r;
    start(&r, "{\"a\":1,\"a\":2}", roomy);
    cr_assert_eq(em_json_next(&r), EM_JSON_OBJECT);
    cr_assert_eq(em_json_next(&r), EM_JSON_KEY);
    cr_assert_eq(em_json_next(&r), EM_JSON_INTEGER);
    cr_assert_eq(em_json_next(&r), EM_JSON_KEY);
    cr_assert_eq(em_json_reader_fail(&r, "duplicate object key"), EM_JSON_ERROR);
    cr_assert_str_eq(em_error(), "test: 'doc': corrupt JSON at byte 7: duplicate object key");
    cr_assert_eq(em_error_status(), EM_ERR_IO);
    cr_assert_eq(em_json_next(&r), EM_JSON_ERROR, "an error is sticky");
    em_json_reader_free(&r);
}
