/* The typed body of the CPU layer norm kernels, included by cpu_layer_norm.c once per real type.
 * Expects REAL (float or double) and LN_FN(name). Rows are spread over OpenMP
 * threads; the weight and bias gradients are summed over fixed blocks of rows, then the blocks in
 * order, so the bits do not depend on the thread count. */

/* The LN_LANES partial sums added in a fixed order */
static inline double LN_FN(lanes_total)(const double *part)
{
    return ((part[0] + part[1]) + (part[2] + part[3])) +
           ((part[4] + part[5]) + (part[6] + part[7]));
}

/* The sum of a row's x - sub (squared when square) in double, as LN_LANES partial sums (column j
 * into sum j % LN_LANES) added in a fixed order: independent chains of additions, and the same
 * bits on every vector width. */
static inline double LN_FN(lane_sum)(int64_t cols, const REAL *x, double sub, bool square)
{
    double part[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= cols; j += LN_LANES) {
        #pragma omp simd
        for (int l = 0; l < LN_LANES; l++) {
            const double d = (double)x[j + l] - sub;
            part[l] += square ? d * d : d;
        }
    }
    for (; j < cols; j++) {
        const double d = (double)x[j] - sub;
        part[j % LN_LANES] += square ? d * d : d;
    }
    return LN_FN(lanes_total)(part);
}

/* y = (x - mean) * rstd * w + b of one row; mean and rstd into st[0], st[1]. Sums in double. */
EM_WIDEST_LANES_UNFUSED static void LN_FN(row)(int64_t cols, const REAL *x, const REAL *w,
                                               const REAL *b, double eps, REAL *y, double *st)
{
    EM_UNFUSED_BODY
    const double mean = LN_FN(lane_sum)(cols, x, 0.0, false) / (double)cols;
    const double ss = LN_FN(lane_sum)(cols, x, mean, true);
    const double rstd = 1.0 / sqrt(ss / (double)cols + eps);
    const REAL m = (REAL)mean, r = (REAL)rstd;
    #pragma omp simd
    for (int64_t j = 0; j < cols; j++)
        y[j] = (x[j] - m) * r;
    if (w) { /* in passes of their own: a test inside the loop above kept it scalar */
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            y[j] *= w[j];
    }
    if (b) {
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            y[j] += b[j];
    }
    st[0] = mean;
    st[1] = rstd;
}

static void LN_FN(forward)(int64_t rows, int64_t cols, const REAL *x, const REAL *w,
                           const REAL *b, double eps, REAL *y, double *stats)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        LN_FN(row)(cols, x + r * cols, w, b, eps, y + r * cols, stats + 2 * r);
}

/* gx of one row: rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gy * w; the two sums as
 * lane_sum's. Inlined once with w and once with NULL (a test of w inside its loops kept them
 * scalar). */
static inline __attribute__((always_inline)) void
LN_FN(row_grad_with)(int64_t cols, const REAL *x, const REAL *w, const double *st,
                     const REAL *gy, REAL *gx)
{
    const REAL m = (REAL)st[0], r = (REAL)st[1];
    double sg[LN_LANES] = {0}, sgh[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= cols; j += LN_LANES) {
        #pragma omp simd
        for (int l = 0; l < LN_LANES; l++) {
            const REAL g = w ? gy[j + l] * w[j + l] : gy[j + l];
            sg[l] += g;
            sgh[l] += (double)(g * ((x[j + l] - m) * r));
        }
    }
    for (; j < cols; j++) {
        const REAL g = w ? gy[j] * w[j] : gy[j];
        sg[j % LN_LANES] += g;
        sgh[j % LN_LANES] += (double)(g * ((x[j] - m) * r));
    }
    const REAL mg = (REAL)(LN_FN(lanes_total)(sg) / (double)cols);
    const REAL mgh = (REAL)(LN_FN(lanes_total)(sgh) / (double)cols);
    #pragma omp simd
    for (int64_t j = 0; j < cols; j++) {
        const REAL g = w ? gy[j] * w[j] : gy[j];
        gx[j] = r * (g - mg - ((x[j] - m) * r) * mgh);
    }
}

EM_WIDEST_LANES_UNFUSED static void LN_FN(row_grad)(int64_t cols, const REAL *x, const REAL *w,
                                                    const double *st, const REAL *gy, REAL *gx)
{
    EM_UNFUSED_BODY
    if (w)
        LN_FN(row_grad_with)(cols, x, w, st, gy, gx);
    else
        LN_FN(row_grad_with)(cols, x, NULL, st, gy, gx);
}

/* gw += gy * xhat and gb += gy over rows [r0, r1), into the block's own sums. */
static void LN_FN(block_param_grad)(int64_t r0, int64_t r1, int64_t cols, const REAL *x,
                                    const double *stats, const REAL *gy, REAL *gw, REAL *gb)
{
    for (int64_t j = 0; j < cols; j++)
        gw[j] = gb[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
        const REAL m = (REAL)stats[2 * r], rs = (REAL)stats[2 * r + 1];
        const REAL *xr = x + r * cols, *g = gy + r * cols;
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++) {
            gw[j] += g[j] * ((xr[j] - m) * rs);
            gb[j] += g[j];
        }
    }
}

/* The weight and bias gradients: fixed blocks of LN_BLOCK_ROWS rows in parallel, then the
 * blocks added in order. False when out of memory. */
static bool LN_FN(param_grad)(int64_t rows, int64_t cols, const REAL *x, const double *stats,
                              const REAL *gy, REAL *gw, REAL *gb)
{
    const int64_t blocks = (rows + LN_BLOCK_ROWS - 1) / LN_BLOCK_ROWS;
    REAL *part = em_cpu_scratch((size_t)(blocks > 0 ? blocks : 1) * 2 * cols * sizeof(REAL));
    if (!part)
        return false;
    #pragma omp parallel for if (blocks > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t k = 0; k < blocks; k++) {
        const int64_t r1 = (k + 1) * LN_BLOCK_ROWS < rows ? (k + 1) * LN_BLOCK_ROWS : rows;
        LN_FN(block_param_grad)(k * LN_BLOCK_ROWS, r1, cols, x, stats, gy,
                                part + 2 * k * cols, part + (2 * k + 1) * cols);
    }
    for (int64_t j = 0; j < cols; j++) {
        REAL sw = 0, sb = 0;
        for (int64_t k = 0; k < blocks; k++) {
            sw += part[2 * k * cols + j];
            sb += part[(2 * k + 1) * cols + j];
        }
        if (gw)
            gw[j] = sw;
        if (gb)
            gb[j] = sb;
    }
    em_cpu_scratch_free(part);
    return true;
}

static bool LN_FN(backward)(int64_t rows, int64_t cols, const REAL *x, const REAL *w,
                            const double *stats, const REAL *gy, REAL *gx, REAL *gw, REAL *gb)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        LN_FN(row_grad)(cols, x + r * cols, w, stats + 2 * r, gy + r * cols, gx + r * cols);
    return !gw && !gb ? true : LN_FN(param_grad)(rows, cols, x, stats, gy, gw, gb);
}
