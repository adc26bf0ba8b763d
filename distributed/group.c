/* The process group: one communication thread per process owns MPI (it initializes, runs every
 * collective in submission order and finalizes), so collectives run while the caller computes.
 * A running collective is polled against the deadline and the control channel (control.c),
 * which carries failure notices and the timeout diagnosis between ranks. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "distributed/control_internal.h"
#include "distributed/dist_internal.h"

#define DEFAULT_TIMEOUT_S 300.0
#define IDLE_POLL_NS 20000000L /* an idle thread still answers the control channel */
/* After a peer's failure notice, how long a running collective may still complete (the peer may
 * have done its part before it failed) before it is given up. */
#define DRAIN_S 0.25

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* queue, done flags or state changed */
    pthread_t thread;
    bool started;      /* em_dist_init ran (even if it failed): MPI cannot start twice */
    bool ready;        /* MPI is up and collectives are accepted */
    bool init_done, stopping;
    bool owns_mpi;     /* ember initialized MPI (else the program did, and finalizes it) */
    em_status init_status;
    char init_msg[EM_DIST_MSG_MAX];
    em_dist_work *head, *tail;
    int rank, world, local_rank; /* local: among the ranks on this machine */
    double timeout_s;
    bool fail_requested; /* em_dist_fail was called: tell the peers */
    char fail_msg[EM_DIST_MSG_MAX];
    em_control ctl;      /* the communication thread's own */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .world = 1};

double em_dist_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool em_dist_initialized(void)
{
    pthread_mutex_lock(&g.mu);
    bool up = g.ready;
    pthread_mutex_unlock(&g.mu);
    return up;
}

int em_dist_rank(void)
{
    return em_dist_initialized() ? g.rank : 0;
}

int em_dist_world_size(void)
{
    return em_dist_initialized() ? g.world : 1;
}

/* A failure this rank's caller asked to announce (with g.mu held on entry and exit). */
static void announce_requested_failure(void)
{
    if (!g.fail_requested)
        return;
    g.fail_requested = false;
    char msg[EM_DIST_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", g.fail_msg);
    pthread_mutex_unlock(&g.mu);
    em_control_announce_failure(&g.ctl, msg);
    pthread_mutex_lock(&g.mu);
}

/* Between polls of a running collective that started `waited` seconds ago: spin at first (a
 * collective about to complete needs MPI's progress calls), then sleep a sixteenth of the time
 * waited so far, at most 1 ms, so a rank waiting for a slow peer leaves the cores to the
 * computation and learns of the completion at most about 6% late. */
static void backoff(int *polls, double waited)
{
    if (++*polls < 256)
        return;
    long ns = (long)(waited * 1e9 / 16);
    struct timespec ts = {0, ns < 1000 ? 1000 : ns > 1000000 ? 1000000 : ns};
    nanosleep(&ts, NULL);
}

static const em_dist_transport *transport_of(const em_dist_work *w)
{
    return w->device == EM_CUDA ? &em_nccl_transport : &em_mpi_transport;
}

static void fail_with_group_error(em_dist_work *w, const em_control *c)
{
    w->status = c->broken_status;
    snprintf(w->msg, sizeof w->msg, "%s: %.400s", w->fn, c->broken_msg);
}

/* Run one collective to its end: done, failed, the deadline, or a broken group. Once a peer has
 * failed (or timed out) a collective may still complete, as long as every rank did its part
 * before that: it gets DRAIN_S to do so. After this rank's own failure nothing more starts. */
static void run_work(em_dist_work *w)
{
    em_control *c = &g.ctl;
    w->seq = ++c->seq;
    if (c->failed_here)
        return fail_with_group_error(w, c);
    const em_dist_transport *tr = transport_of(w);
    void *handle = NULL;
    c->in_collective = true;
    w->t_start = em_dist_now();
    em_status st = tr->start(w, &handle, w->msg);
    double deadline = w->t_start + g.timeout_s, probe_end = 0, drain_end = 0;
    int polls = 0;
    bool done = false;
    while (st == EM_OK && !done) {
        st = tr->test(handle, &done, w->msg);
        if (st != EM_OK || done)
            break;
        em_control_poll(c);
        pthread_mutex_lock(&g.mu);
        announce_requested_failure();
        pthread_mutex_unlock(&g.mu);
        double now = em_dist_now();
        if (!c->broken && probe_end == 0 && now > deadline) {
            em_control_probe(c, w->seq);
            probe_end = now + em_control_grace(g.timeout_s);
        } else if (!c->broken && probe_end > 0 && now > probe_end) {
            em_control_timeout(c, w->fn, w->seq, g.timeout_s);
        }
        if (c->broken && drain_end == 0)
            drain_end = c->failed_here ? now : now + DRAIN_S;
        if (c->broken && now >= drain_end) {
            tr->abandon(handle);
            c->in_collective = false;
            return fail_with_group_error(w, c);
        }
        backoff(&polls, now - w->t_start);
    }
    w->t_end = em_dist_now();
    c->in_collective = false;
    w->status = st;
    if (st != EM_OK) /* a transport error leaves the peers waiting: tell them */
        em_control_announce_failure(c, w->msg);
}

/* MPI as this thread's, or the program's own when it initialized MPI for every thread. */
static em_status start_mpi(void)
{
    int up = 0, down = 0, level = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (down) {
        snprintf(g.init_msg, sizeof g.init_msg, "em_dist_init: MPI was already finalized");
        return EM_ERR_STATE;
    }
    if (up && (MPI_Query_thread(&level), level != MPI_THREAD_MULTIPLE)) {
        snprintf(g.init_msg, sizeof g.init_msg, "em_dist_init: the program initialized MPI "
                 "without MPI_THREAD_MULTIPLE, which ember's communication thread needs");
        return EM_ERR_STATE;
    }
    g.owns_mpi = !up;
    if (!up && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &level) != MPI_SUCCESS) {
        snprintf(g.init_msg, sizeof g.init_msg, "em_dist_init: MPI_Init_thread failed");
        return EM_ERR_STATE;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.world);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &g.local_rank);
        MPI_Comm_free(&node);
    }
    em_status st = em_mpi_transport_init(g.init_msg);
    if (st == EM_OK)
        st = em_control_init(&g.ctl, g.rank, g.world, g.init_msg);
    return st;
}

static void *thread_main(void *arg)
{
    (void)arg;
    em_status st = start_mpi();
    pthread_mutex_lock(&g.mu);
    g.init_status = st;
    g.init_done = true;
    pthread_cond_broadcast(&g.cv);
    while (st == EM_OK) {
        announce_requested_failure();
        if (g.head) {
            em_dist_work *w = g.head;
            g.head = w->next;
            if (!g.head)
                g.tail = NULL;
            pthread_mutex_unlock(&g.mu);
            run_work(w);
            if (transport_of(w)->finish)
                transport_of(w)->finish(w);
            pthread_mutex_lock(&g.mu);
            w->done = true;
            pthread_cond_broadcast(&g.cv);
            continue;
        }
        if (g.stopping)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += IDLE_POLL_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g.cv, &g.mu, &ts);
        pthread_mutex_unlock(&g.mu);
        em_control_poll(&g.ctl);
        pthread_mutex_lock(&g.mu);
    }
    pthread_mutex_unlock(&g.mu);
    if (st == EM_OK) {
        bool all_left = em_control_leave(&g.ctl, g.timeout_s);
        em_nccl_finalize();
        em_mpi_transport_finalize();
        em_control_finalize(&g.ctl);
        /* MPI_Finalize waits for every rank: only when every peer is on its way out too */
        if (all_left && g.owns_mpi)
            MPI_Finalize();
    }
    return NULL;
}

em_status em_dist_init(em_dist_opts o)
{
    if (!(o.timeout_s >= 0))
        return em_set_error(EM_ERR_ARG, "em_dist_init: timeout_s must be >= 0, not %g",
                            o.timeout_s);
    pthread_mutex_lock(&g.mu);
    if (g.started) {
        pthread_mutex_unlock(&g.mu);
        return em_set_error(EM_ERR_STATE, "em_dist_init: already called in this process (MPI "
                                          "starts once per process)");
    }
    g.started = true;
    g.timeout_s = o.timeout_s > 0 ? o.timeout_s : DEFAULT_TIMEOUT_S;
    int rc = pthread_create(&g.thread, NULL, thread_main, NULL);
    if (rc != 0) {
        pthread_mutex_unlock(&g.mu);
        return em_set_error(EM_ERR_MEMORY, "em_dist_init: cannot start the communication "
                                           "thread: %s", strerror(rc));
    }
    while (!g.init_done)
        pthread_cond_wait(&g.cv, &g.mu);
    g.ready = g.init_status == EM_OK;
    em_status st = g.init_status;
    pthread_mutex_unlock(&g.mu);
    if (st != EM_OK) {
        pthread_join(g.thread, NULL);
        return em_set_error(st, "%s", g.init_msg);
    }
    em_nccl_bind_device(g.local_rank);
    return EM_OK;
}

em_status em_dist_finalize(void)
{
    pthread_mutex_lock(&g.mu);
    if (!g.ready) {
        pthread_mutex_unlock(&g.mu);
        return em_set_error(EM_ERR_STATE, "em_dist_finalize: no process group (em_dist_init)");
    }
    g.ready = false;
    g.stopping = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(g.thread, NULL);
    return EM_OK;
}

void em_dist_fail(const char *msg)
{
    pthread_mutex_lock(&g.mu);
    if (g.ready) {
        snprintf(g.fail_msg, sizeof g.fail_msg, "%s", msg && *msg ? msg : "(no message)");
        g.fail_requested = true;
        pthread_cond_broadcast(&g.cv);
    }
    pthread_mutex_unlock(&g.mu);
}

em_status em_dist_submit(em_dist_work *w)
{
    pthread_mutex_lock(&g.mu);
    if (!g.ready) {
        pthread_mutex_unlock(&g.mu);
        w->done = true;
        w->status = EM_ERR_STATE;
        snprintf(w->msg, sizeof w->msg, "%s: no process group (call em_dist_init first)", w->fn);
        return em_set_error(EM_ERR_STATE, "%s", w->msg);
    }
    w->next = NULL;
    w->done = false;
    const em_dist_transport *tr = transport_of(w);
    if (tr->prepare)
        tr->prepare(w);
    if (g.tail)
        g.tail->next = w;
    else
        g.head = w;
    g.tail = w;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    return EM_OK;
}

bool em_dist_poll(em_dist_work *w)
{
    pthread_mutex_lock(&g.mu);
    bool done = w->done;
    pthread_mutex_unlock(&g.mu);
    return done;
}

em_status em_dist_wait(em_dist_work *w)
{
    pthread_mutex_lock(&g.mu);
    while (!w->done)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    return w->status == EM_OK ? EM_OK : em_set_error(w->status, "%s", w->msg);
}
