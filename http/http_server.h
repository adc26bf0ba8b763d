/* The inference engine over HTTP/JSON on libmicrohttpd, bound to loopback: POST /predict,
 * GET /health, GET /stats. Used by `ember serve` and `ember bench serve`. */
#ifndef EMBER_HTTP_HTTP_SERVER_H
#define EMBER_HTTP_HTTP_SERVER_H

#include <stddef.h>

#include "serve/engine.h"

typedef struct {
    int port;             /* 0: any free port (http_server_port tells which) */
    size_t max_body;      /* 0: 1 MiB; a larger body answers 400 */
    int max_connections;  /* 0: 256; one more closes the connection that has waited longest
                           * for its request, or is answered 503 when all are answering */
    double timeout_ms;    /* a request's default wait for its result; 0: 30 s (then 504) */
    double read_timeout_s; /* 0: 10; a connection that has not sent a whole request this long
                            * after opening or its last answer (or stalls reading an answer)
                            * is closed */
} http_server_opts;

typedef struct http_server http_server;

/* Starts serving engine (borrowed) on 127.0.0.1; NULL with a message on stderr. */
http_server *http_server_start(em_engine *engine, http_server_opts o);
int http_server_port(const http_server *s);
/* Drains: stops listening (a new connection is refused), closes the connections waiting for
 * (the rest of) a request, waits up to drain_s for the requests in flight (received whole) to
 * be answered, each answer closing its connection (Connection: close), then stops. Returns the
 * requests still in flight (0 when all were answered). */
int http_server_stop(http_server *s, double drain_s);

#endif
