/* TFRecord framing, the container of TensorBoard event files: each record is its length (u64,
 * little-endian), the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of the
 * data. Not installed. */
#ifndef EMBER_IO_TFRECORD_INTERNAL_H
#define EMBER_IO_TFRECORD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/error.h"

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): "123456789" gives 0xE3069283. */
uint32_t em_crc32c(const void *p, size_t n);
/* TFRecord's mask over it: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t em_crc32c_masked(const void *p, size_t n);
/* Appends one record to f in a single write and flushes it, so a crash leaves every earlier
 * record whole; EM_ERR_IO "fn: cannot write 'path': ..." on failure. */
em_status em_tfrecord_write(FILE *f, const void *data, size_t n, const char *fn,
                            const char *path);

#endif
