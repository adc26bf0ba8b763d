/* The protocol-buffers encoder: fields appended to a growing buffer in the wire format
 * (tag = field << 3 | wire type, base-128 varints, little-endian fixed32 and fixed64). */
#include <stdlib.h>
#include <string.h>

#include "io/protobuf_internal.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

void em_pb_free(em_pb *b)
{
    free(b->data);
    *b = (em_pb){0};
}

static void put(em_pb *b, const void *p, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void varint(em_pb *b, uint64_t v)
{
    uint8_t out[10];
    size_t n = 0;
    do {
        out[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, out, n);
}

static void tag(em_pb *b, int field, int wire)
{
    varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

static void fixed64(em_pb *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(u >> (8 * i));
    put(b, le, sizeof le);
}

void em_pb_int(em_pb *b, int field, int64_t v)
{
    tag(b, field, WIRE_VARINT);
    varint(b, (uint64_t)v); /* negative values take ten bytes, as protobuf's int64 does */
}

void em_pb_float(em_pb *b, int field, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    tag(b, field, WIRE_FIXED32);
    put(b, le, sizeof le);
}

void em_pb_double(em_pb *b, int field, double v)
{
    tag(b, field, WIRE_FIXED64);
    fixed64(b, v);
}

void em_pb_bytes(em_pb *b, int field, const void *p, size_t n)
{
    tag(b, field, WIRE_LEN);
    varint(b, n);
    put(b, p, n);
}

void em_pb_string(em_pb *b, int field, const char *s)
{
    em_pb_bytes(b, field, s, strlen(s));
}

void em_pb_packed_doubles(em_pb *b, int field, const double *v, size_t n)
{
    tag(b, field, WIRE_LEN);
    varint(b, 8 * n);
    for (size_t i = 0; i < n; i++)
        fixed64(b, v[i]);
}

void em_pb_append(em_pb *b, em_pb *more)
{
    if (more->failed)
        b->failed = true;
    else
        put(b, more->data, more->len);
    em_pb_free(more);
}

void em_pb_message(em_pb *b, int field, em_pb *sub)
{
    if (sub->failed)
        b->failed = true;
    else
        em_pb_bytes(b, field, sub->data, sub->len);
    em_pb_free(sub);
}
