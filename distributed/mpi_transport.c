/* Collectives on host memory over MPI's non-blocking collectives, on a communicator of their
 * own. f16 and bf16 travel as 16-bit datatypes of ember's with reduction ops that add (or
 * compare) in f32; counts beyond MPI's int run as several chunks. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "distributed/dist_internal.h"

#define CHUNK_ELEMS (1LL << 30)

static MPI_Comm coll = MPI_COMM_NULL;
static MPI_Datatype dt_f16 = MPI_DATATYPE_NULL, dt_bf16 = MPI_DATATYPE_NULL;
static MPI_Op half_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}; /* sum, max, min */

typedef struct {
    MPI_Request req;
    em_dist_work *w;
    int64_t offset, chunk; /* elements done before the running chunk, and its length */
} mpi_handle;

static float half_to_f32(uint16_t h, bool bf)
{
    return bf ? em_bf16_to_f32(h) : em_f16_to_f32(h);
}

static uint16_t f32_to_half(float x, bool bf)
{
    return bf ? em_f32_to_bf16(x) : em_f32_to_f16(x);
}

static void half_reduce(const void *in, void *inout, int *len, MPI_Datatype *dt, int which)
{
    const uint16_t *a = in;
    uint16_t *b = inout;
    bool bf = *dt == dt_bf16;
    for (int i = 0; i < *len; i++) {
        float x = half_to_f32(a[i], bf), y = half_to_f32(b[i], bf);
        float r = which == 0 ? x + y : which == 1 ? (x > y ? x : y) : (x < y ? x : y);
        b[i] = f32_to_half(r, bf);
    }
}

static void half_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    half_reduce(in, inout, len, dt, 0);
}

static void half_max(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    half_reduce(in, inout, len, dt, 1);
}

static void half_min(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    half_reduce(in, inout, len, dt, 2);
}

em_status em_mpi_transport_init(char *msg)
{
    bool ok = MPI_Comm_dup(MPI_COMM_WORLD, &coll) == MPI_SUCCESS &&
              MPI_Comm_set_errhandler(coll, MPI_ERRORS_RETURN) == MPI_SUCCESS &&
              MPI_Type_contiguous(2, MPI_BYTE, &dt_f16) == MPI_SUCCESS &&
              MPI_Type_commit(&dt_f16) == MPI_SUCCESS &&
              MPI_Type_contiguous(2, MPI_BYTE, &dt_bf16) == MPI_SUCCESS &&
              MPI_Type_commit(&dt_bf16) == MPI_SUCCESS &&
              MPI_Op_create(half_sum, 1, &half_ops[0]) == MPI_SUCCESS &&
              MPI_Op_create(half_max, 1, &half_ops[1]) == MPI_SUCCESS &&
              MPI_Op_create(half_min, 1, &half_ops[2]) == MPI_SUCCESS;
    if (!ok) {
        snprintf(msg, EM_DIST_MSG_MAX, "em_dist_init: cannot set up MPI communicators and "
                                       "datatypes");
        return EM_ERR_STATE;
    }
    return EM_OK;
}

void em_mpi_transport_finalize(void)
{
    for (int i = 0; i < 3; i++)
        if (half_ops[i] != MPI_OP_NULL)
            MPI_Op_free(&half_ops[i]);
    if (dt_f16 != MPI_DATATYPE_NULL)
        MPI_Type_free(&dt_f16);
    if (dt_bf16 != MPI_DATATYPE_NULL)
        MPI_Type_free(&dt_bf16);
    if (coll != MPI_COMM_NULL)
        MPI_Comm_free(&coll);
}

static MPI_Datatype datatype(em_dtype dt)
{
    switch (dt) {
    case EM_F32: return MPI_FLOAT;
    case EM_F64: return MPI_DOUBLE;
    case EM_F16: return dt_f16;
    case EM_BF16: return dt_bf16;
    case EM_I32: return MPI_INT32_T;
    case EM_I64: return MPI_INT64_T;
    case EM_I8: return MPI_INT8_T;
    case EM_U8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op reduce_op(em_dist_op op, em_dtype dt)
{
    bool half = dt == EM_F16 || dt == EM_BF16;
    if (op == EM_DIST_MAX)
        return half ? half_ops[1] : MPI_MAX;
    if (op == EM_DIST_MIN)
        return half ? half_ops[2] : MPI_MIN;
    return half ? half_ops[0] : MPI_SUM;
}

static em_status mpi_error(int rc, const char *fn, char *msg)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    snprintf(msg, EM_DIST_MSG_MAX, "%s: MPI error: %s", fn, s);
    return EM_ERR_STATE;
}

static em_status start_chunk(mpi_handle *h, char *msg)
{
    em_dist_work *w = h->w;
    int64_t left = w->count - h->offset;
    h->chunk = left < CHUNK_ELEMS ? left : CHUNK_ELEMS;
    char *data = w->data ? (char *)w->data + (size_t)h->offset * em_dtype_size(w->dtype)
                         : NULL; /* a barrier has no data: no offset from NULL */
    MPI_Datatype dt = datatype(w->dtype);
    int n = (int)h->chunk, rc = MPI_SUCCESS;
    switch (w->kind) {
    case EM_DIST_WORK_ALLREDUCE:
        rc = MPI_Iallreduce(MPI_IN_PLACE, data, n, dt, reduce_op(w->op, w->dtype), coll, &h->req);
        break;
    case EM_DIST_WORK_BROADCAST:
        rc = MPI_Ibcast(data, n, dt, w->root, coll, &h->req);
        break;
    case EM_DIST_WORK_BARRIER:
        h->chunk = w->count;
        rc = MPI_Ibarrier(coll, &h->req);
        break;
    case EM_DIST_WORK_ALLGATHER:
        h->chunk = w->count;
        rc = MPI_Iallgather(w->data, n, dt, w->recv, n, dt, coll, &h->req);
        break;
    }
    return rc == MPI_SUCCESS ? EM_OK : mpi_error(rc, w->fn, msg);
}

static em_status mpi_start(em_dist_work *w, void **handle, char *msg)
{
    int world = 1;
    MPI_Comm_size(coll, &world);
    if (w->kind != EM_DIST_WORK_BARRIER && datatype(w->dtype) == MPI_DATATYPE_NULL) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: dtype %s cannot be communicated", w->fn,
                 em_dtype_name(w->dtype));
        return EM_ERR_UNSUPPORTED;
    }
    if (w->kind == EM_DIST_WORK_ALLGATHER && w->count * world > INT_MAX) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: %lld elements per rank is too many to gather", w->fn,
                 (long long)w->count);
        return EM_ERR_UNSUPPORTED;
    }
    mpi_handle *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: out of memory", w->fn);
        return EM_ERR_MEMORY;
    }
    h->w = w;
    *handle = h;
    em_status st = start_chunk(h, msg);
    if (st != EM_OK) {
        free(h);
        *handle = NULL;
    }
    return st;
}

/* AVG: the sum divided by the world size, in place on the host. */
static void divide(em_dist_work *w, int world)
{
    if (w->kind != EM_DIST_WORK_ALLREDUCE || w->op != EM_DIST_AVG || world == 1)
        return;
    double inv = 1.0 / world;
    for (int64_t i = 0; i < w->count; i++) {
        if (w->dtype == EM_F32)
            ((float *)w->data)[i] = (float)(((float *)w->data)[i] * inv);
        else if (w->dtype == EM_F64)
            ((double *)w->data)[i] *= inv;
        else if (w->dtype == EM_F16 || w->dtype == EM_BF16) {
            bool bf = w->dtype == EM_BF16;
            uint16_t *p = (uint16_t *)w->data + i;
            *p = f32_to_half((float)(half_to_f32(*p, bf) * inv), bf);
        }
    }
}

static em_status mpi_test(void *handle, bool *done, char *msg)
{
    mpi_handle *h = handle;
    int flag = 0, rc = MPI_Test(&h->req, &flag, MPI_STATUS_IGNORE);
    *done = false;
    if (rc != MPI_SUCCESS) {
        em_status st = mpi_error(rc, h->w->fn, msg);
        free(h);
        return st;
    }
    if (!flag)
        return EM_OK;
    h->offset += h->chunk;
    if (h->offset < h->w->count) {
        em_status st = start_chunk(h, msg);
        if (st != EM_OK)
            free(h);
        return st;
    }
    int world = 1;
    MPI_Comm_size(coll, &world);
    divide(h->w, world);
    free(h);
    *done = true;
    return EM_OK;
}

static void mpi_abandon(void *handle)
{
    free(handle); /* a started collective cannot be cancelled; its request is left to MPI */
}

const em_dist_transport em_mpi_transport = {NULL, NULL, mpi_start, mpi_test, mpi_abandon};
