/* em_einsum: PyTorch's einsum, composed of views, sums, a product by an identity mask (repeated
 * subscripts) and batched matrix products (em_bmm), so its gradient and its CUDA kernels are
 * those ops'. Operands are contracted left to right, as PyTorch does without opt_einsum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

#define N_LETTERS 52                       /* A-Z then a-z: PyTorch's order of labels */
#define N_LABELS (N_LETTERS + EM_MAX_DIMS) /* then the dims "..." covers, right-aligned */
#define ELLIPSIS (-1)                      /* "..." in a parsed term */

/* An operand as worked on so far: its tensor and each dim's label. */
typedef struct {
    const em_tensor *t; /* (one dim per label) */
    int ndim;
    int label[EM_MAX_DIMS];
    int ell_pos, ell_dims; /* where "..." is among the subscripts (-1: none), the dims it covers */
} term;

typedef struct {
    const char *text;
    int n_ell;               /* dims "..." stands for: the most any operand gives it */
    int64_t size[N_LABELS];  /* each label's size after broadcasting; -1 where unused */
    bool in_out[N_LABELS];
    int last_use[N_LABELS];  /* the last operand holding the label */
    int out[N_LABELS];       /* the output's labels in order */
    int n_out;
} equation;

static bool fail(const equation *eq, const char *why)
{
    em_set_error(EM_ERR_ARG, "em_einsum: %s in '%s'", why, eq->text);
    return false;
}

static int letter_label(char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + c - 'a' : -2;
}

static char label_char(int l)
{
    return (char)(l < 26 ? 'A' + l : 'a' + l - 26);
}

/* The letters and "..." of the text [s, e), spaces skipped, into lab (ELLIPSIS for "...");
 * false with an error for any other character, a second "..." or more entries than max. */
static bool parse_subscripts(const equation *eq, const char *s, const char *e, int *lab, int *n,
                             int max)
{
    bool ell = false;
    char why[96];
    for (*n = 0; s < e; s++) {
        if (*s == ' ')
            continue;
        int l = letter_label(*s);
        if (*s == '.') {
            if (e - s < 3 || s[1] != '.' || s[2] != '.' || ell)
                return fail(eq, ell ? "a second '...' in one term" : "a '.' outside '...'");
            ell = true;
            s += 2;
            l = ELLIPSIS;
        } else if (l < 0) {
            snprintf(why, sizeof why, "'%c' is not a subscript (letters a-z, A-Z and '...')", *s);
            return fail(eq, why);
        }
        if (*n == max)
            return fail(eq, "more subscripts than an operand has dims");
        lab[(*n)++] = l;
    }
    return true;
}

/* Reads operand i's term [s, e) into tm (ellipsis dims labelled later) and its "..." width. */
static bool read_term(equation *eq, const char *s, const char *e, const em_tensor *x, int i,
                      term *tm)
{
    int *ell_pos = &tm->ell_pos, *ell_dims = &tm->ell_dims;
    int lab[EM_MAX_DIMS + 1], n;
    if (!parse_subscripts(eq, s, e, lab, &n, EM_MAX_DIMS + 1))
        return false;
    *ell_pos = -1;
    for (int k = 0; k < n; k++)
        if (lab[k] == ELLIPSIS)
            *ell_pos = k;
    int letters = n - (*ell_pos >= 0);
    *ell_dims = x->ndim - letters;
    if (*ell_dims < 0 || (*ell_pos < 0 && *ell_dims != 0)) {
        char why[128], bx[128];
        snprintf(why, sizeof why, "operand %d has %d dims %s but its subscripts name %d", i,
                 x->ndim, em_shape_str(x, bx, sizeof bx), letters);
        return fail(eq, why);
    }
    tm->t = x;
    tm->ndim = x->ndim;
    for (int k = 0, d = 0; k < n; k++)
        if (lab[k] != ELLIPSIS)
            tm->label[d++ + (*ell_pos >= 0 && k > *ell_pos ? *ell_dims : 0)] = lab[k];
    return true;
}

/* Records each dim's size against its label: sizes broadcast (1 with any), a repeated
 * subscript within one operand needs equal sizes. */
static bool note_sizes(equation *eq, const term *tm, int i)
{
    char why[160];
    for (int d = 0; d < tm->ndim; d++) {
        int l = tm->label[d];
        int64_t s = tm->t->shape[d], *have = &eq->size[l];
        for (int p = 0; p < d; p++)
            if (tm->label[p] == l && tm->t->shape[p] != s) {
                snprintf(why, sizeof why, "subscript %c is repeated for operand %d with sizes "
                         "%lld and %lld", label_char(l), i, (long long)tm->t->shape[p],
                         (long long)s);
                return fail(eq, why);
            }
        if (*have >= 0 && *have != s && *have != 1 && s != 1) {
            if (l < N_LETTERS)
                snprintf(why, sizeof why, "subscript %c has size %lld for operand %d, which does "
                         "not broadcast with size %lld", label_char(l), (long long)s, i,
                         (long long)*have);
            else
                snprintf(why, sizeof why, "the dims of '...' do not broadcast (size %lld for "
                         "operand %d against %lld)", (long long)s, i, (long long)*have);
            return fail(eq, why);
        }
        if (*have < 0 || *have == 1)
            *have = s;
        eq->last_use[l] = i;
    }
    return true;
}

/* The output's labels: explicit after "->", else "..." then the letters used once, in order. */
static bool read_output(equation *eq, const char *arrow, const int *count)
{
    eq->n_out = 0;
    if (!arrow) {
        for (int l = N_LETTERS; l < N_LETTERS + eq->n_ell; l++)
            eq->out[eq->n_out++] = l;
        for (int l = 0; l < N_LETTERS; l++)
            if (count[l] == 1)
                eq->out[eq->n_out++] = l;
    } else {
        int lab[N_LETTERS + 1], n;
        const char *s = arrow + 2;
        if (!parse_subscripts(eq, s, s + strlen(s), lab, &n, N_LETTERS + 1))
            return false;
        for (int k = 0; k < n; k++) {
            char why[96];
            int l = lab[k];
            for (int p = 0; p < k && l != ELLIPSIS; p++)
                if (lab[p] == l) {
                    snprintf(why, sizeof why, "output subscript %c appears more than once",
                             label_char(l));
                    return fail(eq, why);
                }
            if (l != ELLIPSIS && count[l] == 0) {
                snprintf(why, sizeof why, "output subscript %c does not appear in any operand",
                         label_char(l));
                return fail(eq, why);
            }
            for (int j = 0; j < (l == ELLIPSIS ? eq->n_ell : 1); j++)
                eq->out[eq->n_out++] = l == ELLIPSIS ? N_LETTERS + j : l;
        }
        if (eq->n_out > EM_MAX_DIMS)
            return fail(eq, "the output has more dims than a tensor holds");
    }
    for (int k = 0; k < eq->n_out; k++)
        eq->in_out[eq->out[k]] = true;
    return true;
}

/* Parses the equation against the operands into eq and one term per operand. */
static bool parse(equation *eq, const em_tensor *const *ops, int n, term *terms)
{
    const char *arrow = strstr(eq->text, "->");
    const char *end = arrow ? arrow : eq->text + strlen(eq->text), *s = eq->text;
    int n_terms = 1;
    for (const char *c = s; c < end; c++)
        n_terms += *c == ',';
    if (n_terms != n) {
        char why[96];
        snprintf(why, sizeof why, "%d operand%s given for %d term%s", n, n == 1 ? "" : "s",
                 n_terms, n_terms == 1 ? "" : "s");
        return fail(eq, why);
    }
    for (int i = 0; i < n; i++) {
        const char *comma = memchr(s, ',', (size_t)(end - s)), *e = comma ? comma : end;
        if (!read_term(eq, s, e, ops[i], i, &terms[i]))
            return false;
        eq->n_ell = terms[i].ell_dims > eq->n_ell ? terms[i].ell_dims : eq->n_ell;
        s = e + 1;
    }
    int count[N_LABELS] = {0};
    for (int i = 0; i < n; i++) {
        term *tm = &terms[i]; /* "..." right-aligned against the widest */
        for (int j = 0; j < tm->ell_dims; j++)
            tm->label[tm->ell_pos + j] = N_LETTERS + eq->n_ell - tm->ell_dims + j;
        for (int d = 0; d < terms[i].ndim; d++)
            count[terms[i].label[d]]++;
        if (!note_sizes(eq, &terms[i], i))
            return false;
    }
    return read_output(eq, arrow, count);
}

/* The dim of tm that holds label l, or -1. */
static int dim_of(const term *tm, int l)
{
    for (int d = 0; d < tm->ndim; d++)
        if (tm->label[d] == l)
            return d;
    return -1;
}

/* tm summed over the dims whose labels keep does not hold. */
static bool sum_out(term *tm, const bool *keep)
{
    int dims[EM_MAX_DIMS], n = 0, k = 0;
    for (int d = 0; d < tm->ndim; d++) {
        if (keep[tm->label[d]])
            tm->label[k++] = tm->label[d];
        else
            dims[n++] = d;
    }
    if (n > 0) {
        tm->t = em_sum(tm->t, dims, n, false);
        tm->ndim = k;
    }
    return tm->t != NULL;
}

/* tm's dims d1 < d2 (one label, size n) as its diagonal: tm times the identity over the pair,
 * summed over d2. */
static bool take_diagonal(term *tm, int d1, int d2)
{
    const em_tensor *x = tm->t;
    int64_t n = x->shape[d1];
    em_shape rows = {.ndim = x->ndim}, cols;
    for (int d = 0; d < x->ndim; d++)
        rows.d[d] = 1;
    cols = rows;
    rows.d[d1] = cols.d[d2] = n;
    em_tensor *idx = em_arange(0, (double)n, 1, EM_I64);
    if (idx && x->device != EM_CPU)
        idx = em_to_device(idx, x->device);
    em_tensor *eye = em_to_dtype(em_eq(em_reshape(idx, rows), em_reshape(idx, cols)), x->dtype);
    tm->t = em_sum(em_mul(x, eye), &d2, 1, false);
    for (int d = d2; d + 1 < tm->ndim; d++)
        tm->label[d] = tm->label[d + 1];
    tm->ndim--;
    return tm->t != NULL;
}

/* tm with every repeated subscript ("ii") reduced to its diagonal, then each dim broadcast to
 * its label's size. */
static bool prepare(const equation *eq, term *tm)
{
    for (int d2 = 1; d2 < tm->ndim;) {
        int d1 = dim_of(tm, tm->label[d2]);
        if (d1 == d2)
            d2++;
        else if (!take_diagonal(tm, d1, d2)) /* dim d2 is gone: d2 is the next one */
            return false;
    }
    em_shape s = {.ndim = tm->ndim};
    bool same = true;
    for (int d = 0; d < tm->ndim; d++) {
        s.d[d] = eq->size[tm->label[d]];
        same = same && s.d[d] == tm->t->shape[d];
    }
    if (!same)
        tm->t = em_expand(tm->t, s);
    return tm->t != NULL;
}

/* Labels of tm in three lists by class, with their sizes multiplied: shared and kept (batch),
 * tm's own, shared and summed (the GEMM's inner dim). */
typedef struct {
    int label[3][EM_MAX_DIMS], n[3];
    int64_t size[3];
} label_classes;
enum { BATCH, OWN, INNER };

static void add_class(label_classes *c, int k, int l, int64_t size)
{
    c->label[k][c->n[k]++] = l;
    c->size[k] *= size;
}

/* The dims of tm in the order of the classes in order[], as em_permute takes them. */
static void class_order(const term *tm, const label_classes *c, const int *order, int *perm)
{
    int p = 0;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < c->n[order[k]]; j++)
            perm[p++] = dim_of(tm, c->label[order[k]][j]);
}

/* a becomes a times operand i's term b, summed over the labels they share that neither the
 * output nor a later operand holds: one batched matrix product (batch, own_a, inner) x (batch,
 * inner, own_b). Labels only one side holds and nothing needs are summed out first. */
static bool contract(const equation *eq, term *a, term *b, int i)
{
    bool kept[N_LABELS], keep_a[N_LABELS], keep_b[N_LABELS];
    for (int l = 0; l < N_LABELS; l++) {
        kept[l] = eq->in_out[l] || eq->last_use[l] > i;
        keep_a[l] = kept[l] || dim_of(b, l) >= 0;
        keep_b[l] = kept[l] || dim_of(a, l) >= 0;
    }
    if (!sum_out(a, keep_a) || !sum_out(b, keep_b))
        return false;
    label_classes ca = {.size = {1, 1, 1}}, cb = ca;
    for (int d = 0; d < a->ndim; d++) {
        int l = a->label[d], k = dim_of(b, l) < 0 ? OWN : kept[l] ? BATCH : INNER;
        add_class(&ca, k, l, a->t->shape[d]);
        if (k != OWN)
            add_class(&cb, k, l, a->t->shape[d]);
    }
    for (int d = 0; d < b->ndim; d++)
        if (dim_of(a, b->label[d]) < 0)
            add_class(&cb, OWN, b->label[d], b->t->shape[d]);
    int n_dims = ca.n[BATCH] + ca.n[OWN] + cb.n[OWN];
    if (n_dims > EM_MAX_DIMS)
        return fail(eq, "a product of two operands would have more dims than a tensor holds");
    int pa[EM_MAX_DIMS], pb[EM_MAX_DIMS];
    class_order(a, &ca, (int[]){BATCH, OWN, INNER}, pa);
    class_order(b, &cb, (int[]){BATCH, INNER, OWN}, pb);
    em_tensor *a3 = em_reshape(em_permute(a->t, pa), EM_SHAPE(ca.size[BATCH], ca.size[OWN],
                                                              ca.size[INNER]));
    em_tensor *b3 = em_reshape(em_permute(b->t, pb), EM_SHAPE(cb.size[BATCH], cb.size[INNER],
                                                              cb.size[OWN]));
    em_shape s = {.ndim = 0};
    int labels[EM_MAX_DIMS];
    const int *from[3] = {ca.label[BATCH], ca.label[OWN], cb.label[OWN]};
    const int counts[3] = {ca.n[BATCH], ca.n[OWN], cb.n[OWN]};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < counts[k]; j++) {
            labels[s.ndim] = from[k][j];
            s.d[s.ndim++] = eq->size[from[k][j]];
        }
    a->t = em_reshape(em_bmm(a3, b3), s);
    a->ndim = s.ndim;
    memcpy(a->label, labels, sizeof labels);
    return a->t != NULL;
}

/* The last term summed over what the output lacks, its dims in the output's order. */
static em_tensor *finish(const equation *eq, term *r)
{
    if (!sum_out(r, eq->in_out))
        return NULL;
    int perm[EM_MAX_DIMS];
    for (int k = 0; k < eq->n_out; k++)
        perm[k] = dim_of(r, eq->out[k]);
    return em_permute(r->t, perm);
}

static bool check_operands(const char *text, em_tensor *const *ops, int n)
{
    const char *fn = "em_einsum";
    if (!em_present(text, fn, "equation"))
        return false;
    if (n < 1 || !ops) {
        em_set_error(EM_ERR_ARG, "%s: '%s' needs at least one operand", fn, text);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!em_present(ops[i], fn, "operand"))
            return false;
    return true;
}

/* em_einsum on its operands cast to autocast's low dtype, as PyTorch's list has it */
static em_tensor *einsum_autocast(const char *equation_text, em_tensor *const *operands, int n)
{
    const em_tensor **cast = malloc((size_t)n * sizeof *cast);
    if (!cast) {
        em_set_error(EM_ERR_MEMORY, "em_einsum: out of memory");
        return NULL;
    }
    em_scope_begin();
    memcpy(cast, operands, (size_t)n * sizeof *cast);
    em_tensor *y = em_autocast_inputs(EM_AUTOCAST_LOW, cast, n)
                       ? em_einsum(equation_text, (em_tensor *const *)cast, n) : NULL;
    free(cast);
    return em_scope_return(y);
}

em_tensor *em_einsum(const char *equation_text, em_tensor *const *operands, int n)
{
    if (!check_operands(equation_text, operands, n))
        return NULL;
    if (em_autocast_needed(EM_AUTOCAST_LOW, (const em_tensor *const *)operands, n))
        return einsum_autocast(equation_text, operands, n);
    for (int i = 1; i < n; i++)
        if (!em_check_pair("em_einsum", operands[0], operands[i]))
            return NULL;
    equation eq = {.text = equation_text};
    for (int l = 0; l < N_LABELS; l++) {
        eq.size[l] = -1;
        eq.last_use[l] = -1;
    }
    term *terms = calloc((size_t)n, sizeof *terms);
    if (!terms) {
        em_set_error(EM_ERR_MEMORY, "em_einsum: out of memory");
        return NULL;
    }
    em_scope_begin();
    bool ok = parse(&eq, (const em_tensor *const *)operands, n, terms);
    for (int i = 0; ok && i < n; i++)
        ok = prepare(&eq, &terms[i]);
    for (int i = 1; ok && i < n; i++)
        ok = contract(&eq, &terms[0], &terms[i], i);
    em_tensor *y = ok ? finish(&eq, &terms[0]) : NULL;
    free(terms);
    return em_scope_return(y);
}
