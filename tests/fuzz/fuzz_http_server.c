/* libFuzzer target: the whole HTTP server (libmicrohttpd, the connection guard, the handler,
 * the JSON request parser and the engine over a small model) on arbitrary bytes sent on one
 * loopback connection. Any input must get a reply that is HTTP (or none) and the end of the
 * connection within WAIT_S, and leave the server answering GET /health with 200. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ember.h"
#include "http/http_server.h"

#define READ_TIMEOUT_S 0.5 /* the server closes a connection that has sent no whole request */
#define WAIT_S 3           /* how long a reply or the end of the connection may take */

static int port;

/* A model of 4 inputs and 3 outputs behind the engine (with a cache) and the server, started
 * once for the whole run. */
static void start_server(void)
{
    em_manual_seed(1);
    em_module *model = em_sequential(2, em_linear_layer(4, 3, true), em_relu_layer());
    em_engine *engine = em_engine_new(model, EM_SHAPE(4), (em_engine_opts){
                                                              .max_batch = 4,
                                                              .max_wait_ms = 0.1,
                                                              .cache = {.max_entries = 64}});
    http_server *server = engine ? http_server_start(engine, (http_server_opts){
                                                                .max_body = 4096,
                                                                .max_connections = 4,
                                                                .timeout_ms = 1000,
                                                                .read_timeout_s = READ_TIMEOUT_S})
                                    : NULL;
    if (!server)
        abort(); /* a broken harness, not a finding */
    port = http_server_port(server);
}

/* A connection from the next address of 127.0.0.0/8 (16 million of them): at hundreds of
 * connections a second, one source address would come back to ports whose earlier connection
 * is still in TIME_WAIT, and a SYN into one of those can stall. */
static int connect_server(void)
{
    static uint32_t next_source;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in from = {.sin_family = AF_INET};
    from.sin_addr.s_addr = htonl(0x7f000002u + next_source++ % 0xfffffdu);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval wait = {.tv_sec = WAIT_S};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) != 0 ||
        bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0)
        abort(); /* a broken harness, not a finding */
    return fd;
}

/* Sends n bytes (as many as the server takes before it closes), ends the sending side, and
 * reads what comes back until the server closes, into reply (its first bytes); the length
 * read. A server that neither closes nor finishes within WAIT_S fails the input. */
static size_t exchange(const void *data, size_t n, char *reply, size_t cap)
{
    int fd = connect_server();
    for (size_t done = 0; done < n;) {
        ssize_t k = send(fd, (const char *)data + done, n - done, MSG_NOSIGNAL);
        if (k <= 0)
            break; /* the server closed: it refused what it got so far */
        done += (size_t)k;
    }
    shutdown(fd, SHUT_WR);
    size_t have = 0;
    for (;;) {
        char buf[4096];
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k == 0 || (k < 0 && errno == ECONNRESET))
            break; /* closed, after a reply or not */
        assert(k > 0 && "the server neither answered nor closed the connection in time");
        size_t keep = have < cap ? cap - have < (size_t)k ? cap - have : (size_t)k : 0;
        memcpy(reply + have, buf, keep);
        have += keep;
    }
    close(fd);
    return have;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!port)
        start_server();
    /* libFuzzer's SIGALRM (its -timeout check) would cut a socket call with a timeout short
     * (EINTR); the server's threads take it instead */
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    char reply[64];
    size_t n = exchange(data, size, reply, sizeof reply - 1);
    reply[n] = '\0';
    assert(n < 7 || !strncmp(reply, "HTTP/1.", 7));
    static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    n = exchange(health, sizeof health - 1, reply, sizeof reply - 1);
    reply[n] = '\0';
    assert(!strncmp(reply, "HTTP/1.1 200", 12) && "the server stopped answering /health");
    pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);
    return 0;
}
