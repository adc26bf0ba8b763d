/* Random generators: a seed and the next free Philox counter; the global one advances atomically
 * so threads drawing at once never share counters. */
#include "tensor/rng.h"

static em_generator global_gen = {.seed = 0, .offset = 0};

em_generator em_generator_new(uint64_t seed)
{
    return (em_generator){.seed = seed, .offset = 0};
}

void em_manual_seed(uint64_t seed)
{
    __atomic_store_n(&global_gen.seed, seed, __ATOMIC_RELAXED);
    __atomic_store_n(&global_gen.offset, 0, __ATOMIC_RELAXED);
}

em_generator *em_default_generator(void)
{
    return &global_gen;
}

uint64_t em_generator_advance(em_generator *gen, uint64_t n)
{
    em_generator *g = gen ? gen : &global_gen;
    return __atomic_fetch_add(&g->offset, n, __ATOMIC_RELAXED);
}
