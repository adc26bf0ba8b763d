/* oneDNN's engine, the cache of its primitives and running them on ember's threads: one CPU
 * engine for the process, a stream per thread, primitives kept by key in an LRU cache of
 * EM_DNNL_CACHE_CAPACITY, each run with the thread governor's team size. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_dnnl_internal.h"
#include "backend_cpu/cpu_features_internal.h"

/* Debian's oneDNN runs on GNU OpenMP, as ember does: one pool of threads serves both. A
 * primitive splits its work for the thread count it was created with (omp_get_max_threads()
 * then), so em_dnnl_run creates and runs each one with the calling thread's OpenMP count set
 * to the governor's team (em_cpu_threads) and puts that team in the key: a team that shrinks
 * under load runs primitives made for it, and the user's count is set back at once. */

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static pthread_key_t stream_key;

static void stream_free(void *s)
{
    dnnl_stream_destroy(s);
}

static void engine_init(void)
{
    if (em_cpu_isa_capped())
        dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        engine = NULL;
    pthread_key_create(&stream_key, stream_free);
}

/* The calling thread's stream, made on its first run; NULL when oneDNN cannot make one. */
static dnnl_stream_t thread_stream(void)
{
    pthread_once(&engine_once, engine_init);
    if (!engine)
        return NULL;
    dnnl_stream_t s = pthread_getspecific(stream_key);
    if (!s && dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success &&
        pthread_setspecific(stream_key, s) != 0) {
        dnnl_stream_destroy(s);
        s = NULL;
    }
    return s;
}

dnnl_data_type_t em_dnnl_dtype(em_dtype dt)
{
    switch (dt) {
    case EM_BF16: return dnnl_bf16;
    case EM_F32: return dnnl_f32;
    case EM_U8: return dnnl_u8;
    case EM_I8: return dnnl_s8;
    case EM_I32: return dnnl_s32;
    case EM_F16: case EM_F64: case EM_I64: case EM_BOOL: case EM_NDTYPES: break;
    }
    return dnnl_data_type_undef;
}

/* ---- the cache ---- */

/* A cached primitive. Shared by the threads that run it (oneDNN primitives may run on several
 * threads at once; each run brings its own scratchpad); one evicted while running is destroyed
 * by its last user. */
struct em_dnnl_prim {
    em_dnnl_key key;
    uint64_t hash;
    uint64_t last_use;
    dnnl_primitive_t prim;            /* NULL: oneDNN has no implementation for the key */
    const_dnnl_primitive_desc_t pd;   /* prim's own */
    size_t scratch_bytes;
    int users;
    bool evicted;
};
typedef em_dnnl_prim prim_entry;

static struct {
    pthread_mutex_t lock;
    prim_entry *slot[EM_DNNL_CACHE_CAPACITY];
    uint64_t clock;
    em_dnnl_cache_stats stats;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t key_hash(const em_dnnl_key *k)
{
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void entry_destroy(prim_entry *e)
{
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    free(e);
}

/* Under the lock: e taken out of the cache; destroyed now unless a run holds it. */
static void evict(int i)
{
    prim_entry *e = cache.slot[i];
    cache.slot[i] = NULL;
    cache.stats.held--;
    e->evicted = true;
    if (e->users == 0)
        entry_destroy(e);
}

/* Under the lock: a new entry for key in a free slot (the least recently used one evicted
 * when none is free); its primitive made by make. NULL when out of memory. */
static prim_entry *entry_make(const em_dnnl_key *key, uint64_t hash, em_dnnl_make_pd make)
{
    prim_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *key;
    e->hash = hash;
    dnnl_primitive_desc_t pd = NULL;
    if (make(key, engine, &pd) == dnnl_success && dnnl_primitive_create(&e->prim, pd) !=
                                                       dnnl_success)
        e->prim = NULL;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (e->prim && dnnl_primitive_get_primitive_desc(e->prim, &e->pd) == dnnl_success) {
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(e->pd,
                                                                    dnnl_query_scratchpad_md, 0);
        e->scratch_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
    } else if (e->prim) {
        dnnl_primitive_destroy(e->prim);
        e->prim = NULL;
    }
    int free_at = -1, oldest = 0;
    for (int i = 0; i < EM_DNNL_CACHE_CAPACITY; i++) {
        if (!cache.slot[i]) {
            free_at = i;
            break;
        }
        if (cache.slot[i]->last_use < cache.slot[oldest]->last_use)
            oldest = i;
    }
    if (free_at < 0) {
        evict(oldest);
        free_at = oldest;
    }
    cache.slot[free_at] = e;
    cache.stats.held++;
    cache.stats.created++;
    return e;
}

/* The entry of key, made when missing, with one more user; NULL when out of memory. */
static prim_entry *entry_take(const em_dnnl_key *key, em_dnnl_make_pd make)
{
    const uint64_t hash = key_hash(key);
    pthread_mutex_lock(&cache.lock);
    prim_entry *e = NULL;
    for (int i = 0; i < EM_DNNL_CACHE_CAPACITY && !e; i++)
        if (cache.slot[i] && cache.slot[i]->hash == hash &&
            !memcmp(&cache.slot[i]->key, key, sizeof *key))
            e = cache.slot[i];
    if (e)
        cache.stats.hits++;
    else
        e = entry_make(key, hash, make);
    if (e) {
        e->last_use = ++cache.clock;
        e->users++;
    }
    pthread_mutex_unlock(&cache.lock);
    return e;
}

static void entry_give(prim_entry *e)
{
    pthread_mutex_lock(&cache.lock);
    bool gone = --e->users == 0 && e->evicted;
    pthread_mutex_unlock(&cache.lock);
    if (gone)
        entry_destroy(e);
}

em_dnnl_cache_stats em_dnnl_cache_get_stats(void)
{
    pthread_mutex_lock(&cache.lock);
    em_dnnl_cache_stats s = cache.stats;
    pthread_mutex_unlock(&cache.lock);
    return s;
}

void em_dnnl_cache_clear(void)
{
    pthread_mutex_lock(&cache.lock);
    for (int i = 0; i < EM_DNNL_CACHE_CAPACITY; i++)
        if (cache.slot[i])
            evict(i);
    pthread_mutex_unlock(&cache.lock);
}

/* ---- running ---- */

bool em_dnnl_begin(em_dnnl_ctx *c)
{
    c->stream = thread_stream();
    if (!c->stream)
        return false;
    c->team = em_cpu_threads();
    c->count = omp_get_max_threads();
    if (c->team != c->count)
        omp_set_num_threads(c->team);
    return true;
}

void em_dnnl_end(const em_dnnl_ctx *c)
{
    if (c->team != c->count)
        omp_set_num_threads(c->count);
}

em_dnnl_prim *em_dnnl_get(const em_dnnl_ctx *c, em_dnnl_key *key, em_dnnl_make_pd make)
{
    key->threads = c->team;
    return entry_take(key, make);
}

void em_dnnl_put(em_dnnl_prim *e)
{
    if (e)
        entry_give(e);
}

bool em_dnnl_usable(const em_dnnl_prim *e)
{
    return e && e->prim;
}

const dnnl_memory_desc_t *em_dnnl_md(const em_dnnl_prim *e, int arg)
{
    return dnnl_primitive_desc_query_md(e->pd, dnnl_query_exec_arg_md, arg);
}

int em_dnnl_exec(const em_dnnl_ctx *c, const em_dnnl_prim *e, const em_dnnl_arg *args,
                 int n_args)
{
    dnnl_exec_arg_t exec[EM_DNNL_MAX_ARGS + 1];
    int n = 0, rc = n_args <= EM_DNNL_MAX_ARGS ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    void *scratch = e->scratch_bytes ? em_cpu_scratch(e->scratch_bytes) : NULL;
    if (e->scratch_bytes && !scratch)
        rc = EM_KERNEL_FAILED;
    for (int i = 0; i <= n_args && rc == EM_KERNEL_OK; i++) {
        const int arg = i < n_args ? args[i].arg : DNNL_ARG_SCRATCHPAD;
        const void *data = i < n_args ? args[i].data : scratch;
        if (i == n_args && !scratch)
            break;
        const dnnl_memory_desc_t *md = em_dnnl_md(e, arg);
        exec[n].arg = arg;
        if (!md || dnnl_memory_create(&exec[n].memory, md, engine, (void *)data) != dnnl_success)
            rc = EM_KERNEL_FAILED;
        else
            n++;
    }
    if (rc == EM_KERNEL_OK && (dnnl_primitive_execute(e->prim, c->stream, n, exec) !=
                                   dnnl_success ||
                               dnnl_stream_wait(c->stream) != dnnl_success))
        rc = EM_KERNEL_FAILED;
    for (int i = 0; i < n; i++)
        dnnl_memory_destroy(exec[i].memory);
    em_cpu_scratch_free(scratch);
    return rc;
}

int em_dnnl_run(em_dnnl_key *key, em_dnnl_make_pd make, const em_dnnl_arg *args, int n_args)
{
    em_dnnl_ctx c;
    if (!em_dnnl_begin(&c))
        return EM_KERNEL_FAILED;
    em_dnnl_prim *e = em_dnnl_get(&c, key, make);
    int rc = !e ? EM_KERNEL_FAILED : !e->prim ? EM_KERNEL_UNSUPPORTED
                                               : em_dnnl_exec(&c, e, args, n_args);
    em_dnnl_put(e);
    em_dnnl_end(&c);
    return rc;
}

bool em_dnnl_impl(em_dnnl_key *key, em_dnnl_make_pd make, char *buf, size_t n)
{
    em_dnnl_ctx c;
    if (!em_dnnl_begin(&c))
        return false;
    em_dnnl_prim *e = em_dnnl_get(&c, key, make);
    const char *impl = NULL;
    bool ok = em_dnnl_usable(e) &&
              dnnl_primitive_desc_query(e->pd, dnnl_query_impl_info_str, 0, &impl) ==
                  dnnl_success && impl;
    if (ok)
        snprintf(buf, n, "%s", impl);
    em_dnnl_put(e);
    em_dnnl_end(&c);
    return ok;
}

/* ---- which engine runs each kind of product ---- */

static em_cpu_engine engines[EM_CPU_PRODUCTS];
static pthread_once_t engines_once = PTHREAD_ONCE_INIT;

/* oneDNN's implementation of a 64 x 64 x 64 product of kind p, into buf; false where none. */
static bool probe(em_cpu_product p, char *buf, size_t n)
{
    em_dnnl_matmul_desc d = {.m = 64, .n = 64, .k = 64, .batch = 1, .lda = 64, .ldb = 64,
                             .ldc = 64, .alpha = 1};
    if (p == EM_CPU_PRODUCT_BF16) {
        d.a_dt = d.b_dt = EM_BF16;
        d.c_dt = EM_F32;
    } else {
        d.a_dt = EM_U8;
        d.b_dt = EM_I8;
        d.c_dt = EM_I32;
    }
    return em_dnnl_matmul_impl(&d, buf, n);
}

static void choose(em_cpu_product p, em_cpu_engine *e)
{
    static const struct {
        const char *dtype, *needs;
        bool (*amx)(void), (*avx512)(void);
        const char *amx_isa, *avx512_isa;
    } kinds[EM_CPU_PRODUCTS] = {
        [EM_CPU_PRODUCT_BF16] = {"bf16", "AMX-BF16 or AVX512_BF16", em_cpu_has_amx_bf16,
                                 em_cpu_has_avx512_bf16, "amx", "avx512_core_bf16"},
        [EM_CPU_PRODUCT_INT8] = {"int8", "AMX-INT8 or AVX-512 VNNI", em_cpu_has_amx_int8,
                                 em_cpu_has_avx512_vnni, "amx", "vnni"},
    };
    const char *dnnl_env = getenv("EMBER_DNNL");
    char impl[64] = "";
    if (dnnl_env && dnnl_env[0] == '0') {
        snprintf(e->isa, sizeof e->isa, "EMBER_DNNL=0");
    } else if (em_cpu_isa_capped()) {
        snprintf(e->isa, sizeof e->isa, "EMBER_CPU_ISA=avx2");
    } else if (!kinds[p].amx() && !kinds[p].avx512()) {
        snprintf(e->isa, sizeof e->isa, "no %s", kinds[p].needs);
    } else if (!probe(p, impl, sizeof impl)) {
        snprintf(e->isa, sizeof e->isa, "oneDNN has no %s product", kinds[p].dtype);
    } else if (strstr(impl, kinds[p].amx_isa) || strstr(impl, kinds[p].avx512_isa)) {
        const char *colon = strchr(impl, ':');
        e->dnnl = true;
        snprintf(e->isa, sizeof e->isa, "%s", colon ? colon + 1 : impl);
    } else {
        snprintf(e->isa, sizeof e->isa, "oneDNN chose %s", impl);
    }
}

static void choose_all(void)
{
    for (int p = 0; p < EM_CPU_PRODUCTS; p++)
        choose((em_cpu_product)p, &engines[p]);
}

const em_cpu_engine *em_cpu_engine_for(em_cpu_product p)
{
    pthread_once(&engines_once, choose_all);
    return &engines[p];
}

/* The tiles an int8 product below oneDNN's rows (or where oneDNN is not chosen) runs on. */
static const char *int8_tiles(void)
{
    return em_cpu_has_avx512_vnni() ? "AVX-512 VNNI" : em_cpu_has_avx2() ? "AVX2" : "portable";
}

void em_cpu_products_describe(char *buf, size_t n)
{
    const em_cpu_engine *bf16 = em_cpu_engine_for(EM_CPU_PRODUCT_BF16);
    const em_cpu_engine *int8 = em_cpu_engine_for(EM_CPU_PRODUCT_INT8);
    char blas[160], bf16_line[96], int8_line[128];
    em_cpu_blas_describe(blas, sizeof blas);
    if (bf16->dnnl)
        snprintf(bf16_line, sizeof bf16_line, "oneDNN %s", bf16->isa);
    else
        snprintf(bf16_line, sizeof bf16_line, "ember, widened to f32 (%s)", bf16->isa);
    if (int8->dnnl)
        snprintf(int8_line, sizeof int8_line, "oneDNN %s from 16 rows, ember's %s tiles below",
                 int8->isa, int8_tiles());
    else
        snprintf(int8_line, sizeof int8_line, "ember's %s tiles (%s)", int8_tiles(), int8->isa);
    snprintf(buf, n, "f32   ember: %s, %s tiles\nbf16  %s\nf16   ember, widened to f32\n"
             "int8  %s", blas, em_cpu_has_avx2() ? "AVX2" : "portable", bf16_line, int8_line);
}
