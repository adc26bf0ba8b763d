/* The collectives on tensors: argument checks, a contiguous staging copy for other layouts, then
 * one work item through the communication thread (MPI for CPU tensors, NCCL for CUDA ones). */
#include <stdio.h>

#include "distributed/dist_internal.h"
#include "tensor/tensor_internal.h"

static bool communicable(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64 || dt == EM_F16 || dt == EM_BF16 || dt == EM_I32 ||
           dt == EM_I64 || dt == EM_I8 || dt == EM_U8;
}

static em_status check_tensor(const char *fn, const em_tensor *t)
{
    if (!t)
        return em_has_error() ? em_error_status()
                              : em_set_error(EM_ERR_ARG, "%s: NULL tensor", fn);
    if (!communicable(t->dtype))
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, "
                            "bf16, i32, i64, i8, u8)", fn, em_dtype_name(t->dtype));
    if (t->device == EM_CUDA && !em_nccl_built())
        return em_set_error(EM_ERR_UNSUPPORTED, "%s: a cuda tensor needs NCCL, and this build "
                            "has none (configure with the CUDA toolkit)", fn);
    return EM_OK;
}

static em_status check_root(const char *fn, int root)
{
    int world = em_dist_world_size();
    if (root < 0 || root >= world)
        return em_set_error(EM_ERR_ARG, "%s: root %d is not a rank of this world of %d", fn,
                            root, world);
    return EM_OK;
}

/* Run one collective on t in place, through a contiguous copy when t is not contiguous. */
static em_status run_in_place(em_dist_work w, em_tensor *t)
{
    em_tensor *c = em_tensor_contiguous_raw(t);
    if (!c)
        return em_error_status();
    w.data = em_data_ptr(c);
    w.count = em_numel(c);
    w.dtype = c->dtype;
    w.device = c->device;
    em_status st = em_dist_submit(&w);
    if (st == EM_OK)
        st = em_dist_wait(&w);
    if (st == EM_OK && c != t)
        st = em_copy_(t, c);
    em_release(c);
    return st;
}

em_status em_dist_allreduce(em_tensor *t, em_dist_op op)
{
    static const char *fn = "em_dist_allreduce";
    em_status st = check_tensor(fn, t);
    if (st != EM_OK)
        return st;
    if (op < EM_DIST_SUM || op > EM_DIST_MIN)
        return em_set_error(EM_ERR_ARG, "%s: unknown op %d", fn, (int)op);
    if (op == EM_DIST_AVG && !em_dtype_is_float(t->dtype))
        return em_set_error(EM_ERR_ARG, "%s: AVG needs a floating-point tensor, not %s", fn,
                            em_dtype_name(t->dtype));
    return run_in_place((em_dist_work){.kind = EM_DIST_WORK_ALLREDUCE, .fn = fn, .op = op}, t);
}

em_status em_dist_broadcast(em_tensor *t, int root)
{
    static const char *fn = "em_dist_broadcast";
    em_status st = check_tensor(fn, t);
    if (st == EM_OK)
        st = check_root(fn, root);
    if (st != EM_OK)
        return st;
    return run_in_place((em_dist_work){.kind = EM_DIST_WORK_BROADCAST, .fn = fn, .root = root},
                        t);
}

em_status em_dist_barrier(void)
{
    em_dist_work w = {.kind = EM_DIST_WORK_BARRIER, .fn = "em_dist_barrier"};
    em_status st = em_dist_submit(&w);
    return st == EM_OK ? em_dist_wait(&w) : st;
}

em_status em_dist_allgather(const em_tensor *t, em_tensor *out)
{
    static const char *fn = "em_dist_allgather";
    em_status st = check_tensor(fn, t);
    if (st == EM_OK)
        st = check_tensor(fn, out);
    if (st != EM_OK)
        return st;
    em_shape want = {.ndim = t->ndim + 1};
    want.d[0] = em_dist_world_size();
    for (int i = 0; i < t->ndim; i++)
        want.d[i + 1] = t->shape[i];
    em_shape got = em_shape_of(out);
    bool same = got.ndim == want.ndim;
    for (int i = 0; same && i < want.ndim; i++)
        same = got.d[i] == want.d[i];
    if (!same || out->dtype != t->dtype || out->device != t->device || !em_is_contiguous(out)) {
        char a[64], b[64];
        return em_set_error(EM_ERR_ARG, "%s: out must be a contiguous %s %s tensor on %s, not "
                            "%s %s on %s", fn, em_shape_fmt(&want, a, sizeof a),
                            em_dtype_name(t->dtype), em_device_name(t->device),
                            em_shape_fmt(&got, b, sizeof b), em_dtype_name(out->dtype),
                            em_device_name(out->device));
    }
    em_tensor *c = em_tensor_contiguous_raw(t);
    if (!c)
        return em_error_status();
    em_dist_work w = {.kind = EM_DIST_WORK_ALLGATHER, .fn = fn, .data = em_data_ptr(c),
                      .recv = em_data_ptr(out), .count = em_numel(c), .dtype = c->dtype,
                      .device = c->device};
    st = em_dist_submit(&w);
    if (st == EM_OK)
        st = em_dist_wait(&w);
    em_release(c);
    return st;
}

em_status em_dist_any(bool flag, bool *any)
{
    *any = flag;
    if (!em_dist_initialized())
        return EM_OK;
    int32_t v = flag;
    em_dist_work w = {.kind = EM_DIST_WORK_ALLREDUCE, .fn = "em_dist_any", .data = &v,
                      .count = 1, .dtype = EM_I32, .device = EM_CPU, .op = EM_DIST_MAX};
    em_status st = em_dist_submit(&w);
    if (st == EM_OK)
        st = em_dist_wait(&w);
    *any = st == EM_OK && v != 0;
    return st;
}
