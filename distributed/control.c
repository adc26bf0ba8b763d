/* The control channel: small messages on a communicator of their own, always listened to, so a
 * rank learns that a peer failed while it waits in a collective, and a timed-out rank can tell
 * which peers never reached the collective (alive but busy, or silent: dead or stopped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/control_internal.h"

enum { CONTROL_FAILED = 1, CONTROL_PROBE, CONTROL_STATUS, CONTROL_BYE };

#define CONTROL_TAG 7
#define BROKEN_LEAVE_S 5.0 /* how long a broken group waits for the peers' goodbyes */

static void post_receive(em_control *c)
{
    if (MPI_Irecv(&c->recv, sizeof c->recv, MPI_BYTE, MPI_ANY_SOURCE, CONTROL_TAG, c->comm,
                  &c->recv_req) != MPI_SUCCESS)
        c->recv_req = MPI_REQUEST_NULL;
}

em_status em_control_init(em_control *c, int rank, int world, char *msg)
{
    *c = (em_control){.rank = rank, .world = world, .recv_req = MPI_REQUEST_NULL};
    c->reply_seq = calloc((size_t)world, sizeof *c->reply_seq);
    c->reply_in = calloc((size_t)world, sizeof *c->reply_in);
    c->left = calloc((size_t)world, sizeof *c->left);
    c->silent = calloc((size_t)world, sizeof *c->silent);
    if (!c->reply_seq || !c->reply_in || !c->left || !c->silent) {
        snprintf(msg, EM_DIST_MSG_MAX, "em_dist_init: out of memory");
        return EM_ERR_MEMORY;
    }
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS) {
        snprintf(msg, EM_DIST_MSG_MAX, "em_dist_init: MPI_Comm_dup failed");
        return EM_ERR_STATE;
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    post_receive(c);
    return EM_OK;
}

static void finish_sends(em_control *c, bool wait_briefly)
{
    double until = em_dist_now() + (wait_briefly ? 1.0 : 0.0);
    do {
        int kept = 0;
        for (int i = 0; i < c->n_sends; i++) {
            int done = 0;
            if (MPI_Test(&c->sends[i]->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done)
                free(c->sends[i]);
            else
                c->sends[kept++] = c->sends[i];
        }
        c->n_sends = kept;
    } while (c->n_sends > 0 && em_dist_now() < until);
}

void em_control_finalize(em_control *c)
{
    finish_sends(c, true);
    for (int i = 0; i < c->n_sends; i++) {
        MPI_Cancel(&c->sends[i]->req);
        MPI_Request_free(&c->sends[i]->req);
        free(c->sends[i]);
    }
    if (c->recv_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&c->recv_req);
        MPI_Wait(&c->recv_req, MPI_STATUS_IGNORE);
    }
    free(c->sends);
    free(c->reply_seq);
    free(c->reply_in);
    free(c->left);
    free(c->silent);
    *c = (em_control){0};
}

/* Send m to rank `to` without waiting; the message stays alive until the send completes. */
static void send_to(em_control *c, int to, const em_control_msg *m)
{
    if (c->n_sends == c->cap_sends) {
        int cap = c->cap_sends ? 2 * c->cap_sends : 16;
        em_control_send **s = realloc(c->sends, (size_t)cap * sizeof *s);
        if (!s)
            return;
        c->sends = s;
        c->cap_sends = cap;
    }
    em_control_send *s = malloc(sizeof *s);
    if (!s)
        return;
    s->msg = *m;
    if (MPI_Isend(&s->msg, sizeof s->msg, MPI_BYTE, to, CONTROL_TAG, c->comm, &s->req) !=
        MPI_SUCCESS) {
        free(s);
        return;
    }
    c->sends[c->n_sends++] = s;
}

static void send_all(em_control *c, int kind, uint64_t seq, const char *text)
{
    em_control_msg m = {.kind = kind, .rank = c->rank, .seq = seq};
    snprintf(m.text, sizeof m.text, "%s", text ? text : "");
    for (int r = 0; r < c->world; r++)
        if (r != c->rank)
            send_to(c, r, &m);
}

static void break_group(em_control *c, em_status st, const char *msg)
{
    if (c->broken)
        return;
    c->broken = true;
    c->broken_status = st;
    snprintf(c->broken_msg, sizeof c->broken_msg, "%s", msg);
}

static void handle(em_control *c, const em_control_msg *m)
{
    int from = m->rank;
    if (from < 0 || from >= c->world || from == c->rank)
        return;
    if (m->kind == CONTROL_FAILED) {
        char msg[EM_DIST_MSG_MAX];
        snprintf(msg, sizeof msg, "rank %d failed: %.*s", from, EM_DIST_MSG_MAX - 32, m->text);
        break_group(c, EM_ERR_PEER, msg);
    } else if (m->kind == CONTROL_PROBE) {
        em_control_msg reply = {.kind = CONTROL_STATUS, .rank = c->rank, .seq = c->seq,
                                .in_collective = c->in_collective};
        send_to(c, from, &reply);
    } else if (m->kind == CONTROL_STATUS) {
        c->reply_seq[from] = (int64_t)m->seq;
        c->reply_in[from] = m->in_collective != 0;
    } else if (m->kind == CONTROL_BYE) {
        c->left[from] = true;
    }
}

void em_control_poll(em_control *c)
{
    while (c->recv_req != MPI_REQUEST_NULL) {
        int done = 0;
        if (MPI_Test(&c->recv_req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            c->recv_req = MPI_REQUEST_NULL;
            break;
        }
        if (!done)
            break;
        em_control_msg m = c->recv;
        post_receive(c);
        handle(c, &m);
    }
    finish_sends(c, false);
}

void em_control_announce_failure(em_control *c, const char *msg)
{
    bool peers_know = c->broken;
    char own[EM_DIST_MSG_MAX];
    snprintf(own, sizeof own, "this rank (%d) failed: %.*s", c->rank, EM_DIST_MSG_MAX - 40, msg);
    break_group(c, EM_ERR_STATE, own);
    c->failed_here = true;
    if (!peers_know)
        send_all(c, CONTROL_FAILED, c->seq, msg);
}

void em_control_probe(em_control *c, uint64_t seq)
{
    for (int r = 0; r < c->world; r++)
        c->reply_seq[r] = -1;
    send_all(c, CONTROL_PROBE, seq, NULL);
}

double em_control_grace(double timeout_s)
{
    double g = timeout_s / 2;
    return g < 0.5 ? 0.5 : g > 5.0 ? 5.0 : g;
}

/* "rank 1 has not reached it (busy outside collectives after collective #4)" and the like,
 * appended to buf for every peer that does not wait in collective seq too. */
static void describe_peers(em_control *c, uint64_t seq, char *buf, size_t n)
{
    size_t used = strlen(buf);
    int named = 0;
    for (int r = 0; r < c->world && used < n; r++) {
        if (r == c->rank)
            continue;
        int64_t at = c->reply_seq[r];
        const char *sep = named ? "; " : ": ";
        int k = 0;
        if (at < 0) {
            c->silent[r] = true;
            k = snprintf(buf + used, n - used, "%srank %d did not answer (dead, stopped or "
                         "stuck)", sep, r);
        } else if ((uint64_t)at < seq) {
            k = snprintf(buf + used, n - used, "%srank %d has not reached it (%s after "
                         "collective #%lld)", sep, r, c->reply_in[r] ? "waiting in an earlier "
                         "collective" : "busy outside collectives", (long long)at);
        } else if ((uint64_t)at > seq || !c->reply_in[r]) {
            k = snprintf(buf + used, n - used, "%srank %d is at collective #%lld (the ranks "
                         "called different collectives)", sep, r, (long long)at);
        } else {
            continue;
        }
        named++;
        used += k > 0 ? (size_t)k : 0;
    }
    if (!named && used < n)
        snprintf(buf + used, n - used, ": every rank is waiting in it");
}

void em_control_timeout(em_control *c, const char *fn, uint64_t seq, double timeout_s)
{
    char msg[EM_DIST_MSG_MAX];
    snprintf(msg, sizeof msg, "%s: collective #%llu did not complete within %g s", fn,
             (unsigned long long)seq, timeout_s);
    describe_peers(c, seq, msg, sizeof msg);
    break_group(c, EM_ERR_TIMEOUT, msg);
    send_all(c, CONTROL_FAILED, seq, msg);
}

bool em_control_leave(em_control *c, double timeout_s)
{
    send_all(c, CONTROL_BYE, c->seq, NULL);
    double start = em_dist_now();
    for (;;) {
        em_control_poll(c);
        bool all = true;
        for (int r = 0; r < c->world; r++)
            all &= r == c->rank || c->left[r] || (c->broken && c->silent[r]);
        bool any_silent = false;
        for (int r = 0; r < c->world; r++)
            any_silent |= c->silent[r] && !c->left[r];
        if (all)
            return !any_silent;
        double limit = c->broken ? (timeout_s < BROKEN_LEAVE_S ? timeout_s : BROKEN_LEAVE_S)
                                 : timeout_s;
        if (em_dist_now() - start > limit)
            return false;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}
