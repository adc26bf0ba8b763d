/* libFuzzer target: the module tree of a whole-model file (the JSON of its "ember.model"
 * metadata) of arbitrary bytes, beside the weights of a fixed model of many layer types (the
 * seeds, tests/fuzz/corpus/model_tree, are real saved trees: that model's and smaller ones).
 * em_model_load must rebuild the model or fail with a message, never crash, leak, hang or
 * allocate what the file does not hold; a model it rebuilds must save again. */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "harness.h"

/* The model whose weights every input sits beside. */
static em_module *zoo(void)
{
    em_manual_seed(7);
    em_module *quantized = em_sequential(1, em_linear_layer(3, 2, true));
    if (em_quantize_dynamic_(quantized, (em_quantize_opts){0}) != EM_OK)
        abort(); /* a broken harness, not a finding */
    em_module *m = em_module_list(
        5,
        em_sequential(3, em_linear_layer(4, 3, true), em_relu_layer(),
                      em_linear_layer(3, 2, false)),
        em_sequential(3, em_conv2d_layer(1, 2, 3, (em_conv2d_layer_opts){.padding = 1}),
                      em_batch_norm2d_layer(2, (em_batch_norm_opts){0}),
                      em_max_pool2d_layer(2, (em_pool2d_layer_opts){0})),
        em_lstm_layer(2, 3, (em_rnn_opts){.batch_first = true}),
        em_transformer_encoder_layer(4, 2, (em_transformer_opts){.dim_feedforward = 8}),
        quantized);
    if (!m)
        abort();
    return m;
}

static json_t *header;    /* the zoo file's header, its "ember.model" replaced per input */
static uint8_t *data;     /* its tensor bytes */
static size_t data_len;
static char saved[64];    /* where a rebuilt model is saved again, removed at exit */

static void remove_saved(void)
{
    unlink(saved);
}

/* Saves the zoo once and keeps its header and data; aborts when it cannot (a broken harness,
 * not a finding). */
static void init(void)
{
    snprintf(saved, sizeof saved, "/tmp/fuzz_model_tree_%d.safetensors", (int)getpid());
    atexit(remove_saved);
    em_module *m = zoo();
    if (em_model_save(m, saved) != EM_OK)
        abort();
    em_module_free(m);
    FILE *f = fopen(saved, "rb");
    uint64_t n = 0;
    char *text = f && fread(&n, 8, 1, f) == 1 ? malloc(n) : NULL;
    if (!text || fread(text, 1, n, f) != n || !(header = json_loadb(text, n, 0, NULL)))
        abort();
    free(text);
    long start = ftell(f);
    fseek(f, 0, SEEK_END);
    data_len = (size_t)(ftell(f) - start);
    fseek(f, start, SEEK_SET);
    data = malloc(data_len);
    if (!data || fread(data, 1, data_len, f) != data_len)
        abort();
    fclose(f);
}

/* The zoo's file with tree as its "ember.model" (8-byte length, header, data), or NULL when
 * tree is no UTF-8 text (safetensors metadata is a JSON string). */
static uint8_t *file_with_tree(const uint8_t *tree, size_t size, size_t *len)
{
    json_t *text = json_stringn((const char *)tree, size);
    if (!text)
        return NULL;
    json_object_set_new(json_object_get(header, "__metadata__"), "ember.model", text);
    char *h = json_dumps(header, JSON_COMPACT);
    if (!h)
        abort();
    uint64_t n = strlen(h);
    *len = 8 + n + data_len;
    uint8_t *file = malloc(*len);
    if (!file)
        abort();
    memcpy(file, &n, 8); /* little-endian, as every machine ember fuzzes on */
    memcpy(file + 8, h, n);
    memcpy(file + 8 + n, data, data_len);
    free(h);
    return file;
}

int LLVMFuzzerTestOneInput(const uint8_t *tree, size_t size)
{
    if (!header)
        init();
    size_t len = 0;
    uint8_t *file = file_with_tree(tree, size, &len);
    if (!file)
        return 0;
    em_error_clear();
    em_module *m = em_model_load(fuzz_input_file(0, file, len));
    free(file);
    if (m) {
        em_status st = em_model_save(m, saved);
        assert(st == EM_OK);
        (void)st;
        em_module_free(m);
    } else {
        assert(em_error()[0]);
    }
    em_error_clear();
    return 0;
}
