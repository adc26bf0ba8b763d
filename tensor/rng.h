/* Random generators: a seed and a Philox counter offset. Each random tensor takes the next
 * ceil(numel / 4) counters, so a run is reproducible on any thread count and device. */
#ifndef EMBER_RNG_H
#define EMBER_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_generator {
    uint64_t seed;
    uint64_t offset; /* next unused Philox counter */
} em_generator;

em_generator em_generator_new(uint64_t seed);
void em_manual_seed(uint64_t seed);      /* reseeds the global generator (offset 0) */
em_generator *em_default_generator(void); /* the global generator; state can be saved and set */
/* Reserve n counters of gen (or the global one when NULL); returns the first. */
uint64_t em_generator_advance(em_generator *gen, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
