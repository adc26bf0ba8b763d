/* The distributed sampler: another sampler's epoch (the same on every rank, a pure function of
 * (seed, epoch)) padded by wrapping around, or cut, to a multiple of the world size and dealt
 * out round-robin: PyTorch DistributedSampler's layout, over any of data/'s samplers. */
#include <stdlib.h>

#include "distributed/dist.h"

typedef struct {
    em_sampler base;
    em_sampler *inner; /* owned */
    int rank, world;
    bool drop_last;
} dist_sampler;

static int64_t dist_len(const em_sampler *s)
{
    const dist_sampler *d = (const dist_sampler *)s;
    int64_t n = em_sampler_len(d->inner);
    return d->drop_last ? n / d->world : (n + d->world - 1) / d->world;
}

static em_status dist_indices(const em_sampler *s, uint64_t seed, int64_t epoch, int64_t *out)
{
    const dist_sampler *d = (const dist_sampler *)s;
    int64_t n = em_sampler_len(d->inner), len = dist_len(s);
    int64_t *all = malloc((size_t)(n > 0 ? n : 1) * sizeof *all);
    if (!all)
        return em_set_error(EM_ERR_MEMORY, "em_sampler_indices: out of memory");
    em_status st = em_sampler_indices(d->inner, seed, epoch, all);
    for (int64_t i = 0; st == EM_OK && i < len; i++)
        out[i] = all[(d->rank + i * d->world) % n];
    free(all);
    return st;
}

static void dist_free(em_sampler *s)
{
    em_sampler_free(((dist_sampler *)s)->inner);
    free(s);
}

static const em_sampler_vtable dist_vtable = {dist_len, dist_indices, dist_free};

em_sampler *em_distributed_sampler(em_sampler *inner, em_distributed_sampler_opts o)
{
    if (!inner)
        return NULL;
    if (o.world == 0 && o.rank == 0) {
        o.world = em_dist_world_size();
        o.rank = em_dist_rank();
    }
    dist_sampler *d = NULL;
    if (o.world <= 0 || o.rank < 0 || o.rank >= o.world)
        em_set_error(EM_ERR_ARG, "em_distributed_sampler: need 0 <= rank (%d) < world (%d)",
                     o.rank, o.world);
    else if (!(d = calloc(1, sizeof *d)))
        em_set_error(EM_ERR_MEMORY, "em_distributed_sampler: out of memory");
    if (!d) {
        em_sampler_free(inner);
        return NULL;
    }
    *d = (dist_sampler){.base.vt = &dist_vtable, .inner = inner, .rank = o.rank,
                        .world = o.world, .drop_last = o.drop_last};
    return &d->base;
}
