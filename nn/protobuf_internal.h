/* A small protocol-buffers encoder: the write side only, which is all ONNX export needs
 * (varints, length-delimited fields, 32-bit floats, nested messages). Not installed. */
#ifndef EMBER_PROTOBUF_INTERNAL_H
#define EMBER_PROTOBUF_INTERNAL_H

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
void em_pb_bytes(em_pb *b, int field, const void *p, size_t n);  /* length-delimited (2) */
void em_pb_string(em_pb *b, int field, const char *s);
/* Appends sub as a nested message in field and frees sub (a failed sub fails b). */
void em_pb_message(em_pb *b, int field, em_pb *sub);

#endif
