/* The rate of ember's large matrix products on this machine, f32 and int8: the ceiling that
 * `ember bench infer` sets beside a batch's products. A product of 1024 x 1024 x 1024 keeps the
 * multiply units busy with little else to do (packing, quantizing the input and the edges of
 * the tiles cost about 1% of it), so the products of a small batch, on any library, come out
 * at this rate or below. */
#include "bench/bench.h"

#define SIDE 1024
#define REPS 5

/* Median seconds of REPS forwards of m on x after a warm-up one; -1 when one fails. */
static double median_forward(em_module *m, const em_tensor *x)
{
    const bench_latency l = bench_measure_latency(m, x, 1, REPS); /* all 0 on a failure */
    return l.p50_us > 0 ? l.p50_us * 1e-6 : -1;
}

bench_product_rate bench_measure_product_rate(void)
{
    bench_product_rate rate = {-1, -1};
    const double ops = 2.0 * SIDE * SIDE * SIDE; /* 2 per multiply-add */
    bool grad = em_set_grad_enabled(false); /* the int8 layer made from the weight, no graph */
    em_generator gen = em_generator_new(1);
    em_tensor *x = em_randn(EM_SHAPE(SIDE, SIDE), EM_F32, &gen); // (SIDE, SIDE)
    em_module *f32 = em_linear_layer(SIDE, SIDE, false);
    em_module *int8 = f32 ? em_quantized_linear(em_module_find(f32, "weight"), NULL,
                                                EM_QUANT_PER_CHANNEL) : NULL;
    if (x && f32 && int8) {
        double t = median_forward(f32, x);
        rate.f32_gflops = t > 0 ? ops / t * 1e-9 : -1;
        t = median_forward(int8, x);
        rate.int8_gops = t > 0 ? ops / t * 1e-9 : -1;
    }
    em_module_free(int8);
    em_module_free(f32);
    em_release(x);
    em_set_grad_enabled(grad);
    return rate;
}
