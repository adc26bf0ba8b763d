/* The server's JSON: predict requests parsed against the sample shape (flat or nested numbers,
 * priority, timeout; one input or a batch of instances), every kind of malformed body rejected
 * with a message that says what was wrong, and the response and statistics writers' exact
 * text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ember.h"
#include "serve/request.h"
#include "serve/request_budget.h"

static em_status parse(const char *body, em_shape s, em_predict_request *r, char *err)
{
    return em_predict_request_parse(body, strlen(body), s, r, err, 256);
}

Test(serve_request, flat_and_nested_inputs_with_options)
{
    em_predict_request r;
    char err[256] = "";
    cr_assert_eq(parse(" {\"input\": [1, -2.5e0, 3.25, 0],\n\"priority\":\"critical\","
                       "\"timeout_ms\":250} ", EM_SHAPE(2, 2), &r, err), EM_OK, "%s", err);
    cr_assert_eq(r.priority, EM_PRIORITY_CRITICAL);
    cr_assert_float_eq(r.timeout_ms, 250, 0);
    cr_assert_eq(r.input->ndim, 2);
    float want[4] = {1, -2.5f, 3.25f, 0}, got[4];
    em_copy_to_host(r.input, EM_F32, got);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(got[i], want[i]);
    em_release(r.input);
    cr_assert_eq(parse("{\"input\":[[1,2],[3,4]]}", EM_SHAPE(2, 2), &r, err), EM_OK, "%s", err);
    cr_assert_eq(r.priority, EM_PRIORITY_NORMAL);
    cr_assert_float_eq(em_get(r.input, (int64_t[]){1, 0}), 3, 0);
    em_release(r.input);
}

Test(serve_request, malformed_bodies_say_what_is_wrong)
{
    const char *cases[][2] = {
        {"", "corrupt JSON at byte 0"},
        {"[1,2,3,4]", "the body is not a JSON object"},
        {"{\"input\":[1,2,3]}", "shape [3] does not match the model's sample [2,2]"},
        {"{\"input\":[[1,2],[3]]}", "ragged array at depth 2"},
        {"{\"input\":[[1,2],3,4]}", "a number where an array was expected"},
        {"{\"input\":[1,[2],3,4]}", "ragged nesting at depth 2"},
        {"{\"input\":[1,2,3,4,5]}", "more than 4 numbers"},
        {"{\"input\":[1,2,3,\"4\"]}", "entry 3 at depth 1 is not a number or an array"},
        {"{\"input\":\"1,2,3,4\"}", "input: expected an array"},
        {"{\"input\":[1,2,3,NaN]}", "invalid token near 'NaN'"},
        {"{\"input\":[1,2,3,01]}", "corrupt JSON at byte"},
        {"{\"input\":[1,2,3,1e999]}", "corrupt JSON at byte"},
        {"{\"input\":[1,2,3,3.5e38]}", "number 3.5e+38 is out of the f32 range"},
        {"{\"input\":[1,2,3,4],\"priority\":\"urgent\"}", "'urgent' is not low, normal"},
        {"{\"input\":[1,2,3,4],\"priority\":3}", "priority: expected a string"},
        {"{\"input\":[1,2,3,4],\"timeout_ms\":-1}", "timeout_ms: -1 is not in"},
        {"{\"input\":[1,2,3,4],\"extra\":1}", "unknown key 'extra'"},
        {"{\"input\":[1,2,3,4],\"input\":[1,2,3,4]}", "duplicate object key"},
        {"{\"input\":[1,2,3,4]} x", "corrupt JSON at byte"},
        {"{\"input\":[1,2,3,4]", "corrupt JSON at byte"},
        {"{\"priority\":\"low\"}", "input: missing"},
        {"{\"input\":[]}", "empty array at depth 1"},
        {"{\"input\":[[[[[[[[[1]]]]]]]]]}", "nested deeper than 8"},
        {"{\"input\":[1,2,3,4],}", "corrupt JSON at byte"},
        {"{\"input\":[1,2,3,4],\"k\xff\":1}", "not UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        em_predict_request r;
        char err[256] = "";
        cr_assert_eq(parse(cases[i][0], EM_SHAPE(2, 2), &r, err), EM_ERR_ARG, "case %zu: %s", i,
                     cases[i][0]);
        cr_assert(strstr(err, cases[i][1]), "case %zu (%s): message '%s' lacks '%s'", i,
                  cases[i][0], err, cases[i][1]);
        cr_assert_null(r.input);
    }
}

Test(serve_request, instances_are_a_batch_in_order)
{
    em_predict_request r;
    char err[256] = "";
    cr_assert_eq(parse("{\"instances\":[[1,2,3,4],[[5,6],[7,8]],[0,0,0,-1]],\"priority\":\"low\"}",
                       EM_SHAPE(2, 2), &r, err), EM_OK, "%s", err);
    cr_assert_eq(r.n_instances, 3);
    cr_assert_eq(r.priority, EM_PRIORITY_LOW);
    cr_assert(r.input->ndim == 3 && r.input->shape[0] == 3 && r.input->shape[1] == 2 &&
              r.input->shape[2] == 2);
    float want[12] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, -1}, got[12];
    em_copy_to_host(r.input, EM_F32, got);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(got[i], want[i]);
    em_release(r.input);
    cr_assert_eq(parse("{\"input\":[1,2,3,4]}", EM_SHAPE(2, 2), &r, err), EM_OK);
    cr_assert_eq(r.n_instances, 0, "one input is not a batch");
    em_release(r.input);
    const char *cases[][2] = {
        {"{\"instances\":[]}", "instances: expected a non-empty array of inputs"},
        {"{\"instances\":[1,2,3,4]}", "instances[0]: expected an array of numbers"},
        {"{\"instances\":[[1,2,3,4],[1,2,3]]}", "instances[1]: shape [3] does not match"},
        {"{\"instances\":[[1,2,3,4],[1,2,3,\"x\"]]}", "instances[1]: entry 3 at depth 1"},
        {"{\"instances\":[[1,2,3,4]],\"input\":[1,2,3,4]}", "input and instances: give one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(parse(cases[i][0], EM_SHAPE(2, 2), &r, err), EM_ERR_ARG, "%s", cases[i][0]);
        cr_assert(strstr(err, cases[i][1]), "%s: '%s' lacks '%s'", cases[i][0], err, cases[i][1]);
        cr_assert_null(r.input);
    }
}

Test(serve_request, a_body_without_a_terminating_nul_is_read_within_its_length)
{
    char body[] = "{\"input\":[1,2,3,4]}123"; /* only the first 19 bytes are the body */
    em_predict_request r;
    char err[256] = "";
    cr_assert_eq(em_predict_request_parse(body, 19, EM_SHAPE(4), &r, err, sizeof err), EM_OK,
                 "%s", err);
    em_release(r.input);
    cr_assert_eq(em_predict_request_parse(body, 12, EM_SHAPE(4), &r, err, sizeof err),
                 EM_ERR_ARG);
}

/* NULL with a length is an error naming the argument, in err and em_error */
Test(serve_request, null_arrays_with_a_length_are_errors)
{
    em_predict_request r;
    char err[128];
    cr_assert_eq(em_predict_request_parse(NULL, 10, EM_SHAPE(2, 2), &r, err, sizeof err),
                 EM_ERR_ARG);
    cr_assert_str_eq(err, "em_predict_request_parse: body is NULL");
    em_error_clear();
    cr_assert_eq(em_predict_request_parse("{}", 2, EM_SHAPE(2, 2), &r, NULL, 64), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_predict_request_parse: err is NULL");
    em_error_clear();
    cr_assert_null(em_predict_batch_response(NULL, 2));
    cr_assert_str_eq(em_error(), "em_predict_batch_response: ys is NULL with n 2");
    em_error_clear();
}

Test(serve_request, response_and_stats_text)
{
    em_tensor *y = em_from_data(EM_SHAPE(3), EM_F32, (float[]){0.5f, 2.0f, -1.0f});
    char *json = em_predict_response(y);
    cr_assert_str_eq(json, "{\"output\":[0.5,2.0,-1.0],\"argmax\":1}");
    free(json);
    em_release(y);
    /* an f32 to 9 significant digits; a non-finite output is null and counted */
    y = em_from_data(EM_SHAPE(3), EM_F32, (float[]){0.1f, NAN, -INFINITY});
    json = em_predict_response(y);
    cr_assert_str_eq(json, "{\"output\":[0.100000001,null,null],\"argmax\":0,"
                           "\"non_finite\":2}");
    free(json);
    em_tensor *ys[2] = {em_from_data(EM_SHAPE(2), EM_F32, (float[]){1, 3}),
                        em_from_data(EM_SHAPE(2), EM_F32, (float[]){0.25f, -2})};
    json = em_predict_batch_response(ys, 2);
    cr_assert_str_eq(json, "{\"predictions\":[{\"output\":[1.0,3.0],\"argmax\":1},"
                           "{\"output\":[0.25,-2.0],\"argmax\":0}]}");
    free(json);
    em_release(ys[0]), em_release(ys[1]);
    em_release(y);
    em_engine_stats s = {.submitted = 3, .completed = 2, .batches = 1, .batch_limit = 8};
    s.batch_hist[2] = 1;
    s.cache.hits = 1;
    json = em_engine_stats_json(&s);
    cr_assert(strstr(json, "\"submitted\":3,\"completed\":2,"), "%s", json);
    cr_assert(strstr(json, "\"batch_hist\":{\"2\":1}"), "%s", json);
    cr_assert(strstr(json, "\"cache\":{\"entries\":0,\"bytes\":0,\"hits\":1,"), "%s", json);
    free(json);
}

/* The largest resident size so far, in KiB. */
static long max_rss_kib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* A body is read token by token into the numbers: 1 MiB of empty objects (a tree of it took 78 MB
 * while it was parsed) stops at the first object, taking nothing beyond the body. */
Test(serve_request, a_body_of_empty_objects_stops_at_the_first)
{
    size_t n = (size_t)1 << 20;
    char *body = malloc(n);
    memcpy(body, "{\"input\":[", 10);
    for (size_t i = 10; i + 3 < n; i += 3)
        memcpy(body + i, i == 10 ? " {}" : ",{}", 3);
    n = 10 + (n - 13) / 3 * 3;
    memcpy(body + n, "]}", 2);
    n += 2;
    long before = max_rss_kib();
    em_predict_request r;
    char err[256] = "";
    cr_assert_eq(em_predict_request_parse(body, n, EM_SHAPE(2, 2), &r, err, sizeof err),
                 EM_ERR_ARG);
    cr_assert_str_eq(err, "input: entry 0 at depth 1 is not a number or an array");
    cr_assert_lt(max_rss_kib() - before, 8 * 1024, "the parse grew the process by %ld KiB",
                 max_rss_kib() - before);
    cr_assert_null(r.input);
    free(body);
}

/* One request's limits: its bytes, its numbers, one string's bytes; over them is 413. */
Test(serve_request, a_request_over_its_limits_is_too_large)
{
    em_predict_request r;
    char err[256] = "";
    size_t big = (size_t)EM_REQUEST_MAX_BYTES + 1;
    char *spaces = malloc(big);
    memset(spaces, ' ', big);
    memcpy(spaces, "{\"input\":[1,2,3,4]}", 19);
    cr_assert_eq(em_predict_request_parse(spaces, big, EM_SHAPE(4), &r, err, sizeof err),
                 EM_ERR_MEMORY);
    cr_assert_str_eq(err, "a body of 33554433 bytes is more than a request may be (33554432)");
    free(spaces);
    /* 1025 samples of 1024 numbers: the 1025th passes 2^20 */
    size_t cap = 1025 * (2 * 1024 + 2) + 64, at = 0;
    char *many = malloc(cap);
    at += (size_t)sprintf(many, "{\"instances\":[");
    for (int s = 0; s < 1025; s++) {
        many[at++] = s ? ',' : '[';
        if (s)
            many[at++] = '[';
        for (int i = 0; i < 1024; i++) {
            many[at++] = '0';
            many[at++] = i < 1023 ? ',' : ']';
        }
    }
    many[at++] = ']';
    many[at++] = '}';
    cr_assert_eq(em_predict_request_parse(many, at, EM_SHAPE(1024), &r, err, sizeof err),
                 EM_ERR_MEMORY, "%s", err);
    cr_assert_str_eq(err, "instances: more than 1048576 values (samples of 1024)");
    cr_assert_eq(em_predict_http_status(EM_ERR_MEMORY), 413);
    /* one fewer sample fits */
    at -= 2 + 2 * 1024 + 2;
    memcpy(many + at, "]}", 2);
    cr_assert_eq(em_predict_request_parse(many, at + 2, EM_SHAPE(1024), &r, err, sizeof err),
                 EM_OK, "%s", err);
    cr_assert_eq(r.n_instances, 1024);
    em_release(r.input);
    free(many);
    char key[400] = "{\"";
    memset(key + 2, 'k', 300);
    strcpy(key + 302, "\":1}");
    cr_assert_eq(parse(key, EM_SHAPE(4), &r, err), EM_ERR_MEMORY);
    cr_assert(strstr(err, "a string longer than 256 bytes"), "%s", err);
    cr_assert_eq(em_request_budget_in_flight().bytes, 0);
    cr_assert_eq(em_request_budget_in_flight().values, 0);
}

/* The server's budget: a parse that does not fit beside those under way is refused at once with
 * EM_ERR_BUSY (503), and one larger than the whole budget with EM_ERR_MEMORY (413); each parse
 * gives back what it held. */
Test(serve_request, the_servers_budget_refuses_what_does_not_fit)
{
    em_request_budget old = em_request_budget_set((em_request_budget){.bytes = 1 << 16,
                                                                      .values = 1 << 14});
    cr_assert_eq(old.bytes, EM_REQUEST_BUDGET_BYTES);
    cr_assert_eq(old.values, EM_REQUEST_BUDGET_VALUES);
    const char *body = "{\"input\":[1,2,3,4]}";
    em_predict_request r;
    char err[256] = "";
    cr_assert_eq(parse(body, EM_SHAPE(4), &r, err), EM_OK, "%s", err);
    em_release(r.input);
    /* another parse holds most of the bytes */
    em_request_budget other = {0};
    cr_assert_eq(em_request_budget_take_bytes(&other, (1 << 16) - 10), EM_OK);
    cr_assert_eq(parse(body, EM_SHAPE(4), &r, err), EM_ERR_BUSY);
    cr_assert_str_eq(err, "the server is reading 65526 bytes of requests already (at most 65536 "
                          "at once); try again");
    cr_assert_eq(em_predict_http_status(EM_ERR_BUSY), 503);
    cr_assert_null(r.input);
    em_request_budget_give_back(&other);
    /* ... or most of the values */
    cr_assert_eq(em_request_budget_take_values(&other, (1 << 14) - 100), EM_OK);
    cr_assert_eq(parse(body, EM_SHAPE(4), &r, err), EM_ERR_BUSY);
    cr_assert(strstr(err, "JSON values of requests already (at most 16384 at once)"), "%s", err);
    em_request_budget_give_back(&other);
    cr_assert_eq(parse(body, EM_SHAPE(4), &r, err), EM_OK, "%s", err);
    em_release(r.input);
    /* a body larger than the whole budget never fits */
    char *wide = malloc(1 << 17);
    memset(wide, ' ', 1 << 17);
    memcpy(wide, body, strlen(body));
    cr_assert_eq(em_predict_request_parse(wide, 1 << 17, EM_SHAPE(4), &r, err, sizeof err),
                 EM_ERR_MEMORY);
    cr_assert_str_eq(err, "a request of 131072 bytes is more than the server reads at once "
                          "(65536)");
    free(wide);
    cr_assert_eq(em_request_budget_in_flight().bytes, 0);
    cr_assert_eq(em_request_budget_in_flight().values, 0);
    em_request_budget_set((em_request_budget){0});
    cr_assert_eq(em_request_budget_set((em_request_budget){0}).bytes, EM_REQUEST_BUDGET_BYTES);
}
