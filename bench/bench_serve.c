/* `ember bench serve`: the inference server under load from concurrent loopback clients (each
 * a keep-alive connection sending Fashion-MNIST test images): batching off vs on vs adaptive,
 * the cache off vs on at a 50% repeat rate, critical requests' latency alone and under a
 * low-priority flood, and (--soak S) a long mixed run that samples resident memory. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/engine.h"
#include "http/http_client.h"
#include "http/http_server.h"
#include "cmd/cmd.h"
#include "bench/bench.h"

#define HOT_IMAGES 256
/* Critical clients send one request per 20 ms: urgent traffic is rare, and a client that sent
 * the next at once would itself keep a worker busy all the time. */
#define CRITICAL_INTERVAL_S 0.020
/* The priority rows last this many times --seconds: enough paced requests for a p99 */
#define PRIORITY_ROWS 2
/* The flood is measured again with the bulk worker's threads at this nice value */
#define BULK_NICE 10
#define STR(x) STR_(x)
#define STR_(x) #x

typedef struct {
    char *head[HOT_IMAGES]; /* "{\"input\":[" + the first pixel */
    char *tail[HOT_IMAGES]; /* the other pixels + "]" */
} bodies;

typedef struct {
    int port;
    const bodies *b;
    double until_s;
    em_priority priority;
    double repeat;       /* probability of sending a hot image, else a never-seen one */
    double interval_s;   /* > 0: one request per interval (paced); 0: the next at once */
    int id;
    /* results */
    double *lat_ms;      /* (cap) */
    int64_t n, cap, errors, rejected;
} client;

static atomic_llong fresh_counter;

static void *client_main(void *p)
{
    client *c = p;
    http_client *conn = calloc(1, sizeof *conn);
    conn->port = c->port;
    conn->fd = -1;
    char *body = malloc(16384);
    uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(c->id + 1);
    while (bench_now_s() < c->until_s) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int img = (int)(rng % HOT_IMAGES);
        bool hot = (double)(rng >> 11) / 9007199254740992.0 < c->repeat;
        int k = hot ? snprintf(body, 16384, "%s%s", c->b->head[img], c->b->tail[img])
                    : snprintf(body, 16384, "{\"input\":[%.9g%s",
                               1e-6 * (double)(atomic_fetch_add(&fresh_counter, 1) + 1),
                               c->b->tail[img]);
        k += snprintf(body + k, 16384 - (size_t)k, ",\"priority\":\"%s\"}",
                      em_priority_name(c->priority));
        int status = 0;
        double t0 = bench_now_s();
        bool ok = http_client_request(conn, "POST", "/predict", body, (size_t)k, &status);
        double ms = (bench_now_s() - t0) * 1e3;
        if (ok && status == 200) {
            if (c->n == c->cap) {
                c->cap = c->cap ? 2 * c->cap : 4096;
                c->lat_ms = realloc(c->lat_ms, sizeof *c->lat_ms * (size_t)c->cap);
            }
            c->lat_ms[c->n++] = ms;
        } else if (ok && status == 503) {
            c->rejected++;
        } else {
            c->errors++;
        }
        double idle_s = t0 + c->interval_s - bench_now_s();
        if (idle_s > 0)
            nanosleep(&(struct timespec){.tv_nsec = (long)(idle_s * 1e9)}, NULL);
    }
    http_client_close(conn);
    free(conn);
    free(body);
    return NULL;
}

typedef struct {
    double rps, p50, p95, p99;
    int64_t ok, errors, rejected;
} load_result;

static double pct(const double *v, int64_t n, double q)
{
    if (n == 0)
        return 0;
    int64_t k = (int64_t)(q * (double)n + 0.999999) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Runs n clients of the given priority (and n_crit critical ones) for seconds; the figures of
 * the low/normal clients go to *bulk, the critical ones' to *crit (when given). */
static void run_load(int port, const bodies *b, int n, em_priority p, int n_crit, double repeat,
                     double seconds, load_result *bulk, load_result *crit)
{
    int total = n + n_crit;
    client *cs = calloc((size_t)total, sizeof *cs);
    pthread_t *t = calloc((size_t)total, sizeof *t);
    double start = bench_now_s();
    for (int i = 0; i < total; i++) {
        cs[i] = (client){.port = port, .b = b, .until_s = start + seconds,
                         .priority = i < n ? p : EM_PRIORITY_CRITICAL, .repeat = repeat,
                         .interval_s = i < n ? 0 : CRITICAL_INTERVAL_S, .id = i};
        pthread_create(&t[i], NULL, client_main, &cs[i]);
    }
    for (int i = 0; i < total; i++)
        pthread_join(t[i], NULL);
    double wall = bench_now_s() - start;
    for (int group = 0; group < 2; group++) {
        load_result *r = group ? crit : bulk;
        if (!r)
            continue;
        int from = group ? n : 0, to = group ? total : n;
        int64_t count = 0;
        *r = (load_result){0};
        for (int i = from; i < to; i++)
            count += cs[i].n;
        double *all = malloc(sizeof *all * (size_t)(count ? count : 1));
        count = 0;
        for (int i = from; i < to; i++) {
            memcpy(all + count, cs[i].lat_ms, sizeof *all * (size_t)cs[i].n);
            count += cs[i].n;
            r->errors += cs[i].errors;
            r->rejected += cs[i].rejected;
        }
        bench_sort_doubles(all, (int)count);
        r->ok = count;
        r->rps = (double)count / wall;
        r->p50 = pct(all, count, 0.50);
        r->p95 = pct(all, count, 0.95);
        r->p99 = pct(all, count, 0.99);
        free(all);
    }
    for (int i = 0; i < total; i++)
        free(cs[i].lat_ms);
    free(cs);
    free(t);
}

static void print_row(const char *name, int clients, const load_result *r)
{
    printf("%-34s %7d %9.0f %8.2f %8.2f %8.2f %7lld %7lld\n", name, clients, r->rps, r->p50,
           r->p95, r->p99, (long long)r->errors, (long long)r->rejected);
    fflush(stdout);
}

/* Starts an engine and server with eo, runs fn's load, stops both. */
typedef struct {
    em_module *model;
    em_shape sample;
    const bodies *b;
    double seconds;
    int clients;
    double target_p95_ms; /* the adaptive row's */
} bench_ctx;

static http_server *start(const bench_ctx *bc, em_engine_opts eo, em_engine **e)
{
    *e = em_engine_new(bc->model, bc->sample, eo);
    http_server *s = *e ? http_server_start(*e, (http_server_opts){.max_connections = 1024}) : NULL;
    if (!s) {
        fprintf(stderr, "ember bench serve: %s\n", em_error());
        em_engine_free(*e);
    }
    return s;
}

static void stop(http_server *s, em_engine *e)
{
    http_server_stop(s, 10);
    em_engine_free(e);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The soak: low-priority clients and one critical one at a 50% repeat rate, a reserved worker
 * and a bulk one at nice 10, RSS sampled every 10 s. */
static int soak(const bench_ctx *bc, em_engine_opts eo, double seconds)
{
    em_engine *e;
    http_server *s = start(bc, eo, &e);
    if (!s)
        return 1;
    load_result warm;
    run_load(http_server_port(s), bc->b, bc->clients, EM_PRIORITY_NORMAL, 0, 0.5, 5, &warm, NULL);
    long first = rss_kib(), peak = first, last = first, half = first;
    int64_t ok = 0, errors = 0, rejected = 0;
    printf("soak: %d clients (one critical, the others low), 50%% repeats, %.0f s; RSS after a 5 s "
           "warm-up %ld KiB\n", bc->clients, seconds, first);
    for (double done = 0; done < seconds; done += 10) {
        load_result bulk, crit; /* 10 s slices: low-priority clients and one critical one */
        run_load(http_server_port(s), bc->b, bc->clients - 1, EM_PRIORITY_LOW, 1, 0.5, 10, &bulk,
                 &crit);
        ok += bulk.ok + crit.ok;
        errors += bulk.errors + crit.errors;
        rejected += bulk.rejected + crit.rejected;
        last = rss_kib();
        peak = last > peak ? last : peak;
        if (done < seconds / 2)
            half = last; /* the allocator's arenas and the cache settle in the first half */
        printf("soak t=%4.0fs req/s %6.0f p99 %7.2f ms crit p99 %7.2f ms errors %lld "
               "rejected %lld RSS %ld KiB\n", done + 10, bulk.rps + crit.rps, bulk.p99, crit.p99,
               (long long)errors, (long long)rejected, last);
        fflush(stdout);
    }
    em_engine_stats st = em_engine_get_stats(e);
    stop(s, e);
    printf("{\"soak_s\":%.0f,\"requests_ok\":%lld,\"errors\":%lld,\"rejected\":%lld,"
           "\"engine_failed\":%lld,\"rss_kib_first\":%ld,\"rss_kib_last\":%ld,"
           "\"rss_kib_peak\":%ld,\"rss_growth_kib\":%ld,"
           "\"rss_growth_second_half_kib\":%ld}\n",
           seconds, (long long)ok, (long long)errors, (long long)rejected, (long long)st.failed,
           first, last, peak, last - first, last - half);
    return errors || st.failed ? 1 : 0;
}

static bodies *make_bodies(const em_tensor *x) /* x (HOT_IMAGES, ...) */
{
    bodies *b = calloc(1, sizeof *b);
    int64_t per = em_numel(x) / HOT_IMAGES;
    float *v = malloc(sizeof *v * (size_t)em_numel(x));
    em_copy_to_host(x, EM_F32, v);
    for (int i = 0; i < HOT_IMAGES; i++) {
        b->head[i] = malloc(64);
        snprintf(b->head[i], 64, "{\"input\":[%.6g", v[i * per]);
        b->tail[i] = malloc((size_t)per * 16 + 8);
        size_t k = 0;
        for (int64_t j = 1; j < per; j++)
            k += (size_t)sprintf(b->tail[i] + k, ",%.6g", v[i * per + j]);
        strcpy(b->tail[i] + k, "]");
    }
    free(v);
    return b;
}

/* The three comparisons' rows. */
typedef struct {
    load_result off, on, adaptive;        /* batching off, on, adaptive */
    load_result cache_off, cache_on;      /* at a 50% repeat rate */
    em_cache_stats cache;                 /* the cached row's hits and misses */
    load_result alone, flood, crit;       /* critical alone; under a low-priority flood */
    load_result flood_nice, crit_nice;    /* the same with the bulk worker niced */
} serve_rows;

/* One row: a server with eo under the clients' load at a repeat rate, printed as label. */
static void measure_row(const bench_ctx *bc, em_engine_opts eo, double repeat, const char *label,
                        load_result *out)
{
    em_engine *e;
    http_server *s = start(bc, eo, &e);
    if (!s)
        return;
    run_load(http_server_port(s), bc->b, bc->clients, EM_PRIORITY_NORMAL, 0, repeat, bc->seconds,
             out, NULL);
    stop(s, e);
    print_row(label, bc->clients, out);
}

static void batching_rows(const bench_ctx *bc, em_engine_opts off, em_engine_opts on,
                          serve_rows *r)
{
    measure_row(bc, off, 0, "batching off (max_batch 1)", &r->off);
    measure_row(bc, on, 0, "batching on", &r->on);
    em_engine_opts adaptive = on;
    adaptive.target_p95_ms = bc->target_p95_ms;
    measure_row(bc, adaptive, 0, "batching adaptive", &r->adaptive);
}

static void cache_rows(const bench_ctx *bc, em_engine_opts on, serve_rows *r)
{
    measure_row(bc, on, 0.5, "batching on, cache off, 50% repeats", &r->cache_off);
    em_engine *e;
    http_server *s;
    em_engine_opts cached = on;
    cached.cache = (em_cache_opts){.max_entries = 1 << 16, .max_bytes = 512LL << 20};
    if ((s = start(bc, cached, &e))) {
        load_result warm; /* every hot image sent once: repeats can hit from the start */
        run_load(http_server_port(s), bc->b, bc->clients, EM_PRIORITY_NORMAL, 0, 1.0, 1, &warm,
                 NULL);
        em_cache_stats before = em_engine_get_stats(e).cache;
        run_load(http_server_port(s), bc->b, bc->clients, EM_PRIORITY_NORMAL, 0, 0.5, bc->seconds,
                 &r->cache_on, NULL);
        r->cache = em_engine_get_stats(e).cache;
        r->cache.hits -= before.hits;
        r->cache.misses -= before.misses;
        stop(s, e);
        print_row("batching on, cache on, 50% repeats", bc->clients, &r->cache_on);
    }
}

static void priority_rows(const bench_ctx *bc, em_engine_opts on, serve_rows *r)
{
    em_engine *e;
    http_server *s;
    double seconds = PRIORITY_ROWS * bc->seconds;
    em_engine_opts prio = on;
    prio.workers = 2;
    prio.reserved_workers = 1;
    prio.max_queue = 256;
    if ((s = start(bc, prio, &e))) {
        run_load(http_server_port(s), bc->b, 0, EM_PRIORITY_LOW, 1, 0, seconds, NULL, &r->alone);
        print_row("critical alone", 1, &r->alone);
        run_load(http_server_port(s), bc->b, bc->clients, EM_PRIORITY_LOW, 1, 0, seconds, &r->flood,
                 &r->crit);
        stop(s, e);
        print_row("low-priority flood", bc->clients, &r->flood);
        print_row("critical under the flood", 1, &r->crit);
    }
    prio.bulk_nice = BULK_NICE;
    if ((s = start(bc, prio, &e))) {
        run_load(http_server_port(s), bc->b, bc->clients, EM_PRIORITY_LOW, 1, 0, seconds,
                 &r->flood_nice, &r->crit_nice);
        stop(s, e);
        print_row("low-priority flood, bulk nice " STR(BULK_NICE), bc->clients, &r->flood_nice);
        print_row("critical under it", 1, &r->crit_nice);
    }
}

/* The comparisons' ratios as one JSON line. */
static void print_json(const char *recipe, int clients, bool batching, bool cache, bool priority,
                       const serve_rows *r)
{
    double lookups = (double)(r->cache.hits + r->cache.misses);
    double hit_rate = lookups > 0 ? (double)r->cache.hits / lookups : 0;
    printf("{\"recipe\":\"%s\",\"clients\":%d", recipe, clients);
    if (batching)
        printf(",\"batching_rps_ratio\":%.2f,\"batching_p99_off_ms\":%.2f,"
               "\"batching_p99_on_ms\":%.2f,\"adaptive_rps_ratio\":%.2f,"
               "\"batching_p99_adaptive_ms\":%.2f", r->off.rps > 0 ? r->on.rps / r->off.rps : 0,
               r->off.p99, r->on.p99, r->off.rps > 0 ? r->adaptive.rps / r->off.rps : 0,
               r->adaptive.p99);
    if (cache)
        printf(",\"cache_hit_rate\":%.3f,\"cache_rps_ratio\":%.2f", hit_rate,
               r->cache_off.rps > 0 ? r->cache_on.rps / r->cache_off.rps : 0);
    if (priority)
        printf(",\"critical_p99_alone_ms\":%.2f,\"critical_p99_flood_ms\":%.2f,"
               "\"critical_p99_ratio\":%.2f,\"critical_p99_flood_bulk_nice_ms\":%.2f,"
               "\"critical_p99_ratio_bulk_nice\":%.2f,\"bulk_nice\":%d", r->alone.p99,
               r->crit.p99, r->alone.p99 > 0 ? r->crit.p99 / r->alone.p99 : 0, r->crit_nice.p99,
               r->alone.p99 > 0 ? r->crit_nice.p99 / r->alone.p99 : 0, BULK_NICE);
    printf("}\n");
}

/* Batching, the cache and priorities compared (or the ones only names): the table and JSON. */
static void compare(const bench_ctx *bc, const char *name, const char *load, int threads,
                    const char *only, em_engine_opts off, em_engine_opts on)
{
    printf("ember bench serve: %s (%s), %d clients, %.0f s per row, %d OpenMP threads per "
           "worker; the machine's cores are shared, figures are noisy\n", name,
           load ? load : "fresh weights", bc->clients, bc->seconds, threads);
    printf("%-34s %7s %9s %8s %8s %8s %7s %7s\n", "scenario", "clients", "req/s", "p50_ms",
           "p95_ms", "p99_ms", "errors", "503s");
    serve_rows r = {0};
    bool batching = !only || !strcmp(only, "batching");
    bool cache = !only || !strcmp(only, "cache");
    bool priority = !only || !strcmp(only, "priority");
    if (batching)
        batching_rows(bc, off, on, &r);
    if (cache)
        cache_rows(bc, on, &r);
    if (priority)
        priority_rows(bc, on, &r);
    print_json(name, bc->clients, batching, cache, priority, &r);
}

static void free_bodies(bodies *b)
{
    for (int i = 0; i < HOT_IMAGES; i++) {
        free(b->head[i]);
        free(b->tail[i]);
    }
    free(b);
}

/* The model served: the one in load (rc: --recipe, or NULL), else rc's fresh one (default cnn);
 * 0, or the exit status after printing why. */
static int get_model(const recipe_spec *rc, const char *load, recipe_model *m)
{
    if (load)
        return cmd_load_model("ember bench serve", load, rc, NULL, true, m);
    rc = rc ? rc : recipe_find("cnn");
    *m = (recipe_model){.model = rc->build(NULL), .recipe = rc, .input = rc->sample};
    if (m->model)
        return 0;
    fprintf(stderr, "ember bench serve: %s\n", em_error());
    return 1;
}

int bench_serve(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *data_dir = NULL, *only = NULL;
    int clients = 64, threads = 2, max_batch = 32;
    double seconds = 8, soak_s = 0, target_p95_ms = 20;
    const cmd_opt opts[] = {
        {"recipe", CMD_OPT_STRING, &recipe, "NAME",
         .help = "the model's recipe (default: the one --load names, else cnn)"},
        {"load", CMD_OPT_STRING, &load, "FILE", .help = "the model (default: fresh weights)"},
        {"clients", CMD_OPT_INT, &clients, "N", "concurrent clients (default 64)",
         .range = CMD_RANGE(2, 512)},
        {"seconds", CMD_OPT_REAL, &seconds, "X", "each measurement's length (default 8; the "
         "priority rows twice that)", .range = CMD_RANGE(0.5, 3600)},
        {"max-batch", CMD_OPT_INT, &max_batch, "N", "batch size with batching on (default 32)",
         .range = CMD_RANGE(2, EM_ENGINE_MAX_BATCH)},
        {"target-p95-ms", CMD_OPT_REAL, &target_p95_ms, "X", "the adaptive batching row's target "
         "(default 20)", .range = CMD_RANGE(0.01, 1e6)},
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads per worker (default 2)",
         .range = CMD_RANGE(1, 4096)},
        {"only", CMD_OPT_CHOICE, &only, NULL, "run only one of the three comparisons",
         .choices = "batching|cache|priority"},
        {"soak", CMD_OPT_REAL, &soak_s, "S", "instead: a soak of S seconds", .range =
         CMD_RANGE(10, 86400)},
        {"data", CMD_OPT_STRING, &data_dir, "DIR", .help = CMD_DATA_HELP},
        {0}};
    const cmd_spec spec = {
        .command = "ember bench serve",
        .about = "The inference server under load from concurrent loopback clients: batching "
                 "off vs on vs\nadaptive, the cache off vs on at a 50% repeat rate, critical "
                 "latency alone and\nunder a low-priority flood; or --soak S.",
        .more_help = cmd_list_image_recipes, .opts = opts};
    const recipe_spec *rc;
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &recipe, true, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    recipe_model m;
    int status = get_model(rc, load, &m);
    if (status)
        return status;
    em_dataset *test = recipe_model_images(&m, data_dir, false);
    em_tensor *x = test ? bench_test_batch(test, HOT_IMAGES) : NULL;
    em_dataset_free(test);
    if (!x) {
        fprintf(stderr, "ember bench serve: %s\n", em_error());
        recipe_model_free(&m);
        return 1;
    }
    bodies *b = make_bodies(x);
    em_release(x);
    bench_ctx bc = {.model = m.model, .sample = m.input, .b = b,
                    .seconds = seconds, .clients = clients, .target_p95_ms = target_p95_ms};
    em_engine_opts off = {.workers = 1, .max_batch = 1, .max_queue = 4096,
                          .threads_per_worker = threads};
    em_engine_opts on = off;
    on.max_batch = max_batch;
    on.max_wait_ms = 2;
    if (soak_s > 0) {
        on.cache = (em_cache_opts){.max_entries = 4096};
        on.workers = 2;
        on.reserved_workers = 1;
        on.bulk_nice = BULK_NICE;
        on.max_queue = 256;
        status = soak(&bc, on, soak_s);
    } else {
        compare(&bc, cmd_model_name(&m), load, threads, only, off, on);
    }
    free_bodies(b);
    recipe_model_free(&m);
    return status;
}
