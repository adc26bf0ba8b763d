/* libFuzzer target: safetensors headers made large from a small input (em_safetensors_load), so
 * that a reader costing many times a header's size fails the campaign's memory limit
 * (fuzz_safetensors_header.options: 512 MB; a tree of 4 MB of empty objects took over 600). The
 * input up to a first 0xFF byte starts the header, the bytes up to a second 0xFF are repeated to
 * about 4 MB (each '#' in them replaced by the repeat's number, so that names can differ), the
 * bytes up to a third end it, and the rest is the data section; an input with fewer than two
 * 0xFF bytes is the whole header. Any input must load with every tensor's bytes readable or fail
 * with a message, never crash, leak or take more than the limit. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define HEADER_TARGET ((size_t)4 << 20) /* the repeated part fills about this much */

/* The input split at its 0xFF bytes: parts[0..4), the 4th the data section, each (start, len). */
static int split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len)
{
    int n = 0;
    part[0] = data;
    for (size_t i = 0; i < size && n < 3; i++)
        if (data[i] == 0xFF) {
            len[n] = (size_t)(data + i - part[n]);
            part[++n] = data + i + 1;
        }
    len[n] = (size_t)(data + size - part[n]);
    return n + 1;
}

/* The file: 8-byte length, the header (start, repeats of the middle, end), the data section. */
static uint8_t *build(const uint8_t *data, size_t size, size_t *file_len)
{
    const uint8_t *part[4] = {0};
    size_t len[4] = {0};
    int parts = split(data, size, part, len);
    size_t repeats = parts >= 3 && len[1] ? HEADER_TARGET / len[1] : 0;
    size_t cap = 8 + len[0] + repeats * (len[1] + 20) + len[2] + len[3] + (parts < 3 ? size : 0);
    uint8_t *file = malloc(cap + 1);
    if (!file)
        abort(); /* a broken harness, not a finding */
    size_t at = 8;
    if (parts < 3) {
        memcpy(file + at, data, size);
        at += size;
    } else {
        memcpy(file + at, part[0], len[0]);
        at += len[0];
        for (size_t r = 0; r < repeats; r++)
            for (size_t k = 0; k < len[1]; k++)
                if (part[1][k] == '#')
                    at += (size_t)sprintf((char *)file + at, "%zu", r);
                else
                    file[at++] = part[1][k];
        memcpy(file + at, part[2], len[2]);
        at += len[2];
    }
    uint64_t header = at - 8;
    memcpy(file, &header, 8); /* little-endian, as every machine ember fuzzes on */
    if (parts == 4) {
        memcpy(file + at, part[3], len[3]);
        at += len[3];
    }
    *file_len = at;
    return file;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    uint8_t *file = build(data, size, &n);
    const char *path = fuzz_input_file(0, file, n);
    free(file);
    fuzz_load_safetensors(path);
    return 0;
}
