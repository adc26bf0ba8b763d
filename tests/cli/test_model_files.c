/* One model file everywhere. The files of ember 0.1.0's older kinds (tests/cli/fixtures: recipe
 * checkpoints of mlp, cnn and gpt, parameters alone, pruned, dynamic and static INT8) load in every
 * command that takes a model, with the figures ember 0.1.0 printed for them, and their training
 * checkpoints still resume as they did; the files ember writes now (`train --save`, quantize,
 * static INT8 included, prune) are whole-model files that em_model_load opens and every command
 * takes without a recipe; and a user's own model saved with em_model_save is evaluated,
 * summarised, served, exported, quantized (dynamic and static INT8) and pruned given only its
 * input shape (read whole: "1,28,28"). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ember.h"
#include "helpers/ember_cli.h"
#include "helpers/files.h"
#include "http/http_client.h"
#include "recipes/model_file.h"

static char dir[64], data[128], text[128];
static char out[32768];

/* dir/name, in one of 16 buffers the following calls take in turn */
static const char *at(const char *name)
{
    static char paths[16][256];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

/* The fixture name.safetensors.gz unpacked into dir/name. */
static void unpack(const char *name)
{
    char gz[512], path[512];
    snprintf(gz, sizeof gz, "%s/tests/cli/fixtures/%s.safetensors.gz", getenv("EMBER_SOURCE_DIR"),
             name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gzFile in = gzopen(gz, "rb");
    FILE *f = fopen(path, "wb");
    cr_assert(in && f, "cannot unpack %s", gz);
    char buf[65536];
    for (int n; (n = gzread(in, buf, sizeof buf)) > 0;)
        cr_assert_eq(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    gzclose(in);
    cr_assert_eq(fclose(f), 0);
}

static const char *const fixtures[] = {"mlp_checkpoint", "cnn_checkpoint", "gpt_checkpoint",
                                       "mlp_params",     "mlp_pruned",     "mlp_quantized",
                                       "mlp_pruned_quantized", "mlp_static"};

static void setup(void)
{
    cr_assert(getenv("EMBER_BIN") && getenv("EMBER_SOURCE_DIR"));
    cr_assert(em_test_make_dir(dir, sizeof dir, "ember_model_files_"));
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++)
        unpack(fixtures[i]);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(text, sizeof text, "%s/text", dir);
    cr_assert(mkdir(data, 0700) == 0 && mkdir(text, 0700) == 0);
    cr_assert(em_test_write_fashion_noise(data) && em_test_write_fortunes(text));
    setenv("OMP_NUM_THREADS", "1", 1); /* the figures ember 0.1.0 printed came from one thread */
}

static void teardown(void)
{
    em_test_remove_tree(dir);
}

TestSuite(model_files, .init = setup, .fini = teardown, .timeout = 600);

/* `ember ARGS...` (a printf format), which must exit `status`; its output in out. */
static void __attribute__((format(printf, 2, 3))) ember(int status, const char *fmt, ...)
{
    char args[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int got = em_test_ember(args, out, sizeof out);
    cr_assert_eq(got, status, "ember %s: exit %d, expected %d:\n%s", args, got, status, out);
}

/* The JSON object of out's last line that starts with '{'. */
static json_t *last_json(void)
{
    char *line = NULL;
    for (char *p = out; (p = strchr(p, '{')); p++)
        if (p == out || p[-1] == '\n')
            line = p;
    cr_assert(line, "no JSON line in:\n%s", out);
    json_error_t e;
    json_t *j = json_loadb(line, strcspn(line, "\n"), 0, &e);
    cr_assert(json_is_object(j), "%s: %s", e.text, line);
    return j;
}

static double num(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    cr_assert(json_is_number(v), "\"%s\" is no number", key);
    return json_number_value(v);
}

/* Whether path is a whole-model file: its module tree in the metadata. */
static bool whole_model_file(const char *path)
{
    em_safetensors *f = NULL;
    cr_assert_eq(em_safetensors_load_meta(path, &f), EM_OK, "%s", em_error());
    bool whole = em_safetensors_meta(f, "ember.model") != NULL;
    em_safetensors_free(f);
    return whole;
}

/* What ember 0.1.0's `ember eval` and `ember summary` printed for each image fixture. */
static const struct {
    const char *file, *recipe; /* recipe: the operand a file of weights alone needs */
    double acc, loss;
    const char *params;
    bool f32; /* exports to ONNX, quantizes and prunes */
} images[] = {
    {"mlp_checkpoint", "", 0.125, 2.9204, "535,818", true},
    {"mlp_params", "mlp", 0.125, 2.9204, "535,818", true},
    {"mlp_pruned", "", 0.0625, 2.5634, "235,146", true},
    {"mlp_quantized", "", 0.0938, 2.9295, "536,596", false},
    {"mlp_pruned_quantized", "", 0.0625, 2.5668, "235,540", false},
    {"mlp_static", "", 0.0938, 2.93, "536,602", false},
    {"cnn_checkpoint", "", 0.0313, 2.3174, "421,642", true},
};
#define N_IMAGES (int)(sizeof images / sizeof *images)

Test(model_files, older_files_score_what_ember_0_1_printed)
{
    for (int i = 0; i < N_IMAGES; i++) {
        ember(0, "eval %s --data %s --load %s", images[i].recipe, data, at(images[i].file));
        json_t *j = last_json();
        cr_expect_eq(num(j, "test_acc"), images[i].acc, "%s", images[i].file);
        cr_expect_eq(num(j, "test_loss"), images[i].loss, "%s", images[i].file);
        json_decref(j);
    }
    ember(0, "eval --data %s --load %s", text, at("gpt_checkpoint"));
    json_t *j = last_json();
    cr_expect_eq(num(j, "val_loss"), 3.7795);
    json_decref(j);
    /* parameters alone say nothing of their model */
    ember(1, "eval --data %s --load %s", data, at("mlp_params"));
    cr_expect(strstr(out, "holds no module tree and names no recipe (a file of weights alone): "
                          "name the recipe whose model it holds"), "%s", out);
}

/* `ember serve ARGS` answers one sample of `inputs` zeros with `outputs` values. */
static void expect_served(const char *args, int inputs, int outputs)
{
    char cmd[2048], log[300];
    snprintf(log, sizeof log, "%s/serve.out", dir);
    snprintf(cmd, sizeof cmd, "'%s' serve %s --port 0 --threads 1 >%s 2>&1 & echo $!",
             getenv("EMBER_BIN"), args, log);
    FILE *p = popen(cmd, "r");
    int pid = 0;
    cr_assert(p && fscanf(p, "%d", &pid) == 1);
    pclose(p);
    int port = 0;
    char line[512] = "";
    for (int i = 0; i < 400 && !port; i++) {
        usleep(25000);
        FILE *f = fopen(log, "r");
        if (f && fgets(line, sizeof line, f) && strstr(line, "\"port\":"))
            port = atoi(strstr(line, "\"port\":") + 7);
        if (f)
            fclose(f);
    }
    cr_assert_gt(port, 0, "ember serve %s did not start: %s", args, line);
    char *body = malloc((size_t)inputs * 2 + 32);
    size_t k = (size_t)sprintf(body, "{\"input\":[");
    for (int i = 0; i < inputs; i++)
        k += (size_t)sprintf(body + k, "%s0", i ? "," : "");
    sprintf(body + k, "]}");
    http_client c = {.port = port, .fd = -1};
    int status = 0;
    bool answered = http_client_request(&c, "POST", "/predict", body, strlen(body), &status);
    http_client_close(&c);
    free(body);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    cr_assert(answered, "ember serve %s did not answer", args);
    cr_expect_eq(status, 200, "%s", c.body);
    json_t *j = json_loads(c.body, 0, NULL);
    cr_expect_eq(json_array_size(json_object_get(j, "output")), (size_t)outputs, "%s", c.body);
    json_decref(j);
}

Test(model_files, older_files_load_in_every_command)
{
    for (int i = 0; i < N_IMAGES; i++) {
        const char *f = at(images[i].file), *rc = images[i].recipe;
        char want[64], args[512];
        snprintf(want, sizeof want, "Total params: %s\n", images[i].params);
        ember(0, "summary %s --load %s", rc, f);
        cr_expect(strstr(out, want), "%s: %s", f, out);
        snprintf(args, sizeof args, "%s --load %s", rc, f);
        expect_served(args, 784, 10);
        if (!images[i].f32)
            continue;
        ember(0, "export %s --load %s --onnx %s", rc, f, at("model.onnx"));
        ember(0, "quantize %s --load %s --save %s --data %s", rc, f, at("q"), data);
        json_t *j = last_json();
        cr_expect_eq(num(j, "f32_test_acc"), images[i].acc, "%s", f);
        json_decref(j);
        cr_expect(whole_model_file(at("q")));
        ember(0, "prune %s --load %s --save %s --data %s --method l1 --amount 0.5", rc, f,
              at("p"), data);
        j = last_json();
        cr_expect_eq(num(j, "base_test_acc"), images[i].acc, "%s", f);
        json_decref(j);
        cr_expect(whole_model_file(at("p")));
    }
    ember(0, "sample --load %s --prompt 'the ' --tokens 40 --seed 3", at("gpt_checkpoint"));
    cr_expect(strstr(out, "the seeeceanat\nt\n%tan\naeam %neeneeeeeeeoat t\n"), "%s", out);
    ember(0, "export --load %s --onnx %s", at("gpt_checkpoint"), at("gpt.onnx"));
    cr_expect(strstr(out, "{\"recipe\":\"gpt\",\"onnx\":"), "%s", out);
}

/* What ember 0.1.0 printed resuming its own checkpoints for 4 more steps: the rest of the
 * epoch of 6 batches, so the cosine schedule ends at 0. */
Test(model_files, older_checkpoints_resume_as_they_did)
{
    const struct {
        const char *recipe;
        double acc, loss;
    } runs[] = {{"mlp", 0.0938, 2.9815}, {"cnn", 0.0313, 2.3234}};
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s_checkpoint", runs[i].recipe);
        ember(0, "train %s --data %s --epochs 1 --max-steps 4 --batch 16 --resume %s",
              runs[i].recipe, data, at(name));
        json_t *j = last_json();
        cr_expect_eq(num(j, "test_acc"), runs[i].acc, "%s: test_acc %.4f", name,
                     num(j, "test_acc"));
        cr_expect_eq(num(j, "test_loss"), runs[i].loss, "%s: test_loss %.4f", name,
                     num(j, "test_loss"));
        cr_expect_eq(num(j, "lr"), 0.0, "%s", name);
        json_decref(j);
    }
}

/* `ember train --save` writes a whole-model file: em_model_load opens it as the model trained,
 * every command takes it with no recipe named, and it still resumes the run. */
Test(model_files, a_training_checkpoint_is_a_whole_model_file)
{
    char ckpt[256], gpt[256];
    snprintf(ckpt, sizeof ckpt, "%s", at("run"));
    snprintf(gpt, sizeof gpt, "%s", at("gpt_run"));
    ember(0, "train mlp --data %s --epochs 1 --max-steps 2 --batch 16 --save %s", data, ckpt);
    json_t *trained = last_json();
    cr_assert(whole_model_file(ckpt));
    em_module *m = em_model_load(ckpt);
    cr_assert_not_null(m, "%s", em_error());
    cr_expect_eq(em_module_num_params(m), 535818);
    em_module_free(m);
    ember(0, "eval --data %s --load %s", data, ckpt);
    json_t *j = last_json();
    cr_expect_str_eq(json_string_value(json_object_get(j, "recipe")), "mlp");
    cr_expect_eq(num(j, "test_acc"), num(trained, "test_acc"));
    cr_expect_eq(num(j, "test_loss"), num(trained, "test_loss"));
    json_decref(j);
    json_decref(trained);
    ember(0, "summary --load %s", ckpt);
    cr_expect(strstr(out, "Input shape: [1,784]\n"), "%s", out);
    ember(0, "train mlp --data %s --epochs 1 --max-steps 3 --batch 16 --resume %s", data, ckpt);
    j = last_json();
    cr_expect_eq(num(j, "steps"), 3);
    json_decref(j);
    ember(0, "train gpt --data %s --max-steps 2 --batch 2 --save %s", text, gpt);
    m = em_model_load(gpt);
    em_gpt_settings c;
    cr_assert(m && em_gpt_settings_of(m, &c), "%s", em_error());
    cr_expect_eq(c.vocab_size, 13); /* "the cat sat on a mat." and newlines and '%' */
    em_module_free(m);
    ember(0, "sample --load %s --tokens 5", gpt);
}

/* A static INT8 file `ember quantize --static` wrote, of a model whose recipe is named by
 * recipe ("" for none): a whole-model file of static layers that em_model_load opens, scored by
 * eval as quantize scored the model it saved (static_acc), summarised, served and benchmarked
 * with no recipe or input shape named. */
static void expect_static_file(const char *path, const char *recipe, double static_acc)
{
    cr_assert(whole_model_file(path));
    em_module *m = em_model_load(path);
    cr_assert_not_null(m, "%s", em_error());
    em_module_free(m);
    ember(0, "eval --load %s --data %s", path, data);
    json_t *j = last_json();
    const json_t *named = json_object_get(j, "recipe");
    cr_expect(*recipe ? json_is_string(named) && !strcmp(json_string_value(named), recipe)
                      : json_is_null(named), "%s", path);
    cr_expect_eq(num(j, "test_acc"), static_acc, "%s", path);
    json_decref(j);
    ember(0, "summary --load %s", path);
    cr_expect(strstr(out, "(StaticQuantizedLinear)"), "%s", out);
    char args[512];
    snprintf(args, sizeof args, "--load %s", path);
    expect_served(args, 784, 10);
    ember(0, "bench infer --load %s --data %s --iters 20 --no-torch --no-ort", path, data);
    cr_expect(strstr(out, "ember_int8"), "%s", out);
}

/* A user's own model, saved with em_model_save alone: every command takes it given its input
 * shape (and, where a dataset is needed, --data); the files quantize and prune write say that
 * shape themselves. */
Test(model_files, a_users_model_loads_without_a_recipe)
{
    em_manual_seed(5);
    em_module *m = em_sequential(3, em_linear_layer(784, 32, true), em_relu_layer(),
                                 em_linear_layer(32, 10, true));
    char mine[256];
    snprintf(mine, sizeof mine, "%s", at("mine"));
    cr_assert_eq(em_model_save(m, mine), EM_OK, "%s", em_error());
    em_dataset *test = em_idx_dataset(at("data/t10k-images-idx3-ubyte.gz"),
                                      at("data/t10k-labels-idx1-ubyte.gz"),
                                      (em_idx_opts){.flat = true});
    em_eval_result want;
    cr_assert_eq(em_evaluate(m, test, (em_eval_opts){0}, &want), EM_OK, "%s", em_error());
    em_dataset_free(test);
    em_module_free(m);

    ember(2, "summary --load %s", mine);
    cr_expect(strstr(out, "does not say its input's shape and names no recipe: give "
                          "--input-shape"), "%s", out);
    ember(0, "summary --load %s --input-shape 784", mine);
    cr_expect(strstr(out, "Total params: 25,450\n"), "%s", out); /* 784*32+32 + 32*10+10 */
    ember(1, "eval --load %s --input-shape 784", mine);
    cr_expect(strstr(out, "names no recipe, so its data is not known: give --data DIR"), "%s",
              out);
    ember(0, "eval --load %s --input-shape 784 --data %s", mine, data);
    json_t *j = last_json();
    cr_expect(json_is_null(json_object_get(j, "recipe")));
    /* the line gives 4 decimals */
    cr_expect_eq(num(j, "test_acc"), round(want.accuracy * 1e4) / 1e4, "%g", want.accuracy);
    cr_expect_eq(num(j, "test_loss"), round(want.loss * 1e4) / 1e4, "%g", want.loss);
    json_decref(j);
    char args[512];
    snprintf(args, sizeof args, "--load %s --input-shape 784", mine);
    expect_served(args, 784, 10);
    ember(0, "export --load %s --input-shape 784 --onnx %s", mine, at("mine.onnx"));
    cr_expect(strstr(out, "{\"recipe\":null,\"onnx\":"), "%s", out);
    ember(0, "quantize --load %s --input-shape 784 --data %s --save %s", mine, data, at("mine_q"));
    ember(0, "eval --load %s --data %s", at("mine_q"), data); /* its file says 784 */
    ember(0, "prune --load %s --input-shape 784 --data %s --save %s --method l1 --amount 0.3 "
          "--finetune-epochs 1", mine, data, at("mine_p"));
    ember(0, "summary --load %s", at("mine_p"));
    cr_expect(strstr(out, "Input shape: [1,784]\n"), "%s", out);
    ember(1, "quantize --static --load %s --data %s --save %s --calib-batches 1", mine, data,
          at("mine_s"));
    cr_expect(strstr(out, "the model's file does not say its input shape: give --input-shape"),
              "%s", out);
    ember(0, "quantize --static --load %s --input-shape 784 --data %s --save %s "
          "--calib-batches 1", mine, data, at("mine_s"));
    j = last_json();
    cr_expect(json_is_null(json_object_get(j, "recipe")));
    cr_expect_eq(num(j, "f32_test_acc"), round(want.accuracy * 1e4) / 1e4);
    expect_static_file(at("mine_s"), "", num(j, "static_test_acc"));
    json_decref(j);
}

/* `ember quantize --static` of a recipe's model (the cnn's: Conv2d layers with their ReLU fused
 * into them, and Linear ones) writes a whole-model file that names the recipe. */
Test(model_files, a_static_int8_file_is_a_whole_model_file)
{
    ember(0, "quantize --static --load %s --data %s --save %s --calib-batches 1",
          at("cnn_checkpoint"), data, at("cnn_s"));
    json_t *j = last_json();
    cr_expect_str_eq(json_string_value(json_object_get(j, "recipe")), "cnn");
    cr_expect_eq(num(j, "f32_test_acc"), 0.0313); /* what ember 0.1.0 scored the file */
    double acc = num(j, "static_test_acc");
    json_decref(j);
    em_module *m = em_model_load(at("cnn_s"));
    cr_assert_not_null(m, "%s", em_error());
    int conv = 0;
    for (int i = 0; i < m->n_children; i++)
        conv += !strcmp(m->children[i].module->type->type_name, "QuantizedConv2d");
    cr_expect_gt(conv, 0, "no QuantizedConv2d in the cnn");
    em_module_free(m);
    expect_static_file(at("cnn_s"), "cnn", acc);
}

/* --input-shape and the metadata input_shape: 1 to 7 sizes in [1, 2^31), nothing else. */
Test(model_files, input_shapes_are_read_whole)
{
    em_shape s;
    cr_assert(recipe_shape_parse("1,28,28", &s));
    cr_expect(s.ndim == 3 && s.d[0] == 1 && s.d[1] == 28 && s.d[2] == 28);
    cr_assert(recipe_shape_parse("2147483647", &s));
    cr_expect(s.ndim == 1 && s.d[0] == 2147483647);
    const char *bad[] = {"", ",", "784,", ",784", "1,,2", "0", "-1", "+5", "2147483648",
                         "1,2,3,4,5,6,7,8", "12a", "1 2", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect(!recipe_shape_parse(bad[i], &s), "'%s' was read", bad[i]);
    char text[96];
    recipe_shape_text(EM_SHAPE(1, 28, 28), text, sizeof text);
    cr_expect_str_eq(text, "1,28,28");
}
