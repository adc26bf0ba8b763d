/* oneDNN, the CPU backend's engine for low-precision products: its matmul and convolution
 * primitives, created once per shape (cpu_dnnl.c keeps them in a small LRU cache) and run on
 * ember's OpenMP threads. Which engine runs a product of each dtype is chosen once, at run time
 * (em_cpu_engine_for). Private to backend_cpu/. */
#ifndef EMBER_CPU_DNNL_INTERNAL_H
#define EMBER_CPU_DNNL_INTERNAL_H

#include <oneapi/dnnl/dnnl.h>

#include "backend_cpu/cpu_kernels_internal.h"

/* ---- the engine of each kind of product ---- */

/* The kinds of products whose engine is chosen at run time. */
typedef enum {
    EM_CPU_PRODUCT_BF16, /* bf16 x bf16, f32 accumulation */
    EM_CPU_PRODUCT_INT8, /* u8 x s8, s32 accumulation */
    EM_CPU_PRODUCTS
} em_cpu_product;

/* What runs a product: ember's own kernels (OpenBLAS and its tiles, bf16 widened to f32) or
 * oneDNN's primitives, which take the dtype as it is on the CPU's instructions for it. */
typedef struct {
    bool dnnl;         /* oneDNN runs it */
    char isa[48];      /* what oneDNN chose ("avx512_core_bf16"), or why ember runs it */
} em_cpu_engine;

/* The engine of product kind p: oneDNN where the CPU has the instructions for its dtype (AMX,
 * else AVX512_BF16 / AVX-512 VNNI) and oneDNN took them (its implementation names that ISA),
 * else ember's kernels. Chosen on the first call; EMBER_DNNL=0 or EMBER_CPU_ISA=avx2 keep
 * every product on ember's kernels. */
const em_cpu_engine *em_cpu_engine_for(em_cpu_product p);

/* ---- primitives ---- */

/* The cache key of one primitive: what it computes, every size, stride and dtype, and the team
 * size it was created for (oneDNN fixes a primitive's thread count when it creates it). Zero the
 * whole struct before filling it: keys compare by their bytes. */
#define EM_DNNL_KEY_WORDS 28
typedef struct {
    int kind;    /* em_dnnl_kind */
    int threads; /* filled by em_dnnl_run */
    int64_t w[EM_DNNL_KEY_WORDS];
} em_dnnl_key;

typedef enum {
    EM_DNNL_MATMUL = 1,
    EM_DNNL_CONV_FORWARD,
    EM_DNNL_CONV_BACKWARD_DATA,
    EM_DNNL_CONV_BACKWARD_WEIGHTS,
    EM_DNNL_REORDER,
} em_dnnl_kind;

/* Makes the primitive descriptor of key (its own attr inside); dnnl's status. */
typedef dnnl_status_t (*em_dnnl_make_pd)(const em_dnnl_key *key, dnnl_engine_t engine,
                                         dnnl_primitive_desc_t *pd);

/* One argument of a run: which (DNNL_ARG_*) and where its data lies; its memory descriptor is
 * the primitive's own for that argument. */
typedef struct {
    int arg;
    const void *data;
} em_dnnl_arg;
#define EM_DNNL_MAX_ARGS 7

/* Runs the primitive of key (made by make on first use, then cached) on the calling thread's
 * stream with ember's team size, its scratchpad from ember's scratch memory. EM_KERNEL_OK;
 * EM_KERNEL_UNSUPPORTED where oneDNN has no implementation for key (remembered, so it is not
 * asked again); EM_KERNEL_FAILED when it failed to run or memory ran out. */
int em_dnnl_run(em_dnnl_key *key, em_dnnl_make_pd make, const em_dnnl_arg *args, int n_args);

/* The implementation oneDNN chose for key ("brg:avx512_core_bf16") into buf, creating the
 * primitive as em_dnnl_run would; false where there is none. */
bool em_dnnl_impl(em_dnnl_key *key, em_dnnl_make_pd make, char *buf, size_t n);

/* em_dnnl_run in steps, for work of several primitives (a convolution and the reorders of its
 * operands): begin sets the calling thread's OpenMP count to the governor's team (false when
 * oneDNN has no stream for the thread) and end sets the user's back; get takes key's cached
 * primitive (NULL when out of memory; em_dnnl_usable false where oneDNN has none), put gives it
 * back; md is its memory descriptor of an argument; exec runs it as em_dnnl_run does. */
typedef struct {
    dnnl_stream_t stream;
    int team, count;
} em_dnnl_ctx;
typedef struct em_dnnl_prim em_dnnl_prim;
bool em_dnnl_begin(em_dnnl_ctx *c);
void em_dnnl_end(const em_dnnl_ctx *c);
em_dnnl_prim *em_dnnl_get(const em_dnnl_ctx *c, em_dnnl_key *key, em_dnnl_make_pd make);
void em_dnnl_put(em_dnnl_prim *p);
bool em_dnnl_usable(const em_dnnl_prim *p);
const dnnl_memory_desc_t *em_dnnl_md(const em_dnnl_prim *p, int arg);
int em_dnnl_exec(const em_dnnl_ctx *c, const em_dnnl_prim *p, const em_dnnl_arg *args,
                 int n_args);

/* The cache: primitives created since the process started, and those held now (at most
 * EM_DNNL_CACHE_CAPACITY; the least recently used goes first). */
#define EM_DNNL_CACHE_CAPACITY 128
typedef struct {
    int64_t created, held, hits;
} em_dnnl_cache_stats;
em_dnnl_cache_stats em_dnnl_cache_get_stats(void);
void em_dnnl_cache_clear(void);

/* oneDNN's dtype of an ember dtype (bf16, f32, u8, s8, s32); dnnl_data_type_undef otherwise. */
dnnl_data_type_t em_dnnl_dtype(em_dtype dt);

/* ---- matrix products (cpu_dnnl_matmul.c) ---- */

/* C[b] = alpha * op(A[b]) @ op(B[b]) (+ bias) (+ beta * C[b]) for b < batch, row-major: op(A)
 * (m, k), op(B) (k, n), C (m, n), ld* row strides, s* batch strides (0: one matrix for every b);
 * the transposed operand is stored (k, m) or (n, k). Dtypes: a and b bf16 (c f32 or bf16), f32
 * (c f32), or a u8 and b s8 (c s32, alpha 1, beta 0); bias (n) of bias_dt, or NULL. beta is 0
 * or 1 (the sum post-op). With b_packed (u8 x s8, one matrix) b is in the layout
 * em_dnnl_matmul_pack wrote for the same desc (any m, lda, ldc), and a product whose primitive
 * would take another layout is EM_KERNEL_UNSUPPORTED. */
typedef struct {
    em_dtype a_dt, b_dt, c_dt, bias_dt;
    bool ta, tb;
    int64_t m, n, k, batch;
    int64_t lda, ldb, ldc, sa, sb, sc;
    float alpha, beta;
    bool b_packed;
} em_dnnl_matmul_desc;
int em_dnnl_matmul(const em_dnnl_matmul_desc *d, const void *a, const void *b, const void *bias,
                   void *c);
/* A b_packed desc's packed right-hand operand: its bytes (0 where oneDNN has no such product),
 * and packing it from b as the desc's tb and ldb describe it. */
int64_t em_dnnl_matmul_packed_size(const em_dnnl_matmul_desc *d);
int em_dnnl_matmul_pack(const em_dnnl_matmul_desc *d, const void *b, void *packed);
/* The implementation oneDNN chose for d into buf (em_dnnl_impl); false where there is none. */
bool em_dnnl_matmul_impl(const em_dnnl_matmul_desc *d, char *buf, size_t n);

/* ---- convolutions (cpu_dnnl_conv.c) ---- */

/* A 2-D convolution, its input gradient and its weight gradient (em_cpu_conv2d's contracts) in
 * f32 or bf16 (groups 1), whatever engine em_cpu_engine_for chose: the backend's entries below
 * call them where oneDNN runs the layer, the tests on every CPU. */
int em_dnnl_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                   const void *bias, void *y);
int em_dnnl_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                              const void *w, void *gx);
int em_dnnl_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                               const void *x, void *gw, void *gbias);
/* Both gradients (em_cpu_conv2d_grads' contract): gy reordered once where both primitives take
 * it in the same layout. */
int em_dnnl_conv2d_grads(const em_conv2d_shape *s, em_dtype dt, const void *gy, const void *x,
                         const void *w, void *gx, void *gw, void *gbias);

/* ---- the backend's entries on oneDNN (cpu_dnnl_products.c, cpu_dnnl_conv.c) ---- */

/* Whether products of dtype dt run on oneDNN (bf16 where em_cpu_engine_for chose it). */
bool em_cpu_dnnl_takes(em_dtype dt);
/* em_cpu_gemm, em_cpu_linear and em_cpu_linear_grad for the dtypes oneDNN takes (gemm's beta 0
 * or 1); EM_KERNEL_UNSUPPORTED for the others, which ember's kernels run. linear_grad writes gw
 * and gb in a->param_dt (dt or f32) and takes a->gx NULL (the weight's gradients alone). */
int em_cpu_dnnl_gemm(em_dtype dt, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                     int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                     int64_t stride_c, int64_t batch);
int em_cpu_dnnl_linear(em_dtype dt, int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx,
                       const void *w, int64_t ldw, const void *b, void *y, int64_t ldy);
int em_cpu_dnnl_linear_grad(em_dtype dt, const em_linear_grads *a);

/* em_cpu_conv2d and its gradients on oneDNN where it takes dt and the layer (groups 1, at least
 * 16 channels each side); EM_KERNEL_UNSUPPORTED for the others. */
int em_cpu_dnnl_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                       const void *bias, void *y);
int em_cpu_dnnl_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                  const void *w, void *gx);
int em_cpu_dnnl_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                   const void *x, void *gw, void *gbias);
int em_cpu_dnnl_conv2d_grads(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                             const void *x, const void *w, void *gx, void *gw, void *gbias);

#endif
