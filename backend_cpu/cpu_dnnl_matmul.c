/* oneDNN matmul primitives for ember's row-major products: transposes and row strides as
 * memory strides (no copy), a batch with its strides (0: one matrix for every product), the
 * bias, alpha as an output scale and beta 1 as the sum post-op; and constant right-hand operands
 * packed once into the layout the primitive chooses (quantized weights). */
#include <string.h>

#include "backend_cpu/cpu_dnnl_internal.h"

/* The key's words: dtypes, transposes, sizes, strides, alpha and beta (as their bits). */
enum {
    W_A_DT, W_B_DT, W_C_DT, W_BIAS_DT, W_TA, W_TB, W_M, W_N, W_K, W_BATCH,
    W_LDA, W_LDB, W_LDC, W_SA, W_SB, W_SC, W_ALPHA, W_BETA, W_B_PACKED
};

/* The rows a packed operand's layout is chosen for; products of any other number of rows take
 * it where their primitive chooses the same layout (oneDNN's brgemm matmul does for any). */
#define PACK_ROWS 64

static int64_t float_bits(float v)
{
    int32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

static float bits_float(int64_t w)
{
    int32_t bits = (int32_t)w;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* bias_dt EM_NDTYPES: no bias */
static em_dnnl_key matmul_key(const em_dnnl_matmul_desc *d, em_dtype bias_dt)
{
    em_dnnl_key k;
    memset(&k, 0, sizeof k);
    k.kind = EM_DNNL_MATMUL;
    const int64_t w[] = {
        [W_A_DT] = d->a_dt, [W_B_DT] = d->b_dt, [W_C_DT] = d->c_dt, [W_BIAS_DT] = bias_dt,
        [W_TA] = d->ta, [W_TB] = d->tb, [W_M] = d->m, [W_N] = d->n, [W_K] = d->k,
        [W_BATCH] = d->batch, [W_LDA] = d->lda, [W_LDB] = d->ldb, [W_LDC] = d->ldc,
        [W_SA] = d->sa, [W_SB] = d->sb, [W_SC] = d->sc, [W_ALPHA] = float_bits(d->alpha),
        [W_BETA] = float_bits(d->beta), [W_B_PACKED] = d->b_packed};
    memcpy(k.w, w, sizeof w);
    return k;
}

/* A (rows, cols) matrix with row stride ld, stored transposed ((cols, rows), ld apart) when
 * trans, as a 2-D descriptor, or 3-D with `batch` matrices `stride` apart (stride 0: one). */
static dnnl_status_t matrix_md(dnnl_memory_desc_t *md, int64_t w_dt, int64_t batch,
                               int64_t stride, int64_t rows, int64_t cols, int64_t ld,
                               bool trans)
{
    const dnnl_data_type_t dt = em_dnnl_dtype((em_dtype)w_dt);
    const int64_t rs = trans ? 1 : ld, cs = trans ? ld : 1;
    if (batch == 1)
        return dnnl_memory_desc_init_by_strides(md, 2, (dnnl_dims_t){rows, cols}, dt,
                                                (dnnl_dims_t){rs, cs});
    const int64_t span = trans ? cols * ld : rows * ld; /* a broadcast matrix's own size */
    return dnnl_memory_desc_init_by_strides(md, 3, (dnnl_dims_t){stride ? batch : 1, rows, cols},
                                            dt, (dnnl_dims_t){stride ? stride : span, rs, cs});
}

static dnnl_status_t make_matmul(const em_dnnl_key *key, dnnl_engine_t engine,
                                 dnnl_primitive_desc_t *pd)
{
    const int64_t *w = key->w, batch = w[W_BATCH];
    dnnl_memory_desc_t a, b, c, bias;
    dnnl_status_t st = matrix_md(&a, w[W_A_DT], batch, w[W_SA], w[W_M], w[W_K], w[W_LDA],
                                 w[W_TA]);
    if (st == dnnl_success)
        st = w[W_B_PACKED] ? dnnl_memory_desc_init_by_tag(&b, 2, (dnnl_dims_t){w[W_K], w[W_N]},
                                                          em_dnnl_dtype((em_dtype)w[W_B_DT]),
                                                          dnnl_format_tag_any)
                           : matrix_md(&b, w[W_B_DT], batch, w[W_SB], w[W_K], w[W_N], w[W_LDB],
                                       w[W_TB]);
    if (st == dnnl_success)
        st = matrix_md(&c, w[W_C_DT], batch, w[W_SC], w[W_M], w[W_N], w[W_LDC], false);
    const bool has_bias = w[W_BIAS_DT] != EM_NDTYPES;
    if (st == dnnl_success && has_bias)
        st = matrix_md(&bias, w[W_BIAS_DT], batch, 0, 1, w[W_N], w[W_N], false);
    dnnl_matmul_desc_t md;
    if (st == dnnl_success)
        st = dnnl_matmul_desc_init(&md, &a, &b, has_bias ? &bias : NULL, &c);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    if (st == dnnl_success)
        st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    const float alpha = bits_float(w[W_ALPHA]), beta = bits_float(w[W_BETA]);
    if (st == dnnl_success && alpha != 1.0f)
        st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (st == dnnl_success && beta != 0.0f) {
        st = dnnl_post_ops_create(&ops);
        if (st == dnnl_success)
            st = dnnl_post_ops_append_sum(ops, beta);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(pd, &md, attr, engine, NULL);
    if (ops)
        dnnl_post_ops_destroy(ops);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

static bool desc_ok(const em_dnnl_matmul_desc *d)
{
    if (d->b_packed && (d->batch != 1 || d->a_dt != EM_U8))
        return false;
    const bool bf16 = d->a_dt == EM_BF16 && d->b_dt == EM_BF16 &&
                      (d->c_dt == EM_F32 || d->c_dt == EM_BF16);
    const bool f32 = d->a_dt == EM_F32 && d->b_dt == EM_F32 && d->c_dt == EM_F32;
    const bool int8 = d->a_dt == EM_U8 && d->b_dt == EM_I8 && d->c_dt == EM_I32 &&
                      d->alpha == 1.0f && d->beta == 0.0f;
    return (bf16 || f32 || int8) && d->m > 0 && d->n > 0 && d->k > 0 && d->batch > 0 &&
           (d->beta == 0.0f || d->beta == 1.0f) &&
           d->lda >= (d->ta ? d->m : d->k) && d->ldb >= (d->tb ? d->k : d->n) && d->ldc >= d->n;
}

/* The key of the product whose primitive chooses a packed operand's layout. */
static em_dnnl_key pack_key(const em_dnnl_matmul_desc *d)
{
    em_dnnl_matmul_desc p = *d;
    p.m = PACK_ROWS;
    p.lda = d->ta ? PACK_ROWS : d->k;
    p.ldc = d->n;
    return matmul_key(&p, EM_NDTYPES);
}

/* Whether the product (a primitive of ctx's) takes b packed as pack_key's primitive packed it. */
static bool takes_packed(const em_dnnl_ctx *c, const em_dnnl_matmul_desc *d,
                         const em_dnnl_prim *prim)
{
    em_dnnl_key key = pack_key(d);
    em_dnnl_prim *packer = em_dnnl_get(c, &key, make_matmul);
    bool same = em_dnnl_usable(packer) && dnnl_memory_desc_equal(
                                              em_dnnl_md(prim, DNNL_ARG_WEIGHTS),
                                              em_dnnl_md(packer, DNNL_ARG_WEIGHTS));
    em_dnnl_put(packer);
    return same;
}

int em_dnnl_matmul(const em_dnnl_matmul_desc *d, const void *a, const void *b, const void *bias,
                   void *c)
{
    if (!desc_ok(d))
        return EM_KERNEL_UNSUPPORTED;
    em_dnnl_key key = matmul_key(d, bias ? d->bias_dt : EM_NDTYPES);
    const em_dnnl_arg args[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c},
                                {DNNL_ARG_BIAS, bias}};
    em_dnnl_ctx ctx;
    if (!em_dnnl_begin(&ctx))
        return EM_KERNEL_FAILED;
    em_dnnl_prim *prim = em_dnnl_get(&ctx, &key, make_matmul);
    int rc = !prim ? EM_KERNEL_FAILED
             : !em_dnnl_usable(prim) || (d->b_packed && !takes_packed(&ctx, d, prim))
                 ? EM_KERNEL_UNSUPPORTED
                 : em_dnnl_exec(&ctx, prim, args, bias ? 4 : 3);
    em_dnnl_put(prim);
    em_dnnl_end(&ctx);
    return rc;
}

/* The reorder of a plain right-hand operand (W_TB, W_LDB) into pack_key's chosen layout. */
static dnnl_status_t make_pack(const em_dnnl_key *key, dnnl_engine_t engine,
                               dnnl_primitive_desc_t *pd)
{
    em_dnnl_key mk = *key;
    mk.kind = EM_DNNL_MATMUL;
    dnnl_primitive_desc_t mm = NULL;
    dnnl_memory_desc_t plain;
    const int64_t *w = key->w;
    dnnl_status_t st = make_matmul(&mk, engine, &mm);
    if (st == dnnl_success)
        st = matrix_md(&plain, w[W_B_DT], 1, 0, w[W_K], w[W_N], w[W_LDB], w[W_TB]);
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(
            pd, &plain, engine, dnnl_primitive_desc_query_md(mm, dnnl_query_weights_md, 0),
            engine, NULL);
    if (mm)
        dnnl_primitive_desc_destroy(mm);
    return st;
}

int64_t em_dnnl_matmul_packed_size(const em_dnnl_matmul_desc *d)
{
    em_dnnl_ctx ctx;
    em_dnnl_key key = pack_key(d);
    if (!d->b_packed || !desc_ok(d) || !em_dnnl_begin(&ctx))
        return 0;
    em_dnnl_prim *prim = em_dnnl_get(&ctx, &key, make_matmul);
    int64_t size = em_dnnl_usable(prim) ? (int64_t)dnnl_memory_desc_get_size(
                                              em_dnnl_md(prim, DNNL_ARG_WEIGHTS))
                                        : 0;
    em_dnnl_put(prim);
    em_dnnl_end(&ctx);
    return size;
}

int em_dnnl_matmul_pack(const em_dnnl_matmul_desc *d, const void *b, void *packed)
{
    em_dnnl_key key = pack_key(d);
    key.kind = EM_DNNL_REORDER;
    const em_dnnl_arg args[] = {{DNNL_ARG_FROM, b}, {DNNL_ARG_TO, packed}};
    return d->b_packed && desc_ok(d) ? em_dnnl_run(&key, make_pack, args, 2)
                                     : EM_KERNEL_UNSUPPORTED;
}

bool em_dnnl_matmul_impl(const em_dnnl_matmul_desc *d, char *buf, size_t n)
{
    if (!desc_ok(d))
        return false;
    em_dnnl_key key = matmul_key(d, EM_NDTYPES);
    return em_dnnl_impl(&key, make_matmul, buf, n);
}
