/* The typed body of the CPU 2-D pooling kernels, included by cpu_pool.c once per real type.
 * Expects REAL (float or double) and POOL_FN(name), which names a function for that type.
 * Every kernel runs over the N*C planes, spread over OpenMP threads. */

/* Outputs a window-inside plane handles per step, in SIMD lanes. */
#define POOL_CHUNK 64

/* best/tap of cnt outputs whose windows start s1 apart at base: each tap in turn (taps dilation
 * apart), branch-free in SIMD lanes, in row-major order so the first max wins. */
static void POOL_FN(max_chunk)(const em_pool2d_shape *s, const REAL *base, int64_t s1,
                               int64_t cnt, REAL *best, em_pool_tap *tap)
{
    for (int64_t c = 0; c < cnt; c++) {
        best[c] = base[c * s1];
        tap[c] = 0;
    }
    for (int64_t t = 1; t < s->kernel[0] * s->kernel[1]; t++) {
        const int64_t off = t / s->kernel[1] * s->dilation[0] * s->w
                            + t % s->kernel[1] * s->dilation[1];
        #pragma omp simd
        for (int64_t c = 0; c < cnt; c++) {
            const REAL v = base[off + c * s1];
            const bool take = (v > best[c]) | ((v != v) & (best[c] == best[c]));
            best[c] = take ? v : best[c];
            tap[c] = take ? (em_pool_tap)t : tap[c];
        }
    }
}

/* A plane whose windows all lie inside it (no padding reached), a chunk of a row at a time. */
static void POOL_FN(max_plane_inside)(const em_pool2d_shape *s, const REAL *x, REAL *y,
                                      em_pool_tap *argmax)
{
    const int64_t s0 = s->stride[0], s1 = s->stride[1];
    for (int64_t oh = 0; oh < s->h_out; oh++)
        for (int64_t ow0 = 0; ow0 < s->w_out; ow0 += POOL_CHUNK) {
            const int64_t cnt = s->w_out - ow0 < POOL_CHUNK ? s->w_out - ow0 : POOL_CHUNK;
            const REAL *base = x + oh * s0 * s->w + ow0 * s1; // window of output (oh, ow0)
            REAL best[POOL_CHUNK];
            em_pool_tap tap[POOL_CHUNK];
            POOL_FN(max_chunk)(s, base, s1, cnt, best, tap);
            memcpy(y + oh * s->w_out + ow0, best, (size_t)cnt * sizeof(REAL));
            if (argmax)
                memcpy(argmax + oh * s->w_out + ow0, tap, (size_t)cnt * sizeof(em_pool_tap));
        }
}

/* y and argmax of one plane; padding reads as -inf, the first maximum wins, NaN propagates. */
static void POOL_FN(max_plane)(const em_pool2d_shape *s, const REAL *x, REAL *y,
                               em_pool_tap *argmax)
{
    if (s->pad[0] == 0 && s->pad[1] == 0 && s->h_out > 0 && s->w_out > 0
        && (s->h_out - 1) * s->stride[0] + s->dilation[0] * (s->kernel[0] - 1) < s->h
        && (s->w_out - 1) * s->stride[1] + s->dilation[1] * (s->kernel[1] - 1) < s->w) {
        POOL_FN(max_plane_inside)(s, x, y, argmax);
        return;
    }
    for (int64_t oh = 0; oh < s->h_out; oh++)
        for (int64_t ow = 0; ow < s->w_out; ow++) {
            const int64_t h0 = oh * s->stride[0] - s->pad[0], w0 = ow * s->stride[1] - s->pad[1];
            REAL best = -INFINITY;
            int64_t tap = -1;
            for (int64_t i = 0; i < s->kernel[0]; i++)
                for (int64_t j = 0; j < s->kernel[1]; j++) {
                    const int64_t ih = h0 + i * s->dilation[0], iw = w0 + j * s->dilation[1];
                    if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w)
                        continue;
                    const REAL v = x[ih * s->w + iw];
                    if (tap < 0 || v > best || (isnan(v) && !isnan(best))) {
                        best = v;
                        tap = i * s->kernel[1] + j;
                    }
                }
            y[oh * s->w_out + ow] = best;
            if (argmax)
                argmax[oh * s->w_out + ow] = (em_pool_tap)tap;
        }
}

/* s->relu on one plane's maxima y, argmax (hwo): 0 for a negative maximum (NaN stays), argmax -1
 * (no gradient) unless it is positive. */
static void POOL_FN(relu_plane)(int64_t hwo, REAL *y, em_pool_tap *argmax)
{
    for (int64_t o = 0; o < hwo; o++) {
        if (argmax && !(y[o] > 0))
            argmax[o] = -1;
        y[o] = y[o] < 0 ? 0 : y[o];
    }
}

static void POOL_FN(max_pool)(const em_pool2d_shape *s, const REAL *x, REAL *y,
                              em_pool_tap *argmax)
{
    const int64_t hw = s->h * s->w, hwo = s->h_out * s->w_out;
    #pragma omp parallel for if (s->n * s->c * hwo * s->kernel[0] * s->kernel[1] \
                                 >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t p = 0; p < s->n * s->c; p++) {
        em_pool_tap *tap = argmax ? argmax + p * hwo : NULL;
        POOL_FN(max_plane)(s, x + p * hw, y + p * hwo, tap);
        if (s->relu)
            POOL_FN(relu_plane)(hwo, y + p * hwo, tap);
    }
}

/* gx: each output's gradient added at the input its tap points to, in output order. */
static void POOL_FN(max_pool_grad)(const em_pool2d_shape *s, const REAL *gy,
                                   const em_pool_tap *argmax, REAL *gx)
{
    const int64_t hw = s->h * s->w, hwo = s->h_out * s->w_out, k1 = s->kernel[1];
    #pragma omp parallel for if (s->n * s->c * (hw + hwo) >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t p = 0; p < s->n * s->c; p++) {
        REAL *g = gx + p * hw; // (H, W)
        memset(g, 0, (size_t)hw * sizeof(REAL));
        for (int64_t oh = 0; oh < s->h_out; oh++)
            for (int64_t ow = 0; ow < s->w_out; ow++) {
                const int64_t o = p * hwo + oh * s->w_out + ow, tap = argmax[o];
                const int64_t ih = oh * s->stride[0] - s->pad[0] + tap / k1 * s->dilation[0];
                const int64_t iw = ow * s->stride[1] - s->pad[1] + tap % k1 * s->dilation[1];
                if (tap >= 0 && ih >= 0 && ih < s->h && iw >= 0 && iw < s->w)
                    g[ih * s->w + iw] += gy[o];
            }
    }
}

/* The window of output (oh, ow) clipped to the plane, and the count it is averaged over. */
typedef struct {
    int64_t h0, h1, w0, w1;
    int64_t count;
} POOL_FN(window);

static POOL_FN(window) POOL_FN(avg_window)(const em_pool2d_shape *s, int64_t oh, int64_t ow)
{
    int64_t h0 = oh * s->stride[0] - s->pad[0], w0 = ow * s->stride[1] - s->pad[1];
    int64_t h1 = h0 + s->kernel[0], w1 = w0 + s->kernel[1];
    h1 = h1 < s->h + s->pad[0] ? h1 : s->h + s->pad[0];
    w1 = w1 < s->w + s->pad[1] ? w1 : s->w + s->pad[1];
    const int64_t padded = (h1 - h0) * (w1 - w0);
    POOL_FN(window) win = {h0 > 0 ? h0 : 0, h1 < s->h ? h1 : s->h, w0 > 0 ? w0 : 0,
                           w1 < s->w ? w1 : s->w, 0};
    win.count = s->count_include_pad ? padded : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
}

static void POOL_FN(avg_pool)(const em_pool2d_shape *s, const REAL *x, REAL *y)
{
    const int64_t hw = s->h * s->w, hwo = s->h_out * s->w_out;
    #pragma omp parallel for if (s->n * s->c * hwo * s->kernel[0] * s->kernel[1] \
                                 >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t p = 0; p < s->n * s->c; p++)
        for (int64_t oh = 0; oh < s->h_out; oh++)
            for (int64_t ow = 0; ow < s->w_out; ow++) {
                const POOL_FN(window) win = POOL_FN(avg_window)(s, oh, ow);
                REAL sum = 0;
                for (int64_t ih = win.h0; ih < win.h1; ih++)
                    for (int64_t iw = win.w0; iw < win.w1; iw++)
                        sum += x[p * hw + ih * s->w + iw];
                y[p * hwo + oh * s->w_out + ow] = win.count > 0 ? sum / (REAL)win.count : 0;
            }
}

static void POOL_FN(avg_pool_grad)(const em_pool2d_shape *s, const REAL *gy, REAL *gx)
{
    const int64_t hw = s->h * s->w, hwo = s->h_out * s->w_out;
    #pragma omp parallel for if (s->n * s->c * hwo * s->kernel[0] * s->kernel[1] \
                                 >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t p = 0; p < s->n * s->c; p++) {
        REAL *g = gx + p * hw; // (H, W)
        memset(g, 0, (size_t)hw * sizeof(REAL));
        for (int64_t oh = 0; oh < s->h_out; oh++)
            for (int64_t ow = 0; ow < s->w_out; ow++) {
                const POOL_FN(window) win = POOL_FN(avg_window)(s, oh, ow);
                if (win.count <= 0)
                    continue;
                const REAL share = gy[p * hwo + oh * s->w_out + ow] / (REAL)win.count;
                for (int64_t ih = win.h0; ih < win.h1; ih++)
                    for (int64_t iw = win.w0; iw < win.w1; iw++)
                        g[ih * s->w + iw] += share;
            }
    }
}
