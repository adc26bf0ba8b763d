/* Scaled dot-product attention as one op (PyTorch's scaled_dot_product_attention): the backend's
 * fused kernel computes softmax(q k^T * scale + mask) v tile by tile and keeps each row's
 * log-sum-exp; backward recomputes the weights from it, so neither pass holds the (Lq, Lk)
 * matrix. Outputs and gradients are stored heads-inner, (B, L, H, D) seen as (B, H, L, D), so
 * that merging heads back is a view. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"

static const char fn_name[] = "em_scaled_dot_product_attention";

/* The node's parameters; it saves q, k, v and the output in saved[0..3]. */
typedef struct {
    em_attention_params kernel;
    em_tensor *lse;  /* (B, H, Lq) retained */
    em_tensor *mask; /* retained, or NULL */
} sdpa_params;

static void sdpa_params_release(void *p)
{
    sdpa_params *s = p;
    em_release(s->lse);
    em_release(s->mask);
    s->lse = s->mask = NULL;
}

/* A new (B, H, L, X) tensor stored as (B, L, H, X). */
static em_tensor *heads_inner(const em_tensor *like, int64_t l, int64_t x, em_dtype dt)
{
    int64_t b = like->shape[0], h = like->shape[1];
    em_tensor *s = em_empty_on(EM_SHAPE(b, l, h, x), dt, like->device);
    if (!s)
        return NULL;
    int64_t shape[4] = {b, h, l, x}, strides[4] = {l * h * x, x, h * x, 1};
    em_tensor *t = em_tensor_alias(s, 4, shape, strides, 0);
    em_release(s);
    return t;
}

/* t itself when its last dim is contiguous, else a contiguous copy (a temporary of the scope). */
static const em_tensor *rows_contiguous(const em_tensor *t)
{
    return t->shape[3] <= 1 || t->strides[3] == 1 ? t : em_tensor_contiguous_raw(t);
}

/* mask broadcast to (B, H, Lq, Lk) for the kernel */
static em_arr mask_arr(const em_tensor *mask, const em_tensor *q, const em_tensor *k)
{
    em_shape full = EM_SHAPE(q->shape[0], q->shape[1], q->shape[2], k->shape[2]);
    return em_tensor_arr_broadcast(mask, &full);
}

/* The gradient buffers backward writes: new heads-inner gq, gk, gv; or, for the packed op (one
 * input, qkv), one tensor of qkv's shape with gq, gk and gv as its windows where q, k and v lie
 * in qkv (the kernel overwrites every element). */
static bool grad_buffers(const em_node *node, const em_tensor *const qkv_views[3],
                         em_tensor *grads[3], em_tensor **packed)
{
    if (node->n_inputs == 1) {
        const em_tensor *qkv = node->inputs[0];
        *packed = em_empty_on(em_shape_of(qkv), qkv->dtype, qkv->device);
        for (int i = 0; *packed && i < 3; i++) {
            const em_tensor *v = qkv_views[i];
            grads[i] = em_tensor_alias(*packed, 4, v->shape, v->strides, v->offset - qkv->offset);
        }
    } else {
        for (int i = 0; i < 3; i++) {
            const em_tensor *v = qkv_views[i];
            grads[i] = heads_inner(v, v->shape[2], v->shape[3], v->dtype);
        }
    }
    return grads[0] && grads[1] && grads[2];
}

/* saved: q, k, v, out */
static em_status sdpa_backward(em_node *node, const em_tensor *g, em_tensor **grad_in)
{
    const em_tensor *q = node->saved[0], *k = node->saved[1], *v = node->saved[2];
    const em_tensor *out = node->saved[3];
    const sdpa_params *s = node->params;
    const em_backend *be = em_tensor_backend(q, node->op);
    if (!be || !em_kernel_present((const void *)be->attention_grad, node->op, q))
        return em_error_status();
    const em_tensor *gc = rows_contiguous(g);
    em_tensor *grads[3] = {NULL, NULL, NULL}, *packed = NULL;
    bool ok = gc && grad_buffers(node, (const em_tensor *[]){q, k, v}, grads, &packed);
    em_status st = ok ? EM_OK : em_error_status();
    if (ok) {
        em_arr aq = em_tensor_arr(q), ak = em_tensor_arr(k), av = em_tensor_arr(v);
        em_arr ao = em_tensor_arr(out), al = em_tensor_arr(s->lse), ag = em_tensor_arr(gc);
        em_arr agq = em_tensor_arr(grads[0]), agk = em_tensor_arr(grads[1]);
        em_arr agv = em_tensor_arr(grads[2]);
        em_arr am = s->mask ? mask_arr(s->mask, q, k) : (em_arr){0};
        int rc = be->attention_grad(&s->kernel, &aq, &ak, &av, s->mask ? &am : NULL, &ao, &al,
                                    &ag, &agq, &agk, &agv);
        st = em_kernel_status(rc, node->op, q);
    }
    if (st == EM_OK && packed) {
        grad_in[0] = packed;
        packed = NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (st == EM_OK && node->n_inputs == 3 && node->inputs[i])
            grad_in[i] = grads[i];
        else
            em_release(grads[i]);
    }
    em_release(packed);
    return st;
}

/* false with an error naming what does not fit */
static bool check_qkv(const em_tensor *q, const em_tensor *k, const em_tensor *v)
{
    char bq[96], bk[96], bv[96];
    em_shape_str(q, bq, sizeof bq);
    em_shape_str(k, bk, sizeof bk);
    em_shape_str(v, bv, sizeof bv);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || q->shape[0] != k->shape[0] ||
        q->shape[0] != v->shape[0] || q->shape[1] != k->shape[1] || q->shape[1] != v->shape[1] ||
        q->shape[3] != k->shape[3] || k->shape[2] != v->shape[2]) {
        em_set_error(EM_ERR_ARG, "%s: q, k, v must be (B, H, Lq, D), (B, H, Lk, D) and "
                     "(B, H, Lk, Dv): %s, %s, %s", fn_name, bq, bk, bv);
        return false;
    }
    if (!em_dtype_is_float(q->dtype) || q->dtype != k->dtype || q->dtype != v->dtype) {
        em_set_error(EM_ERR_ARG, "%s: q, k, v need one floating dtype: %s, %s, %s", fn_name,
                     em_dtype_name(q->dtype), em_dtype_name(k->dtype), em_dtype_name(v->dtype));
        return false;
    }
    if (q->device != k->device || q->device != v->device) {
        em_set_error(EM_ERR_ARG, "%s: q, k, v on different devices: %s, %s, %s", fn_name,
                     em_device_name(q->device), em_device_name(k->device),
                     em_device_name(v->device));
        return false;
    }
    return true;
}

static bool check_opts(const em_tensor *q, const em_tensor *k, const em_sdpa_opts *o)
{
    if (!(o->dropout_p >= 0 && o->dropout_p < 1) || !isfinite(o->scale)) {
        em_set_error(EM_ERR_ARG, "%s: need dropout_p in [0, 1) and a finite scale: %g, %g",
                     fn_name, o->dropout_p, o->scale);
        return false;
    }
    const em_tensor *m = o->attn_mask;
    if (!m)
        return true;
    char bm[96], bq[96], bk[96];
    em_shape sm = em_shape_of(m), want = EM_SHAPE(q->shape[0], q->shape[1], q->shape[2],
                                                  k->shape[2]), got;
    if (o->is_causal) {
        em_set_error(EM_ERR_ARG, "%s: give attn_mask or is_causal, not both", fn_name);
        return false;
    }
    if (m->dtype != EM_BOOL && !em_dtype_is_float(m->dtype)) {
        em_set_error(EM_ERR_ARG, "%s: attn_mask must be bool or floating, not %s", fn_name,
                     em_dtype_name(m->dtype));
        return false;
    }
    if (m->device != q->device) {
        em_set_error(EM_ERR_ARG, "%s: attn_mask is on %s, q on %s", fn_name,
                     em_device_name(m->device), em_device_name(q->device));
        return false;
    }
    if (m->ndim > 4 || !em_broadcast_shapes(&sm, &want, &got) || em_shape_numel(&got) !=
        em_shape_numel(&want) || got.ndim != 4) {
        em_set_error(EM_ERR_ARG, "%s: attn_mask %s does not broadcast to (B, H, Lq, Lk) of "
                     "q %s and k %s", fn_name, em_shape_str(m, bm, sizeof bm),
                     em_shape_str(q, bq, sizeof bq), em_shape_str(k, bk, sizeof bk));
        return false;
    }
    return true;
}

/* Whether o's mask takes a gradient (a float mask that requires grad, grad mode on): the fused
 * kernel gives it none, so the composition runs instead, as PyTorch's math path does. */
static bool mask_takes_grad(const em_sdpa_opts *o)
{
    return o->attn_mask && o->attn_mask->requires_grad && em_grad_enabled();
}

/* dropout(softmax(q k^T scale + mask)) v composed of ops, so every input, the mask included,
 * gets its gradient (the mask's summed over its broadcast dims); the (Lq, Lk) weights are held.
 * A row that sees no key gives zeros, as the fused kernel's. Dropout draws its own mask from
 * o->gen (not the fused kernel's). -> (B, H, Lq, Dv) */
static em_tensor *sdpa_composed(const em_tensor *q /* (B, H, Lq, D) */,
                                const em_tensor *k /* (B, H, Lk, D) */,
                                const em_tensor *v /* (B, H, Lk, Dv) */, const em_sdpa_opts *o)
{
    em_scope_begin();
    double scale = o->scale != 0 ? o->scale
                                 : 1.0 / sqrt((double)(q->shape[3] > 0 ? q->shape[3] : 1));
    em_tensor *mask = em_to_dtype(o->attn_mask, q->dtype);
    em_tensor *s = em_add(em_mul_scalar(em_matmul(q, em_transpose(k, 2, 3)), scale), mask);
    em_tensor *zero = em_scalar(0, q->dtype);
    em_tensor *seen = em_gt(em_amax(s, (int[]){3}, 1, true), em_scalar(-INFINITY, q->dtype));
    em_tensor *p = em_where(seen, em_softmax(em_where(seen, s, zero), 3), zero); // (B,H,Lq,Lk)
    if (p && o->dropout_p > 0) {
        em_tensor *keep = em_empty_on(em_shape_of(p), p->dtype, p->device);
        if (!keep || em_bernoulli_(keep, 1 - o->dropout_p, o->gen) != EM_OK)
            return em_scope_return(NULL);
        p = em_mul(p, em_mul_scalar(keep, 1 / (1 - o->dropout_p)));
    }
    return em_scope_return(em_matmul(p, v));
}

/* The forward on checked operands; the node's inputs are in[0..n) (q, k, v, or the packed qkv
 * they are views of). */
static em_tensor *sdpa_run(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                           const em_sdpa_opts *o, em_tensor *const *in, int n)
{
    const em_backend *be = em_tensor_backend(q, fn_name);
    if (!be || !em_kernel_present((const void *)be->attention, fn_name, q))
        return NULL;
    int64_t b = q->shape[0], h = q->shape[1], lq = q->shape[2], lk = k->shape[2];
    em_attention_params params = {
        .scale = o->scale != 0 ? o->scale
                               : 1.0 / sqrt((double)(q->shape[3] > 0 ? q->shape[3] : 1)),
        .causal = o->is_causal, .dropout_p = o->dropout_p};
    if (o->dropout_p > 0) {
        em_generator *gen = o->gen ? o->gen : em_default_generator();
        params.seed = __atomic_load_n(&gen->seed, __ATOMIC_RELAXED);
        params.offset = em_generator_advance(gen, ((uint64_t)(b * h * lq * lk) + 3) / 4);
    }
    em_scope_begin();
    em_op_begin("scaled_dot_product_attention", q);
    const em_tensor *qc = rows_contiguous(q), *kc = rows_contiguous(k), *vc = rows_contiguous(v);
    em_dtype lse_dt = q->dtype == EM_F64 ? EM_F64 : EM_F32;
    em_tensor *y = heads_inner(q, lq, v->shape[3], q->dtype);
    em_tensor *lse = em_empty_on(EM_SHAPE(b, h, lq), lse_dt, q->device);
    if (!qc || !kc || !vc || !y || !lse)
        return em_scope_return(NULL);
    em_arr aq = em_tensor_arr(qc), ak = em_tensor_arr(kc), av = em_tensor_arr(vc);
    em_arr ay = em_tensor_arr(y), al = em_tensor_arr(lse);
    em_arr am = o->attn_mask ? mask_arr(o->attn_mask, q, k) : (em_arr){0};
    int rc = be->attention(&params, &aq, &ak, &av, o->attn_mask ? &am : NULL, &ay, &al);
    if (em_kernel_status(rc, fn_name, q) != EM_OK)
        return em_scope_return(NULL);
    sdpa_params np = {.kernel = params, .lse = lse, .mask = (em_tensor *)o->attn_mask};
    em_node *node;
    if (!em_record(y, "scaled_dot_product_attention", sdpa_backward, in, n, &np, sizeof np,
                   &node))
        return em_scope_return(NULL);
    if (node) {
        sdpa_params *kept = node->params;
        em_retain(kept->lse);
        if (kept->mask)
            em_retain(kept->mask);
        node->params_release = sdpa_params_release;
        node->saved[0] = em_retain((em_tensor *)qc);
        node->saved[1] = em_retain((em_tensor *)kc);
        node->saved[2] = em_retain((em_tensor *)vc);
        if (!(node->saved[3] = em_retain(em_alias_of(y))))
            return em_scope_return(NULL);
    }
    return em_scope_return(y);
}

em_tensor *em_scaled_dot_product_attention(const em_tensor *q, const em_tensor *k,
                                           const em_tensor *v, em_sdpa_opts o)
{
    if (!q || !k || !v)
        return NULL;
    if (em_autocast_needed(EM_AUTOCAST_LOW, (const em_tensor *[]){q, k, v}, 3)) {
        em_scope_begin();
        const em_tensor *t[3] = {q, k, v};
        bool ok = em_autocast_inputs(EM_AUTOCAST_LOW, t, 3);
        return em_scope_return(ok ? em_scaled_dot_product_attention(t[0], t[1], t[2], o) : NULL);
    }
    if (!check_qkv(q, k, v) || !check_opts(q, k, &o))
        return NULL;
    if (mask_takes_grad(&o))
        return sdpa_composed(q, k, v, &o);
    em_tensor *in[3] = {(em_tensor *)q, (em_tensor *)k, (em_tensor *)v};
    return sdpa_run(q, k, v, &o, in, 3);
}

em_tensor *em_self_attention_packed(const em_tensor *qkv, int64_t heads, em_sdpa_opts o)
{
    static const char *fn = "em_self_attention_packed";
    if (!em_present(qkv, fn, "qkv"))
        return NULL;
    if (qkv->ndim != 3 || !em_dtype_is_float(qkv->dtype) || heads <= 0 ||
        qkv->shape[2] % (3 * heads) != 0) {
        char b[96];
        em_set_error(EM_ERR_ARG, "%s: qkv must be floating (B, T, 3 E) with E a multiple of "
                     "%lld heads: %s %s", fn, (long long)heads, em_dtype_name(qkv->dtype),
                     em_shape_str(qkv, b, sizeof b));
        return NULL;
    }
    em_scope_begin();
    const em_tensor *packed = qkv;
    if (em_autocast_needed(EM_AUTOCAST_LOW, &packed, 1) &&
        !em_autocast_inputs(EM_AUTOCAST_LOW, &packed, 1))
        return em_scope_return(NULL);
    if (!em_is_contiguous(packed) && !(packed = em_tensor_contiguous_raw(packed)))
        return em_scope_return(NULL);
    /* q, k, v (B, H, T, D): the three E-wide column blocks of each row, heads D apart */
    int64_t b = packed->shape[0], t = packed->shape[1], e = packed->shape[2] / 3, d = e / heads;
    if (mask_takes_grad(&o)) { /* the composition, on views the graph knows */
        em_tensor *qkv_heads[3];
        for (int i = 0; i < 3; i++)
            qkv_heads[i] = em_permute(em_reshape(em_narrow(packed, 2, i * e, e),
                                                 EM_SHAPE(b, t, heads, d)), (int[]){0, 2, 1, 3});
        return em_scope_return(em_scaled_dot_product_attention(qkv_heads[0], qkv_heads[1],
                                                               qkv_heads[2], o));
    }
    int64_t shape[4] = {b, heads, t, d}, strides[4] = {t * 3 * e, d, 3 * e, 1};
    em_tensor *views[3];
    for (int i = 0; i < 3; i++)
        views[i] = em_tensor_alias(packed, 4, shape, strides, packed->offset + i * e);
    if (!views[0] || !views[1] || !views[2] || !check_opts(views[0], views[1], &o))
        return em_scope_return(NULL);
    em_tensor *in = (em_tensor *)packed;
    return em_scope_return(sdpa_run(views[0], views[1], views[2], &o, &in, 1));
}
