/* A minimal HTTP/1.1 client over a keep-alive loopback connection, for the serve benchmark:
 * one request at a time, the status and body of each response read by its Content-Length. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http_client.h"

void http_client_close(http_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static bool conn_open(http_client *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return false;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        http_client_close(c);
        return false;
    }
    return true;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Reads one response into c->buf; false when the connection failed or the reply is malformed. */
static bool read_response(http_client *c, int *status)
{
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have + 1 >= sizeof c->buf)
            return false;
        ssize_t k = recv(c->fd, c->buf + have, sizeof c->buf - 1 - have, 0);
        if (k <= 0)
            return false;
        have += (size_t)k;
        c->buf[have] = '\0';
        end = strstr(c->buf, "\r\n\r\n");
    }
    if (sscanf(c->buf, "HTTP/1.%*d %d", status) != 1)
        return false;
    size_t length = 0;
    for (char *line = strstr(c->buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n"))
        if (!strncasecmp(line + 2, "Content-Length:", 15))
            length = strtoul(line + 17, NULL, 10);
    size_t head = (size_t)(end + 4 - c->buf);
    if (head + length >= sizeof c->buf)
        return false;
    while (have < head + length) {
        ssize_t k = recv(c->fd, c->buf + have, head + length - have, 0);
        if (k <= 0)
            return false;
        have += (size_t)k;
    }
    c->buf[have] = '\0';
    c->body = c->buf + head;
    return true;
}

bool http_client_request(http_client *c, const char *method, const char *path, const char *body,
                     size_t n, int *status)
{
    for (int attempt = 0; attempt < 2; attempt++) { /* one reconnect after a closed connection */
        if (c->fd < 0 && !conn_open(c))
            return false;
        char head[256];
        int k = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         method, path, n);
        if (send_all(c->fd, head, (size_t)k) && send_all(c->fd, body, n) &&
            read_response(c, status))
            return true;
        http_client_close(c);
    }
    return false;
}
