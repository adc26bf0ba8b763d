/* `ember bench attention`: peak bytes and time of one causal attention forward + backward, the
 * fused op next to the composition softmax(q k^T * scale + mask) v, at growing lengths. */
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "cmd/args.h"
#include "bench/bench.h"

#define MAX_REPS 9

typedef struct {
    int64_t batch, heads, dim;
} attention_size;

static em_tensor *composed(const em_tensor *q, const em_tensor *k, const em_tensor *v)
{
    int64_t t = q->shape[2];
    em_tensor *s = em_mul_scalar(em_matmul(q, em_transpose(k, -2, -1)),
                                 1.0 / sqrt((double)q->shape[3])); // (B, H, T, T)
    em_tensor *i = em_reshape(em_arange(0, (double)t, 1, EM_F32), EM_SHAPE(t, 1));
    em_tensor *j = em_arange(0, (double)t, 1, EM_F32);
    s = em_where(em_le(j, i), s, em_scalar(-INFINITY, EM_F32));
    return em_matmul(em_softmax(s, -1), v);
}

/* One forward + backward at length t: seconds, and bytes allocated above what was live before
 * (inputs and their grads excluded); negative seconds on failure. */
static double step(bool fused, const attention_size *a, int64_t t, size_t *peak)
{
    em_scope_begin();
    em_shape s = EM_SHAPE(a->batch, a->heads, t, a->dim);
    em_tensor *x[3], *w = em_randn(s, EM_F32, NULL);
    for (int i = 0; i < 3; i++)
        x[i] = em_requires_grad_(em_randn(s, EM_F32, NULL), true);
    size_t before = em_memory_get_stats(EM_CPU).live_bytes;
    em_memory_reset_peak(EM_CPU);
    double t0 = bench_now_s();
    em_tensor *y = fused ? em_scaled_dot_product_attention(x[0], x[1], x[2],
                                                            (em_sdpa_opts){.is_causal = true})
                         : composed(x[0], x[1], x[2]);
    bool ok = y && em_backward_grad(y, w) == EM_OK;
    double secs = bench_now_s() - t0;
    *peak = em_memory_get_stats(EM_CPU).peak_bytes - before;
    em_scope_end();
    if (!ok) {
        fprintf(stderr, "ember bench attention: %s\n", em_error());
        return -1;
    }
    return secs;
}

/* Median seconds over reps after one warm-up; the peak bytes of the last. */
static double median_step(bool fused, const attention_size *a, int64_t t, int reps, size_t *peak)
{
    double times[MAX_REPS];
    if (step(fused, a, t, peak) < 0)
        return -1;
    for (int r = 0; r < reps; r++)
        if ((times[r] = step(fused, a, t, peak)) < 0)
            return -1;
    bench_sort_doubles(times, reps);
    return times[reps / 2];
}

int bench_attention(int argc, char **argv)
{
    attention_size a = {.batch = 4, .heads = 6, .dim = 64};
    int threads = 2, reps = 3;
    const cmd_opt opts[] = {
        {"batch", CMD_OPT_INT64, &a.batch, "B", "sequences (default 4)", .range = CMD_AT_LEAST(1)},
        {"heads", CMD_OPT_INT64, &a.heads, "H", "heads (default 6)", .range = CMD_AT_LEAST(1)},
        {"dim", CMD_OPT_INT64, &a.dim, "D", "head size (default 64)", .range = CMD_RANGE(1, 4096)},
        {"threads", CMD_OPT_INT, &threads, "N", "OpenMP threads (default 2)",
         .range = CMD_RANGE(1, 4096)},
        {"reps", CMD_OPT_INT, &reps, "N", "timed repetitions (default 3)",
         .range = CMD_RANGE(1, MAX_REPS)},
        {0}};
    const cmd_spec spec = {
        .command = "ember bench attention",
        .about = "Peak bytes and time of one causal attention forward + backward at T = 256, 512 "
                 "and 1024:\nthe fused op next to the composition softmax(q k^T / sqrt(D)) v.",
        .opts = opts};
    int parsed = cmd_args_parse(&spec, argc, argv);
    if (parsed != CMD_ARGS_RUN)
        return parsed;
    omp_set_num_threads(threads);
    printf("ember bench attention: causal, f32, B %lld H %lld D %lld, %d threads; forward + "
           "backward, median of %d\n", (long long)a.batch, (long long)a.heads,
           (long long)a.dim, threads, reps);
    printf("%6s %14s %14s %8s %11s %11s %8s\n", "T", "fused bytes", "composed bytes", "ratio",
           "fused ms", "composed ms", "speedup");
    for (int64_t t = 256; t <= 1024; t *= 2) {
        size_t pf = 0, pc = 0;
        double tf = median_step(true, &a, t, reps, &pf);
        double tc = median_step(false, &a, t, reps, &pc);
        if (tf < 0 || tc < 0)
            return 1;
        printf("%6lld %14zu %14zu %7.1fx %11.2f %11.2f %7.2fx\n", (long long)t, pf, pc,
               (double)pc / (double)pf, 1e3 * tf, 1e3 * tc, tc / tf);
    }
    return 0;
}
