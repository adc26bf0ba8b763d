/* The control channel between ranks (a communicator of its own beside the collectives'): failure
 * notices, the probe that names the ranks a timed-out collective waits for, and the goodbyes
 * that decide whether MPI_Finalize can be reached by everyone. Used by the communication
 * thread only. Not installed. */
#ifndef EMBER_DIST_CONTROL_INTERNAL_H
#define EMBER_DIST_CONTROL_INTERNAL_H

#include <mpi.h>

#include "distributed/dist_internal.h"

typedef struct {
    int32_t kind;          /* CONTROL_FAILED, _PROBE, _STATUS, _BYE */
    int32_t rank;          /* the sender */
    uint64_t seq;          /* PROBE: the collective the sender waits in; STATUS: collectives the
                              sender has started */
    int32_t in_collective; /* STATUS: the sender is inside collective `seq` */
    char text[EM_DIST_MSG_MAX]; /* FAILED: what went wrong */
} em_control_msg;

typedef struct {
    MPI_Request req;
    em_control_msg msg;
} em_control_send;

typedef struct {
    int rank, world;
    MPI_Comm comm;
    uint64_t seq;          /* collectives this rank has started */
    bool in_collective;
    bool broken;           /* a failure (ours or a peer's) or a timeout */
    bool failed_here;      /* this rank's own failure: no collective starts any more */
    em_status broken_status;
    char broken_msg[EM_DIST_MSG_MAX];
    /* the latest probe's answers, per rank: -1 none yet, else the peer's seq */
    int64_t *reply_seq;     /* (world) */
    bool *reply_in;         /* (world) */
    bool *left;             /* (world): said goodbye */
    bool *silent;           /* (world): did not answer a probe */
    MPI_Request recv_req;
    em_control_msg recv;
    em_control_send **sends; /* in flight */
    int n_sends, cap_sends;
} em_control;

em_status em_control_init(em_control *c, int rank, int world, char *msg);
void em_control_finalize(em_control *c);
/* Handle every message that has arrived; completes finished sends. */
void em_control_poll(em_control *c);
/* Break the group with this rank's own failure and tell every peer. */
void em_control_announce_failure(em_control *c, const char *msg);
/* Ask every peer where it stands; answers come in through em_control_poll. */
void em_control_probe(em_control *c, uint64_t seq);
/* How long answers to a probe are awaited after a timeout of timeout_s. */
double em_control_grace(double timeout_s);
/* Break the group with a timeout of collective seq, naming the ranks from the probe's answers,
 * and tell every peer. */
void em_control_timeout(em_control *c, const char *fn, uint64_t seq, double timeout_s);
/* Say goodbye and wait for every peer's (bounded by timeout_s when the group is healthy, a few
 * seconds when it is broken); true when every peer said it, so MPI_Finalize will return. */
bool em_control_leave(em_control *c, double timeout_s);

#endif
