/* What the distributed/ files share: the collective work items the communication thread runs, and the
 * two transports behind them (MPI for host memory, NCCL for CUDA memory). Not installed. */
#ifndef EMBER_DIST_INTERNAL_H
#define EMBER_DIST_INTERNAL_H

#include "distributed/dist.h"

#define EM_DIST_MSG_MAX 512

typedef enum {
    EM_DIST_WORK_ALLREDUCE,
    EM_DIST_WORK_BROADCAST,
    EM_DIST_WORK_BARRIER,
    EM_DIST_WORK_ALLGATHER,
} em_dist_work_kind;

/* One collective, queued by a caller and run by the communication thread. The caller keeps the
 * memory alive and untouched until em_dist_wait returns. */
typedef struct em_dist_work {
    em_dist_work_kind kind;
    const char *fn;     /* the public call, for messages: "em_dist_allreduce" */
    void *data;         /* (count) elements of dtype on device; allgather: what this rank sends */
    void *recv;         /* allgather: (world, count) */
    int64_t count;
    em_dtype dtype;
    em_device device;
    em_dist_op op;
    int root;
    void *ready;        /* set at submission by the transport: what the data waits for (NCCL: an
                           event on the backend's compute stream) */
    /* written by the communication thread */
    uint64_t seq;       /* this rank's collective number, from 1 */
    bool done;
    em_status status;
    char msg[EM_DIST_MSG_MAX];
    double t_start, t_end; /* monotonic seconds: the collective started and completed */
    struct em_dist_work *next;
} em_dist_work;

/* Queue w (filled by the caller, zero elsewhere) behind every earlier collective; EM_ERR_STATE
 * without a group, or the group's error when it is broken (w is then done). */
em_status em_dist_submit(em_dist_work *w);
/* Wait until w is done; its status, with its message set as the error. */
em_status em_dist_wait(em_dist_work *w);
/* Whether w is done, without waiting. */
bool em_dist_poll(em_dist_work *w);
double em_dist_now(void); /* monotonic seconds */

/* ---- transports: a started collective is polled until done; start, test and abandon run on
 * the communication thread only. start/test return EM_OK or an error status with a message in
 * msg, and free the handle when they fail. ---- */
typedef struct em_dist_transport {
    /* in the submitting thread, before w is queued, and once w has run (NULL: nothing to do) */
    void (*prepare)(em_dist_work *w);
    void (*finish)(em_dist_work *w);
    em_status (*start)(em_dist_work *w, void **handle, char *msg);
    em_status (*test)(void *handle, bool *done, char *msg);
    /* a collective that will never complete (a peer failed): forget it as best one can */
    void (*abandon)(void *handle);
} em_dist_transport;

/* MPI (distributed/mpi_transport.c): the communicator for collectives and the datatypes. */
em_status em_mpi_transport_init(char *msg);
void em_mpi_transport_finalize(void);
extern const em_dist_transport em_mpi_transport;
/* NCCL (distributed/nccl.c, or distributed/nccl_absent.c without CUDA): its communicator is made on the first
 * CUDA collective, with rank 0's unique id broadcast over MPI. */
extern const em_dist_transport em_nccl_transport;
bool em_nccl_built(void);
/* Make GPU (local_rank mod the device count) the calling thread's device, when there is one. */
void em_nccl_bind_device(int local_rank);
void em_nccl_finalize(void);

#endif
