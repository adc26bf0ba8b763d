/* dist_worker collectives: every collective of distributed/ on each dtype, run on every rank; each rank
 * checks the values it gets against the ones worked out from the rank numbers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ember.h"

static int rank, world;

static bool check(bool ok, const char *what)
{
    if (!ok) {
        printf("rank %d: FAIL %s %s\n", rank, what, em_error());
        fflush(stdout);
    }
    return ok;
}

/* t = (rank + 1) * [1, 2, ..., n] in dtype, reduced with op; every element must be want * i. */
static bool reduce_case(em_dtype dt, em_dist_op op, double want_per_unit, const char *what)
{
    em_scope_begin();
    em_tensor *t = em_mul_scalar(em_arange(1, 6, 1, EM_F64), rank + 1);
    t = em_to_dtype(t, dt);
    bool ok = t && em_dist_allreduce(t, op) == EM_OK;
    for (int64_t i = 0; ok && i < 5; i++)
        ok = em_get(t, &i) == want_per_unit * (double)(i + 1);
    em_scope_end();
    return check(ok, what);
}

static bool reductions(void)
{
    double sum = world * (world + 1) / 2.0;
    bool ok = true;
    const em_dtype floats[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (int k = 0; k < 4; k++) {
        ok &= reduce_case(floats[k], EM_DIST_SUM, sum, em_dtype_name(floats[k]));
        ok &= reduce_case(floats[k], EM_DIST_AVG, sum / world, "avg");
    }
    ok &= reduce_case(EM_I32, EM_DIST_MAX, world, "i32 max");
    ok &= reduce_case(EM_I64, EM_DIST_MIN, 1, "i64 min");
    ok &= reduce_case(EM_I8, EM_DIST_SUM, sum, "i8 sum");
    ok &= reduce_case(EM_U8, EM_DIST_MAX, world, "u8 max");
    return ok;
}

/* A transposed (non-contiguous) view is reduced in place through a staging copy. */
static bool strided(void)
{
    em_scope_begin();
    em_tensor *base = em_mul_scalar(em_reshape(em_arange(0, 6, 1, EM_F32), EM_SHAPE(2, 3)),
                                    rank + 1);
    em_tensor *view = em_transpose(base, 0, 1); // (3, 2)
    bool ok = view && em_dist_allreduce(view, EM_DIST_SUM) == EM_OK;
    double sum = world * (world + 1) / 2.0;
    for (int64_t i = 0; ok && i < 2; i++)
        for (int64_t j = 0; ok && j < 3; j++)
            ok = em_get(base, (int64_t[]){i, j}) == sum * (double)(3 * i + j);
    em_scope_end();
    return check(ok, "strided allreduce");
}

static bool broadcast_gather(void)
{
    em_scope_begin();
    int root = world - 1;
    em_tensor *t = em_full(EM_SHAPE(4), EM_F64, rank == root ? 2.5 : -1);
    bool ok = em_dist_broadcast(t, root) == EM_OK && em_get(t, (int64_t[]){3}) == 2.5;
    em_tensor *mine = em_full(EM_SHAPE(3), EM_I64, 10 * rank + 1);
    em_tensor *all = em_zeros(EM_SHAPE(world, 3), EM_I64);
    ok = ok && em_dist_allgather(mine, all) == EM_OK;
    for (int64_t r = 0; ok && r < world; r++)
        ok = em_get(all, (int64_t[]){r, 2}) == 10.0 * (double)r + 1;
    ok = ok && em_dist_barrier() == EM_OK;
    em_scope_end();
    return check(ok, "broadcast/allgather/barrier");
}

/* y = sum over ranks of x; loss = sum((rank + 1) y): x.grad = sum over ranks of (rank + 1). */
static bool differentiable_sum(void)
{
    em_scope_begin();
    em_tensor *x = em_requires_grad_(em_full(EM_SHAPE(3), EM_F32, rank + 1.0), true);
    em_tensor *y = em_dist_sum_over_ranks(x);
    em_tensor *loss = em_sum_all(em_mul_scalar(y, rank + 1.0));
    double sum = world * (world + 1) / 2.0;
    bool ok = loss && em_backward(loss) == EM_OK && em_get(y, (int64_t[]){0}) == sum &&
              em_get(x->grad, (int64_t[]){2}) == sum;
    em_scope_end();
    return check(ok, "sum_over_ranks");
}

static bool agreement_and_errors(void)
{
    bool any = false, ok = em_dist_any(rank == world - 1, &any) == EM_OK && any;
    em_scope_begin();
    em_tensor *b = em_zeros(EM_SHAPE(2), EM_BOOL);
    ok = ok && em_dist_allreduce(b, EM_DIST_SUM) == EM_ERR_UNSUPPORTED &&
         strstr(em_error(), "dtype bool is not supported");
    em_error_clear();
    em_tensor *f = em_zeros(EM_SHAPE(2), EM_F32);
    ok = ok && em_dist_broadcast(f, world) == EM_ERR_ARG && strstr(em_error(), "root");
    em_error_clear();
    em_tensor *i = em_zeros(EM_SHAPE(2), EM_I32);
    ok = ok && em_dist_allreduce(i, EM_DIST_AVG) == EM_ERR_ARG;
    em_error_clear();
    em_scope_end();
    return check(ok, "any/argument errors");
}

int collectives_check(int rank_, int world_)
{
    rank = rank_;
    world = world_;
    bool ok = reductions() & strided() & broadcast_gather() & differentiable_sum() &
              agreement_and_errors();
    if (!ok) {
        em_dist_fail("collectives check failed");
        em_dist_finalize();
        return 1;
    }
    printf("rank %d: collectives ok\n", rank);
    return 0;
}
