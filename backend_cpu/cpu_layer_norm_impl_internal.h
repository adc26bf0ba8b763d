/* The typed body of the CPU layer norm kernels, included by cpu_layer_norm.c once per real type.
 * Expects REAL (float or double) and LN_FN(name). Rows are spread over OpenMP
 * threads; the weight and bias gradients are summed over fixed blocks of rows, then the blocks in
 * order, so the bits do not depend on the thread count. */

/* y = (x - mean) * rstd * w + b of one row; mean and rstd into st[0], st[1]. Sums in double. */
static void LN_FN(row)(int64_t cols, const REAL *x, const REAL *w, const REAL *b, double eps,
                       REAL *y, double *st)
{
    double sum = 0;
    #pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; j++)
        sum += x[j];
    const double mean = sum / (double)cols;
    double ss = 0;
    #pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < cols; j++) {
        const double d = x[j] - mean;
        ss += d * d;
    }
    const double rstd = 1.0 / sqrt(ss / (double)cols + eps);
    const REAL m = (REAL)mean, r = (REAL)rstd;
    #pragma omp simd
    for (int64_t j = 0; j < cols; j++) {
        const REAL h = (x[j] - m) * r;
        y[j] = (w ? h * w[j] : h) + (b ? b[j] : (REAL)0);
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

/* gx of one row: rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gy * w. */
static void LN_FN(row_grad)(int64_t cols, const REAL *x, const REAL *w, const double *st,
                            const REAL *gy, REAL *gx)
{
    const REAL m = (REAL)st[0], r = (REAL)st[1];
    double sg = 0, sgh = 0;
    #pragma omp simd reduction(+ : sg, sgh)
    for (int64_t j = 0; j < cols; j++) {
        const REAL g = w ? gy[j] * w[j] : gy[j];
        sg += g;
        sgh += (double)(g * ((x[j] - m) * r));
    }
    const REAL mg = (REAL)(sg / (double)cols), mgh = (REAL)(sgh / (double)cols);
    #pragma omp simd
    for (int64_t j = 0; j < cols; j++) {
        const REAL g = w ? gy[j] * w[j] : gy[j];
        gx[j] = r * (g - mg - ((x[j] - m) * r) * mgh);
    }
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
