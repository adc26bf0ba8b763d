/* dist_worker nccl: the collectives on CUDA tensors, through NCCL, checked on each rank against
 * the values worked out from the rank numbers. Without a GPU it prints a skip line. */
#include <stdio.h>

#include "ember.h"

static bool check(bool ok, int rank, const char *what)
{
    if (!ok)
        printf("rank %d: FAIL nccl %s: %s\n", rank, what, em_error());
    return ok;
}

int nccl_check(int rank, int world)
{
    em_scope_begin();
    em_tensor *d = em_to_device(em_full(EM_SHAPE(1000), EM_F32, rank + 1.0), EM_CUDA);
    if (!d) {
        printf("rank %d: CUDA test skipped: %s\n", rank, em_error());
        em_scope_end();
        return 0;
    }
    double sum = world * (world + 1) / 2.0;
    bool ok = check(em_dist_allreduce(d, EM_DIST_SUM) == EM_OK &&
                    em_get(em_to_device(d, EM_CPU), (int64_t[]){999}) == sum, rank, "sum");
    em_tensor *h = em_to_device(em_full(EM_SHAPE(8), EM_F16, rank + 1.0), EM_CUDA);
    ok &= check(h && em_dist_allreduce(h, EM_DIST_AVG) == EM_OK &&
                em_get(em_to_device(h, EM_CPU), (int64_t[]){0}) == sum / world, rank, "f16 avg");
    em_tensor *b = em_to_device(em_full(EM_SHAPE(4), EM_BF16, rank == 0 ? 3.0 : 0.0), EM_CUDA);
    ok &= check(b && em_dist_broadcast(b, 0) == EM_OK &&
                em_get(em_to_device(b, EM_CPU), (int64_t[]){3}) == 3.0, rank, "broadcast");
    em_tensor *all = em_to_device(em_zeros(EM_SHAPE(world, 1000), EM_F32), EM_CUDA);
    ok &= check(all && em_dist_allgather(d, all) == EM_OK &&
                em_get(em_to_device(all, EM_CPU), (int64_t[]){world - 1, 5}) == sum, rank,
                "allgather");
    em_scope_end();
    if (ok)
        printf("rank %d: nccl ok on %d ranks\n", rank, world);
    return ok ? 0 : 1;
}
