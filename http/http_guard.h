/* The HTTP server's defence against clients that hold connections (slowloris): every connection
 * must deliver a whole request (headers and body) within a read timeout of opening or of its
 * last answer, else it is closed; a connection beyond the limit closes the one that has waited
 * longest for its request, or, when every other one is busy answering, is refused 503. Part of
 * http/http_server.c (libmicrohttpd, the `ember` program). */
#ifndef EMBER_HTTP_HTTP_GUARD_H
#define EMBER_HTTP_HTTP_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>

typedef struct http_guard http_guard;

/* A guard for at most max_connections open at once; starts the thread that closes connections
 * past their read timeout. NULL when out of memory or threads. */
http_guard *http_guard_new(int max_connections, double read_timeout_s);
/* Stops the thread and frees the guard: after MHD_stop_daemon (every connection closed). */
void http_guard_free(http_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the guard): admits a connection when it opens,
 * forgets it when it closes. */
void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* Whether c was admitted beyond the limit with no connection to close for it: answer 503. */
bool http_guard_refused(struct MHD_Connection *c);
/* c's request has been received: it is answered without a deadline and never closed for
 * another; http_guard_answered puts it back to waiting for its next request. */
void http_guard_answering(http_guard *g, struct MHD_Connection *c);
void http_guard_answered(http_guard *g, struct MHD_Connection *c);
/* Closes every connection that is waiting for (the rest of) a request: what a stop drops. */
void http_guard_drop_waiting(http_guard *g);

#endif
