/* The connection guard: a list of open connections, oldest first, each waiting for a request
 * (with the time it began waiting) or answering one, under one mutex; a thread that sleeps until
 * the earliest read deadline and shuts down the sockets past it. Shutting a socket down makes
 * libmicrohttpd's thread for it see the end of the stream and close the connection; the socket
 * stays open until libmicrohttpd reports the close, which takes the same mutex. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "http/http_guard.h"

typedef enum { WAITING, ANSWERING, CLOSING } conn_state;

typedef struct guarded {
    MHD_socket fd;
    conn_state state;
    double since; /* WAITING: when it began waiting for its request (monotonic seconds) */
    bool refused;
    struct guarded *older, *newer;
} guarded;

struct http_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t watcher;
    guarded *oldest, *newest;
    int open, max_open;
    double read_timeout_s;
    bool stopping;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Closes g's connection r (lock held): libmicrohttpd reports it closed soon after. */
static void close_conn(guarded *r)
{
    shutdown(r->fd, SHUT_RDWR);
    r->state = CLOSING;
}

/* Closes the connections past their read deadline (lock held); the earliest deadline left. */
static double close_late(http_guard *g, double now)
{
    double next = now + g->read_timeout_s;
    for (guarded *r = g->oldest; r; r = r->newer) {
        if (r->state != WAITING)
            continue;
        double deadline = r->since + g->read_timeout_s;
        if (deadline <= now)
            close_conn(r);
        else if (deadline < next)
            next = deadline;
    }
    return next;
}

static void *watch(void *arg)
{
    http_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        double next = close_late(g, now_s());
        struct timespec until = {.tv_sec = (time_t)next};
        until.tv_nsec = (long)((next - (double)until.tv_sec) * 1e9);
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

http_guard *http_guard_new(int max_connections, double read_timeout_s)
{
    http_guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->max_open = max_connections;
    g->read_timeout_s = read_timeout_s;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->lock, NULL);
    if (pthread_create(&g->watcher, NULL, watch, g) != 0) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
    }
    return g;
}

void http_guard_free(http_guard *g)
{
    pthread_mutex_lock(&g->lock);
    g->stopping = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->watcher, NULL);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Makes room for the newest connection r beyond the limit (lock held): closes the connection
 * that has waited longest for its request, or refuses r when every other one is answering. */
static void make_room(http_guard *g, guarded *r)
{
    for (guarded *o = g->oldest; o != r; o = o->newer)
        if (o->state == WAITING) {
            close_conn(o);
            return;
        }
    r->refused = true;
}

static void admit(http_guard *g, struct MHD_Connection *c, void **socket_context)
{
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    guarded *r = fd ? calloc(1, sizeof *r) : NULL;
    if (!r) /* unguarded: libmicrohttpd's idle timeout still closes it */
        return;
    r->fd = fd->connect_fd;
    r->state = WAITING;
    r->since = now_s();
    pthread_mutex_lock(&g->lock);
    r->older = g->newest;
    if (g->newest)
        g->newest->newer = r;
    else
        g->oldest = r;
    g->newest = r;
    if (++g->open > g->max_open)
        make_room(g, r);
    pthread_mutex_unlock(&g->lock);
    *socket_context = r;
}

static void forget(http_guard *g, guarded *r)
{
    pthread_mutex_lock(&g->lock);
    if (r->older)
        r->older->newer = r->newer;
    else
        g->oldest = r->newer;
    if (r->newer)
        r->newer->older = r->older;
    else
        g->newest = r->older;
    g->open--;
    pthread_mutex_unlock(&g->lock);
    free(r);
}

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        admit(cls, c, socket_context);
    else if (*socket_context)
        forget(cls, *socket_context);
}

static guarded *record_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c,
                                                                MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

bool http_guard_refused(struct MHD_Connection *c)
{
    guarded *r = record_of(c);
    return r && r->refused;
}

/* Moves c from one state to another, unless the guard is closing it. */
static void set_state(http_guard *g, struct MHD_Connection *c, conn_state from, conn_state to)
{
    guarded *r = record_of(c);
    if (!r)
        return;
    pthread_mutex_lock(&g->lock);
    if (r->state == from) {
        r->state = to;
        r->since = now_s();
    }
    pthread_mutex_unlock(&g->lock);
}

void http_guard_answering(http_guard *g, struct MHD_Connection *c)
{
    set_state(g, c, WAITING, ANSWERING);
}

void http_guard_answered(http_guard *g, struct MHD_Connection *c)
{
    set_state(g, c, ANSWERING, WAITING);
}

void http_guard_drop_waiting(http_guard *g)
{
    pthread_mutex_lock(&g->lock);
    for (guarded *r = g->oldest; r; r = r->newer)
        if (r->state == WAITING)
            close_conn(r);
    pthread_mutex_unlock(&g->lock);
}
