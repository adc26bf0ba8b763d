/* Matrix products on the backend's gemm: matmul (PyTorch semantics, broadcast batch dims), bmm,
 * and linear (the backend's Linear kernel with its bias where it has one, else one gemm with the
 * bias preloaded into C; then optionally a ReLU in place).
 * Transposed 2-D views go to gemm as trans=true; other layouts are made contiguous first. */
#include "autograd/autocast_copies_internal.h"
#include "autograd/autograd_internal.h"

/* How the last two dims of t map onto gemm: row-major with row stride ld (trans false), or the
 * transpose of a row-major matrix (trans true). False when neither fits. */
static bool mat_layout(const em_tensor *t /* (*, r, c) */, bool *trans, int64_t *ld)
{
    int nd = t->ndim;
    int64_t r = t->shape[nd - 2], c = t->shape[nd - 1];
    int64_t sr = t->strides[nd - 2], sc = t->strides[nd - 1];
    int64_t rmin = r > 1 ? r : 1, cmin = c > 1 ? c : 1;
    if (c <= 1 || sc == 1) {
        *trans = false;
        *ld = r <= 1 ? cmin : sr;
        if (*ld >= cmin)
            return true;
    }
    if (r <= 1 || sr == 1) {
        *trans = true;
        *ld = c <= 1 ? rmin : sc;
        if (*ld >= rmin)
            return true;
    }
    return false;
}

/* The one stride that steps through t's first nb (batch) dims in row-major order, if any. */
static bool batch_stride(const em_tensor *t /* (nb batch dims.., r, c) */, int nb, int64_t *sb)
{
    int64_t s = 0, span = 0;
    for (int d = nb - 1; d >= 0; d--) {
        if (t->shape[d] == 1)
            continue;
        if (span == 0) {
            s = t->strides[d];
            span = t->shape[d];
        } else if (t->strides[d] != s * span) {
            return false;
        } else {
            span *= t->shape[d];
        }
    }
    *sb = s;
    return true;
}

/* gemm's view of operand x; copies x (a temporary of the caller's scope) when it must. */
static const em_tensor *operand(const em_tensor *x /* (nb batch dims.., r, c) */, int nb,
                                bool *trans, int64_t *ld, int64_t *sb)
{
    if (mat_layout(x, trans, ld) && batch_stride(x, nb, sb))
        return x;
    em_tensor *c = em_tensor_contiguous_raw(x);
    if (c && mat_layout(c, trans, ld) && batch_stride(c, nb, sb))
        return c;
    return NULL;
}

/* c = alpha * op(a) @ op(b) + beta * c, batched over the leading dims; op transposes the last
 * two dims when ta / tb. c is contiguous; a and b have c's ndim (batch dims may be 0-strided). */
static em_status gemm_call(const char *fn, em_tensor *c /* (batch.., m, n) */,
                           const em_tensor *a /* (batch.., m, k), or (batch.., k, m) when ta */,
                           bool ta,
                           const em_tensor *b /* (batch.., k, n), or (batch.., n, k) when tb */,
                           bool tb, double alpha, double beta)
{
    int nd = c->ndim, nb = nd - 2;
    int64_t m = c->shape[nd - 2], n = c->shape[nd - 1];
    int64_t k = ta ? a->shape[nd - 2] : a->shape[nd - 1], batch = 1;
    for (int d = 0; d < nb; d++)
        batch *= c->shape[d];
    if (batch == 0 || m == 0 || n == 0)
        return EM_OK;
    const em_backend *be = em_tensor_backend(c, fn);
    if (!be || !em_kernel_present((const void *)be->fill, fn, c) ||
        !em_kernel_present((const void *)be->gemm, fn, c))
        return em_error_status();
    if (k == 0) {
        em_arr ac = em_tensor_arr(c);
        return beta == 0 ? em_kernel_status(be->fill(&ac, 0.0), fn, c) : EM_OK;
    }
    bool sta, stb;
    int64_t lda, ldb, sa, sb;
    const em_tensor *pa = operand(a, nb, &sta, &lda, &sa);
    const em_tensor *pb = operand(b, nb, &stb, &ldb, &sb);
    if (!pa || !pb)
        return em_error_status();
    int rc = be->gemm(c->dtype, sta != ta, stb != tb, m, n, k, alpha, em_data_ptr(pa), lda, sa,
                      em_data_ptr(pb), ldb, sb, beta, em_data_ptr(c), n, m * n, batch);
    return em_kernel_status(rc, fn, c);
}

/* An alias of t broadcast (stride 0) to batch dims bs followed by its own last two dims. */
static em_tensor *batch_expand(const em_tensor *t /* (*, r, c) */, const em_shape *bs)
{
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int nd = bs->ndim + 2, lead = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
        bool own = d >= lead;
        shape[d] = d < bs->ndim ? bs->d[d] : t->shape[d - lead];
        strides[d] = own && t->shape[d - lead] == shape[d] ? t->strides[d - lead] : 0;
    }
    return em_tensor_alias(t, nd, shape, strides, t->offset);
}

static em_tensor *mm(const char *fn, const em_tensor *a /* (batch.., m, k) */,
                     const em_tensor *b /* (batch.., k, n) */);

/* saved: a, b (as given to the product) */
static em_status mm_backward(em_node *node, const em_tensor *g /* (batch.., m, n) */,
                             em_tensor **grad_in)
{
    const em_tensor *a = node->saved[0], *b = node->saved[1];
    for (int i = 0; i < 2; i++) {
        if (!node->inputs[i])
            continue;
        em_tensor *gi = i == 0 ? mm("em_backward", g, em_transpose(b, -1, -2))
                               : mm("em_backward", em_transpose(a, -1, -2), g);
        em_shape s = em_shape_of(i == 0 ? a : b);
        if (!(grad_in[i] = em_grad_sum_to(gi, &s)))
            return em_error_status();
    }
    return EM_OK;
}

/* a @ b, both at least 2-D, shapes already checked; batch dims broadcast. */
static em_tensor *mm(const char *fn, const em_tensor *a /* (batch.., m, k) */,
                     const em_tensor *b /* (batch.., k, n) */)
{
    if (!em_present(a, fn, "a") || !em_present(b, fn, "b"))
        return NULL;
    em_shape ba = {.ndim = a->ndim - 2}, bb = {.ndim = b->ndim - 2}, bs, s;
    for (int d = 0; d < ba.ndim; d++)
        ba.d[d] = a->shape[d];
    for (int d = 0; d < bb.ndim; d++)
        bb.d[d] = b->shape[d];
    if (!em_broadcast_shapes(&ba, &bb, &bs) || bs.ndim + 2 > EM_MAX_DIMS) {
        char sa[128], sb[128];
        em_set_error(EM_ERR_ARG, "%s: batch dimensions do not broadcast: %s x %s", fn,
                     em_shape_str(a, sa, sizeof sa), em_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    s = bs;
    s.d[s.ndim++] = a->shape[a->ndim - 2];
    s.d[s.ndim++] = b->shape[b->ndim - 1];
    em_scope_begin();
    em_op_begin("matmul", a);
    em_tensor *y = em_empty_on(s, a->dtype, a->device);
    em_tensor *ae = batch_expand(a, &bs), *be = batch_expand(b, &bs);
    if (!y || !ae || !be || gemm_call(fn, y, ae, false, be, false, 1.0, 0.0) != EM_OK)
        return em_scope_return(NULL);
    em_tensor *in[2] = {(em_tensor *)a, (em_tensor *)b};
    em_node *node;
    if (!em_record(y, "matmul", mm_backward, in, 2, NULL, 0, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain(in[0]);
        node->saved[1] = em_retain(in[1]);
    }
    return em_scope_return(y);
}

/* op under autocast's low-precision policy: a and b cast to the region's dtype first */
static em_tensor *autocast_pair(em_tensor *(*op)(const em_tensor *, const em_tensor *),
                                const em_tensor *a /* (*) */, const em_tensor *b /* (*) */)
{
    em_scope_begin();
    const em_tensor *t[2] = {a, b};
    return em_scope_return(em_autocast_inputs(EM_AUTOCAST_LOW, t, 2) ? op(t[0], t[1]) : NULL);
}

em_tensor *em_matmul(const em_tensor *a /* (m, k), (k) or (batch.., m, k) */,
                     const em_tensor *b /* (k, n), (k) or (batch.., k, n) */)
{
    const char *fn = "em_matmul";
    if (!em_present(a, "em_matmul", "a") || !em_present(b, "em_matmul", "b"))
        return NULL;
    if (em_autocast_needed(EM_AUTOCAST_LOW, (const em_tensor *[]){a, b}, 2))
        return autocast_pair(em_matmul, a, b);
    if (!em_check_pair(fn, a, b))
        return NULL;
    char sa[128], sb[128];
    if (a->ndim == 0 || b->ndim == 0) {
        em_set_error(EM_ERR_ARG, "%s: both arguments need at least one dim: %s x %s", fn,
                     em_shape_str(a, sa, sizeof sa), em_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
    if (ka != kb) {
        em_set_error(EM_ERR_ARG, "%s: inner dimensions differ: %s x %s", fn,
                     em_shape_str(a, sa, sizeof sa), em_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    em_scope_begin();
    const em_tensor *a2 = a->ndim == 1 ? em_unsqueeze(a, 0) : a;
    const em_tensor *b2 = b->ndim == 1 ? em_unsqueeze(b, -1) : b;
    em_tensor *y = mm(fn, a2, b2);
    if (y && a->ndim == 1)
        y = em_squeeze(y, -2);
    if (y && b->ndim == 1)
        y = em_squeeze(y, -1);
    return em_scope_return(y);
}

em_tensor *em_bmm(const em_tensor *a /* (B, M, K) */, const em_tensor *b /* (B, K, N) */)
{
    const char *fn = "em_bmm";
    if (!em_present(a, "em_bmm", "a") || !em_present(b, "em_bmm", "b"))
        return NULL;
    if (em_autocast_needed(EM_AUTOCAST_LOW, (const em_tensor *[]){a, b}, 2))
        return autocast_pair(em_bmm, a, b);
    if (!em_check_pair(fn, a, b))
        return NULL;
    if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1]) {
        char sa[128], sb[128];
        em_set_error(EM_ERR_ARG, "%s: expected (B,M,K) x (B,K,N), got %s x %s", fn,
                     em_shape_str(a, sa, sizeof sa), em_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    return mm(fn, a, b);
}

/* ---- linear: y (*, out) = x (*, in) @ w^T (in, out) + b (out) ---- */

/* x as a 2-D (rows, in) tensor: an alias when its rows can be flattened, else a copy. */
static em_tensor *rows_of(const em_tensor *x /* (*, in) */)
{
    int64_t in = x->shape[x->ndim - 1], rows = in ? em_numel(x) / in : 0;
    if (x->ndim == 2)
        return em_alias_of(x);
    const em_tensor *c = em_is_contiguous(x) ? x : em_tensor_contiguous_raw(x);
    if (!c)
        return NULL;
    int64_t shape[2] = {rows, in}, strides[2] = {in, 1};
    return em_tensor_alias(c, 2, shape, strides, c->offset);
}

/* y = max(y, 0) over its own elements (a fresh contiguous output), in place as the backend's
 * elementwise kernels allow (em_grad_accumulate adds in place the same way). */
static em_status relu_in_place(const char *fn, em_tensor *y /* (*) */)
{
    const em_backend *be = em_tensor_backend(y, fn);
    if (!be || !em_kernel_present((const void *)be->unary, fn, y))
        return em_error_status();
    em_arr a = em_tensor_arr(y);
    return em_kernel_status(be->unary(EM_UNARY_RELU, &(em_unary_params){0}, &a, &a), fn, y);
}

/* y2 (rows, out) = x2 (rows, in) @ w^T + b: the backend's Linear kernel where it has one for
 * these operands (rows with unit stride, b of y2's dtype), else b copied into y2 and a gemm
 * adding onto it. */
static em_status linear_product(const char *fn, em_tensor *y2, const em_tensor *x2,
                                const em_tensor *w, const em_tensor *b)
{
    const em_backend *be = em_tensor_backend(y2, fn);
    if (!be)
        return em_error_status();
    if (be->linear && x2->strides[1] == 1 && w->strides[1] == 1 &&
        (!b || (b->dtype == y2->dtype && (b->shape[0] < 2 || b->strides[0] == 1)))) {
        int rc = be->linear(y2->dtype, y2->shape[0], y2->shape[1], x2->shape[1], em_data_ptr(x2),
                            x2->strides[0], em_data_ptr(w), w->strides[0],
                            b ? em_data_ptr(b) : NULL, em_data_ptr(y2), y2->strides[0]);
        if (rc != EM_KERNEL_UNSUPPORTED)
            return em_kernel_status(rc, fn, y2);
    }
    if (b && em_raw_copy_into(fn, y2, b) != EM_OK)
        return em_error_status();
    return gemm_call(fn, y2, x2, false, w, true, 1.0, b ? 1.0 : 0.0);
}

/* What a Linear's backward computes besides gx: gw (out, in) = g2^T @ x2 where wanted, and
 * gb (out) = g2's column sums where wanted, both in dtype param_dt (g2's dtype, or f32 for f32
 * parameters under autocast). */
typedef struct {
    bool want_gw, want_gb;
    em_dtype param_dt;
    em_tensor *gw, *gb; /* out: NULL where not wanted, or gb where the caller must sum g2 */
} linear_param_grads;

/* gx (rows, in) = g2 (rows, out) @ w (out, in) where gx is not NULL, and p's gw and gb: in one
 * call of the backend's Linear gradient kernel where it takes these operands, else by gemm (gw
 * in g2's dtype, then cast) with p->gb NULL (the caller sums g2's columns). */
static em_status linear_grads(const char *fn, em_tensor *gx, const em_tensor *g2,
                              const em_tensor *w, const em_tensor *x2, linear_param_grads *p)
{
    const em_tensor *any = gx ? gx : g2;
    const em_backend *be = em_tensor_backend(any, fn);
    if (!be)
        return em_error_status();
    em_shape ws = em_shape_of(w), bs = {.ndim = 1, .d = {w->shape[0]}};
    if (p->want_gw && !(p->gw = em_empty_on(ws, p->param_dt, g2->device)))
        return em_error_status();
    if (be->linear_grad && g2->strides[1] == 1 && w->strides[1] == 1 &&
        (!p->gw || x2->strides[1] == 1)) {
        em_tensor *sums = NULL;
        if (p->want_gb && !(sums = em_empty_on(bs, p->param_dt, g2->device)))
            return em_error_status();
        em_linear_grads a = {
            .m = g2->shape[0], .n = w->shape[1], .k = g2->shape[1],
            .g = em_data_ptr(g2), .w = em_data_ptr(w), .x = p->gw ? em_data_ptr(x2) : NULL,
            .ldg = g2->strides[0], .ldw = w->strides[0], .ldx = p->gw ? x2->strides[0] : 0,
            .gx = gx ? em_data_ptr(gx) : NULL, .gb = sums ? em_data_ptr(sums) : NULL,
            .gw = p->gw ? em_data_ptr(p->gw) : NULL,
            .ldgx = gx ? gx->strides[0] : 0, .ldgw = p->gw ? p->gw->strides[0] : 0,
            .param_dt = p->param_dt};
        int rc = be->linear_grad(g2->dtype, &a);
        if (rc != EM_KERNEL_UNSUPPORTED) {
            p->gb = rc == EM_KERNEL_OK ? sums : NULL;
            return em_kernel_status(rc, fn, any);
        }
    }
    if (gx && gemm_call(fn, gx, g2, false, w, false, 1.0, 0.0) != EM_OK)
        return em_error_status();
    if (!p->gw)
        return EM_OK;
    em_tensor *gw = p->param_dt == g2->dtype ? p->gw : em_empty_on(ws, g2->dtype, g2->device);
    if (!gw || gemm_call(fn, gw, g2, true, x2, false, 1.0, 0.0) != EM_OK)
        return em_error_status();
    if (gw != p->gw && em_raw_copy_into(fn, p->gw, gw) != EM_OK)
        return em_error_status();
    return EM_OK;
}

/* saved: x as (rows, in) and w, both in the product's dtype (under autocast the low copies the
 * forward multiplied). gx comes back in x's dtype; gw and gb are computed in the parameters' own
 * dtype where the backend can (f32 parameters under autocast: no low gradient to widen). */
static em_status linear_backward(em_node *node, const em_tensor *g /* (*, out) */,
                                 em_tensor **grad_in)
{
    const char *fn = "em_backward";
    em_tensor *g2 = rows_of(g);
    const em_tensor *x2 = g2 ? em_as_dtype_raw(node->saved[0], g->dtype) : NULL;
    const em_tensor *w = x2 ? em_as_dtype_raw(node->saved[1], g->dtype) : NULL;
    if (!w)
        return em_error_status();
    const em_tensor *in_w = node->inputs[1], *in_b = node->inputs[2];
    /* the parameters' dtype, where they share one the backend may write */
    em_dtype pdt = in_w ? in_w->dtype : in_b ? in_b->dtype : g->dtype;
    if ((in_w && in_w->dtype != pdt) || (in_b && in_b->dtype != pdt) ||
        (pdt != EM_F32 && pdt != g->dtype))
        pdt = g->dtype;
    linear_param_grads p = {.want_gw = in_w != NULL, .want_gb = in_b != NULL, .param_dt = pdt};
    em_tensor *gx = NULL; /* (rows, in) */
    if (node->inputs[0] && !(gx = em_empty_on((em_shape){.ndim = 2, .d = {x2->shape[0],
                                                                         x2->shape[1]}},
                                              g->dtype, g->device)))
        return em_error_status();
    if (linear_grads(fn, gx, g2, w, x2, &p) != EM_OK)
        return em_error_status();
    if (gx) {
        em_tensor *gx_in = em_reshape(gx, em_shape_of(node->inputs[0]));
        if (!(grad_in[0] = (em_tensor *)em_as_dtype_raw(gx_in, node->inputs[0]->dtype)))
            return em_error_status();
    }
    if (in_w && !(grad_in[1] = (em_tensor *)em_as_dtype_raw(p.gw, in_w->dtype)))
        return em_error_status();
    if (in_b && !p.gb) {
        em_tensor *sums = em_raw_reduce(fn, EM_REDUCE_SUM, (em_reduce_params){0}, g2, 1u);
        int64_t n = w->shape[0], one = 1;
        if (!sums || !(p.gb = em_tensor_alias(sums, 1, &n, &one, sums->offset)))
            return em_error_status();
    }
    if (in_b && !(grad_in[2] = (em_tensor *)em_as_dtype_raw(p.gb, in_b->dtype)))
        return em_error_status();
    return EM_OK;
}

/* saved: as linear's, then a detached alias of the output y. ReLU's rule reads its input x
 * (g where x > 0); y > 0 exactly where x > 0, so y stands in for x. */
static em_status linear_relu_backward(em_node *node, const em_tensor *g /* (*, out) */,
                                      em_tensor **grad_in)
{
    const em_tensor *y = node->saved[2];
    const em_backend *be = em_tensor_backend(y, node->op);
    if (!be || !em_kernel_present((const void *)be->unary_grad, node->op, y))
        return em_error_status();
    em_tensor *gm = em_empty_on(em_shape_of(y), y->dtype, y->device);
    if (!gm)
        return em_error_status();
    em_arr agm = em_tensor_arr(gm), ag = em_tensor_arr(g), ay = em_tensor_arr(y);
    em_status st = em_kernel_status(
        be->unary_grad(EM_UNARY_RELU, &(em_unary_params){0}, &agm, &ag, &ay, &ay), node->op, y);
    return st == EM_OK ? linear_backward(node, gm, grad_in) : st;
}

/* Under autocast (dt its low dtype): each of x, w, b is in dt, or an f32 the op casts itself. */
static bool autocast_operands(const char *fn, const em_tensor *x /* (*, in) */,
                              const em_tensor *w /* (out, in) */,
                              const em_tensor *b /* (out) or NULL */, em_dtype dt)
{
    const em_tensor *t[3] = {x, w, b};
    bool ok = true;
    for (int i = 0; i < 3; i++)
        ok = ok && (!t[i] || ((t[i]->dtype == dt || t[i]->dtype == EM_F32) &&
                              t[i]->device == x->device));
    if (!ok)
        em_set_error(EM_ERR_ARG, "%s: under %s autocast x, w and b must be f32 or %s on one "
                     "device: %s, %s, %s", fn, em_dtype_name(dt), em_dtype_name(dt),
                     em_dtype_name(x->dtype), em_dtype_name(w->dtype),
                     b ? em_dtype_name(b->dtype) : "none");
    return ok;
}

/* The product in dtype dt, then the ReLU in place when relu; under autocast x, w and b may be
 * f32 leaves, cast here. */
static em_tensor *linear(const char *fn, const em_tensor *x /* (*, in) */,
                         const em_tensor *w /* (out, in) */,
                         const em_tensor *b /* (out) or NULL */, em_dtype dt, bool autocast,
                         bool relu)
{
    if (autocast ? !autocast_operands(fn, x, w, b, dt)
                 : !em_check_pair(fn, x, w) || (b && !em_check_pair(fn, x, b)))
        return NULL;
    char sx[128], sw[128], sb[128];
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        em_set_error(EM_ERR_ARG, "%s: expected x (*, in), w (out, in), b (out): %s, %s, %s", fn,
                     em_shape_str(x, sx, sizeof sx), em_shape_str(w, sw, sizeof sw),
                     b ? em_shape_str(b, sb, sizeof sb) : "none");
        return NULL;
    }
    const char *op = relu ? "linear_relu" : "linear";
    em_scope_begin();
    em_op_begin(op, x);
    em_tensor *x2 = rows_of(x);
    const em_tensor *xc = x2 ? em_autocast_weight(x2, dt) : NULL, *wc = em_autocast_weight(w, dt);
    const em_tensor *bc = b ? em_autocast_weight(b, dt) : NULL;
    em_shape s = em_shape_of(x);
    s.d[s.ndim - 1] = w->shape[0];
    em_tensor *y = em_empty_on(s, dt, x->device);
    if (!xc || !wc || (b && !bc) || !y)
        return em_scope_return(NULL);
    int64_t shape[2] = {x2->shape[0], w->shape[0]}, strides[2] = {w->shape[0], 1};
    em_tensor *y2 = em_tensor_alias(y, 2, shape, strides, y->offset);
    if (!y2 || linear_product(fn, y2, xc, wc, bc) != EM_OK ||
        (relu && relu_in_place(fn, y) != EM_OK))
        return em_scope_return(NULL);
    em_tensor *in[3] = {(em_tensor *)x, (em_tensor *)w, (em_tensor *)b};
    em_node *node;
    if (!em_record(y, op, relu ? linear_relu_backward : linear_backward, in, 3, NULL, 0, &node))
        return em_scope_return(NULL);
    if (node) {
        node->saved[0] = em_retain((em_tensor *)xc);
        node->saved[1] = em_retain((em_tensor *)wc);
        if (relu && !(node->saved[2] = em_retain(em_alias_of(y))))
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

static em_tensor *linear_op(const char *fn, const em_tensor *x /* (*, in) */,
                            const em_tensor *w /* (out, in) */,
                            const em_tensor *b /* (out) or NULL */, bool relu)
{
    if (!em_present(x, fn, "x") || !em_present(w, fn, "w"))
        return NULL;
    if (em_autocast_needed(EM_AUTOCAST_LOW, (const em_tensor *[]){x, w, b}, 3)) {
        em_scope_begin();
        const em_tensor *t[3] = {x, w, b};
        bool ok = em_autocast_layer_inputs(t, 3);
        return em_scope_return(ok ? linear(fn, t[0], t[1], t[2], em_autocast_dtype(), true, relu)
                                  : NULL);
    }
    return linear(fn, x, w, b, x->dtype, false, relu);
}

em_tensor *em_linear(const em_tensor *x /* (*, in) */, const em_tensor *w /* (out, in) */,
                     const em_tensor *b /* (out) or NULL */)
{
    return linear_op("em_linear", x, w, b, false);
}

em_tensor *em_linear_relu(const em_tensor *x /* (*, in) */, const em_tensor *w /* (out, in) */,
                          const em_tensor *b /* (out) or NULL */)
{
    return linear_op("em_linear_relu", x, w, b, true);
}
