/* `ember serve [RECIPE] --load FILE --port N`: a saved model behind the inference engine over
 * HTTP/JSON on 127.0.0.1 until SIGTERM or SIGINT, which drains the requests in flight. */
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "serve/request.h"
#include "cmd/cmd.h"
#include "http/http_server.h"
#include "cli/cli_internal.h"

/* What `ember serve`'s command line sets. */
typedef struct {
    const char *recipe, *load, *cache_dir, *input_shape;
    int port, threads;
    double drain_s;
    em_engine_opts eo;
    http_server_opts ho;
    int64_t max_body;
} serve_args;

/* Reads argv into a and *rc, the engine's and server's options settled; CMD_ARGS_RUN to go on,
 * else the exit status. */
static int parse_serve_args(int argc, char **argv, serve_args *a, const recipe_spec **rc)
{
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &a->load, "FILE", "the model file or checkpoint",
         .required = true},
        CMD_INPUT_SHAPE_OPT(a->input_shape),
        {"port", CMD_OPT_INT, &a->port, "N", "TCP port on 127.0.0.1 (default 8080; 0: any)",
         .range = CMD_RANGE(0, 65535)},
        {"workers", CMD_OPT_INT, &a->eo.workers, "N", "engine workers (default 1)",
         .range = CMD_RANGE(1, 64)},
        {"reserved-workers", CMD_OPT_INT, &a->eo.reserved_workers, "N",
         "workers that take only high and critical requests (default 0)",
         .range = CMD_RANGE(0, 63)},
        {"bulk-nice", CMD_OPT_INT, &a->eo.bulk_nice, "N", "with reserved workers: the nice value "
         "of the others (default 0)", .range = CMD_RANGE(0, 19)},
        {"max-batch", CMD_OPT_INT, &a->eo.max_batch, "N", "largest batch; 1 turns batching off "
         "(default 32)", .range = CMD_RANGE(1, EM_ENGINE_MAX_BATCH)},
        {"max-wait-ms", CMD_OPT_REAL, &a->eo.max_wait_ms, "X", "how long a batch waits to fill "
         "(default 2)", .range = CMD_RANGE(0.01, 10000)},
        {"max-queue", CMD_OPT_INT64, &a->eo.max_queue, "N", "queued requests before 503 (default "
         "1024)", .range = CMD_RANGE(1, 1 << 24)},
        {"target-p95-ms", CMD_OPT_REAL, &a->eo.target_p95_ms, "X", "adaptive batching target "
         "(default off)", .range = CMD_RANGE(0, 1e6)},
        {"cache-entries", CMD_OPT_INT64, &a->eo.cache.max_entries, "N", "result cache entries "
         "(default 0: no cache)", .range = CMD_RANGE(0, 1 << 24)},
        {"cache-bytes", CMD_OPT_INT64, &a->eo.cache.max_bytes, "N", "result cache bytes (default "
         "64 MiB)", .range = CMD_RANGE(0, 1e15)},
        {"cache-dir", CMD_OPT_STRING, &a->cache_dir, "DIR",
         .help = "load the cache from DIR, save it at exit"},
        {"threads", CMD_OPT_INT, &a->threads, "N", "OpenMP threads per worker (default: all)",
         .range = CMD_RANGE(0, 4096)},
        {"max-body", CMD_OPT_INT64, &a->max_body, "BYTES", "largest request body (default 1 MiB)",
         .range = CMD_RANGE(1, 1 << 30)},
        {"max-connections", CMD_OPT_INT, &a->ho.max_connections, "N", "open connections; one more "
         "closes the one waiting longest for its request, or is answered 503 (default 256)",
         .range = CMD_RANGE(1, 100000)},
        {"read-timeout-s", CMD_OPT_REAL, &a->ho.read_timeout_s, "X", "a connection that has not "
         "sent a whole request X s after opening or its last answer is closed (default 10)",
         .range = CMD_RANGE(0.05, 3600)},
        {"timeout-ms", CMD_OPT_REAL, &a->ho.timeout_ms, "X", "a request's default deadline, then "
         "504 (default 30000)", .range = CMD_RANGE(0, 3.6e6)},
        {"drain-s", CMD_OPT_REAL, &a->drain_s, "X", "how long SIGTERM waits for requests in "
         "flight (default 30)", .range = CMD_RANGE(0, 3600)},
        {0}};
    const cmd_spec spec = {
        .command = "ember serve", .operands = "RECIPE", .n_operands = 1, .operand = &a->recipe,
        .operands_optional = true,
        .about = "Serves a saved model over HTTP/JSON on 127.0.0.1: POST /predict "
                 "{\"input\":[...],\n\"priority\":\"low|normal|high|critical\",\"timeout_ms\":N}, "
                 "GET /health, GET /stats.\nSIGTERM refuses new connections, drops the requests still "
                 "being sent,\nanswers the ones in flight (closing their connections), then "
                 "exits.\nA request's input is one sample of the "
                 "shape --input-shape gives, else the model file's\n(input_shape), else its "
                 "recipe's. RECIPE: only for a file of weights alone.",
        .more_help = cmd_list_image_recipes, .opts = opts};
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &a->recipe, true, rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (a->eo.reserved_workers >= a->eo.workers) {
        fprintf(stderr, "ember serve: --reserved-workers must be below --workers\n");
        return 2;
    }
    a->eo.threads_per_worker = a->threads;
    a->eo.cache_dir = a->cache_dir;
    a->ho.port = a->port;
    a->ho.max_body = (size_t)a->max_body;
    return CMD_ARGS_RUN;
}

/* Serves m until a signal of stop arrives, then drains; the exit status. */
static int serve(const recipe_model *m, const serve_args *a, const sigset_t *stop)
{
    em_engine *e = em_engine_new(m->model, m->input, a->eo);
    if (!e) {
        fprintf(stderr, "ember serve: %s\n", em_error());
        return 1;
    }
    if (em_engine_warning(e))
        fprintf(stderr, "ember serve: %s\n", em_engine_warning(e));
    int64_t discarded = em_engine_get_stats(e).cache.discarded;
    if (discarded)
        fprintf(stderr, "ember serve: %lld cached results in %s were not of this model or its "
                "shapes; discarded\n", (long long)discarded, a->cache_dir);
    http_server *s = http_server_start(e, a->ho);
    if (!s) {
        em_engine_free(e);
        return 1;
    }
    printf("{\"serving\":\"%s\",\"port\":%d,\"workers\":%d,\"max_batch\":%d}\n",
           cmd_model_name(m), http_server_port(s), a->eo.workers, a->eo.max_batch);
    fflush(stdout);
    int sig = 0;
    sigwait(stop, &sig);
    int left = http_server_stop(s, a->drain_s);
    em_engine_stats stats = em_engine_get_stats(e);
    em_engine_free(e);
    char *json = em_engine_stats_json(&stats);
    printf("{\"stopped_by\":\"%s\",\"unanswered\":%d,\"stats\":%s}\n",
           sig == SIGTERM ? "SIGTERM" : "SIGINT", left, json ? json : "null");
    free(json);
    return left ? 1 : 0;
}

int cli_cmd_serve(int argc, char **argv)
{
    serve_args a = {.port = 8080, .drain_s = 30, .max_body = 1 << 20,
                    .ho = {.max_connections = 256, .read_timeout_s = 10},
                    .eo = {.workers = 1, .max_batch = 32, .max_wait_ms = 2, .max_queue = 1024}};
    const recipe_spec *rc;
    int parsed = parse_serve_args(argc, argv, &a, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    recipe_model m;
    int status = cmd_load_model("ember serve", a.load, rc, a.input_shape, true, &m);
    if (status)
        return status;
    if (!cmd_has_input_shape("ember serve", a.load, &m)) {
        recipe_model_free(&m);
        return 2;
    }
    /* SIGTERM and SIGINT go to sigwait in serve, in no other thread */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    status = serve(&m, &a, &stop);
    recipe_model_free(&m);
    return status;
}
