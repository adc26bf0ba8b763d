/* After pruning: the sparsity report, shrinking stacks of dense layers (matrix products over a
 * weight (out, in), as Linear) to the neurons that remain, and rebuilding a pruned or shrunk
 * model's structure from a file before loading it. Layers are told apart by their types'
 * traits and resized through their descriptions. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "prune/prune_internal.h"

/* A layer whose weight (out, in) multiplies its input (the matmul trait and a 2-d weight), and
 * whose type's settings name its input and output units: one that can be resized. */
static bool is_dense(const em_module *m)
{
    em_tensor *w = (m->type->traits & EM_TRAIT_MATMUL) ? em_prune_param(m, "weight") : NULL;
    bool dense = w && w->ndim == 2;
    em_release(w);
    return dense;
}

/* A new layer of like's type and settings but in and out units (every unit-setting so flagged),
 * its tensors as the type makes them; NULL with an error. */
static em_module *resized(const em_module *like, int64_t in, int64_t out)
{
    const em_module_type *t = em_module_own_type(like);
    void *options = malloc(t->options_size ? t->options_size : 1);
    if (!options) {
        em_set_error(EM_ERR_MEMORY, "em_prune_shrink: out of memory");
        return NULL;
    }
    memcpy(options, em_module_options(like), t->options_size);
    for (int i = 0; i < t->n_settings; i++) {
        const em_setting *s = &t->settings[i];
        em_setting_value v = {.kind = s->kind, .i = s->flags & EM_SETTING_IN_UNITS ? in : out};
        if (s->flags & (EM_SETTING_IN_UNITS | EM_SETTING_OUT_UNITS))
            em_setting_write(s, options, &v);
    }
    em_module *m = t->build ? t->build(t, options, NULL, 0) : NULL;
    if (!t->build)
        em_set_error(EM_ERR_ARG, "em_prune_shrink: a %s cannot be rebuilt", t->type_name);
    free(options);
    if (m)
        m->training = like->training;
    return m;
}

/* ---- sparsity ---- */

typedef struct {
    em_sparsity *rows;
    int max, count;
    int64_t zeros, numel;
    bool failed;
} sparsity_walk;

static void sparsity_visit(sparsity_walk *s, const em_module *m, const char *prefix)
{
    em_tensor *w = em_prune_param(m, "weight");
    if (w && w->ndim >= 2) {
        float *v = em_host_f32(w, "em_prune_sparsity");
        int64_t z = 0, n = em_numel(w);
        for (int64_t i = 0; v && i < n; i++)
            z += v[i] == 0;
        s->failed = s->failed || !v;
        free(v);
        if (s->count < s->max) {
            em_sparsity *r = &s->rows[s->count];
            snprintf(r->name, sizeof r->name, "%sweight", prefix);
            r->zeros = z;
            r->numel = n;
        }
        s->count++;
        s->zeros += z;
        s->numel += n;
    }
    em_release(w);
    for (int i = 0; i < m->n_children; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s%s.", prefix, m->children[i].name);
        sparsity_visit(s, m->children[i].module, p);
    }
}

int em_prune_sparsity(const em_module *model, em_sparsity *rows, int max, int64_t *zeros,
                      int64_t *numel)
{
    if (!model || (max > 0 && !rows)) {
        em_set_error(EM_ERR_ARG, "em_prune_sparsity: model and rows must be given");
        return -1;
    }
    sparsity_walk s = {.rows = rows, .max = max};
    sparsity_visit(&s, model, "");
    if (zeros)
        *zeros = s.zeros;
    if (numel)
        *numel = s.numel;
    return s.failed ? -1 : s.count;
}

double em_prune_report(const em_module *model, FILE *f)
{
    int64_t zeros = 0, numel = 0;
    int n = em_prune_sparsity(model, NULL, 0, NULL, NULL);
    em_sparsity *rows = n > 0 ? calloc((size_t)n, sizeof *rows) : NULL;
    if (rows)
        em_prune_sparsity(model, rows, n, &zeros, &numel);
    fprintf(f, "%-24s %12s %12s %9s\n", "weight", "zeros", "elements", "sparsity");
    for (int i = 0; rows && i < n; i++)
        fprintf(f, "%-24s %12lld %12lld %8.2f%%\n", rows[i].name, (long long)rows[i].zeros,
                (long long)rows[i].numel,
                rows[i].numel ? 100.0 * (double)rows[i].zeros / (double)rows[i].numel : 0.0);
    double overall = numel ? (double)zeros / (double)numel : 0;
    fprintf(f, "%-24s %12lld %12lld %8.2f%%\n", "overall", (long long)zeros, (long long)numel,
            100 * overall);
    free(rows);
    return overall;
}

/* ---- shrinking ---- */

static bool is_elementwise(const em_module *m)
{
    return m->type->traits & EM_TRAIT_ELEMENTWISE;
}

/* act[r] = the layers seq[from..to) applied to the value bias[r] (eval mode, no grad). */
static em_status constant_outputs(em_module *seq, int from, int to, const float *bias,
                                  int64_t n, float *act)
{
    em_scope_begin();
    em_tensor *h = em_from_data(EM_SHAPE(1, n), EM_F32, bias);
    for (int i = from; i < to && h; i++) {
        em_module *m = seq->children[i].module;
        bool was = m->training;
        em_module_train(m, false);
        h = em_forward(m, h);
        em_module_train(m, was);
    }
    em_status st = h ? (em_status)em_copy_to_host(h, EM_F32, act) : em_error_status();
    em_scope_end();
    return st;
}

/* A layer like `like` resized to (in, out) whose weight and bias take the given host values. */
static em_module *dense_from(const em_module *like, int64_t in, int64_t out, const float *w,
                             const float *b, const char *fn)
{
    em_module *l = resized(like, in, out);
    if (l && (em_prune_write(l->params[0].value, w, fn) != EM_OK ||
              (b && em_prune_write(l->params[1].value, b, fn) != EM_OK))) {
        em_module_free(l);
        return NULL;
    }
    return l;
}

typedef struct {
    int64_t in, out;
    float *w, *b; /* (out, in), (out) or NULL */
} dense;

static bool dense_open(dense *d, const em_module *m, const char *fn)
{
    *d = (dense){0};
    em_tensor *w = em_prune_param(m, "weight"), *b = em_prune_param(m, "bias");
    d->out = w ? w->shape[0] : 0;
    d->in = w ? w->shape[1] : 0;
    d->w = w ? em_host_f32(w, fn) : NULL;
    d->b = b && d->w ? em_host_f32(b, fn) : NULL;
    em_release(w);
    em_release(b);
    return d->w && (!b || d->b);
}

static void dense_close(dense *d)
{
    free(d->w);
    free(d->b);
}

/* Shrinks the hidden neurons between dense children i and j of seq; returns how many went. */
static int64_t shrink_pair(em_module *seq, int i, int j)
{
    const char *fn = "em_prune_shrink";
    em_module *m1 = seq->children[i].module, *m2 = seq->children[j].module;
    dense a, c;
    bool ok = dense_open(&a, m1, fn) & dense_open(&c, m2, fn);
    int64_t h = a.out, removed = -1, kept = 0;
    bool *keep = ok ? malloc((size_t)h) : NULL, *fold = ok ? malloc((size_t)h) : NULL;
    float *act = ok ? calloc((size_t)h, sizeof *act) : NULL, *zero = calloc((size_t)h, 4);
    float *w1 = ok ? malloc(sizeof *w1 * (size_t)(a.in * h)) : NULL;
    float *w2 = ok ? malloc(sizeof *w2 * (size_t)(c.out * h)) : NULL;
    if (ok && c.in != h)
        em_set_error(EM_ERR_ARG, "%s: %s %s gives %lld features but %s takes %lld", fn,
                     m1->type->type_name, seq->children[i].name, (long long)h,
                     seq->children[j].name, (long long)c.in);
    else if (ok && (!keep || !fold || !act || !zero || !w1 || !w2))
        em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    else if (ok && constant_outputs(seq, i + 1, j, a.b ? a.b : zero, h, act) == EM_OK) {
        for (int64_t r = 0; r < h; r++) {
            bool row = false, col = false;
            for (int64_t k = 0; k < a.in && !row; k++)
                row = a.w[r * a.in + k] != 0;
            for (int64_t q = 0; q < c.out && !col; q++)
                col = c.w[q * h + r] != 0;
            /* a dead row still sends act(bias) on: fold it into the next bias when there is one */
            fold[r] = !row && col && act[r] != 0;
            keep[r] = row && col ? true : fold[r] && !c.b;
            fold[r] = fold[r] && !keep[r];
            kept += keep[r];
        }
        if (kept == 0)
            kept = keep[0] = 1; /* a layer needs one output; neuron 0 then computes zeros */
        for (int64_t r = 0; r < h; r++)
            for (int64_t q = 0; fold[r] && q < c.out; q++)
                c.b[q] += c.w[q * h + r] * act[r];
        int64_t at = 0;
        for (int64_t r = 0; r < h; r++) {
            if (!keep[r])
                continue;
            memcpy(w1 + at * a.in, a.w + r * a.in, sizeof *w1 * (size_t)a.in);
            if (a.b)
                a.b[at] = a.b[r];
            for (int64_t q = 0; q < c.out; q++)
                w2[q * kept + at] = c.w[q * h + r];
            at++;
        }
        em_module *n1 = kept < h ? dense_from(m1, a.in, kept, w1, a.b, fn) : NULL;
        em_module *n2 = n1 ? dense_from(m2, kept, c.out, w2, c.b, fn) : NULL;
        if (n2) {
            em_module_free(em_module_set_child(seq, i, n1));
            em_module_free(em_module_set_child(seq, j, n2));
            removed = h - kept;
        } else if (kept == h) {
            removed = 0;
        }
        em_module_free(n2 ? NULL : n1);
    }
    dense_close(&a);
    dense_close(&c);
    free(keep);
    free(fold);
    free(act);
    free(zero);
    free(w1);
    free(w2);
    return removed;
}

static int64_t shrink_tree(em_module *m)
{
    int64_t removed = 0;
    bool seq = m->type->traits & EM_TRAIT_SEQUENTIAL;
    for (int i = 0; seq && i < m->n_children; i++) {
        if (!is_dense(m->children[i].module))
            continue;
        int j = i + 1;
        while (j < m->n_children && is_elementwise(m->children[j].module))
            j++;
        if (j >= m->n_children || !is_dense(m->children[j].module))
            continue;
        int64_t r = shrink_pair(m, i, j);
        if (r < 0)
            return -1;
        removed += r;
    }
    for (int i = 0; i < m->n_children; i++) {
        int64_t r = shrink_tree(m->children[i].module);
        if (r < 0)
            return -1;
        removed += r;
    }
    return removed;
}

int64_t em_prune_shrink(em_module *model)
{
    if (!model) {
        em_set_error(EM_ERR_ARG, "em_prune_shrink: NULL model");
        return -1;
    }
    if (em_prune_remove_all(model) != EM_OK)
        return -1;
    return shrink_tree(model);
}

/* ---- files ---- */

int em_prune_meta(em_st_meta *out)
{
    out[0] = (em_st_meta){"ember.pruned", "1"};
    return 1;
}

/* The file's tensor for module prefix + param (or param_orig), or NULL. */
static const em_tensor *file_param(const em_safetensors *st, const char *prefix,
                                   const char *param)
{
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix, param);
    const em_tensor *t = em_safetensors_get(st, name);
    snprintf(name, sizeof name, "%s%s_orig", prefix, param);
    return t ? t : em_safetensors_get(st, name);
}

/* Dense children take the file's sizes; parameters with a mask in the file are pruned. */
static em_status prepare(em_module *m, const em_safetensors *st, const char *prefix)
{
    const char *fn = "em_prune_prepare_load";
    for (int i = 0; i < m->n_children; i++) {
        char p[192];
        snprintf(p, sizeof p, "%s%s.", prefix, m->children[i].name);
        em_module *c = m->children[i].module;
        const em_tensor *w = file_param(st, p, "weight");
        em_tensor *cw = is_dense(c) ? em_prune_param(c, "weight") : NULL;
        bool resize = w && cw && w->ndim == 2 && !em_same_shape(w, cw);
        em_release(cw);
        if (resize) {
            em_module *n = resized(c, w->shape[1], w->shape[0]);
            if (!n)
                return em_error_status();
            em_module_free(em_module_set_child(m, i, n));
            c = n;
        }
        em_status s = prepare(c, st, p);
        if (s != EM_OK)
            return s;
    }
    for (int i = 0; i < m->n_params; i++) {
        char name[256];
        const char *pn = m->params[i].name;
        size_t len = strlen(pn);
        bool orig = len > 5 && !strcmp(pn + len - 5, "_orig");
        snprintf(name, sizeof name, "%s%.*s_mask", prefix, (int)(orig ? len - 5 : len), pn);
        if (!orig && em_safetensors_get(st, name) && !em_prune_reparametrize(m, pn, fn))
            return em_error_status();
    }
    return EM_OK;
}

em_status em_prune_prepare_load(em_module *model, const em_safetensors *st)
{
    if (!model || !st)
        return em_set_error(EM_ERR_ARG, "em_prune_prepare_load: model and file must be given");
    if (!em_safetensors_meta(st, "ember.pruned"))
        return EM_OK;
    return prepare(model, st, "");
}
