/* What the data/ files share: the Philox key for a (seed, epoch, stream) triple, so shuffles and
 * random transforms draw from independent streams. Not installed. */
#ifndef EMBER_DATA_INTERNAL_H
#define EMBER_DATA_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "backend/philox.h"
#include "tensor/tensor.h"

/* The shuffle draws from stream 0; transform k of a list draws from stream k + 1. */
#define EM_DATA_STREAM_SHUFFLE 0

static inline uint64_t em_data_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The Philox key of one stream of one epoch. */
static inline uint64_t em_data_key(uint64_t seed, uint64_t epoch, uint64_t stream)
{
    return em_data_mix64(seed ^ em_data_mix64(epoch * 0x9E3779B97F4A7C15ull + stream));
}

/* A uniform integer in [0, n) from 32 random bits (multiply-shift). */
static inline uint32_t em_data_below(uint32_t bits, uint32_t n)
{
    return (uint32_t)(((uint64_t)bits * n) >> 32);
}

static inline int64_t em_data_numel(const em_shape *s)
{
    int64_t n = 1;
    for (int k = 0; k < s->ndim; k++)
        n *= s->d[k];
    return n;
}

/* "[1,28,28]" into buf; returns buf. */
static inline const char *em_data_shape_str(const em_shape *s, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int k = 0; k < s->ndim && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, k ? ",%lld" : "%lld", (long long)s->d[k]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}

#endif
