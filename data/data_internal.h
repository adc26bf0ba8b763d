/* What the data/ files share: the Philox key for a (seed, epoch, stream) triple, so shuffles and
 * random transforms draw from independent streams, and the keyed permutation. Not installed. */
#ifndef EMBER_DATA_INTERNAL_H
#define EMBER_DATA_INTERNAL_H

#include <stdint.h>

#include "backend/philox.h"
#include "tensor/tensor.h"

/* The shuffle draws from stream 0; transform k of a list draws from stream k + 1; samplers'
 * other draws and random_split from streams past 2^32. */
#define EM_DATA_STREAM_SHUFFLE 0
#define EM_DATA_STREAM_DRAWS (1ull << 32)
#define EM_DATA_STREAM_SPLIT (1ull << 33)

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

/* perm = a permutation of 0..n-1: Fisher-Yates driven by Philox with this key (the loader's
 * shuffle, random_split). */
void em_data_permutation(uint64_t key, int64_t n, int64_t *perm);

#endif
