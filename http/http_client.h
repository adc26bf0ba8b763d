/* A minimal keep-alive HTTP/1.1 client for loopback benchmarks and tests (bench/ and tests/). */
#ifndef EMBER_HTTP_HTTP_CLIENT_H
#define EMBER_HTTP_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int port;
    int fd;          /* -1 when not connected */
    char buf[65536]; /* the last response */
    const char *body; /* into buf: the last response's body */
} http_client;

/* Sends one request on c (connecting to 127.0.0.1:port first when needed) and reads the reply;
 * false when no reply came. *status gets the HTTP status, c->body the body. */
bool http_client_request(http_client *c, const char *method, const char *path, const char *body,
                     size_t n, int *status);
void http_client_close(http_client *c);

#endif
