/* libFuzzer target: module trees built from the input's bytes (Sequentials nested and appended
 * into, every layer type the ONNX exporter maps and some it refuses, odd shapes, odd and long
 * child names, NaN or Inf weights, odd norm statistics) exported with em_onnx_export. An
 * export must fail with a message and leave no file, or write a file that parses as ONNX: every
 * field well formed, every string UTF-8, each initializer's bytes matching its dims, each value
 * defined once and before a node uses it. */
#define _GNU_SOURCE
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "io/utf8.h"

/* ---- the input as a stream of choices (zeros once it runs out) ---- */
typedef struct {
    const uint8_t *p;
    size_t n;
} choices;

static unsigned take(choices *c)
{
    if (!c->n)
        return 0;
    c->n--;
    return *c->p++;
}

static int64_t pick(choices *c, unsigned k)
{
    return (int64_t)(take(c) % k);
}

/* True one time in k (never once the input has run out, so a short input builds plain trees). */
static bool rarely(choices *c, unsigned k)
{
    return pick(c, k) == (int64_t)k - 1;
}

static const float odd_values[] = {0.0f, -1.0f, 1e-30f, 3.0f, NAN, INFINITY, -INFINITY, 1e30f};

static float odd_value(choices *c)
{
    return odd_values[pick(c, sizeof odd_values / sizeof *odd_values)];
}

/* Puts odd values into t (f32, contiguous) at a few places the input picks. */
static void poison(choices *c, em_tensor *t)
{
    float *v = em_data_ptr(t);
    int64_t n = em_numel(t);
    for (int k = (int)pick(c, 3); n > 0 && k > 0; k--)
        v[pick(c, 256) % n] = odd_value(c);
}

/* ---- building a tree ---- */

/* A layer of a kind the input picks, sized to fit the example x (NULL: any size) most of the
 * time; NULL when its constructor refuses the sizes (a message is left). */
static em_module *make_layer(choices *c, const em_tensor *x)
{
    int64_t last = x && x->ndim ? x->shape[x->ndim - 1] : 4;
    int64_t ch = x && x->ndim > 1 ? x->shape[1] : 3;
    int64_t f = last + rarely(c, 8), k = 1 + pick(c, 3);
    switch (pick(c, 25)) {
    case 0: return em_linear_layer(f, 1 + pick(c, 6), pick(c, 2));
    case 1: {
        int64_t out = 1 + pick(c, 4), groups = rarely(c, 3) ? ch : 1;
        return em_conv2d_layer(ch, groups > 1 ? out * groups : out, k, (em_conv2d_layer_opts){
                                   .stride = pick(c, 3), .padding = pick(c, 2),
                                   .dilation = pick(c, 3), .groups = groups,
                                   .no_bias = pick(c, 2)});
    }
    case 2: return em_batch_norm2d_layer(ch, (em_batch_norm_opts){.eps = pick(c, 2) ? 0 : 1e-3});
    case 3: return em_batch_norm1d_layer(ch, (em_batch_norm_opts){0});
    case 4: return em_layer_norm_layer(f, (em_layer_norm_opts){0});
    case 5: return em_max_pool2d_layer(k, (em_pool2d_layer_opts){.stride = pick(c, 3),
                                                                 .padding = pick(c, 2)});
    case 6: return em_avg_pool2d_layer(k, (em_pool2d_layer_opts){.stride = pick(c, 3),
                                                                 .padding = pick(c, 2)});
    case 7: return em_adaptive_avg_pool2d_layer(1 + pick(c, 3), 1 + pick(c, 3));
    case 8: return em_flatten_layer();
    case 9: return em_dropout_layer((double)pick(c, 10) / 10);
    case 10: return em_leaky_relu_layer(odd_value(c));
    case 11: return em_gelu_layer(pick(c, 2));
    case 12: return em_silu_layer();
    case 13: return em_softsign_layer();
    case 14: return em_tanh_layer();
    case 15: return em_sigmoid_layer();
    case 16: return em_softmax_layer((int)pick(c, 5) - 2);
    case 17: return em_embedding_layer(8, 1 + pick(c, 4), (em_embedding_opts){0});
    case 18: return em_residual(em_relu_layer(), NULL);    /* no ONNX mapping */
    case 19: return em_module_list(1, em_relu_layer());    /* no ONNX mapping */
    case 20: return em_conv1d_layer(ch, 2, k, (em_conv1d_layer_opts){0}); /* no mapping */
    case 21: return em_group_norm_layer(pick(c, 2) ? 1 : ch, ch,
                                        (em_group_norm_opts){.no_affine = pick(c, 2)});
    case 22:
    case 23: {
        em_instance_norm_opts o = {.affine = pick(c, 2), .track_running_stats = pick(c, 2)};
        return pick(c, 2) ? em_instance_norm2d_layer(ch, o) : em_instance_norm1d_layer(ch, o);
    }
    default: return em_relu_layer();
    }
}

/* Sometimes odd values in the layer's parameters and buffers (batch norm statistics included). */
static void spoil(choices *c, em_module *m)
{
    for (int i = 0; i < m->n_params; i++)
        if (rarely(c, 6))
            poison(c, m->params[i].value);
    for (int i = 0; i < m->n_buffers; i++)
        if (m->buffers[i].value->dtype == EM_F32 && rarely(c, 3))
            poison(c, m->buffers[i].value);
}

/* A child name from the input's bytes: short, long, or not UTF-8. */
static void odd_name(choices *c, char *name, size_t cap)
{
    size_t len = rarely(c, 4) ? 150 + pick(c, 100) : 1 + pick(c, 12);
    len = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < len; i++)
        name[i] = (char)(rarely(c, 3) ? take(c) : 'a' + pick(c, 26));
    name[len] = 0;
}

/* Appends to seq (already in its tree) the layers the input picks, nesting Sequentials up to
 * depth 6; *x, the example, moves through each layer while they accept it (NULL after). */
static void build(choices *c, em_module *seq, em_tensor **x, int depth)
{
    for (int i = (int)pick(c, 6); i > 0 && c->n; i--) {
        bool nest = depth < 6 && rarely(c, 6);
        em_module *layer = nest ? em_sequential(0) : make_layer(c, *x);
        if (!layer) {
            assert(em_error()[0]);
            em_error_clear();
            continue;
        }
        char name[256];
        if (rarely(c, 5))
            odd_name(c, name, sizeof name);
        else
            snprintf(name, sizeof name, "%d", seq->n_children); /* em_sequential_append's */
        if (!em_module_add_child(seq, name, layer)) {
            assert(em_error()[0]); /* a refused name or depth; the layer is freed */
            em_error_clear();
            continue;
        }
        if (nest) {
            build(c, layer, x, depth + 1);
            continue;
        }
        spoil(c, layer);
        em_module_eval(layer);
        em_tensor *y = *x ? em_forward(layer, *x) : NULL;
        em_release(*x);
        *x = y;
        em_error_clear();
    }
}

/* The example input: (B, F), (B, T, F), (B, C, H, W) or (B), small and sometimes empty. */
static em_tensor *make_example(choices *c)
{
    int64_t b = pick(c, 4), d1 = 1 + pick(c, 8), d2 = 1 + pick(c, 8), d3 = 1 + pick(c, 8);
    em_shape s;
    switch (pick(c, 4)) {
    case 0: s = EM_SHAPE(b, d1); break;
    case 1: s = EM_SHAPE(b, d1, d2); break;
    case 2: s = EM_SHAPE(b, 1 + pick(c, 3), d2, d3); break;
    default: s = EM_SHAPE(b + 1); break;
    }
    em_generator g = em_generator_new(take(c));
    return em_randn(s, EM_F32, &g);
}

/* ---- reading the file back: protobuf wire format and ONNX's rules ---- */
typedef struct {
    const uint8_t *p, *end;
} pb;

static uint64_t varint(pb *m)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        assert(m->p < m->end && shift < 64);
        uint8_t byte = *m->p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return v;
    }
}

/* The next field of m: its number, its payload (length-delimited) or value (varint); false at
 * the end. Wire types other than varint, fixed32/64 and length-delimited are malformed here. */
static bool field(pb *m, int *num, pb *payload, uint64_t *value)
{
    if (m->p == m->end)
        return false;
    uint64_t key = varint(m);
    *num = (int)(key >> 3);
    assert(*num > 0);
    switch (key & 7) {
    case 0: *value = varint(m); break;
    case 1: assert(m->end - m->p >= 8); m->p += 8; break;
    case 5: assert(m->end - m->p >= 4); m->p += 4; break;
    case 2: {
        uint64_t len = varint(m);
        assert(len <= (uint64_t)(m->end - m->p));
        *payload = (pb){m->p, m->p + len};
        m->p += len;
        break;
    }
    default: assert(!"a wire type ember does not write");
    }
    return true;
}

/* The names defined so far in a graph. */
typedef struct {
    char *names[4096];
    int n;
} scope;

static char *text(pb s)
{
    size_t n = (size_t)(s.end - s.p);
    assert(em_utf8_valid_len((const char *)s.p, n) == n && !memchr(s.p, 0, n));
    return strndup((const char *)s.p, n);
}

static bool defined(const scope *sc, const char *name)
{
    for (int i = 0; i < sc->n; i++)
        if (!strcmp(sc->names[i], name))
            return true;
    return false;
}

static void define(scope *sc, char *name)
{
    assert(*name && !defined(sc, name) && sc->n < 4096);
    sc->names[sc->n++] = name;
}

/* The name in field `num` of message m (a ValueInfo's 1, a tensor's 8). */
static char *name_of(pb m, int num)
{
    char *name = NULL;
    int f;
    pb s;
    uint64_t v;
    while (field(&m, &f, &s, &v))
        if (f == num) {
            free(name);
            name = text(s);
        }
    assert(name);
    return name;
}

/* An initializer: f32 (type 1) or i64 (7, GroupNorm's shapes), its raw bytes 4 or 8 per element
 * of its dims. */
static void check_tensor(pb t)
{
    int f;
    pb s;
    uint64_t v, numel = 1, type = 0, raw = UINT64_MAX;
    while (field(&t, &f, &s, &v)) {
        if (f == 1)
            numel *= v;
        else if (f == 2)
            type = v;
        else if (f == 9)
            raw = (uint64_t)(s.end - s.p);
    }
    assert((type == 1 && raw == 4 * numel) || (type == 7 && raw == 8 * numel));
}

/* A node: inputs defined before, outputs new, op type and attribute names UTF-8. */
static void check_node(pb node, scope *sc)
{
    int f;
    pb s;
    uint64_t v;
    bool has_op = false;
    while (field(&node, &f, &s, &v)) {
        if (f == 1) {
            char *in = text(s);
            assert(defined(sc, in));
            free(in);
        } else if (f == 2) {
            define(sc, text(s));
        } else if (f == 3 || f == 4) {
            char *t = text(s);
            has_op |= f == 4 && *t;
            free(t);
        } else if (f == 5) {
            free(name_of(s, 1));
        }
    }
    assert(has_op);
}

static void check_graph(pb graph)
{
    scope *sc = calloc(1, sizeof *sc);
    int f, inputs = 0, outputs = 0;
    pb s, g = graph;
    uint64_t v;
    while (field(&g, &f, &s, &v)) { /* graph inputs and initializers are defined first */
        if (f == 5)
            check_tensor(s);
        if (f == 5 || f == 11)
            define(sc, name_of(s, f == 5 ? 8 : 1));
        if (f == 2)
            free(text(s));
        inputs += f == 11;
    }
    for (g = graph; field(&g, &f, &s, &v);)
        if (f == 1)
            check_node(s, sc);
    for (g = graph; field(&g, &f, &s, &v);)
        if (f == 12) {
            char *out = name_of(s, 1);
            assert(defined(sc, out));
            free(out);
            outputs++;
        }
    assert(inputs == 1 && outputs == 1);
    for (int i = 0; i < sc->n; i++)
        free(sc->names[i]);
    free(sc);
}

static void check_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert(f);
    static uint8_t buf[16 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    assert(feof(f));
    fclose(f);
    pb model = {buf, buf + n}, s;
    int num, graphs = 0;
    uint64_t v;
    while (field(&model, &num, &s, &v)) {
        if (num == 7) {
            check_graph(s);
            graphs++;
        } else if (num == 2 || num == 3) {
            free(text(s));
        }
    }
    assert(graphs == 1);
}

/* ---- the target ---- */
static const char *out_path(void)
{
    static char path[64];
    if (!path[0]) {
        char dir[] = "/tmp/ember_fuzz_onnx_XXXXXX";
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/model.onnx", dir);
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    choices c = {data, size};
    em_error_clear();
    em_manual_seed(take(&c));
    em_tensor *example = make_example(&c), *x = em_retain(example);
    em_module *root = em_sequential(0);
    build(&c, root, &x, 0);
    int wraps = rarely(&c, 4) ? (int)take(&c) / 2 : rarely(&c, 32) ? EM_MODULE_MAX_DEPTH : 0;
    for (; root && wraps > 0; wraps--)
        root = em_sequential(1, root); /* NULL past the depth limit, with the tree freed */
    char in_name[256];
    bool odd_input = rarely(&c, 8);
    if (odd_input)
        odd_name(&c, in_name, sizeof in_name);
    em_onnx_opts o = {.opset = 17 + (int)pick(&c, 7), .fixed_batch = pick(&c, 2),
                      .allow_nonfinite = pick(&c, 2), .input_name = odd_input ? in_name : NULL};
    const char *path = out_path();
    unlink(path);
    if (!root) {
        assert(em_error()[0]);
    } else if (em_onnx_export(root, example, path, o) == EM_OK) {
        check_file(path);
    } else {
        assert(em_error()[0] && access(path, F_OK) != 0);
    }
    em_module_free(root);
    em_release(x);
    em_release(example);
    em_error_clear();
    return 0;
}
