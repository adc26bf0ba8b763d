/* `ember quantize [RECIPE] --load FILE --save FILE [--static --calib-batches N]`: dynamic INT8
 * quantization of a saved model's Linear layers, or static INT8 of its Linear and Conv2d layers
 * calibrated on training batches; test accuracy, size and latency before and after (static: next
 * to f32 and dynamic), then a JSON summary line. The quantized model is saved as a whole-model
 * file with the loaded one's recipe and input shape. */
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "bench/bench.h"
#include "cli/cli_internal.h"


typedef struct {
    double acc, loss;
    int64_t bytes;
    bench_latency b1, b64;
} model_figures;

static em_status measure(em_module *m, const em_dataset *test, const em_tensor *x64,
                         model_figures *f)
{
    em_eval_result r = {0};
    em_status st = em_evaluate(m, test, (em_eval_opts){0}, &r);
    f->acc = r.accuracy;
    f->loss = r.loss;
    em_tensor *x1 = em_narrow(x64, 0, 0, 1);
    if (st == EM_OK && !x1)
        st = em_error_status();
    if (st == EM_OK) {
        f->bytes = em_module_nbytes(m);
        f->b1 = bench_measure_latency(m, x1, 50, 300);
        f->b64 = bench_measure_latency(m, x64, 5, 40);
    }
    em_release(x1);
    return st;
}

static long long file_bytes(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

/* The first n shuffled training batches of 64 (n tensors, the caller's), or false. */
static bool calibration_batches(const recipe_model *m, const char *data_dir, int n,
                                em_tensor **out)
{
    em_dataset *ds = recipe_model_images(m, data_dir, true);
    em_loader *dl = ds ? em_loader_new(ds, (em_loader_opts){.batch_size = 64, .shuffle = true})
                       : NULL;
    int got = 0;
    for (em_batch b; dl && got < n && em_loader_next(dl, &b) == EM_OK; got++) {
        em_release(b.y);
        out[got] = b.x;
    }
    em_loader_free(dl);
    em_dataset_free(ds);
    return got == n;
}

/* Static INT8's one-line JSON summary: each figure of f32, dynamic and static INT8 (f in that
 * order) side by side. */
static em_status print_static_summary(const recipe_spec *rc, const char *observer, int n_calib,
                                      const model_figures f[3])
{
    static const char *const models[3] = {"f32", "dynamic", "static"};
    static const char *const figures[4] = {"test_acc", "size_bytes", "latency_b1_p50_us",
                                           "b64_samples_per_s_p50"};
    static const int decimals[4] = {4, 0, 1, 0};
    json_t *j = json_pack("{s:o, s:b, s:s, s:i}", "recipe",
                          rc ? json_string(rc->name) : json_null(), "static", 1, "observer",
                          observer, "calib_batches", n_calib);
    for (int k = 0; j && k < 4; k++)
        for (int i = 0; i < 3; i++) {
            double v[4] = {f[i].acc, (double)f[i].bytes, f[i].b1.p50_us, 64e6 / f[i].b64.p50_us};
            char key[64];
            snprintf(key, sizeof key, "%s_%s", models[i], figures[k]);
            em_json_set_real(j, key, v[k], decimals[k]);
        }
    em_status st = j ? em_json_print_line(stdout, j) : EM_ERR_MEMORY;
    json_decref(j);
    return st;
}

/* f32 (m[0]), dynamic (m[1]) and static INT8 (m[2]) of one model, measured side by side; the
 * static model is saved to save as a whole-model file. */
static em_status quantize_static(recipe_model m[3], const char *save, const char *data_dir,
                                 int n_calib, em_calib_observer_kind observer,
                                 model_figures f[3])
{
    em_dataset *test = NULL;
    em_tensor *x64 = NULL, **calib = calloc((size_t)n_calib, sizeof *calib);
    em_status st = calib ? EM_OK : em_set_error(EM_ERR_MEMORY, "out of memory");
    if (st == EM_OK && !(test = recipe_model_images(&m[0], data_dir, false)))
        st = em_error_status();
    if (st == EM_OK && !(x64 = bench_test_batch(test, 64)))
        st = em_error_status();
    if (st == EM_OK)
        st = em_quantize_dynamic_(m[1].model, (em_quantize_opts){0});
    if (st == EM_OK && !calibration_batches(&m[0], data_dir, n_calib, calib))
        st = em_has_error() ? em_error_status()
                            : em_set_error(EM_ERR_ARG, "fewer than %d training batches", n_calib);
    if (st == EM_OK)
        st = em_quantize_static_(m[2].model, calib, n_calib,
                                 (em_static_quant_opts){.observer = {.kind = observer}});
    for (int i = 0; i < 3 && st == EM_OK; i++)
        st = measure(m[i].model, test, x64, &f[i]);
    for (int round = 0; round < 2 && st == EM_OK; round++) /* interleaved: noise hits all alike */
        for (int i = 0; i < 3; i++) {
            bench_latency b64 = bench_measure_latency(m[i].model, x64, 5, 40);
            f[i].b64.p50_us = b64.p50_us < f[i].b64.p50_us ? b64.p50_us : f[i].b64.p50_us;
        }
    if (st == EM_OK)
        st = cmd_save_model(&m[2], save);
    for (int i = 0; i < n_calib && calib; i++)
        em_release(calib[i]);
    free(calib);
    em_release(x64);
    em_dataset_free(test);
    return st;
}

/* What `ember quantize`'s command line sets. */
typedef struct {
    const char *recipe, *load, *save, *data_dir, *observer, *input_shape;
    int threads, calib_batches;
    bool per_tensor, static_int8;
} quantize_args;

/* Reads argv into a and *rc; CMD_ARGS_RUN to go on, else the exit status. */
static int parse_quantize_args(int argc, char **argv, quantize_args *a, const recipe_spec **rc)
{
    const cmd_opt opts[] = {
        {"load", CMD_OPT_STRING, &a->load, "FILE", "the f32 model file or checkpoint",
         .required = true},
        {"save", CMD_OPT_STRING, &a->save, "FILE", "where the quantized model goes",
         .required = true},
        {"per-tensor", CMD_OPT_FLAG, &a->per_tensor, NULL,
         .help = "one scale per tensor (default: per row)"},
        {"threads", CMD_OPT_INT, &a->threads, "N", "OpenMP threads (default 2)",
         .range = CMD_RANGE(1, 4096)},
        {"static", CMD_OPT_FLAG, &a->static_int8, NULL, .help = "static INT8 of Linear and Conv2d, "
         "calibrated; reported next to f32 and dynamic"},
        {"calib-batches", CMD_OPT_INT, &a->calib_batches, "N", "training batches of 64 to "
         "calibrate on (default 32)", .range = CMD_RANGE(1, 937)},
        {"observer", CMD_OPT_CHOICE, &a->observer, NULL, "activation ranges: min/max or the "
         "99.99th percentile (default minmax)", .choices = "minmax|percentile"},
        {"data", CMD_OPT_STRING, &a->data_dir, "DIR", .help = CMD_DATA_HELP},
        CMD_INPUT_SHAPE_OPT(a->input_shape),
        {0}};
    const cmd_spec spec = {
        .command = "ember quantize", .operands = "RECIPE", .n_operands = 1, .operand = &a->recipe,
        .operands_optional = true,
        .about = "Dynamic INT8 quantization of a saved model's Linear layers, or (--static) static "
                 "INT8 of\nits Linear and Conv2d layers calibrated on training batches: accuracy, "
                 "size and\nlatency before and after, then a JSON summary line. The images are "
                 "its recipe's; a model\nthat names none takes the IDX files in --data. RECIPE: "
                 "only for a file of weights alone.",
        .more_help = cmd_list_image_recipes, .opts = opts};
    int parsed = cmd_parse_recipe_command(&spec, argc, argv, &a->recipe, true, rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    if (a->static_int8 && a->per_tensor) {
        fprintf(stderr, "ember quantize: --static quantizes weights per channel; drop "
                "--per-tensor\n");
        return 2;
    }
    return CMD_ARGS_RUN;
}

/* Dynamic INT8's one-line JSON summary: f32 before, quantized after. */
static em_status print_dynamic_summary(const recipe_spec *rc, em_quant_granularity g,
                                       const model_figures *f32, const model_figures *q,
                                       long long f32_file, long long q_file)
{
    json_t *j = json_pack("{s:o, s:s}", "recipe", rc ? json_string(rc->name) : json_null(),
                          "qscheme", g == EM_QUANT_PER_TENSOR ? "per_tensor" : "per_channel");
    em_json_set_real(j, "f32_test_acc", f32->acc, 4);
    em_json_set_real(j, "test_acc", q->acc, 4);
    json_object_set_new(j, "f32_size_bytes", json_integer(f32->bytes));
    json_object_set_new(j, "size_bytes", json_integer(q->bytes));
    json_object_set_new(j, "f32_file_bytes", json_integer(f32_file));
    json_object_set_new(j, "file_bytes", json_integer(q_file));
    em_json_set_real(j, "file_ratio", q_file > 0 ? (double)f32_file / (double)q_file : 0, 2);
    em_json_set_real(j, "f32_latency_b1_p50_us", f32->b1.p50_us, 1);
    em_json_set_real(j, "latency_b1_p50_us", q->b1.p50_us, 1);
    em_json_set_real(j, "latency_b1_p99_us", q->b1.p99_us, 1);
    em_json_set_real(j, "f32_b64_samples_per_s_p50", 64e6 / f32->b64.p50_us, 0);
    em_json_set_real(j, "b64_samples_per_s_p50", 64e6 / q->b64.p50_us, 0);
    em_status st = j ? em_json_print_line(stdout, j) : EM_ERR_MEMORY;
    json_decref(j);
    return st;
}

/* Dynamic INT8 of m, measured before and after, saved to a->save; the exit status. */
static int quantize_dynamic(recipe_model *m, const quantize_args *a)
{
    em_quantize_opts qo = {.granularity = a->per_tensor ? EM_QUANT_PER_TENSOR
                                                        : EM_QUANT_PER_CHANNEL};
    em_dataset *test = recipe_model_images(m, a->data_dir, false);
    em_tensor *x64 = test ? bench_test_batch(test, 64) : NULL;
    model_figures f32 = {0}, q = {0};
    char f32_path[] = "/tmp/ember_quantize_f32XXXXXX";
    int fd = mkstemp(f32_path);
    if (fd >= 0)
        close(fd);
    em_status st = x64 ? measure(m->model, test, x64, &f32) : em_error_status();
    if (st == EM_OK && fd >= 0)
        st = cmd_save_model(m, f32_path); /* the f32 file, for the size ratio */
    if (st == EM_OK)
        st = em_quantize_dynamic_(m->model, qo);
    if (st == EM_OK)
        st = measure(m->model, test, x64, &q);
    if (st == EM_OK)
        st = cmd_save_model(m, a->save);
    long long f32_file = file_bytes(f32_path), q_file = file_bytes(a->save);
    if (fd >= 0)
        unlink(f32_path);
    em_release(x64);
    em_dataset_free(test);
    if (st != EM_OK) {
        fprintf(stderr, "ember quantize: %s\n", em_error());
        return 1;
    }
    return print_dynamic_summary(m->recipe, qo.granularity, &f32, &q, f32_file, q_file) == EM_OK
               ? 0 : 1;
}

int cli_cmd_quantize(int argc, char **argv)
{
    quantize_args a = {.observer = "minmax", .threads = 2, .calib_batches = 32};
    const recipe_spec *rc;
    int parsed = parse_quantize_args(argc, argv, &a, &rc);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    omp_set_num_threads(a.threads);
    recipe_model m[3] = {0}; /* f32; with --static, also dynamic and static INT8 */
    int status = 0;
    for (int i = 0; i < (a.static_int8 ? 3 : 1) && !status; i++)
        status = cmd_load_model("ember quantize", a.load, rc, a.input_shape, true, &m[i]);
    if (!status && a.static_int8) {
        em_calib_observer_kind observer = !strcmp(a.observer, "percentile") ? EM_CALIB_PERCENTILE
                                                                            : EM_CALIB_MINMAX;
        model_figures f[3] = {0};
        em_status st = quantize_static(m, a.save, a.data_dir, a.calib_batches, observer, f);
        if (st == EM_OK)
            st = print_static_summary(m[0].recipe, a.observer, a.calib_batches, f);
        if (st != EM_OK)
            fprintf(stderr, "ember quantize: %s\n", em_error());
        status = st == EM_OK ? 0 : 1;
    } else if (!status) {
        status = quantize_dynamic(&m[0], &a);
    }
    for (int i = 0; i < 3; i++)
        recipe_model_free(&m[i]);
    return status;
}
