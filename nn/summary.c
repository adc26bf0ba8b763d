/* A torchinfo-like summary: one row per module of the tree (indented name, type, output shape of
 * a no-grad eval forward on zeros, own parameter count, own FLOPs of that forward, settings),
 * then the totals; a quantized layer's int8 weights and their scales count as non-trainable
 * parameters. */
#include <stdlib.h>

#include "nn/nn_internal.h"
#include "tensor/tensor_internal.h"

#define RULE "==================================================" \
             "==================================================" \
             "================"

typedef struct {
    const em_module *m;
    char name[96];  /* local name, "" for the root */
    int depth;
    bool has_out;
    em_shape out;
    double flops; /* its own, over every forward it ran */
} summary_row;

typedef struct {
    summary_row *rows;
    int n, cap;
} summary_rows;

/* depth-first, a module before its children */
static void collect(summary_rows *r, const em_module *m, const char *name, int depth)
{
    summary_row *row = &r->rows[r->n++];
    *row = (summary_row){.m = m, .depth = depth};
    snprintf(row->name, sizeof row->name, "%s", name);
    for (int i = 0; i < m->n_children; i++)
        collect(r, m->children[i].module, m->children[i].name, depth + 1);
}

/* the output shape of each module's first forward, and its FLOPs */
static void record_output(em_module *m, const em_tensor *out, void *ctx)
{
    summary_rows *r = ctx;
    const em_tensor *x = em_forward_hook_input();
    for (int i = 0; i < r->n; i++)
        if (r->rows[i].m == m && out) {
            r->rows[i].flops += x ? em_module_own_flops(m, x, out) : 0;
            if (!r->rows[i].has_out)
                r->rows[i].out = em_shape_of(out);
            r->rows[i].has_out = true;
            return;
        }
}

/* "1,234,567" into buf */
static const char *group_digits(int64_t v, char *buf, size_t n)
{
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", (long long)v), j = 0;
    for (int i = 0; i < len && (size_t)j + 2 < n; i++) {
        if (i > 0 && raw[i - 1] != '-' && (len - i) % 3 == 0)
            buf[j++] = ',';
        buf[j++] = raw[i];
    }
    buf[j] = '\0';
    return buf;
}

typedef struct {
    int64_t total, trainable, bytes;
} param_counts;

/* m's own parameters; a quantized layer's (one holding an int8 weight) buffers count too, as
 * non-trainable parameters in their own bytes: they are its weights. */
static param_counts own_counts(const em_module *m)
{
    param_counts c = {0};
    for (int p = 0; p < m->n_params; p++) {
        const em_tensor *t = m->params[p].value;
        c.total += em_numel(t);
        c.trainable += t->requires_grad ? em_numel(t) : 0;
        c.bytes += em_numel(t) * (int64_t)em_dtype_size(t->dtype);
    }
    bool quantized = false;
    for (int b = 0; b < m->n_buffers; b++)
        quantized |= m->buffers[b].value->dtype == EM_I8;
    for (int b = 0; quantized && b < m->n_buffers; b++) {
        const em_tensor *t = m->buffers[b].value;
        c.total += em_numel(t);
        c.bytes += em_numel(t) * (int64_t)em_dtype_size(t->dtype);
    }
    return c;
}

static void print_rows(const summary_rows *r, FILE *f)
{
    fprintf(f, "%-40s %-22s %12s %15s  %s\n", "Layer (type)", "Output shape", "Params", "FLOPs",
            "Settings");
    fprintf(f, "%.*s\n", 116, RULE);
    for (int i = 0; i < r->n; i++) {
        const summary_row *row = &r->rows[i];
        const em_module *m = row->m;
        char label[160], shape[64] = "--", params[32] = "--", flops[32] = "--";
        char settings[256] = "";
        snprintf(label, sizeof label, "%*s%s%s%s%s", 2 * row->depth, "", row->name,
                 row->depth ? " (" : "", m->type->type_name, row->depth ? ")" : "");
        if (row->has_out)
            em_shape_fmt(&row->out, shape, sizeof shape);
        int64_t own = own_counts(m).total;
        if (own > 0 || m->n_children == 0)
            group_digits(own, params, sizeof params);
        if (row->has_out && (row->flops > 0 || m->n_children == 0))
            group_digits((int64_t)row->flops, flops, sizeof flops);
        em_module_describe(m, settings, sizeof settings);
        fprintf(f, "%-40s %-22s %12s %15s  %s\n", label, shape, params, flops, settings);
    }
}

static void print_totals(const summary_rows *r, em_shape input, FILE *f)
{
    int64_t total = 0, trainable = 0, bytes = 0;
    double flops = 0;
    for (int i = 0; i < r->n; i++) {
        param_counts c = own_counts(r->rows[i].m);
        total += c.total;
        trainable += c.trainable;
        bytes += c.bytes;
        flops += r->rows[i].flops;
    }
    char shape[64], a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "%.*s\n", 116, RULE);
    fprintf(f, "Input shape: %s\n", em_shape_fmt(&input, shape, sizeof shape));
    fprintf(f, "Total params: %s\n", group_digits(total, a, sizeof a));
    fprintf(f, "Trainable params: %s\n", group_digits(trainable, b, sizeof b));
    fprintf(f, "Non-trainable params: %s\n", group_digits(total - trainable, c, sizeof c));
    fprintf(f, "Params size: %s bytes (%.2f MB)\n", group_digits(bytes, d, sizeof d),
            (double)bytes / 1e6);
    fprintf(f, "Forward FLOPs: %s\n", group_digits((int64_t)flops, e, sizeof e));
}

em_status em_module_summary(em_module *m, em_shape input, FILE *f)
{
    if (!m || !f)
        return em_set_error(EM_ERR_ARG, "em_module_summary: module and file must be given");
    summary_rows r = {.cap = em_module_count(m)};
    r.rows = malloc((size_t)r.cap * sizeof *r.rows);
    if (!r.rows)
        return em_set_error(EM_ERR_MEMORY, "em_module_summary: out of memory");
    collect(&r, m, "", 0);
    em_status st = em_module_trace(m, input, record_output, &r);
    if (st == EM_OK) {
        print_rows(&r, f);
        print_totals(&r, input, f);
    }
    free(r.rows);
    return st;
}
