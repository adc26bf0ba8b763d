/* libFuzzer target: character-level text (data/char_text.c), as the gpt recipe reads its corpus
 * and a model file's saved vocabulary. The input is a window length byte, a stride byte, a count
 * byte N, N bytes of a saved vocabulary, then the text. A saved vocabulary loads or fails with a
 * message; the text's own vocabulary encodes it and decodes back to the same bytes; its windows
 * (any length and stride, 0 included) load or fail with a message and every sample reads back. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* text encoded with v and decoded back must be text again (when every character is in v) */
static void round_trip(const em_char_vocab *v, const char *text, size_t n, uint8_t *ids)
{
    int64_t *wide = malloc((n ? n : 1) * sizeof *wide);
    char *back = malloc(n ? n : 1);
    assert(wide && back);
    if (em_char_vocab_encode(v, text, n, ids) == EM_OK) {
        for (size_t i = 0; i < n; i++)
            wide[i] = ids[i];
        assert(em_char_vocab_decode(v, wide, n, back) == EM_OK);
        assert(memcmp(back, text, n) == 0);
    } else {
        assert(em_error()[0]);
    }
    em_error_clear();
    free(wide);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    int64_t len = data[0] % 17, stride = data[1] % 9;
    size_t n_saved = data[2] < size - 3 ? data[2] : size - 3;
    const char *saved = (const char *)data + 3, *text = saved + n_saved;
    size_t n = size - 3 - n_saved;
    uint8_t *ids = malloc(n ? n : 1);
    assert(ids);
    em_error_clear();
    em_char_vocab v;
    if (em_char_vocab_from(saved, n_saved, &v) == EM_OK)
        round_trip(&v, text, n, ids);
    else
        assert(em_error()[0]);
    em_error_clear();
    em_char_vocab own = em_char_vocab_of(text, n);
    assert(own.size <= 256);
    round_trip(&own, text, n, ids);
    em_dataset *ds = em_char_windows_dataset(ids, (int64_t)n, len, stride);
    if (ds)
        fuzz_read_samples(ds, 64);
    else
        assert(em_error()[0]);
    em_error_clear();
    free(ids);
    return 0;
}
