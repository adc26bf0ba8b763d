/* The UTF-8 check that names bound for files pass (io/utf8.c): RFC 3629's valid forms accepted,
 * overlong forms, surrogates, code points past U+10FFFF, stray and cut sequences refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "io/utf8.h"

static size_t valid_len(const char *s)
{
    return em_utf8_valid_len(s, strlen(s));
}

Test(utf8, valid_forms_pass_whole)
{
    const char *ok[] = {"", "loss", "caf\xc3\xa9", "\xe2\x82\xac", "\xed\x9f\xbf", "\xee\x80\x80",
                        "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "a\xc2\x80z"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_expect_eq(valid_len(ok[i]), strlen(ok[i]), "case %zu", i);
        cr_expect_eq(em_utf8_check("f", "name", ok[i]), EM_OK, "case %zu", i);
    }
}

Test(utf8, invalid_forms_stop_at_their_first_byte)
{
    const struct { const char *s; size_t at; } bad[] = {
        {"ab\xff", 2},             /* never in UTF-8 */
        {"\x80", 0},               /* a continuation byte alone */
        {"x\xc0\xaf", 1},          /* overlong '/' */
        {"\xc1\xbf", 0},           /* overlong */
        {"\xe0\x9f\xbf", 0},       /* overlong 3-byte form */
        {"\xed\xa0\x80", 0},       /* a UTF-16 surrogate, U+D800 */
        {"\xf0\x8f\xbf\xbf", 0},   /* overlong 4-byte form */
        {"\xf4\x90\x80\x80", 0},   /* U+110000 */
        {"\xf5\x80\x80\x80", 0},
        {"ok\xe2\x82", 2},         /* cut short */
        {"\xe2\x28\xa1", 0},       /* a continuation that is not one */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(valid_len(bad[i].s), bad[i].at, "case %zu", i);
}

Test(utf8, the_error_shows_the_valid_start_and_the_bad_byte)
{
    em_error_clear();
    cr_assert_eq(em_utf8_check("em_tb_writer_add_scalar", "tag", "loss/\xc3\xa9t\xe9"), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_tb_writer_add_scalar: tag \"loss/\xc3\xa9t\" is followed by byte "
                                 "0xe9 at offset 8, which is not UTF-8");
    em_error_clear();
}
