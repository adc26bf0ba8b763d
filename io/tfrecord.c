/* TFRecord framing and the CRC-32C it checks records with (a byte-wise table, built once). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/tfrecord_internal.h"

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
}

uint32_t em_crc32c(const void *p, size_t n)
{
    pthread_once(&table_once, make_table);
    const uint8_t *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t em_crc32c_masked(const void *p, size_t n)
{
    uint32_t c = em_crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

em_status em_tfrecord_write(FILE *f, const void *data, size_t n, const char *fn,
                            const char *path)
{
    uint8_t *rec = malloc(n + 16);
    if (!rec)
        return em_set_error(EM_ERR_MEMORY, "%s: out of memory for a %zu-byte record", fn, n);
    put_le(rec, n, 8);
    put_le(rec + 8, em_crc32c_masked(rec, 8), 4);
    memcpy(rec + 12, data, n);
    put_le(rec + 12 + n, em_crc32c_masked(data, n), 4);
    bool ok = fwrite(rec, 1, n + 16, f) == n + 16 && fflush(f) == 0;
    int err = errno;
    free(rec);
    return ok ? EM_OK : em_set_error(EM_ERR_IO, "%s: cannot write '%s': %s", fn, path,
                                     strerror(err));
}
