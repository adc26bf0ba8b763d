/* Collectives on CUDA memory over NCCL, built with the CUDA backend. The communicator is made on
 * the first CUDA collective: rank 0's unique id is broadcast over MPI, then every rank joins a
 * non-blocking NCCL communicator, so both steps are polled under the group's deadline like any
 * collective. Collectives run on a stream of their own that first waits for the work queued on
 * the backend's compute stream when they were submitted (the gradients, the bucket copies). */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend_internal.h" /* the compute stream the collectives order after */
#include "distributed/dist_internal.h"

typedef enum { PHASE_ID, PHASE_INIT, PHASE_RUN } phase;

static struct {
    bool up;              /* comm and stream are usable */
    ncclComm_t comm;
    cudaStream_t stream;
    ncclUniqueId id;
    int device;
} nc = {.device = -1};

typedef struct {
    em_dist_work *w;
    phase ph;
    MPI_Request id_req;
    cudaEvent_t done;
} nccl_handle;

bool em_nccl_built(void)
{
    return true;
}

void em_nccl_bind_device(int local_rank)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
        return;
    nc.device = local_rank % count;
    cudaSetDevice(nc.device);
}

static em_status nccl_failed(const em_dist_work *w, const char *what, ncclResult_t r, char *msg)
{
    snprintf(msg, EM_DIST_MSG_MAX, "%s: NCCL %s failed: %s%s%s", w->fn, what,
             ncclGetErrorString(r), nc.up ? " " : "", nc.up ? ncclGetLastError(nc.comm) : "");
    return EM_ERR_STATE;
}

static em_status cuda_failed(const em_dist_work *w, const char *what, cudaError_t e, char *msg)
{
    snprintf(msg, EM_DIST_MSG_MAX, "%s: CUDA %s failed: %s", w->fn, what, cudaGetErrorString(e));
    return EM_ERR_STATE;
}

static bool nccl_types(const em_dist_work *w, ncclDataType_t *dt, ncclRedOp_t *op)
{
    switch (w->dtype) {
    case EM_F32: *dt = ncclFloat32; break;
    case EM_F64: *dt = ncclFloat64; break;
    case EM_F16: *dt = ncclFloat16; break;
    case EM_BF16: *dt = ncclBfloat16; break;
    case EM_I32: *dt = ncclInt32; break;
    case EM_I64: *dt = ncclInt64; break;
    case EM_I8: *dt = ncclInt8; break;
    case EM_U8: *dt = ncclUint8; break;
    default: return false;
    }
    *op = w->op == EM_DIST_AVG ? ncclAvg : w->op == EM_DIST_MAX ? ncclMax
        : w->op == EM_DIST_MIN ? ncclMin : ncclSum;
    return true;
}

/* The CUDA backend's compute stream from its table's stream entry; NULL when it gives none. */
static cudaStream_t compute_stream(void)
{
    const em_backend *be = em_backend_get(EM_CUDA);
    return be && be->stream ? (cudaStream_t)be->stream() : NULL;
}

/* At submission, in the caller's thread: an event after the work queued so far on the backend's
 * compute stream (the gradients, the copies into a bucket), which the collective waits for. */
static void nccl_prepare(em_dist_work *w)
{
    cudaStream_t compute = compute_stream();
    cudaEvent_t ready = NULL;
    if (compute && cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) == cudaSuccess &&
        cudaEventRecord(ready, compute) != cudaSuccess) {
        cudaEventDestroy(ready);
        ready = NULL;
    }
    w->ready = ready;
}

/* The event of a collective that never reached enqueue (a failure before it). */
static void nccl_finish(em_dist_work *w)
{
    if (w->ready)
        cudaEventDestroy((cudaEvent_t)w->ready);
    w->ready = NULL;
}

/* Queue the collective on the communication stream behind w->ready, then the done event. */
static em_status enqueue(nccl_handle *h, char *msg)
{
    em_dist_work *w = h->w;
    ncclDataType_t dt;
    ncclRedOp_t op;
    if (!nccl_types(w, &dt, &op)) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: dtype %s cannot be communicated", w->fn,
                 em_dtype_name(w->dtype));
        return EM_ERR_UNSUPPORTED;
    }
    if (!w->ready) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: %s", w->fn, compute_stream()
                 ? "no CUDA event could be recorded on the compute stream"
                 : "the cuda backend gives no compute stream (its table's stream entry) to order "
                   "the collective after");
        return EM_ERR_STATE;
    }
    cudaError_t e = cudaStreamWaitEvent(nc.stream, (cudaEvent_t)w->ready, 0);
    cudaEventDestroy((cudaEvent_t)w->ready);
    w->ready = NULL;
    if (e != cudaSuccess)
        return cuda_failed(w, "stream ordering", e, msg);
    size_t n = (size_t)w->count;
    ncclResult_t r = ncclSuccess;
    if (w->kind == EM_DIST_WORK_ALLREDUCE)
        r = ncclAllReduce(w->data, w->data, n, dt, op, nc.comm, nc.stream);
    else if (w->kind == EM_DIST_WORK_BROADCAST)
        r = ncclBroadcast(w->data, w->data, n, dt, w->root, nc.comm, nc.stream);
    else if (w->kind == EM_DIST_WORK_ALLGATHER)
        r = ncclAllGather(w->data, w->recv, n, dt, nc.comm, nc.stream);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_failed(w, "collective", r, msg);
    e = cudaEventCreateWithFlags(&h->done, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventRecord(h->done, nc.stream);
    return e == cudaSuccess ? EM_OK : cuda_failed(w, "event", e, msg);
}

static em_status begin(nccl_handle *h, char *msg)
{
    em_dist_work *w = h->w;
    if (nc.device >= 0)
        cudaSetDevice(nc.device);
    if (nc.up) {
        h->ph = PHASE_RUN;
        return enqueue(h, msg);
    }
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ncclResult_t r = rank == 0 ? ncclGetUniqueId(&nc.id) : ncclSuccess;
    if (r != ncclSuccess)
        return nccl_failed(w, "unique id", r, msg);
    h->ph = PHASE_ID;
    if (MPI_Ibcast(&nc.id, sizeof nc.id, MPI_BYTE, 0, MPI_COMM_WORLD, &h->id_req) !=
        MPI_SUCCESS) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: broadcasting the NCCL id over MPI failed", w->fn);
        return EM_ERR_STATE;
    }
    return EM_OK;
}

static em_status nccl_start(em_dist_work *w, void **handle, char *msg)
{
    nccl_handle *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(msg, EM_DIST_MSG_MAX, "%s: out of memory", w->fn);
        return EM_ERR_MEMORY;
    }
    h->w = w;
    em_status st = begin(h, msg);
    if (st != EM_OK) {
        if (h->done)
            cudaEventDestroy(h->done);
        free(h);
        h = NULL;
    }
    *handle = h;
    return st;
}

/* Start joining the communicator once the id has arrived. */
static em_status join(nccl_handle *h, char *msg)
{
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    cudaError_t e = cudaStreamCreateWithFlags(&nc.stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return cuda_failed(h->w, "stream", e, msg);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&nc.comm, world, nc.id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_failed(h->w, "communicator init", r, msg);
    h->ph = PHASE_INIT;
    return EM_OK;
}

static em_status nccl_test(void *handle, bool *done, char *msg)
{
    nccl_handle *h = handle;
    *done = false;
    em_status st = EM_OK;
    if (h->ph == PHASE_ID) {
        int flag = 0;
        if (MPI_Test(&h->id_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            snprintf(msg, EM_DIST_MSG_MAX, "%s: broadcasting the NCCL id over MPI failed",
                     h->w->fn);
            st = EM_ERR_STATE;
        } else if (flag) {
            st = join(h, msg);
        }
    } else if (h->ph == PHASE_INIT) {
        ncclResult_t r = ncclInProgress;
        ncclCommGetAsyncError(nc.comm, &r);
        if (r == ncclSuccess) {
            nc.up = true;
            h->ph = PHASE_RUN;
            st = enqueue(h, msg);
        } else if (r != ncclInProgress) {
            st = nccl_failed(h->w, "communicator init", r, msg);
        }
    } else {
        ncclResult_t r = ncclSuccess;
        ncclCommGetAsyncError(nc.comm, &r);
        cudaError_t e = cudaEventQuery(h->done);
        if (r != ncclSuccess && r != ncclInProgress)
            st = nccl_failed(h->w, "collective", r, msg);
        else if (e == cudaSuccess)
            *done = true;
        else if (e != cudaErrorNotReady)
            st = cuda_failed(h->w, "collective", e, msg);
    }
    if (st != EM_OK || *done) {
        if (h->ph == PHASE_RUN && h->done)
            cudaEventDestroy(h->done);
        free(h);
    }
    return st;
}

/* A collective that will never complete: abort the communicator, which frees the GPU. */
static void nccl_abandon(void *handle)
{
    nccl_handle *h = handle;
    if (h && h->ph != PHASE_ID && nc.comm) {
        ncclCommAbort(nc.comm);
        nc.comm = NULL;
        nc.up = false;
    }
    free(h);
}

void em_nccl_finalize(void)
{
    if (nc.comm)
        ncclCommDestroy(nc.comm);
    if (nc.stream)
        cudaStreamDestroy(nc.stream);
    nc.comm = NULL;
    nc.stream = NULL;
    nc.up = false;
}

const em_dist_transport em_nccl_transport = {nccl_prepare, nccl_finish, nccl_start, nccl_test,
                                             nccl_abandon};
