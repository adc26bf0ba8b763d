/* A small protocol-buffers encoder, the write side only: varints, length-delimited fields, 32- and
 * 64-bit floats, packed repeated doubles and nested messages; what TensorBoard event files (and
 * ONNX export) need. Not installed. */
#ifndef EMBER_IO_PROTOBUF_INTERNAL_H
#define EMBER_IO_PROTOBUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer; a failed allocation sets failed and later writes do nothing. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} em_pb;

void em_pb_free(em_pb *b);
void em_pb_int(em_pb *b, int field, int64_t v);                  /* varint (wire type 0) */
void em_pb_float(em_pb *b, int field, float v);                  /* fixed32 (wire type 5) */
void em_pb_double(em_pb *b, int field, double v);                /* fixed64 (wire type 1) */
void em_pb_bytes(em_pb *b, int field, const void *p, size_t n);  /* length-delimited (2) */
void em_pb_string(em_pb *b, int field, const char *s);
/* repeated double, packed: one length-delimited field of n little-endian fixed64 values */
void em_pb_packed_doubles(em_pb *b, int field, const double *v, size_t n);
/* Appends sub as a nested message in field and frees sub (a failed sub fails b). */
void em_pb_message(em_pb *b, int field, em_pb *sub);
/* Appends the fields encoded in more, as they are, and frees more (a failed more fails b). */
void em_pb_append(em_pb *b, em_pb *more);

#endif
