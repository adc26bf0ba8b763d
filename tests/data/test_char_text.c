/* Character-level text: the vocabulary of a text (ascending bytes), encoding and decoding through
 * it with the first unknown character named, a vocabulary rebuilt from its characters, and the
 * windows dataset's samples and count. */
#include <criterion/criterion.h>
#include <string.h>

#include "ember.h"

TestSuite(char_text, .init = em_scope_begin, .fini = em_scope_end);

Test(char_text, vocabulary_encode_decode)
{
    const char *text = "hello, world\n";
    em_char_vocab v = em_char_vocab_of(text, strlen(text));
    cr_expect_eq(v.size, 10); /* \n space , d e h l o r w */
    cr_expect_eq(memcmp(v.chars, "\n ,dehlorw", 10), 0);
    uint8_t ids[13];
    cr_assert_eq(em_char_vocab_encode(&v, text, 13, ids), EM_OK);
    cr_expect_eq(ids[0], 5); /* h */
    cr_expect_eq(ids[12], 0); /* \n */
    int64_t wide[13];
    for (int i = 0; i < 13; i++)
        wide[i] = ids[i];
    char back[14] = {0};
    cr_assert_eq(em_char_vocab_decode(&v, wide, 13, back), EM_OK);
    cr_expect_str_eq(back, text);
    cr_expect_eq(em_char_vocab_encode(&v, "hex", 3, ids), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "character 'x' (at 2) is not in the vocabulary"), "%s",
              em_error());
    em_error_clear();
    wide[3] = 10;
    cr_expect_eq(em_char_vocab_decode(&v, wide, 13, back), EM_ERR_ARG);
    em_error_clear();
}

Test(char_text, vocabulary_from_its_characters)
{
    em_char_vocab v, w = em_char_vocab_of("banana", 6);
    cr_assert_eq(em_char_vocab_from((const char *)w.chars, (size_t)w.size, &v), EM_OK);
    cr_expect_eq(v.size, 3);
    cr_expect_eq(v.ids['n'], 2);
    cr_expect_eq(v.ids['z'], -1);
    cr_expect_eq(em_char_vocab_from("ba", 2, &v), EM_ERR_ARG);
    cr_expect(strstr(em_error(), "distinct and ascending"), "%s", em_error());
    em_error_clear();
    cr_expect_eq(em_char_vocab_from("", 0, &v), EM_ERR_ARG);
    em_error_clear();
}

/* NULL where n > 0 says which argument, in every function of the vocabulary */
Test(char_text, null_text_ids_or_chars_are_errors)
{
    em_char_vocab v = em_char_vocab_of(NULL, 5);
    cr_expect_eq(v.size, 0);
    cr_expect_str_eq(em_error(), "em_char_vocab_of: text is NULL");
    em_error_clear();
    cr_expect_eq(em_char_vocab_from(NULL, 3, &v), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_char_vocab_from: chars is NULL");
    em_error_clear();
    v = em_char_vocab_of("abc", 3);
    uint8_t ids[3];
    cr_expect_eq(em_char_vocab_encode(&v, NULL, 3, ids), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_char_vocab_encode: text is NULL");
    em_error_clear();
    cr_expect_eq(em_char_vocab_encode(&v, "abc", 3, NULL), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_char_vocab_encode: ids is NULL");
    em_error_clear();
    char text[2];
    cr_expect_eq(em_char_vocab_decode(&v, NULL, 2, text), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_char_vocab_decode: ids is NULL");
    em_error_clear();
    cr_expect_eq(em_char_vocab_decode(&v, (int64_t[]){0, 1}, 2, NULL), EM_ERR_ARG);
    cr_expect_str_eq(em_error(), "em_char_vocab_decode: text is NULL");
    em_error_clear();
    cr_expect_eq(em_char_vocab_decode(&v, NULL, 0, NULL), EM_OK, "nothing to decode");
}

Test(char_text, windows_are_next_character_samples)
{
    uint8_t ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    em_dataset *all = em_char_windows_dataset(ids, 10, 4, 1);
    em_dataset *cut = em_char_windows_dataset(ids, 10, 4, 4);
    cr_assert(all && cut, "%s", em_error());
    cr_expect_eq(em_dataset_len(all), 6); /* starts 0..5: the last target is ids[9] */
    cr_expect_eq(em_dataset_len(cut), 2); /* starts 0 and 4 */
    int64_t x[4], y[4];
    cr_assert_eq(em_dataset_get(all, 5, x, y), EM_OK);
    for (int t = 0; t < 4; t++) {
        cr_expect_eq(x[t], 5 + t);
        cr_expect_eq(y[t], 6 + t);
    }
    cr_assert_eq(em_dataset_get(cut, 1, x, y), EM_OK);
    cr_expect_eq(x[0], 4);
    cr_expect_eq(y[3], 8);
    cr_expect_eq(all->n_classes, 10);
    cr_expect_eq(all->x_dtype, EM_I64);
    em_dataset_free(all);
    em_dataset_free(cut);
    cr_expect_null(em_char_windows_dataset(ids, 10, 0, 1));
    em_error_clear();
}
