/* The GEMM bound of a training step (`ember bench train`): the step's matrix products alone,
 * each run the faster of two ways at a given thread count: OpenBLAS's own threads, or em_matmul
 * (ember's CPU gemm: OpenBLAS on one thread per block, the blocks over OpenMP's threads, what
 * the step itself calls). */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <time.h>

#include "bench/bench.h"

/* The operands of the largest layer; inputs x and w stay as filled, so every rep multiplies
 * the same values. */
typedef struct {
    float *x;  /* (n, k): a layer's input (its im2col columns for a convolution) */
    float *w;  /* (rows, k) */
    float *y;  /* (n, rows): the output, and then its gradient */
    float *dw; /* (rows, k) */
    float *dx; /* (n, k) */
} operands;

/* One row-major product c (m, n) = op(a) @ op(b), ld* the row strides as stored; ea and eb
 * are a and b as tensors for em_matmul (transposed views where op transposes). */
typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldc;
    const float *a, *b;
    float *c;
    em_tensor *ea, *eb;
} product;

/* Layer l's products over the whole batch, n = batch x positions rows: the forward, the weight
 * gradient and, where computed, the input gradient, as ember's Linear and convolution run them;
 * returns how many (2 or 3). */
static int layer_products(const em_matmul_layer *l, int64_t batch, const operands *o,
                          product p[3])
{
    int n = (int)(batch * l->positions), k = (int)l->k, rows = (int)l->rows;
    p[0] = (product){false, true, n, rows, k, k, k, rows, o->x, o->w, o->y, NULL, NULL};
    p[1] = (product){true, false, rows, k, n, rows, k, k, o->y, o->x, o->dw, NULL, NULL};
    p[2] = (product){false, false, n, k, rows, rows, k, k, o->y, o->w, o->dx, NULL, NULL};
    return l->input_grad ? 3 : 2;
}

static void run_openblas(const product *p)
{
    cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans,
                p->tb ? CblasTrans : CblasNoTrans, p->m, p->n, p->k, 1.0f, p->a, p->lda, p->b,
                p->ldb, 0.0f, p->c, p->ldc);
}

/* A row-major (rows, cols) matrix at data as a tensor, transposed when t (a new view). */
static em_tensor *matrix(const float *data, int rows, int cols, bool t)
{
    em_tensor *m = em_from_data(EM_SHAPE(rows, cols), EM_F32, data);
    em_tensor *v = t && m ? em_transpose(m, 0, 1) : m;
    if (v != m)
        em_release(m);
    return v;
}

/* Makes p's operands tensors; false with an error when out of memory. */
static bool as_tensors(product *p)
{
    p->ea = matrix(p->a, p->ta ? p->k : p->m, p->ta ? p->m : p->k, p->ta);
    p->eb = matrix(p->b, p->tb ? p->n : p->k, p->tb ? p->k : p->n, p->tb);
    return p->ea && p->eb;
}

static void run_ember(const product *p)
{
    em_release(em_matmul(p->ea, p->eb));
}

/* Median seconds of reps runs of p after a warm-up one; times has reps entries. */
static double median_time(void (*run)(const product *), const product *p, double *times,
                          int reps)
{
    run(p);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        run(p);
        times[r] = bench_now_s() - t0;
    }
    bench_sort_doubles(times, reps);
    return times[reps / 2];
}

/* OpenBLAS's threads spin for a while after their last product: let them go to sleep, so they
 * do not take the cores from what runs next (and OpenMP's from OpenBLAS's before). */
static void let_threads_sleep(void)
{
    nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
}

/* Seconds of the step's products: through OpenBLAS's threads alone, and each the faster way. */
typedef struct {
    double openblas, best;
} step_times;

static step_times step_seconds(const em_matmul_layer *l, int n_layers, int64_t batch,
                               int threads, const operands *o, double *times, int reps)
{
    product p[3];
    let_threads_sleep();
    openblas_set_num_threads(threads);
    for (int i = 0; i < n_layers; i++) /* OpenBLAS's threads in one go, then ember's */
        for (int j = 0, n = layer_products(&l[i], batch, o, p); j < n; j++)
            times[reps + 3 * i + j] = median_time(run_openblas, &p[j], times, reps);
    openblas_set_num_threads(1);
    let_threads_sleep();
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    step_times sum = {0, 0};
    bool failed = false;
    for (int i = 0; i < n_layers; i++)
        for (int j = 0, n = layer_products(&l[i], batch, o, p); j < n; j++) {
            double t_openblas = times[reps + 3 * i + j];
            double t = as_tensors(&p[j]) ? median_time(run_ember, &p[j], times, reps) : -1;
            em_release(p[j].ea);
            em_release(p[j].eb);
            failed |= t < 0;
            sum.openblas += t_openblas;
            sum.best += t < t_openblas ? t : t_openblas;
        }
    omp_set_num_threads(saved);
    return failed ? (step_times){-1, -1} : sum;
}

/* count floats, all 1/1024 (the products stay normal numbers) */
static float *filled(int64_t count)
{
    float *p = malloc((size_t)count * sizeof *p);
    for (int64_t i = 0; p && i < count; i++)
        p[i] = 1.0f / 1024;
    return p;
}

bench_gemm_bound bench_gemm_bound_gflops(const em_matmul_layer *l, int n_layers, int64_t batch,
                                   int threads, int reps)
{
    int64_t big = 0; /* the largest operand */
    for (int i = 0; i < n_layers; i++) {
        int64_t n = batch * l[i].positions, sizes[3] = {n * l[i].k, l[i].rows * l[i].k,
                                                        n * l[i].rows};
        for (int s = 0; s < 3; s++)
            big = sizes[s] > big ? sizes[s] : big;
    }
    operands o = {filled(big), filled(big), filled(big), filled(big), filled(big)};
    /* reps times, then OpenBLAS's median of each product (3 per layer, 0 where not run) */
    double *times = calloc((size_t)(reps + 3 * n_layers), sizeof *times);
    bench_gemm_bound result = {-1, -1};
    if (o.x && o.w && o.y && o.dw && o.dx && times && reps > 0) {
        double gflop = em_matmul_train_flops(l, n_layers) * (double)batch * 1e-9;
        step_times t = step_seconds(l, n_layers, batch, threads, &o, times, reps);
        if (t.best > 0)
            result = (bench_gemm_bound){.best = gflop / t.best, .openblas = gflop / t.openblas};
    }
    free(times);
    free(o.x);
    free(o.w);
    free(o.y);
    free(o.dw);
    free(o.dx);
    return result;
}
