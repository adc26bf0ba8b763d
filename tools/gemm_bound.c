/* The GEMM bound of a training step: OpenBLAS's sgemm running the step's matrix products alone,
 * as three large products per layer, at a given thread count (`ember bench train`). */
#include <cblas.h>
#include <stdlib.h>
#include <time.h>

#include "tools/tools_internal.h"

/* The operands of the largest layer; inputs x and w stay as filled, so every rep multiplies
 * the same values. */
typedef struct {
    float *x;  /* (n, k): a layer's input (its im2col columns for a convolution) */
    float *w;  /* (rows, k) */
    float *y;  /* (n, rows): the output, and then its gradient */
    float *dw; /* (rows, k) */
    float *dx; /* (n, k) */
} operands;

/* One rep: every layer's forward, weight-gradient and (where computed) input-gradient product
 * over the whole batch, n = batch x positions rows. */
static void step_products(const em_matmul_layer *l, int n_layers, int64_t batch,
                          const operands *o)
{
    for (int i = 0; i < n_layers; i++) {
        int n = (int)(batch * l[i].positions), k = (int)l[i].k, rows = (int)l[i].rows;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, k, 1.0f, o->x, k, o->w, k,
                    0.0f, o->y, rows);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, k, n, 1.0f, o->y, rows, o->x,
                    k, 0.0f, o->dw, k);
        if (l[i].input_grad)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, rows, 1.0f, o->y, rows,
                        o->w, k, 0.0f, o->dx, k);
    }
}

/* count floats, all 1/1024 (the products stay normal numbers) */
static float *filled(int64_t count)
{
    float *p = malloc((size_t)count * sizeof *p);
    for (int64_t i = 0; p && i < count; i++)
        p[i] = 1.0f / 1024;
    return p;
}

double em_gemm_bound_gflops(const em_matmul_layer *l, int n_layers, int64_t batch, int threads,
                            int reps)
{
    int64_t big = 0; /* the largest operand */
    for (int i = 0; i < n_layers; i++) {
        int64_t n = batch * l[i].positions, sizes[3] = {n * l[i].k, l[i].rows * l[i].k,
                                                        n * l[i].rows};
        for (int s = 0; s < 3; s++)
            big = sizes[s] > big ? sizes[s] : big;
    }
    operands o = {filled(big), filled(big), filled(big), filled(big), filled(big)};
    double *times = malloc((size_t)reps * sizeof *times), result = -1;
    if (o.x && o.w && o.y && o.dw && o.dx && times && reps > 0) {
        /* let OpenMP's workers stop spinning first, or OpenBLAS's threads would share cores */
        nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
        openblas_set_num_threads(threads);
        step_products(l, n_layers, batch, &o); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double t0 = em_now_s();
            step_products(l, n_layers, batch, &o);
            times[r] = em_now_s() - t0;
        }
        openblas_set_num_threads(1);
        em_sort_doubles(times, reps);
        result = em_matmul_train_flops(l, n_layers) * (double)batch / times[reps / 2] * 1e-9;
    }
    free(times);
    free(o.x);
    free(o.w);
    free(o.y);
    free(o.dw);
    free(o.dx);
    return result;
}
