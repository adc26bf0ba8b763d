/* Philox-4x32-10, the counter-based generator behind every random tensor: the numbers depend only
 * on (seed, counter), never on thread count or device. Header-only so CPU and CUDA share one copy. */
#ifndef EMBER_PHILOX_H
#define EMBER_PHILOX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define EM_HOST_DEVICE __host__ __device__
#else
#define EM_HOST_DEVICE
#endif

typedef struct {
    uint32_t v[4];
} em_philox_block;

static inline EM_HOST_DEVICE em_philox_block em_philox4x32_10(uint64_t counter, uint64_t seed)
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    em_philox_block out = {{c0, c1, c2, c3}};
    return out;
}

/* Uniform in [0, 1) from the top 24 bits: exactly representable in f32. */
static inline EM_HOST_DEVICE float em_philox_uniform(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

#ifdef __cplusplus
}
#endif

#endif
