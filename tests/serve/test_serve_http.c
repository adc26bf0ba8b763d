/* `ember serve` as a user runs it: a saved MLP behind HTTP on a free loopback port; health,
 * stats, a prediction equal to the library's forward, malformed JSON, a wrong shape and an
 * oversized body answered 400 with a message, unknown paths 404, and SIGTERM draining a
 * request that is still waiting for its batch before the server exits 0, refusing a new
 * connection meanwhile and closing the keep-alive one after its answer. Under a client that
 * holds every connection idle or half-sent (slowloris), health and predictions are still
 * answered at once and SIGTERM exits 0 at once; a connection that trickles its request is
 * closed at the read timeout, but an answer that takes longer is sent; a connection beyond a
 * limit of busy connections is answered 503. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <errno.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ember.h"
#include "http/http_client.h"

static char model_path[64]; /* one per test: Criterion runs them in parallel processes */
static pid_t server;
static FILE *server_out;
static int port;

static em_module *mlp(void)
{
    return em_sequential(5, em_linear_layer(784, 512, true), em_relu_layer(),
                         em_linear_layer(512, 256, true), em_relu_layer(),
                         em_linear_layer(256, 10, true));
}

/* Starts ember serve with extra options; reads the port from its first line. */
static void start(const char *extra)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    server = fork();
    if (server == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion ends the test: the server too */
        dup2(fds[1], 1);
        close(fds[0]);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "exec '%s' serve mlp --load %s --port 0 --threads 1 %s",
                 getenv("EMBER_BIN"), model_path, extra);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    server_out = fdopen(fds[0], "r");
    char line[512] = "";
    cr_assert_not_null(fgets(line, sizeof line, server_out), "ember serve printed nothing");
    char *p = strstr(line, "\"port\":");
    cr_assert_not_null(p, "%s", line);
    port = atoi(p + 7);
    cr_assert_gt(port, 0);
}

/* Waits for the server to exit; returns the exit status and the last line printed. */
static int wait_exit(char *last, size_t n)
{
    last[0] = '\0';
    char line[4096];
    while (fgets(line, sizeof line, server_out))
        snprintf(last, n, "%s", line);
    int status = 0;
    waitpid(server, &status, 0);
    fclose(server_out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* SIGTERM; returns the exit status and the last line printed. */
static int stop(char *last, size_t n)
{
    kill(server, SIGTERM);
    return wait_exit(last, n);
}

/* SIGTERM; the server must exit 0. Removes the model file. */
static void stop_and_expect_exit_0(void)
{
    char last[4096];
    cr_assert_eq(stop(last, sizeof last), 0, "%s", last);
    unlink(model_path);
}

static int request(http_client *c, const char *method, const char *path, const char *body)
{
    int status = 0;
    cr_assert(http_client_request(c, method, path, body, strlen(body), &status), "no reply to %s %s",
              method, path);
    return status;
}

static char *zeros_body(int n, const char *extra)
{
    char *b = malloc((size_t)n * 2 + 128);
    size_t k = (size_t)sprintf(b, "{\"input\":[");
    for (int i = 0; i < n; i++)
        k += (size_t)sprintf(b + k, "%s0", i ? "," : "");
    sprintf(b + k, "]%s}", extra);
    return b;
}

static void save_model(void)
{
    if (!getenv("EMBER_BIN"))
        cr_skip_test("EMBER_BIN not set");
    snprintf(model_path, sizeof model_path, "/tmp/ember_serve_http_test_%d.safetensors",
             (int)getpid());
    em_manual_seed(9);
    em_module *m = mlp();
    cr_assert_eq(em_module_save(m, model_path, NULL, 0), EM_OK, "%s", em_error());
    em_module_free(m);
}

/* body is {"predictions":[a, b]} with a and b the single answers given: the same argmax and
 * outputs within 1e-6 (a batch of two multiplies as a matrix product, one sample as a
 * matrix-vector product, so the last bits may differ). */
static void expect_predictions(const char *body, char single[2][4096])
{
    json_error_t e;
    json_t *got = json_loads(body, 0, &e), *preds = json_object_get(got, "predictions");
    cr_assert(json_array_size(preds) == 2, "%s", body);
    for (int k = 0; k < 2; k++) {
        json_t *want = json_loads(single[k], 0, &e), *p = json_array_get(preds, k);
        cr_assert(want, "%s", single[k]);
        cr_expect_eq(json_integer_value(json_object_get(p, "argmax")),
                     json_integer_value(json_object_get(want, "argmax")));
        const json_t *o = json_object_get(p, "output"), *w = json_object_get(want, "output");
        cr_assert_eq(json_array_size(o), json_array_size(w));
        for (size_t i = 0; i < json_array_size(o); i++)
            cr_expect(fabs(json_number_value(json_array_get(o, i)) -
                           json_number_value(json_array_get(w, i))) <= 1e-6,
                      "prediction %d output %zu: %s vs %s", k, i, body, single[k]);
        json_decref(want);
    }
    json_decref(got);
}

Test(serve_http, endpoints_answers_and_errors)
{
    save_model();
    start("--max-body 8192");
    http_client c = {.port = port, .fd = -1};
    cr_assert_eq(request(&c, "GET", "/health", ""), 200);
    cr_assert_str_eq(c.body, "{\"status\":\"ok\"}");
    char *body = zeros_body(784, ",\"priority\":\"high\"");
    cr_assert_eq(request(&c, "POST", "/predict", body), 200, "%s", c.body);
    /* the same model in the library, on the same input */
    em_manual_seed(9);
    em_module *m = mlp();
    em_module_eval(m);
    em_tensor *x = em_zeros(EM_SHAPE(1, 784), EM_F32), *y = em_forward(m, x);
    const char *p = strstr(c.body, "\"output\":[") + 10;
    for (int i = 0; i < 10; i++) {
        double v = strtod(p, (char **)&p);
        p++;
        cr_assert(fabs(v - em_get(y, (int64_t[]){0, i})) <= 1e-6, "output %d: %g vs %g", i, v,
                  em_get(y, (int64_t[]){0, i}));
    }
    em_release(x), em_release(y);
    em_module_free(m);
    /* a batch of two instances: the two single answers, in order */
    char single[2][4096];
    snprintf(single[0], sizeof single[0], "%s", c.body);
    char *ones = zeros_body(784, "");
    for (char *q = strchr(ones, '0'); q; q = strchr(q + 1, '0'))
        *q = '1';
    cr_assert_eq(request(&c, "POST", "/predict", ones), 200, "%s", c.body);
    snprintf(single[1], sizeof single[1], "%s", c.body);
    char *batch = malloc(strlen(body) + strlen(ones) + 64);
    sprintf(batch, "{\"instances\":[%.*s,%.*s]}", (int)(strlen(body) - 28), body + 9,
            (int)(strlen(ones) - 10), ones + 9); /* the arrays of body and ones */
    cr_assert_eq(request(&c, "POST", "/predict", batch), 200, "%s", c.body);
    expect_predictions(c.body, single);
    free(ones);
    free(batch);
    cr_assert_eq(request(&c, "POST", "/predict", "{\"input\":[1,2"), 400);
    cr_assert(strstr(c.body, "\"error\":\"predict: 'request body': corrupt JSON at byte 13"),
              "%s", c.body);
    cr_assert_eq(request(&c, "POST", "/predict", "{\"input\":[1,2,3]}"), 400);
    cr_assert(strstr(c.body, "shape [3] does not match the model's sample [784]"), "%s", c.body);
    char *big = zeros_body(5000, "");
    cr_assert_eq(request(&c, "POST", "/predict", big), 400);
    cr_assert(strstr(c.body, "body larger than 8192 bytes"), "%s", c.body);
    cr_assert_eq(request(&c, "GET", "/nope", ""), 404);
    cr_assert_eq(request(&c, "GET", "/predict", ""), 405);
    cr_assert_eq(request(&c, "GET", "/stats", ""), 200);
    cr_assert(strstr(c.body, "\"completed\":4,"), "%s", c.body);
    http_client_close(&c);
    free(body);
    free(big);
    char last[4096];
    cr_assert_eq(stop(last, sizeof last), 0, "%s", last);
    cr_assert(strstr(last, "\"stopped_by\":\"SIGTERM\",\"unanswered\":0"), "%s", last);
    unlink(model_path);
}

static void *slow_request(void *arg)
{
    int *status = arg;
    http_client c = {.port = port, .fd = -1};
    char *body = zeros_body(784, "");
    if (!http_client_request(&c, "POST", "/predict", body, strlen(body), status))
        *status = -1;
    http_client_close(&c);
    free(body);
    return NULL;
}

Test(serve_http, sigterm_drains_a_request_in_flight)
{
    save_model();
    start("--max-batch 64 --max-wait-ms 600"); /* a lone request waits 600 ms for company */
    int status = 0;
    pthread_t t;
    pthread_create(&t, NULL, slow_request, &status);
    usleep(200 * 1000);
    char last[4096];
    int rc = stop(last, sizeof last);
    pthread_join(t, NULL);
    cr_assert_eq(status, 200, "the request in flight got %d", status);
    cr_assert_eq(rc, 0, "%s", last);
    cr_assert(strstr(last, "\"unanswered\":0") && strstr(last, "\"completed\":1,"), "%s", last);
    unlink(model_path);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A raw connection to the server that has sent `sent` (may be ""). */
static int raw_connection(const char *sent)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    size_t n = strlen(sent);
    cr_assert_eq(send(fd, sent, n, MSG_NOSIGNAL), (ssize_t)n);
    return fd;
}

/* A request on a new connection, answered within `within` seconds; returns the status. */
static int timed_request(const char *method, const char *path, const char *body, double within)
{
    http_client c = {.port = port, .fd = -1};
    double t0 = now_s();
    int status = request(&c, method, path, body);
    double took = now_s() - t0;
    http_client_close(&c);
    cr_assert_leq(took, within, "%s %s took %.2f s", method, path, took);
    return status;
}

/* A connection to the server's port: 0 with *fd, or the errno of connect. */
static int try_connect(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(*fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect(*fd, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
}

/* Reads from fd until the peer closes it (or 10 s pass) into buf; the bytes read. */
static size_t read_until_closed(int fd, char *buf, size_t cap)
{
    struct timeval limit = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    size_t have = 0;
    ssize_t k;
    while (have + 1 < cap && (k = recv(fd, buf + have, cap - 1 - have, 0)) > 0)
        have += (size_t)k;
    buf[have] = '\0';
    return k == 0 ? have : 0; /* 0 unless the server closed it */
}

/* SIGTERM while a keep-alive connection's request waits 1.5 s for its batch: a new connection is
 * refused at once (not accepted and left unanswered until the drain ends), and the waiting
 * request is answered 200 with Connection: close, after which the server closes the connection
 * (so the client sends nothing more on it to go unanswered). */
Test(serve_http, sigterm_refuses_new_connections_and_closes_keep_alive_ones_after_their_answer,
     .timeout = 30)
{
    save_model();
    start("--max-batch 64 --max-wait-ms 1500");
    char *body = zeros_body(784, "");
    char *req = malloc(strlen(body) + 128);
    sprintf(req, "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
            strlen(body), body);
    int waiting = raw_connection(req);
    usleep(200 * 1000);
    double t0 = now_s();
    kill(server, SIGTERM);
    usleep(200 * 1000);
    int late;
    int refused = try_connect(&late);
    double took = now_s() - t0;
    close(late);
    cr_assert_eq(refused, ECONNREFUSED, "a connection after SIGTERM: %s", strerror(refused));
    cr_assert_leq(took, 1.0, "refused after %.2f s", took);
    static char answer[65536];
    cr_assert_gt(read_until_closed(waiting, answer, sizeof answer), 0,
                 "the keep-alive connection was not closed after its answer: %s", answer);
    cr_assert(!strncmp(answer, "HTTP/1.1 200", 12), "%s", answer);
    cr_assert(strstr(answer, "Connection: close\r\n"), "%s", answer);
    cr_assert(strstr(answer, "\"argmax\":"), "%s", answer);
    close(waiting);
    free(req);
    free(body);
    char last[4096];
    cr_assert_eq(wait_exit(last, sizeof last), 0, "%s", last);
    cr_assert(strstr(last, "\"unanswered\":0") && strstr(last, "\"completed\":1,"), "%s", last);
    unlink(model_path);
}

#define IDLE 256
#define HALF_SENT 8

Test(serve_http, slowloris_leaves_health_predict_and_sigterm_prompt, .timeout = 60)
{
    save_model();
    start(""); /* the defaults: 256 connections, a read timeout of 10 s, a drain of 30 s */
    int held[IDLE + HALF_SENT];
    for (int i = 0; i < IDLE; i++)
        held[i] = raw_connection("");
    for (int i = 0; i < HALF_SENT; i++)
        held[IDLE + i] = raw_connection("POST /predict HTTP/1.1\r\nHost: x\r\n"
                                        "Content-Length: 100000\r\n\r\n{\"input\":[0,0,");
    usleep(300 * 1000); /* all accepted and waiting */
    char *body = zeros_body(784, "");
    for (int round = 0; round < 3; round++) { /* bounds far below the 10 s read timeout */
        cr_assert_eq(timed_request("GET", "/health", "", 3.0), 200);
        cr_assert_eq(timed_request("POST", "/predict", body, 3.0), 200);
    }
    free(body);
    double t0 = now_s();
    char last[4096];
    int rc = stop(last, sizeof last);
    double took = now_s() - t0;
    cr_assert_eq(rc, 0, "%s", last);
    cr_assert_leq(took, 5.0, "SIGTERM took %.2f s (the drain allows 30)", took);
    cr_assert(strstr(last, "\"unanswered\":0") && strstr(last, "\"completed\":3,"), "%s", last);
    for (int i = 0; i < IDLE + HALF_SENT; i++)
        close(held[i]);
    unlink(model_path);
}

Test(serve_http, a_trickled_request_is_closed_at_the_read_timeout, .timeout = 30)
{
    save_model();
    start("--read-timeout-s 0.5");
    int idle = raw_connection("");
    int fd = raw_connection("GET /health HTTP/1.1\r\n");
    double t0 = now_s(), closed = -1;
    for (int i = 0; i < 80 && closed < 0; i++) { /* a header byte every 100 ms */
        usleep(100 * 1000);
        if (send(fd, "X", 1, MSG_NOSIGNAL) != 1)
            closed = now_s() - t0;
        char b;
        if (closed < 0 && recv(fd, &b, 1, MSG_DONTWAIT) == 0)
            closed = now_s() - t0;
    }
    cr_assert(closed >= 0.4 && closed <= 4.0, "the trickled request was closed after %.2f s",
              closed);
    char b;
    cr_assert_eq(recv(idle, &b, 1, 0), 0, "the idle connection was not closed");
    close(fd);
    close(idle);
    cr_assert_eq(timed_request("GET", "/health", "", 3.0), 200);
    stop_and_expect_exit_0();
}

Test(serve_http, an_answer_slower_than_the_read_timeout_is_still_sent, .timeout = 30)
{
    save_model();
    start("--read-timeout-s 0.5 --max-batch 64 --max-wait-ms 1500");
    int status = 0;
    slow_request(&status); /* waits 1.5 s for its batch, three read timeouts */
    cr_assert_eq(status, 200);
    stop_and_expect_exit_0();
}

Test(serve_http, a_connection_beyond_busy_ones_is_answered_503, .timeout = 30)
{
    save_model();
    start("--max-connections 2 --max-batch 64 --max-wait-ms 3000");
    int status[2] = {0, 0};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, slow_request, &status[i]);
    /* once both wait for their batch, every connection is answering */
    http_client c = {.port = port, .fd = -1};
    int got = 0;
    for (int tries = 0; tries < 20 && got != 503; tries++) {
        usleep(100 * 1000);
        got = request(&c, "GET", "/health", "");
        http_client_close(&c);
    }
    cr_assert_eq(got, 503);
    cr_assert(strstr(c.body, "at its connection limit"), "%s", c.body);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(status[i], 200);
    }
    cr_assert_eq(timed_request("GET", "/health", "", 3.0), 200);
    stop_and_expect_exit_0();
}
