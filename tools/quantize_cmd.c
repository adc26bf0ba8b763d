/* `ember quantize RECIPE --load FILE --save FILE`: dynamic INT8 quantization of a saved model's
 * Linear layers; test accuracy, size and latency before and after, then a JSON summary line. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/json_internal.h"
#include "tools/args.h"
#include "tools/tools_internal.h"


typedef struct {
    double acc, loss;
    int64_t bytes;
    em_latency b1, b64;
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
        f->b1 = em_measure_latency(m, x1, 50, 300);
        f->b64 = em_measure_latency(m, x64, 5, 40);
    }
    em_release(x1);
    return st;
}

static long long file_bytes(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

/* The source file's "ember.pruned" marker, carried over so a shrunk model loads again. */
static bool source_pruned(const char *path)
{
    em_safetensors *f = NULL;
    if (em_safetensors_load(path, &f) != EM_OK)
        return false;
    bool pruned = em_safetensors_meta(f, "ember.pruned") != NULL;
    em_safetensors_free(f);
    return pruned;
}

int em_cmd_quantize(int argc, char **argv)
{
    const char *recipe = NULL, *load = NULL, *save = NULL, *data_dir = NULL;
    int threads = 2;
    bool per_tensor = false;
    const em_opt opts[] = {
        {"load", EM_OPT_STRING, &load, "FILE", "the f32 model file or checkpoint",
         .required = true},
        {"save", EM_OPT_STRING, &save, "FILE", "where the quantized model goes", .required = true},
        {"per-tensor", EM_OPT_FLAG, &per_tensor, NULL,
         .help = "one scale per tensor (default: per row)"},
        {"threads", EM_OPT_INT, &threads, "N", "OpenMP threads (default 2)",
         .range = EM_RANGE(1, 4096)},
        {"data", EM_OPT_STRING, &data_dir, "DIR", .help = "Fashion-MNIST directory"},
        {0}};
    const em_cmd_spec spec = {
        .command = "ember quantize", .operands = "RECIPE", .n_operands = 1, .operand = &recipe,
        .about = "Dynamic INT8 quantization of a saved model's Linear layers: accuracy, size and "
                 "latency\nbefore and after, then a JSON summary line.",
        .more_help = em_list_recipes, .opts = opts};
    int parsed = em_args_parse(&spec, argc, argv);
    if (parsed != EM_ARGS_RUN)
        return parsed;
    const em_recipe *rc = em_find_recipe(spec.command, recipe);
    if (!rc)
        return 2;
    em_quantize_opts qo = {.granularity = per_tensor ? EM_QUANT_PER_TENSOR
                                                     : EM_QUANT_PER_CHANNEL};
    omp_set_num_threads(threads);
    em_module *m = rc->build();
    em_dataset *test = em_fashion_mnist(data_dir, false, rc->flat_input);
    em_tensor *x64 = test ? em_test_batch(rc, data_dir, 64) : NULL;
    model_figures f32 = {0}, q = {0};
    char f32_path[] = "/tmp/ember_quantize_f32XXXXXX";
    int fd = mkstemp(f32_path);
    if (fd >= 0)
        close(fd);
    em_status st = m && x64 ? em_load_model_any(m, rc, load) : em_error_status();
    if (st == EM_OK)
        st = measure(m, test, x64, &f32);
    if (st == EM_OK && fd >= 0)
        st = em_module_save(m, f32_path, NULL, 0); /* the f32 file, for the size ratio */
    if (st == EM_OK)
        st = em_quantize_dynamic_(m, qo);
    if (st == EM_OK)
        st = measure(m, test, x64, &q);
    em_st_meta meta[4] = {{"recipe", rc->name}};
    int n_meta = 1 + em_quantize_meta(m, meta + 1);
    if (source_pruned(load))
        n_meta += em_prune_meta(meta + n_meta);
    if (st == EM_OK)
        st = em_module_save(m, save, meta, n_meta);
    long long f32_file = file_bytes(f32_path), q_file = file_bytes(save);
    unlink(f32_path);
    em_release(x64);
    em_dataset_free(test);
    em_module_free(m);
    if (st != EM_OK) {
        fprintf(stderr, "ember quantize: %s\n", em_error());
        return 1;
    }
    json_t *j = json_pack("{s:s, s:s}", "recipe", rc->name, "qscheme",
                          qo.granularity == EM_QUANT_PER_TENSOR ? "per_tensor" : "per_channel");
    em_json_set_real(j, "f32_test_acc", f32.acc, 4);
    em_json_set_real(j, "test_acc", q.acc, 4);
    json_object_set_new(j, "f32_size_bytes", json_integer(f32.bytes));
    json_object_set_new(j, "size_bytes", json_integer(q.bytes));
    json_object_set_new(j, "f32_file_bytes", json_integer(f32_file));
    json_object_set_new(j, "file_bytes", json_integer(q_file));
    em_json_set_real(j, "file_ratio", q_file > 0 ? (double)f32_file / (double)q_file : 0, 2);
    em_json_set_real(j, "f32_latency_b1_p50_us", f32.b1.p50_us, 1);
    em_json_set_real(j, "latency_b1_p50_us", q.b1.p50_us, 1);
    em_json_set_real(j, "latency_b1_p99_us", q.b1.p99_us, 1);
    em_json_set_real(j, "f32_b64_samples_per_s_p50", 64e6 / f32.b64.p50_us, 0);
    em_json_set_real(j, "b64_samples_per_s_p50", 64e6 / q.b64.p50_us, 0);
    st = j ? em_json_print_line(stdout, j) : EM_ERR_MEMORY;
    json_decref(j);
    return st == EM_OK ? 0 : 1;
}
