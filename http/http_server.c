/* The HTTP front of the engine: libmicrohttpd with a thread per connection (a request's thread
 * waits on its future, so concurrent requests become one batch), a bounded body, connections
 * bounded in number and in the time they take to send a request (http/http_guard.h), JSON in
 * and out through serve/request.h, and a drain on stop: no new connection, every answer given
 * while draining closes its connection. */
#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "http/http_guard.h"
#include "http/http_server.h"

/* connections libmicrohttpd takes beyond max_connections, so that a new one can close one that
 * is waiting, or be answered 503, rather than wait unaccepted */
#define ADMISSION_SLOTS 16

struct http_server {
    struct MHD_Daemon *daemon;
    http_guard *guard;
    em_engine *engine;
    http_server_opts o;
    int port;
    atomic_int in_flight; /* requests received and being answered */
    atomic_bool draining;
};

typedef struct {
    char *body;
    size_t len, cap;
    bool too_large;
    bool answering; /* received whole: counted in flight */
} upload;

/* Queues json (freed here) as the answer; with close set, the connection closes after it (the
 * client is told so), as every connection does once the server drains. */
static enum MHD_Result reply_and(http_server *s, struct MHD_Connection *c, unsigned code,
                                 char *json, bool close)
{
    if (!json)
        return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(json), json,
                                                             MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(json);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (close || atomic_load(&s->draining))
        MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(http_server *s, struct MHD_Connection *c, unsigned code, char *json)
{
    return reply_and(s, c, code, json, false);
}

/* {"error":"<message>"}, written by ember's JSON module (a message that is not UTF-8, as a cut
 * one can be, is replaced by a fixed one). */
static char *error_json(const char *msg)
{
    json_t *text = json_string(msg);
    json_t *body = json_pack("{s:o}", "error", text ? text : json_string("request rejected"));
    char *json = body ? em_json_dump(body) : NULL;
    json_decref(body);
    return json;
}

static enum MHD_Result reply_error(http_server *s, struct MHD_Connection *c, unsigned code,
                                   const char *msg)
{
    return reply(s, c, code, error_json(msg));
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Runs req's samples (one, or each row of a batch) through the engine, all submitted before
 * any is waited for, within timeout_ms in all: EM_OK with ys[0..n), or the first failure. */
static em_status run_samples(http_server *s, const em_predict_request *req, double timeout_ms,
                             em_tensor **ys, int64_t n)
{
    em_future **f = calloc((size_t)n, sizeof *f);
    em_status st = f ? EM_OK : em_set_error(EM_ERR_MEMORY, "predict: out of memory");
    for (int64_t i = 0; st == EM_OK && i < n; i++) {
        em_tensor *row = req->n_instances ? em_select(req->input, 0, i) : req->input;
        f[i] = row ? em_engine_submit(s->engine, row, req->priority) : NULL;
        if (!f[i])
            st = em_error_status() != EM_OK ? em_error_status() : EM_ERR_ARG;
        if (req->n_instances)
            em_release(row);
    }
    double deadline = now_ms() + timeout_ms;
    for (int64_t i = 0; st == EM_OK && i < n; i++) {
        double left = deadline - now_ms();
        st = em_future_wait(f[i], left > 0 ? left : 0, &ys[i]);
    }
    for (int64_t i = 0; f && i < n; i++)
        em_future_free(f[i]); /* cancels those still queued after a failure */
    free(f);
    return st;
}

static enum MHD_Result predict(http_server *s, struct MHD_Connection *c, const upload *u)
{
    char err[256];
    if (u->too_large) {
        snprintf(err, sizeof err, "body larger than %zu bytes", s->o.max_body);
        return reply_error(s, c, 400, err);
    }
    em_predict_request req;
    em_status parsed = em_predict_request_parse(u->body ? u->body : "", u->len,
                                                em_engine_sample_shape(s->engine), &req, err,
                                                sizeof err);
    if (parsed != EM_OK)
        return reply_error(s, c, em_predict_http_status(parsed), err);
    int64_t n = req.n_instances ? req.n_instances : 1;
    em_tensor **ys = calloc((size_t)n, sizeof *ys);
    em_status st = ys ? run_samples(s, &req, req.timeout_ms > 0 ? req.timeout_ms : s->o.timeout_ms,
                                    ys, n)
                      : em_set_error(EM_ERR_MEMORY, "predict: out of memory");
    em_release(req.input);
    enum MHD_Result r;
    if (st != EM_OK) {
        unsigned code = st == EM_ERR_BUSY ? 503 : st == EM_ERR_TIMEOUT ? 504
                        : st == EM_ERR_ARG ? 400 : 500;
        r = reply_error(s, c, code, em_error());
        em_error_clear();
    } else {
        r = reply(s, c, 200, req.n_instances ? em_predict_batch_response(ys, n)
                                          : em_predict_response(ys[0]));
    }
    for (int64_t i = 0; ys && i < n; i++)
        em_release(ys[i]);
    free(ys);
    return r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **con_cls)
{
    (void)version;
    http_server *s = cls;
    upload *u = *con_cls;
    if (!u) { /* the first call: headers only */
        u = calloc(1, sizeof *u);
        if (!u)
            return MHD_NO;
        *con_cls = u;
        if (http_guard_refused(c))
            return reply_and(s, c, 503, error_json("the server is at its connection limit, every "
                                                "connection busy with a request"), true);
        return MHD_YES;
    }
    if (*data_size) {
        if (u->len + *data_size > s->o.max_body) {
            u->too_large = true;
        } else {
            if (u->len + *data_size > u->cap) {
                size_t cap = u->cap ? u->cap : 16384;
                while (cap < u->len + *data_size)
                    cap *= 2;
                char *b = realloc(u->body, cap);
                if (!b)
                    return MHD_NO;
                u->body = b;
                u->cap = cap;
            }
            memcpy(u->body + u->len, data, *data_size);
            u->len += *data_size;
        }
        *data_size = 0;
        return MHD_YES;
    }
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!u->answering) { /* received whole */
        u->answering = true;
        atomic_fetch_add(&s->in_flight, 1);
        http_guard_answering(s->guard, c);
    }
    if (!strcmp(url, "/health") && get) {
        char *json = strdup("{\"status\":\"ok\"}");
        return reply(s, c, 200, json);
    }
    if (!strcmp(url, "/stats") && get) {
        em_engine_stats st = em_engine_get_stats(s->engine);
        return reply(s, c, 200, em_engine_stats_json(&st));
    }
    if (!strcmp(url, "/predict") && post)
        return predict(s, c, u);
    if (!strcmp(url, "/predict") || !strcmp(url, "/health") || !strcmp(url, "/stats"))
        return reply_error(s, c, 405, "method not allowed");
    return reply_error(s, c, 404, "no such endpoint (POST /predict, GET /health, GET /stats)");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode code)
{
    (void)code;
    http_server *s = cls;
    upload *u = *con_cls;
    if (!u)
        return;
    if (u->answering) {
        http_guard_answered(s->guard, c);
        atomic_fetch_sub(&s->in_flight, 1);
    }
    free(u->body);
    free(u);
    *con_cls = NULL;
}

http_server *http_server_start(em_engine *engine, http_server_opts o)
{
    http_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->engine = engine;
    s->o = o;
    s->o.max_body = o.max_body ? o.max_body : 1 << 20;
    s->o.max_connections = o.max_connections ? o.max_connections : 256;
    s->o.timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : 30000;
    s->o.read_timeout_s = o.read_timeout_s > 0 ? o.read_timeout_s : 10;
    s->guard = http_guard_new(s->o.max_connections, s->o.read_timeout_s);
    if (!s->guard) {
        fprintf(stderr, "ember serve: out of memory\n");
        free(s);
        return NULL;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* no MHD_USE_ERROR_LOG: libmicrohttpd writes a line for every client that closes or is
     * closed mid-request, which a client holding connections would turn into a flood */
    s->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC,
        (uint16_t)o.port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, &addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->o.max_connections + ADMISSION_SLOTS,
        /* a connection that neither sends nor takes a byte this long (a slow reader) */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ceil(s->o.read_timeout_s),
        MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, s->guard,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!s->daemon) {
        fprintf(stderr, "ember serve: cannot listen on 127.0.0.1:%d\n", o.port);
        http_guard_free(s->guard);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon,
                                                           MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o.port;
    return s;
}

int http_server_port(const http_server *s)
{
    return s->port;
}

int http_server_stop(http_server *s, double drain_s)
{
    atomic_store(&s->draining, true);
    MHD_socket listen = MHD_quiesce_daemon(s->daemon);
    /* Linux stops listening at once: a connection not yet accepted, or one tried from now on,
     * is refused instead of waiting unanswered in the backlog; the socket is closed once
     * libmicrohttpd's threads are done with it */
    if (listen != MHD_INVALID_SOCKET)
        shutdown(listen, SHUT_RDWR);
    http_guard_drop_waiting(s->guard);
    struct timespec tick = {0, 5000000};
    for (double waited = 0; atomic_load(&s->in_flight) > 0 && waited < drain_s; waited += 0.005)
        nanosleep(&tick, NULL);
    int left = atomic_load(&s->in_flight);
    MHD_stop_daemon(s->daemon);
    http_guard_free(s->guard);
    if (listen != MHD_INVALID_SOCKET)
        close(listen);
    free(s);
    return left;
}
